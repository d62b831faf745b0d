"""Reconciling providers with local data, reviewing work and paying for it.

`provider_sync` pages through every submission the provider knows for a stage and matches it
with the local assignment (by MTurk AssignmentId / Prolific submission id). Nothing submitted is
ever lost or silently approved: a submission without a local assignment or without local
judgments becomes a FLAGGED assignment for the researcher; decisions made on the provider
(MTurk's auto-approval) are mirrored locally, except that a provider's approval of work nobody
here decided counts only if the stage's review rules pass it (otherwise it is held, its payment
recorded: `_mirror_decision`). A local assignment found in the provider's list
(same id, same worker) is marked confirmed (`provider_confirmed_at`): on MTurk and Prolific only
confirmed work is approved, paid, or graded into a qualification the provider is told about —
the task page accepts any assignment id, the provider's list does not. A local submission the
provider still has not listed when no real one could arrive any more (MTurk: the HIT's expiry
plus the assignment duration) is flagged, never retried for ever.

Closed stages are synced too (`stage_reconcile_mark`) until no more submissions can arrive and
every one is decided; then `Stage.reconciled_at` is set and the periodic sync leaves them."""
from __future__ import annotations

import dataclasses
import datetime as dt

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Hit,
    HitStatus,
    ParticipantVerification,
    ProviderCall,
    ProviderCallStatus,
    Stage,
    StageStatus,
    Worker,
    WorkerQualification,
)
from annotation.providers import SubmissionStatus, get_provider
from annotation.providers.base import Submission
from annotation.services.assignments import stage_sessions_returned, stage_sessions_verify

from .decisions import (
    ASSIGNMENT_OPERATIONS,
    DecisionFollowUp,
    ReviewReport,
    assignment_decision_record,
    assignment_flag,
    assignment_provider_approval_record,
    assignment_provider_approved,
    assignment_review_rules,
    reversal_call_key,
    reversal_note,
)

FLAG_NO_LOCAL = "Submitted on {provider} but no local assignment exists: check and decide by hand."


FLAG_NO_JUDGMENTS = "Submitted on {provider} but no judgments were saved here: decide by hand."


HELD_BUT_PAID = (
    "{provider} approved and paid this work itself (its auto-approval once the delay for "
    "deciding ran out, or a decision on {provider}'s site) while it was held here: it stays held, out of the "
    "data and without a bonus, until you decide. Approve it to count it (nothing is sent "
    "again); reject it to keep its data out ({provider} already paid: a rejection there is no "
    "longer possible)."
)


PAID_BEFORE_REVIEW = (
    "{provider} approved and paid this work itself (its auto-approval once the delay for "
    "deciding ran out, or a decision on {provider}'s site) before our review saw it, and the "
    "stage's review rules would not approve it ({reasons}): it is held, out of the data and "
    "without a bonus, until you decide. Approve it to count it (nothing is sent again); reject "
    "it to keep its data out ({provider} already paid: a rejection there is no longer "
    "possible)."
)


KEPT_REJECTED = (
    "Rejected here: {reason} ({provider} approved and paid it, its auto-approval or a decision "
    "on {provider}'s site, before our rejection went through; a rejection there is no longer "
    "possible: its data stays out of the study)."
)


OVERRULED = (
    "Rejected here, then approved on {provider}'s site (the rejection reversed there): "
    "{provider} paid the reward, and its data counts again. Check it: the rejection here "
    "was overruled."
)


FLAG_NEVER_LISTED = (
    "Submitted here, but {provider} never listed this assignment for this worker (a made-up or "
    "lost assignment id): nothing was approved, paid or granted for it."
)


@dataclasses.dataclass
class SyncReport:
    listed: int = 0
    matched: int = 0
    flagged: int = 0
    mirrored: int = 0
    # Work the provider approved and paid itself that a decision here keeps out of the data:
    # held (flagged) work, or unreviewed work the review rules would not pass: still held;
    # work whose rejection here the provider's approval overtook: still rejected.
    held_paid: int = 0
    kept_rejected: int = 0
    # Work rejected here that the provider lists approved (the rejection reversed on its
    # site): approved here too, counted again, and said so.
    overruled: int = 0
    ignored: int = 0
    active: int = 0  # still being worked on at the provider (Prolific ACTIVE)
    verified: int = 0  # sessions found at the provider for their participant (Prolific)
    not_found: int = 0  # sessions the provider does not list for their participant: FAILED
    # Sessions returned or timed out at the provider (Prolific) whose local assignment this
    # sync gave back (in progress: returned; submitted: flagged).
    given_back: int = 0
    reconciled: bool = False  # this sync marked a closed stage fully reconciled
    open_reason: str = ""  # why a closed stage is not reconciled yet
    # Slots of rejected or blocked work re-offered by this sync — MTurk: new assignments;
    # Prolific: places added to the study — and why others are not yet
    # (`annotation/services/replacements.py`).
    reoffered: int = 0
    reoffer_waiting: list[str] = dataclasses.field(default_factory=list)
    # Why the provider was not told the stage stopped or started collecting (Prolific: the
    # study's PAUSE / START failed; the next sync tries again), "" when it was.
    recruiting_problem: str = ""


def provider_sync(*, stage: Stage) -> SyncReport:
    """Match every provider submission of the stage with local data (see the module doc)."""
    provider = get_provider(stage.provider)
    hits = {hit.external_id: hit for hit in stage.hits.exclude(external_id="")}
    report = SyncReport()
    listed_since = timezone.now()
    sessions: dict[str, str] = {}
    returned: dict[str, str] = {}  # session id -> participant id
    for submission in provider.list_submissions(stage=stage):
        report.listed += 1
        sessions[submission.external_id] = submission.worker_external_id
        if submission.status in (SubmissionStatus.ACTIVE, SubmissionStatus.RETURNED):
            report.ignored += 1
            report.active += submission.status == SubmissionStatus.ACTIVE
            if submission.status == SubmissionStatus.RETURNED:
                returned[submission.external_id] = submission.worker_external_id
            continue
        outcome = _sync_one(stage=stage, submission=submission,
                            hit=hits.get(submission.hit_external_id))
        setattr(report, outcome, getattr(report, outcome) + 1)
    if provider.sessions_listable(stage=stage):
        # The list is complete (paging ended without an error): verify the sessions it names
        # and fail those it should name but does not (annotation/services/assignments/
        # verification.py).
        verified = stage_sessions_verify(stage=stage, listed=sessions, listed_since=listed_since,
                                         returned=set(returned))
        report.verified, report.not_found = verified.verified, verified.failed
    # Prolific reopened their places: their items go back to other participants too.
    report.given_back = stage_sessions_returned(stage=stage, returned=returned)
    return report


def _sync_one(*, stage: Stage, submission: Submission, hit: Hit | None) -> str:
    """Match one provider submission (`_sync_one_locked`, under its assignment's row lock),
    then make the provider calls a decision it mirrored asks for (a qualification pass
    withdrawn or granted again), the lock released."""
    follow_ups: list[DecisionFollowUp] = []
    outcome = _sync_one_locked(stage=stage, submission=submission, hit=hit,
                               follow_ups=follow_ups)
    for follow_up in follow_ups:
        follow_up.run()
    return outcome


@transaction.atomic
def _sync_one_locked(*, stage: Stage, submission: Submission, hit: Hit | None,
                     follow_ups: list[DecisionFollowUp]) -> str:
    worker, _ = Worker.objects.get_or_create(
        provider=stage.provider, external_id=submission.worker_external_id
    )
    assignment = (
        Assignment.objects.select_for_update()
        .filter(stage=stage, external_id=submission.external_id).first()
    )
    provider_name = stage.get_provider_display()
    if assignment is None:
        flagged = Assignment.objects.create(
            stage=stage, hit=hit, worker=worker, external_id=submission.external_id,
            status=AssignmentStatus.FLAGGED, submitted_at=submission.submitted_at,
            provider_confirmed_at=timezone.now(),  # it is the provider's own record
            review_note=FLAG_NO_LOCAL.format(provider=provider_name)
            + _decided_note(submission),
        )
        _held_paid_record(flagged, submission, provider_name=provider_name)
        return "flagged"
    if assignment.worker_id != worker.pk:
        if assignment.status == AssignmentStatus.FLAGGED:
            return "matched"
        return assignment_flag(assignment, f"{provider_name} says worker {worker.external_id} "
                               f"submitted this, but it belongs to {assignment.worker}.")
    if assignment.provider_confirmed_at is None:
        # The provider knows this assignment and this worker: the work may now be approved,
        # paid and counted (see the module docstring).
        assignment.provider_confirmed_at = timezone.now()
        fields = ["provider_confirmed_at"]
        if assignment.verification == ParticipantVerification.PENDING:
            assignment.verification = ParticipantVerification.VERIFIED
            fields.append("verification")
        assignment.save(update_fields=fields)
    has_judgments = assignment.judgments.exists()
    decided = {SubmissionStatus.APPROVED: AssignmentStatus.APPROVED,
               SubmissionStatus.REJECTED: AssignmentStatus.REJECTED}
    if submission.status in decided:
        if not has_judgments:
            if assignment.status == AssignmentStatus.FLAGGED:
                _held_paid_record(assignment, submission, provider_name=provider_name)
                return "matched"
            outcome = assignment_flag(assignment, FLAG_NO_JUDGMENTS.format(
                provider=provider_name) + _decided_note(submission))
            _held_paid_record(assignment, submission, provider_name=provider_name)
            return outcome
        if (assignment.status == AssignmentStatus.REJECTED
                and submission.status == SubmissionStatus.APPROVED
                and assignment_provider_approved(assignment)):
            return "matched"  # held work the provider paid, then rejected here: stays out
        if assignment.status != decided[submission.status]:
            return _mirror_decision(assignment, submission, decided[submission.status],
                                    provider_name=provider_name, follow_ups=follow_ups)
        return "matched"
    # Submitted on the provider, not yet decided there.
    if assignment.status in (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED,
                             AssignmentStatus.FLAGGED):
        return "matched"  # decided here; the review retries the provider call if it failed
    if not has_judgments or assignment.status != AssignmentStatus.SUBMITTED:
        return assignment_flag(assignment, FLAG_NO_JUDGMENTS.format(provider=provider_name))
    if assignment.submitted_at is None:
        assignment.submitted_at = submission.submitted_at or timezone.now()
        assignment.save(update_fields=["submitted_at"])
    return "matched"


def _mirror_decision(assignment: Assignment, submission: Submission, status: str, *,
                     provider_name: str, follow_ups: list[DecisionFollowUp]) -> str:
    """Take over a decision the provider holds: our own call whose answer was lost (the
    worker running it died), or a decision made on the provider (MTurk's auto-approval, a
    decision made there by hand). A provider's approval pays the reward but does not by itself
    put work into the data, where a decision here keeps it out:

    - held (flagged) work nobody here approved stays held (`_held_paid_record`);
    - work nobody here decided yet counts only if the stage's review rules pass it, otherwise
      it is held alike (`PAID_BEFORE_REVIEW`);
    - work whose rejection here was still on its way (our RejectAssignment in doubt) stays
      rejected here, its payment recorded (`KEPT_REJECTED`), as a rejection of held work the
      provider had paid (`decisions._held_paid_reject`);
    - work rejected here that the provider now lists approved (the rejection reversed on the
      provider's site) counts again, and the note says the rejection was overruled there.

    Returns the sync's outcome for it."""
    approved = submission.status == SubmissionStatus.APPROVED
    operation, opposite = (("ApproveAssignment", "RejectAssignment") if approved
                           else ("RejectAssignment", "ApproveAssignment"))
    now = timezone.now()
    ours = ProviderCall.objects.filter(assignment=assignment, operation=operation,
                                       status=ProviderCallStatus.PENDING)
    decided_here = ours.exists()
    in_doubt = ProviderCall.objects.filter(assignment=assignment, operation=opposite,
                                           status=ProviderCallStatus.PENDING)
    rejection = in_doubt.order_by("pk").first() if approved and not decided_here else None
    # The opposite call of ours still in doubt (throttled or unanswered until the provider
    # decided: MTurk's auto-approval overtook a rejection) has an outcome now: the provider
    # holds the other decision, so ours did not stand. Left pending, it kept a closed stage
    # from ever being reconciled ("no known outcome"), and the researcher never learnt that
    # the rejection they asked for did not happen.
    overtaken = in_doubt.update(
        status=ProviderCallStatus.FAILED, completed_at=now,
        error=f"overtaken: {provider_name} holds this assignment {submission.status}")
    if rejection is not None:
        assignment_provider_approval_record(
            assignment, found=f"{provider_name} lists it {submission.status} (before our "
                              f"rejection went through)")
        follow_ups.append(assignment_decision_record(
            assignment, status=AssignmentStatus.REJECTED, submitted_at=submission.submitted_at,
            note=KEPT_REJECTED.format(provider=provider_name, reason=(
                rejection.request or {}).get("reason") or "no reason recorded")))
        return "kept_rejected"
    if approved and not decided_here and assignment.status == AssignmentStatus.FLAGGED:
        return "held_paid" if _held_paid_record(assignment, submission,
                                                provider_name=provider_name) else "matched"
    if approved and not decided_here and assignment.status == AssignmentStatus.SUBMITTED:
        decision = assignment_review_rules(assignment=assignment)
        if decision.action != "approve":
            assignment_flag(assignment, "")
            _held_paid_record(assignment, submission, provider_name=provider_name,
                              note=PAID_BEFORE_REVIEW.format(
                                  provider=provider_name, reasons="; ".join(decision.reasons)))
            return "held_paid"
    outcome = "mirrored"
    # A reversed rejection whose approval's answer was lost (or that the sync reads while it
    # is recorded) keeps who reversed it and why, not a note that reads as the rejection's.
    reversal = ours.filter(key=reversal_call_key(assignment)).values_list(
        "request", flat=True).first()
    if ours.update(status=ProviderCallStatus.SUCCEEDED, completed_at=now,
                   response={"confirmed_by_sync": submission.status}):
        note = ("Our decision, confirmed by the sync." if reversal is None else
                f"{reversal_note(reversal or {}, now)}; confirmed by the sync.")
    elif overtaken:
        note = (f"{submission.status.capitalize()} on {provider_name} before our "
                f"{'rejection' if approved else 'approval'} went through (it did not).")
    elif approved and assignment.status == AssignmentStatus.REJECTED:
        note, outcome = OVERRULED.format(provider=provider_name), "overruled"
    else:
        note = f"Decided on {provider_name}."
    # Counted again where it was rejected (`assignment_decision_record`: targets refreshed, a
    # pass taken back granted again once the row lock is released).
    follow_ups.append(assignment_decision_record(assignment, status=status, note=note,
                                                 submitted_at=submission.submitted_at))
    return outcome


def _held_paid_record(assignment: Assignment, submission: Submission, *,
                      provider_name: str, note: str = "") -> bool:
    """Held (flagged) work the provider lists approved was paid by the provider (MTurk's
    auto-approval): record the payment (money spent, a later approval sends nothing) and say
    so in the note, once; the assignment stays flagged, like held work at every other door
    (`assignment_finished`, `finished_filter`, `judgments_that_count`): out of the data and
    without the automatic bonus until the researcher decides; `note` says why (by default
    `HELD_BUT_PAID`). True when recorded now."""
    if submission.status != SubmissionStatus.APPROVED:
        return False
    if not assignment_provider_approval_record(
            assignment, found=f"{provider_name} lists it {submission.status}"):
        return False
    assignment.review_note = (assignment.review_note + " " + (
        note or HELD_BUT_PAID.format(provider=provider_name))).strip()
    assignment.save(update_fields=["review_note"])
    return True


def _decided_note(submission: Submission) -> str:
    if submission.status in (SubmissionStatus.APPROVED, SubmissionStatus.REJECTED):
        return f" The provider already marked it {submission.status}."
    return ""


@transaction.atomic
def assignment_flag_never_listed(assignment: Assignment) -> None:
    """Flag a local submission the provider never listed, and drop the qualification result
    graded from it (unless already granted): it must not stand in the way of the worker whose
    id it carries (see annotation/services/qualification.py)."""
    fresh = Assignment.objects.select_for_update().get(pk=assignment.pk)
    if fresh.status != AssignmentStatus.SUBMITTED or fresh.provider_confirmed_at is not None:
        return  # confirmed or decided meanwhile
    WorkerQualification.objects.filter(assignment=fresh, granted_externally=False).delete()
    assignment_flag(fresh, FLAG_NEVER_LISTED.format(provider=fresh.stage.get_provider_display()))
    assignment.status, assignment.review_note = fresh.status, fresh.review_note


def stage_reconcile_mark(*, stage: Stage, sync: SyncReport, review: ReviewReport,
                         now: dt.datetime | None = None) -> str:
    """After a sync of a CLOSED stage: set `reconciled_at` once no submission can arrive any
    more and every one is decided (approved, rejected or flagged, no call of ours in doubt).
    Returns why the stage is not reconciled yet ("" once it is)."""
    now = now or timezone.now()
    if stage.status != StageStatus.CLOSED:
        return "the stage is not closed"
    if stage.reconciled_at is not None:
        return ""
    reason = ""
    if review.errors:
        reason = f"{len(review.errors)} review error(s), e.g. {review.errors[0]}"
    elif stage.assignments.filter(status=AssignmentStatus.SUBMITTED).exists():
        reason = "submitted assignments are not decided yet"
    elif ProviderCall.objects.filter(assignment__stage=stage, status=ProviderCallStatus.PENDING,
                                     operation__in=ASSIGNMENT_OPERATIONS).exists():
        reason = "a provider call on an assignment has no known outcome yet"
    else:
        done, why = get_provider(stage.provider).accepts_no_more_submissions(
            stage=stage, now=now, active_listed=sync.active)
        reason = "" if done else why or "the provider may still receive submissions"
    if not reason:
        Stage.objects.filter(pk=stage.pk, reconciled_at__isnull=True).update(reconciled_at=now)
        stage.reconciled_at = now
        sync.reconciled = True
    sync.open_reason = reason
    return reason


def stage_hits_mark_done(*, stage: Stage) -> int:
    """HITs whose every assignment is approved or rejected are done."""
    decided = Count("assignments", filter=Q(assignments__status__in=[
        AssignmentStatus.APPROVED, AssignmentStatus.REJECTED]))
    ids = [hit.pk for hit in stage.hits.exclude(status=HitStatus.DONE).annotate(n=decided)
           if hit.n >= hit.max_assignments]
    return Hit.objects.filter(pk__in=ids).update(status=HitStatus.DONE)
