"""An item's content value as a person reads it on the import preview: a list of references as
"a / b" and a nested object as "key: value", not Python's repr (`['soundproofed']`)."""
from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def content_text(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, list | tuple):
        return " / ".join(content_text(v) for v in value) or "–"
    if isinstance(value, dict):
        return "; ".join(f"{key}: {content_text(v)}" for key, v in value.items()) or "–"
    return str(value)
