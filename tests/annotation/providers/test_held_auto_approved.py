"""Work our review held (flagged, "held for your decision") that MTurk then approves itself
(the HIT's auto-approval delay ran out before the researcher decided) stays held: the sync
records that MTurk paid the reward (money spent, the cockpit's cost) but the work stays out of
the data and gets no automatic bonus until the researcher approves it (no second
ApproveAssignment) or rejects it (kept out; nothing sent to MTurk, which no longer allows it).
Local MTurk-protocol server, real boto3 client."""
from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.cost_selectors import stage_paid
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Judgment,
    ProviderCall,
    StageKind,
    StageStatus,
)
from annotation.selectors import judgments_that_count
from annotation.services.review import (
    assignment_approve,
    assignment_reject,
    stage_sync_and_review,
)
from annotation.services.stages import stage_publish
from testing.factories import make_stage
from testing.workers_sim import mturk_worker_submits, scores_cycle
from tests.support.providers import prolific_p1_submitted, w1_submitted_awaiting_review

pytestmark = [pytest.mark.mturk, pytest.mark.django_db]

REWARD_AND_FEE = Decimal("0.48")  # $0.40 and MTurk's 20%


def _held_then_auto_approved(mturk_server, likert_study, researcher, client, *,
                             synced: bool = True):
    """W1's work, held by the review (the same answer on every item), then approved by MTurk's
    auto-approval and (`synced`) synced."""
    state = mturk_server.state
    project, _gold, items = likert_study
    project.bonus_per_correct = Decimal("0.10")
    project.save(update_fields=["bonus_per_correct"])
    for item in items[:5]:  # each answer right: the bonus per correct answer would be paid
        item.gold = {"score": 3}
        item.save(update_fields=["gold"])
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="mturk", judgments_per_item=2, settings={"locales": []})
    stage.items.set(items[:5])
    stage_publish(stage=stage, user=researcher)
    hit = stage.hits.get()
    w1 = state.worker_accept(hit.external_id, "W1")
    mturk_worker_submits(client, stage=stage, hit_id=hit.external_id, worker_id="W1",
                         assignment_id=w1, answer_for=scores_cycle([3]))
    state.worker_submit(w1)
    _sync, review = stage_sync_and_review(stage=stage)
    assert review.held == 1
    assert Assignment.objects.get(external_id=w1).status == AssignmentStatus.FLAGGED

    state.assignments[w1]["AssignmentStatus"] = "Approved"  # the auto-approval delay ran out
    sync = stage_sync_and_review(stage=stage)[0] if synced else None
    return stage, Assignment.objects.get(external_id=w1), sync


def _counted(assignment: Assignment) -> int:
    return judgments_that_count(Judgment.objects.filter(assignment=assignment)).count()


def test_held_work_mturk_auto_approved_stays_held_but_is_paid(mturk_server, likert_study,
                                                              researcher, client):
    state = mturk_server.state
    stage, assignment, sync = _held_then_auto_approved(mturk_server, likert_study, researcher,
                                                       client)
    assert assignment.status == AssignmentStatus.FLAGGED
    assert "approved and paid this work itself" in assignment.review_note
    assert sync.held_paid == 1 and sync.mirrored == 0
    assert _counted(assignment) == 0
    assert not ProviderCall.objects.filter(operation="SendBonus").exists()
    assert state.bonuses == []
    assert stage_paid(stage=stage).rewards == REWARD_AND_FEE  # the money MTurk spent

    # Later syncs change nothing and say it once.
    sync, _review = stage_sync_and_review(stage=stage)
    assignment.refresh_from_db()
    assert (sync.held_paid, sync.mirrored) == (0, 0)
    assert assignment.status == AssignmentStatus.FLAGGED
    assert assignment.review_note.count("approved and paid this work itself") == 1

    # The researcher approves it: it counts now, nothing is sent to MTurk again, and the
    # review pays its bonus per correct answer.
    calls_before = list(state.calls)
    assignment_approve(assignment=assignment, allow_flagged=True)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED
    assert _counted(assignment) == 5
    _sync, review = stage_sync_and_review(stage=stage)
    assert review.bonuses == 1 and review.errors == []
    assert state.calls[len(calls_before):].count("ApproveAssignment") == 0
    assert stage_paid(stage=stage).rewards == REWARD_AND_FEE  # paid once


def test_held_work_mturk_auto_approved_can_still_be_rejected_here(mturk_server, likert_study,
                                                                  researcher, client):
    state = mturk_server.state
    stage, assignment, _sync = _held_then_auto_approved(mturk_server, likert_study, researcher,
                                                        client)
    calls_before = list(state.calls)
    assignment_reject(assignment=assignment, reason="same answer everywhere", allow_flagged=True)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED
    assert "already approved and paid it" in assignment.review_note
    assert "no longer possible" in assignment.review_note
    assert "RejectAssignment" not in state.calls[len(calls_before):]
    assert _counted(assignment) == 0
    assert stage_paid(stage=stage).rewards == REWARD_AND_FEE  # spent all the same
    sync, review = stage_sync_and_review(stage=stage)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED and review.bonuses == 0
    assert state.bonuses == []


@pytest.mark.prolific
def test_held_prolific_work_prolific_approved_then_rejected_here_gets_its_place_back(
        prolific_server, likert_study, researcher, client):
    """Prolific approves held work itself: it stays held and paid; rejected here afterwards,
    Prolific keeps its place (only a rejection there reopens one), so the sync adds a place
    for it, as for an approved submission given back."""
    from annotation.selectors import PROLIFIC_REOFFER_OPERATION

    server = prolific_server
    stage, study_id, session = _prolific_held(server, likert_study, researcher, client)
    server.state.submissions[session]["status"] = "APPROVED"  # Prolific's auto-approval
    sync, _review = stage_sync_and_review(stage=stage)
    assignment = Assignment.objects.get(external_id=session)
    assert assignment.status == AssignmentStatus.FLAGGED and sync.held_paid == 1
    assert _counted(assignment) == 0
    assert not ProviderCall.objects.filter(operation=PROLIFIC_REOFFER_OPERATION).exists()

    assignment_reject(assignment=assignment, reason="the same answer on every item",
                      allow_flagged=True)
    sync, _review = stage_sync_and_review(stage=stage)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED
    assert sync.reoffered == 1
    assert server.state.studies[study_id]["total_available_places"] == 3


def test_held_work_mturk_approved_before_any_sync_saw_it_is_rejected_here_alike(
        mturk_server, likert_study, researcher, client):
    """The researcher rejects held work after MTurk's auto-approval and before the next sync:
    MTurk refused the RejectAssignment and the admin showed its raw error ("This operation can
    be called with a status of: Submitted"), while the same rejection a sync later was recorded
    here. The refusal now says MTurk approved it (`ApprovedOnProvider`), and held work is
    rejected here as after that sync, its payment recorded."""
    state = mturk_server.state
    stage, assignment, _sync = _held_then_auto_approved(mturk_server, likert_study, researcher,
                                                        client, synced=False)
    assignment_reject(assignment=assignment, reason="same answer everywhere", allow_flagged=True)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED
    assert "already approved and paid it" in assignment.review_note
    assert _counted(assignment) == 0
    assert stage_paid(stage=stage).rewards == REWARD_AND_FEE
    sync, review = stage_sync_and_review(stage=stage)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED and review.bonuses == 0
    assert (sync.held_paid, sync.mirrored) == (0, 0) and state.bonuses == []


def test_work_awaiting_review_that_mturk_approved_is_refused_in_plain_words(
        mturk_server, likert_study, researcher, client):
    from annotation.services.review import ReviewError

    state = mturk_server.state
    stage, _hit, w1, _assignment = w1_submitted_awaiting_review(state, likert_study,
                                                                researcher, client)
    stage_sync_and_review(stage=stage)
    assignment = Assignment.objects.get(external_id=w1)
    assert assignment.status == AssignmentStatus.SUBMITTED
    state.assignments[w1]["AssignmentStatus"] = "Approved"
    with pytest.raises(ReviewError, match="MTurk approved and paid this assignment already"):
        assignment_reject(assignment=assignment, reason="changed my mind", allow_flagged=True)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    stage_sync_and_review(stage=stage)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED  # mirrored by the sync, as before


@pytest.mark.prolific
def test_held_prolific_work_approved_there_before_any_sync_is_rejected_here_alike(
        prolific_server, likert_study, researcher, client):
    """Prolific approves held work itself and the researcher rejects it before the next sync:
    Prolific refused the transition ("submission is APPROVED") and the admin showed that; now
    the refusal says Prolific approved it (`ApprovedOnProvider`) and the held work is rejected
    here as after that sync, so the sync adds its place back (Prolific keeps the place of
    approved work)."""
    server = prolific_server
    stage, study_id, session = _prolific_held(server, likert_study, researcher, client)
    server.state.submissions[session]["status"] = "APPROVED"  # Prolific's auto-approval
    assignment = Assignment.objects.get(external_id=session)
    assignment_reject(assignment=assignment, reason="the same answer on every item",
                      allow_flagged=True)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED
    assert "already approved and paid it" in assignment.review_note
    sync, _review = stage_sync_and_review(stage=stage)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED and sync.reoffered == 1
    assert server.state.studies[study_id]["total_available_places"] == 3


def _prolific_held(server, likert_study, researcher, client):
    """P1's submission to a Prolific trial, held by the review (the same answer on every
    item): (the stage, its study id, P1's session)."""
    project, _gold, items = likert_study
    stage, study_id, session = prolific_p1_submitted(server, project, items[:5], researcher,
                                                     client, scores=[3])
    _sync, review = stage_sync_and_review(stage=stage)
    assert review.held == 1
    return stage, study_id, session


def test_held_work_mturk_paid_then_rejected_here_is_reversed_here_only(mturk_server,
                                                                       likert_study,
                                                                       researcher, client):
    """The rejection of work MTurk had approved and paid itself was ours only: reversing it
    approves it here, sends nothing (MTurk holds it approved) and pays nothing again."""
    from annotation.services.review import assignment_rejection_reverse

    state = mturk_server.state
    stage, assignment, _sync = _held_then_auto_approved(mturk_server, likert_study, researcher,
                                                        client)
    assignment_reject(assignment=assignment, reason="same answer everywhere", allow_flagged=True)
    calls_before = list(state.calls)
    reversal = assignment_rejection_reverse(assignment=assignment, reason="appeal upheld")
    assert reversal.already == ""
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED
    assert "had approved and paid it before the rejection; nothing was sent" in \
        assignment.review_note
    assert "ApproveAssignment" not in state.calls[len(calls_before):]
    assert state.overridden == []
    assert _counted(assignment) == 5
    assert stage_paid(stage=stage).rewards == REWARD_AND_FEE  # paid once
    again = assignment_rejection_reverse(assignment=assignment, reason="appeal upheld")
    assert "reversed already" in again.already
