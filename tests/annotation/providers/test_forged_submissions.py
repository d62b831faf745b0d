"""Forged worker and assignment ids: the task page cannot tell a made-up assignmentId (or
SESSION_ID) from a real one, so the money and the qualifications depend on the provider's own
list. A local submission the provider never lists gets no qualification, no approval and no
bonus, and ends flagged once a real one could no longer be missing from the list."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from annotation.models import (
    AssignmentStatus,
    ProviderCall,
    StageKind,
    StageStatus,
    TaskKind,
    WorkerQualification,
)
from annotation.services.qualification import (
    QualificationUnconfirmed,
    qualification_grade,
    qualification_grant,
)
from annotation.services.review import (
    ReviewError,
    assignment_approve,
    assignment_bonus_pay,
    assignment_reject,
    stage_auto_review,
    stage_sync_and_review,
)
from annotation.services.stages import stage_publish
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)
from testing.workers_sim import gold_score, mturk_worker_submits

pytestmark = pytest.mark.django_db


def forged_submission(stage, *, worker_id: str, external_id: str, hit=None, right: bool,
                      provider: str):
    """What a forged page visit leaves behind: a submitted local assignment with judgments (and,
    on a qualification, its graded result), in a worker id of the forger's choosing."""
    worker = make_worker(provider=provider, external_id=worker_id)
    items = list(hit.items.all()) if hit is not None else list(stage.items.all())
    assignment = make_assignment(stage, worker=worker, items=items, hit=hit,
                                 external_id=external_id, status=AssignmentStatus.SUBMITTED,
                                 submitted_at=timezone.now())
    for item in items:
        gold = (item.gold or {}).get("score", 3)
        score = gold if right else (1 if gold != 1 else 5)
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                      score=score, time_spent_ms=6000)
    if stage.kind == StageKind.QUALIFICATION:
        qualification_grade(assignment=assignment)  # graded on submit, as the page does
    return assignment


@pytest.mark.mturk
def test_forged_mturk_submission_gets_nothing_and_ends_flagged(mturk_server, likert_study,
                                                                researcher, client):
    state = mturk_server.state
    project, _gold, _items = likert_study
    project.bonus_per_correct = Decimal("0.05")
    project.save()
    stage = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                       provider="mturk", settings={"max_workers": 6, "locales": []})
    stage_publish(stage=stage, user=researcher)
    hit = stage.hits.get()
    # A real worker, on MTurk and on our page.
    real_id = state.worker_accept(hit.external_id, "WOK")
    real = mturk_worker_submits(client, stage=stage, hit_id=hit.external_id, worker_id="WOK",
                                assignment_id=real_id, answer_for=gold_score)
    state.worker_submit(real_id)
    # Forged: a real worker's id with wrong answers (to lock them out), and a made-up worker
    # with right answers (to get paid and qualified). MTurk never heard of either assignment.
    lockout = forged_submission(stage, worker_id="WREAL", external_id="F" * 30, hit=hit,
                                right=False, provider="mturk")
    freeride = forged_submission(stage, worker_id="WFAKE", external_id="G" * 30, hit=hit,
                                 right=True, provider="mturk")
    assert WorkerQualification.objects.filter(stage=stage).count() == 3  # graded locally

    sync, review = stage_sync_and_review(stage=stage)
    assert (sync.listed, review.approved, review.granted, review.bonuses) == (1, 1, 1, 1)
    assert review.unconfirmed == 2 and review.never_listed == 0 and not review.errors
    real.refresh_from_db()
    assert real.status == AssignmentStatus.APPROVED and real.provider_confirmed_at is not None
    stage.refresh_from_db()
    qual_type = stage.settings["mturk_qualification_type_id"]
    # Only the real worker's result reached MTurk: the real WREAL is not locked out there.
    assert state.scores == {(qual_type, "WOK"): 100}
    assert [b["WorkerId"] for b in state.bonuses] == ["WOK"]
    assert state.requirements_met("WREAL", hit.external_id)
    for forged in (lockout, freeride):
        forged.refresh_from_db()
        assert forged.status == AssignmentStatus.SUBMITTED and forged.provider_confirmed_at is None
        # Every path that spends money or decides refuses unconfirmed work.
        with pytest.raises(ReviewError, match="has not listed this assignment"):
            assignment_approve(assignment=forged)
        with pytest.raises(ReviewError, match="has not listed this assignment"):
            assignment_reject(assignment=forged, reason="no")
        with pytest.raises(QualificationUnconfirmed):
            qualification_grant(qualification=WorkerQualification.objects.get(
                worker=forged.worker, stage=stage))
    forged_approved = forged_submission(stage, worker_id="WFAKE2", external_id="H" * 30,
                                        hit=hit, right=True, provider="mturk")
    forged_approved.status = AssignmentStatus.APPROVED  # e.g. approved by hand by mistake
    forged_approved.save()
    with pytest.raises(ReviewError, match="has not listed this assignment"):
        assignment_bonus_pay(assignment=forged_approved, amount=Decimal("1.00"), reason="x")

    # Once no real submission could still be missing (HIT expiry + assignment duration), the
    # forged ones are flagged — not retried for ever — and their results are dropped.
    hit.refresh_from_db()
    later = hit.expires_at + dt.timedelta(seconds=project.assignment_timeout_minutes * 60 + 1)
    review = stage_auto_review(stage=stage, now=later)
    assert review.never_listed == 2 and (review.approved, review.granted) == (0, 0)
    for forged in (lockout, freeride):
        forged.refresh_from_db()
        assert forged.status == AssignmentStatus.FLAGGED
        assert "never listed this assignment" in forged.review_note
        assert not WorkerQualification.objects.filter(worker=forged.worker, stage=stage).exists()
    assert state.scores == {(qual_type, "WOK"): 100}
    assert state.calls.count("ApproveAssignment") == 1
    assert len(state.bonuses) == 1
    assert not ProviderCall.objects.filter(assignment__in=[lockout, freeride]).exists()
    again = stage_auto_review(stage=stage, now=later)  # decided once; nothing is retried
    assert (again.never_listed, again.unconfirmed) == (0, 0)


@pytest.mark.prolific
def test_forged_prolific_session_gets_nothing_and_ends_flagged(prolific_server, likert_study,
                                                                researcher):
    state = prolific_server.state
    project, _gold, items = likert_study
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="prolific", judgments_per_item=2)
    stage.items.set(items[:5])
    stage_publish(stage=stage, user=researcher)
    forged = forged_submission(stage, worker_id="P9", external_id="s" + "0" * 23, right=True,
                               provider="prolific")
    sync, review = stage_sync_and_review(stage=stage)
    assert (sync.listed, review.approved, review.unconfirmed) == (0, 0, 1)
    later = forged.submitted_at + dt.timedelta(days=1, seconds=1)
    review = stage_auto_review(stage=stage, now=later)
    forged.refresh_from_db()
    assert review.never_listed == 1 and forged.status == AssignmentStatus.FLAGGED
    assert state.payments == [] and not any(
        s["status"] == "APPROVED" for s in state.submissions.values())


def test_a_confirmed_result_replaces_an_unconfirmed_failure(db):
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project, kind=StageKind.QUALIFICATION, provider="mturk")
    items = [make_item(project, gold={"score": 3}) for _ in range(10)]
    worker = make_worker(provider="mturk", external_id="WREAL")

    def submitted(part, score, confirmed):
        assignment = make_assignment(stage, worker=worker, items=part,
                                     status=AssignmentStatus.SUBMITTED,
                                     provider_confirmed_at=timezone.now() if confirmed else None)
        for item in part:
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                          score=score)
        return assignment

    forged = submitted(items[:4], 1, confirmed=False)
    first = qualification_grade(assignment=forged)
    assert not first.passed and first.assignment == forged
    other_unconfirmed = submitted(items[4:5], 3, confirmed=False)
    assert qualification_grade(assignment=other_unconfirmed) == first  # first stands
    real = submitted(items[5:], 3, confirmed=True)
    result = qualification_grade(assignment=real)
    assert result.pk == first.pk and result.passed and result.assignment == real
    # A confirmed result stands against anything later.
    assert qualification_grade(assignment=forged).assignment == real


def _mturk_page(client, stage, hit, *, assignment_id: str, worker_id: str):
    from urllib.parse import urlencode

    from django.urls import reverse

    return client.get(reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk}) + "?"
                      + urlencode({"assignmentId": assignment_id, "hitId": hit.external_id,
                                   "workerId": worker_id,
                                   "turkSubmitTo": "https://workersandbox.mturk.com"}))


def _varied(item_id: int) -> dict:
    # Varied answers: the first HIT is one passage of 2 to 5 items (the seeded plan reads the
    # stage's id), and one score on all 5 would be held as straight-lining.
    return {"score": 1 + item_id % 5}


def _full_hit(mturk_server, likert_study, researcher, client, *, third: str):
    """A published MTurk trial whose first HIT (3 assignments) has two workers' work submitted
    on MTurk and here, and a third worker who accepted it and opened our page: the trial, the
    HIT, its number of regular items and the third worker's assignmentId."""
    from tests.support.providers import make_stages, open_to_every_worker

    state = mturk_server.state
    project, _gold, _items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    open_to_every_worker(trial)
    trial.save()
    stage_publish(stage=trial, user=researcher)
    hit = trial.hits.order_by("pk").first()
    assert hit.max_assignments == 3
    for worker_id in ("W1", "W2"):
        done = state.worker_accept(hit.external_id, worker_id)
        mturk_worker_submits(client, stage=trial, hit_id=hit.external_id, worker_id=worker_id,
                             assignment_id=done, answer_for=_varied)
        state.worker_submit(done)
    third_id = state.worker_accept(hit.external_id, third)
    assert _mturk_page(client, trial, hit, assignment_id=third_id,
                       worker_id=third).status_code == 200
    return trial, hit, hit.items.filter(is_gold_check=False, is_practice=False).count(), third_id


def _progress(stage):
    from annotation.selectors import stage_progress

    return stage_progress(stages=[stage])[stage.pk]


def _counted(stage) -> int:
    return _progress(stage).judgments


@pytest.mark.mturk
@pytest.mark.reliability
def test_a_slot_returned_on_mturk_opens_to_the_next_worker_at_once(
        mturk_server, likert_study, researcher, client):
    """Rehearsal: a worker accepted the HIT, opened our page and returned the HIT on MTurk,
    which gave the slot to the next worker at once. Our page refused that worker ("This HIT
    has no assignments left") until the returned assignment's duration was over (+10 min),
    and after every return on MTurk each worker who took the slot was refused in turn. Now
    the next worker is admitted over the local count, their work counts once MTurk lists it,
    and the stage ends with exactly its redundancy. The returned worker's late submit from
    the page left open is flagged once MTurk's duration is over, as before."""
    from annotation.models import Assignment, ParticipantVerification
    from annotation.providers.mturk_protocol import assignment_duration_seconds

    state = mturk_server.state
    trial, hit, regular, returned_id = _full_hit(mturk_server, likert_study, researcher,
                                                 client, third="WRET")
    state.worker_return(returned_id, "WRET")
    taker_id = state.worker_accept(hit.external_id, "W4")  # MTurk gave the slot back

    taker = mturk_worker_submits(client, stage=trial, hit_id=hit.external_id, worker_id="W4",
                                 assignment_id=taker_id, answer_for=_varied)
    state.worker_submit(taker_id)
    assert taker.status == AssignmentStatus.SUBMITTED
    assert taker.verification == ParticipantVerification.PENDING
    assert "Admitted over the HIT's local count" in taker.review_note
    assert _counted(trial) == 2 * regular  # not before MTurk lists it
    progress = _progress(trial)
    assert progress.awaiting == regular
    assert f"{regular} waiting for the provider to list or verify" in progress.text()
    # The returned worker presses Submit in the page still open (MTurk refuses it there).
    returned = mturk_worker_submits(client, stage=trial, hit_id=hit.external_id,
                                    worker_id="WRET", assignment_id=returned_id,
                                    answer_for=lambda _item: {"score": 4})
    assert returned.status == AssignmentStatus.SUBMITTED

    sync, review = stage_sync_and_review(stage=trial)
    assert (sync.listed, review.unconfirmed) == (3, 1)
    taker.refresh_from_db()
    assert taker.provider_confirmed_at is not None
    assert taker.verification == ParticipantVerification.VERIFIED
    assert Assignment.objects.filter(hit=hit, provider_confirmed_at__isnull=False).count() == 3

    after = returned.started_at + dt.timedelta(seconds=assignment_duration_seconds(trial),
                                               minutes=11)
    hit.refresh_from_db()
    assert after < hit.expires_at  # well before the HIT's own end
    review = stage_auto_review(stage=trial, now=after)
    assert review.never_listed == 1
    returned.refresh_from_db()
    assert returned.status == AssignmentStatus.FLAGGED
    assert "never listed this assignment" in returned.review_note
    assert _counted(trial) == hit.max_assignments * regular  # exactly its redundancy
    assert _progress(trial).awaiting == 0
    # MTurk's three slots are taken: a made-up id now finds none here either.
    assert "no assignments left" in _mturk_page(client, trial, hit, assignment_id="X" * 30,
                                                worker_id="WX").content.decode()


@pytest.mark.mturk
@pytest.mark.reliability
def test_made_up_ids_over_the_count_are_bounded_and_never_count(
        mturk_server, likert_study, researcher, client):
    """While a worker is really working on a full HIT, a made-up assignment id is admitted
    over the local count (it cannot be told from a worker given a returned slot), at most one
    per assignment MTurk has not listed as submitted; its judgments never count, and it ends
    flagged as never listed. The next made-up id is refused."""
    from annotation.models import Assignment, ParticipantVerification

    state = mturk_server.state
    trial, hit, regular, working_id = _full_hit(mturk_server, likert_study, researcher,
                                                client, third="WA")
    sync, _review = stage_sync_and_review(stage=trial)  # W1 and W2 listed: one holder left
    assert sync.listed == 2

    forged = mturk_worker_submits(client, stage=trial, hit_id=hit.external_id,
                                  worker_id="WF1", assignment_id="F" * 30,
                                  answer_for=_varied)
    assert forged.verification == ParticipantVerification.PENDING
    assert "Admitted over the HIT's local count" in forged.review_note
    assert _counted(trial) == 2 * regular and _progress(trial).awaiting == regular
    page = _mturk_page(client, trial, hit, assignment_id="G" * 30, worker_id="WF2")
    assert "no assignments left" in page.content.decode()
    assert not Assignment.objects.filter(external_id="G" * 30).exists()

    mturk_worker_submits(client, stage=trial, hit_id=hit.external_id, worker_id="WA",
                         assignment_id=working_id, answer_for=_varied)
    state.worker_submit(working_id)
    sync, review = stage_sync_and_review(stage=trial)
    assert (sync.listed, review.unconfirmed) == (3, 1)
    assert _counted(trial) == 3 * regular  # the made-up one still does not count

    later = forged.started_at + dt.timedelta(days=30)
    review = stage_auto_review(stage=trial, now=later)
    forged.refresh_from_db()
    assert review.never_listed == 1 and forged.status == AssignmentStatus.FLAGGED
    assert "never listed this assignment" in forged.review_note
    assert _counted(trial) == 3 * regular
    assert not ProviderCall.objects.filter(assignment=forged).exists()
