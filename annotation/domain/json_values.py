"""Numbers a JSON column can store: one rule for every door (the API, the importers, the admin).

Python reads NaN, Infinity and -Infinity (and a literal like 1e999 as infinity), but they are not
JSON values: SQLite's JSON_VALID check and PostgreSQL's jsonb refuse them, so a value carrying one
failed only when stored, as an IntegrityError (a 500, or a whole import rolled back with a
database message). They are refused where the value comes in, naming where they are.
Pure functions, no Django.
"""
from __future__ import annotations

import math
from typing import Any

NON_FINITE_MESSAGE = "must be a finite number (NaN and Infinity are not JSON values)"


def is_finite_number(value: Any) -> bool:
    """True for an int, or a float that is neither NaN nor infinite (bool is no number)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def find_non_finite(value: Any, where: str = "") -> str | None:
    """The path (`metadata.scores[2]`) of the first NaN or infinite float in `value` (nested
    dicts and lists), or None. `where` is the path of `value` itself. Iterative: a deeply nested
    value costs no recursion."""
    stack = [(value, where)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path
        if isinstance(node, dict):
            children = [(child, f"{path}.{key}" if path else str(key))
                        for key, child in node.items()]
        elif isinstance(node, (list, tuple)):
            children = [(child, f"{path}[{index}]") for index, child in enumerate(node)]
        else:
            continue
        stack.extend(reversed(children))  # the first one in document order is named
    return None
