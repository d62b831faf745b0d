"""Number formatting for the dashboard: missing values show as an em dash."""
from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def num(value, digits: int = 3) -> str:
    if value is None or value == "":
        return "—"
    try:
        text = f"{float(value):.{int(digits)}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text
    except (TypeError, ValueError):
        return str(value)


@register.filter
def num_or_why(value, why) -> str:
    """`num`, or "undefined: <why>" where the report says why the value is missing (the
    statement the other doors give, never a bare dash)."""
    if value is None and why:
        return f"undefined: {why}"
    return num(value)


@register.filter
def pct(value) -> str:
    if value is None or value == "":
        return "—"
    return f"{100 * float(value):.1f}%"


@register.filter
def points(value) -> str:
    """A difference of two shares in percentage points, signed."""
    if value is None or value == "":
        return "—"
    return f"{100 * float(value):+.1f} pts"


@register.filter
def get(mapping, key):
    return (mapping or {}).get(key)


@register.filter
def at(sequence, position):
    """sequence[position], or "" past its end (the row label of a confusion matrix)."""
    try:
        return sequence[int(position)]
    except (IndexError, TypeError, ValueError):
        return ""


@register.filter
def interval(bounds, digits: int = 3) -> str:
    """[low, high] of a confidence interval; "" when there is none, and "no interval" spelled
    out when only one bound is known (never "[-1.00, ]")."""
    low, high = (list(bounds or []) + [None, None])[:2]
    if low is None and high is None:
        return ""
    if low is None or high is None:
        return "no interval (too few distinct values)"
    return f"[{num(low, digits)}, {num(high, digits)}]"
