"""Limits on JSON that comes from outside: nesting depth, and only JSON's own values; and
strict JSON going out (`json_dumps_strict`).

Python's parser recurses once per level, so a body of a few thousand brackets raises
RecursionError deep inside it (a 500) and every later walk over the value risks the same.
Item content, settings and answers need a handful of levels; anything past MAX_JSON_DEPTH is
refused with a message instead.

Python's parser also reads NaN, Infinity and -Infinity, which are not JSON. A database refuses
them inside a JSON column (SQLite's JSON_VALID check, PostgreSQL's jsonb), so a value carrying
one failed only when stored: a 500, or a misleading message from the code that caught the
database error. They are refused here, where the body is read. So is a lone surrogate
(`"\\ud800"`): valid JSON syntax, but no character: UTF-8 cannot encode it, so it failed when
stored (PostgreSQL's COPY) or, worse, was stored (SQLite) and broke every later export.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

MAX_JSON_DEPTH = 64

BYTE_ORDER_MARK = "\ufeff"


def without_byte_order_mark(text: str) -> str:
    """`text` without a leading byte-order mark: Notepad, Excel and PowerShell write one at the
    start of a UTF-8 file, and it is no part of the data (RFC 8259 lets a JSON parser ignore
    it). The one rule of every door that reads text from outside: the file doors
    (`annotation.importers.base.decode_text`: imports, judge verdicts, `score --input`) and
    the API's JSON bodies (`core.api.LimitedJSONParser`), so a file posted as it was saved is
    read as its upload is; the API answered "Unexpected UTF-8 BOM" to the bytes the admin's
    import read."""
    return text.removeprefix(BYTE_ORDER_MARK)


class JsonTooDeep(ValueError):
    @staticmethod
    def default_message(max_depth: int = MAX_JSON_DEPTH) -> str:
        return f"JSON nested more than {max_depth} levels deep"


class JsonNotStandard(ValueError):
    """NaN, Infinity or -Infinity in a body: Python reads them, JSON has no such values."""


def _refuse_constant(name: str) -> NoReturn:
    """`parse_constant` for json.loads: refuses NaN, Infinity and -Infinity by name."""
    raise JsonNotStandard(f"{name} is not a JSON value")


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


class DuplicateKey(ValueError):
    """A JSON object that names one key twice: json.loads keeps only the last value, so an
    entry (a MOCHA id, a field) would vanish without a word."""


def refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    """`object_pairs_hook` for json_loads_limited: DuplicateKey naming a key given twice in
    one object (the data files people import; the importers and `import_verdicts` use it)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(
                    f"key {key!r} appears twice in one JSON object; JSON keeps only the last "
                    "one, so one of them would be lost: give each its own key")
            seen.add(key)
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def find_lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in a parsed value's strings or keys (JSON's `\\ud800` escape
    gives one: Python reads it, but it is no character, and UTF-8, SQLite's driver and
    PostgreSQL's COPY all fail on it), as `\\udXXX` text; None when there is none."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            texts = (node,)
        elif isinstance(node, dict):
            texts = tuple(key for key in node if isinstance(key, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
            continue
        else:
            continue
        for text in texts:
            if (match := _SURROGATE.search(text)) is not None:
                return f"\\u{ord(match.group()):04x}"
    return None


def lone_surrogates_replaced(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, for text that is kept rather than
    refused (an LLM endpoint's answer: it is paid for, and no database stores the surrogate)."""
    return _SURROGATE.sub("\ufffd", text)


def check_json_depth(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    if json_depth(value) > max_depth:
        raise JsonTooDeep(JsonTooDeep.default_message(max_depth))
    return value


def json_loads_limited(raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH,
                       object_pairs_hook=None) -> Any:
    """json.loads that refuses values nested deeper than `max_depth` with JsonTooDeep, and
    NaN/Infinity and lone surrogates (`\\ud800`: no character, no database stores it) with
    JsonNotStandard (both ValueErrors, like every other malformed body).
    `object_pairs_hook` as for json.loads (the importers refuse duplicate keys with it)."""
    try:
        value = json.loads(raw, parse_constant=_refuse_constant,
                           object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise JsonTooDeep(JsonTooDeep.default_message(max_depth)) from None
    check_json_depth(value, max_depth=max_depth)
    if (surrogate := find_lone_surrogate(value)) is not None:
        raise JsonNotStandard(f"{surrogate} (a lone surrogate) is not a Unicode character")
    return value


def json_ready(value: Any) -> Any:
    """`value` with numpy scalars as Python values and NaN/±inf as None (an undefined number
    reads as missing, its reason beside it where the report gives one), keys as text."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and type(value).__module__ == "numpy":
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def json_dumps_strict(value: Any, **options) -> str:
    """json.dumps that writes JSON a strict parser reads (jq, JavaScript's JSON.parse,
    PostgreSQL's jsonb): NaN, Infinity and -Infinity become null. Python's default writes them
    as bare tokens, which jq and every other standard parser refuse, so one undefined number
    would make a whole report or export unreadable downstream. Null rather than a refusal:
    every report already says an undefined number is None (with the reason beside it), so a
    stray NaN reaching a writer means the same thing, and a researcher piping `--json` to jq
    wants the rest of the report. `options` as for json.dumps (indent, ensure_ascii, default)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:  # only a non-finite float (the cleaning walk is the slow path)
        if "Out of range float" not in str(exc):
            raise
        return json.dumps(json_ready(value), allow_nan=False, **options)
