"""Which items a worker gets.

Redundancy: an item in a stage wants `stage.judgments_per_item` judgments, or the project's
per-split redundancy. What it already has is its judgments in the stage plus the in-progress,
not-yet-timed-out assignments holding it without a judgment; a judgment that will never count
(`annotation.selectors.judgments_releasing_slots`: rejected work, a blocked worker, ...) gives
its slot back, so the item is offered to another worker (never to the same one: a worker is
not served an item they judged in the stage, counted or not). Two allocators racing for the last
slot are kept apart by row locks on the items (`SELECT ... FOR UPDATE SKIP LOCKED` on
PostgreSQL; SQLite serialises writers, and we take its write lock first), and the deficit is
recomputed *after* the lock so a slot taken by a transaction that committed in between is seen.
The same count decides which answers of a late assignment can still be stored
(`items_filled_since_timeout`).
"""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from annotation.domain.gold_mix import gold_with_regular
from annotation.models import (
    AdaptiveTarget,
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    Item,
    Judgment,
    Provider,
    Stage,
    StageKind,
    TaskKind,
    Worker,
    WorkerQualification,
)
from annotation.selectors import judgments_releasing_slots
from annotation.stage_plan_selectors import (
    design_applies,
    gold_available,
    gold_items_for_stage,
    gold_slots,
    item_article,
    latin_square_on,
    mixes_in_extras,
    stage_adaptive_rule,
    stage_gold_rate,
    stage_items,
    stage_practice_items,
)

from .design import (
    hit_design_refusal,
    in_square_order,
    latin_square_filter,
    one_item_per_unread_unit,
    spread_articles,
    units_read,
)
from .errors import NoItemsAvailable
from .locking import stage_write_lock
from .timeouts import live_assignments


def practice_items_for_stage(*, stage: Stage, worker: Worker | None = None) -> QuerySet[Item]:
    """The practice items every worker does first. In a data stage these are the project's
    practice items, minus those `worker` already did in another stage of the project (a
    practice stage before the trial): practice trains the worker once."""
    qs = stage_practice_items(stage)
    if worker is not None and mixes_in_extras(stage):
        qs = _not_in_hand_elsewhere(qs, stage, worker)
    return qs


def _not_in_hand_elsewhere(qs: QuerySet[Item], stage: Stage, worker: Worker) -> QuerySet[Item]:
    """`qs` without the items the worker answered in another stage of the project, or holds
    there in a page still open (in progress: a trial page left open while the full stage
    opens in another tab holds the gold items both stages mix in; answered there later, an
    item handed out here too was answered twice)."""
    answered = Judgment.objects.filter(worker=worker, stage__project_id=stage.project_id)\
        .exclude(stage=stage).values("item_id")
    held = _in_hand(worker, project_id=stage.project_id).exclude(assignment__stage=stage)\
        .values("item_id")
    return qs.exclude(pk__in=answered).exclude(pk__in=held)


def _target(stage: Stage):
    """The redundancy target of an item as an expression: with adaptive redundancy the item's
    current target (`AdaptiveTarget`, else the setting's `min`); otherwise the stage's fixed
    number, or the project's per-split redundancy."""
    rule = stage_adaptive_rule(stage)
    if rule is not None:
        current = AdaptiveTarget.objects.filter(stage=stage, item=OuterRef("pk")).values("target")
        return Coalesce(Subquery(current[:1], output_field=IntegerField()),
                        Value(rule.min, output_field=IntegerField()))
    if stage.judgments_per_item:
        return Value(int(stage.judgments_per_item), output_field=IntegerField())
    default = stage.project.redundancy_default()
    whens = [When(split=split, then=Value(n))
             for split, n in stage.project.redundancy_by_split().items()]
    return Case(*whens, default=Value(default), output_field=IntegerField()) if whens \
        else Value(default, output_field=IntegerField())


def _given_back(stage: Stage) -> QuerySet[Judgment]:
    """Judgments of the stage whose slot is offered again (`judgments_releasing_slots`). An
    adaptive stage's stored target already makes room for each one
    (`annotation/services/redundancy.py`), so none is added here for it."""
    if stage_adaptive_rule(stage) is not None:
        return Judgment.objects.none()
    return judgments_releasing_slots(Judgment.objects.filter(stage=stage), project=stage.project)


def _held(stage: Stage, exclude_assignment_id: int | None = None) -> QuerySet[AssignmentItem]:
    """Items held by live assignments without a judgment yet (one row per hold)."""
    live = live_assignments(stage)
    if exclude_assignment_id is not None:
        live = live.exclude(pk=exclude_assignment_id)
    return AssignmentItem.objects.filter(assignment_id__in=live.values("pk")).filter(
        ~Exists(Judgment.objects.filter(
            assignment_id=OuterRef("assignment_id"), item_id=OuterRef("item_id"))))


def _annotate_deficit(qs: QuerySet[Item], stage: Stage,
                      exclude_assignment_id: int | None = None) -> QuerySet[Item]:
    judged = (
        Judgment.objects.filter(stage=stage, item=OuterRef("pk"))
        .order_by().values("item").annotate(n=Count("pk")).values("n")
    )
    held = (
        _held(stage, exclude_assignment_id).filter(item=OuterRef("pk"))
        .order_by().values("item").annotate(n=Count("pk")).values("n")
    )
    given_back = (
        _given_back(stage).filter(item=OuterRef("pk"))
        .order_by().values("item").annotate(n=Count("pk")).values("n")
    )
    return qs.annotate(
        n_judged=Coalesce(Subquery(judged, output_field=IntegerField()), 0),
        n_held=Coalesce(Subquery(held, output_field=IntegerField()), 0),
        n_given_back=Coalesce(Subquery(given_back, output_field=IntegerField()), 0),
        target=_target(stage),
    ).annotate(deficit=F("target") - F("n_judged") + F("n_given_back") - F("n_held"))


def _in_hand(worker: Worker, *, project_id: int) -> QuerySet[AssignmentItem]:
    """The worker's rows in their in-progress assignments of the project's stages: items
    handed to them and not over yet. An MTurk assignment past its duration still counts until
    the sync records it abandoned or returned: its page still submits here, so a second HIT
    sharing its gold item could never be submitted after it."""
    return AssignmentItem.objects.filter(
        assignment__stage__project_id=project_id, assignment__worker=worker,
        assignment__status=AssignmentStatus.IN_PROGRESS,
    )


def _held_by(stage: Stage, worker: Worker) -> QuerySet[AssignmentItem]:
    """`_in_hand` in this stage. With their judgments in the stage, what is never handed to
    them again (one judgment per worker, item and stage): a second page holding one could
    never be submitted."""
    return _in_hand(worker, project_id=stage.project_id).filter(assignment__stage=stage)


def _not_seen_by(qs: QuerySet[Item], stage: Stage, worker: Worker) -> QuerySet[Item]:
    judged = Judgment.objects.filter(stage=stage, worker=worker).values("item_id")
    return qs.exclude(pk__in=judged).exclude(pk__in=_held_by(stage, worker).values("item_id"))


HELD_IN_ANOTHER_HIT_MESSAGE = (
    "Part of this HIT is also in another HIT of this task that you have accepted and not "
    "submitted yet, and you can answer an item only once. Please return this HIT; other HITs "
    "may be open to you.")


def refuse_hit_seen_before(*, stage: Stage, worker: Worker, items: list[Item],
                           hit=None) -> None:
    """A HIT's items are fixed, so the rules the picking pages keep are kept at accept: a
    worker who holds one of its items in another live assignment of the stage (another HIT
    accepted at the same time: a stage's HITs share its gold items; `_held_by`, the picking's
    `_not_seen_by`), who answered one of its items in an earlier stage, or (Latin square) read
    one of its texts at any level, is asked to return it; nothing is created. `hit`: the HIT
    accepted, whose own assignments of the worker are another rule's
    (`annotation/services/assignments/lifecycle.py:_hit_items_for`)."""
    ids = [i.pk for i in items]
    held = _held_by(stage, worker).filter(item_id__in=ids)
    if hit is not None:
        held = held.exclude(assignment__hit=hit)
    if held.exists():
        raise NoItemsAvailable(HELD_IN_ANOTHER_HIT_MESSAGE)
    earlier = _not_seen_earlier(Item.objects.filter(pk__in=ids), stage, worker)
    if earlier.count() < len(items):
        raise NoItemsAvailable("You have already answered part of this HIT earlier in this "
                               "study, or hold it in another task of this study you have not "
                               "submitted yet. Please return it; other HITs may be open to "
                               "you.")
    if design_applies(stage):  # the paragraph rule binds with or without a square over it
        refusal = hit_design_refusal(stage=stage, worker=worker, items=items)
        if refusal:
            raise NoItemsAvailable(refusal)


def _not_seen_earlier(qs: QuerySet[Item], stage: Stage, worker: Worker) -> QuerySet[Item]:
    """Without the items the worker answered in another stage of the project (the
    qualification they were graded on against gold, the trial), or holds there in a page
    still open (`_not_in_hand_elsewhere`): never served to them again, unless the stage says
    `"reuse_earlier_items": true`."""
    if (stage.settings or {}).get("reuse_earlier_items"):
        return qs
    return _not_in_hand_elsewhere(qs, stage, worker)


def _lock(ids: list[int]) -> list[int]:
    """Lock item rows, skipping rows another allocator holds (PostgreSQL); no-op elsewhere."""
    if not ids:
        return []
    qs = Item.objects.filter(pk__in=ids).order_by("pk")
    if connection.features.has_select_for_update_skip_locked:
        qs = qs.select_for_update(skip_locked=True)
    return list(qs.values_list("pk", flat=True))


def _lock_available(qs: QuerySet[Item]) -> list[int]:
    """The ids of `qs`, their item rows locked, skipping rows another allocator holds
    (PostgreSQL: one SELECT ... FOR UPDATE OF the item table SKIP LOCKED); a plain read
    elsewhere (SQLite holds its write lock already)."""
    qs = qs.order_by("pk")
    if connection.features.has_select_for_update_skip_locked:
        qs = qs.select_for_update(skip_locked=True, of=("self",))
    return list(qs.values_list("pk", flat=True))


# No savepoint of its own: the caller's transaction (assignment_start's) is all it needs, and
# an error inside aborts that transaction anyway. Outside a transaction it opens one.
@transaction.atomic(savepoint=False)
def items_pick_next(*, stage: Stage, worker: Worker, limit: int) -> list[Item]:
    """The next `limit` items for `worker` in `stage`: practice items first, then the items
    furthest from their redundancy target (Likert: one passage group), with gold/attention items
    mixed in at the stage's rate (`stage_gold_rate`: its `gold_rate`, else the project's), as
    many per batch as its HIT plan has (`gold_slots`, `annotation.domain.gold_mix`): a whole
    number, not drawn at random, none for a Likert passage without gold. In a data stage the
    project's practice items the worker has not done come on top of the batch's `limit`
    (practice trains the worker; it takes no room of the data the HIT plan, a Prolific study's
    places and the reward were counted with), and only with data: a worker with no data item
    left gets nothing, not a batch of practice alone. Must run inside the transaction that
    stores the choice (it does when called from `assignment_start`) so the row locks cover
    the write."""
    stage_write_lock(stage)
    available = _not_seen_earlier(_not_seen_by(stage_items(stage), stage, worker), stage, worker)

    # Practice items: every worker does them, first, whatever the redundancy.
    practice_qs = _not_seen_by(practice_items_for_stage(stage=stage, worker=worker), stage, worker)
    if mixes_in_extras(stage):
        data = _pick_data(stage=stage, worker=worker, available=available, room=limit)
        return list(practice_qs.order_by("pk")) + data if data else []
    picked = list(practice_qs.order_by("pk")[:limit])
    room = limit - len(picked)
    if room <= 0:
        return picked
    # Qualification and practice stages test workers on the same items: no redundancy cap.
    rest = available.filter(is_practice=False)
    spread = False
    if stage.kind == StageKind.QUALIFICATION:
        if WorkerQualification.objects.filter(stage=stage, worker=worker).exists():
            return []  # graded once, on one assignment: no retake, no second half
        if design_applies(stage):
            rest = one_item_per_unread_unit(stage=stage, worker=worker, available=rest)
            spread = True
    chosen = list(rest.order_by("pk")[:room])
    return picked + (spread_articles(chosen) if spread else chosen)


def _pick_data(*, stage: Stage, worker: Worker, available: QuerySet[Item],
               room: int) -> list[Item]:
    """A data stage's batch of `room` items for `worker` (`items_pick_next`, practice apart):
    the regular items furthest from their target, gold mixed in as the HIT plan has it."""
    project = stage.project
    # The stage's rate, as its HIT plan (a Prolific study's places) was built with, and the
    # plan's count of gold per batch (`gold_slots`): a batch holds as many regular items as
    # the plan's HIT of its pool, so the study has a place for every batch and no more.
    rate = stage_gold_rate(stage)
    pool_keys = (list(gold_items_for_stage(stage=stage).values_list("group_key", flat=True))
                 if rate > 0 and room > 1 else [])
    passages = project.kind == TaskKind.LIKERT

    def slots(group_key: str) -> int:
        return gold_slots(per_batch=room, rate=rate, available=gold_available(
            pool_keys, likert=passages, group_key=group_key))

    # A Likert batch's gold depends on its passage (none when no gold item shares it): the
    # passage is picked first, for a whole batch, and the gold's slots are given back after.
    n_gold = 0 if passages else slots("")
    regular_qs = available.filter(is_practice=False, is_gold_check=False)
    square = latin_square_on(stage)
    design = square or design_applies(stage)
    position: dict[int, tuple] | None = None
    if square:
        regular_qs, position = latin_square_filter(
            stage=stage, worker=worker, available=regular_qs,
            deficits=lambda ids: _deficits(stage, ids))
    elif design:
        # No two of the stage's items share a text, so no square: the texts the worker read
        # (in another stage or project of the study) are still never served again.
        regular_qs = one_item_per_unread_unit(stage=stage, worker=worker, available=regular_qs)
    regular = _pick_regular(stage=stage, available=regular_qs, room=room - n_gold,
                            order=position)
    if passages and regular:
        n_gold = slots(regular[0].group_key)
        regular = regular[:room - n_gold]
    if position:  # a run of the square, each article's paragraphs apart
        regular = in_square_order(regular, position)
    if (stage.provider == Provider.INHOUSE and project.kind == TaskKind.LIKERT and regular
            and not latin_square_on(stage)):
        # In-house pages have no HIT to keep to one passage: fill the page with further
        # passages (each still whole and shown once) rather than one passage of one or two
        # candidates per page, each followed by a submit.
        for _passage in range(room):
            if len(regular) >= room - n_gold:
                break
            more = _pick_regular(stage=stage, room=room - n_gold - len(regular),
                                 available=regular_qs.exclude(pk__in=[i.pk for i in regular]))
            if not more:
                break
            regular += more
    # A short batch (the last of its pool) gets gold in proportion, as the plan's last HIT.
    n_gold = min(n_gold, gold_with_regular(len(regular), per_batch=room, rate=rate))
    gold: list[Item] = []
    if n_gold and regular:
        gold_qs = _not_seen_earlier(
            _not_seen_by(gold_items_for_stage(stage=stage), stage, worker), stage, worker)
        if design:  # a gold item is a text read too: never one of a unit read or picked
            read = units_read(stage=stage, worker=worker)
            gold_qs = gold_qs.exclude(design_unit__in=read | {
                item.design_unit for item in regular if item.design_unit})
        groups = {item.group_key for item in regular if item.group_key}
        # Likert gold items from the same passage keep the page indistinguishable.
        same_group = list(gold_qs.filter(group_key__in=groups)) if groups else []
        pool = same_group or ([] if project.kind == TaskKind.LIKERT and groups
                              else list(gold_qs))
        if square:  # and of another article than the page's items where the pool has one
            articles = {item_article(item) for item in regular}
            gold = sorted(random.sample(pool, len(pool)),
                          key=lambda g: item_article(g) in articles)[:n_gold]
        else:
            gold = random.sample(pool, min(n_gold, len(pool)))
    mixed = list(regular)
    for item in gold:
        mixed.insert(random.randint(0, len(mixed)), item)
    return mixed


def _deficits(stage: Stage, ids: list[int]) -> dict[int, int]:
    """{item id: judgments it still needs in the stage} for `ids`: three plain reads (targets,
    judgments, live holds) rather than two correlated counts per item."""
    if not ids:
        return {}
    targets = Item.objects.filter(pk__in=ids).annotate(qaj_target=_target(stage))
    judged = Counter(Judgment.objects.filter(stage=stage, item_id__in=ids)
                     .values_list("item_id", flat=True))
    held = Counter(_held(stage).filter(item_id__in=ids).values_list("item_id", flat=True))
    given_back = Counter(_given_back(stage).filter(item_id__in=ids)
                         .values_list("item_id", flat=True))
    return {pk: target - judged[pk] + given_back[pk] - held[pk]
            for pk, target in targets.values_list("pk", "qaj_target")}


def stage_items_short(*, stage: Stage, confirmed_only: bool = False) -> int:
    """How many of the stage's regular items (not practice, not gold) are still short of their
    redundancy target (`_target`) with the submitted work alone: their judgments in the stage
    that keep their slot (`_given_back` gives the others back), not those of an assignment
    still in progress (a STARC page confirms items one by one before its submit), nor
    (`confirmed_only`: Prolific) of a submission the provider has not listed yet. The rule
    the pages pick by, without the live holds: 0 means the pages have nothing more to hand
    out, so the stage is complete (`stage_collection_complete`: in-house and Prolific data
    stages), however the HIT
    plan cut the items (its assignments are not the batches the pages hand out). -1 for a
    stage without regular items (nothing to collect, nothing complete)."""
    regular = stage_items(stage).filter(is_practice=False, is_gold_check=False)
    targets = dict(regular.annotate(qaj_target=_target(stage)).values_list("pk", "qaj_target"))
    if not targets:
        return -1

    def per_item(judgments: QuerySet[Judgment]) -> Counter[int]:
        judgments = judgments.filter(item__in=regular.values("pk")).exclude(
            assignment__status=AssignmentStatus.IN_PROGRESS)
        if confirmed_only:
            judgments = judgments.filter(assignment__provider_confirmed_at__isnull=False)
        return Counter(judgments.values_list("item_id", flat=True))

    judged = per_item(Judgment.objects.filter(stage=stage))
    given_back = per_item(_given_back(stage))
    return sum(target - judged[pk] + given_back[pk] > 0 for pk, target in targets.items())


def _sql(qs: QuerySet) -> tuple[str, tuple]:
    return qs.query.get_compiler(using=qs.db).as_sql()


def _ranked(stage: Stage, available: QuerySet[Item], *, limit: int,
            order: Mapping[int, tuple] | None = None) -> list[tuple[int, str]]:
    """(pk, group_key) of the `limit` available items furthest from their target (deficit > 0),
    furthest first, then by `order` (the Latin square's place of each available item: a pool of
    one item per unit, all its rows read and ordered here) or by id; ranked in the database:
    one row per available item carrying its target, one row (-1) per judgment in the stage and
    per live hold, summed per item, ORDER BY the sum with a LIMIT. A UNION + GROUP BY rather
    than joins or correlated count subqueries: its cost does not depend on the planner's row
    estimates (a fresh stage without statistics got nested loops re-aggregating per item,
    seconds at 4,000 items). Items judged or held but not available sum below zero and are
    dropped here."""
    try:
        avail_sql, avail_params = _sql(
            available.order_by().annotate(qaj_target=_target(stage))
            .values_list("id", "group_key", "qaj_target"))
    except EmptyResultSet:  # nothing can be available (e.g. every question already seen)
        return []
    judged_sql, judged_params = _sql(
        Judgment.objects.filter(stage=stage).order_by().values_list("item_id"))
    held_sql, held_params = _sql(_held(stage).order_by().values_list("item_id"))
    # A judgment that gives its slot back (+1) cancels its own -1.
    try:
        back_sql, back_params = _sql(_given_back(stage).order_by().values_list("item_id"))
        given_back = f"UNION ALL SELECT b.item_id, NULL, 1 FROM ({back_sql}) b"
    except EmptyResultSet:  # an adaptive stage: its target makes the room
        given_back, back_params = "", ()
    sql = f"""
        SELECT item_id, MAX(group_key), SUM(w) AS deficit FROM (
            SELECT a.id AS item_id, a.group_key AS group_key, a.qaj_target AS w
              FROM ({avail_sql}) a
            UNION ALL SELECT j.item_id, NULL, -1 FROM ({judged_sql}) j
            UNION ALL SELECT h.item_id, NULL, -1 FROM ({held_sql}) h
            {given_back}
        ) counts
        GROUP BY item_id
        ORDER BY deficit DESC, item_id
        {"" if order is not None else "LIMIT %s"}"""
    with connection.cursor() as cursor:
        cursor.execute(sql, (*avail_params, *judged_params, *held_params, *back_params,
                             *(() if order is not None else (int(limit),))))
        rows = [(pk, group_key, deficit) for pk, group_key, deficit in cursor.fetchall()
                if deficit > 0]
    if order is not None:
        rows = sorted(rows, key=lambda row: (-row[2], order.get(row[0], ()), row[0]))[:limit]
    return [(pk, group_key) for pk, group_key, _deficit in rows]


def _pick_regular(*, stage: Stage, available: QuerySet[Item], room: int,
                  order: Mapping[int, tuple] | None = None) -> list[Item]:
    """The `room` available items furthest from their target (Likert: of one passage group),
    then by `order` (`_ranked`) or by id."""
    likert_groups = stage.project.kind == TaskKind.LIKERT
    tried: set[int] = set()
    tried_groups: set[str] = set()
    for _attempt in range(5):
        # Each attempt reads only a few ranked rows; items locked by another allocator or
        # filled meanwhile are excluded from the next, wider, read.
        pool = available.exclude(pk__in=tried) if tried else available
        if tried_groups:
            pool = pool.exclude(group_key__in=tried_groups)
        ranked = _ranked(stage, pool, limit=1 if likert_groups else room * 3, order=order)
        if not ranked:
            return []
        first_group = ranked[0][1]
        if likert_groups and first_group:
            # One passage per assignment: all its available items (a passage has a handful),
            # read and locked in one statement; the recount below keeps the `room` furthest
            # from their target. The group is not tried again whatever the lock skipped.
            tried_groups.add(first_group)
            locked = _lock_available(pool.filter(group_key=first_group))
        else:
            if likert_groups:
                candidates = [pk for pk, _ in _ranked(stage, pool.filter(group_key=""),
                                                      limit=room * 3)]
            else:
                candidates = [pk for pk, _ in ranked]
            tried.update(candidates)
            locked = _lock(candidates)
        # Recount after locking: a slot taken by a transaction that committed since our first
        # read is visible to this new statement.
        # Filtered and ordered here, not in SQL: a WHERE/ORDER BY on `deficit` makes the
        # database evaluate both count subqueries twice per row.
        counted = _annotate_deficit(Item.objects.filter(pk__in=locked), stage)
        fresh = sorted((item for item in counted if item.deficit > 0),
                       key=lambda item: (-item.deficit, (order or {}).get(item.pk, ()),
                                         item.pk))[:room]
        if fresh:
            return fresh
    return []


def items_filled_since_timeout(*, assignment: Assignment, rows: list[AssignmentItem]) -> set[int]:
    """Items of a late assignment that no longer need a judgment in the stage: other workers
    were given (or judged) them after the timeout and reached the target. Practice and gold
    items, and qualification/practice stages, have no cap. The item rows are locked (waiting,
    not skipping: the answer is already given) and the deficit counted after the lock, as
    `items_pick_next` does, so a late submit and an allocator never both take the last slot."""
    stage = assignment.stage
    if not mixes_in_extras(stage):
        return set()
    ids = [row.item_id for row in rows if not (row.item.is_practice or row.item.is_gold_check)]
    if not ids:
        return set()
    stage_write_lock(stage)
    if connection.features.has_select_for_update:
        list(Item.objects.select_for_update().filter(pk__in=ids).order_by("pk")
             .values_list("pk", flat=True))
    counted = _annotate_deficit(Item.objects.filter(pk__in=ids), stage,
                                exclude_assignment_id=assignment.pk)
    return {item.pk for item in counted if item.deficit <= 0}
