"""An edit of a stage that arrives while the stage is being published waits for the publish
and is then judged as an edit of a live stage: it never slips in between publishing's checks
and the HITs those checks approved (`annotation.services.stages.stage_row_lock`, taken by
`_publish_draft` and `stage_update`). Two publishes at once build the HITs once."""
from __future__ import annotations

import re
import threading
import time

import pytest
from django.db import connections

from annotation.models import Hit, Provider, Stage, StageKind, StageStatus, TaskKind
from annotation.services import stages as stage_services
from annotation.services.stages import (
    PublishRaced,
    StageEditRefused,
    stage_publish,
    stage_update,
)
from testing.factories import make_item, make_project, make_stage, make_user
from tests.support.paths import require_shared_database

pytestmark = [pytest.mark.reliability, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _shared_database():
    require_shared_database()


@pytest.fixture
def draft():
    owner = make_user("race-owner", superuser=True)
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2)
    items = [make_item(project) for _ in range(4)]
    stage = make_stage(project, kind=StageKind.FULL, name="full", provider=Provider.INHOUSE,
                       status=StageStatus.DRAFT, judgments_per_item=3)
    stage.items.set(items)
    return owner, stage


def _slow_checks(monkeypatch, started: threading.Event):
    """Publishing's last check (the provider's readiness) takes a second, so another request
    arrives while the publish holds what it checked."""
    ready = stage_services._provider_ready

    def slow(**kwargs):
        started.set()
        time.sleep(1.0)
        return ready(**kwargs)

    monkeypatch.setattr(stage_services, "_provider_ready", slow)


def _in_thread(fn, results: list, name: str) -> threading.Thread:
    def run():
        try:
            results.append((name, "ok", fn()))
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test reads
            results.append((name, type(exc).__name__, str(exc)))
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _during_publishing(stage: Stage, owner, monkeypatch, edit) -> dict:
    """Publish `stage` in one thread and, once it runs its checks, call `edit` in another:
    {"publish" / "edit": (outcome, detail)}, the outcome "ok" (detail: what it returned) or
    the name of the exception raised (detail: its message)."""
    started, results = threading.Event(), []
    _slow_checks(monkeypatch, started)
    publish = _in_thread(lambda: stage_publish(stage=Stage.objects.get(pk=stage.pk),
                                               user=owner, check_balance=False),
                         results, "publish")
    assert started.wait(10)
    editing = _in_thread(edit, results, "edit")
    publish.join(30)
    editing.join(30)
    return {name: (status, detail) for name, status, detail in results}


def test_an_edit_during_publishing_waits_and_is_refused_as_a_live_edit(draft, monkeypatch):
    owner, stage = draft
    outcome = _during_publishing(stage, owner, monkeypatch,
                                 lambda: stage_update(stage=Stage.objects.get(pk=stage.pk),
                                                      data={"judgments_per_item": 10}))
    assert outcome["publish"][0] == "ok", outcome
    assert outcome["edit"][0] == StageEditRefused.__name__, outcome
    assert "judgments_per_item" in outcome["edit"][1]
    stage.refresh_from_db()
    assert stage.status != StageStatus.DRAFT and stage.judgments_per_item == 3
    assert set(Hit.objects.filter(stage=stage).values_list("max_assignments", flat=True)) == {3}


def test_two_publishes_at_once_build_the_hits_once(draft, monkeypatch):
    owner, stage = draft
    started, results = threading.Event(), []
    _slow_checks(monkeypatch, started)
    first = _in_thread(lambda: stage_publish(stage=Stage.objects.get(pk=stage.pk), user=owner,
                                             check_balance=False), results, "first")
    assert started.wait(10)
    second = _in_thread(lambda: stage_publish(stage=Stage.objects.get(pk=stage.pk), user=owner,
                                              check_balance=False), results, "second")
    first.join(30)
    second.join(30)
    outcome = {name: status for name, status, _ in results}
    assert outcome == {"first": "ok", "second": PublishRaced.__name__}, results
    stage.refresh_from_db()
    assert Hit.objects.filter(stage=stage).count() == 2  # 4 items, 2 per HIT: built once
    assert stage.publish_problem == ""


# --- the same rule at the other doors: the stage form, the project API and the project form ----


def _admin_client(owner):
    from django.test import Client

    client = Client()
    client.force_login(owner)
    return client


def test_a_stage_form_saved_during_publishing_is_refused_as_a_live_edit(draft, monkeypatch):
    """The stage form opened on the draft and saved while it is being published: it read the
    stage as a draft and wrote judgments per item 10 over the HITs of 3 once the publish let
    go of the row. It waits now, as the API's PATCH does, and is judged as a live edit."""
    from django.urls import reverse

    from tests.support.admin_forms import admin_form_as_posted

    owner, stage = draft
    url = reverse("admin:annotation_stage_change", args=[stage.pk])
    posted = admin_form_as_posted(_admin_client(owner).get(url), judgments_per_item="10")
    outcome = _during_publishing(stage, owner, monkeypatch,
                                 lambda: _admin_client(owner).post(url, posted))
    assert outcome["publish"][0] == "ok", outcome
    response = outcome["edit"][1]
    assert response.status_code == 200, response  # the form again, with its error
    # Refused as the edit of a live stage (published, or collecting once its HITs exist).
    assert re.search("the stage is (published|collecting)",
                     str(response.context["adminform"].form.errors))
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING and stage.judgments_per_item == 3


@pytest.mark.parametrize("door", ["api", "admin"])
def test_a_project_setting_changed_during_publishing_is_refused_once_the_stage_is_live(
        draft, monkeypatch, door):
    """The project's reward, which the stage takes, changed while the stage is being
    published: the edit found no live stage (the publish had not committed), and the HITs of
    $0.40 went live beside a project reward of $5. The edit waits for the publish (the
    project's budget lock, which publishing holds) and is refused at both doors."""
    from decimal import Decimal

    from django.urls import reverse
    from rest_framework.test import APIClient

    from tests.support.admin_forms import admin_form_as_posted

    owner, stage = draft
    project = stage.project
    project.reward_per_hit = Decimal("0.40")
    project.save(update_fields=["reward_per_hit"])
    if door == "api":
        def edit():
            client = APIClient()
            client.force_authenticate(owner)
            return client.patch(f"/api/projects/{project.slug}/", {"reward_per_hit": "5.00"},
                                format="json")
    else:
        url = reverse("admin:annotation_project_change", args=[project.pk])
        posted = admin_form_as_posted(_admin_client(owner).get(url), reward_per_hit="5.00")

        def edit():
            return _admin_client(owner).post(url, posted)
    outcome = _during_publishing(stage, owner, monkeypatch, edit)
    assert outcome["publish"][0] == "ok", outcome
    response = outcome["edit"][1]
    if door == "api":
        assert response.status_code == 400, response.content
        assert re.search("'full' is (published|collecting)", response.json()["reward_per_hit"][0])
    else:
        assert response.status_code == 200, response
        assert re.search("full&#x27; is (published|collecting)",
                         str(response.context["adminform"].form.errors))
    project.refresh_from_db()
    assert project.reward_per_hit == Decimal("0.40")


def test_an_item_choice_sent_during_publishing_is_refused_as_a_live_stages(draft, monkeypatch):
    """The API's PATCH of `items` on the stage it loaded as a draft, arriving while the stage
    is being published: the rule read the status of the stage as loaded (draft), so the
    published stage's list went from its 4 items to 1 beside HITs built with 4. It reads the
    status under the row lock now."""
    from annotation.stage_errors import StageError

    owner, stage = draft
    loaded = Stage.objects.get(pk=stage.pk)  # the request's copy, read before the publish
    outcome = _during_publishing(stage, owner, monkeypatch,
                                 lambda: stage_update(stage=loaded, data={"items": {"count": 1}}))
    assert outcome["publish"][0] == "ok", outcome
    assert outcome["edit"][0] == StageError.__name__, outcome
    assert "its items are fixed once it is published" in outcome["edit"][1]
    assert stage.items.count() == 4
