"""Replacement slots on MTurk, and places on Prolific. A HIT fixes its number of assignments
(`MaxAssignments`, the item's redundancy) when it is created, and MTurk does not give back the
slot of an assignment rejected after submission: the study buys a new one
(CreateAdditionalAssignmentsForHIT). In-house and Prolific pages pick their items, so picking
serves a slot given back again (`annotation/services/assignments/picking.py`); in-house that is
all, but a Prolific participant first needs a free place in the study, and the study has as
many places as its HITs have assignments (`ProlificProvider.publish_stage`). Prolific gives
back by itself the place of a submission that is returned, timed out or rejected; it keeps the
place of an approved one, so work approved and then given back (its worker blocked for the
project) gets one more place (`_prolific_places_offer`).

Which work gives its slot back is the one rule of `annotation.selectors.judgments_releasing_slots`
(rejected work, a worker blocked for the project, ...), read per assignment here: an MTurk
assignment covers one HIT, so one replacement assignment on that HIT refills each of its items.
Not replaced here, each for a reason:

- flagged work: held for the researcher, it may still be approved and count; rejecting it is
  what gives the slot back (an assignment MTurk never listed took no slot at all);
- returned or abandoned work: MTurk reopens that slot itself;
- a stage that is not live (closed, or a draft), a practice or qualification stage (its takers
  are no redundancy), a HIT that expired (extend the stage, the next sync re-offers) — here, or
  on MTurk's requester site, which MTurk is asked (GetHIT, `CrowdProvider.hit_state`) before an
  assignment is bought, the HIT's expiry recorded as MTurk holds it — a HIT that
  MTurk cannot take from under 10 assignments to 10 or more, and an extra assignment that would
  pass the project's budget cap (`annotation.cost_selectors.extra_assignment_over_budget`).

Each replacement is one recorded provider call keyed by the assignment it replaces
(`annotation/providers/calls.py`): a retried, redelivered or repeated sync never adds a second
assignment for the same rejection, and a lost answer is retried with the same token, which MTurk
deduplicates. Only then, in one transaction with marking the call recorded, the local HIT's
`max_assignments` grows by one (what the cost estimate, "collection complete" and "HIT done"
read), so a crash between the call and the record is finished by the next sync.

Prolific, in the same way, one recorded call (`UpdateStudyPlaces`, keyed by the assignment)
per approved submission given back, in a live data stage and within the budget cap. Not for:
a rejected, returned or timed-out submission (Prolific reopened its place), one still awaiting
review (rejecting it reopens the place, approving it makes it owed here), flagged work (as on
MTurk), and a session that failed verification (it was no submission of the study: it took no
place). Prolific has no idempotency token, so each call sets the study's places to an absolute
number fixed when its row is written: the places the study was created with plus the call's
rank among the stage's place calls. A retry after a lost answer, or a call overtaken by a later
one, finds the places already there and adds none (`ProlificProvider.study_places_raise`).
Places a researcher adds by hand on Prolific count toward these.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from annotation.cost_selectors import extra_assignment_over_budget
from annotation.models import (
    LIVE_STAGE_STATUSES,
    NON_DATA_STAGE_KINDS,
    Assignment,
    AssignmentStatus,
    Hit,
    HitStatus,
    Judgment,
    Provider,
    ProviderCall,
    ProviderCallStatus,
    Stage,
)
from annotation.providers import get_provider
from annotation.providers.calls import (
    ProviderCallRefused,
    new_token,
    provider_call_get_or_create,
    provider_call_run,
)
from annotation.selectors import (
    PROLIFIC_REOFFER_OPERATION,
    REOFFER_OPERATION,
    judgments_releasing_slots,
    provider_paid_filter,
    reoffers_not_grown,
)
from annotation.services.budget import budget_lock
from annotation.services.hits import hit_update_record

# MTurk refuses to take a HIT made with fewer than 10 assignments to 10 or more.
MTURK_ASSIGNMENT_TIER = 10
# The recorded calls that re-offer a slot, each growing its HIT by one once recorded.
REOFFER_OPERATIONS = (REOFFER_OPERATION, PROLIFIC_REOFFER_OPERATION)


@dataclass
class ReplacementReport:
    reoffered: int = 0
    # Why a slot given back is not re-offered yet (each sync tries again).
    waiting: list[str] = field(default_factory=list)


def assignments_to_replace(*, stage: Stage) -> QuerySet[Assignment]:
    """The stage's MTurk assignments whose slot was given back (`judgments_releasing_slots`,
    or rejected without a judgment here) and not yet re-offered: confirmed by MTurk (they took a
    slot there), neither flagged, returned nor in progress (see the module doc)."""
    released = judgments_releasing_slots(Judgment.objects.filter(stage=stage),
                                         project=stage.project)
    reoffered = ProviderCall.objects.filter(stage=stage, operation=REOFFER_OPERATION,
                                            status=ProviderCallStatus.SUCCEEDED)
    return (stage.assignments.filter(hit__isnull=False, provider_confirmed_at__isnull=False)
            .exclude(status__in=[AssignmentStatus.FLAGGED, AssignmentStatus.RETURNED,
                                 AssignmentStatus.IN_PROGRESS])
            .filter(Q(status=AssignmentStatus.REJECTED)
                    | Q(pk__in=released.values("assignment_id")))
            .exclude(pk__in=reoffered.values("assignment_id"))
            .select_related("hit", "worker").order_by("pk"))


def stage_replacements_offer(*, stage: Stage) -> ReplacementReport:
    """Add one MTurk assignment per slot given back in a live data stage, or one Prolific place
    per approved submission given back (module doc); idempotent. In-house: nothing to do (its
    picking re-offers the slot)."""
    report = ReplacementReport()
    if (stage.provider not in (Provider.MTURK, Provider.PROLIFIC)
            or stage.kind in NON_DATA_STAGE_KINDS):
        return report
    _reoffers_record(stage)  # calls a crash left unrecorded
    # A live stage's HITs are still offered: a replacement bought for a closed one is never used.
    if stage.status not in LIVE_STAGE_STATUSES:
        return report
    if stage.provider == Provider.PROLIFIC:
        return _prolific_places_offer(stage, report)
    provider = get_provider(stage.provider)
    now = timezone.now()
    for assignment in assignments_to_replace(stage=stage):
        hit = Hit.objects.get(pk=assignment.hit_id)  # fresh: an earlier pass may have grown it
        key = f"mturk:reoffer:{assignment.pk}"
        why = _cannot_reoffer(hit, now) or _expired_on_provider(provider, hit, key=key)
        if why:
            report.waiting.append(f"{assignment}: {why}")
            continue
        # Throttled or lost: the next sync repeats the same token.
        if not _reoffer_call(report, assignment, what="a replacement", provider=Provider.MTURK,
                      operation=REOFFER_OPERATION, key=key,
                      token=new_token(f"qaj-reoffer-{assignment.pk}"),
                      call_fn=lambda token, hit=hit: provider.assignments_add(
                          hit=hit, count=1, token=token),
                      stage=stage, hit=hit,
                      request={"NumberOfAdditionalAssignments": 1,
                               "replaces": assignment.external_id}):
            break  # past the budget cap: every further one costs as much
    return report


def _reoffer_call(report: ReplacementReport, assignment: Assignment, *, what: str,
                  **call) -> bool:
    """Run one recorded re-offer call (`provider_call_run`) for `assignment` and record it
    (`_reoffer_record`); a refusal or an unconfirmed answer is said in `report.waiting`, and
    the next sync retries the same call. False when the project's budget cap refuses it: the
    check (`extra_assignment_over_budget`) and the call's row are made under the budget lock,
    so a bonus or another stage's replacement checked meanwhile counts this one."""
    provider_name = Provider(call["provider"]).label
    hit = call["hit"]
    with transaction.atomic():
        budget_lock(assignment.stage.project)
        if not ProviderCall.objects.filter(key=call["key"]).exclude(
                status=ProviderCallStatus.FAILED).exists():  # a retry is counted already
            why = extra_assignment_over_budget(stage=call["stage"], reward=hit.reward,
                                               max_assignments=hit.max_assignments + 1)
            if why:
                report.waiting.append(f"{assignment}: {why}")
                return False
            provider_call_get_or_create(
                **{name: value for name, value in call.items() if name != "call_fn"},
                assignment=assignment, worker=assignment.worker)
    try:
        provider_call_run(assignment=assignment, worker=assignment.worker, **call)
    except ProviderCallRefused as exc:
        report.waiting.append(f"{assignment}: {provider_name} refused {what}: {exc}")
        return True
    except Exception as exc:  # throttled or lost
        report.waiting.append(f"{assignment}: {what} not confirmed yet: {exc}")
        return True
    report.reoffered += _reoffer_record(ProviderCall.objects.get(key=call["key"]).pk)
    return True


def _released_assignment_ids(stage: Stage) -> QuerySet[Judgment]:
    return judgments_releasing_slots(Judgment.objects.filter(stage=stage),
                                     project=stage.project).values("assignment_id")


def prolific_places_owed(*, stage: Stage) -> QuerySet[Assignment]:
    """The stage's Prolific submissions that Prolific approved (so they keep their place:
    approved here, or by Prolific while held and then rejected here, `provider_paid_filter`)
    and whose slot was given back here (`judgments_releasing_slots`: a worker blocked for the
    project, work rejected after Prolific approved it), with no place added for them yet."""
    added = ProviderCall.objects.filter(stage=stage, operation=PROLIFIC_REOFFER_OPERATION,
                                        status=ProviderCallStatus.SUCCEEDED)
    # Held work stays held (no place for it until it is decided).
    return (stage.assignments.filter(provider_paid_filter(), provider_confirmed_at__isnull=False,
                                     pk__in=_released_assignment_ids(stage))
            .exclude(status=AssignmentStatus.FLAGGED)
            .exclude(pk__in=added.values("assignment_id"))
            .select_related("hit", "worker").order_by("pk"))


def _prolific_places_offer(stage: Stage, report: ReplacementReport) -> ReplacementReport:
    undecided = stage.assignments.filter(provider_confirmed_at__isnull=False,
                                         status=AssignmentStatus.SUBMITTED,
                                         pk__in=_released_assignment_ids(stage)).order_by("pk")
    for assignment in undecided:
        report.waiting.append(f"{assignment}: awaiting review on Prolific: rejecting it gives "
                              "its place back, approving it lets the sync add one")
    owed = list(prolific_places_owed(stage=stage))
    if not owed:
        return report
    if not (stage.settings or {}).get("prolific_study_id"):
        report.waiting += [f"{a}: the stage has no Prolific study id to add a place to"
                           for a in owed]
        return report
    provider = get_provider(stage.provider)
    for assignment in owed:
        # Places are the study's, not a HIT's: the HIT grown is only the cost estimate's record.
        hit = assignment.hit or stage.hits.order_by("pk").first()
        if hit is None:
            report.waiting.append(f"{assignment}: the stage has no HIT to record a place on")
            continue
        hit = Hit.objects.get(pk=hit.pk)  # fresh: an earlier pass may have grown it
        key = f"prolific:places:{assignment.pk}"
        previous = ProviderCall.objects.filter(key=key).first()
        target = (int(previous.request["total_available_places"]) if previous is not None
                  else _next_places_target(stage))
        # Throttled or lost: the next sync sets the same number.
        if not _reoffer_call(report, assignment, what="a place", provider=Provider.PROLIFIC,
                      operation=PROLIFIC_REOFFER_OPERATION, key=key,
                      call_fn=lambda _token, target=target: provider.study_places_raise(
                          stage=stage, at_least=target),
                      stage=stage, hit=hit,
                      request={"total_available_places": target,
                               "replaces": assignment.external_id}):
            break  # past the budget cap: every further place costs as much
    return report


def _next_places_target(stage: Stage) -> int:
    """The study's places once the place call about to be written is done: what it was
    created with, plus one per place call of the stage (this one included). Fixed in the
    call's row, so every retry sets the same number (module doc)."""
    created = ProviderCall.objects.filter(key=f"prolific:study-create:{stage.pk}").first()
    base = int(((created.request or {}) if created else {}).get("places") or 0)
    calls = ProviderCall.objects.filter(stage=stage, operation=PROLIFIC_REOFFER_OPERATION)
    if not base:  # a study made on Prolific's site: the HITs' assignments before any place
        grown = calls.filter(response__recorded=True).count()
        base = sum(stage.hits.values_list("max_assignments", flat=True)) - grown
    return base + calls.count() + 1


def _cannot_reoffer(hit: Hit, now) -> str:
    if not hit.external_id:
        return "its HIT is not on MTurk"
    if hit.status == HitStatus.EXPIRED or (hit.expires_at is not None and hit.expires_at <= now):
        return "its HIT has expired; extend the stage to re-offer the slot"
    if hit.max_assignments < MTURK_ASSIGNMENT_TIER <= hit.max_assignments + 1:
        return (f"MTurk cannot take a HIT made with fewer than {MTURK_ASSIGNMENT_TIER} "
                f"assignments to {MTURK_ASSIGNMENT_TIER}")
    return ""


def _expired_on_provider(provider, hit: Hit, *, key: str) -> str:
    """Why no assignment can be added to a HIT open here that the provider holds expired (the
    researcher expired it on MTurk's requester site): an assignment added to it is counted in
    the budget and never taken. The HIT's expiry as the provider holds it is recorded (an
    extension there too), so the pages and the reconciliation read it. "" when it is open, and
    for the retry of a call already made (`key`: it keeps its token and its budget)."""
    if ProviderCall.objects.filter(key=key).exclude(status=ProviderCallStatus.FAILED).exists():
        return ""
    try:
        state = provider.hit_state(hit=hit)
    except Exception as exc:  # throttled or unreachable: the next sync asks again
        return (f"MTurk could not say whether its HIT is still open ({exc}); the next sync "
                f"asks again")
    if state is None:
        return ""
    expired = state.status == HitStatus.EXPIRED
    if expired or state.expires_at != hit.expires_at:
        hit_update_record(update=dataclasses.replace(
            state, status=HitStatus.EXPIRED if expired else hit.status))
    if not expired:
        return ""
    return (f"its HIT {hit.external_id} was expired on MTurk (on its requester site) at "
            f"{state.expires_at:%Y-%m-%d %H:%M} UTC; extend the stage to re-offer the slot")


def _reoffers_record(stage: Stage) -> int:
    """Grow each HIT by the replacements MTurk added and this database has not recorded yet
    (the call and its record in one transaction: counted once); a HIT marked done opens
    again. Returns how many were recorded."""
    pending = reoffers_not_grown(ProviderCall.objects.filter(
        stage=stage, operation__in=REOFFER_OPERATIONS, status=ProviderCallStatus.SUCCEEDED))
    return sum(_reoffer_record(pk) for pk in pending.values_list("pk", flat=True))


def _reoffer_record(pk: int) -> int:
    """Record one replacement call (1), or nothing when it was recorded already (0)."""
    with transaction.atomic():
        call = ProviderCall.objects.select_for_update().get(pk=pk)
        if (call.response or {}).get("recorded") or call.hit_id is None:
            return 0
        hit = Hit.objects.select_for_update().get(pk=call.hit_id)
        hit.max_assignments += int((call.request or {}).get("NumberOfAdditionalAssignments",
                                                             1))
        fields = ["max_assignments"]
        if hit.status == HitStatus.DONE:
            hit.status = HitStatus.OPEN
            fields.append("status")
        hit.save(update_fields=fields)
        call.response = {**(call.response or {}), "recorded": True}
        call.save(update_fields=["response"])
        return 1
