"""Decisions on one assignment or worker: the review rules, approve, reject, bonus, block and
notify. Each provider side effect goes through `provider_call_run` with a fixed key, so a rerun
never approves, pays or blocks twice."""
from __future__ import annotations

import dataclasses
import hashlib
import statistics
from collections import Counter
from decimal import Decimal, InvalidOperation

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from annotation.access_selectors import projects_visible_to
from annotation.cost_selectors import BONUS_OPERATION, bonuses_over_budget
from annotation.domain.answers import (
    FLAG_FAILED_PRACTICE,
    FLAG_LOW_GOLD_ACCURACY,
    FLAG_SAME_JUSTIFICATION,
    FLAG_STRAIGHT_LINING,
    FLAG_TOO_FAST,
    MIN_SECONDS_PER_ITEM,
    SAME_JUSTIFICATION_SHARE,
    position_shown,
    same_justification_count,
)
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Judgment,
    ParticipantVerification,
    Project,
    Provider,
    ProviderCall,
    ProviderCallStatus,
    Stage,
    StageKind,
    TaskKind,
    Worker,
    WorkerQualification,
    WorkerStatus,
)
from annotation.providers import get_provider
from annotation.providers.base import call_token_is_stale
from annotation.providers.calls import (
    ApprovedOnProvider,
    new_token,
    provider_call_get_or_create,
    provider_call_run,
)
from annotation.selectors import (
    REOFFER_OPERATION,
    blocked_worker_ids_for,
    practice_failed_worker_ids,
    qualification_results_that_count,
)
from annotation.services.budget import budget_lock
from annotation.services.qualification import (
    answer_is_correct,
    assignment_provider_confirmed,
    qualification_regrant_after_reversal,
    qualification_withdraw_after_rejection,
)
from annotation.services.redundancy import adaptive_targets_refresh
from annotation.services.stages import stage_reopen_if_slots_free

DEFAULT_RULES = {
    "approve_after_seconds": 0,  # wait this long after submission before auto-approving
    "min_gold_accuracy": 0.5,  # on gold/attention items, when the assignment has any
    # fewer check items than this are too little evidence to reject (or block) on: held
    "min_gold_checks_to_reject": 2,
    "min_seconds_per_item": MIN_SECONDS_PER_ITEM,  # mean time per item below: clicking through
    "straightline_min_items": 5,  # straight-lining is only judged on this many items or more
    "max_same_answer_share": 1.0,  # every answer identical = straight-lining
    # one justification pasted on nearly every item (why 0.8: annotation/domain/answers.py)
    "max_same_justification_share": SAME_JUSTIFICATION_SHARE,
    "auto_reject": False,  # False: failing work is held for the researcher instead
    "block_after_rejections": 0,  # block a worker after this many rejections (0: never)
}


ASKED_TO_RETURN = ("asked to return: failed the comprehension check twice (Prolific: never "
                   "rejected for this; excluded from analysis)")


# Our own calls on an assignment whose outcome is still unknown keep a closed stage syncing.
ASSIGNMENT_OPERATIONS = ("ApproveAssignment", "RejectAssignment", "SendBonus", "SetUpBonus",
                         "PayBonus")


class ReviewError(Exception):
    pass


@dataclasses.dataclass
class ReviewDecision:
    action: str  # "approve" | "reject" | "hold"
    reasons: list[str]
    metrics: dict
    # The workers table's flag naming each reason (`FLAG_*`: annotation/domain/answers.py) →
    # the reason, so the dashboard flags every worker a rule acts on, in the rule's words.
    flags: dict[str, str] = dataclasses.field(default_factory=dict)


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


def assignment_review_rules(*, assignment: Assignment,
                            judgments: list[Judgment] | list[_RuleJudgment] | None = None
                            ) -> ReviewDecision:
    """Apply the stage's rules to a submitted assignment (no writes). `judgments`: the
    assignment's judgments with their items when the caller read them already, as rows of
    what the rules read (a read over many assignments: `workers_review_rule_flags`)."""
    stage = assignment.stage
    rules = stage_rules(stage)
    if judgments is None:
        judgments = list(assignment.judgments.select_related("item", "item__project"))
    if not judgments:
        return ReviewDecision("hold", ["no judgments saved"], {})
    reasons: list[str] = []
    flags: dict[str, str] = {}
    thin: list[str] = []  # reasons resting on too little evidence to reject on their own
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
            return ReviewDecision("hold", [ASKED_TO_RETURN], metrics,
                                  {FLAG_FAILED_PRACTICE: ASKED_TO_RETURN})
    if stage.kind != StageKind.QUALIFICATION:  # qualification takers are paid either way
        checks = [j for j in judgments if j.item.is_gold_check and j.item.gold]
        if checks:
            tolerance = stage.project.qualification_tolerance
            right = sum(bool(answer_is_correct(item=j.item, judgment=j, tolerance=tolerance))
                        for j in checks)
            accuracy = right / len(checks)
            metrics["gold_accuracy"] = accuracy
            # Prolific allows rejecting for attention checks only after two failed ones.
            enough = stage.provider != Provider.PROLIFIC or len(checks) - right >= 2
            if accuracy < rules["min_gold_accuracy"] and enough:
                reason = (f"accuracy on check items {accuracy:.0%} ({right} of {len(checks)}) "
                          f"is below {rules['min_gold_accuracy']:.0%}")
                if len(checks) < int(rules["min_gold_checks_to_reject"]):
                    # One or two answers are too little to reject (and, through
                    # `block_after_rejections`, block) a worker on: a researcher decides.
                    reason += (f": only {len(checks)} check item"
                               f"{'' if len(checks) == 1 else 's'}, too few to reject on alone "
                               f"(at least {int(rules['min_gold_checks_to_reject'])})")
                    thin.append(reason)
                reasons.append(reason)
                flags[FLAG_LOW_GOLD_ACCURACY] = reason
        # The server's measure when there is one (the browser's can be made up: a submit
        # 0.1 s after the page opened claiming an hour per item); the browser's for judgments
        # stored without one (imported, or before the server measured).
        server = [j.server_time_ms for j in judgments if j.server_time_ms is not None]
        client = [j.time_spent_ms for j in judgments if j.time_spent_ms is not None]
        if client:
            metrics["client_seconds_per_item"] = statistics.fmean(client) / 1000
        times = server or client
        if times:
            mean_seconds = statistics.fmean(times) / 1000
            metrics["seconds_per_item"] = mean_seconds
            metrics["seconds_measured_by"] = "server" if server else "client"
            if mean_seconds < rules["min_seconds_per_item"]:
                measured = "measured by the server" if server else "reported by the browser"
                reasons.append(f"{mean_seconds:.1f} s per item is below the minimum of "
                               f"{rules['min_seconds_per_item']} s ({measured})")
                flags[FLAG_TOO_FAST] = reasons[-1]
        if len(judgments) >= rules["straightline_min_items"]:
            # A/B and MC: the position on screen, as the dashboard's "modal answer share"
            # reads it (the stored choice flagged careful judges, a STARC reader right on
            # every item among them, and missed key-pressers).
            values = [j.score if stage.project.kind == TaskKind.LIKERT
                      else position_shown(j.choice, j.presented_order) for j in judgments]
            share = Counter(values).most_common(1)[0][1] / len(values)
            metrics["same_answer_share"] = share
            if share >= rules["max_same_answer_share"]:
                reasons.append(f"the same answer on {share:.0%} of {len(values)} items "
                               f"(the rule: {rules['max_same_answer_share']:.0%} or more on "
                               f"{rules['straightline_min_items']} items or more)")
                flags[FLAG_STRAIGHT_LINING] = reasons[-1]
            # A/B: one justification pasted on item after item (judged from as many items
            # as straight-lining, its sibling).
            same = same_justification_count(j.justification for j in judgments)
            if same:
                metrics["same_justification_items"] = same
                metrics["same_justification_share"] = same / len(judgments)
                if same / len(judgments) >= rules["max_same_justification_share"]:
                    reasons.append(f"the same justification on {same} of {len(judgments)} "
                                   f"items")
                    flags[FLAG_SAME_JUSTIFICATION] = reasons[-1]
    if reasons:
        rejects = rules["auto_reject"] and any(reason not in thin for reason in reasons)
        return ReviewDecision("reject" if rejects else "hold", reasons, metrics, flags)
    return ReviewDecision("approve", [], metrics)


# The work the review rules read: submitted, and decided since (a rule's hold or rejection
# takes the work out of every count, so the flag cannot come from the counted judgments).
REVIEWED_STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED,
                     AssignmentStatus.FLAGGED, AssignmentStatus.REJECTED)


@dataclasses.dataclass(frozen=True, slots=True)
class _RuleItem:
    """What `assignment_review_rules` reads of an item (as `Item`: a row read as a model
    instance, with its project, cost more than the rest of the project report together)."""
    project: Project
    gold: object
    is_gold_check: bool
    is_practice: bool


@dataclasses.dataclass(frozen=True, slots=True)
class _RuleJudgment:
    """What `assignment_review_rules` reads of a judgment (as `Judgment`)."""
    item: _RuleItem
    score: float | None
    choice: str
    presented_order: list
    justification: str
    server_time_ms: int | None
    time_spent_ms: int | None


_RULE_JUDGMENT_COLUMNS = ("assignment_id", "item_id", "score", "choice", "presented_order",
                          "justification", "server_time_ms", "time_spent_ms", "item__gold",
                          "item__is_gold_check", "item__is_practice")


def workers_review_rule_flags(*, project: Project, stage: Stage | None = None,
                              chunk: int = 1000) -> dict[int, dict[str, str]]:
    """Per worker, the workers table's flags the project's review rules raise on their work
    (`ReviewDecision.flags`: flag name → the rule's reason, with its numbers; the first
    assignment's reason per flag): `assignment_review_rules` itself, with each stage's
    configured rules, over every submitted or decided assignment of the project (or of
    `stage`), so a worker a rule holds, rejects or (through the rejections) blocks is flagged
    for the same reason, never "fine" beside an automatic rejection. Reads only: one query
    for the assignments, one per `chunk` of them for their judgments."""
    stages = {s.pk: s for s in Stage.objects.filter(project=project).exclude(
        kind=StageKind.QUALIFICATION)}
    for each in stages.values():
        each.project = project
    assignments = Assignment.objects.filter(stage_id__in=list(stages),
                                            status__in=REVIEWED_STATUSES)
    if stage is not None:
        assignments = assignments.filter(stage=stage)
    rows = list(assignments.order_by("pk").values_list("pk", "worker_id", "stage_id"))
    items: dict[int, _RuleItem] = {}
    out: dict[int, dict[str, str]] = {}
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        judgments: dict[int, list[_RuleJudgment]] = {}
        for (assignment_id, item_id, score, choice, order, justification, server_ms, client_ms,
             gold, is_gold_check, is_practice) in Judgment.objects.filter(
                assignment_id__in=[pk for pk, _w, _s in part]).order_by("pk").values_list(
                *_RULE_JUDGMENT_COLUMNS):
            item = items.get(item_id)
            if item is None:
                item = items[item_id] = _RuleItem(project, gold, is_gold_check, is_practice)
            judgments.setdefault(assignment_id, []).append(_RuleJudgment(
                item, score, choice, order, justification, server_ms, client_ms))
        for pk, worker_id, stage_id in part:
            if pk not in judgments:
                continue
            decision = assignment_review_rules(
                assignment=Assignment(pk=pk, worker_id=worker_id, stage=stages[stage_id]),
                judgments=judgments[pk])
            for flag, reason in decision.flags.items():
                out.setdefault(worker_id, {}).setdefault(flag, reason)
    return out


def _require_confirmed(assignment: Assignment, action: str) -> None:
    """Refuse to approve, reject or pay work the provider never listed (see the module doc),
    or whose participant's session the provider does not know (Prolific verification)."""
    if assignment.verification == ParticipantVerification.FAILED:
        raise ReviewError(
            f"{assignment}: {assignment.stage.get_provider_display()} does not know this "
            f"participant's session; cannot {action} it")
    if not assignment_provider_confirmed(assignment):
        raise ReviewError(
            f"{assignment}: {assignment.stage.get_provider_display()} has not listed this "
            f"assignment for this worker (yet); cannot {action} it — the sync confirms real "
            f"submissions")


def decision_call_key(assignment: Assignment, verb: str) -> str:
    """The key of our ApproveAssignment ("approve") or RejectAssignment ("reject") call on an
    assignment; the sync records the provider's own approval of held work under the approve
    key (`assignment_provider_approval_record`)."""
    return f"{assignment.stage.provider}:{verb}:{assignment.pk}"


def assignment_provider_approved(assignment: Assignment) -> bool:
    """Whether the provider holds this assignment approved and paid: our approval went
    through, or the provider approved it itself (MTurk's auto-approval) while we held it."""
    return ProviderCall.objects.filter(key=decision_call_key(assignment, "approve"),
                                       status=ProviderCallStatus.SUCCEEDED).exists()


def assignment_provider_approval_record(assignment: Assignment, *, found: str) -> bool:
    """Record that the provider approved and paid work we hold (flagged), found by the sync
    (`found`: what it saw, e.g. "MTurk lists it Approved"): a succeeded row under our approve
    key, so the money spent (`cost_selectors.stage_paid`) counts the reward, a later approval
    here sends nothing again, and a later rejection stays local. The assignment keeps its
    status: the researcher decides. True when recorded now (False: recorded before)."""
    call = provider_call_get_or_create(
        provider=assignment.stage.provider, operation="ApproveAssignment",
        key=decision_call_key(assignment, "approve"), stage=assignment.stage,
        assignment=assignment, worker=assignment.worker,
        request={"not_sent": "approved by the provider itself; recorded by the sync"})
    if call.status == ProviderCallStatus.SUCCEEDED:
        return False
    ProviderCall.objects.filter(pk=call.pk).update(
        status=ProviderCallStatus.SUCCEEDED, completed_at=timezone.now(), error="",
        response={"approved_by_provider": found})
    return True


def assignment_approve(*, assignment: Assignment, feedback: str = "",
                       allow_flagged: bool = False) -> Assignment:
    provider = get_provider(assignment.stage.provider)
    return _assignment_decide(
        assignment, status=AssignmentStatus.APPROVED, verb="approve",
        operation="ApproveAssignment", allow_flagged=allow_flagged,
        call_fn=lambda _token: provider.approve(assignment=assignment, feedback=feedback))


def assignment_reject(*, assignment: Assignment, reason: str,
                      allow_flagged: bool = False) -> Assignment:
    if not reason.strip():
        raise ReviewError("a rejection needs a reason the worker can read")
    provider = get_provider(assignment.stage.provider)
    held = allow_flagged and assignment.status == AssignmentStatus.FLAGGED
    if held and assignment_provider_approved(assignment):
        return _held_paid_reject(assignment, reason)
    try:
        decided = _assignment_decide(
            assignment, status=AssignmentStatus.REJECTED, verb="reject",
            operation="RejectAssignment", allow_flagged=allow_flagged,
            call_fn=lambda _token: provider.reject(assignment=assignment, reason=reason),
            request={"reason": reason}, note=f"Rejected: {reason}")
    except ApprovedOnProvider as exc:
        # The provider approved it before any sync recorded that: held work is rejected
        # here as it would be after that sync; other work is the sync's to mirror.
        found = f"{assignment.stage.get_provider_display()} lists it Approved (at a rejection)"
        if held and assignment_status_refresh(assignment).status == AssignmentStatus.FLAGGED:
            assignment_provider_approval_record(assignment, found=found)
            return _held_paid_reject(assignment, reason)
        raise ReviewError(f"{assignment}: {exc}; the next sync records that it was paid") \
            from exc
    # Its slot is free now (on Prolific its place reopened with the rejection): a reviewing
    # stage collects again at once, not at the next sync.
    stage_reopen_if_slots_free(stage=decided.stage, actor="rejection (assignment_reject)")
    return decided


def _held_paid_reject(assignment: Assignment, reason: str) -> Assignment:
    """Held work the provider approved and paid itself (MTurk's auto-approval): the provider
    refuses to reject approved work, so the rejection is ours only — the data stays out, the
    reward is spent."""
    _require_confirmed(assignment, "reject")
    assignment_decision_record(
        assignment, status=AssignmentStatus.REJECTED,
        note=f"Rejected here: {reason} ({assignment.stage.get_provider_display()} had "
             f"already approved and paid it; a rejection there is no longer possible, "
             f"so nothing was sent: its data stays out of the study).").run()
    return assignment


def reversal_call_key(assignment: Assignment) -> str:
    """The key of the call that approves an assignment whose rejection is reversed (MTurk's
    ApproveAssignment with OverrideRejection): once per assignment, since approved work is
    never rejected again."""
    return decision_call_key(assignment, "reverse-rejection")


# How the note of a reversed rejection starts (`reversal_note`).
REVERSED_NOTE = "Rejection reversed"


@dataclasses.dataclass
class RejectionReversal:
    """What `assignment_rejection_reverse` did: `already` says why nothing was done (reversed
    before: when and by whom); `warnings` what the researcher should know (a block that
    stands, a slot re-offered, a qualification not granted again)."""
    assignment: Assignment
    already: str = ""
    warnings: list[str] = dataclasses.field(default_factory=list)


def assignment_rejection_reverse(*, assignment: Assignment, reason: str,
                                 by=None) -> RejectionReversal:
    """Reverse a rejection made by mistake or overturned on appeal: approve the rejected work
    on the provider (MTurk: ApproveAssignment with OverrideRejection, within 30 days of its
    submission; in-house: a local record; Prolific's API cannot, so it is refused naming what
    to do instead), once (`reversal_call_key`), then record the approval under the row lock
    over the rejection it reverses, with who, when and why in the review note (the call keeps
    them too). The work counts again by the counting rule (`judgments_that_count` reads the
    status), its items' targets are recomputed and a qualification pass taken back is granted
    again (`assignment_decision_record`). Work the provider had approved and paid itself
    before our rejection is approved here only (nothing sent). Refused (ReviewError, nothing
    sent or changed): no reason, a project `by` cannot see (`projects_visible_to`), work that
    is not rejected, the provider's refusal. Reversing twice does nothing the second time
    (`RejectionReversal.already`). A block of the worker (the study's block-after-rejections
    rule or any other) is never lifted here: it is named in the warnings."""
    reason = reason.strip()
    if not reason:
        raise ReviewError("reversing a rejection needs a reason (e.g. \"appeal upheld: the "
                          "gold answer was wrong\"); it is kept in the assignment's review "
                          "note and sent to the worker with the approval")
    if by is not None and not projects_visible_to(by).filter(
            pk=assignment.stage.project_id).exists():
        raise ReviewError(f"{assignment} belongs to a project you cannot see; only its owner, "
                          f"the researchers it is shared with and superusers can reverse its "
                          f"rejection")
    assignment_status_refresh(assignment)
    done = ProviderCall.objects.filter(key=reversal_call_key(assignment),
                                       status=ProviderCallStatus.SUCCEEDED).first()
    if assignment.status == AssignmentStatus.APPROVED and done is not None:
        who = (done.request or {}).get("by") or "someone"
        return RejectionReversal(assignment, already=(
            f"its rejection was reversed already ({done.created_at:%Y-%m-%d %H:%M} UTC, by "
            f"{who}): nothing was sent or changed again"))
    if assignment.status != AssignmentStatus.REJECTED:
        raise ReviewError(f"{assignment} is {assignment.get_status_display().lower()}, not "
                          f"rejected: there is no rejection to reverse")
    stage = assignment.stage
    provider = get_provider(stage.provider)
    now = timezone.now()
    # Held work the provider approved and paid itself, then rejected here only: approved here
    # only, nothing is sent (the provider holds it approved already).
    paid_already = assignment_provider_approved(assignment)
    refusal = "" if paid_already else provider.rejection_reversal_refusal(
        assignment=assignment, now=now)
    if refusal:
        raise ReviewError(f"{assignment}: {refusal}")
    _require_confirmed(assignment, "reverse the rejection of")
    who = by.get_username() if by is not None else "the system"
    request = {"override_rejection": True, "reason": reason, "by": who}
    fields = {"provider": stage.provider, "operation": "ApproveAssignment",
              "key": reversal_call_key(assignment), "stage": stage, "assignment": assignment,
              "worker": assignment.worker}
    if paid_already:
        call = provider_call_get_or_create(**fields, request={
            **request, "not_sent": "approved and paid by the provider before the rejection"})
        ProviderCall.objects.filter(pk=call.pk).exclude(
            status=ProviderCallStatus.SUCCEEDED).update(
            status=ProviderCallStatus.SUCCEEDED, completed_at=now, error="",
            response={"local": True})
    else:
        provider_call_run(**fields, request=request, call_fn=lambda _token: (
            provider.approve_rejected(assignment=assignment, feedback=reason)))
    note = reversal_note(request, now)
    if paid_already:
        note += (f" ({stage.get_provider_display()} had approved and paid it before the "
                 f"rejection; nothing was sent.)")
    follow_up = DecisionFollowUp(assignment)
    with transaction.atomic():
        # Recorded only over the rejection it reverses: a decision recorded meanwhile (the
        # sync mirroring the approval the call just made) stands, with who reversed it and why
        # added to its note.
        fresh = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if fresh.status == AssignmentStatus.REJECTED:
            assignment.review_note = fresh.review_note
            follow_up = assignment_decision_record(assignment, status=AssignmentStatus.APPROVED,
                                                   note=note)
        else:
            assignment.status, assignment.review_note = fresh.status, fresh.review_note
            if fresh.status != AssignmentStatus.APPROVED:
                raise ReviewError(f"{assignment} was {fresh.get_status_display().lower()} "
                                  f"meanwhile; the reversal was not recorded")
            if REVERSED_NOTE not in fresh.review_note:
                assignment.review_note = f"{fresh.review_note} {note}".strip()
                assignment.save(update_fields=["review_note"])
    return RejectionReversal(assignment, warnings=follow_up.run()
                             + _reversal_warnings(assignment))


def reversal_note(request: dict, when) -> str:
    """The review note of a reversed rejection: who reversed it, when and why (`request`: the
    reversal call's, `assignment_rejection_reverse`)."""
    return (f"{REVERSED_NOTE} ({when:%Y-%m-%d %H:%M} UTC, by {request.get('by') or 'someone'}): "
            f"{request.get('reason') or 'no reason recorded'}")


def _reversal_warnings(assignment: Assignment) -> list[str]:
    """What a reversed rejection leaves as it was, for the researcher to decide: a block of
    the worker for this project (never lifted silently: their work still does not count while
    it stands), and the slot the sync re-offered after the rejection."""
    project, worker = assignment.stage.project, assignment.worker
    warnings = []
    if worker.pk in blocked_worker_ids_for(project):
        rule_block = ProviderCall.objects.filter(
            operation="BlockWorker", worker=worker, request__rule_project=project.pk,
        ).order_by("-created_at").first()
        left = Assignment.objects.filter(stage__project=project, worker=worker,
                                         status=AssignmentStatus.REJECTED).count()
        if rule_block is not None:
            why = (rule_block.request or {}).get("reason", "")
            warnings.append(
                f"{worker} is still blocked in this project by its block-after-rejections "
                f"rule (since {rule_block.created_at:%Y-%m-%d}: {why}); the block stays and, "
                f"while it does, their judgments do not count. {left} rejection(s) of theirs "
                f"remain in this project; if this one was why, lift the block (Workers: "
                f"\"Unblock selected workers\")")
        else:
            warnings.append(f"{worker} is blocked for this project; the block stays and, while "
                            f"it does, their judgments do not count")
    if ProviderCall.objects.filter(assignment=assignment, operation=REOFFER_OPERATION,
                                   status=ProviderCallStatus.SUCCEEDED).exists():
        warnings.append("its slot was re-offered after the rejection (one more assignment on "
                        "its HIT), so its items may get one judgment more than planned")
    return warnings


# What a decision re-reads of its assignment before acting (`assignment_status_refresh`).
DECISION_FIELDS = ("status", "review_note", "reviewed_at", "provider_confirmed_at",
                   "verification")


def assignment_status_refresh(assignment: Assignment) -> Assignment:
    """The assignment's decision fields as they are now (DECISION_FIELDS), read again into it:
    every decision (the review's approve, reject or hold, the admin's and the API's) acts on
    the status the assignment has when it comes to it, not on the one it was listed with, so
    a researcher's decision made meanwhile (the review of a big stage takes minutes: a
    provider call per submission) stands."""
    assignment.refresh_from_db(fields=list(DECISION_FIELDS))
    return assignment


@transaction.atomic
def assignment_hold(assignment: Assignment, reasons: list[str]) -> bool:
    """The review's hold: flag submitted work for the researcher ("Held for review: …"),
    under its row lock; False (nothing written) when it is no longer submitted, decided
    meanwhile by a researcher or a sync."""
    fresh = Assignment.objects.select_for_update().get(pk=assignment.pk)
    if fresh.status != AssignmentStatus.SUBMITTED:
        assignment.status, assignment.review_note = fresh.status, fresh.review_note
        return False
    assignment_flag(fresh, "Held for review: " + "; ".join(reasons))
    assignment.status, assignment.review_note = fresh.status, fresh.review_note
    return True


def assignment_flag(assignment: Assignment, note: str) -> str:
    """Hold the assignment for the researcher (FLAGGED), saying why in its review note; returns
    "flagged" (what a sync reports for it)."""
    assignment.status = AssignmentStatus.FLAGGED
    assignment.review_note = (assignment.review_note + " " + note).strip()
    assignment.save(update_fields=["status", "review_note"])
    adaptive_targets_refresh(judgments=Judgment.objects.filter(assignment=assignment))
    return "flagged"


def _assignment_decide(assignment: Assignment, *, status: str, verb: str, operation: str,
                       call_fn, allow_flagged: bool, request: dict | None = None,
                       note: str = "") -> Assignment:
    """Approve or reject on the provider once (a repeat sends nothing and adds no note), then
    record it; only submitted (or, when allowed, flagged) work the provider confirmed."""
    assignment_status_refresh(assignment)
    allowed = {AssignmentStatus.SUBMITTED, status}
    if allow_flagged:
        allowed.add(AssignmentStatus.FLAGGED)
    if assignment.status not in allowed:
        raise ReviewError(f"{assignment} is {assignment.get_status_display()}; cannot {verb}")
    if assignment.status == status:
        return assignment  # decided before: nothing is sent again
    _require_confirmed(assignment, verb)
    provider_call_run(
        provider=assignment.stage.provider, operation=operation,
        key=decision_call_key(assignment, verb), call_fn=call_fn,
        stage=assignment.stage, assignment=assignment, worker=assignment.worker,
        **({"request": request} if request else {}),
    )
    with transaction.atomic():
        # Recorded only over the status it was decided from: a decision someone else recorded
        # during the provider call (the researcher's reject while the automatic review's
        # approve was on its way) stands, and this one is refused, not written over it.
        fresh = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if fresh.status == status:
            assignment.status, assignment.review_note = fresh.status, fresh.review_note
            return assignment
        if fresh.status not in allowed:
            assignment.status, assignment.review_note = fresh.status, fresh.review_note
            raise ReviewError(f"{assignment} was {fresh.get_status_display().lower()} "
                              f"meanwhile; the {verb} was not recorded")
        assignment.review_note = fresh.review_note
        follow_up = assignment_decision_record(assignment, status=status, note=note)
    follow_up.run()
    return assignment


@dataclasses.dataclass(frozen=True)
class DecisionFollowUp:
    """What a recorded decision asks of the provider besides: a qualification pass graded from
    rejected work withdrawn, or granted again once the rejection is reversed. The caller runs
    it (`run`) once the assignment's row lock is released, never under it: a provider call
    retries for up to a minute. A crash in between, or a provider fault, is left to the
    periodic review, which retries both (`stage_auto_review`)."""
    assignment: Assignment
    withdraw: bool = False
    regrant: bool = False

    def run(self) -> list[str]:
        """Make the calls; returns what failed, in words."""
        if self.withdraw:
            qualification_withdraw_after_rejection(assignment=self.assignment)
        if self.regrant:
            return qualification_regrant_after_reversal(assignment=self.assignment)
        return []


def assignment_decision_record(assignment: Assignment, *, status: str, note: str = "",
                               submitted_at=None) -> DecisionFollowUp:
    """Store a decision on the assignment (approved or rejected), ours or one the provider
    holds (the sync mirrors it): its status, when it was first reviewed, the note, and the
    submission time the provider gives when none is stored. Rejected work stops counting, so
    its items re-open (adaptive targets recomputed) and a qualification graded from it is
    withdrawn; rejected work approved (its rejection reversed) counts again, both undone.
    A decision recorded on a closed stage the sync had reconciled (a late rejection, a
    rejection reversed after an appeal) puts it back in the periodic sync's hands, which then
    pays what the approved work earns (the review's bonus per correct answer), settles a
    provider call left in doubt and retries the qualification calls. Returns the provider
    calls to make once the row lock is released (`DecisionFollowUp.run`)."""
    was_rejected = assignment.status == AssignmentStatus.REJECTED
    assignment.status = status
    assignment.reviewed_at = assignment.reviewed_at or timezone.now()
    fields = ["status", "reviewed_at"]
    if submitted_at is not None and assignment.submitted_at is None:
        assignment.submitted_at = submitted_at
        fields.append("submitted_at")
    if note:
        assignment.review_note = (assignment.review_note + " " + note).strip()
        fields.append("review_note")
    assignment.save(update_fields=fields)
    Stage.objects.filter(pk=assignment.stage_id, reconciled_at__isnull=False).update(
        reconciled_at=None)
    if status == AssignmentStatus.REJECTED:
        adaptive_targets_refresh(judgments=Judgment.objects.filter(assignment=assignment))
        return DecisionFollowUp(assignment, withdraw=True)
    if was_rejected and status == AssignmentStatus.APPROVED:
        # A rejection reversed (here, or on the provider and mirrored by the sync): the work
        # counts again, so its items' targets are recomputed and a pass taken back is granted
        # again.
        adaptive_targets_refresh(judgments=Judgment.objects.filter(assignment=assignment))
        return DecisionFollowUp(assignment, regrant=True)
    return DecisionFollowUp(assignment)


# The most an assignment's bonuses can add up to (`Assignment.bonus_paid`: 8 digits, 2 decimals).
MAX_BONUS_PAID = Decimal("999999.99")

# The key of the STARC bonus per correct answer (`correct_answer_bonus`), paid by review.
PER_CORRECT_KEY = "per-correct"


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


CENT = Decimal("0.01")


def bonus_amount(value) -> Decimal:
    """A bonus as the providers pay it: dollars in whole cents, above $0 (the one rule of
    every door that pays one: the admin's action, `assignment_bonus_pay`). Raises ReviewError
    naming what is wrong. Rounded silently, "0.015" paid $0.02 while the message said $0.015,
    "0.001" was refused as "not positive", and "Infinity", "sNaN" or "1e100" ended the admin
    page in a server error."""
    text = str(value).strip()
    try:
        amount = Decimal(text)
    except (InvalidOperation, ValueError):
        amount = None
    if amount is None or not amount.is_finite():
        raise ReviewError(f"the bonus amount {text!r} is not a number of dollars (e.g. 0.50)")
    if amount <= 0:
        raise ReviewError("a bonus must be positive")
    if amount > MAX_BONUS_PAID:
        raise ReviewError(f"a bonus of ${text} is more than ${MAX_BONUS_PAID}, the most one "
                          "assignment's bonuses can add up to")
    if amount != amount.quantize(CENT):
        raise ReviewError(f"a bonus of ${text} is not a whole number of cents: the provider "
                          f"pays cents (type {amount.quantize(CENT, rounding='ROUND_DOWN')} or "
                          f"{amount.quantize(CENT, rounding='ROUND_UP')})")
    return amount.quantize(CENT)


@dataclasses.dataclass
class BonusBatch:
    """What `assignments_bonus_pay` did with each assignment of a selection: paid (sent and
    recorded), already paid (the same bonus: nothing sent), or refused for a reason of its
    own (not approved, not listed by the provider, its record of bonuses full, the provider's
    refusal or an unanswered call), each with the error. `over_cap`: why no new bonus of the
    selection was paid (its total past a project's budget cap), "" when none was refused so;
    `paid` then holds only bonuses already in flight, sent again (they add nothing)."""
    paid: list[Assignment] = dataclasses.field(default_factory=list)
    already: list[Assignment] = dataclasses.field(default_factory=list)
    refused: list[tuple[Assignment, Exception]] = dataclasses.field(default_factory=list)
    over_cap: str = ""


def _bonus_row_refusal(assignment: Assignment, amount: Decimal) -> str:
    """Why this assignment cannot get a bonus of `amount` ("" when it can): a reason of its
    own, said for it alone."""
    if assignment.bonus_paid + amount > MAX_BONUS_PAID:
        # Refused before anything is written or sent: the total would not fit the record of
        # what the assignment was paid (it failed after the provider had paid).
        return (f"a bonus of ${amount} would take this assignment's bonuses past "
                f"${MAX_BONUS_PAID}; check the amount")
    if assignment.status != AssignmentStatus.APPROVED:
        return "only approved assignments get bonuses"
    try:
        _require_confirmed(assignment, "pay a bonus for")
    except ReviewError as exc:
        return str(exc)
    return ""


def assignments_bonus_pay(*, bonuses: list[tuple[Assignment, Decimal | str]], reason: str,
                          key: str | None = None) -> BonusBatch:
    """Pay a selection's bonuses ((assignment, amount) pairs), each once, by one rule at every
    door that pays them (the admin's action and the assignment page, review's bonus per
    correct answer, the Celery task through `assignment_bonus_pay`): every amount is checked
    first (`bonus_amount`: one bad amount refuses the whole selection, ReviewError, before
    anything is written); then each assignment's own reasons (not approved, not listed, its
    record full) refuse it alone; then, under each project's budget lock, the bonuses still to
    pay are checked together against the budget cap (`bonuses_over_budget`): past it, the
    whole selection is refused naming the total, what is committed, what is left and the cap,
    nothing written or paid, never paid in part up to the cap. Their calls are written under
    the lock (counted from then on), then sent one by one. `key` names the bonus (e.g.
    "per-correct"); by default the amount and reason, so a double-clicked action pays once."""
    amounts = [bonus_amount(typed) for _assignment, typed in bonuses]
    batch = BonusBatch()
    due: list[tuple[Assignment, Decimal, dict]] = []
    for (assignment, _typed), amount in zip(bonuses, amounts, strict=True):
        stage = assignment.stage
        call_key = bonus_call_key(assignment=assignment, amount=amount, reason=reason, key=key)
        if ProviderCall.objects.filter(key=call_key,
                                       status=ProviderCallStatus.SUCCEEDED).exists():
            batch.already.append(assignment)  # the same bonus is never paid twice
            continue
        refusal = _bonus_row_refusal(assignment, amount)
        if refusal:
            batch.refused.append((assignment, ReviewError(refusal)))
            continue
        due.append((assignment, amount, {
            "provider": stage.provider, "operation": BONUS_OPERATION, "key": call_key,
            "token": new_token(f"qaj-bonus-{assignment.pk}"), "stage": stage,
            "assignment": assignment, "worker": assignment.worker, "amount": amount,
            "request": {"reason": reason}}))
    with transaction.atomic():
        # Every bonus, by hand or per correct answer (a stage's `bonus_budget` replaces the
        # per-correct maximum in its estimate), fits under the cap with every bonus in flight;
        # their rows, written under the lock, are counted by the next check.
        projects = {a.stage.project_id: a.stage.project for a, _amount, _fields in due}
        for project_id in sorted(projects):
            budget_lock(projects[project_id])
        # A call already written is counted already: only retried here.
        new = [(a, amount, fields) for a, amount, fields in due
               if not ProviderCall.objects.filter(key=fields["key"]).exclude(
                   status=ProviderCallStatus.FAILED).exists()]
        overs = [bonuses_over_budget(bonuses=[(a.stage, amount) for a, amount, _f in new
                                              if a.stage.project_id == project_id])
                 for project_id in sorted(projects)]
        overs = [over for over in overs if over]
        if overs:
            new_keys = {fields["key"] for _a, _amount, fields in new}
            due = [row for row in due if row[2]["key"] not in new_keys]
        for _assignment, _amount, fields in ([] if overs else new):
            call = provider_call_get_or_create(**fields)
            if call.status == ProviderCallStatus.FAILED:
                # Paid again after a refusal: in flight from now on, so a bonus checked while
                # it is sent counts it (a failed row counts nothing).
                call.status, call.completed_at = ProviderCallStatus.PENDING, None
                call.save(update_fields=["status", "completed_at"])
    for assignment, amount, fields in due:
        try:
            _bonus_send(assignment=assignment, amount=amount, reason=reason, fields=fields)
        except Exception as exc:  # one failed call must not stop the others; said per row
            batch.refused.append((assignment, exc))
        else:
            batch.paid.append(assignment)
    # Past the cap, no new bonus is written; one already in flight (its answer lost) is
    # counted already and adds nothing, so it was sent again all the same: refused with the
    # rest, it stayed in doubt every time. The callers say both.
    batch.over_cap = "; ".join(overs)
    return batch


def assignment_bonus_pay(*, assignment: Assignment, amount: Decimal, reason: str,
                         key: str | None = None) -> Assignment:
    """Pay one bonus once (`assignments_bonus_pay` of a selection of one): raises its
    refusal (ReviewError) or the provider's error."""
    batch = assignments_bonus_pay(bonuses=[(assignment, amount)], reason=reason, key=key)
    for _assignment, exc in batch.refused:
        raise exc
    if batch.over_cap and not batch.paid:
        raise ReviewError(batch.over_cap)
    return assignment


def _bonus_send(*, assignment: Assignment, amount: Decimal, reason: str, fields: dict) -> None:
    """Send a bonus whose call is written (or retry it) and record what the assignment has
    been paid."""
    provider = get_provider(assignment.stage.provider)
    # A payment first tried longer ago than the provider remembers its token (MTurk: 24 h) is
    # looked up before it is sent again: the first attempt may have paid.
    stale = call_token_is_stale(key=fields["key"], window=provider.token_dedup_window)

    def pay(token: str) -> dict:
        if stale and _bonus_paid_by_earlier_attempt(provider, assignment, amount, reason):
            return {"paid_by_earlier_attempt": f"{amount:.2f}", "found_by": "ListBonusPayments"}
        return provider.bonus(assignment=assignment, amount=amount, reason=reason, token=token)

    provider_call_run(call_fn=pay, **fields)
    # The paid total is recomputed from the recorded calls, so it cannot drift on retries.
    paid = ProviderCall.objects.filter(
        assignment=assignment, operation=BONUS_OPERATION, status=ProviderCallStatus.SUCCEEDED
    ).aggregate(total=Sum("amount"))["total"] or Decimal("0")
    assignment.bonus_paid = paid
    assignment.save(update_fields=["bonus_paid"])


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
            assignment=assignment, operation=BONUS_OPERATION, status=ProviderCallStatus.SUCCEEDED,
            amount=amount)
        if (call.request or {}).get("reason", "")[:1024] == reason
    )
    return remote > recorded


def correct_answer_bonus(*, assignment: Assignment) -> Decimal:
    """STARC: the project's bonus per correct answer times the correct answers, as the cost
    estimate budgets it (`stage_cost_estimate`: the HITs' items): never for a practice item,
    and nothing for a worker the practice rule excludes from the study
    (`practice_failed_worker_ids`)."""
    project = assignment.stage.project
    per = project.bonus_per_correct
    if not per or per <= 0 or assignment.worker_id in practice_failed_worker_ids(project):
        return Decimal("0")
    correct = 0
    for judgment in assignment.judgments.filter(item__is_practice=False).select_related(
            "item", "item__project"):
        verdict = judgment.extra.get("is_correct") if judgment.extra else None
        if verdict is None:
            verdict = answer_is_correct(item=judgment.item, judgment=judgment)
        correct += bool(verdict)
    return per * correct


def worker_block_everywhere(*, worker: Worker, reason: str, by=None,
                            study_rule: bool = False, rule_project_id: int | None = None
                            ) -> Worker:
    """Block here (for `by`'s projects, or globally: see services/workers.py; `study_rule`:
    a study's automatic rule, for its owner's projects only) and on the worker's provider
    (CreateWorkerBlock: MTurk blocks are per requester account, the account of the study that
    blocks). `rule_project_id`: the project whose `block_after_rejections` rule blocks, kept on
    the call's record (the rejections it acted on: `auto_review._block_repeated_rejections`)."""
    from annotation.services.workers import worker_block

    worker = worker_block(worker=worker, reason=reason, by=by, study_rule=study_rule)
    provider = get_provider(worker.provider)
    provider_call_run(
        provider=worker.provider, operation="BlockWorker",
        key=f"{worker.provider}:block:{worker.pk}:{new_token('b')}",
        call_fn=lambda _token: provider.block(worker=worker, reason=reason),
        worker=worker, request={"reason": reason, **(
            {"rule_project": rule_project_id} if rule_project_id is not None else {})},
    )
    return worker


def worker_unblock_everywhere(*, worker: Worker, reason: str = "", by=None) -> Worker:
    """Unblock here and on the worker's provider; a researcher's is refused (nothing changed:
    `worker_provider_unblock_check`) while a superuser or another researcher still blocks the
    worker."""
    from annotation.services.workers import worker_provider_unblock_check, worker_unblock

    worker_provider_unblock_check(worker=worker, by=by)
    provider = get_provider(worker.provider)
    provider_call_run(
        provider=worker.provider, operation="UnblockWorker",
        key=f"{worker.provider}:unblock:{worker.pk}:{new_token('u')}",
        call_fn=lambda _token: provider.unblock(worker=worker, reason=reason or "unblocked"),
        worker=worker,
    )
    return worker_unblock(worker=worker, by=by)


def stage_qualified_workers(*, stage: Stage) -> list[Worker]:
    """The active workers who passed the qualification `stage` requires (who a message about
    the stage reaches); a pass graded from rejected work qualifies no one
    (`qualification_results_that_count`)."""
    passed = qualification_results_that_count(WorkerQualification.objects.filter(
        stage_id=stage.requires_stage_id, passed=True)).values("worker_id")
    return list(Worker.objects.filter(pk__in=passed, status=WorkerStatus.ACTIVE)
                .order_by("provider", "external_id"))


def stage_qualified_workers_notify(*, stage: Stage, message: str,
                                   subject: str = "") -> tuple[int, dict]:
    """Message the active workers who passed the qualification `stage` requires, about new
    work in its project (subject by default "New work: <project title>"): (how many,
    `workers_notify`'s results)."""
    workers = stage_qualified_workers(stage=stage)
    return len(workers), workers_notify(
        workers=workers, subject=subject or f"New work: {stage.project.title}", message=message)


def workers_notify(*, workers: list[Worker], subject: str, message: str) -> dict:
    by_provider: dict[str, list[Worker]] = {}
    for worker in workers:
        by_provider.setdefault(worker.provider, []).append(worker)
    return {
        name: get_provider(name).notify(workers=group, subject=subject, message=message)
        for name, group in by_provider.items()
    }
