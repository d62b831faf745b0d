"""What a stage will cost before anything is spent, and what it has cost (reads only).

rewards = reward per HIT × assignments; the provider's fee on top (MTurk: 20%, 40% for a HIT
with 10 or more assignments — computed per HIT, so one big HIT does not change the others — and
at least $0.01 per assignment); bonuses = the stage's bonus budget (or, for STARC with a bonus
per correct answer, the most that can be paid: every judgment correct, one payment per
assignment) plus the provider's fee on bonuses (MTurk: 20%, at least $0.01 per payment).

The balance (`with_balance=True`) is informational: when the provider cannot be asked, the
estimate says "balance unknown: <reason>" and publishing is not held up by it.

Effective hourly pay = reward per HIT ÷ (items per HIT × seconds per item) × 3600, with the
seconds per item taken from the project's trial (the median over its assignments whose work
counts — `annotation.selectors.judgments_that_count`: not rejected, returned or flagged, no blocked
worker, no unverified session, some data item answered — of wall time from start to submit ÷
items, which includes reading the instructions: what the worker actually spends; a spammer's fast
rejected work would drag the median down and underpay careful workers), else from the stage's
stated assumption (`settings.seconds_per_item`).
Below `QAJ_MIN_HOURLY_PAY` (USD, default 12) the estimate carries a warning.
"""
from __future__ import annotations

import dataclasses
import statistics
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db.models import Count, Q

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Provider,
    Stage,
    StageKind,
    StageStatus,
)
from annotation.selectors import (
    judgments_that_count,
    prolific_study_places,
    provider_paid_filter,
)
from annotation.stage_plan_selectors import (
    adaptive_rule_planned,
    places_for_plans,
    stage_hits_planned,
)

CENT = Decimal("0.01")
# The recorded call of every bonus payment, whichever door pays it.
BONUS_OPERATION = "SendBonus"


@dataclasses.dataclass(frozen=True)
class StageCostEstimate:
    provider: str
    n_hits: int
    n_assignments: int
    n_judgments: int
    reward_per_hit: Decimal
    rewards: Decimal
    fees: Decimal
    hits_in_40pct_tier: int
    bonus_budget: Decimal
    bonus_fees: Decimal
    total: Decimal
    balance: Decimal | None = None
    balance_error: str = ""  # why the balance could not be read (asked for, not known)
    seconds_per_item: float | None = None
    # "trial median of N counted assignments (A approved, S awaiting review)" or "stated in the
    # stage settings"
    seconds_per_item_source: str = ""
    hourly_pay: Decimal | None = None
    min_hourly_pay: Decimal | None = None
    # Where the money goes (`CrowdProvider.environment`: MTurk sandbox or PRODUCTION, ...),
    # said first wherever the estimate is shown, so the two cannot be confused.
    environment: str = ""
    # Under adaptive redundancy the plan is its most (`planned_redundancy`): said with the total.
    redundancy_note: str = ""

    @property
    def covered_by_balance(self) -> bool | None:
        return None if self.balance is None else self.balance >= self.total

    @property
    def pay_warning(self) -> str:
        """Why the pay looks too low (or cannot be told), or ""."""
        if self.hourly_pay is None:
            return ("hourly pay unknown: run a trial or state settings.seconds_per_item")
        if self.min_hourly_pay is not None and self.hourly_pay < self.min_hourly_pay:
            return (f"effective pay ${self.hourly_pay}/h is below the floor of "
                    f"${self.min_hourly_pay}/h (QAJ_MIN_HOURLY_PAY)")
        return ""

    def pay_text(self) -> str:
        if self.hourly_pay is None:
            return self.pay_warning
        text = (f"effective pay ${self.hourly_pay}/h at {self.seconds_per_item:.0f} s per item "
                f"({self.seconds_per_item_source})")
        return f"{text}; WARNING: {self.pay_warning}" if self.pay_warning else text

    def confirmation_text(self) -> str:
        """What a researcher confirms before real money is spent: where, how much work, and
        the total with fees ("on MTurk PRODUCTION (real money): 3 HITs, 27 assignments,
        $12.96 with fees and bonus budget")."""
        work = (f"{self.n_assignments} places" if self.provider == Provider.PROLIFIC
                else f"{self.n_hits} HITs, {self.n_assignments} assignments")
        return (f"on {self.environment}: {work}, ${self.total} in all (rewards ${self.rewards} "
                f"+ fees ${self.fees} + bonus budget ${self.bonus_budget} + fees "
                f"${self.bonus_fees}){self._redundancy_said()}")

    def _redundancy_said(self) -> str:
        return f"; {self.redundancy_note}" if self.redundancy_note else ""

    def as_text(self) -> str:
        tier = f", {self.hits_in_40pct_tier} HITs at the 40% fee" if self.hits_in_40pct_tier else ""
        if self.balance is not None:
            balance = f"; balance ${self.balance}"
        elif self.balance_error:
            balance = f"; balance unknown: {self.balance_error}"
        else:
            balance = ""
        where = f"on {self.environment}: " if self.environment else ""
        return (
            f"{where}{self.n_hits} HITs × reward ${self.reward_per_hit} = {self.n_assignments} "
            f"assignments ({self.n_judgments} judgments): rewards ${self.rewards} + fees "
            f"${self.fees}{tier} + bonus budget ${self.bonus_budget} (+ fees ${self.bonus_fees})"
            f" = ${self.total}{self._redundancy_said()}{balance}; {self.pay_text()}"
        )


def _money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def stage_cost_estimate(*, stage: Stage, with_balance: bool = False,
                        plans=None) -> StageCostEstimate:
    """Cost of the stage's HITs (built, or as `stage_hits_planned` plans them; `plans`: that
    plan when the caller has it already)."""
    from annotation.providers import get_provider


    provider = get_provider(stage.provider)
    hits = list(stage.hits.all())
    # (assignments, items, items a correct answer earns the bonus on, reward) per HIT: the
    # bonus per correct answer is never paid on a practice item (`correct_answer_bonus`).
    if hits:
        asked = reoffers_in_flight(stage=stage)
        counted = {row["pk"]: (row["n"], row["paid"]) for row in stage.hits.values("pk").annotate(
            n=Count("items"), paid=Count("items", filter=Q(items__is_practice=False)))}
        groups = [(hit.max_assignments + asked.get(hit.pk, 0), *counted.get(hit.pk, (0, 0)),
                   hit.reward) for hit in hits]
    else:
        plans = plans if plans is not None else stage_hits_planned(stage=stage)
        groups = [(plan.max_assignments, len(plan.items),
                   sum(not item.is_practice for item in plan.items), stage.reward)
                  for plan in plans]
    rewards = fees = Decimal("0")
    n_assignments = n_judgments = in_tier = n_bonus_answers = 0
    per_correct = stage.project.bonus_per_correct or Decimal("0")
    per_correct_fees = Decimal("0")
    for max_assignments, n_items, n_paid_items, reward in groups:
        rate = provider.fee_rate(max_assignments=max_assignments)
        rewards += reward * max_assignments
        fees += provider.assignment_fee(reward=reward,
                                        max_assignments=max_assignments) * max_assignments
        n_assignments += max_assignments
        n_judgments += max_assignments * n_items
        n_bonus_answers += max_assignments * n_paid_items
        in_tier += rate >= Decimal("0.40")
        # One per-correct bonus payment per assignment, at most every item right.
        per_correct_fees += provider.bonus_fee(amount=per_correct * n_paid_items) * max_assignments
    if stage.provider == Provider.PROLIFIC and groups:
        # A study pays its places, the batches its pages hand out (`places_for_plans`), not
        # the HITs' assignments: the judgments are the same, fewer participants carry them.
        places = (prolific_study_places(stage=stage) + sum(asked.values()) if hits
                  else places_for_plans(stage=stage, plans=plans))
        surplus, reward = n_assignments - places, groups[0][3]
        rewards -= reward * surplus
        fees -= provider.assignment_fee(reward=reward, max_assignments=1) * surplus
        n_assignments = places
    budget = (stage.settings or {}).get("bonus_budget")
    if budget is not None:
        bonus_budget = Decimal(str(budget))
        bonus_fees = provider.bonus_fee(amount=bonus_budget)
    else:
        bonus_budget = per_correct * n_bonus_answers
        bonus_fees = per_correct_fees
    balance, balance_error = None, ""
    if with_balance:
        balance, balance_error = _balance(provider, stage=stage)
    seconds, source = seconds_per_item(stage=stage)
    hourly_pay = None
    if seconds and n_judgments:
        items_per_assignment = n_judgments / n_assignments
        hourly_pay = _money(rewards / n_assignments
                            / Decimal(str(items_per_assignment * seconds)) * 3600)
    return StageCostEstimate(
        provider=stage.provider,
        n_hits=len(groups),
        n_assignments=n_assignments,
        n_judgments=n_judgments,
        reward_per_hit=_money(stage.reward),
        rewards=_money(rewards),
        fees=_money(fees),
        hits_in_40pct_tier=in_tier,
        bonus_budget=_money(bonus_budget),
        bonus_fees=_money(bonus_fees),
        # The sum of the lines it shows, each rounded to the cent.
        total=_money(rewards) + _money(fees) + _money(bonus_budget) + _money(bonus_fees),
        balance=balance,
        balance_error=balance_error,
        seconds_per_item=seconds,
        seconds_per_item_source=source,
        hourly_pay=hourly_pay,
        min_hourly_pay=_money(Decimal(str(settings.QAJ_MIN_HOURLY_PAY))),
        environment=provider.environment(),
        redundancy_note=_adaptive_note(stage, planned=[group[0] for group in groups]),
    )


def _adaptive_note(stage: Stage, *, planned: list[int]) -> str:
    """What the estimate says of an adaptive rule planned at its max (`planned_redundancy`),
    or "": no rule, or HITs built before the plan followed the rule (`planned`: each HIT's
    assignments), which are not planned for its max and do not claim to be."""
    rule = adaptive_rule_planned(stage)
    if rule is None or not planned or min(planned) < rule.max:
        return ""
    return (f"planned for up to {rule.max} judgments per item (adaptive redundancy: {rule.min} "
            f"and more while judges disagree), the most it can cost; items settled sooner "
            f"leave work unused, which is not paid")


def publish_needs_confirmation(*, stage: Stage) -> bool:
    """Whether publishing this stage waits for the researcher to confirm its cost: a draft
    whose provider spends real money (MTurk production, Prolific's own API; the services'
    `confirmation_guard`). Sandbox, rehearsal endpoints and in-house publish at once."""
    from annotation.providers import get_provider

    return (stage.status == StageStatus.DRAFT
            and get_provider(stage.provider).spends_real_money())


def reoffers_in_flight(*, stage: Stage) -> dict[int, int]:
    """{HIT id: assignments (places) asked for and not yet grown into the HIT}: the re-offer
    calls written (`annotation/services/replacements.py`) that did not fail for good and are
    not recorded yet. The estimate counts them from the moment their row exists, so a spend
    checked while one is in flight (its answer not back, or lost) sees it."""
    from annotation.models import ProviderCall, ProviderCallStatus
    from annotation.selectors import (
        PROLIFIC_REOFFER_OPERATION,
        REOFFER_OPERATION,
        reoffers_not_grown,
    )

    asked: dict[int, int] = {}
    calls = reoffers_not_grown(ProviderCall.objects.filter(
        stage=stage, hit__isnull=False,
        operation__in=(REOFFER_OPERATION, PROLIFIC_REOFFER_OPERATION)).exclude(
        status=ProviderCallStatus.FAILED)).values_list("hit_id", "request")
    for hit_id, request in calls:
        asked[hit_id] = asked.get(hit_id, 0) + int(
            (request or {}).get("NumberOfAdditionalAssignments", 1))
    return asked


def seconds_per_item(*, stage: Stage) -> tuple[float | None, str]:
    """(seconds a worker spends per item, where the number comes from), or (None, ""): the
    trial's median over the assignments whose work counts (`judgments_that_count`), saying how
    many it read and how many of them are approved."""
    counted = (judgments_that_count(project=stage.project)
               .filter(stage__kind=StageKind.TRIAL).values("assignment_id"))
    trial_work = (Assignment.objects
                  .filter(pk__in=counted, submitted_at__isnull=False)
                  .annotate(n_items=Count("items"))
                  .values_list("started_at", "submitted_at", "n_items", "status"))
    durations, approved = [], 0
    for started, submitted, n_items, status in trial_work:
        if n_items and submitted > started:
            durations.append((submitted - started).total_seconds() / n_items)
            approved += status == AssignmentStatus.APPROVED
    if durations:
        read = len(durations)
        return statistics.median(durations), (
            f"trial median of {read} counted assignment{'s' if read != 1 else ''} "
            f"({approved} approved, {read - approved} awaiting review)")
    stated = (stage.settings or {}).get("seconds_per_item")
    try:
        stated = float(stated) if stated is not None else None
    except (TypeError, ValueError):
        return None, ""  # not a number: the estimate says the pay is unknown
    if stated and stated > 0:
        return stated, "stated in the stage settings"
    return None, ""


def _balance(provider, *, stage: Stage) -> tuple[Decimal | None, str]:
    """The provider's balance for `stage` (the workspace it is paid from), or why it is
    unknown. Any failure is reported rather than
    raised: the estimate goes on without the balance, saying so (whether publishing may go on
    is the readiness check's call, annotation/readiness_selectors.py)."""
    from annotation.providers.base import balance_error_text

    try:
        return provider.balance(stage=stage), ""
    except Exception as exc:  # shown to the researcher, never hidden
        return None, balance_error_text(exc)


@dataclasses.dataclass(frozen=True)
class StagePaid:
    """What a stage has paid: rewards of approved work and their fees; bonuses paid or in
    flight and their fees (`stage_paid`)."""
    rewards: Decimal = Decimal("0")
    bonuses: Decimal = Decimal("0")

    @property
    def total(self) -> Decimal:
        return _money(self.rewards + self.bonuses)


def committed_amount(*, estimate: StageCostEstimate | None, paid: StagePaid,
                     built_hits: bool = True) -> Decimal:
    """The money a published stage holds of the budget, from its estimate and what it has
    paid, rewards and bonuses each on their own: the estimate's rewards and fees, or the
    rewards paid when that is more; plus its bonus budget and fees, or the bonuses paid (or in
    flight) when that is more. Money spent stays spent whatever the estimate said, and a bonus
    beyond the bonus budget never hides in the rewards still to be paid (one max over the
    totals let a $5 bonus on a stage whose $10 of rewards were not yet paid commit $10, not
    $15). A stage that never built HITs (`built_hits` False: an imported one, whose judgments
    were collected elsewhere; a draft closed unpublished) put nothing on a provider: it holds
    what it paid, never the price of a plan it would not run. The budget guards and the
    cockpit both add these up."""
    if not built_hits or estimate is None:
        return paid.total
    return _money(max(estimate.rewards + estimate.fees, paid.rewards)
                  + max(estimate.bonus_budget + estimate.bonus_fees, paid.bonuses))


def stage_committed_cost(*, stage: Stage) -> Decimal:
    """`committed_amount` of a published stage (planning a stage that never built HITs priced
    phantom HITs, or raised for a qualification without gold: it is not planned)."""
    return _stage_committed(stage)


def _stage_committed(stage: Stage, *, estimate_grows: Decimal = Decimal("0"),
                     spent_grows: Decimal = Decimal("0")) -> Decimal:
    built_hits = stage.hits.exists()
    paid = stage_paid(stage=stage)
    paid = StagePaid(rewards=paid.rewards, bonuses=paid.bonuses + spent_grows)
    if not built_hits:
        return _money(paid.total + estimate_grows)
    estimate = stage_cost_estimate(stage=stage)
    estimate = dataclasses.replace(estimate, fees=estimate.fees + estimate_grows)
    return committed_amount(estimate=estimate, paid=paid)


def project_committed_cost(*, project, exclude_stage: Stage | None = None,
                           exclude_stages=()) -> Decimal:
    """The money committed: `stage_committed_cost` of every stage of the project already
    published (but `exclude_stage` / `exclude_stages`)."""
    total = Decimal("0")
    stages = project.stages.exclude(status=StageStatus.DRAFT)
    excluded = [stage.pk for stage in (*exclude_stages, exclude_stage) if stage is not None]
    if excluded:
        stages = stages.exclude(pk__in=excluded)
    for other in stages:
        total += stage_committed_cost(stage=other)
    return total


def committed_after(*, stage: Stage, estimate_grows: Decimal = Decimal("0"),
                    spent_grows: Decimal = Decimal("0")) -> Decimal:
    """What the project would commit (`project_committed_cost`) once `stage` spends more: its
    estimated rewards grown by `estimate_grows` (one more assignment or place, fee included)
    and its bonuses paid or in flight by `spent_grows` (a bonus and its fee). The one sum
    behind every spending door's check (`spend_over_budget`)."""
    return (project_committed_cost(project=stage.project, exclude_stage=stage)
            + _stage_committed(stage, estimate_grows=estimate_grows, spent_grows=spent_grows))


def budget_cap_now(*, project_id: int) -> Decimal | None:
    """The project's budget cap as stored now: a check made under the budget lock reads the
    cap a researcher may have just changed, not the one its project object was loaded with."""
    from annotation.models import Project

    return Project.objects.values_list("budget_cap", flat=True).get(pk=project_id)


def spend_over_budget(*, stage: Stage, what: str, estimate_grows: Decimal = Decimal("0"),
                      spent_grows: Decimal = Decimal("0"), advice: str = "raise the cap first"
                      ) -> str:
    """Why spending `what` on `stage` would take the project past its budget cap ("" when it
    would not, or there is no cap), from `committed_after`. Every door that spends beyond what
    publishing committed asks it under the project's budget lock
    (`annotation.services.budget.budget_lock`), and writes its provider call's row (counted
    from then on) before the lock is let go: a replacement assignment, a Prolific place; the
    bonuses (by hand or per correct answer, a selection's together) ask `bonuses_over_budget`,
    the same sum and cap."""
    cap = budget_cap_now(project_id=stage.project_id)
    if cap is None:
        return ""
    after = committed_after(stage=stage, estimate_grows=estimate_grows,
                            spent_grows=spent_grows)
    if after <= cap:
        return ""
    return (f"{what} would commit ${_money(after)} of the project's ${cap} budget cap; "
            f"{advice}")


def bonuses_over_budget(*, bonuses: list[tuple[Stage, Decimal]]) -> str:
    """Why paying every bonus of `bonuses` ((stage, amount) pairs, all of one project: a
    selection's, or review's bonuses per correct answer) together, each with the provider's
    fee, would take the project past its budget cap ("" when it would not, or there is no
    cap): the selection is checked as a whole, never paid in part up to the cap. Each stage
    then holds what it has paid (bonuses in flight included) plus its new bonuses, if that is
    more than its estimate (`committed_amount`). The refusal names the bonuses' total, what
    the project has committed, what is left and the cap. Asked under the project's budget
    lock (`spend_over_budget`'s rule)."""
    from annotation.providers import get_provider

    if not bonuses:
        return ""
    project = bonuses[0][0].project
    cap = budget_cap_now(project_id=project.pk)
    if cap is None:
        return ""
    grows: dict[int, Decimal] = {}
    stages: dict[int, Stage] = {}
    amount_total = Decimal("0")
    for stage, amount in bonuses:
        stages[stage.pk] = stage
        fee = get_provider(stage.provider).bonus_fee(amount=amount)
        grows[stage.pk] = grows.get(stage.pk, Decimal("0")) + amount + fee
        amount_total += amount
    before = project_committed_cost(project=project)
    after = sum((_stage_committed(stage, spent_grows=grows[pk]) for pk, stage in stages.items()),
                project_committed_cost(project=project, exclude_stages=stages.values()))
    if after <= cap:
        return ""
    cost = sum(grows.values(), Decimal("0"))
    what = (f"a bonus of ${amount_total}" if len(bonuses) == 1
            else f"the bonuses of {len(bonuses)} assignments, ${amount_total} in all")
    left = max(cap - before, Decimal("0"))
    return (f"{what} (${_money(cost)} with the provider's fees) would commit ${_money(after)} "
            f"of the project's ${cap} budget cap (“{project.title}”: ${_money(before)} "
            f"committed, ${_money(left)} left); raise the cap first")


def extra_assignment_over_budget(*, stage: Stage, reward: Decimal, max_assignments: int) -> str:
    """Why offering one more assignment (at `reward`, on a HIT that will then have
    `max_assignments`) would take the project past its budget cap ("" when it would not, or
    there is no cap): the stage's estimate grows by the reward and the provider's fee on it
    (a rejected assignment is not paid, so this errs on the side of the cap)."""
    from annotation.providers import get_provider

    cost = reward + get_provider(stage.provider).assignment_fee(
        reward=reward, max_assignments=max_assignments)
    return spend_over_budget(
        stage=stage, estimate_grows=cost,
        what=f"one more assignment (${_money(cost)} with the provider's fee)",
        advice="raise the cap to re-offer it")


def stage_spent(*, stage: Stage) -> Decimal:
    """Money paid so far on the stage (`stage_paid`'s total)."""
    return stage_paid(stage=stage).total


def stage_paid(*, stage: Stage) -> StagePaid:
    """Money paid so far on the stage: each approved assignment's reward and the provider's fee
    on it — approved here, or approved by the provider itself while we held it (MTurk's
    auto-approval of flagged work: a succeeded approve call recorded by the sync, whatever the
    researcher decides later); every bonus paid or in flight and its fee
    (`stage_bonuses_committed`)."""
    from annotation.providers import get_provider

    provider = get_provider(stage.provider)
    rewards = Decimal("0")
    approved = (Assignment.objects.filter(provider_paid_filter(), stage=stage)
                .select_related("hit"))
    for assignment in approved:
        reward = assignment.hit.reward if assignment.hit else stage.reward
        max_assignments = assignment.hit.max_assignments if assignment.hit else 1
        rewards += reward + provider.assignment_fee(reward=reward,
                                                    max_assignments=max_assignments)
    return StagePaid(rewards=_money(rewards),
                     bonuses=_money(stage_bonuses_committed(stage=stage, provider=provider)))


def stage_bonuses_committed(*, stage: Stage, provider) -> Decimal:
    """Every bonus payment of the stage that paid or may have paid, each with the provider's fee
    on it (MTurk's $0.01 minimum is per payment): the recorded `SendBonus` calls that did not
    fail for good, so one in flight (written before it is sent, its answer not back, or lost)
    is committed from the moment its row exists and a second bonus checked meanwhile counts it;
    plus, for safety, any bonus an assignment records beyond its calls."""
    from annotation.models import ProviderCall, ProviderCallStatus

    total = Decimal("0")
    recorded: dict[int, Decimal] = {}
    calls = (ProviderCall.objects.filter(stage=stage, operation=BONUS_OPERATION,
                                         amount__gt=0)
             .exclude(status=ProviderCallStatus.FAILED)
             .values_list("assignment_id", "amount", "status"))
    for assignment_id, amount, status in calls:
        total += amount + provider.bonus_fee(amount=amount)
        if status == ProviderCallStatus.SUCCEEDED:
            recorded[assignment_id] = recorded.get(assignment_id, Decimal("0")) + amount
    for pk, paid in (Assignment.objects.filter(stage=stage, bonus_paid__gt=0)
                     .values_list("pk", "bonus_paid")):
        beyond = paid - recorded.get(pk, Decimal("0"))
        if beyond > 0:
            total += beyond + provider.bonus_fee(amount=beyond)
    return total
