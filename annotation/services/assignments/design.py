"""The STARC Latin square of a stage, read from the database (the rules themselves are in
annotation.domain.design): whether a stage uses it, the square over its items, the design units a
worker has read in the project, and the filter the picking pages and HIT accepts apply.

One rule at every door: in-house links and Prolific pick items through `latin_square_filter`,
MTurk HIT plans are cut from `stage_square(...).list_items` (annotation.services.stage_plans),
and a HIT accept is refused by `hit_design_refusal` when the HIT repeats a unit the worker
read. A unit once read (judged, held by a live assignment, or shown in one that ended, in any
stage of the project, or in another project holding the same text: `units_seen`) is never
served to that worker again, whatever `reuse_earlier_items` says: that setting lets a stage
release the qualification's items again and serve a worker an item they answered in another
stage, but in a STARC square never one of a unit they read. A qualification
serves one item per unit not yet read (`one_item_per_unread_unit`; every taker the same items).
Practice items are outside the square (every worker does all of them, first), but each is a
reading of its text: `units_read` counts the units of the practice items a worker did or the
stage has them do first, so no data item of a practice paragraph is ever served to them, at any
level (and publishing refuses a stage whose data items share a practice text:
`annotation.stage_plan_selectors.practice_overlap_error`). They should come from other texts,
as STARC's practice article.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping

from django.db import connection
from django.db.models import Exists, Min, OuterRef, Q, QuerySet

from annotation.domain.design import spread_order, unit_key
from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    Item,
    Judgment,
    Stage,
    Worker,
)
from annotation.stage_plan_selectors import item_article, stage_practice_items, stage_square


def _lock_worker(worker: Worker) -> None:
    """One allocation per worker at a time (PostgreSQL), so two pages the worker opens at once
    in two stages of the project (or two HITs) cannot both hand out one paragraph; SQLite
    already serialises writers. Taken after the HIT's row lock and before the stage's."""
    if connection.features.has_select_for_update:
        Worker.objects.select_for_update().filter(pk=worker.pk).first()


def units_seen(*, project_id: int, worker: Worker, shown_again: Collection[int] = ()
               ) -> set[str]:
    """The design units this worker has read (practice items included: a practice item is a
    reading of its paragraph too): judged, held by a live assignment, or shown to them in an assignment that ended without a judgment (returned,
    expired, abandoned: the text was on their screen, so another level of it is no longer a
    first reading) — in any stage of the project, and in any other project that holds the same
    text (an item of the same dataset and design unit): the experiment modes of one STARC study
    are one project each (QA, guessing, validity, pilot), and a participant invited to two of
    them must not guess on a paragraph they read in the other, nor read it at another level.
    `shown_again`: the items of a HIT the worker accepts (fixed items): their showings in
    assignments that ended without a judgment of them (the HIT returned and accepted again;
    a gold item another HIT showed) are these very items at their own levels, no other
    version, so they are not counted (a judgment of them still is)."""
    mine = Judgment.objects.filter(worker=worker).values("item_id")
    held = AssignmentItem.objects.filter(
        Q(assignment__status=AssignmentStatus.IN_PROGRESS) | Q(first_shown_at__isnull=False),
        assignment__worker=worker)
    if shown_again:
        held = held.exclude(Q(item_id__in=list(shown_again))
                            & ~Q(assignment__status=AssignmentStatus.IN_PROGRESS))
    held = held.values("item_id")
    read = Item.objects.filter(Q(pk__in=mine) | Q(pk__in=held))
    here = {unit_key(item_id=pk, design_unit=unit) for pk, unit in
            read.filter(project_id=project_id).values_list("pk", "design_unit")}
    same_text_here = Item.objects.filter(project_id=project_id, dataset=OuterRef("dataset"),
                                         design_unit=OuterRef("design_unit"))
    elsewhere = (read.exclude(project_id=project_id).exclude(design_unit="")
                 .filter(Exists(same_text_here)).values_list("design_unit", flat=True))
    return here | set(elsewhere)


def units_read(*, stage: Stage, worker: Worker, shown_again: Collection[int] = ()) -> set[str]:
    """The one rule of which texts a worker of `stage` has read, at every door that picks items
    (in-house links, Prolific, MTurk accepts, gold, the fallback that gives returned work to
    the next arrival): what they read (`units_seen`) and the texts of the stage's practice
    items, which every worker does first, whether already stored or picked with this page."""
    practice = {unit_key(item_id=pk, design_unit=unit) for pk, unit in
                stage_practice_items(stage).values_list("pk", "design_unit")}
    return units_seen(project_id=stage.project_id, worker=worker,
                      shown_again=shown_again) | practice


def one_item_per_unread_unit(*, stage: Stage, worker: Worker,
                             available: QuerySet[Item]) -> QuerySet[Item]:
    """`available` cut to the first item (by id) of each design unit the worker has not read:
    a qualification serves every taker the same items, so it has no square to vary levels
    over, but a paragraph listed at two levels, or read in another stage, must still not be
    read twice, nor a text of a practice item. Items outside the design (no unit; practice)
    all stay."""
    _lock_worker(worker)
    seen = units_read(stage=stage, worker=worker)
    keep, units = [], set()
    for pk, unit, practice in available.order_by("pk").values_list("pk", "design_unit",
                                                                    "is_practice"):
        if unit and not practice:
            if unit in seen or unit in units:
                continue
            units.add(unit)
        keep.append(pk)
    return available.filter(pk__in=keep)


def participant_number(*, stage: Stage, worker: Worker) -> int:
    """The worker's place in the square: participants are numbered in the order they first
    started an assignment in the stage (0, 1, 2 …; a newcomer gets the next number), which
    keeps every unit's conditions balanced however few participants there are; worker ids
    would not (four ids can all be even)."""
    first = (Assignment.objects.filter(stage=stage).values("worker_id")
             .annotate(first=Min("pk")))
    mine = next((row["first"] for row in first if row["worker_id"] == worker.pk), None)
    return sum(1 for row in first if mine is None or row["first"] < mine)


def latin_square_filter(*, stage: Stage, worker: Worker, available: QuerySet[Item],
                        deficits) -> tuple[QuerySet[Item], dict[int, tuple]]:
    """`available` cut to one item per design unit the worker has not read: participant p gets
    the condition the square gives p, or, when that one already has its judgments (a
    participant before p returned their assignment), the unit's next condition still short of
    its target, so the stage can finish. `deficits(ids)` maps item ids to how many judgments
    each still needs. With it, {item id: its place in the square} (`LatinSquare.position`):
    among items as short of their target, the picking takes a run of consecutive units, which
    keeps the participant's levels balanced and their batch to one paragraph per article."""
    square = stage_square(stage)
    if not square.units:
        return available, {}
    _lock_worker(worker)
    if connection.features.has_select_for_update:
        # Arrivals take their number one at a time (SQLite already has its write lock). The
        # stage row only: Stage's default ordering joins the project, whose row FOR UPDATE
        # would also lock and serialise every other stage of the project.
        Stage.objects.select_for_update().filter(pk=stage.pk).order_by().first()
    again = _shown_unjudged(worker=worker, items=list(square.unit_of))
    seen = units_read(stage=stage, worker=worker,
                      shown_again=[pk for ids in again.values() for pk in ids])
    number = participant_number(stage=stage, worker=worker)
    open_ids = set(available.values_list("pk", flat=True))
    wanted = {unit: [c.item_id for c in square.preference(unit, number)
                     if c.item_id in open_ids and (unit not in again or c.item_id in again[unit])]
              for unit in square.units if unit not in seen}
    # A unit shown to the worker only through one item, in a page that ended without its
    # judgment (timed out, returned): that item again, where they left it, never another
    # version; shown through two, none.
    wanted = {unit: ids for unit, ids in wanted.items() if len(again.get(unit, ())) <= 1}
    wanted = {unit: ids for unit, ids in wanted.items() if ids}
    first_choice = {unit: ids[0] for unit, ids in wanted.items()}
    short = deficits(list(first_choice.values()))
    allowed = [pk for pk in first_choice.values() if short.get(pk, 0) > 0]
    full = [unit for unit, pk in first_choice.items() if short.get(pk, 0) <= 0]
    if full:
        rest = deficits([pk for unit in full for pk in wanted[unit][1:]])
        for unit in full:
            fallback = next((pk for pk in wanted[unit][1:] if rest.get(pk, 0) > 0), None)
            if fallback is not None:
                allowed.append(fallback)
    return available.filter(pk__in=allowed), {pk: square.position(pk) for pk in allowed}


def _shown_unjudged(*, worker: Worker, items: list[int]) -> dict[str, set[int]]:
    """{unit: the items of it among `items` shown to the worker in assignments that ended
    without their judgment (not in progress)}: the showings `shown_again` may set aside."""
    judged = Judgment.objects.filter(worker=worker, item_id__in=items).values("item_id")
    rows = (AssignmentItem.objects.filter(assignment__worker=worker, item_id__in=items,
                                          first_shown_at__isnull=False)
            .exclude(assignment__status=AssignmentStatus.IN_PROGRESS)
            .exclude(item_id__in=judged).values_list("item_id", "item__design_unit"))
    shown: dict[str, set[int]] = {}
    for pk, unit in rows:
        shown.setdefault(unit_key(item_id=pk, design_unit=unit), set()).add(pk)
    return shown


def spread_articles(items: list[Item]) -> list[Item]:
    """`items` (in the order preferred) as a page shows them: each article's paragraphs spread
    apart (`spread_order`), so that no item is followed by another paragraph of its article
    where the batch allows it — in the guessing and pilot modes the paragraph shown after an
    item would help with the next question of its article."""
    order = spread_order([item_article(item) for item in items])
    return [items[n] for n in order]


def in_square_order(items: list[Item], position: Mapping[int, tuple]) -> list[Item]:
    """A batch picked under the square in the order its page shows it: the square's order
    (`LatinSquare.position`), its articles spread apart (`spread_articles`)."""
    return spread_articles(sorted(items, key=lambda item: position[item.pk]))


def hit_design_refusal(*, stage: Stage, worker: Worker, items: list[Item]) -> str:
    """Why a worker may not take a HIT under the square ("" when they may): the HIT repeats a
    design unit within itself (a HIT plan is cut from one list, so only a hand-made HIT does),
    or a practice item's text (a practice item in the HIT, or one of the stage's), or holds a
    unit the worker already read, at any level, in any stage of the project (`units_read`).
    A HIT returned and accepted again shows the worker no other version (`shown_again`)."""
    rows = Item.objects.filter(pk__in=[i.pk for i in items]).values_list(
        "pk", "design_unit", "is_practice")
    units = [unit_key(item_id=pk, design_unit=unit) for pk, unit, practice in rows
             if not practice]
    practice = {unit_key(item_id=pk, design_unit=unit) for pk, unit, is_practice in rows
                if is_practice}
    _lock_worker(worker)
    if len(units) != len(set(units)) or set(units) & practice:
        return ("This HIT shows the same text twice, which this study does not allow. Please "
                "return it; other HITs may be open to you.")
    if set(units) & units_read(stage=stage, worker=worker, shown_again=[i.pk for i in items]):
        return ("This HIT shows a text you have already read in another version. Please "
                "return it; other HITs may be open to you.")
    return ""
