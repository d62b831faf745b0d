"""Closed stages keep being reconciled: a worker who accepted a HIT before it expired can still
submit, and MTurk auto-approves what stays undecided, so the periodic sync goes on for a closed
stage until no HIT can receive more and every submission is decided (`Stage.reconciled_at`).
Local MTurk-protocol server, real boto3 client."""
from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentStatus,
    HitStatus,
    StageKind,
    StageStatus,
)
from annotation.services.review import stage_sync_and_review
from annotation.services.stages import stage_close, stage_publish
from testing.factories import make_stage
from testing.workers_sim import mturk_worker_submits, scores_cycle
from tests.support.providers import w1_submitted_awaiting_review

pytestmark = [pytest.mark.mturk, pytest.mark.django_db]


@pytest.fixture
def queued(monkeypatch):
    """The stage ids the beat entry queues (instead of sending them to the broker)."""
    from worker.tasks import providers as tasks

    ids: list[int] = []
    monkeypatch.setattr(tasks.stage_sync, "delay", ids.append)
    return ids


def _beat(queued) -> set[int]:
    from worker.tasks.providers import providers_sync_all

    queued.clear()
    providers_sync_all.run()
    return set(queued)


def test_closed_stage_is_synced_until_every_hit_is_decided(mturk_server, likert_study,
                                                           researcher, client, queued):
    state = mturk_server.state
    project, _gold, items = likert_study
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="mturk", judgments_per_item=3,
                       settings={"locales": [], "assignment_duration_seconds": 1800})
    stage.items.set(items[:5])  # one passage: one HIT
    stage_publish(stage=stage, user=researcher)
    hit = stage.hits.get()
    # W1 submits on our page and on MTurk; W2 and W3 accept before the stage is closed.
    w1 = state.worker_accept(hit.external_id, "W1")
    mturk_worker_submits(client, stage=stage, hit_id=hit.external_id, worker_id="W1",
                         assignment_id=w1, answer_for=scores_cycle([1, 2, 3, 4, 5]))
    state.worker_submit(w1)
    w2 = state.worker_accept(hit.external_id, "W2")
    w3 = state.worker_accept(hit.external_id, "W3")

    # Closed straight from collecting, before any sync ran.
    stage_close(stage=stage, user=researcher, reason="enough data")
    stage.refresh_from_db()
    hit.refresh_from_db()
    assert stage.status == StageStatus.CLOSED and hit.status == HitStatus.EXPIRED
    assert stage.pk in _beat(queued)

    # The closed stage is still reviewed: W1's work is approved on MTurk.
    sync, review = stage_sync_and_review(stage=stage)
    assert (sync.listed, review.approved) == (1, 1)
    assert state.assignments[w1]["AssignmentStatus"] == "Approved"
    stage.refresh_from_db()
    assert stage.reconciled_at is None and "can submit until" in sync.open_reason
    assert stage.pk in _beat(queued)

    # After the close: W2 submits on MTurk (our page is closed, so no local data) and MTurk
    # auto-approves W3's submission before we look.
    state.worker_submit(w2)
    state.worker_submit(w3)
    state.assignments[w3]["AssignmentStatus"] = "Approved"
    sync, review = stage_sync_and_review(stage=stage)
    assert (sync.listed, sync.flagged) == (3, 2)
    for late in (w2, w3):
        local = Assignment.objects.get(external_id=late)
        assert local.status == AssignmentStatus.FLAGGED
        assert "no local assignment" in local.review_note
    assert "already marked it approved" in Assignment.objects.get(external_id=w3).review_note
    stage.refresh_from_db()
    assert stage.reconciled_at is None  # the assignment duration has not run out yet

    # The HIT expired long enough ago that nobody who accepted it can still submit.
    hit.expires_at = timezone.now() - dt.timedelta(seconds=1801)
    hit.save(update_fields=["expires_at"])
    sync, _review = stage_sync_and_review(stage=stage)
    stage.refresh_from_db()
    assert sync.reconciled and stage.reconciled_at is not None
    assert stage.pk not in _beat(queued)  # the beat leaves it alone from now on
    # Every submission on MTurk is accounted for locally.
    remote = {aid for aid, a in state.assignments.items() if a["AssignmentStatus"] != "Accepted"}
    local = dict(Assignment.objects.filter(stage=stage).values_list("external_id", "status"))
    assert remote == set(local) and set(local.values()) <= {AssignmentStatus.APPROVED,
                                                            AssignmentStatus.FLAGGED}


def test_closed_stage_waits_for_undecided_work_and_calls_in_doubt(mturk_server, likert_study,
                                                                  researcher, client):
    from annotation.models import ProviderCall, ProviderCallStatus

    state = mturk_server.state
    stage, hit, w1, assignment = w1_submitted_awaiting_review(state, likert_study,
                                                               researcher, client)
    stage_close(stage=stage, user=researcher)
    hit.refresh_from_db()
    hit.expires_at = timezone.now() - dt.timedelta(days=1)
    hit.save(update_fields=["expires_at"])
    sync, _review = stage_sync_and_review(stage=stage)
    # Submitted but not yet due for approval: the stage stays open for the sync.
    assert not sync.reconciled and sync.open_reason == "submitted assignments are not decided yet"
    # Approved, but our ApproveAssignment's outcome unknown (a lost answer): still open.
    ProviderCall.objects.create(provider="mturk", operation="ApproveAssignment",
                                key="approve-in-doubt", token="t", assignment=assignment)
    Assignment.objects.filter(pk=assignment.pk).update(status=AssignmentStatus.APPROVED)
    sync, _review = stage_sync_and_review(stage=stage)
    assert not sync.reconciled and "no known outcome" in sync.open_reason
    ProviderCall.objects.filter(key="approve-in-doubt").update(
        status=ProviderCallStatus.SUCCEEDED)
    sync, _review = stage_sync_and_review(stage=stage)
    assert sync.reconciled


@pytest.mark.prolific
def test_closed_prolific_study_is_reconciled_once_nobody_is_active(prolific_server, likert_study,
                                                                   researcher, client):
    state = prolific_server.state
    project, _gold, _items = likert_study
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="prolific", judgments_per_item=2, settings={"n_items": 4})
    stage_publish(stage=stage, user=researcher)
    stage.refresh_from_db()
    study_id = stage.settings["prolific_study_id"]
    working = state.participant_start(study_id, "P1")
    stage_close(stage=stage, user=researcher)
    sync, _review = stage_sync_and_review(stage=stage)
    assert not sync.reconciled and "still active on Prolific" in sync.open_reason
    # P1 completes after the stop, on Prolific only: flagged, and then nothing is pending.
    state.participant_complete(working, stage.settings["prolific_completion_code"])
    sync, _review = stage_sync_and_review(stage=stage)
    assert sync.flagged == 1 and sync.reconciled
    assert Assignment.objects.get(external_id=working).status == AssignmentStatus.FLAGGED


def test_a_rejection_that_mturk_auto_approval_overtook_does_not_keep_the_stage_open(
        mturk_server, likert_study, researcher, client):
    """Our RejectAssignment throttled past its retries (never processed), then MTurk approved
    the work itself (auto-approval): the rejection's outcome is known — it did not happen —
    so it no longer holds the closed stage open, and the assignment says so. The rejection
    still keeps the work out of the data here (MTurk paid it: the reward is spent)."""
    from annotation.models import ProviderCall, ProviderCallStatus
    from annotation.services.review import assignment_reject

    state = mturk_server.state
    stage, hit, w1, assignment = w1_submitted_awaiting_review(state, likert_study,
                                                               researcher, client)
    stage_sync_and_review(stage=stage)  # confirmed, not yet due for approval
    mturk_server.throttle_next["RejectAssignment"] = 100
    with pytest.raises(Exception, match="Rate exceeded"):
        assignment_reject(assignment=Assignment.objects.get(pk=assignment.pk), reason="spam")
    mturk_server.throttle_next["RejectAssignment"] = 0
    state.assignments[w1]["AssignmentStatus"] = "Approved"  # MTurk's auto-approval
    stage_close(stage=stage, user=researcher)
    hit.refresh_from_db()
    hit.expires_at = timezone.now() - dt.timedelta(days=1)
    hit.save(update_fields=["expires_at"])

    sync, _review = stage_sync_and_review(stage=stage)
    assert (sync.kept_rejected, sync.mirrored) == (1, 0)
    assert sync.reconciled, sync.open_reason
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED
    assert "before our rejection went through" in assignment.review_note
    call = ProviderCall.objects.get(assignment=assignment, operation="RejectAssignment")
    assert call.status == ProviderCallStatus.FAILED and "overtaken" in call.error


def test_extending_a_stage_lengthens_each_hit_from_its_own_expiry(mturk_server, likert_study,
                                                                 researcher):
    """"Extend by one day" gives each HIT a day more than it had: an open HIT with a week
    left keeps it plus a day (it was cut to a day from now), an expired one reopens for a
    day."""
    from annotation.services.stages import stage_extend

    state = mturk_server.state
    project, _gold, items = likert_study
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="mturk", judgments_per_item=2,
                       settings={"locales": [], "lifetime_seconds": 7 * 86400})
    stage.items.set(items[:10])  # two passages: two HITs
    stage_publish(stage=stage, user=researcher)
    week, expired = stage.hits.order_by("pk")
    past = timezone.now() - dt.timedelta(hours=1)
    expired.status, expired.expires_at = HitStatus.EXPIRED, past
    expired.save(update_fields=["status", "expires_at"])
    state.hits[expired.external_id]["Expiration"] = past.timestamp()
    week_ends = week.expires_at

    stage_extend(stage=stage, seconds=86400, user=researcher)
    week.refresh_from_db()
    expired.refresh_from_db()
    assert week.expires_at == week_ends + dt.timedelta(days=1)
    assert state.hits[week.external_id]["Expiration"] == pytest.approx(
        week.expires_at.timestamp(), abs=1)
    in_a_day = timezone.now() + dt.timedelta(days=1)
    assert abs((expired.expires_at - in_a_day).total_seconds()) < 60
    assert expired.status == HitStatus.OPEN
