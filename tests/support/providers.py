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


def mturk_qualification_hand_reviewed(state, likert_study, researcher, client):
    """A published MTurk qualification (on the local MTurk server's `state`) reviewed by hand:
    the work waits for the researcher's decision, before MTurk's auto-approval. Returns
    (stage, `submits(worker_id)`: the worker accepts, answers every gold item right on our
    page and submits on MTurk; returns their assignment)."""
    from annotation.services.stages import stage_publish
    from testing.workers_sim import gold_score, mturk_worker_submits

    project, _gold, _items = likert_study
    stage = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                       provider="mturk", settings={
                           "max_workers": 6, "locales": [],
                           "review": {"approve_after_seconds": 10**6},
                           "auto_approval_delay_seconds": 2592000})
    stage_publish(stage=stage, user=researcher)
    hit = stage.hits.get()

    def submits(worker_id: str):
        assignment_id = state.worker_accept(hit.external_id, worker_id)
        assignment = mturk_worker_submits(client, stage=stage, hit_id=hit.external_id,
                                          worker_id=worker_id, assignment_id=assignment_id,
                                          answer_for=gold_score)
        state.worker_submit(assignment_id)
        return assignment

    return stage, submits


def prolific_p1_submitted(server, project, items, researcher, client, *, scores):
    """P1's submission (answering `scores` in turn) to a published Prolific trial of `items`,
    completed on the Prolific fake `server`, not synced yet: (the stage, its study id, P1's
    session)."""
    from annotation.services.stages import stage_publish
    from testing.workers_sim import prolific_participant_submits, scores_cycle

    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="prolific", judgments_per_item=2, settings={"gold_rate": 0})
    stage.items.set(items)
    stage_publish(stage=stage, user=researcher)
    stage.refresh_from_db()
    study_id = stage.settings["prolific_study_id"]
    session = server.state.participant_start(study_id, "P1")
    prolific_participant_submits(client, stage=stage, pid="P1", study_id=study_id,
                                 session_id=session, answer_for=scores_cycle(scores))
    server.state.participant_complete(session, stage.settings["prolific_completion_code"])
    return stage, study_id, session
