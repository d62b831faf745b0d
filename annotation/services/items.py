"""Creating items one at a time or in bulk (REST API). Content is validated per task kind by
`annotation.domain.item_content`, the same checks the importers use."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q

from annotation.domain.design import design_unit_for
from annotation.domain.item_content import (
    ItemContentError,
    group_key_for,
    item_columns_trimmed,
    normalize_answer_systems,
    normalize_split,
    validate_gold,
    validate_item_content,
    validate_item_text,
)
from annotation.domain.json_values import json_equal
from annotation.domain.send_filter import item_send_filter
from annotation.hooks import item_content_readers_registered
from annotation.models import (
    LIVE_STAGE_STATUSES,
    AssignmentItem,
    AssignmentStatus,
    HitItem,
    Item,
    Judgment,
    Project,
    Stage,
)
from annotation.stage_plan_selectors import open_stages_serving_unit

ITEM_FIELDS = (
    "external_id", "dataset", "source", "split", "domain", "text_level", "group_key",
    "design_unit", "content", "gold", "is_gold_check", "is_practice", "excluded",
    "exclusion_reason", "metadata",
)


# What an annotator is shown and judged against, and what names the item in the study: fixed
# once the item has a judgment or a stage collecting judgments serves it.
ITEM_FIXED_FIELDS = {
    "content": "its judgments must keep meaning what the annotators were shown",
    "gold": "workers were graded (qualification, gold checks) against this answer key",
    "project": "its judgments belong to this project's study",
    "external_id": "exports, imports and reports name its judgments by it",
}
ITEM_FIXED_HOW = ("add the corrected item under a new external id and mark this one excluded "
                  "(its judgments stay, outside the counts)")


def item_in_use(*, item: Item) -> str:
    """Why the item's shown content is fixed (empty when it is not): it has judgments (of any
    stage: practice and qualification answers were graded against it too), or a stage that is
    collecting serves it (lists it, lists no items and so serves its whole project, or built
    it into a HIT or an assignment), or a worker holds it in an assignment still in progress
    (accepted before its stage closed)."""
    if item.pk is None:
        return ""
    judged = Judgment.objects.filter(item_id=item.pk).count()
    if judged:
        return f"it has {judged} judgment{'s' * (judged != 1)}"
    return _item_served(item=item)


def _item_served(*, item: Item) -> str:
    """Why a live stage holds the item (empty when none does): a stage serving it now, or a
    worker answering it in an assignment still in progress."""
    stored = Item.objects.filter(pk=item.pk).values_list("project_id", flat=True).first()
    listed = Stage.items.through.objects.filter(stage_id=OuterRef("pk"))
    # A live stage serves items (a draft serves nobody; a closed one no longer does).
    serving = Stage.objects.filter(status__in=LIVE_STAGE_STATUSES).filter(
        Exists(listed.filter(item_id=item.pk))
        | Exists(HitItem.objects.filter(hit__stage_id=OuterRef("pk"), item_id=item.pk))
        | Exists(AssignmentItem.objects.filter(assignment__stage_id=OuterRef("pk"),
                                               item_id=item.pk))
        | (Q(project_id=stored) & ~Exists(listed))).order_by("order", "pk").first()
    if serving is not None:
        return f"stage {serving.name!r} is {serving.get_status_display().lower()} and serves it"
    # A worker who accepted before a stage closed may still be answering it.
    held = AssignmentItem.objects.filter(item_id=item.pk,
                                         assignment__status=AssignmentStatus.IN_PROGRESS).first()
    if held is not None:
        return f"a worker holds it in assignment {held.assignment_id}, in progress"
    return ""


# Work whose review is still to come, and would read an answer key given now (gold accuracy).
AWAITING_DECISION = (AssignmentStatus.IN_PROGRESS, AssignmentStatus.SUBMITTED,
                     AssignmentStatus.FLAGGED)


def _grading_pending(*, item: Item) -> str:
    """Why work on the item is still to be graded (empty when none is): its judgments await
    review, or a live stage serves it."""
    waiting = Judgment.objects.filter(item_id=item.pk,
                                      assignment__status__in=AWAITING_DECISION).count()
    return f"{waiting} of its judgments await review" if waiting else _item_served(item=item)


def item_first_gold_error(*, item: Item) -> str:
    """Why an item without an answer key may not be given one now (empty when it may). Nobody
    was graded against a key that did not exist, so its judgments do not fix it (imported
    expert labels, decided work: a study uses them as its qualification's key); only work a
    key given now would grade unlike the work before it does: a live stage serving the item,
    or its judgments awaiting review."""
    why = _grading_pending(item=item)
    if not why:
        return ""
    return (f"cannot add an answer key now: {why}, and that work would be graded against a "
            f"key the work before it was not; add it once the stage is closed and its work "
            f"reviewed")


# The flags review grades submitted work by: gold accuracy (`min_gold_accuracy`) on gold
# checks; practice items as Prolific's comprehension checks and STARC's practice rule.
GRADED_FLAGS = {"is_gold_check": "gold check", "is_practice": "practice item"}


def item_graded_flag_error(*, item: Item, flag: str, on: bool, gold: Any) -> str:
    """Why an item with an answer key (`gold`) may not become (`on`) or stop being a gold
    check or practice item (`flag`, one of `GRADED_FLAGS`) now (empty when it may): review
    grades submitted work on those items, so while work on it awaits review or a live stage
    serves it, the flag would grade that work unlike the work before it (a worker who read it
    as an ordinary item and disagreed with its reference held or rejected, or one who failed
    the check approved). The rule of `item_first_gold_error`, for the flags."""
    if gold is None:
        return ""  # review grades only items with a key
    why = _grading_pending(item=item)
    if not why:
        return ""
    what = GRADED_FLAGS[flag]
    return (f"cannot {'become' if on else 'stop being'} a {what} now: {why}, and review "
            f"grades that work on its {what}s, so it would be graded unlike the work before "
            f"it; change it once the stage is closed and its work reviewed")


def item_edit_errors(*, item: Item, changes: dict[str, Any]) -> dict[str, str]:
    """{field: why} for each change of a saved item that is refused: the one rule of every door
    that edits an item (the item admin form; the API and the importers never rewrite a stored
    item). `changes`: the fields posted with their new values; values equal to the stored ones
    are no change. `ITEM_FIXED_FIELDS` are fixed while `item_in_use`, and the content while
    another app stores something computed from it (`annotation.hooks`: metric scores, which
    rescoring would not redo); the gold-check and practice flags of an item with a key while
    work on it is still to be graded (`item_graded_flag_error`); the exclusion flag, those
    flags otherwise and the grouping fields stay free (the counting rule and the cached
    reports follow them)."""
    if item.pk is None:
        return {}
    stored = Item.objects.filter(pk=item.pk).first()
    if stored is None:
        return {}
    errors = {}
    for flag in GRADED_FLAGS:
        if flag in changes and bool(changes[flag]) != getattr(stored, flag):
            why = item_graded_flag_error(item=stored, flag=flag, on=bool(changes[flag]),
                                         gold=changes.get("gold", stored.gold))
            if why:
                errors[flag] = why
    if changes.get("is_practice") and not stored.is_practice and "is_practice" not in errors:
        if why := practice_flag_error(item=stored):
            errors["is_practice"] = why
    return {**errors, **_fixed_field_errors(stored=stored, changes=changes)}


def practice_flag_error(*, item: Item) -> str:
    """Why `item` may not become a practice item now (empty when it may): under the STARC
    design a practice item is a reading of its paragraph, so an open stage serving another item
    of that paragraph could no longer serve it to anyone who did the practice, and would never
    finish (publishing refuses such a stage: `practice_overlap_error`)."""
    stages = open_stages_serving_unit(item=item)
    if not stages:
        return ""
    names = ", ".join(str(stage) for stage in stages[:3])
    return (f"cannot become a practice item now: open stage {names} serves other items of its "
            f"text {item.design_unit}, and a practice item is a reading of its text, so those "
            "items could no longer be served to anyone who did the practice; use a practice "
            "item from a paragraph (or article) that is not in the study")


def _fixed_field_errors(*, stored: Item, changes: dict[str, Any]) -> dict[str, str]:
    """`item_edit_errors` for `ITEM_FIXED_FIELDS` and the content other apps computed from."""

    def value(name: str, of) -> Any:
        return of.project_id if name == "project" else getattr(of, name)

    changed = [name for name in ITEM_FIXED_FIELDS if name in changes
               and getattr(changes[name], "pk", changes[name]) != value(name, stored)]
    if not changed:
        return {}
    why = item_in_use(item=stored)
    if why:
        errors = {name: f"cannot change: {why}, and {ITEM_FIXED_FIELDS[name]}; {ITEM_FIXED_HOW}"
                  for name in changed}
        if "gold" in changed and stored.gold is None:  # a first key: nobody was graded on it
            first = item_first_gold_error(item=stored)
            if first:
                errors["gold"] = first
            else:
                del errors["gold"]
        return errors
    if "content" not in changed:
        return {}
    # What other apps computed from the content (annotation.hooks), e.g. cached metric scores.
    computed = [note for note in (reader(stored.pk)
                                  for reader in item_content_readers_registered()) if note]
    if computed:
        return {"content": f"cannot change: {'; '.join(computed)}; {ITEM_FIXED_HOW}"}
    return {}


def item_exclusion(*, item: Item, kind: str, content: Any, dataset: str | None,
                   excluded: bool, exclusion_reason: str, gold_check: bool = False
                   ) -> tuple[bool, str]:
    """(excluded, exclusion_reason) an item is saved with by the items API and the item admin:
    MOCHA's send filter (`annotation.domain.send_filter`) on the posted fields, as the
    importers apply it to a record without judgments; an item with judgments keeps the
    exclusion it is given (a study's measurement, as an imported record with judgments)."""
    if item.pk is not None and Judgment.objects.filter(item_id=item.pk).exists():
        return excluded, exclusion_reason
    return item_send_filter(kind=kind, content=content, dataset=dataset, excluded=excluded,
                            exclusion_reason=exclusion_reason, gold_check=gold_check)


def item_delete_error(*, item: Item) -> str:
    """Why the item may not be deleted (empty when it may): the same rule as editing its
    content, since deleting it would take it from its judgments (which protect it) or from
    the HITs and assignments a collecting stage serves it in."""
    why = item_in_use(item=item)
    return f"{item}: cannot delete: {why}; mark it excluded instead" if why else ""


class ItemInputError(ValueError):
    """An item that cannot be stored; `index` is its position in a bulk request (None for a
    single item) and `field` names the offending field."""

    def __init__(self, field: str, message: str, index: int | None = None):
        self.field = field
        self.index = index
        self.message = message
        where = f"items[{index}]." if index is not None else ""
        super().__init__(f"{where}{field}: {message}")


def item_content_to_store(*, kind: str, content: Any, stored: Any = None) -> Any:
    """The content a door stores: each A/B answer's system in its one spelling
    (`normalize_answer_systems`). An edit of a saved item whose content differs from the stored
    one only in that spelling keeps the stored content: a name stored before the rule is read
    in its one spelling anyway (`answer_system`), and respelling it would be a change of what
    was judged, which the edit rules refuse on an item in use."""
    content = normalize_answer_systems(kind, content)
    if stored is not None and normalize_answer_systems(kind, stored) == content:
        return stored
    return content


def item_validate(*, project: Project, data: dict[str, Any]) -> None:
    """Raise ItemInputError when `content` or `gold` do not fit the project's kind, or a text
    field holds a control character (`validate_item_text`)."""
    try:
        validate_item_content(project.kind, data.get("content"))
    except ItemContentError as error:
        raise ItemInputError("content", str(error)) from error
    try:
        validate_gold(project.kind, data.get("gold"))
    except ItemContentError as error:
        raise ItemInputError("gold", str(error)) from error
    try:
        validate_item_text(data)
    except ItemContentError as error:
        raise ItemInputError(error.field.split(".", 1)[0].split("[", 1)[0], str(error)) from error


def _build(project: Project, data: dict[str, Any]) -> Item:
    unknown = set(data) - set(ITEM_FIELDS)
    if unknown:
        raise ItemInputError(sorted(unknown)[0], "is not an item field")
    data = item_columns_trimmed(data)  # as the importers store them, whoever calls
    if "content" in data:  # each answer's system in its one spelling, as the importers store it
        data = {**data, "content": item_content_to_store(kind=project.kind,
                                                         content=data["content"])}
    item_validate(project=project, data=data)
    item = Item(project=project, **data)
    if not item.design_unit:  # the one derivation rule (annotation.domain.design)
        item.design_unit = design_unit_for(external_id=item.external_id, metadata=item.metadata)
    item.group_key = group_key_for(kind=project.kind, content=item.content,
                                   group_key=item.group_key)
    if isinstance(item.split, str):  # one spelling, as the importers store it
        item.split = normalize_split(item.split)
    item.excluded, item.exclusion_reason = item_exclusion(
        item=item, kind=project.kind, content=item.content, dataset=item.dataset,
        excluded=item.excluded, exclusion_reason=item.exclusion_reason,
        gold_check=item.is_gold_check)
    return item


@dataclass(frozen=True)
class StoredItems:
    """What a create request stored: `created` is False when the request repeated one already
    stored (a client retrying after a lost response) and `items` are the stored ones."""

    items: list[Item]
    created: bool


def item_create(*, project: Project, **data: Any) -> StoredItems:
    """Store one item; the exact repeat of a stored one (same external id, every posted field
    equal) creates nothing and answers the stored item, a different one is refused."""
    return items_bulk_create(project=project, items=[data], indexed=False)


@transaction.atomic
def items_bulk_create(*, project: Project, items: Sequence[dict[str, Any]],
                      indexed: bool = True) -> StoredItems:
    """All or nothing: the first invalid or duplicate item stops the request, naming its index
    and field, and nothing is stored. A request whose every item is already stored with the
    same posted fields (a retry after a lost response) creates nothing and answers the stored
    items; one that is only partly stored, or differs from what is, is refused naming the
    first item that does not fit."""
    built: list[Item] = []
    seen: dict[str, int] = {}
    for index, data in enumerate(items):
        try:
            item = _build(project, data)
        except ItemInputError as error:
            raise ItemInputError(error.field, error.message, _at(index, indexed)) from error
        if item.external_id in seen:
            raise ItemInputError(
                "external_id", f"{item.external_id!r} repeats items[{seen[item.external_id]}]",
                _at(index, indexed),
            )
        seen[item.external_id] = index
        built.append(item)
    replay = _stored_replay(project=project, items=items, built=built, indexed=indexed)
    if replay is not None:
        return replay
    try:
        with transaction.atomic():
            return StoredItems(Item.objects.bulk_create(built, batch_size=500), created=True)
    except IntegrityError as error:
        # A concurrent request stored some of these external ids meanwhile: the same items
        # (two copies of one retried request) are its replay, others a conflict.
        replay = _stored_replay(project=project, items=items, built=built, indexed=indexed)
        if replay is not None:
            return replay
        raise ItemInputError("external_id",
                             "an external id already exists (concurrent write)") from error


def _at(index: int, indexed: bool) -> int | None:
    return index if indexed else None


def _stored_replay(*, project: Project, items: Sequence[dict[str, Any]], built: list[Item],
                   indexed: bool) -> StoredItems | None:
    """None when none of `built` is stored yet; the stored items when the request repeats
    them exactly; else ItemInputError naming the first item (and field) that does not fit."""
    stored = {item.external_id: item for item in Item.objects.filter(
        project=project, external_id__in=[b.external_id for b in built])}
    if not stored:
        return None
    for index, (data, item) in enumerate(zip(items, built, strict=True)):
        existing = stored.get(item.external_id)
        if existing is None:
            continue
        for field in data:  # the fields the client posted; the rest are the server's
            # A content stored before the one spelling of a system name is the same content.
            mine = (item_content_to_store(kind=project.kind, content=item.content,
                                          stored=existing.content)
                    if field == "content" else getattr(item, field))
            if field != "external_id" and not json_equal(getattr(existing, field), mine):
                raise ItemInputError(
                    field, f"{item.external_id!r} already exists in this project with a "
                           f"different {field}; a retry must repeat the stored item exactly",
                    _at(index, indexed))
    missing = next((i for i, item in enumerate(built) if item.external_id not in stored), None)
    if missing is not None:
        first = next(i for i, item in enumerate(built) if item.external_id in stored)
        raise ItemInputError(
            "external_id",
            f"{built[first].external_id!r} already exists in this project but "
            f"items[{missing}] ({built[missing].external_id!r}) does not: a request is stored "
            "all or nothing, so this is not a retry of a stored one; leave out the stored "
            "items", _at(first, indexed))
    return StoredItems([stored[item.external_id] for item in built], created=False)
