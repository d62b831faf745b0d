"""The writes of a stage's item choice: storing the items publishing releases
(`stage_items_choose`, `stage_items_select`) and the HIT plan `stage_hits_build` stores
(`stage_hit_plan`). What they compute is read in annotation/stage_plan_selectors.py (the
choice, gold mixing, Latin-square lists, the plan, the release preview); the item-filter
checks the admin form and the API run before a save are here beside `stage_items_select`.
"""
from __future__ import annotations

import random

from annotation.domain.item_content import item_filter_value
from annotation.models import Item, Stage, StageStatus
from annotation.stage_errors import StageError
from annotation.stage_plan_selectors import (
    HitPlan,
    stage_hits_planned,
    stage_items_by_kind,
    stage_items_listed,
)


def stage_items_choose(*, stage: Stage, store: bool = True) -> list[Item]:
    """The stage's items: the explicit ones, or chosen by kind (`stage_items_by_kind`, and
    then stored on the stage). `store=False` only looks (= `stage_items_planned`)."""
    explicit = stage_items_listed(stage=stage)
    if explicit:
        return explicit
    chosen = stage_items_by_kind(stage=stage)
    if store:
        stage.items.set(chosen)
    return chosen


def stage_hit_plan(*, stage: Stage, store: bool = True,
                   items: list[Item] | None = None) -> list[HitPlan]:
    """The stage's HIT plan (`stage_hits_planned`), its items chosen by `stage_items_choose`
    (stored unless `store=False`) when the caller has not chosen them (`items`)."""
    if items is None:
        items = stage_items_choose(stage=stage, store=store)
    return stage_hits_planned(stage=stage, items=items)


ITEM_FILTER_FIELDS = ("dataset", "split", "source")


def stage_items_matching(*, project_id: int, dataset: str = "", split: str = "",
                         source: str = ""):
    """The project's data items (not excluded, practice or gold checks) a stage's item filter
    matches: what `stage_items_select` chooses from."""
    matching = Item.objects.filter(project_id=project_id, excluded=False, is_practice=False,
                                   is_gold_check=False)
    for field, value in (("dataset", dataset), ("split", split), ("source", source)):
        if value:
            matching = matching.filter(**{field: item_filter_value(field, value)})
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


def stage_items_fixed_refusal(stage: Stage | None) -> str:
    """Why `stage`'s items cannot change ("" for a draft or a new stage): one message at every
    door that chooses items (the API's PATCH, the stage form, `stage_items_select`)."""
    if stage is None or stage.pk is None or stage.status == StageStatus.DRAFT:
        return ""
    return (f"the stage is {stage.get_status_display().lower()}: its items are fixed once it "
            "is published")


def hit_item_refusal(*, hit, item: Item | None) -> str:
    """Why `item` may not be one of `hit`'s items ("" when it may): a HIT serves items of its
    stage's project only. A draft's HITs are published as they stand (`stage_hits_build`
    keeps them), so an item of another project put on the HIT page by hand would be served
    and judged in a stage of a project it does not belong to. The HIT page's item rows ask
    here; the HITs publishing builds take the stage's own items."""
    if item is None or hit is None or item.project_id == hit.stage.project_id:
        return ""
    return (f"item {item.external_id!r} belongs to project {item.project.slug!r}; this HIT "
            f"serves stage {hit.stage.name!r} of project {hit.stage.project.slug!r}, and "
            "serves only that project's items")


def stage_items_select(*, stage: Stage, dataset: str = "", split: str = "", source: str = "",
                       count: int | None = None) -> int:
    """Choose a draft stage's items by filter instead of by listing them (a stage of thousands
    of items cannot be edited item by item): the project's data items (not excluded, practice
    or gold checks) of that dataset, split and answering system, `count` of them sampled with
    the stage as seed (all when None). With no filter and no count the explicit choice is
    cleared, so the stage takes its items by kind when it is published. Returns how many items
    the stage now lists (0 = chosen by kind)."""
    refusal = stage_items_fixed_refusal(stage)
    if refusal:
        raise StageError(refusal)
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


