"""A Prolific study has as many places as its HITs have assignments. Prolific reopens by itself
the place of a rejected (or returned) submission, and keeps an approved one's: the sync adds a
place (PATCH studies/<id>/ `total_available_places`) once per approved submission given back
(its worker blocked for the project), and the stage collects again whenever a slot or place
reopened, on the local Prolific fake."""
from __future__ import annotations

import pytest

from annotation.cost_selectors import project_committed_cost, stage_cost_estimate
from annotation.models import (
    AssignmentStatus,
    Provider,
    ProviderCall,
    ProviderCallStatus,
    StageStatus,
    TaskKind,
)
from annotation.selectors import PROLIFIC_REOFFER_OPERATION, stage_progress
from annotation.services.replacements import stage_replacements_offer
from annotation.services.review import assignment_reject, stage_sync_and_review
from annotation.services.stages import stage_collection_complete, stage_publish
from annotation.services.workers import worker_block
from annotation.stage_plan_selectors import stage_hits_planned
from testing.factories import make_assignment, make_hit, make_judgment, make_worker
from testing.prolific_server import ApiError
from testing.workers_sim import prolific_participant_submits, scores_cycle
from tests.support.providers import make_stages, open_to_every_worker
from tests.support.tasks import make_task

pytestmark = [pytest.mark.prolific, pytest.mark.django_db]

PATCH_STUDY = "PATCH studies/<id>/"


def _trial(project, items, researcher, *, review=None, publish=True, **options):
    """A trial of one passage's 5 items × 2 judgments: one HIT, so a study of 2 places
    (`options`: more settings; `publish=False` leaves it a draft)."""
    _q, trial, _f = make_stages(project, "prolific")
    open_to_every_worker(trial)
    trial.judgments_per_item = 2
    trial.settings.update({"gold_rate": 0, "review": review or {}, **options})
    trial.save()
    trial.items.set(items[:5])  # passage p0
    if not publish:
        return trial
    result = stage_publish(stage=trial, user=researcher)
    assert result.report.failed == 0, result.report.errors
    trial.refresh_from_db()
    return trial


def _study(server, stage) -> dict:
    return server.state.studies[stage.settings["prolific_study_id"]]


def _take_part(server, client, stage, pid, seconds=6.0):
    study = _study(server, stage)
    session = server.state.participant_start(study["id"], pid)
    assignment = prolific_participant_submits(
        client, stage=stage, pid=pid, study_id=study["id"], session_id=session,
        answer_for=scores_cycle([1, 3, 5, 2, 4]), seconds=seconds)
    server.state.participant_complete(session, stage.settings["prolific_completion_code"])
    return assignment


def _place_calls(stage) -> int:
    return ProviderCall.objects.filter(stage=stage, operation=PROLIFIC_REOFFER_OPERATION).count()


@pytest.mark.reliability
def test_a_blocked_workers_approved_submission_gets_one_more_place(
        prolific_server, likert_study, researcher, client, settings):
    """Both places approved, then one worker blocked: picking re-offers the slots, and the sync
    adds one place to the study (was: the study stayed full, so no participant could take
    the re-offered items, and the stage stayed in reviewing). A call whose answer was lost is
    set again to the same number on the next sync (3 places, not 4); a repeated sync adds
    none; a new participant takes the place and the stage completes again."""
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher)
    assert _study(server, trial)["total_available_places"] == 2
    _take_part(server, client, trial, "P1")
    spam = _take_part(server, client, trial, "P2")
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    spam.refresh_from_db()
    assert spam.status == AssignmentStatus.APPROVED
    assert trial.status == StageStatus.REVIEWING

    worker_block(worker=spam.worker, reason="copied answers", by=project.owner)
    # What Prolific does until then: a full study takes nobody (the fake keeps it ACTIVE and
    # full; paused too, as its stage reviews: `stage_recruitment_follow`).
    with pytest.raises(ApiError, match="study is (full|not active)"):
        server.state.participant_start(_study(server, trial)["id"], "P3")
    settings.PROLIFIC_MAX_ATTEMPTS = 1
    server.lose_response_next[PATCH_STUDY] = 1  # the places grow; the answer is lost
    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.reoffered == 0 and "not confirmed yet" in sync.reoffer_waiting[0]
    assert _study(server, trial)["total_available_places"] == 3
    settings.PROLIFIC_MAX_ATTEMPTS = 8

    sync, _review = stage_sync_and_review(stage=trial)  # the same number again: no 4th place
    assert sync.reoffered == 1 and not sync.reoffer_waiting
    assert _study(server, trial)["total_available_places"] == 3
    assert server.stats[PATCH_STUDY] == 1  # the retry found the places already there
    call = ProviderCall.objects.get(stage=trial, operation=PROLIFIC_REOFFER_OPERATION)
    assert (call.assignment_id, call.status) == (spam.pk, ProviderCallStatus.SUCCEEDED)
    assert call.request["total_available_places"] == 3
    trial.refresh_from_db()
    assert trial.status == StageStatus.COLLECTING  # a participant can take the place
    assert sum(trial.hits.values_list("max_assignments", flat=True)) == 3  # in the estimate
    progress = stage_progress(stages=[trial])[trial.pk]
    assert progress.reoffered == 5 and progress.places_added == 1
    assert "1 place added to the Prolific study" in progress.reoffered_text()

    sync, _review = stage_sync_and_review(stage=trial)  # a repeated sync
    assert sync.reoffered == 0 and _place_calls(trial) == 1
    assert _study(server, trial)["total_available_places"] == 3

    replacement = _take_part(server, client, trial, "P3")
    assert set(replacement.items.values_list("pk", flat=True)) == set(
        spam.items.values_list("pk", flat=True))  # the blocked worker's items, served again
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING
    assert _place_calls(trial) == 1


@pytest.mark.reliability
def test_a_rejected_submission_reopens_its_place_and_the_stage_keeps_collecting(
        prolific_server, likert_study, researcher, client):
    """Prolific reopens a rejected submission's place itself: no place is added, and the
    stage is not complete while a slot is open (was: the rejected submission counted as done,
    the stage went to reviewing and turned away the participant who took the reopened
    place)."""
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher, review={"auto_reject": True,
                                                "min_seconds_per_item": 2.0})
    _take_part(server, client, trial, "P1")
    fast = _take_part(server, client, trial, "PFAST", seconds=0.4)
    _sync, review = stage_sync_and_review(stage=trial)
    assert (review.approved, review.rejected) == (1, 1)
    assert server.state.submissions[fast.external_id]["status"] == "REJECTED"
    trial.refresh_from_db()
    assert trial.status == StageStatus.COLLECTING
    assert _place_calls(trial) == 0 and server.stats[PATCH_STUDY] == 0
    assert _study(server, trial)["total_available_places"] == 2

    _take_part(server, client, trial, "P3")  # the place Prolific reopened, the items again
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING


@pytest.mark.reliability
def test_rejecting_held_work_takes_a_reviewing_stage_back_to_collecting(
        prolific_server, likert_study, researcher, client):
    """Work flagged for the researcher holds its place on Prolific, so the stage reviews; a
    rejection by hand reopens the place and the next sync collects again."""
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher, review={"min_seconds_per_item": 2.0})
    _take_part(server, client, trial, "P1")
    held = _take_part(server, client, trial, "PFAST", seconds=0.4)
    stage_sync_and_review(stage=trial)
    held.refresh_from_db()
    trial.refresh_from_db()
    assert held.status == AssignmentStatus.FLAGGED
    assert trial.status == StageStatus.REVIEWING

    assignment_reject(assignment=held, reason="clicked through the items", allow_flagged=True)
    sync, _review = stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.COLLECTING
    assert sync.reoffered == 0 and _place_calls(trial) == 0
    server.state.participant_start(_study(server, trial)["id"], "P3")  # a place is free


def test_no_place_for_a_closed_stage_or_past_the_budget_cap(prolific_server, likert_study,
                                                            researcher, client):
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher)
    _take_part(server, client, trial, "P1")
    spam = _take_part(server, client, trial, "P2")
    stage_sync_and_review(stage=trial)
    worker_block(worker=spam.worker, reason="copied answers", by=project.owner)
    project.budget_cap = project_committed_cost(project=project)  # nothing left to spend
    project.save()
    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.reoffered == 0 and "budget cap" in sync.reoffer_waiting[0]
    assert _place_calls(trial) == 0
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING  # no place: nobody could take the slot

    project.budget_cap = None
    project.save()
    trial.status = StageStatus.CLOSED
    trial.save()
    assert stage_replacements_offer(stage=trial).reoffered == 0
    assert _place_calls(trial) == 0
    assert _study(server, trial)["total_available_places"] == 2
    trial.status = StageStatus.REVIEWING  # reopened: the place is still owed, added once
    trial.save()
    assert stage_replacements_offer(stage=trial).reoffered == 1
    assert stage_replacements_offer(stage=trial).reoffered == 0
    assert _study(server, trial)["total_available_places"] == 3


def test_a_blocked_workers_submission_awaiting_review_waits_for_the_decision(
        prolific_server, likert_study, researcher, client):
    """Still awaiting review on Prolific, it holds its place: rejecting it would reopen the
    place, so nothing is added until it is approved."""
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher, review={"approve_after_seconds": 3600})
    waiting = _take_part(server, client, trial, "P1")
    worker_block(worker=waiting.worker, reason="copied answers", by=project.owner)
    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.reoffered == 0 and "awaiting review on Prolific" in sync.reoffer_waiting[0]
    assert _place_calls(trial) == 0


def test_the_fake_grows_a_published_studys_places_only_up(prolific_server, likert_study,
                                                          researcher):
    """What the sync relies on, as Prolific's "Update a study" does it: a published study's
    places may only grow; nothing else of it changes; and the provider's raise is absolute."""
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher)
    study_id = _study(server, trial)["id"]
    with pytest.raises(ApiError, match="only be increased"):
        server.state.update_study(query={}, body={"total_available_places": 1}, sid=study_id)
    with pytest.raises(ApiError, match="cannot change"):
        server.state.update_study(query={}, body={"reward": 1}, sid=study_id)
    provider = server.provider
    assert provider.study_places_raise(stage=trial, at_least=4) == {"total_available_places": 4}
    assert provider.study_places_raise(stage=trial, at_least=3)["already"] is True
    assert _study(server, trial)["total_available_places"] == 4


@pytest.mark.reliability
def test_inhouse_collection_is_complete_only_with_work_that_holds_its_slot():
    """In-house, a rejected or blocked worker's assignment gives its slot back and picking
    serves it again, so it no longer completes the stage (was: counted as done)."""
    project, stage, items = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1,
                                      provider=Provider.INHOUSE)
    stage.judgments_per_item = 2  # the item wants 2 judgments (complete: its items have them)
    stage.save()
    make_hit(stage, items=items, max_assignments=2)
    kept = make_assignment(stage, items=items, status=AssignmentStatus.APPROVED)
    make_judgment(item=items[0], stage=stage, assignment=kept, worker=kept.worker)
    spam = make_assignment(stage, items=items, status=AssignmentStatus.APPROVED,
                           worker=make_worker())
    make_judgment(item=items[0], stage=stage, assignment=spam, worker=spam.worker)
    assert stage_collection_complete(stage=stage)
    worker_block(worker=spam.worker, reason="copied answers")
    assert not stage_collection_complete(stage=stage)
    spam.status = AssignmentStatus.REJECTED
    spam.save()
    assert not stage_collection_complete(stage=stage)


@pytest.mark.reliability
def test_inhouse_items_confirmed_on_a_page_still_open_do_not_complete_the_stage():
    """A STARC page confirms items one by one: their judgments are in before its submit, so
    the stage is complete only once the assignment is submitted (the items' redundancy is
    counted with submitted work)."""
    project, stage, items = make_task(TaskKind.MC, n_items=2, items_per_hit=2,
                                      provider=Provider.INHOUSE)
    stage.judgments_per_item = 1
    stage.save()
    make_hit(stage, items=items, max_assignments=1)
    page = make_assignment(stage, items=items, status=AssignmentStatus.IN_PROGRESS)
    for item in items:
        make_judgment(item=item, stage=stage, assignment=page, worker=page.worker)
    assert not stage_collection_complete(stage=stage)
    page.status = AssignmentStatus.SUBMITTED
    page.save()
    assert stage_collection_complete(stage=stage)


@pytest.mark.reliability
@pytest.mark.parametrize("page_setting", ["items_per_assignment", "items_per_hit"])
def test_the_study_has_a_place_for_every_batch_its_pages_hand_out(
        prolific_server, likert_study, researcher, client, page_setting):
    """A stage with a page size of its own (`items_per_assignment`, or `items_per_hit`; the
    project's items per HIT is 5) plans its places, its estimate and its pages with one number
    (`annotation/stage_plan_selectors.py:assignment_size`): 5 items × 2 judgments in batches of
    2 are 5 places (HITs of 2 + 2 + 1 items, twice, but the pages fill each batch across
    them: `places_for_plans`), the estimate counts 5 rewards before and after publishing, and
    participants given 2 items each collect every judgment within them. Was: `items_per_assignment` 2 gave a study of 2 places (planned with 5-item
    HITs) and 2-item pages, so it was full after 4 of the 10 judgments, and the estimate
    counted 2 rewards; `items_per_hit` 2 gave 6 places but 5-item pages: 2 participants took
    everything and 4 places stayed open for participants with nothing to do."""
    server = prolific_server
    project, _gold, items = likert_study
    assert project.items_per_hit == 5
    trial = _trial(project, items, researcher, publish=False, **{page_setting: 2})
    assert [len(plan.items) for plan in stage_hits_planned(stage=trial)] == [2, 2, 1]
    assert stage_cost_estimate(stage=trial).n_assignments == 5
    result = stage_publish(stage=trial, user=researcher)
    assert result.report.failed == 0, result.report.errors
    trial.refresh_from_db()
    assert _study(server, trial)["total_available_places"] == 5
    estimate = stage_cost_estimate(stage=trial)
    assert estimate.n_assignments == 5 and estimate.rewards == 5 * trial.reward
    batches = [_take_part(server, client, trial, f"P{n}") for n in range(5)]
    assert [batch.items.count() for batch in batches] == [2] * 5  # each the size planned
    assert stage_progress(stages=[trial])[trial.pk].judgments == 10


@pytest.mark.reliability
def test_a_rejection_by_hand_reopens_a_reviewing_study_at_once(
        prolific_server, likert_study, researcher, client):
    """Prolific reopens a rejected submission's place the moment it is rejected, so a
    rejection by hand (admin, dashboard, API: `assignment_reject`) takes a reviewing stage back
    to collecting at once, as the sync would: the participant who takes the place gets the items.
    Was: the stage stayed reviewing until the next sync, and that participant, in a place
    Prolific had just offered, read that the task was paused for review."""
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher, review={"approve_after_seconds": 3600})
    other = _take_part(server, client, trial, "P1")
    spam = _take_part(server, client, trial, "P2")
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING
    spam.refresh_from_db()
    other.refresh_from_db()
    assert other.stage.status == StageStatus.REVIEWING  # loaded now, as a second action's is
    assignment_reject(assignment=spam, reason="copied the same score everywhere")
    trial.refresh_from_db()
    assert trial.status == StageStatus.COLLECTING
    assert trial.transitions.order_by("-pk").first().to_status == StageStatus.COLLECTING
    # A second rejection whose stage object still says reviewing rejects, and reopens nothing.
    assignment_reject(assignment=other, reason="the same score on every candidate answer")
    assert trial.transitions.filter(to_status=StageStatus.COLLECTING).count() == 2
    replacement = _take_part(server, client, trial, "P3")  # no sync in between
    assert replacement.items.count() == 5
