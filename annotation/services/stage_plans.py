"""Which items a stage releases and how they are cut into HITs: item choice (by stage kind,
leaving out items released in earlier stages), gold mixing, Latin-square lists and the HIT plan
that `stage_hits_build` stores and `stage_cost_estimate` prices. Reads only; nothing is sent.
"""
from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter, defaultdict

from annotation.domain.stage_settings import MAX_GOLD_RATE
from annotation.models import (
    COLLECTION_STAGE_KINDS,
    Item,
    Provider,
    Stage,
    StageKind,
    StageStatus,
    TaskKind,
)

from .assignments import gold_items_for_stage
from .assignments.design import latin_square_on, stage_square
from .stage_errors import StageError

MTURK_MAX_ASSIGNMENTS_20PCT = 9  # 10 or more assignments on one HIT costs a 40% fee
DEFAULT_QUALIFICATION_ITEMS = 10
DEFAULT_QUALIFICATION_WORKERS = 50  # settings["max_workers"]: how many take the qualification
DEFAULT_TRIAL_ITEMS = 200


@dataclasses.dataclass(frozen=True)
class HitPlan:
    items: list[Item]
    max_assignments: int
    split: str


def _released_elsewhere(stage: Stage):
    """Items already released in another data stage of the project (trial, pilot, full) or in a
    qualification: the workers a later stage admits answered those against gold, so they are
    not released again unless the stage says `"reuse_earlier_items": true` (then only other
    data stages' items are left out)."""
    kinds = COLLECTION_STAGE_KINDS if (stage.settings or {}).get("reuse_earlier_items") else (
        *COLLECTION_STAGE_KINDS, StageKind.QUALIFICATION)
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
    listed = stage.items.count()
    if listed:
        # Never fall back to choosing by kind: that would release other items (and burn them
        # for the later stages, which do not reuse released items).
        raise StageError(f"{stage} lists {listed} items and every one is excluded now: choose "
                         "its items again (a filter, or by kind)")
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


ITEM_FILTER_FIELDS = ("dataset", "split", "source")


def stage_items_matching(*, project_id: int, dataset: str = "", split: str = "",
                         source: str = ""):
    """The project's data items (not excluded, practice or gold checks) a stage's item filter
    matches: what `stage_items_select` chooses from."""
    matching = Item.objects.filter(project_id=project_id, excluded=False, is_practice=False,
                                   is_gold_check=False)
    for field, value in (("dataset", dataset), ("split", split), ("source", source)):
        if value:
            matching = matching.filter(**{field: value})
    return matching


def item_filter_nothing_text(*, dataset: str = "", split: str = "", source: str = "") -> str:
    named = ", ".join(f"{f}={v!r}" for f, v in (("dataset", dataset), ("split", split),
                                                  ("source", source)) if v)
    return f"no data items of the project match {named or 'the filter'}"


def item_filter_values(*, project_id: int, field: str, limit: int = 12) -> list[str]:
    """The values a filter field takes among the project's data items (to say what exists)."""
    values = (stage_items_matching(project_id=project_id).order_by(field)
              .values_list(field, flat=True).distinct()[:limit + 1])
    return [v for v in values if v][:limit]


def stage_item_filter_errors(*, project_id: int, dataset: str = "", split: str = "",
                             source: str = "", count: int | None = None) -> dict[str, list[str]]:
    """{filter field: [why]} when a stage's item filter would choose nothing, else {}; the
    admin form and the API refuse the save with it (a stage saved with no items would take its
    items by kind when published, releasing items nobody chose)."""
    given = {"dataset": dataset or "", "split": split or "", "source": source or ""}
    if not any(given.values()) or stage_items_matching(project_id=project_id,
                                                       **given).exists():
        return {}
    alone = [f for f, v in given.items() if v and not stage_items_matching(
        project_id=project_id, **{f: v}).exists()]
    errors = {}
    for field in alone or [f for f, v in given.items() if v]:
        known = item_filter_values(project_id=project_id, field=field)
        errors[field] = [f"{item_filter_nothing_text(**given)}: nothing would be released. "
                         + (f"This project's {field} values: {', '.join(known)}."
                            if field in alone and known else
                            "No item has all of these; loosen the filter.")]
    return errors


@dataclasses.dataclass
class ReleasePreview:
    """Exactly the items publishing the stage releases (as `stage_hits_build` will store them),
    or why it would release none."""

    items: list[Item]  # the stage's data items, in release order
    gold: list[Item]  # gold/attention items mixed into its HITs
    n_hits: int
    how: str  # where the items come from: "listed on the stage", "chosen by kind: ..."
    error: str = ""
    plans: list[HitPlan] = dataclasses.field(default_factory=list)  # a draft's HIT plan

    def counts(self, field: str) -> list[tuple[str, int]]:
        return Counter(getattr(item, field) or "–" for item in self.items).most_common()

    def as_text(self) -> str:
        if self.error:
            return f"nothing to release: {self.error}"
        by = ", ".join(f"{name}: {n}" for name, n in self.counts("dataset")[:6])
        gold = f" + {len(self.gold)} gold items mixed in" if self.gold else ""
        return (f"{len(self.items)} items ({by}){gold} in {self.n_hits} HITs; {self.how}")


def stage_release_preview(*, stage: Stage) -> ReleasePreview:
    """What publishing the stage releases, computed without storing anything: a draft's plan
    (the same seeded choice `stage_hits_build` makes), or a live stage's HITs."""
    from annotation.models import HitItem

    if stage.status != StageStatus.DRAFT and stage.hits.exists():
        rows = (HitItem.objects.filter(hit__stage=stage).select_related("item")
                .order_by("hit_id", "position"))
        seen: dict[int, Item] = {}
        for row in rows:
            seen.setdefault(row.item_id, row.item)
        listed = set(stage.items.values_list("pk", flat=True))
        items = [i for i in seen.values() if i.pk in listed]
        gold = [i for i in seen.values() if i.pk not in listed]
        return ReleasePreview(items=items, gold=gold, n_hits=stage.hits.count(),
                              how="the HITs already built")
    how = ("listed on the stage" if stage.items.exists() else
           f"chosen by the stage's kind ({stage.get_kind_display().lower()}) from the items "
           "no earlier stage released")
    try:
        chosen_items = stage_items_choose(stage=stage, store=False)
        plans = stage_hit_plan(stage=stage, store=False, items=chosen_items)
    except StageError as error:
        return ReleasePreview(items=[], gold=[], n_hits=0, how=how, error=str(error))
    chosen = {item.pk for item in chosen_items}
    items, gold, seen_ids = [], [], set()
    for plan in plans:
        for item in plan.items:
            if item.pk in seen_ids:
                continue
            seen_ids.add(item.pk)
            (items if item.pk in chosen else gold).append(item)
    return ReleasePreview(items=items, gold=gold, n_hits=len(plans), how=how, plans=plans)


def stage_items_select(*, stage: Stage, dataset: str = "", split: str = "", source: str = "",
                       count: int | None = None) -> int:
    """Choose a draft stage's items by filter instead of by listing them (a stage of thousands
    of items cannot be edited item by item): the project's data items (not excluded, practice
    or gold checks) of that dataset, split and answering system, `count` of them sampled with
    the stage as seed (all when None). With no filter and no count the explicit choice is
    cleared, so the stage takes its items by kind when it is published. Returns how many items
    the stage now lists (0 = chosen by kind)."""
    if stage.status != StageStatus.DRAFT:
        raise StageError(f"{stage} is {stage.get_status_display().lower()}: its items are "
                         "fixed once it is published")
    if not (dataset or split or source or count):
        stage.items.clear()
        return 0
    if count is not None and count < 1:
        raise StageError("the number of items must be at least 1")
    matching = stage_items_matching(project_id=stage.project_id, dataset=dataset, split=split,
                                    source=source)
    ids = list(matching.order_by("id").values_list("id", flat=True))
    if not ids:
        raise StageError(item_filter_nothing_text(dataset=dataset, split=split, source=source))
    if count is not None and count < len(ids):
        ids = sorted(random.Random(stage.pk).sample(ids, count))
    stage.items.set(ids)
    return len(ids)


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
        units = {item.design_unit for item in regular if item.design_unit}
        # A gold item never repeats a text of its HIT (the STARC paragraph rule).
        candidates = [g for g in self.pool if g.pk not in taken and g.design_unit not in units]
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


def _latin_square_lists(stage: Stage, items: list[Item]) -> dict[int, tuple[int, int]]:
    """{item id: (Latin-square list, position in the list)} when the stage serves STARC
    conditions in a Latin square (annotation.domain.design), else {}. The lists hold every condition (question x level)
    exactly once and each list at most one item per design unit (paragraph, article); MTurk HITs
    are cut from one list, and a worker who already read one of a HIT's texts (at any level, in
    any stage) is refused that HIT at accept (`assignment_start`). Within a list the datasets
    alternate (first unit of each dataset, then the second …), so every HIT cut from it mixes
    them as the list does, and consecutive units of a dataset rotate the levels."""
    if not items or not latin_square_on(stage):
        return {}
    square = stage_square(stage, Item.objects.filter(pk__in=[item.pk for item in items]))
    lists = {}
    for list_index in range(square.n_lists):
        order = sorted(square.list_items(list_index), key=square.position)
        lists.update({pk: (list_index, n) for n, pk in enumerate(order)})
    return lists


def stage_hit_plan(*, stage: Stage, store: bool = True,
                   items: list[Item] | None = None) -> list[HitPlan]:
    """Group the stage's items into HITs (without writing HITs).

    Likert items sharing a passage (`group_key`) share HITs, so the passage is read once; every
    HIT holds items of one split so that its assignments match the split's redundancy, plus the
    project's gold/attention items at the gold rate (`stage_gold_rate`). A qualification is HITs
    with all its items, taken by `settings["max_workers"]` workers in all (default 50): on MTurk
    split into HITs of at most 9 assignments (`qualification_hit_sizes`). `items`: the
    stage's items when the caller chose them already (`stage_items_choose`).
    """
    if items is None:
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
        if lists:  # in list order; items outside the design (gold, practice) last
            items = sorted(items, key=lambda item: lists.get(item.pk, (0, len(lists)))[1])
        for item in items:
            key = item.group_key if stage.project.kind == TaskKind.LIKERT else ""
            if lists:
                # One Latin-square list per HIT: each text once, in its list's condition.
                key = f"list-{lists[item.pk][0]}" if item.pk in lists else "outside the design"
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
