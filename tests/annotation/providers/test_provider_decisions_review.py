"""Decisions made on the provider's own site, or by the provider itself, before our review saw
the work: MTurk's auto-approval once the HIT's delay ran out (the sync was down, a beat
stopped), an approval on MTurk's requester site or on Prolific's dashboard. The provider paid
the reward; whether the work counts is still the review's rule: work the stage's review rules
would not approve is held for the researcher (paid, out of the data, no bonus), as work the
review held before the provider approved it. Local MTurk-protocol server (real boto3 client)
and the local Prolific fake."""
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
from annotation.services.review import assignment_approve, stage_sync_and_review
from annotation.services.stages import stage_publish
from testing.factories import make_stage
from testing.workers_sim import mturk_worker_submits, scores_cycle
from tests.support.providers import (
    prolific_p1_submitted,
    stage_admin_action,
    w1_submitted_awaiting_review,
)

pytestmark = [pytest.mark.django_db]

REWARD_AND_FEE = Decimal("0.48")  # $0.40 and MTurk's 20%


def _counted(assignment: Assignment) -> int:
    return judgments_that_count(Judgment.objects.filter(assignment=assignment)).count()


def _bonus_study(likert_study):
    project, _gold, items = likert_study
    project.bonus_per_correct = Decimal("0.10")
    project.save(update_fields=["bonus_per_correct"])
    for item in items[:5]:  # every answer of 3 is right: the bonus per correct answer is due
        item.gold = {"score": 3}
        item.save(update_fields=["gold"])
    return project, items[:5]


def _mturk_submitted(mturk_server, likert_study, researcher, client, *, scores):
    """Work on a one-HIT MTurk trial (W1, W2, ... answering `scores[i]` in turn), submitted on
    our page and on MTurk, never synced: (the stage, their MTurk assignment ids)."""
    state = mturk_server.state
    project, items = _bonus_study(likert_study)
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="mturk", judgments_per_item=2, settings={"locales": []})
    stage.items.set(items)
    stage_publish(stage=stage, user=researcher)
    hit = stage.hits.get()
    ids = []
    for n, answers in enumerate(scores, start=1):
        assignment_id = state.worker_accept(hit.external_id, f"W{n}")
        mturk_worker_submits(client, stage=stage, hit_id=hit.external_id, worker_id=f"W{n}",
                             assignment_id=assignment_id, answer_for=scores_cycle(answers))
        state.worker_submit(assignment_id)
        ids.append(assignment_id)
    return stage, ids


@pytest.mark.mturk
def test_work_mturk_auto_approved_before_any_review_counts_only_if_the_rules_pass_it(
        mturk_server, likert_study, researcher, client):
    """W1 gives the same answer on every item (the review holds it), W2 varied answers; MTurk
    auto-approves both before any sync saw them. Before, the sync mirrored both approvals, so
    the straight-liner's work counted and the review paid it the bonus per correct answer."""
    state = mturk_server.state
    stage, (w1, w2) = _mturk_submitted(mturk_server, likert_study, researcher, client,
                                       scores=[[3], [1, 2, 3, 4, 5]])
    for assignment_id in (w1, w2):
        state.assignments[assignment_id]["AssignmentStatus"] = "Approved"  # auto-approval

    sync, review = stage_sync_and_review(stage=stage)
    assignment, good = (Assignment.objects.get(external_id=w1),
                        Assignment.objects.get(external_id=w2))
    assert assignment.status == AssignmentStatus.FLAGGED
    assert "approved and paid this work itself" in assignment.review_note
    assert "the same answer on 100% of 5 items" in assignment.review_note
    assert good.status == AssignmentStatus.APPROVED and _counted(good) == 5
    assert (sync.held_paid, sync.mirrored) == (1, 1)
    assert _counted(assignment) == 0
    assert review.bonuses == 1  # W2's one answer of 3 is right; W1 gets none
    assert [b["WorkerId"] for b in state.bonuses] == ["W2"]
    assert stage_paid(stage=stage).rewards == 2 * REWARD_AND_FEE  # what MTurk spent

    # Later syncs leave it held and say it once; the researcher may still approve it (nothing
    # sent to MTurk again), and then it counts.
    stage_sync_and_review(stage=stage)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.FLAGGED
    assert assignment.review_note.count("approved and paid this work itself") == 1
    calls_before = len(state.calls)
    assignment_approve(assignment=assignment, allow_flagged=True)
    assert "ApproveAssignment" not in state.calls[calls_before:]
    assert _counted(assignment) == 5


@pytest.mark.prolific
def test_work_approved_on_prolifics_dashboard_before_any_review_is_held_alike(
        prolific_server, likert_study, researcher, client):
    server = prolific_server
    project, items = _bonus_study(likert_study)
    stage, _study_id, session = prolific_p1_submitted(server, project, items, researcher,
                                                      client, scores=[3])
    server.state.submissions[session]["status"] = "APPROVED"  # approved on the dashboard

    sync, review = stage_sync_and_review(stage=stage)
    assignment = Assignment.objects.get(external_id=session)
    assert assignment.status == AssignmentStatus.FLAGGED
    assert "Prolific approved and paid this work itself" in assignment.review_note
    assert (sync.held_paid, sync.mirrored) == (1, 0)
    assert _counted(assignment) == 0
    assert review.bonuses == 0
    assert ProviderCall.objects.filter(assignment=assignment, operation="ApproveAssignment",
                                       status="succeeded").exists()


def _sync_now_messages(stage) -> list[str]:
    """The admin's "Sync with provider and review now" on the stage, as a superuser."""
    from django.test import Client

    return stage_admin_action(Client(), stage, "sync_stages")


@pytest.mark.mturk
def test_a_rejection_that_mturk_approval_overtook_keeps_the_work_out_of_the_data(
        mturk_server, likert_study, researcher, client):
    """Our RejectAssignment throttled past its retries, then MTurk approved the work itself:
    MTurk paid and no longer allows a rejection, but the researcher's rejection still decides
    the data, as for held work rejected after MTurk paid it (`_held_paid_reject`). Before, the
    sync mirrored MTurk's approval: the rejected work counted, and its slot was not refilled."""
    from annotation.models import ProviderCallStatus
    from annotation.services.review import assignment_reject

    state = mturk_server.state
    stage, hit, w1, assignment = w1_submitted_awaiting_review(state, likert_study,
                                                               researcher, client)
    stage_sync_and_review(stage=stage)  # confirmed, not yet due for approval
    mturk_server.throttle_next["RejectAssignment"] = 100
    with pytest.raises(Exception, match="Rate exceeded"):
        assignment_reject(assignment=Assignment.objects.get(pk=assignment.pk),
                          reason="copied answers")
    mturk_server.throttle_next["RejectAssignment"] = 0
    state.assignments[w1]["AssignmentStatus"] = "Approved"  # MTurk's auto-approval

    messages = _sync_now_messages(stage)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED
    assert "Rejected here: copied answers" in assignment.review_note
    assert "before our rejection went through" in assignment.review_note
    assert _counted(assignment) == 0
    assert stage_paid(stage=stage).rewards == REWARD_AND_FEE  # what MTurk paid
    call = ProviderCall.objects.get(assignment=assignment, operation="RejectAssignment")
    assert call.status == ProviderCallStatus.FAILED and "overtaken" in call.error
    assert any("1 rejected here before the provider approved them" in m for m in messages)
    hit.refresh_from_db()
    assert hit.max_assignments == 3  # its slot re-offered, as for any rejected work

    sync, _review = stage_sync_and_review(stage=stage)  # later syncs leave it rejected
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED
    assert (sync.kept_rejected, sync.mirrored, sync.overruled) == (0, 0, 0)


@pytest.mark.mturk
def test_a_rejection_reversed_on_mturks_site_counts_again_and_the_researcher_is_told(
        mturk_server, likert_study, researcher, client):
    """Rejected here (MTurk rejected it too), then approved on MTurk's requester site, which
    reverses a rejection: MTurk paid, and the work counts again; before, the sync recorded it
    as an ordinary "Decided on Mechanical Turk" and nothing told the researcher that their
    rejection had been overruled."""
    from annotation.services.review import assignment_reject

    state = mturk_server.state
    stage, _hit, w1, assignment = w1_submitted_awaiting_review(state, likert_study,
                                                                researcher, client)
    stage_sync_and_review(stage=stage)
    assignment_reject(assignment=Assignment.objects.get(pk=assignment.pk), reason="too fast")
    assert state.assignments[w1]["AssignmentStatus"] == "Rejected"
    state.assignments[w1]["AssignmentStatus"] = "Approved"  # reversed on the requester site

    messages = _sync_now_messages(stage)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED
    assert "the rejection here was overruled" in assignment.review_note
    assert _counted(assignment) == 5
    assert any("1 rejected here but approved on the provider's site" in m for m in messages)
    sync, _review = stage_sync_and_review(stage=stage)
    assert (sync.overruled, sync.mirrored) == (0, 0)
