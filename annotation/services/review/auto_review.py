"""The periodic review of a stage: `stage_auto_review` approves submitted work after the stage's
delay when it passes the rules (gold/attention accuracy, minimum time per item, no
straight-lining), rejects with the reasons when `auto_reject` is on (otherwise flags it for the
researcher), pays the STARC bonus per correct answer, and blocks workers after repeated
rejections; `stage_sync_and_review` syncs first."""
from __future__ import annotations

import datetime as dt

from django.db.models import Count, Exists, OuterRef, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.cost_selectors import BONUS_OPERATION
from annotation.models import (
    Assignment,
    AssignmentStatus,
    ProviderCall,
    ProviderCallStatus,
    Stage,
    StageKind,
    StageStatus,
    StageSync,
    Worker,
    WorkerQualification,
)
from annotation.providers import get_provider
from annotation.selectors import blocked_worker_ids_for
from annotation.services.qualification import (
    qualification_grade,
    qualification_grant,
    qualification_provider_holds_fail,
    qualification_regrant,
    qualification_source_confirmed,
    qualification_withdraw_rejected,
)
from annotation.services.replacements import stage_replacements_offer
from core.leases import JobLease, owner_state, stale_filter

from .decisions import (
    PER_CORRECT_KEY,
    ReviewError,
    ReviewReport,
    assignment_approve,
    assignment_hold,
    assignment_reject,
    assignment_review_rules,
    assignment_status_refresh,
    assignments_bonus_pay,
    correct_answer_bonus,
    stage_rules,
    worker_block_everywhere,
)
from .sync import (
    SyncReport,
    assignment_flag_never_listed,
    provider_sync,
    stage_hits_mark_done,
    stage_reconcile_mark,
)


def stage_auto_review(*, stage: Stage, now: dt.datetime | None = None) -> ReviewReport:
    """Grade qualifications, grant them, approve/reject/hold, pay bonuses, block (see module)."""
    now = now or timezone.now()
    rules = stage_rules(stage)
    report = ReviewReport()
    provider = get_provider(stage.provider)
    submitted = stage.assignments.filter(status=AssignmentStatus.SUBMITTED).select_related(
        "worker", "stage", "stage__project", "hit")
    if provider.confirms_submissions:
        submitted = _confirmed_only(submitted, provider, now=now, report=report)
    if stage.kind == StageKind.QUALIFICATION:
        _qualifications_grade_and_grant(stage, submitted, report)
    cutoff = now - dt.timedelta(seconds=float(rules["approve_after_seconds"]))
    _decide(submitted.filter(submitted_at__lte=cutoff), report)
    if stage.project.bonus_per_correct and stage.project.bonus_per_correct > 0:
        _pay_correct_answer_bonuses(stage, provider, report)
    threshold = int(rules["block_after_rejections"])
    if threshold > 0:
        _block_repeated_rejections(stage, threshold, report)
    return report


def _confirmed_only(submitted, provider, *, now: dt.datetime, report: ReviewReport):
    """Only work the provider has listed is reviewed; the rest waits for the sync, or is
    flagged once a real submission could no longer be missing from the provider's list."""
    for assignment in submitted.filter(provider_confirmed_at__isnull=True):
        deadline = provider.confirmation_deadline(assignment=assignment)
        if deadline is None or now < deadline:
            report.unconfirmed += 1
            continue
        assignment_flag_never_listed(assignment)
        report.never_listed += 1
    return submitted.filter(provider_confirmed_at__isnull=False)


def _qualifications_grade_and_grant(stage: Stage, submitted, report: ReviewReport) -> None:
    """Grade every submitted qualification, then grant those whose assignment the provider
    confirmed (a grant that fails is retried on the next run)."""
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
    # A pass granted before its work was rejected is taken back (retried here when the call at
    # the rejection failed; once only, a recorded call).
    for qualification in WorkerQualification.objects.filter(
            stage=stage, granted_externally=True, passed=True,
            assignment__status=AssignmentStatus.REJECTED).select_related(
            "worker", "stage", "stage__project"):
        try:
            qualification_withdraw_rejected(qualification=qualification)
        except Exception as exc:  # retried on the next run
            report.errors.append(f"withdraw {qualification.worker}: {exc}")
    # A pass taken back, whose work's rejection was reversed since, is granted again (retried
    # here when the call at the reversal failed; once only, a recorded call).
    for qualification in WorkerQualification.objects.filter(
            stage=stage, granted_externally=True, passed=True,
            assignment__status=AssignmentStatus.APPROVED).select_related(
            "worker", "stage", "stage__project"):
        if not qualification_provider_holds_fail(qualification):
            continue
        try:
            qualification_regrant(qualification=qualification)
        except Exception as exc:  # retried on the next run
            report.errors.append(f"grant again {qualification.worker}: {exc}")


def _decide(due, report: ReviewReport) -> None:
    """Approve, reject or hold every submission past the review delay by the stage's rules,
    oldest first; one a researcher decided since it was listed is left as they decided
    (`assignment_status_refresh`)."""
    for assignment in due.order_by("pk"):
        if assignment_status_refresh(assignment).status != AssignmentStatus.SUBMITTED:
            continue  # decided meanwhile (the admin, the API, a sync): that decision stands
        decision = assignment_review_rules(assignment=assignment)
        try:
            if decision.action == "approve":
                assignment_approve(assignment=assignment)
                report.approved += 1
            elif decision.action == "reject":
                assignment_reject(assignment=assignment, reason="; ".join(decision.reasons))
                report.rejected += 1
            elif assignment_hold(assignment, decision.reasons):
                # Every submission ends approved, rejected or flagged: this one needs a human.
                report.held += 1
        except Exception as exc:  # one failing call must not stop the others; retried later
            report.errors.append(f"{assignment}: {exc}")


def _pay_correct_answer_bonuses(stage: Stage, provider, report: ReviewReport) -> None:
    """The STARC bonus per correct answer of every approved assignment not paid it yet."""
    # Separate from approving, so an approval confirmed later (lost answer, MTurk's own
    # auto-approval) still gets its bonus — once: the key names this bonus.
    paid = ProviderCall.objects.filter(
        assignment__stage=stage, operation=BONUS_OPERATION, key__endswith=f":{PER_CORRECT_KEY}",
        status=ProviderCallStatus.SUCCEEDED).values("assignment_id")
    approved = stage.assignments.filter(status=AssignmentStatus.APPROVED).exclude(pk__in=paid)
    if provider.confirms_submissions:
        approved = approved.filter(provider_confirmed_at__isnull=False)
    bonuses = [(assignment, correct_answer_bonus(assignment=assignment))
               for assignment in approved.select_related("worker", "stage", "stage__project")
               .order_by("pk")]
    try:
        # The one rule of a selection's bonuses: together against the budget cap, all or none.
        batch = assignments_bonus_pay(bonuses=[(a, bonus) for a, bonus in bonuses if bonus > 0],
                                      reason="Bonus for correct answers", key=PER_CORRECT_KEY)
    except ReviewError as exc:
        report.errors.append(f"no bonus per correct answer was paid: {exc}")
        return
    if batch.over_cap:
        report.errors.append(f"no new bonus per correct answer was paid: {batch.over_cap}")
    report.bonuses += len(batch.paid)
    report.errors.extend(f"bonus {assignment}: {exc}" for assignment, exc in batch.refused)


def _block_repeated_rejections(stage: Stage, threshold: int, report: ReviewReport) -> None:
    """Block, for the project's researcher, workers with `threshold` or more rejections not
    already acted on: a rejection decided before this rule's last block of the worker (the
    recorded BlockWorker call) counts no more, so a researcher who lifts the block is not
    overruled by the next run; `threshold` new rejections block again."""
    acted_on = ProviderCall.objects.filter(
        operation="BlockWorker", worker_id=OuterRef("worker_id"),
        request__rule_project=stage.project_id,
        # a rejection without its decision time (imported) is as old as the assignment
        created_at__gte=Coalesce(OuterRef("reviewed_at"), OuterRef("started_at")))
    offenders = (
        Assignment.objects.filter(stage__project_id=stage.project_id,
                                  status=AssignmentStatus.REJECTED)
        .exclude(worker_id__in=blocked_worker_ids_for(stage.project))
        .exclude(Exists(acted_on))
        .values("worker").annotate(n=Count("pk")).filter(n__gte=threshold)
    )
    for row in offenders:
        worker = Worker.objects.get(pk=row["worker"])
        try:
            # The study's own rule: it blocks for the project's researcher, not globally,
            # even when that researcher is a superuser (an ownerless project's is global).
            worker_block_everywhere(worker=worker, reason=f"{row['n']} rejected assignments",
                                    by=stage.project.owner, study_rule=True,
                                    rule_project_id=stage.project_id)
            report.blocked += 1
        except Exception as exc:
            report.errors.append(f"block {worker}: {exc}")


class SyncAlreadyRunning(Exception):
    """Another worker holds the stage's sync lease (`StageSync`) and is alive: this run did
    nothing."""


def stage_sync_and_review(*, stage: Stage) -> tuple[SyncReport, ReviewReport]:
    """What the periodic task (and the admin's "Sync now") does for one stage, under the
    stage's sync lease: one run at a time per stage, whichever door starts it; a run that
    finds another alive raises SyncAlreadyRunning and touches nothing."""
    row, _created = StageSync.objects.get_or_create(stage=stage)
    with JobLease(StageSync, row.pk) as lease:
        claimed = lease.claim(claimable=_sync_claimable(row.pk), started_at=timezone.now(),
                              finished_at=None, error="")
        if claimed is None:
            holder = StageSync.objects.get(pk=row.pk)
            raise SyncAlreadyRunning(
                f"a sync of {stage} is running in another worker ({holder.lease or '?'}, "
                f"started {holder.started_at:%Y-%m-%d %H:%M:%S} UTC): nothing done")
        try:
            result = _sync_and_review(stage)
        except Exception as exc:
            lease.finish(status=StageSync.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000])
            raise
        lease.finish(status=StageSync.IDLE)
        return result


def _sync_claimable(pk: int) -> Q:
    """The lease is free, its holder silent past the stale limit, or its holder a process of
    this host that is gone (a worker killed in the middle: its redelivered task need not wait
    for the heartbeat to go stale)."""
    free = ~Q(status=StageSync.RUNNING) | stale_filter(StageSync)
    holder = StageSync.objects.filter(pk=pk).values_list("lease", flat=True).first()
    if holder and owner_state(holder) == "dead":
        free |= Q(lease=holder)
    return free


def _sync_and_review(stage: Stage) -> tuple[SyncReport, ReviewReport]:
    from annotation.services.stages import (
        stage_collection_complete,
        stage_recruitment_follow,
        stage_reopen_if_slots_free,
        stage_transition,
    )

    sync = provider_sync(stage=stage)
    review = stage_auto_review(stage=stage)
    # After the review: what it rejected or blocked gives its slot back now, not a sync later.
    replacements = stage_replacements_offer(stage=stage)
    sync.reoffered, sync.reoffer_waiting = replacements.reoffered, replacements.waiting
    stage_hits_mark_done(stage=stage)
    stage.refresh_from_db()
    if stage.status == StageStatus.COLLECTING and stage_collection_complete(stage=stage):
        stage_transition(stage=stage, to_status=StageStatus.REVIEWING,
                         actor="provider sync (stage_sync_and_review)",
                         reason="collection complete: every item has its judgments, or "
                                "every HIT (Prolific: every place) its submitted work")
    elif stage.status == StageStatus.CLOSED:
        stage_reconcile_mark(stage=stage, sync=sync, review=review)
    else:
        # Reviewing: Prolific and in-house collect again for any slot or place given back,
        # which picking serves again; MTurk for the assignments this sync bought.
        stage_reopen_if_slots_free(stage=stage, reoffered=replacements.reoffered,
                                   actor="provider sync (stage_sync_and_review)")
    if stage.status in (StageStatus.COLLECTING, StageStatus.REVIEWING):
        # The provider recruits while the stage collects, and not while it is reviewing: told
        # after this sync's move, or again after a move it was not told of (a failed call).
        sync.recruiting_problem = stage_recruitment_follow(stage=stage)
    return sync, review

