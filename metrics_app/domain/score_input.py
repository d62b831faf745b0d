"""The one check of a candidate to score, shared by `manage.py score` (a JSONL line) and
`POST /api/metrics/score/` (an item of the body): the same fields, the same types, at least one
reference and no empty one, unique ids. Pure functions, no Django; each door adds where the
row is ("line 3: ...", "items[2] (id 'x'): ...")."""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

REQUIRED_FIELDS = ("id", "question", "references", "candidate")


class ScoreInputError(ValueError):
    """A row that cannot be scored; `field` names the offending field ("" for the row)."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def check_score_row(row: Any) -> None:
    """Raise ScoreInputError for the first problem of one row: not an object, a missing
    field, an id that is not a string or integer, a question/candidate/passage that is not a
    string, references that are not a list of strings (one string names the fix), or no
    reference / an empty one (a blank reference would score every candidate against nothing)."""
    if not isinstance(row, dict):
        raise ScoreInputError("", "expected a JSON object")
    missing = [field for field in REQUIRED_FIELDS if field not in row]
    if missing:
        raise ScoreInputError(missing[0], f"missing field{'s' if len(missing) > 1 else ''} "
                                          + ", ".join(map(repr, missing)))
    if not isinstance(row["id"], (str, int)) or isinstance(row["id"], bool):
        raise ScoreInputError("id", "field 'id' must be a string or integer")
    if isinstance(row["id"], str) and not row["id"].strip():
        raise ScoreInputError("id", "field 'id' must not be empty")
    for field in ("question", "candidate", "passage"):
        if field in row and not isinstance(row[field], str):
            raise ScoreInputError(field, f"field {field!r} must be a string")
    refs = row["references"]
    if isinstance(refs, str):
        raise ScoreInputError("references", "field 'references' must be a list of strings, "
                                            f"not one string (write [{json.dumps(refs)}])")
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise ScoreInputError("references", "field 'references' must be a list of strings")
    if not refs or any(not r.strip() for r in refs):
        raise ScoreInputError("references", "field 'references' needs at least one reference "
                                            "and no empty ones")


def first_repeated_id(ids: Iterable[Any]) -> tuple[int, int] | None:
    """(position, position of its first use) of the first id used twice, compared as strings
    (the output is matched back to the input by id); None when every id is unique."""
    first: dict[str, int] = {}
    for position, row_id in enumerate(ids):
        key = str(row_id)
        if key in first:
            return position, first[key]
        first[key] = position
    return None
