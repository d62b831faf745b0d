"""What a reversed rejection sets going besides its own record: the sync takes up a closed
stage it had reconciled (the approved work's bonus per correct answer is paid), a pass taken
back is granted again once the assignment's row lock is released, and a reversal whose answer
was lost is noted as a reversal when the sync mirrors it (found in review)."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from annotation.models import Assignment, AssignmentStatus, ProviderCall, Stage, StageStatus
from annotation.selectors import stage_ids_to_sync
from annotation.services.review import (
    assignment_reject,
    assignment_rejection_reverse,
    stage_sync_and_review,
)
from annotation.services.review.decisions import correct_answer_bonus
from tests.support.providers import (
    mturk_qualification_hand_reviewed,
    w1_submitted_awaiting_review,
)

pytestmark = [pytest.mark.django_db, pytest.mark.mturk, pytest.mark.reliability]


@pytest.mark.parametrize("closed", [False, True])
def test_a_reversal_on_a_reconciled_closed_stage_gets_its_bonus_per_correct_answer(
        mturk_server, likert_study, researcher, client, closed):
    state = mturk_server.state
    project, _gold, items = likert_study
    project.bonus_per_correct = Decimal("0.10")
    project.save(update_fields=["bonus_per_correct"])
    for item in items[:5]:
        item.gold = {"score": 3}
        item.save(update_fields=["gold"])
    stage, _hit, _w1, assignment = w1_submitted_awaiting_review(state, likert_study,
                                                                researcher, client)
    stage_sync_and_review(stage=stage)  # confirmed
    assignment.refresh_from_db()
    assert correct_answer_bonus(assignment=assignment) > 0
    assignment_reject(assignment=assignment, reason="same answer everywhere")
    # The study ends: closed, every submission decided, reconciled by the sync.
    if closed:
        Stage.objects.filter(pk=stage.pk).update(status=StageStatus.CLOSED,
                                                 reconciled_at=timezone.now())
    # Within 30 days the worker appeals and the rejection is reversed (MTurk pays the reward).
    assignment_rejection_reverse(assignment=assignment, reason="appeal upheld")
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.APPROVED
    for stage_id in stage_ids_to_sync():  # the beat
        stage_sync_and_review(stage=Stage.objects.get(pk=stage_id))
    # The approved work's bonus per correct answer is paid by the next sync (a reconciled
    # stage was left out of the sync, and the bonus never paid).
    assert ProviderCall.objects.filter(assignment=assignment, operation="SendBonus",
                                       key__endswith=":per-correct").exists()


def test_the_regrant_is_not_sent_while_the_assignment_row_is_locked(
        mturk_server, likert_study, researcher, client, monkeypatch):
    from annotation.providers.mturk import MTurkProvider

    state = mturk_server.state
    stage, submits = mturk_qualification_hand_reviewed(state, likert_study, researcher, client)
    first = submits("WOK1")
    stage_sync_and_review(stage=stage)
    first.refresh_from_db()
    assignment_reject(assignment=first, reason="copied answers")
    seen = []
    original = MTurkProvider.grant_qualification

    def grant(self, **kwargs):
        seen.append(len(connection.atomic_blocks) > depth)  # inside select_for_update's block
        return original(self, **kwargs)

    monkeypatch.setattr(MTurkProvider, "grant_qualification", grant)
    depth = len(connection.atomic_blocks)  # the test's own transaction
    assignment_rejection_reverse(assignment=first, reason="appeal upheld")
    assert seen == [False]


def test_a_reversal_whose_answer_was_lost_is_noted_as_a_reversal_by_the_sync(
        mturk_server, likert_study, researcher, client, monkeypatch):
    from annotation.providers.mturk import MTurkProvider

    state = mturk_server.state
    stage, _hit, _w1, assignment = w1_submitted_awaiting_review(state, likert_study,
                                                                researcher, client)
    stage_sync_and_review(stage=stage)
    assignment.refresh_from_db()
    assignment_reject(assignment=assignment, reason="same answer everywhere")
    original = MTurkProvider.approve_rejected

    def lost(self, **kwargs):
        original(self, **kwargs)  # MTurk approves and pays...
        raise ConnectionError("read timed out")  # ...its answer is lost

    monkeypatch.setattr(MTurkProvider, "approve_rejected", lost)
    with pytest.raises(ConnectionError):
        assignment_rejection_reverse(assignment=assignment, reason="appeal upheld")
    stage_sync_and_review(stage=stage)  # mirrors MTurk's approval
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED
    # Not "Rejected: same answer everywhere Our decision, confirmed by the sync."
    assert "Rejection reversed" in assignment.review_note, assignment.review_note
    assert "appeal upheld; confirmed by the sync." in assignment.review_note
