"""Prolific screeners as typed values, kept in the stage setting `prolific_filters` (the list of
filters Prolific's create-study call takes; annotation/providers/prolific.py sends it as is).

A screener is one entry of that list, by Prolific's `filter_id`: a range filter
(`{"filter_id": "approval_rate", "selected_range": {"lower": 95, "upper": 100}}`) or a select
filter (`{"filter_id": "current-country-of-residence", "selected_values": ["1", "2"]}`; Prolific
names the choices by its own ids, listed by GET /api/v1/filters/). The admin edits the screeners
below as fields; every other filter in the list is kept as it is.

Pure: no Django.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


class ScreenerError(ValueError):
    """A screener's value is not acceptable; the message names it and what is wrong."""


@dataclass(frozen=True)
class Screener:
    name: str  # the form field's name
    filter_id: str  # Prolific's filter id
    kind: str  # "range" (a whole-number lower bound) or "select" (Prolific choice ids)
    label: str
    help: str
    minimum: int = 0
    maximum: int | None = None  # also stored as the range's upper bound


SCREENERS: tuple[Screener, ...] = (
    Screener("approval_rate_min", "approval_rate", "range", "Minimum approval rate (%)",
             "Participants whose approval rate is at least this.", 0, 100),
    Screener("approvals_min", "approval_numbers", "range", "Minimum approved submissions",
             "Participants with at least this many approved submissions.", 0, None),
    Screener("countries", "current-country-of-residence", "select",
             "Countries of residence (Prolific ids)",
             "Prolific's choice ids of the countries participants live in, comma-separated "
             "(GET /api/v1/filters/ lists them under current-country-of-residence; e.g. 1 is "
             "the United Kingdom)."),
    Screener("languages", "first-language", "select", "First languages (Prolific ids)",
             "Prolific's choice ids of the participants' first language, comma-separated "
             "(GET /api/v1/filters/ lists them under first-language)."),
)
BY_NAME = {s.name: s for s in SCREENERS}
MANAGED_FILTER_IDS = frozenset(s.filter_id for s in SCREENERS)


def screener_check(screener: Screener, value: Any) -> Any:
    """The value as the form keeps it (int, or a list of choice ids), or ScreenerError."""
    if screener.kind == "range":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScreenerError(f"{screener.label}: must be a whole number, not {value!r}")
        if value < screener.minimum or (screener.maximum is not None
                                        and value > screener.maximum):
            bounds = (f"between {screener.minimum} and {screener.maximum}"
                      if screener.maximum is not None else f"at least {screener.minimum}")
            raise ScreenerError(f"{screener.label}: must be {bounds}, not {value}")
        return value
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ScreenerError(f"{screener.label}: must be a list of Prolific choice ids")
    bad = [v for v in value if not re.fullmatch(r"[0-9A-Za-z_-]{1,40}", v)]
    if bad:
        raise ScreenerError(f"{screener.label}: {', '.join(map(repr, bad))} is not a Prolific "
                            "choice id (ids like 1 or 45, comma-separated; GET /api/v1/filters/ "
                            "lists them)")
    if len(set(value)) != len(value):
        raise ScreenerError(f"{screener.label}: an id is given twice")
    return value


def screeners_from_filters(filters: Any) -> dict[str, Any]:
    """The screeners' values in a stored `prolific_filters` (absent ones left out)."""
    values: dict[str, Any] = {}
    for entry in filters if isinstance(filters, list) else []:
        if not isinstance(entry, dict):
            continue
        for screener in SCREENERS:
            if entry.get("filter_id") != screener.filter_id:
                continue
            if screener.kind == "range":
                lower = (entry.get("selected_range") or {}).get("lower")
                if isinstance(lower, int | float) and not isinstance(lower, bool):
                    values[screener.name] = int(lower)
            elif isinstance(entry.get("selected_values"), list):
                values[screener.name] = [str(v) for v in entry["selected_values"]]
    return values


def filters_without_screeners(filters: Any) -> list:
    """The stored filters the screener fields do not edit (kept as they are)."""
    return [entry for entry in (filters if isinstance(filters, list) else [])
            if not (isinstance(entry, dict) and entry.get("filter_id") in MANAGED_FILTER_IDS)]


def filters_with_screeners(filters: Any, values: dict[str, Any]) -> list:
    """`filters` without the screeners' entries, plus one entry per screener with a value
    (None or an empty list drops the screener)."""
    out = filters_without_screeners(filters)
    for screener in SCREENERS:
        value = values.get(screener.name)
        if value is None or value == []:
            continue
        value = screener_check(screener, value)
        if screener.kind == "range":
            out.append({"filter_id": screener.filter_id,
                        "selected_range": {"lower": value, "upper": screener.maximum}})
        else:
            out.append({"filter_id": screener.filter_id, "selected_values": list(value)})
    return out
