"""Stages: which items go out, as which HITs, and the status machine

    draft → published → collecting → reviewing → closed

Every status change goes through `stage_transition`, which refuses illegal moves and logs each
one (with the user and reason) in `StageTransition`. `stage_publish` checks the guards (the
agreement of the previous stage, the budget cap, the account balance), builds the HITs locally
in one transaction, commits, and only then creates them on the provider one by one — each HIT's
idempotency token is stored before its call, so publishing can be interrupted and resumed.
"""
from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter, defaultdict

from django.db import transaction
from django.db.models import Q

from annotation.domain.design import latin_square_list, ordered_levels, question_key
from annotation.models import (
    Hit,
    HitItem,
    HitStatus,
    Item,
    Provider,
    Stage,
    StageKind,
    StageStatus,
    StageTransition,
    TaskKind,
)
from annotation.providers import PublishReport, get_provider

from .assignments import gold_items_for_stage
from .background import task_send_or_fail_fast
from .costs import StageCostEstimate, project_committed_cost, stage_cost_estimate

ALLOWED_TRANSITIONS: dict[str, set[str]] = {
    StageStatus.DRAFT: {StageStatus.PUBLISHED, StageStatus.CLOSED},
    StageStatus.PUBLISHED: {StageStatus.COLLECTING, StageStatus.CLOSED},
    StageStatus.COLLECTING: {StageStatus.REVIEWING, StageStatus.CLOSED},
    StageStatus.REVIEWING: {StageStatus.COLLECTING, StageStatus.CLOSED},
    StageStatus.CLOSED: set(),
}
MTURK_MAX_ASSIGNMENTS_20PCT = 9  # 10 or more assignments on one HIT costs a 40% fee
DEFAULT_QUALIFICATION_ITEMS = 10
DEFAULT_QUALIFICATION_WORKERS = 50  # settings["max_workers"]: how many take the qualification
MAX_GOLD_RATE = 0.9  # at least one regular item in every HIT
DEFAULT_TRIAL_ITEMS = 200
DATA_STAGE_KINDS = (StageKind.TRIAL, StageKind.FULL, StageKind.PILOT)


class StageError(Exception):
    """A stage action that cannot be done; the message says why."""


class IllegalTransition(StageError):
    pass


class GuardFailed(StageError):
    pass


class BudgetExceeded(StageError):
    pass


@dataclasses.dataclass(frozen=True)
class HitPlan:
    items: list[Item]
    max_assignments: int
    split: str


@dataclasses.dataclass
class StagePublishResult:
    stage: Stage
    estimate: StageCostEstimate
    report: PublishReport
    n_hits: int


# --- status machine ------------------------------------------------------------------------


@transaction.atomic
def stage_transition(*, stage: Stage, to_status: str, user=None, reason: str = "") -> Stage:
    fresh = Stage.objects.select_for_update().get(pk=stage.pk)
    if to_status not in ALLOWED_TRANSITIONS[fresh.status]:
        raise IllegalTransition(
            f"{stage} cannot go from {fresh.status} to {to_status}; allowed: "
            f"{', '.join(sorted(ALLOWED_TRANSITIONS[fresh.status])) or 'none'}"
        )
    StageTransition.objects.create(
        stage=fresh, from_status=fresh.status, to_status=to_status, reason=reason,
        user=user if getattr(user, "pk", None) else None,
    )
    fresh.status = to_status
    fresh.save(update_fields=["status", "updated_at"])
    stage.status = to_status
    return stage


# --- which items, which HITs -----------------------------------------------------------------


def _released_elsewhere(stage: Stage):
    """Items already released in another data stage of the project (trial, pilot, full) or in a
    qualification: the workers a later stage admits answered those against gold, so they are
    not released again unless the stage says `"reuse_earlier_items": true` (then only other
    data stages' items are left out)."""
    kinds = DATA_STAGE_KINDS if (stage.settings or {}).get("reuse_earlier_items") else (
        *DATA_STAGE_KINDS, StageKind.QUALIFICATION)
    return Item.objects.filter(
        stages__project_id=stage.project_id, stages__kind__in=kinds
    ).exclude(stages=stage).values("pk")


def stage_items_choose(*, stage: Stage, store: bool = True) -> list[Item]:
    """The stage's items: the explicit ones, or chosen by kind (and then stored on the stage).

    qualification: N items with gold answers (gold/attention items first), default 10;
    trial: `settings["n_items"]` (default 200) random remaining items, seeded by the stage;
    full: every remaining item; practice: the practice items. `store=False` only looks.
    """
    explicit = list(stage.items.filter(excluded=False).order_by("id"))
    if explicit:
        return explicit
    options = stage.settings or {}
    base = Item.objects.filter(project_id=stage.project_id, excluded=False)
    if stage.kind == StageKind.QUALIFICATION:
        n = int(options.get("n_items", DEFAULT_QUALIFICATION_ITEMS))
        chosen = list(base.filter(gold__isnull=False).order_by("-is_gold_check", "id")[:n])
        if len(chosen) < n:
            raise StageError(
                f"a qualification needs {n} items with gold answers; the project has {len(chosen)}"
            )
    elif stage.kind == StageKind.PRACTICE:
        chosen = list(base.filter(is_practice=True).order_by("id"))
    else:
        remaining = list(
            base.filter(is_practice=False, is_gold_check=False)
            .exclude(pk__in=_released_elsewhere(stage)).order_by("id")
        )
        if stage.kind in (StageKind.TRIAL, StageKind.PILOT) or "n_items" in options:
            n = int(options.get("n_items", DEFAULT_TRIAL_ITEMS))
            if n < len(remaining):
                remaining = sorted(random.Random(stage.pk).sample(remaining, n),
                                   key=lambda item: item.pk)
        chosen = remaining
    if not chosen:
        raise StageError(f"{stage} has no items to release")
    if store:
        stage.items.set(chosen)
    return chosen


def _assignments_for(stage: Stage, split: str) -> int:
    if stage.judgments_per_item:
        return int(stage.judgments_per_item)
    return stage.project.redundancy_for(split)


def stage_gold_rate(stage: Stage) -> float:
    """Share of gold/attention items in each HIT: `settings["gold_rate"]`, else the project's."""
    rate = (stage.settings or {}).get("gold_rate")
    rate = stage.project.gold_rate if rate is None else rate
    return min(max(float(rate or 0.0), 0.0), MAX_GOLD_RATE)


def _random_round(expected: float, rng: random.Random) -> int:
    # Randomised rounding keeps the long-run share at the rate even for small HITs (as
    # items_pick_next does for the pages that pick items themselves).
    whole = int(expected)
    return whole + (rng.random() < expected - whole)


def qualification_hit_sizes(*, workers: int, provider: str, allow_40pct: bool) -> list[int]:
    """Assignments per qualification HIT for `workers` takers: MTurk HITs of at most 9 (the 20%
    fee tier), as even as possible; one HIT (one Prolific study with that many places)
    elsewhere, or on MTurk when the researcher opted into the 40% tier."""
    workers = max(1, workers)
    if provider != Provider.MTURK or allow_40pct:
        return [workers]
    n_hits = math.ceil(workers / MTURK_MAX_ASSIGNMENTS_20PCT)
    base, extra = divmod(workers, n_hits)
    return [base + 1] * extra + [base] * (n_hits - extra)


class _GoldMixer:
    """Adds the project's gold/attention items to the HITs of a data stage at the stage's gold
    rate, the way `items_pick_next` (annotation/services/assignments.py) mixes them into the
    assignments it picks: gold takes slots of the HIT, a Likert HIT only gets gold from its own
    passage, and the gold items are inserted at random positions. The least used gold items
    go first, so each is repeated in as few HITs as possible (a worker judges an item once per
    stage). Seeded by the stage, so the estimate and the published HITs agree."""

    def __init__(self, stage: Stage):
        self.rate = stage_gold_rate(stage)
        self.likert = stage.project.kind == TaskKind.LIKERT
        self.pool = list(gold_items_for_stage(stage=stage).order_by("pk")) if self.rate else []
        self.rng = random.Random(f"gold-{stage.pk}")
        self.used: Counter[int] = Counter()

    def slots(self, per_hit: int, group_key: str) -> int:
        """Gold items in a full HIT of `per_hit` items of the Likert passage `group_key` (""
        for other kinds): none when no gold item could go with it, so its HITs stay full."""
        if self.likert and group_key:
            available = sum(g.group_key == group_key for g in self.pool)
        else:
            available = len(self.pool)
        if not available or per_hit < 2:
            return 0
        return min(per_hit - 1, available, _random_round(per_hit * self.rate, self.rng))

    def mix(self, regular: list[Item], n_gold: int, full: bool) -> list[Item]:
        if not n_gold or not regular:
            return regular
        if not full:  # a short last HIT gets gold in proportion to its regular items
            n_gold = min(n_gold, _random_round(len(regular) * self.rate / (1 - self.rate),
                                               self.rng))
        groups = {item.group_key for item in regular if item.group_key}
        taken = {item.pk for item in regular}  # explicit stage items may include gold items
        candidates = [g for g in self.pool if g.pk not in taken]
        same_group = [g for g in candidates if g.group_key in groups] if groups else []
        pool = same_group or ([] if self.likert and groups else candidates)
        if not pool or not n_gold:
            return regular
        order = {item.pk: self.rng.random() for item in pool}
        chosen = sorted(pool, key=lambda g: (self.used[g.pk], order[g.pk]))[:n_gold]
        mixed = list(regular)
        for item in chosen:
            self.used[item.pk] += 1
            mixed.insert(self.rng.randint(0, len(mixed)), item)
        return mixed


def _latin_square_lists(stage: Stage, items: list[Item]) -> dict[int, int]:
    """{item id: Latin-square list} when the stage serves STARC conditions in a Latin square
    (annotation.domain.design), else {}. Each list holds every question once; MTurk HITs are
    cut from one list, and a worker who already saw one of a HIT's questions (at any level) is
    refused that HIT at accept (`assignment_start`)."""
    from .assignments import latin_square_on

    if not items or not latin_square_on(stage):
        return {}
    rows = [(item.pk, item.text_level, question_key(
        item_id=item.pk, article=(item.metadata or {}).get("article"),
        paragraph=(item.metadata or {}).get("paragraph"),
        question=(item.metadata or {}).get("question"))) for item in items]
    levels = ordered_levels(level for _, level, _ in rows)
    index = {key: i for i, key in enumerate(sorted({key for _, _, key in rows}, key=str))}
    return {pk: latin_square_list(question_index=index[key], level_index=levels.index(level),
                                  n_levels=len(levels)) for pk, level, key in rows}


def stage_hit_plan(*, stage: Stage, store: bool = True) -> list[HitPlan]:
    """Group the stage's items into HITs (without writing HITs).

    Likert items sharing a passage (`group_key`) share HITs, so the passage is read once; every
    HIT holds items of one split so that its assignments match the split's redundancy, plus the
    project's gold/attention items at the gold rate (`stage_gold_rate`). A qualification is HITs
    with all its items, taken by `settings["max_workers"]` workers in all (default 50): on MTurk
    split into HITs of at most 9 assignments (`qualification_hit_sizes`).
    """
    items = stage_items_choose(stage=stage, store=store)
    options = stage.settings or {}
    if stage.kind == StageKind.QUALIFICATION:
        workers = int(options.get("max_workers", DEFAULT_QUALIFICATION_WORKERS))
        sizes = qualification_hit_sizes(workers=workers, provider=stage.provider,
                                        allow_40pct=bool(options.get("allow_40pct_fee_tier")))
        plans = [HitPlan(items=items, max_assignments=size, split="") for size in sizes]
    else:
        per_hit = max(1, int(options.get("items_per_hit") or stage.project.items_per_hit))
        gold = _GoldMixer(stage) if stage.kind != StageKind.PRACTICE else None
        groups: dict[tuple[str, str], list[Item]] = defaultdict(list)
        lists = _latin_square_lists(stage, items)
        for item in items:
            key = item.group_key if stage.project.kind == TaskKind.LIKERT else ""
            if lists:
                # One Latin-square list per HIT: every question once, at its list's level.
                key = f"list-{lists[item.pk]}"
            groups[(item.split, key)].append(item)
        plans = []
        for (split, key), members in groups.items():
            start = 0
            while start < len(members):
                n_gold = gold.slots(per_hit, key) if gold else 0
                room = per_hit - n_gold
                regular = members[start:start + room]
                start += room
                hit_items = gold.mix(regular, n_gold, full=len(regular) == room) if gold \
                    else regular
                plans.append(HitPlan(items=hit_items,
                                     max_assignments=_assignments_for(stage, split), split=split))
    if stage.provider == Provider.MTURK and not options.get("allow_40pct_fee_tier"):
        too_many = [plan for plan in plans if plan.max_assignments > MTURK_MAX_ASSIGNMENTS_20PCT]
        if too_many:
            raise StageError(
                f"{len(too_many)} HITs would need {too_many[0].max_assignments} assignments; "
                f"MTurk charges 40% instead of 20% from 10 assignments on — lower the redundancy "
                f'or opt in with settings {{"allow_40pct_fee_tier": true}}'
            )
    return plans


@transaction.atomic
def stage_hits_build(*, stage: Stage) -> list[Hit]:
    """Create the stage's HITs locally (status pending). Idempotent: existing HITs are kept."""
    existing = list(stage.hits.all())
    if existing:
        return existing
    hits = []
    if stage.kind == StageKind.QUALIFICATION and not (stage.settings or {}).get(
        "items_per_assignment"
    ):
        # Prolific and in-house pages pick items per assignment: a qualification takes all.
        stage.settings = {**(stage.settings or {}), "items_per_assignment": stage.items.count()
                          or len(stage_items_choose(stage=stage))}
        stage.save(update_fields=["settings", "updated_at"])
    for plan in stage_hit_plan(stage=stage):
        hit = Hit.objects.create(
            stage=stage, provider=stage.provider, max_assignments=plan.max_assignments,
            reward=stage.reward, status=HitStatus.PENDING,
        )
        HitItem.objects.bulk_create(
            [HitItem(hit=hit, item=item, position=i) for i, item in enumerate(plan.items)]
        )
        hits.append(hit)
    return hits


# --- guards ------------------------------------------------------------------------------------


def agreement_stage_for(stage: Stage) -> Stage | None:
    """The stage whose agreement gates this one: `settings["agreement_stage_id"]`, else the
    closest earlier trial/pilot/full stage of the project, else the required stage."""
    options = stage.settings or {}
    if options.get("agreement_stage_id"):
        return Stage.objects.filter(pk=options["agreement_stage_id"]).first()
    earlier = (
        Stage.objects.filter(project_id=stage.project_id, kind__in=DATA_STAGE_KINDS)
        .filter(Q(order__lt=stage.order) | Q(order=stage.order, pk__lt=stage.pk))
        .exclude(pk=stage.pk).order_by("-order", "-pk").first()
    )
    return earlier or stage.requires_stage


def stage_alpha(*, stage: Stage, level: str | None = None) -> float | None:
    """Krippendorff's alpha of the stage's judgments (None when too few to compute); the
    agreement module's `stage_agreement` (interval for Likert, nominal otherwise)."""
    from metrics_app.agreement import stage_agreement

    level = level or (stage.settings or {}).get("agreement_level")
    return stage_agreement(stage=stage, level=level)


def agreement_guard(*, stage: Stage, override_reason: str | None = None) -> str:
    """Refuse (GuardFailed) unless the gating stage's alpha reaches the threshold or the
    researcher gave a reason to override; returns the note to log with the transition."""
    if stage.agreement_threshold is None:
        return ""
    gate = agreement_stage_for(stage)
    alpha = stage_alpha(stage=gate) if gate is not None else None
    shown = "n/a" if alpha is None else f"{alpha:.3f}"
    if alpha is not None and alpha >= stage.agreement_threshold:
        return f"agreement guard passed: alpha {shown} of {gate} ≥ {stage.agreement_threshold}"
    if override_reason and override_reason.strip():
        return (
            f"agreement guard OVERRIDDEN: alpha {shown} of {gate} < {stage.agreement_threshold}; "
            f"reason: {override_reason.strip()}"
        )
    raise GuardFailed(
        f"Krippendorff's alpha of {gate or 'the previous stage'} is {shown}, below the required "
        f"{stage.agreement_threshold}; publish with an override reason to go ahead anyway"
    )


def budget_guard(*, stage: Stage, estimate: StageCostEstimate) -> None:
    cap = stage.project.budget_cap
    if cap is not None:
        committed = project_committed_cost(project=stage.project, exclude_stage=stage)
        if committed + estimate.total > cap:
            raise BudgetExceeded(
                f"publishing costs ${estimate.total} on top of ${committed} already committed; "
                f"the project's budget cap is ${cap}"
            )
    if estimate.balance is not None and estimate.balance < estimate.total:
        raise BudgetExceeded(
            f"the {stage.get_provider_display()} balance ${estimate.balance} does not cover "
            f"${estimate.total}"
        )


# --- publish, close ----------------------------------------------------------------------------


def stage_publish(*, stage: Stage, user=None, override_reason: str | None = None,
                  check_balance: bool = True) -> StagePublishResult:
    """Publish a draft stage (or resume publishing one whose HITs are not all created)."""
    stage.refresh_from_db()
    if stage.status == StageStatus.DRAFT:
        if stage.requires_stage is not None and stage.requires_stage.status == StageStatus.DRAFT:
            raise GuardFailed(f"{stage.requires_stage} must be published first")
        note = agreement_guard(stage=stage, override_reason=override_reason)
        # Checked on the plan before any HIT row exists, so a refused stage stays editable.
        estimate = stage_cost_estimate(stage=stage, with_balance=check_balance)
        budget_guard(stage=stage, estimate=estimate)
        hits = stage_hits_build(stage=stage)
        reason = "; ".join(part for part in (estimate.as_text(), note) if part)
        stage_transition(stage=stage, to_status=StageStatus.PUBLISHED, user=user, reason=reason)
    elif stage.status in (StageStatus.PUBLISHED, StageStatus.COLLECTING):
        hits = list(stage.hits.all())
        estimate = stage_cost_estimate(stage=stage)
    else:
        raise IllegalTransition(f"{stage} is {stage.status}; only a draft can be published")
    report = stage_hits_create(stage=stage)
    if report.complete and stage.status == StageStatus.PUBLISHED:
        stage_transition(stage=stage, to_status=StageStatus.COLLECTING, user=user,
                         reason=f"{len(hits)} HITs live on {stage.get_provider_display()}")
    return StagePublishResult(stage=stage, estimate=estimate, report=report, n_hits=len(hits))


def stage_publish_enqueue(*, stage: Stage, by=None, reason: str | None = None):
    """Queue `stage_publish` on a Celery worker (the admin's "publish in the background");
    raises background.BrokerUnreachable within seconds when the broker is down."""
    return task_send_or_fail_fast("worker.tasks.providers.stage_publish",
                                  args=[stage.pk, getattr(by, "pk", None), reason])


def stage_hits_create(*, stage: Stage) -> PublishReport:
    """Create every pending HIT of the stage on its provider (resumable; the benchmark calls
    this directly to publish many HITs against a throttling server)."""
    return get_provider(stage.provider).publish_stage(stage=stage)


def stage_close(*, stage: Stage, user=None, reason: str = "") -> Stage:
    """Stop the stage on the provider (expire HITs / stop the study) and close it."""
    if stage.status != StageStatus.DRAFT:
        get_provider(stage.provider).expire_stage(stage=stage)
    return stage_transition(stage=stage, to_status=StageStatus.CLOSED, user=user, reason=reason)


def stage_extend(*, stage: Stage, seconds: int, user=None) -> Stage:
    get_provider(stage.provider).extend_stage(stage=stage, seconds=seconds)
    if stage.status == StageStatus.REVIEWING:
        stage_transition(stage=stage, to_status=StageStatus.COLLECTING, user=user,
                         reason=f"extended by {seconds} s")
    return stage


def stage_collection_complete(*, stage: Stage) -> bool:
    """Every HIT got all its assignments submitted (or the stage has none left open)."""
    from annotation.models import AssignmentStatus

    wanted = sum(stage.hits.values_list("max_assignments", flat=True))
    done = stage.assignments.exclude(
        status__in=[AssignmentStatus.IN_PROGRESS, AssignmentStatus.RETURNED]
    )
    if get_provider(stage.provider).confirms_submissions:
        # Submissions the provider never listed (a made-up assignment id) fill no HIT.
        done = done.filter(provider_confirmed_at__isnull=False)
    return wanted > 0 and done.count() >= wanted

