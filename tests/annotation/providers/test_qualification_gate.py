"""A trial or full stage of a project with a qualification stage requires it, or says on purpose
that it is open to every worker (the stage setting `open_to_every_worker`): a researcher who ran
a paid qualification and forgot to pick it on the full stage would otherwise pay unqualified
workers for a whole collection. Refused at every door that publishes (the service, the admin's
Publish, its background publish and the Celery task, the real-money confirmation page) with the
qualification named and both ways out, and shown on the cockpit and the stage page while the
stage is a draft; the gated stage and the opt-out publish; stages published already are not
judged again (`annotation/selectors.py:stage_open_gate_problem`)."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.cockpit_selectors import study_cockpit
from annotation.models import Provider, StageKind, StageStatus, TaskKind
from annotation.services.stages import stage_publish
from annotation.stage_errors import GuardFailed
from testing.factories import make_item, make_project, make_stage, make_user
from tests.support.providers import stage_admin_action

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

OPEN = "open_to_every_worker"


def _project(provider: str = Provider.INHOUSE, *, qualification: str | None = StageStatus.DRAFT,
             qualification_provider: str | None = None, owner=None):
    """A Likert project of 6 items with (unless `qualification` is None) a qualification stage
    of that status, and a draft in-house (or `provider`) full stage requiring nothing."""
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2,
                           redundancy={"default": 1}, reward_per_hit=Decimal("0.40"),
                           gold_rate=0.0)
    for n in range(6):
        make_item(project, group_key=f"p{n}")
    qual = None
    if qualification is not None:
        qual = make_stage(project, kind=StageKind.QUALIFICATION, name="screening",
                          status=qualification, provider=qualification_provider or provider,
                          order=1)
    full = make_stage(project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT,
                      provider=provider, order=3, settings={"locales": []})
    return project, qual, full


def _refused_as_a_draft(stage) -> None:
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT
    assert not stage.hits.exists()
    assert "requires no qualification" in stage.publish_problem


@pytest.mark.parametrize("kind", [StageKind.TRIAL, StageKind.FULL])
@pytest.mark.parametrize("status", [StageStatus.DRAFT, StageStatus.CLOSED])
def test_an_ungated_trial_or_full_stage_is_refused_naming_the_qualification_and_both_ways_out(
        kind, status):
    _project_, _qual, stage = _project(qualification=status)
    stage.kind = kind
    stage.save(update_fields=["kind"])
    with pytest.raises(GuardFailed) as refused:
        stage_publish(stage=stage, actor="test")
    message = str(refused.value)
    assert "screening" in message and "requires no qualification" in message
    assert "Set “Requires stage” to screening" in message
    assert "open_to_every_worker" in message and "Open to every worker" in message
    _refused_as_a_draft(stage)
    assert not stage.transitions.exists()


def test_the_gated_stage_publishes():
    _project_, qual, full = _project(qualification=StageStatus.COLLECTING)
    full.requires_stage = qual
    full.save(update_fields=["requires_stage"])
    result = stage_publish(stage=full, actor="test")
    assert result.stage.status == StageStatus.COLLECTING and not result.stage.publish_problem


def test_the_opt_out_publishes_the_stage_open_to_every_worker():
    _project_, _qual, full = _project()
    full.settings = {**full.settings, OPEN: True}
    full.save(update_fields=["settings"])
    result = stage_publish(stage=full, actor="test")
    assert result.stage.status == StageStatus.COLLECTING and not result.stage.publish_problem


def test_a_stage_both_gated_and_open_says_two_things_and_is_refused():
    _project_, qual, full = _project(qualification=StageStatus.COLLECTING)
    full.requires_stage = qual
    full.settings = {**full.settings, OPEN: True}
    full.save(update_fields=["requires_stage", "settings"])
    with pytest.raises(GuardFailed, match="choose one"):
        stage_publish(stage=full, actor="test")
    full.refresh_from_db()
    assert full.status == StageStatus.DRAFT and not full.hits.exists()


def test_no_gate_without_a_qualification_nor_for_an_imported_one_nor_for_a_pilot():
    _project_, _none, full = _project(qualification=None)
    assert stage_publish(stage=full, actor="test").stage.status == StageStatus.COLLECTING
    # An imported qualification holds answers collected elsewhere: it grades nobody here.
    _project1, _imported, full = _project(qualification=StageStatus.CLOSED,
                                          qualification_provider=Provider.IMPORT)
    assert stage_publish(stage=full, actor="test").stage.status == StageStatus.COLLECTING
    # A pilot tries the task out, before anyone is qualified: not gated.
    _project2, _qual, pilot = _project()
    pilot.kind = StageKind.PILOT
    pilot.save(update_fields=["kind"])
    assert stage_publish(stage=pilot, actor="test").stage.status == StageStatus.COLLECTING


def test_a_qualification_on_another_provider_leaves_only_the_opt_out(mturk_server):
    _project_, _qual, full = _project(Provider.MTURK, qualification=StageStatus.CLOSED,
                                      qualification_provider=Provider.INHOUSE)
    with pytest.raises(GuardFailed) as refused:
        stage_publish(stage=full, actor="test")
    message = str(refused.value)
    assert f"None of them is on {full.get_provider_display()}" in message and "open_to_every_worker" in message
    assert "Set “Requires stage”" not in message
    _refused_as_a_draft(full)
    assert not mturk_server.state.hits


def test_a_stage_published_already_is_not_judged_again():
    """Published before the rule, HITs not all created: publishing again resumes it."""
    _project_, _qual, full = _project()
    full.status = StageStatus.PUBLISHED
    full.save(update_fields=["status"])
    result = stage_publish(stage=full, actor="test")
    assert result.stage.status == StageStatus.COLLECTING


def test_the_admin_publish_refuses_it(client):
    _project_, _qual, full = _project()
    shown = stage_admin_action(client, full, "publish_stages")
    assert any("not published —" in m and "requires no qualification" in m
               and "screening" in m for m in shown), shown
    _refused_as_a_draft(full)


def test_the_background_publish_refuses_it_before_queueing_and_the_task_refuses_it(
        client, celery_app):
    from worker.tasks.providers import stage_publish as publish_task

    _project_, _qual, full = _project()
    celery_app.conf.task_always_eager = True  # a queued task would publish here at once
    shown = stage_admin_action(client, full, "publish_stages_background")
    assert any("not queued —" in m and "requires no qualification" in m for m in shown), shown
    assert not any(m.startswith("Queued") for m in shown)
    _refused_as_a_draft(full)
    # Queued before the stage changed (or by any other caller): the task checks it too.
    with pytest.raises(GuardFailed, match="requires no qualification"):
        publish_task(full.pk)
    _refused_as_a_draft(full)


def test_the_real_money_confirmation_page_refuses_it_without_asking(client, monkeypatch,
                                                                      mturk_server):
    from annotation.providers import mturk, mturk_protocol

    monkeypatch.setattr(mturk_protocol, "mturk_is_production", lambda: True)
    monkeypatch.setattr(mturk, "mturk_is_production", lambda: True)
    _project_, _qual, full = _project(Provider.MTURK)
    shown = stage_admin_action(client, full, "publish_stages")
    assert any("not published —" in m and "requires no qualification" in m for m in shown), shown
    _refused_as_a_draft(full)
    assert not mturk_server.state.hits


def test_the_cockpit_and_the_stage_page_say_it_before_publishing(client):
    project, _qual, full = _project()
    row = {r.stage.name: r for r in study_cockpit(project=project).stages}["full"]
    assert "requires no qualification" in row.problem and "screening" in row.problem
    client.force_login(make_user(superuser=True))
    page = client.get(reverse("admin:annotation_stage_change", args=[full.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "Publishing will be refused" in text and "Open to every worker" in text
    full.settings = {**full.settings, OPEN: True}
    full.save(update_fields=["settings"])
    row = {r.stage.name: r for r in study_cockpit(project=project).stages}["full"]
    assert "requires no qualification" not in row.problem


def test_the_api_takes_the_opt_out_as_a_checked_setting():
    owner = make_user("gate-owner")
    api = APIClient()
    api.force_authenticate(owner)
    project, _qual, full = _project(owner=owner)
    url = f"/api/projects/{project.slug}/stages/{full.pk}/"
    refused = api.patch(url, {"settings": {"locales": [], OPEN: "yes"}}, format="json")
    assert refused.status_code == 400 and OPEN in str(refused.json()), refused.json()
    taken = api.patch(url, {"settings": {"locales": [], OPEN: True}}, format="json")
    assert taken.status_code == 200, taken.json()
    full.refresh_from_db()
    assert full.settings[OPEN] is True
    assert stage_publish(stage=full, actor="test").stage.status == StageStatus.COLLECTING
