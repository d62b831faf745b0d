"""Reconciling providers with local data, reviewing work and paying for it.

`provider_sync` pages through every submission the provider knows for a stage and matches it
with the local assignment (by MTurk AssignmentId / Prolific submission id). Nothing submitted is
ever lost or silently approved: a submission without a local assignment or without local
judgments becomes a FLAGGED assignment for the researcher; decisions made on the provider
(MTurk's auto-approval) are mirrored locally. A local assignment found in the provider's list
(same id, same worker) is marked confirmed (`provider_confirmed_at`): on MTurk and Prolific only
confirmed work is approved, paid, or graded into a qualification the provider is told about —
the task page accepts any assignment id, the provider's list does not. A local submission the
provider still has not listed when no real one could arrive any more (MTurk: the HIT's expiry
plus the assignment duration) is flagged, never retried for ever.

Closed stages are synced too (`stage_reconcile_mark`) until no more submissions can arrive and
every one is decided; then `Stage.reconciled_at` is set and the periodic sync leaves them.

`stage_auto_review` approves submitted work after the stage's delay when it passes the rules
(gold/attention accuracy, minimum time per item, no straight-lining), rejects with the reasons
when `auto_reject` is on (otherwise flags it for the researcher), pays the STARC bonus per
correct answer, and blocks workers after repeated rejections. Each provider side effect goes
through `provider_call_run` with a fixed key, so a rerun never approves, pays or blocks twice.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import statistics
from collections import Counter
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Hit,
    HitStatus,
    Provider,
    ProviderCall,
    ProviderCallStatus,
    Stage,
    StageKind,
    StageStatus,
    TaskKind,
    Worker,
    WorkerQualification,
)
from annotation.providers import SubmissionStatus, get_provider
from annotation.providers.base import Submission, call_token_is_stale
from annotation.selectors import blocked_worker_ids_for

from .provider_calls import new_token, provider_call_run
from .qualification import (
    answer_is_correct,
    assignment_provider_confirmed,
    qualification_grade,
    qualification_grant,
    qualification_source_confirmed,
)

DEFAULT_RULES = {
    "approve_after_seconds": 0,  # wait this long after submission before auto-approving
    "min_gold_accuracy": 0.5,  # on gold/attention items, when the assignment has any
    "min_seconds_per_item": 2.0,  # mean time per item below this looks like clicking through
    "straightline_min_items": 5,  # straight-lining is only judged on this many items or more
    "max_same_answer_share": 1.0,  # every answer identical = straight-lining
    "auto_reject": False,  # False: failing work is held for the researcher instead
    "block_after_rejections": 0,  # block a worker after this many rejections (0: never)
}
FLAG_NO_LOCAL = "Submitted on {provider} but no local assignment exists: check and decide by hand."
FLAG_NO_JUDGMENTS = "Submitted on {provider} but no judgments were saved here: decide by hand."
FLAG_NEVER_LISTED = (
    "Submitted here, but {provider} never listed this assignment for this worker (a made-up or "
    "lost assignment id): nothing was approved, paid or granted for it."
)
ASKED_TO_RETURN = ("asked to return: failed the comprehension check twice (Prolific: never "
                   "rejected for this; excluded from analysis)")
# Our own calls on an assignment whose outcome is still unknown keep a closed stage syncing.
ASSIGNMENT_OPERATIONS = ("ApproveAssignment", "RejectAssignment", "SendBonus", "SetUpBonus",
                         "PayBonus")


class ReviewError(Exception):
    pass


@dataclasses.dataclass
class SyncReport:
    listed: int = 0
    matched: int = 0
    flagged: int = 0
    mirrored: int = 0
    ignored: int = 0
    active: int = 0  # still being worked on at the provider (Prolific ACTIVE)
    reconciled: bool = False  # this sync marked a closed stage fully reconciled
    open_reason: str = ""  # why a closed stage is not reconciled yet


@dataclasses.dataclass
class ReviewDecision:
    action: str  # "approve" | "reject" | "hold"
    reasons: list[str]
    metrics: dict


@dataclasses.dataclass
class ReviewReport:
    graded: int = 0
    granted: int = 0
    approved: int = 0
    rejected: int = 0
    held: int = 0
    bonuses: int = 0
    blocked: int = 0
    unconfirmed: int = 0  # submitted here, not (yet) listed by the provider: waiting
    never_listed: int = 0  # ... and flagged: the provider never listed them in time
    errors: list[str] = dataclasses.field(default_factory=list)


def stage_rules(stage: Stage) -> dict:
    return {**DEFAULT_RULES, **((stage.settings or {}).get("review") or {})}


# --- sync --------------------------------------------------------------------------------------


def provider_sync(*, stage: Stage) -> SyncReport:
    """Match every provider submission of the stage with local data (see the module doc)."""
    provider = get_provider(stage.provider)
    hits = {hit.external_id: hit for hit in stage.hits.exclude(external_id="")}
    report = SyncReport()
    for submission in provider.list_submissions(stage=stage):
        report.listed += 1
        if submission.status in (SubmissionStatus.ACTIVE, SubmissionStatus.RETURNED):
            report.ignored += 1
            report.active += submission.status == SubmissionStatus.ACTIVE
            continue
        outcome = _sync_one(stage=stage, submission=submission,
                            hit=hits.get(submission.hit_external_id))
        setattr(report, outcome, getattr(report, outcome) + 1)
    return report


@transaction.atomic
def _sync_one(*, stage: Stage, submission: Submission, hit: Hit | None) -> str:
    worker, _ = Worker.objects.get_or_create(
        provider=stage.provider, external_id=submission.worker_external_id
    )
    assignment = (
        Assignment.objects.select_for_update()
        .filter(stage=stage, external_id=submission.external_id).first()
    )
    provider_name = stage.get_provider_display()
    if assignment is None:
        Assignment.objects.create(
            stage=stage, hit=hit, worker=worker, external_id=submission.external_id,
            status=AssignmentStatus.FLAGGED, submitted_at=submission.submitted_at,
            provider_confirmed_at=timezone.now(),  # it is the provider's own record
            review_note=FLAG_NO_LOCAL.format(provider=provider_name)
            + _decided_note(submission),
        )
        return "flagged"
    if assignment.worker_id != worker.pk:
        if assignment.status == AssignmentStatus.FLAGGED:
            return "matched"
        return _flag(assignment, f"{provider_name} says worker {worker.external_id} submitted "
                                 f"this, but it belongs to {assignment.worker}.")
    if assignment.provider_confirmed_at is None:
        # The provider knows this assignment and this worker: the work may now be approved,
        # paid and counted (see the module docstring).
        assignment.provider_confirmed_at = timezone.now()
        assignment.save(update_fields=["provider_confirmed_at"])
    has_judgments = assignment.judgments.exists()
    decided = {SubmissionStatus.APPROVED: AssignmentStatus.APPROVED,
               SubmissionStatus.REJECTED: AssignmentStatus.REJECTED}
    if submission.status in decided:
        if not has_judgments:
            if assignment.status == AssignmentStatus.FLAGGED:
                return "matched"
            return _flag(assignment, FLAG_NO_JUDGMENTS.format(provider=provider_name)
                         + _decided_note(submission))
        if assignment.status != decided[submission.status]:
            # Our own call whose answer was lost (the worker running it died), or a decision
            # made on the provider (MTurk's auto-approval, a decision made there by hand).
            operation = ("ApproveAssignment" if submission.status == SubmissionStatus.APPROVED
                         else "RejectAssignment")
            ours = ProviderCall.objects.filter(assignment=assignment, operation=operation,
                                               status=ProviderCallStatus.PENDING)
            if ours.update(status=ProviderCallStatus.SUCCEEDED, completed_at=timezone.now(),
                           response={"confirmed_by_sync": submission.status}):
                note = "Our decision, confirmed by the sync."
            else:
                note = f"Decided on {provider_name}."
            assignment.status = decided[submission.status]
            assignment.reviewed_at = assignment.reviewed_at or timezone.now()
            assignment.submitted_at = assignment.submitted_at or submission.submitted_at
            assignment.review_note = (assignment.review_note + " " + note).strip()
            assignment.save(update_fields=["status", "reviewed_at", "submitted_at", "review_note"])
            return "mirrored"
        return "matched"
    # Submitted on the provider, not yet decided there.
    if assignment.status in (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED,
                             AssignmentStatus.FLAGGED):
        return "matched"  # decided here; the review retries the provider call if it failed
    if not has_judgments or assignment.status != AssignmentStatus.SUBMITTED:
        return _flag(assignment, FLAG_NO_JUDGMENTS.format(provider=provider_name))
    if assignment.submitted_at is None:
        assignment.submitted_at = submission.submitted_at or timezone.now()
        assignment.save(update_fields=["submitted_at"])
    return "matched"


def _decided_note(submission: Submission) -> str:
    if submission.status in (SubmissionStatus.APPROVED, SubmissionStatus.REJECTED):
        return f" The provider already marked it {submission.status}."
    return ""


def _flag(assignment: Assignment, note: str) -> str:
    assignment.status = AssignmentStatus.FLAGGED
    assignment.review_note = (assignment.review_note + " " + note).strip()
    assignment.save(update_fields=["status", "review_note"])
    return "flagged"


# --- decisions on one assignment --------------------------------------------------------------


def assignment_review_rules(*, assignment: Assignment) -> ReviewDecision:
    """Apply the stage's rules to a submitted assignment (no writes)."""
    stage = assignment.stage
    rules = stage_rules(stage)
    judgments = list(assignment.judgments.select_related("item", "item__project"))
    if not judgments:
        return ReviewDecision("hold", ["no judgments saved"], {})
    reasons: list[str] = []
    metrics: dict = {"n": len(judgments)}
    if stage.provider == Provider.PROLIFIC and stage.kind != StageKind.QUALIFICATION:
        # Prolific: a participant who failed a comprehension check (a practice item; two
        # attempts, services/assignments.py) is asked to return the study and must never be
        # rejected for it, whatever else the rules find: held, and excluded from analysis.
        tolerance = stage.project.qualification_tolerance
        failed = [j for j in judgments if j.item.is_practice and answer_is_correct(
            item=j.item, judgment=j, tolerance=tolerance) is False]
        if failed:
            metrics["comprehension_failed"] = len(failed)
            return ReviewDecision("hold", [ASKED_TO_RETURN], metrics)
    if stage.kind != StageKind.QUALIFICATION:  # qualification takers are paid either way
        checks = [j for j in judgments if j.item.is_gold_check and j.item.gold]
        if checks:
            tolerance = stage.project.qualification_tolerance
            right = sum(bool(answer_is_correct(item=j.item, judgment=j, tolerance=tolerance))
                        for j in checks)
            accuracy = right / len(checks)
            metrics["gold_accuracy"] = accuracy
            # Prolific allows rejecting for attention checks only after two failed ones.
            enough = stage.provider != "prolific" or len(checks) - right >= 2
            if accuracy < rules["min_gold_accuracy"] and enough:
                reasons.append(f"accuracy on check items {accuracy:.0%} is below "
                               f"{rules['min_gold_accuracy']:.0%}")
        times = [j.time_spent_ms for j in judgments if j.time_spent_ms is not None]
        if times:
            mean_seconds = statistics.fmean(times) / 1000
            metrics["seconds_per_item"] = mean_seconds
            if mean_seconds < rules["min_seconds_per_item"]:
                reasons.append(f"{mean_seconds:.1f} s per item is below the minimum of "
                               f"{rules['min_seconds_per_item']} s")
        if len(judgments) >= rules["straightline_min_items"]:
            values = [j.score if stage.project.kind == TaskKind.LIKERT else j.choice
                      for j in judgments]
            share = Counter(values).most_common(1)[0][1] / len(values)
            metrics["same_answer_share"] = share
            if share >= rules["max_same_answer_share"]:
                reasons.append(f"the same answer on {share:.0%} of {len(values)} items")
    if reasons:
        return ReviewDecision("reject" if rules["auto_reject"] else "hold", reasons, metrics)
    return ReviewDecision("approve", [], metrics)


def _require_confirmed(assignment: Assignment, action: str) -> None:
    """Refuse to approve, reject or pay work the provider never listed (see the module doc)."""
    if not assignment_provider_confirmed(assignment):
        raise ReviewError(
            f"{assignment}: {assignment.stage.get_provider_display()} has not listed this "
            f"assignment for this worker (yet); cannot {action} it — the sync confirms real "
            f"submissions")


def assignment_approve(*, assignment: Assignment, feedback: str = "",
                       allow_flagged: bool = False) -> Assignment:
    allowed = {AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED}
    if allow_flagged:
        allowed.add(AssignmentStatus.FLAGGED)
    if assignment.status not in allowed:
        raise ReviewError(f"{assignment} is {assignment.get_status_display()}; cannot approve")
    if assignment.status == AssignmentStatus.APPROVED:
        return assignment  # approved before: nothing is sent again
    _require_confirmed(assignment, "approve")
    provider = get_provider(assignment.stage.provider)
    provider_call_run(
        provider=assignment.stage.provider, operation="ApproveAssignment",
        key=f"{assignment.stage.provider}:approve:{assignment.pk}",
        call_fn=lambda _token: provider.approve(assignment=assignment, feedback=feedback),
        stage=assignment.stage, assignment=assignment, worker=assignment.worker,
    )
    assignment.status = AssignmentStatus.APPROVED
    assignment.reviewed_at = assignment.reviewed_at or timezone.now()
    assignment.save(update_fields=["status", "reviewed_at"])
    return assignment


def assignment_reject(*, assignment: Assignment, reason: str,
                      allow_flagged: bool = False) -> Assignment:
    if not reason.strip():
        raise ReviewError("a rejection needs a reason the worker can read")
    allowed = {AssignmentStatus.SUBMITTED, AssignmentStatus.REJECTED}
    if allow_flagged:
        allowed.add(AssignmentStatus.FLAGGED)
    if assignment.status not in allowed:
        raise ReviewError(f"{assignment} is {assignment.get_status_display()}; cannot reject")
    if assignment.status == AssignmentStatus.REJECTED:
        return assignment  # rejected before: nothing is sent, the note is not added again
    _require_confirmed(assignment, "reject")
    provider = get_provider(assignment.stage.provider)
    provider_call_run(
        provider=assignment.stage.provider, operation="RejectAssignment",
        key=f"{assignment.stage.provider}:reject:{assignment.pk}",
        call_fn=lambda _token: provider.reject(assignment=assignment, reason=reason),
        stage=assignment.stage, assignment=assignment, worker=assignment.worker,
        request={"reason": reason},
    )
    assignment.status = AssignmentStatus.REJECTED
    assignment.reviewed_at = assignment.reviewed_at or timezone.now()
    assignment.review_note = (assignment.review_note + f" Rejected: {reason}").strip()
    assignment.save(update_fields=["status", "reviewed_at", "review_note"])
    return assignment


def bonus_call_key(*, assignment: Assignment, amount: Decimal, reason: str,
                   key: str | None = None) -> str:
    """The idempotency key of a bonus: `key` names it (e.g. "per-correct"); by default the
    amount and reason, so a double-clicked admin action pays once."""
    amount = Decimal(amount).quantize(Decimal("0.01"))
    # hashlib, not hash(): str hashes differ between processes (two web workers, a retry).
    key = key or f"manual:{amount}:{hashlib.sha256(reason.encode()).hexdigest()[:16]}"
    return f"{assignment.stage.provider}:bonus:{assignment.pk}:{key}"[:200]


def bonus_already_paid(*, assignment: Assignment, amount: Decimal, reason: str,
                       key: str | None = None) -> bool:
    return ProviderCall.objects.filter(
        key=bonus_call_key(assignment=assignment, amount=amount, reason=reason, key=key),
        status=ProviderCallStatus.SUCCEEDED).exists()


def assignment_bonus_pay(*, assignment: Assignment, amount: Decimal, reason: str,
                         key: str | None = None) -> Assignment:
    """Pay a bonus once. `key` names the bonus (e.g. "per-correct"); the same key never pays
    twice, whatever happens to the request; the default key is the amount and reason, so a
    double-clicked admin action pays once too."""
    amount = Decimal(amount).quantize(Decimal("0.01"))
    if amount <= 0:
        raise ReviewError("a bonus must be positive")
    if assignment.status != AssignmentStatus.APPROVED:
        raise ReviewError("only approved assignments get bonuses")
    _require_confirmed(assignment, "pay a bonus for")
    stage = assignment.stage
    call_key = bonus_call_key(assignment=assignment, amount=amount, reason=reason, key=key)
    provider = get_provider(stage.provider)
    # A payment first tried longer ago than the provider remembers its token (MTurk: 24 h) is
    # looked up before it is sent again: the first attempt may have paid.
    stale = call_token_is_stale(key=call_key, window=provider.token_dedup_window)

    def pay(token: str) -> dict:
        if stale and _bonus_paid_by_earlier_attempt(provider, assignment, amount, reason):
            return {"paid_by_earlier_attempt": f"{amount:.2f}", "found_by": "ListBonusPayments"}
        return provider.bonus(assignment=assignment, amount=amount, reason=reason, token=token)

    provider_call_run(
        provider=stage.provider, operation="SendBonus", key=call_key,
        token=new_token(f"qaj-bonus-{assignment.pk}"), call_fn=pay,
        stage=stage, assignment=assignment, worker=assignment.worker, amount=amount,
        request={"reason": reason},
    )
    # The paid total is recomputed from the recorded calls, so it cannot drift on retries.
    paid = ProviderCall.objects.filter(
        assignment=assignment, operation="SendBonus", status=ProviderCallStatus.SUCCEEDED
    ).aggregate(total=Sum("amount"))["total"] or Decimal("0")
    assignment.bonus_paid = paid
    assignment.save(update_fields=["bonus_paid"])
    return assignment


def _bonus_paid_by_earlier_attempt(provider, assignment: Assignment, amount: Decimal,
                                   reason: str) -> bool:
    """Whether the provider lists more payments of this amount and reason for the assignment
    than we have recorded as paid — then the call in doubt is one of them."""
    listed = provider.bonus_payments(assignment=assignment)
    if listed is None:
        return False
    reason = reason[:1024]
    remote = sum(1 for paid, why in listed if paid == amount and why == reason)
    recorded = sum(
        1 for call in ProviderCall.objects.filter(
            assignment=assignment, operation="SendBonus", status=ProviderCallStatus.SUCCEEDED,
            amount=amount)
        if (call.request or {}).get("reason", "")[:1024] == reason
    )
    return remote > recorded


def correct_answer_bonus(*, assignment: Assignment) -> Decimal:
    """STARC: the project's bonus per correct answer times the correct answers."""
    per = assignment.stage.project.bonus_per_correct
    if not per or per <= 0:
        return Decimal("0")
    correct = 0
    for judgment in assignment.judgments.select_related("item", "item__project"):
        verdict = judgment.extra.get("is_correct") if judgment.extra else None
        if verdict is None:
            verdict = answer_is_correct(item=judgment.item, judgment=judgment)
        correct += bool(verdict)
    return per * correct


def worker_block_everywhere(*, worker: Worker, reason: str, by=None) -> Worker:
    """Block here (for `by`'s projects, or globally: see services/workers.py) and on the
    worker's provider (CreateWorkerBlock: MTurk blocks are per requester account, the account
    of the study that blocks)."""
    from .workers import worker_block

    worker = worker_block(worker=worker, reason=reason, by=by)
    provider = get_provider(worker.provider)
    provider_call_run(
        provider=worker.provider, operation="BlockWorker",
        key=f"{worker.provider}:block:{worker.pk}:{new_token('b')}",
        call_fn=lambda _token: provider.block(worker=worker, reason=reason),
        worker=worker, request={"reason": reason},
    )
    return worker


def worker_unblock_everywhere(*, worker: Worker, reason: str = "", by=None) -> Worker:
    from .workers import worker_unblock

    provider = get_provider(worker.provider)
    provider_call_run(
        provider=worker.provider, operation="UnblockWorker",
        key=f"{worker.provider}:unblock:{worker.pk}:{new_token('u')}",
        call_fn=lambda _token: provider.unblock(worker=worker, reason=reason or "unblocked"),
        worker=worker,
    )
    return worker_unblock(worker=worker, by=by)


def workers_notify(*, workers: list[Worker], subject: str, message: str) -> dict:
    by_provider: dict[str, list[Worker]] = {}
    for worker in workers:
        by_provider.setdefault(worker.provider, []).append(worker)
    return {
        name: get_provider(name).notify(workers=group, subject=subject, message=message)
        for name, group in by_provider.items()
    }


# --- the periodic review of a stage ----------------------------------------------------------


def stage_auto_review(*, stage: Stage, now: dt.datetime | None = None) -> ReviewReport:
    """Grade qualifications, grant them, approve/reject/hold, pay bonuses, block (see module)."""
    now = now or timezone.now()
    rules = stage_rules(stage)
    report = ReviewReport()
    provider = get_provider(stage.provider)
    submitted = stage.assignments.filter(status=AssignmentStatus.SUBMITTED).select_related(
        "worker", "stage", "stage__project", "hit")
    if provider.confirms_submissions:
        # Only work the provider has listed is reviewed; the rest waits for the sync, or is
        # flagged once a real submission could no longer be missing from the provider's list.
        for assignment in submitted.filter(provider_confirmed_at__isnull=True):
            deadline = provider.confirmation_deadline(assignment=assignment)
            if deadline is None or now < deadline:
                report.unconfirmed += 1
                continue
            _flag_never_listed(assignment)
            report.never_listed += 1
        submitted = submitted.filter(provider_confirmed_at__isnull=False)
    if stage.kind == StageKind.QUALIFICATION:
        for assignment in submitted:
            if not assignment.judgments.exists():
                continue
            existed = WorkerQualification.objects.filter(
                worker=assignment.worker, stage=stage).exists()
            qualification_grade(assignment=assignment)
            report.graded += not existed
        for qualification in WorkerQualification.objects.filter(
                stage=stage, granted_externally=False).select_related(
                "worker", "stage", "assignment"):
            if not qualification_source_confirmed(qualification):
                continue  # granted once the provider confirms its assignment (or never)
            try:
                qualification_grant(qualification=qualification)
                report.granted += 1
            except Exception as exc:  # retried on the next run
                report.errors.append(f"grant {qualification.worker}: {exc}")
    cutoff = now - dt.timedelta(seconds=float(rules["approve_after_seconds"]))
    for assignment in submitted.filter(submitted_at__lte=cutoff):
        decision = assignment_review_rules(assignment=assignment)
        try:
            if decision.action == "approve":
                assignment_approve(assignment=assignment)
                report.approved += 1
            elif decision.action == "reject":
                assignment_reject(assignment=assignment, reason="; ".join(decision.reasons))
                report.rejected += 1
            else:
                # Every submission ends approved, rejected or flagged: this one needs a human.
                _flag(assignment, "Held for review: " + "; ".join(decision.reasons))
                report.held += 1
        except Exception as exc:  # one failing call must not stop the others; retried later
            report.errors.append(f"{assignment}: {exc}")
    if stage.project.bonus_per_correct and stage.project.bonus_per_correct > 0:
        # Separate from approving, so an approval confirmed later (lost answer, MTurk's own
        # auto-approval) still gets its bonus — once: the key names this bonus.
        paid = ProviderCall.objects.filter(
            assignment__stage=stage, operation="SendBonus", key__endswith=":per-correct",
            status=ProviderCallStatus.SUCCEEDED).values("assignment_id")
        approved = stage.assignments.filter(status=AssignmentStatus.APPROVED).exclude(pk__in=paid)
        if provider.confirms_submissions:
            approved = approved.filter(provider_confirmed_at__isnull=False)
        for assignment in approved.select_related("worker", "stage", "stage__project"):
            bonus = correct_answer_bonus(assignment=assignment)
            if bonus <= 0:
                continue
            try:
                assignment_bonus_pay(assignment=assignment, amount=bonus,
                                     reason="Bonus for correct answers", key="per-correct")
                report.bonuses += 1
            except Exception as exc:
                report.errors.append(f"bonus {assignment}: {exc}")
    threshold = int(rules["block_after_rejections"])
    if threshold > 0:
        offenders = (
            Assignment.objects.filter(stage__project_id=stage.project_id,
                                      status=AssignmentStatus.REJECTED)
            .exclude(worker_id__in=blocked_worker_ids_for(stage.project))
            .values("worker").annotate(n=Count("pk")).filter(n__gte=threshold)
        )
        for row in offenders:
            worker = Worker.objects.get(pk=row["worker"])
            try:
                # The study's own rule: it blocks for the project's researcher, not globally.
                worker_block_everywhere(worker=worker, reason=f"{row['n']} rejected assignments",
                                        by=stage.project.owner)
                report.blocked += 1
            except Exception as exc:
                report.errors.append(f"block {worker}: {exc}")
    return report


@transaction.atomic
def _flag_never_listed(assignment: Assignment) -> None:
    """Flag a local submission the provider never listed, and drop the qualification result
    graded from it (unless already granted): it must not stand in the way of the worker whose
    id it carries (see annotation/services/qualification.py)."""
    fresh = Assignment.objects.select_for_update().get(pk=assignment.pk)
    if fresh.status != AssignmentStatus.SUBMITTED or fresh.provider_confirmed_at is not None:
        return  # confirmed or decided meanwhile
    WorkerQualification.objects.filter(assignment=fresh, granted_externally=False).delete()
    _flag(fresh, FLAG_NEVER_LISTED.format(provider=fresh.stage.get_provider_display()))
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


def stage_sync_and_review(*, stage: Stage) -> tuple[SyncReport, ReviewReport]:
    """What the periodic task does for one stage."""
    from .stages import stage_collection_complete, stage_transition

    sync = provider_sync(stage=stage)
    review = stage_auto_review(stage=stage)
    stage_hits_mark_done(stage=stage)
    stage.refresh_from_db()
    if stage.status == StageStatus.COLLECTING and stage_collection_complete(stage=stage):
        stage_transition(stage=stage, to_status=StageStatus.REVIEWING,
                         reason="every HIT has all its assignments submitted")
    elif stage.status == StageStatus.CLOSED:
        stage_reconcile_mark(stage=stage, sync=sync, review=review)
    return sync, review
