"""MTurk approves and pays whatever is still undecided `auto_approval_delay_seconds` after it was
submitted (3 days by default), and the review decides nothing before
`review.approve_after_seconds` (it neither holds nor rejects sooner). A wait as long as the delay
left every submission to MTurk's approval, which the sync mirrors: gold-failing work paid,
counted in the data and no longer rejectable. One rule
(`annotation/domain/stage_settings.py:review_window_problem`, through `stage_settings_errors`
with the stage's provider) at every door that sets a stage's settings — the API's create and
PATCH, the stage form (a draft, and a live stage's review rules, which stay editable) — and at
publishing, for settings saved through the shell.

Before: an MTurk trial with `"review": {"approve_after_seconds": 300000}` (a bit more than
three days, "time for my spot checks") saved at every door and published; MTurk approved every
submission before the review's first decision."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.domain.stage_settings import (
    MTURK_AUTO_APPROVAL_DELAY_SECONDS,
    review_window_problem,
)
from annotation.models import Provider, ProviderCall, Stage, StageKind, StageStatus, TaskKind
from annotation.services.stages import stage_publish
from annotation.stage_errors import GuardFailed
from testing.factories import make_hit, make_item, make_project, make_stage, make_user
from tests.support.admin_forms import admin_form_as_posted

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

THREE_DAYS = MTURK_AUTO_APPROVAL_DELAY_SECONDS


@pytest.fixture
def owner():
    return make_user("window-owner", superuser=True)


@pytest.fixture
def api(owner):
    client = APIClient()
    client.force_authenticate(owner)
    return client


@pytest.fixture
def trial(owner):
    """A collecting MTurk trial (its HIT type created with the default 3-day auto-approval)."""
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2,
                           reward_per_hit=Decimal("0.40"))
    items = [make_item(project, group_key="p0") for _ in range(2)]
    stage = make_stage(project, kind=StageKind.TRIAL, name="trial", provider=Provider.MTURK,
                       status=StageStatus.COLLECTING, judgments_per_item=3,
                       settings={"n_items": 2, "mturk_hit_type_id": "HT1",
                                 "review": {"approve_after_seconds": 3600}})
    stage.items.set(items)
    make_hit(stage, items=items, max_assignments=3, reward=Decimal("0.40"))
    return stage


@pytest.mark.parametrize("settings,provider,refused", [
    ({"review": {"approve_after_seconds": THREE_DAYS}}, Provider.MTURK, True),
    ({"review": {"approve_after_seconds": THREE_DAYS - 1}}, Provider.MTURK, False),
    ({"review": {"approve_after_seconds": 10**6},
      "auto_approval_delay_seconds": 2592000}, Provider.MTURK, False),
    ({"review": {"approve_after_seconds": 60}, "auto_approval_delay_seconds": 60},
     Provider.MTURK, True),
    ({"review": {"approve_after_seconds": 0}, "auto_approval_delay_seconds": 0},
     Provider.MTURK, False),  # no wait: the review decides at its first run
    ({"review": {"approve_after_seconds": 10**6}}, Provider.PROLIFIC, False),
    ({"review": {"approve_after_seconds": 10**6}}, Provider.INHOUSE, False),
    ({"review": {"approve_after_seconds": "soon"}}, Provider.MTURK, False),  # the field's own
])
def test_the_rule(settings, provider, refused):
    assert bool(review_window_problem(settings, provider=provider)) is refused


def test_the_api_refuses_a_wait_mturk_approval_overtakes_on_create_and_on_a_live_stage(
        api, trial):
    url = f"/api/projects/{trial.project.slug}/stages/"
    created = api.post(url, {"name": "full", "kind": "full", "provider": "mturk",
                             "settings": {"review": {"approve_after_seconds": 300000}}},
                       format="json")
    assert created.status_code == 400
    assert "auto_approval_delay_seconds" in " ".join(created.json()["settings"])
    assert not Stage.objects.filter(project=trial.project, name="full").exists()
    # The same wait under a longer auto-approval delay, or on Prolific, is fine.
    assert api.post(url, {"name": "full", "kind": "full", "provider": "mturk",
                          "settings": {"review": {"approve_after_seconds": 300000},
                                       "auto_approval_delay_seconds": 600000}},
                    format="json").status_code == 201
    assert api.post(url, {"name": "pilot", "kind": "pilot", "provider": "prolific",
                          "settings": {"review": {"approve_after_seconds": 300000}}},
                    format="json").status_code == 201
    # A live stage's review rules stay editable, within the window its HIT type was made with.
    live = f"{url}{trial.pk}/"
    refused = api.patch(live, {"settings": {"n_items": 2, "review": {
        "approve_after_seconds": THREE_DAYS}}}, format="json")
    assert refused.status_code == 400, refused.json()
    assert Stage.objects.get(pk=trial.pk).settings["review"] == {"approve_after_seconds": 3600}
    assert api.patch(live, {"settings": {"n_items": 2, "review": {
        "approve_after_seconds": 7200}}}, format="json").status_code == 200


def test_the_stage_form_refuses_it_on_a_live_stage(client, owner, trial):
    client.force_login(owner)
    url = reverse("admin:annotation_stage_change", args=[trial.pk])
    page = client.get(url)
    refused = client.post(url, admin_form_as_posted(
        page, setting__review__approve_after_seconds=str(THREE_DAYS + 1)))
    assert refused.status_code == 200
    form = refused.context["adminform"].form
    assert "auto_approval_delay_seconds" in str(form.errors), form.errors
    assert Stage.objects.get(pk=trial.pk).settings["review"] == {"approve_after_seconds": 3600}
    saved = client.post(url, admin_form_as_posted(
        page, setting__review__approve_after_seconds="7200"))
    assert saved.status_code == 302
    assert Stage.objects.get(pk=trial.pk).settings["review"] == {"approve_after_seconds": 7200}


def test_publishing_refuses_it_for_settings_saved_past_the_doors(owner):
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2,
                           reward_per_hit=Decimal("0.40"))
    for _ in range(2):
        make_item(project, group_key="p0")
    stage = make_stage(project, kind=StageKind.TRIAL, name="trial", provider=Provider.MTURK,
                       status=StageStatus.DRAFT,
                       settings={"n_items": 2, "locales": [],
                                 "review": {"approve_after_seconds": 10**6}})
    with pytest.raises(GuardFailed, match="auto_approval_delay_seconds"):
        stage_publish(stage=stage, user=owner)
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.hits.exists()
    assert "approve_after_seconds" in stage.publish_problem
    assert not ProviderCall.objects.filter(stage=stage).exists()
