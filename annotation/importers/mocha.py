"""MOCHA's JSON layout: `{dataset: {id: {context, question, reference, candidate, score,
metadata: {source, scores}}}}`.

One Likert item per candidate (external id `<dataset>/<id>`), gold = the file's `score` (the
mean of the crowd scores), and one judgment per entry of `metadata.scores`. MOCHA publishes no
annotator ids, so the n-th score of every candidate is attributed to the synthetic worker
`mocha-annotator-<n>` (or to `metadata.annotators[n]` when a file has them). The split comes
from `--split` or from the file name (train/dev/test.json). The other keys of `metadata`, and
any other field of an entry, are kept in item.metadata.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.domain.item_content import text_key

from .base import (
    ImportFormatError,
    ItemRecord,
    JudgmentRecord,
    expect,
    load_json,
    split_from_path,
    validate_record,
)

KIND = "likert"


def iter_entries(path: Path, document: Any):
    """(dataset, id, entry) for every entry of a MOCHA-layout document, checking the nesting."""
    expect(document, dict, path=path, record=None, field="(top level)",
           what="an object {dataset: {id: entry}}")
    for dataset, entries in document.items():
        expect(entries, dict, path=path, record=dataset, field=dataset,
               what="an object {id: entry}")
        for entry_id, entry in entries.items():
            label = f"{dataset}/{entry_id}"
            expect(entry, dict, path=path, record=label, field="(entry)", what="an object")
            yield dataset, entry_id, label, entry


ENTRY_FIELDS = frozenset({"context", "question", "reference", "candidate", "score", "metadata"})


def entry_extras(entry: dict, known: frozenset, *, path: Path, label: str,
                 taken: set) -> dict:
    """An entry's fields the layout does not use, kept in item.metadata under their own names
    (never dropped without a word); one whose name item.metadata already uses is an error."""
    extras = {key: value for key, value in entry.items() if key not in known}
    for key in extras:
        if key in taken:
            raise ImportFormatError(path, "is also a key of the item's metadata; rename one",
                                    record=label, field=key)
    return extras


def field_str(entry: dict, name: str, *, path: Path, label: str) -> str:
    if name not in entry:
        raise ImportFormatError(path, "is missing", record=label, field=name)
    return expect(entry[name], str, path=path, record=label, field=name, what="a string")


def parse(path: Path, *, kind: str = KIND, split: str | None = None) -> list[ItemRecord]:
    path = Path(path)
    document = load_json(path)
    split_name = split_from_path(path, split)
    records = []
    for dataset, entry_id, label, entry in iter_entries(path, document):
        context = field_str(entry, "context", path=path, label=label)
        metadata = entry.get("metadata", {})
        expect(metadata, dict, path=path, record=label, field="metadata", what="an object")
        scores = metadata.get("scores", [])
        expect(scores, list, path=path, record=label, field="metadata.scores", what="a list")
        annotators = metadata.get("annotators")
        if annotators is not None and (
            not isinstance(annotators, list) or len(annotators) != len(scores)
        ):
            raise ImportFormatError(
                path, "must be a list as long as metadata.scores", record=label,
                field="metadata.annotators",
            )
        judgments = []
        for position, score in enumerate(scores):
            expect(score, (int, float), path=path, record=label,
                   field=f"metadata.scores[{position}]", what="a number")
            worker = str(annotators[position]) if annotators else f"mocha-annotator-{position + 1}"
            judgments.append(JudgmentRecord(worker=worker, score=score))
        gold_score = entry.get("score")
        if gold_score is not None:
            expect(gold_score, (int, float), path=path, record=label, field="score",
                   what="a number")
        source = metadata.get("source", "")
        expect(source, str, path=path, record=label, field="metadata.source", what="a string")
        extra_metadata = {k: v for k, v in metadata.items() if k not in ("source", "scores")}
        extra_metadata.update(entry_extras(entry, ENTRY_FIELDS, path=path, label=label,
                                           taken={"mocha_id", *extra_metadata}))
        record = ItemRecord(
            external_id=f"{dataset}/{entry_id}",
            kind=KIND,
            content={
                "passage": context,
                "question": field_str(entry, "question", path=path, label=label),
                "references": [field_str(entry, "reference", path=path, label=label)],
                "candidate": field_str(entry, "candidate", path=path, label=label),
            },
            dataset=dataset,
            source=source,
            split=split_name,
            group_key=text_key(context),
            gold=None if gold_score is None else {"score": gold_score},
            metadata={"mocha_id": entry_id, **extra_metadata},
            judgments=judgments,
        )
        records.append(validate_record(record, path=path, index=label))
    return records
