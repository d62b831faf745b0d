"""Stages on a provider for tests: a study's qualification → trial → full stages, a Prolific
draft, and the admin's stage actions."""
from __future__ import annotations

from decimal import Decimal

from django.urls import reverse

from annotation.models import ProviderCall, StageKind, StageStatus, TaskKind
from testing.factories import make_item, make_project, make_stage, make_user


def make_stages(project, provider: str):
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                               provider=provider, order=1, settings={"max_workers": 6})
    trial = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT, provider=provider,
                       order=2, requires_stage=qualification, judgments_per_item=3,
                       settings={"n_items": 10})
    full = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT, provider=provider,
                      order=3, requires_stage=qualification, agreement_threshold=0.5)
    return qualification, trial, full


def open_to_every_worker(stage) -> None:
    """`stage` (unsaved) requires no qualification, on purpose: the test means a stage every
    worker may take, though its project has a qualification stage (`make_stages`), so it says
    so (`open_to_every_worker`), as a researcher must before publishing it."""
    stage.requires_stage = None
    stage.settings = {**(stage.settings or {}), "open_to_every_worker": True}


def prolific_draft_stage():
    """A draft full stage on Prolific: 4 Likert items, 2 per HIT, one judgment each, $0.40."""
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 1},
                           reward_per_hit=Decimal("0.40"))
    for _ in range(4):
        make_item(project)
    return make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                      provider="prolific")


def stage_admin_action(client, stage, action: str) -> list[str]:
    """Run a stage changelist action as a superuser: the messages it shows."""
    client.force_login(make_user(superuser=True))
    response = client.post(reverse("admin:annotation_stage_changelist"), {
        "action": action, "_selected_action": [str(stage.pk)], "index": "0"}, follow=True)
    return [str(m) for m in response.context["messages"]]


def refused_and_nothing_created(stage, prolific_server) -> None:
    """The publish was refused before anything: a draft, no HIT, no provider call, no study."""
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT
    assert not stage.hits.exists()
    assert not ProviderCall.objects.filter(stage=stage).exists()
    assert not prolific_server.state.studies


def w1_submitted_awaiting_review(state, likert_study, researcher, client):
    """A published one-HIT MTurk trial (on the local MTurk server's `state`) whose work is
    approved only an hour after submission; W1 has submitted on our page and on MTurk.
    Returns (stage, hit, W1's MTurk assignment id, W1's assignment)."""
    from annotation.services.stages import stage_publish
    from testing.workers_sim import mturk_worker_submits, scores_cycle

    project, _gold, items = likert_study
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="mturk", judgments_per_item=2,
                       settings={"locales": [], "review": {"approve_after_seconds": 3600}})
    stage.items.set(items[:5])
    stage_publish(stage=stage, user=researcher)
    hit = stage.hits.get()
    w1 = state.worker_accept(hit.external_id, "W1")
    assignment = mturk_worker_submits(client, stage=stage, hit_id=hit.external_id,
                                      worker_id="W1", assignment_id=w1,
                                      answer_for=scores_cycle([1, 2, 3, 4, 5]))
    state.worker_submit(w1)
    return stage, hit, w1, assignment
