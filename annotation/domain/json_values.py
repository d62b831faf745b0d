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


def json_equal(first: Any, second: Any) -> bool:
    """Whether two values are the same JSON value, the one comparison of what a JSON column
    gave back with what a door received (a repeated import, a retried API request). PostgreSQL's
    jsonb stores a number as an exact decimal and gives a float such as 1e23 back as the whole
    number 100000000000000000000000, which Python's == never finds equal to the float it came
    from (SQLite gives back 1e+23): so a number is compared as a float when either side is
    one, which gives exactly the float that was stored. A bool is no number here (true is not
    1), dict keys are compared whatever their order; anything else by ==."""
    if isinstance(first, bool) or isinstance(second, bool):
        return type(first) is type(second) and first == second
    if isinstance(first, float) or isinstance(second, float):
        if not isinstance(first, (int, float)) or not isinstance(second, (int, float)):
            return False
        try:
            return float(first) == float(second)
        except OverflowError:  # a whole number no float holds is no float's value
            return False
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(
            json_equal(value, second[key]) for key, value in first.items())
    if isinstance(first, (list, tuple)) and isinstance(second, (list, tuple)):
        return len(first) == len(second) and all(
            json_equal(a, b) for a, b in zip(first, second, strict=True))
    return first == second


def json_key(value: Any) -> str:
    """A text that two values `json_equal` finds equal share (numbers as floats, keys sorted):
    for finding a stored value among many at once, where comparing pairs would not do."""
    import json

    def canonical(node: Any) -> Any:
        if isinstance(node, bool) or node is None or isinstance(node, str):
            return node
        if isinstance(node, (int, float)):
            try:
                return float(node)
            except OverflowError:  # a whole number no float holds stays itself
                return node
        if isinstance(node, dict):
            return {key: canonical(child) for key, child in node.items()}
        if isinstance(node, (list, tuple)):
            return [canonical(child) for child in node]
        return node

    return json.dumps(canonical(value), sort_keys=True, ensure_ascii=False)
