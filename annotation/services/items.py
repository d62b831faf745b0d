"""Creating items one at a time or in bulk (REST API). Content is validated per task kind by
`annotation.domain.item_content`, the same checks the importers use."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction

from annotation.domain.design import design_unit_for
from annotation.domain.item_content import (
    ItemContentError,
    validate_gold,
    validate_item_content,
    validate_item_text,
)
from annotation.models import Item, Project

ITEM_FIELDS = (
    "external_id", "dataset", "source", "split", "domain", "text_level", "group_key",
    "design_unit", "content", "gold", "is_gold_check", "is_practice", "excluded",
    "exclusion_reason", "metadata",
)


class ItemInputError(ValueError):
    """An item that cannot be stored; `index` is its position in a bulk request (None for a
    single item) and `field` names the offending field."""

    def __init__(self, field: str, message: str, index: int | None = None):
        self.field = field
        self.index = index
        self.message = message
        where = f"items[{index}]." if index is not None else ""
        super().__init__(f"{where}{field}: {message}")


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
    item_validate(project=project, data=data)
    item = Item(project=project, **data)
    if not item.design_unit:  # the one derivation rule (annotation.domain.design)
        item.design_unit = design_unit_for(external_id=item.external_id, metadata=item.metadata)
    return item


@transaction.atomic
def item_create(*, project: Project, **data: Any) -> Item:
    item = _build(project, data)
    if Item.objects.filter(project=project, external_id=item.external_id).exists():
        raise ItemInputError("external_id", f"{item.external_id!r} already exists in this project")
    try:
        with transaction.atomic():
            item.save()
    except IntegrityError as error:  # a concurrent request stored the same external id
        raise ItemInputError("external_id", f"{item.external_id!r} already exists") from error
    return item


@transaction.atomic
def items_bulk_create(*, project: Project, items: Sequence[dict[str, Any]]) -> list[Item]:
    """All or nothing: the first invalid or duplicate item stops the request, naming its index
    and field, and nothing is stored."""
    built: list[Item] = []
    seen: dict[str, int] = {}
    for index, data in enumerate(items):
        try:
            item = _build(project, data)
        except ItemInputError as error:
            raise ItemInputError(error.field, error.message, index) from error
        if item.external_id in seen:
            raise ItemInputError(
                "external_id", f"{item.external_id!r} repeats items[{seen[item.external_id]}]",
                index,
            )
        seen[item.external_id] = index
        built.append(item)
    existing = set(
        Item.objects.filter(project=project, external_id__in=seen).values_list(
            "external_id", flat=True
        )
    )
    if existing:
        first = min(seen[e] for e in existing)
        raise ItemInputError(
            "external_id", f"{built[first].external_id!r} already exists in this project", first
        )
    try:
        with transaction.atomic():
            return Item.objects.bulk_create(built, batch_size=500)
    except IntegrityError as error:
        raise ItemInputError("external_id", "an external id already exists (concurrent write)") from error
