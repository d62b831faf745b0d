"""What publishing a stage would release, read without storing anything: which items it
releases (listed, or chosen by kind leaving out items released in earlier stages), the gold
items mixed in, the STARC Latin square over its items, the HIT plan (`stage_hits_planned`) and
the release preview. The writes that store a choice or build HITs are
annotation/services/stage_plans.py and annotation/services/stages.py, which call these; the
cockpit and the cost estimate (annotation/cost_selectors.py) read them directly.
"""
from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter, defaultdict

from django.db.models import Count, QuerySet

from annotation.domain.design import (
    Condition,
    LatinSquare,
    article_of,
    spread_order,
    unit_key,
)
from annotation.domain.gold_mix import (
    gold_per_batch,
    gold_per_batch_text,
    gold_with_regular,
)
from annotation.domain.redundancy import AdaptiveRedundancy, adaptive_redundancy
from annotation.domain.stage_settings import MAX_GOLD_RATE
from annotation.models import (
    COLLECTION_STAGE_KINDS,
    OPEN_STAGE_STATUSES,
    Item,
    Provider,
    Stage,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.stage_errors import GuardFailed, StageError

MTURK_MAX_ASSIGNMENTS_20PCT = 9  # 10 or more assignments on one HIT costs a 40% fee
DEFAULT_QUALIFICATION_ITEMS = 10
DEFAULT_QUALIFICATION_WORKERS = 50  # settings["max_workers"]: how many take the qualification
DEFAULT_TRIAL_ITEMS = 200


@dataclasses.dataclass(frozen=True)
class HitPlan:
    items: list[Item]
    max_assignments: int
    split: str


def stage_items(stage: Stage) -> QuerySet[Item]:
    """Items released in the stage: its own list, or every non-excluded project item."""
    if stage.items.exists():
        qs = stage.items.all()
    else:
        qs = Item.objects.filter(project_id=stage.project_id)
    return qs.filter(excluded=False)


def mixes_in_extras(stage: Stage) -> bool:
    """Whether the stage's assignments get the project's practice and gold items on top of its
    own list."""
    # Practice and qualification stages serve exactly their own item list; data stages
    # (trial, full, pilot, imported) get the project's practice and gold items on top of it,
    # because publishing stores only the regular items on `stage.items`.
    return stage.kind not in (StageKind.PRACTICE, StageKind.QUALIFICATION)


def gold_items_for_stage(*, stage: Stage) -> QuerySet[Item]:
    """The gold/attention-check items mixed into the stage's assignments at
    `project.gold_rate`: the project's (not `stage.items`, which publishing fills with the
    regular items only). MTurk HIT plans can draw from the same pool."""
    if not mixes_in_extras(stage):
        return stage_items(stage).filter(is_gold_check=True, is_practice=False)
    qs = Item.objects.filter(project_id=stage.project_id, excluded=False,
                             is_gold_check=True, is_practice=False)
    if not (stage.settings or {}).get("reuse_earlier_items"):
        # Not the ones a qualification released: the admitted workers answered them already.
        qs = qs.exclude(pk__in=Item.objects.filter(
            stages__project_id=stage.project_id, stages__kind=StageKind.QUALIFICATION)
            .values("pk"))
    return qs


def latin_square_on(stage: Stage) -> bool:
    """Whether the stage serves STARC conditions in a Latin square: the default for every
    multiple-choice project where several of the stage's items share a design unit (a paragraph
    at several levels or with several questions, an article with several questions); a stage
    setting `"latin_square": false` turns it off (then a participant may read one paragraph
    several times, which the STARC design forbids)."""
    if not design_applies(stage):
        return False
    if (stage.settings or {}).get("latin_square") is not None:
        return True  # turned on by the stage, whatever its items
    shared = (stage_items(stage).exclude(design_unit="").order_by()
              .values("design_unit").annotate(n=Count("pk")).filter(n__gt=1))
    return shared.exists()


def conditions_of(qs: QuerySet[Item]) -> list[Condition]:
    """Each item of `qs` as a condition of the design (annotation.domain.design)."""
    rows = qs.order_by().values_list("pk", "design_unit", "text_level", "dataset",
                                     "metadata__question")
    return [Condition(item_id=pk, unit=unit_key(item_id=pk, design_unit=unit), level=level,
                      dataset=dataset, question=question)
            for pk, unit, level, dataset, question in rows]


def design_applies(stage: Stage) -> bool:
    """Whether the STARC rule "a participant reads each text once, at one level" binds the
    stage whatever its items: a multiple-choice project's stages unless the stage says
    `"latin_square": false` (`latin_square_on` further asks whether the stage's own items
    share a unit, which a qualification chosen one item per unit never does)."""
    setting = (stage.settings or {}).get("latin_square")
    if setting is not None:
        return bool(setting)
    return stage.project.kind == TaskKind.MC


def stage_practice_items(stage: Stage) -> QuerySet[Item]:
    """The practice items a stage's workers do first: a data stage's are the project's (not
    excluded; publishing stores only the regular items on the stage), a practice or
    qualification stage's those it lists."""
    if not mixes_in_extras(stage):
        return stage_items(stage).filter(is_practice=True)
    return Item.objects.filter(project_id=stage.project_id, excluded=False, is_practice=True)


def practice_shared_units(stage: Stage, items) -> dict[str, list[str]]:
    """{design unit: the practice items of it} for each text that one of `items` (its data
    items: not practice) shares with a practice item of the stage, under the STARC design: a
    practice item is a reading of its paragraph (or article), so a data item of that text, at
    any level, would be read a second time by every participant (and the picking, which counts
    the practice reading, could never serve it: the stage would never finish)."""
    if not design_applies(stage):
        return {}
    data_units = {item.design_unit for item in items
                  if item.design_unit and not item.is_practice}
    practice = [*stage_practice_items(stage).exclude(design_unit="")
                .order_by("pk").values_list("design_unit", "external_id"),
                *((item.design_unit, item.external_id) for item in items
                  if item.is_practice and item.design_unit)]
    shared: dict[str, list[str]] = {}
    for unit, external_id in practice:
        if unit in data_units and external_id not in shared.setdefault(unit, []):
            shared[unit].append(external_id)
    return {unit: names for unit, names in sorted(shared.items()) if names}


def practice_overlap_error(stage: Stage, items) -> str:
    """Why the stage cannot be published with `items` ("" when it can): its data items share a
    text with one of its practice items (`practice_shared_units`)."""
    shared = practice_shared_units(stage, items)
    if not shared:
        return ""
    named = "; ".join(f"{unit} (practice {', '.join(names[:3])})"
                      for unit, names in list(shared.items())[:5])
    more = f" and {len(shared) - 5} more" if len(shared) > 5 else ""
    return (f"{stage}: its data items share a text with its practice items: {named}{more}. "
            "A participant reads each text once, and a practice item is a reading of its "
            "text at every level, so no participant could be served those data items. Use "
            "practice items from paragraphs (or articles) that are not in the study, or "
            "leave that text's items out of the stage")


def open_stages_serving_unit(*, item: Item) -> list[Stage]:
    """The open STARC data stages of the item's project that serve another (non-practice) item
    of its text: made a practice item now, that text could no longer be served to anyone who
    did the practice (`practice_overlap_error` at publish; the picking's `units_read`)."""
    if not item.design_unit:
        return []
    stages = Stage.objects.filter(project_id=item.project_id, status__in=OPEN_STAGE_STATUSES)
    return [stage for stage in stages.order_by("pk")
            if mixes_in_extras(stage) and design_applies(stage)
            and stage_items(stage).filter(design_unit=item.design_unit, is_practice=False)
            .exclude(pk=item.pk).exists()]


def repeated_design_units(items) -> dict[str, int]:
    """{design unit: how many of `items` belong to it} for the units held more than once
    (practice items, outside the design, left out)."""
    counts = Counter(item.design_unit for item in items
                     if item.design_unit and not item.is_practice)
    return {unit: n for unit, n in sorted(counts.items()) if n > 1}


def item_article(item: Item) -> str:
    """The article the text of `item` belongs to (`annotation.domain.design.article_of` of its
    design unit; an item without one is an article of its own)."""
    return article_of(unit_key(item_id=item.pk, design_unit=item.design_unit))


def stage_square(stage: Stage, items: QuerySet[Item] | None = None) -> LatinSquare:
    """The square over the stage's regular items (not practice or gold checks)."""
    qs = stage_items(stage) if items is None else items
    return LatinSquare(conditions_of(qs.filter(is_practice=False, is_gold_check=False)))



def released_elsewhere(stage: Stage):
    """Items already released in another data stage of the project (trial, pilot, full) or in a
    qualification: the workers a later stage admits answered those against gold, so they are
    not released again unless the stage says `"reuse_earlier_items": true` (then only other
    data stages' items are left out)."""
    kinds = COLLECTION_STAGE_KINDS if (stage.settings or {}).get("reuse_earlier_items") else (
        *COLLECTION_STAGE_KINDS, StageKind.QUALIFICATION)
    return Item.objects.filter(
        stages__project_id=stage.project_id, stages__kind__in=kinds
    ).exclude(stages=stage).values("pk")


def stage_items_listed(*, stage: Stage) -> list[Item]:
    """The items listed on the stage (not excluded), [] when it lists none (then it takes its
    items by kind, `stage_items_by_kind`)."""
    explicit = list(stage.items.filter(excluded=False).order_by("id"))
    if explicit:
        return explicit
    listed = stage.items.count()
    if listed:
        # Never fall back to choosing by kind: that would release other items (and burn them
        # for the later stages, which do not reuse released items).
        raise StageError(f"{stage} lists {listed} items and every one is excluded now: choose "
                         "its items again (a filter, or by kind)")
    return []


def stage_items_by_kind(*, stage: Stage, only: tuple[str, ...] = ()) -> list[Item]:
    """The items a stage that lists none releases, chosen by its kind (nothing stored):

    qualification: N items with gold answers (gold/attention items first), default 10;
    trial: `settings["n_items"]` (default 200) random remaining items, seeded by the stage;
    full: every remaining item; practice: the practice items.
    `only`: load just these fields (the same choice; a count needs no item text).
    """
    options = stage.settings or {}
    base = Item.objects.filter(project_id=stage.project_id, excluded=False)
    if only:
        base = base.only(*{"id", "design_unit", "is_gold_check", *only})
    if stage.kind == StageKind.QUALIFICATION:
        n = int(options.get("n_items", DEFAULT_QUALIFICATION_ITEMS))
        with_gold = base.filter(gold__isnull=False).order_by("-is_gold_check", "id")
        if design_applies(stage):
            # Every taker answers the same items, so a paragraph at two levels would be read
            # twice by everyone: one item per text (the first by id, gold checks first), the
            # articles interleaved (`spread_order`), so that the takers read one paragraph of
            # each of n articles rather than an article's paragraphs in order.
            firsts, units = [], set()
            for item in with_gold.iterator():
                if item.design_unit and item.design_unit in units:
                    continue
                units.add(item.design_unit)
                firsts.append(item)
            spread = spread_order([item_article(item) for item in firsts])
            chosen = sorted((firsts[k] for k in spread),
                            key=lambda item: not item.is_gold_check)[:n]
            what = "items with gold answers, each from a different text"
        else:
            chosen = list(with_gold[:n])
            what = "items with gold answers"
        if len(chosen) < n:
            # Say what makes it releasable: a smaller "Number of items" (the default 10 is
            # MOCHA's, not a rule) when there are some, or items with gold answers.
            fewer = (f"set “Number of items” (n_items) to {len(chosen)} or fewer, or "
                     if chosen else "")
            raise StageError(
                f"a qualification needs {n} {what}; the project has {len(chosen)}: "
                f"{fewer}import items with gold answers"
            )
    elif stage.kind == StageKind.PRACTICE:
        chosen = list(base.filter(is_practice=True).order_by("id"))
    else:
        remaining = list(
            base.filter(is_practice=False, is_gold_check=False)
            .exclude(pk__in=released_elsewhere(stage)).order_by("id")
        )
        if stage.kind in (StageKind.TRIAL, StageKind.PILOT) or "n_items" in options:
            n = int(options.get("n_items", DEFAULT_TRIAL_ITEMS))
            if n < len(remaining):
                remaining = sorted(random.Random(stage.pk).sample(remaining, n),
                                   key=lambda item: item.pk)
        chosen = remaining
    if not chosen:
        raise StageError(_nothing_to_release(stage, base))
    return chosen


def _nothing_to_release(stage: Stage, base: QuerySet[Item]) -> str:
    """Why a stage choosing by kind finds nothing, and what would give it items."""
    if stage.kind == StageKind.PRACTICE:
        return f"{stage} has no items to release: the project has no practice items"
    candidates = base.filter(is_practice=False, is_gold_check=False)
    if not candidates.exists():
        return (f"{stage} has no items to release: the project has no items (practice and "
                "gold-check items aside); import items first")
    taken = candidates.filter(pk__in=released_elsewhere(stage)).count()
    if not taken:
        return f"{stage} has no items to release"
    in_qualification = candidates.filter(
        stages__project_id=stage.project_id, stages__kind=StageKind.QUALIFICATION
    ).exclude(stages=stage).distinct().count()
    reuse = (f", or set “Reuse earlier items” (reuse_earlier_items) to release the "
             f"{in_qualification} the qualification used"
             if in_qualification and not (stage.settings or {}).get("reuse_earlier_items")
             else "")
    return (f"{stage} has no items to release: its other stages released all {taken} of the "
            f"project's items, and an item goes out in one stage only; import more items{reuse}")


def stage_items_planned(*, stage: Stage) -> list[Item]:
    """The stage's items as publishing would release them: the listed ones, else chosen by
    kind (what `stage_items_choose` stores, here only read)."""
    return stage_items_listed(stage=stage) or stage_items_by_kind(stage=stage)


def redundancy_target(*, stage: Stage, split: str) -> int:
    """Judgments wanted per item of `split` in the stage: its `judgments_per_item`, else the
    project's redundancy for the split (a HIT's assignments; the in-house and Prolific pages
    pick items until they have it)."""
    if stage.judgments_per_item:
        return int(stage.judgments_per_item)
    return stage.project.redundancy_for(split)


def planned_redundancy(*, stage: Stage, split: str) -> int:
    """Judgments per item a stage's HITs are planned (and so paid) for: `redundancy_target`,
    except under adaptive redundancy on a data stage whose pages pick the items (in-house,
    Prolific; MTurk refuses the rule), where an item may want up to the rule's `max` and
    picking ignores the fixed number: planned for `max`, so a Prolific study has a place for
    every batch its items can come to want (`places_for_plans`) and its cost estimate and
    budget check are the most it can cost. Items that agree sooner leave places unused (the
    study is paused when the stage completes, `stage_recruitment_follow`), which are not
    paid."""
    rule = adaptive_rule_planned(stage)
    return rule.max if rule is not None else redundancy_target(stage=stage, split=split)


def adaptive_rule_planned(stage: Stage) -> AdaptiveRedundancy | None:
    """The adaptive rule the stage's plan follows (`planned_redundancy`), or None."""
    if stage.provider == Provider.MTURK or not mixes_in_extras(stage):
        return None
    return stage_adaptive_rule(stage)


def stage_adaptive_rule(stage: Stage, *, strict: bool = False) -> AdaptiveRedundancy | None:
    """The stage's rule, or None. A malformed setting raises GuardFailed naming the fault when
    `strict` (publishing, the stage form); elsewhere it counts as no rule, so a setting broken
    after publishing never turns a worker's task page into an error: the fixed redundancy
    applies until it is fixed."""
    try:
        return adaptive_redundancy(stage.settings)
    except ValueError as exc:
        if strict:
            raise GuardFailed(f"{stage}: {exc}") from exc
        return None


def stage_gold_rate(stage: Stage) -> float:
    """Share of gold/attention items in each HIT: `settings["gold_rate"]`, else the project's."""
    rate = (stage.settings or {}).get("gold_rate")
    rate = stage.project.gold_rate if rate is None else rate
    return min(max(float(rate or 0.0), 0.0), MAX_GOLD_RATE)


def gold_available(pool_keys: list[str], *, likert: bool, group_key: str) -> int:
    """How many gold items of a stage's pool (their `group_key`s) could go in a batch of the
    Likert passage `group_key` ("" for other kinds, or items without a passage): a Likert
    batch takes gold from its own passage only. The plan (`_GoldMixer.slots`) and the pages
    (`items_pick_next`) ask it of the same pool (`gold_items_for_stage`), so a passage
    without gold has batches full of regular items in both."""
    if likert and group_key:
        return sum(key == group_key for key in pool_keys)
    return len(pool_keys)


def gold_slots(*, per_batch: int, rate: float, available: int) -> int:
    """Gold items in a full batch of `per_batch` (`annotation.domain.gold_mix.gold_per_batch`),
    none when no gold item could go with it (`gold_available`), never more than could."""
    if not available:
        return 0
    return min(available, gold_per_batch(per_batch, rate))


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
    rate, the way `items_pick_next` (annotation/services/assignments/picking.py) mixes them into the
    assignments it picks: gold takes slots of the HIT, as many as `gold_slots` says (the
    count `annotation.domain.gold_mix` rounds, the pages' too, so a Prolific study's places
    are the batches its pages hand out), a Likert HIT only gets gold from its own passage, and
    the gold items are inserted at random positions. The least used gold items go first, so
    each is repeated in as few HITs as possible (a worker judges an item once per stage).
    Which gold items, and where, are seeded by the stage, so the estimate and the published
    HITs agree."""

    def __init__(self, stage: Stage):
        self.rate = stage_gold_rate(stage)
        self.likert = stage.project.kind == TaskKind.LIKERT
        self.pool = list(gold_items_for_stage(stage=stage).order_by("pk")) if self.rate else []
        self.rng = random.Random(f"gold-{stage.pk}")
        self.used: Counter[int] = Counter()

    def slots(self, per_hit: int, group_key: str) -> int:
        """Gold items in a full HIT of `per_hit` items of the Likert passage `group_key` (""
        for other kinds): none when no gold item could go with it, so its HITs stay full."""
        available = gold_available([g.group_key for g in self.pool], likert=self.likert,
                                   group_key=group_key)
        return gold_slots(per_batch=per_hit, rate=self.rate, available=available)

    def mix(self, regular: list[Item], n_gold: int, per_hit: int) -> list[Item]:
        if not n_gold or not regular:
            return regular
        # A short last HIT gets gold in proportion to its regular items.
        n_gold = min(n_gold, gold_with_regular(len(regular), per_batch=per_hit, rate=self.rate))
        groups = {item.group_key for item in regular if item.group_key}
        taken = {item.pk for item in regular}  # explicit stage items may include gold items
        units = {item.design_unit for item in regular if item.design_unit}
        # A gold item never repeats a text of its HIT (the STARC paragraph rule), and comes from
        # another article than the HIT's items where the pool has one.
        candidates = [g for g in self.pool if g.pk not in taken and g.design_unit not in units]
        same_group = [g for g in candidates if g.group_key in groups] if groups else []
        pool = same_group or ([] if self.likert and groups else candidates)
        if not pool or not n_gold:
            return regular
        order = {item.pk: self.rng.random() for item in pool}
        articles = {item_article(item) for item in regular}
        chosen = sorted(pool, key=lambda g: (item_article(g) in articles, self.used[g.pk],
                                             order[g.pk]))[:n_gold]
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


def assignment_size(stage: Stage) -> int:
    """How many items one assignment of the stage holds: the one rule of its HIT plan (the
    Prolific study's places, the cost estimate) and of the pages that pick items themselves
    (Prolific, in-house), so a study has a place for every batch its pages hand out. A
    qualification: every listed item (graded once, on one assignment, as its MTurk HITs hold
    all of them; publishing lists them). Otherwise the stage's `items_per_assignment` (Prolific
    and in-house, where the page picks), else its `items_per_hit`, else the project's items per
    HIT."""
    options = stage.settings or {}
    if stage.kind == StageKind.QUALIFICATION and stage.pk is not None:
        listed = stage.items.filter(excluded=False).count()
        if listed:
            return listed
    per_page = options.get("items_per_assignment") if stage.provider != Provider.MTURK else None
    return max(1, int(per_page or options.get("items_per_hit") or stage.project.items_per_hit))


def stage_hits_planned(*, stage: Stage, items: list[Item] | None = None) -> list[HitPlan]:
    """Group the stage's items into HITs (without writing HITs).

    Likert items sharing a passage (`group_key`) share HITs, so the passage is read once; every
    HIT holds items of one split so that its assignments match the split's redundancy, plus the
    project's gold/attention items at the gold rate (`stage_gold_rate`). A qualification is HITs
    with all its items, taken by `settings["max_workers"]` workers in all (default 50): on MTurk
    split into HITs of at most 9 assignments (`qualification_hit_sizes`). `items`: the
    stage's items when the caller chose them already (else `stage_items_planned`).
    """
    if items is None:
        items = stage_items_planned(stage=stage)
    if problem := practice_overlap_error(stage, items):
        raise StageError(problem)
    options = stage.settings or {}
    if stage.kind == StageKind.QUALIFICATION:
        workers = int(options.get("max_workers", DEFAULT_QUALIFICATION_WORKERS))
        sizes = qualification_hit_sizes(workers=workers, provider=stage.provider,
                                        allow_40pct=bool(options.get("allow_40pct_fee_tier")))
        plans = [HitPlan(items=items, max_assignments=size, split="") for size in sizes]
    else:
        per_hit = assignment_size(stage)
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
                hit_items = gold.mix(regular, n_gold, per_hit) if gold else regular
                plans.append(HitPlan(items=hit_items,
                                     max_assignments=planned_redundancy(stage=stage, split=split),
                                     split=split))
    if stage.provider == Provider.MTURK and not options.get("allow_40pct_fee_tier"):
        too_many = [plan for plan in plans if plan.max_assignments > MTURK_MAX_ASSIGNMENTS_20PCT]
        if too_many:
            raise StageError(
                f"{len(too_many)} HITs would need {too_many[0].max_assignments} assignments; "
                f"MTurk charges 40% instead of 20% from 10 assignments on — lower the redundancy "
                f'or opt in with settings {{"allow_40pct_fee_tier": true}}'
            )
    return plans


def places_for_plans(*, stage: Stage, plans: list[HitPlan]) -> int:
    """The places a Prolific study of these HIT plans needs: the batches its pages will hand
    out. Pages pick items themselves (`annotation/services/assignments/picking.py`): the items
    furthest from their target first, one Likert passage (`group_key`) per batch, so a batch
    fills across the plan's HIT boundaries (5 items × 2 judgments in batches of 2: 5 batches,
    not the 6 of HITs of 2, 2 and 1). For such a pool of items, each wanting `r_i` judgments in
    batches of `k` distinct items, largest-deficit-first hands out max(max r_i, ceil(sum r_i /
    k)) batches; `k` is the pool's fullest plan's regular items. A place more than that stays
    open for nobody: its participant finds nothing to do. Gold items take the same slots of a
    batch in the plan and on the pages (`gold_slots`: a whole number per batch of the pool,
    none for a Likert passage without gold), so they only make `k` smaller; the project's
    practice items come on top of a worker's first batch (`items_pick_next`), so they take
    none of `k`. Elsewhere the plans' assignments: MTurk's fixed HITs, a qualification, a
    practice stage and a Latin square's lists.
    """
    if (stage.provider != Provider.PROLIFIC
            or stage.kind in (StageKind.QUALIFICATION, StageKind.PRACTICE)
            or latin_square_on(stage)):
        return sum(plan.max_assignments for plan in plans)
    likert = stage.project.kind == TaskKind.LIKERT
    pools: dict[str, list[tuple[int, int]]] = defaultdict(list)
    places = 0
    for plan in plans:
        regular = [item for item in plan.items if not (item.is_gold_check or item.is_practice)]
        if not regular:  # practice only: as planned
            places += plan.max_assignments
            continue
        pools[regular[0].group_key if likert else ""].append((len(regular), plan.max_assignments))
    for rows in pools.values():
        room = max(n for n, _r in rows)
        wanted = sum(n * r for n, r in rows)
        places += max(max(r for _n, r in rows), -(-wanted // room))
    return places


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
    # What the gold rate gives a batch ("1 gold item in each batch of 5 (20%; ...)"), "" for a
    # stage without gold (`stage_gold_text`)
    gold_rule: str = ""

    def counts(self, field: str) -> list[tuple[str, int]]:
        return Counter(getattr(item, field) or "–" for item in self.items).most_common()

    def as_text(self) -> str:
        if self.error:
            return f"cannot be published yet: {self.error}"
        by = ", ".join(f"{name}: {n}" for name, n in self.counts("dataset")[:6])
        rule = f" ({self.gold_rule})" if self.gold_rule else ""
        gold = f" + {len(self.gold)} gold items mixed in{rule}" if self.gold else ""
        return (f"{len(self.items)} items ({by}){gold} in {self.n_hits} HITs; {self.how}")


def _chosen_from(stage: Stage) -> str:
    """Which of the project's items `stage_items_by_kind` chooses from, as the preview says it
    (it said "the items no earlier stage released" for every kind, the qualification's gold
    items and a stage reusing the qualification's items included)."""
    if stage.kind == StageKind.QUALIFICATION:
        return "the project's items with gold answers"
    if stage.kind == StageKind.PRACTICE:
        return "the project's practice items"
    if (stage.settings or {}).get("reuse_earlier_items"):
        return ("the items no other trial, pilot or full stage released (the qualification's "
                "included: reuse earlier items)")
    return "the items no other stage released"


def stage_gold_text(stage: Stage) -> str:
    """What the stage's gold rate gives each batch (its HITs and the pages' batches alike:
    `gold_slots`), "" when it mixes in no gold: "1 gold item in each batch of 5 (20%; gold
    rate 0.15)", and for Likert that the gold comes from the batch's passage."""
    rate = stage_gold_rate(stage)
    if not rate or stage.kind in (StageKind.PRACTICE, StageKind.QUALIFICATION):
        return ""
    text = gold_per_batch_text(assignment_size(stage), rate)
    if stage.project.kind == TaskKind.LIKERT:
        text += ", from the batch's passage (a passage without gold items gets none)"
    return text


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
                              how="the HITs already built", gold_rule=stage_gold_text(stage))
    how = ("listed on the stage" if stage.items.exists() else
           f"chosen by the stage's kind ({stage.get_kind_display().lower()}) from "
           + _chosen_from(stage))
    try:
        chosen_items = stage_items_planned(stage=stage)
        plans = stage_hits_planned(stage=stage, items=chosen_items)
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
    return ReleasePreview(items=items, gold=gold, n_hits=len(plans), how=how, plans=plans,
                          gold_rule=stage_gold_text(stage))


def stage_simulated_hit_refusal(stage: Stage) -> str:
    """Why `manage.py task_links` may not add a simulated HIT (a local row for a look at the
    MTurk page) to `stage`, or "": a stage whose HITs publishing built for its provider. A HIT
    of the stage counts in the money it commits (`cost_selectors.stage_committed_cost`, past
    the budget cap with no check), in the assignments its collection waits for
    (`stage_collection_complete`: MTurk never lists the simulated one, so the stage would
    never move to reviewing) and, while pending, in what a resumed publish creates on the
    provider. Only a stage without such HITs (made by hand for a look) takes one."""
    if not stage.hits.filter(provider=stage.provider).exists():
        return ""
    return (f"its HITs are on {stage.get_provider_display()}: a simulated HIT would count in "
            "its cost and in the work its collection waits for, so none is made. To rehearse "
            "the stage with sync and review: manage.py mturk_rehearsal")
