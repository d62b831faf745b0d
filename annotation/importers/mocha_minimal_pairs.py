"""MOCHA minimal pairs: `{dataset: {id: {context, question, reference, candidate1, candidate2,
score1, score2}}}` (score1 > score2).

Each pair becomes two Likert items, `<dataset>/<id>/1` and `<dataset>/<id>/2`, with gold scores
score1 and score2 and the pair linkage in item.metadata: `{"minimal_pair": "<dataset>/<id>",
"pair_role": 1 | 2}` (plus `phenomenon` when given). Minimal-pair accuracy (how often a metric
scores role 1 above role 2, a tie counting half) is computed from that linkage.
"""
from __future__ import annotations

from pathlib import Path

from annotation.domain.item_content import text_key

from .base import (
    ImportFormatError,
    ItemRecord,
    expect,
    load_json,
    split_from_path,
    validate_record,
)
from .mocha import entry_extras, field_str, iter_entries

KIND = "likert"
# `phenomenon` and any other field go to item.metadata as they are (`entry_extras`).
PAIR_FIELDS = frozenset({"context", "question", "reference", "candidate1", "candidate2",
                         "score1", "score2"})


def parse(path: Path, *, kind: str = KIND, split: str | None = None) -> list[ItemRecord]:
    path = Path(path)
    document = load_json(path)
    split_name = split_from_path(path, split)
    records = []
    for dataset, entry_id, label, entry in iter_entries(path, document):
        context = field_str(entry, "context", path=path, label=label)
        question = field_str(entry, "question", path=path, label=label)
        reference = field_str(entry, "reference", path=path, label=label)
        pair_id = f"{dataset}/{entry_id}"
        scores = {}
        for role in (1, 2):
            if f"score{role}" not in entry:
                raise ImportFormatError(path, "is missing", record=label, field=f"score{role}")
            scores[role] = expect(entry[f"score{role}"], (int, float), path=path, record=label,
                                  field=f"score{role}", what="a number")
        if not scores[1] > scores[2]:
            raise ImportFormatError(
                path, "score1 must be higher than score2 in a minimal pair", record=label,
                field="score1",
            )
        extras = entry_extras(entry, PAIR_FIELDS, path=path, label=label,
                              taken={"minimal_pair", "pair_role"})
        for role in (1, 2):
            metadata = {"minimal_pair": pair_id, "pair_role": role, **extras}
            record = ItemRecord(
                external_id=f"{pair_id}/{role}",
                kind=KIND,
                content={
                    "passage": context,
                    "question": question,
                    "references": [reference],
                    "candidate": field_str(entry, f"candidate{role}", path=path, label=label),
                },
                dataset=dataset,
                source="minimal-pair",
                split=split_name,
                group_key=text_key(context),
                gold={"score": scores[role]},
                metadata=metadata,
            )
            records.append(validate_record(record, path=path, index=f"{label} (candidate{role})"))
    return records
