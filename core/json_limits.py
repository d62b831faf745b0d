"""Limits on JSON that comes from outside: nesting depth.

Python's parser recurses once per level, so a body of a few thousand brackets raises
RecursionError deep inside it (a 500) and every later walk over the value risks the same.
Item content, settings and answers need a handful of levels; anything past MAX_JSON_DEPTH is
refused with a message instead.
"""
from __future__ import annotations

import json
from typing import Any

MAX_JSON_DEPTH = 64


class JsonTooDeep(ValueError):
    @staticmethod
    def default_message(max_depth: int = MAX_JSON_DEPTH) -> str:
        return f"JSON nested more than {max_depth} levels deep"


def json_depth(value: Any) -> int:
    """Levels of lists/objects in a parsed value (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def check_json_depth(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    if json_depth(value) > max_depth:
        raise JsonTooDeep(JsonTooDeep.default_message(max_depth))
    return value


def json_loads_limited(raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads that refuses values nested deeper than `max_depth` with JsonTooDeep (a
    ValueError, like every other malformed body)."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonTooDeep(JsonTooDeep.default_message(max_depth)) from None
    return check_json_depth(value, max_depth=max_depth)
