"""The in-lab STARC QA experiment (`in_lab_qa.tsv`): one row per trial.

Columns used: item_id, paragraph, question, options (the four answers in their original order:
0 = A correct, 1 = B, 2 = C, 3 = D; for RACE only 0 is known to be correct), new_options (the
order shown on screen, `|`-separated original indices: the first index is the option shown
first), answer_response (the chosen answer's original index), RT (milliseconds), difficulty,
source (Onestop or RACE), submission_ind (the participant), trial_number, startDate.

Each row gives one MC item (external id = item_id; dataset onestopqa or race; source = the
row's source; text level = difficulty: Ele/Adv, or Middle/High for RACE) and one judgment by the
worker `inlab-<submission_ind>` with choice = role letter of answer_response, presented_order =
role letters in the order shown, time_spent_ms = RT and extra.is_correct. Literal "\\n" in the
RACE passages becomes a line break. Rows repeating an item_id (other participants' trials of
the item) must agree on the item (texts, level, source); their judgments are merged, and one
participant answering an item twice is refused.
"""
from __future__ import annotations

from pathlib import Path

from core.vocabulary import MC_ROLES

from .base import (
    ImportFormatError,
    ItemRecord,
    JudgmentRecord,
    header_problems,
    read_text,
    table_rows,
    validate_record,
)

KIND = "mc"
REQUIRED_COLUMNS = (
    "item_id", "paragraph", "question", "options", "new_options", "answer_response", "RT",
    "difficulty", "source", "submission_ind",
)
DATASET_BY_SOURCE = {"onestop": "onestopqa", "race": "race"}


def _int(value: str, *, path: Path, record: str, field: str) -> int:
    try:
        return int(value.strip())
    except (TypeError, ValueError):
        raise ImportFormatError(
            path, f"must be an integer, got {value!r}", record=record, field=field
        ) from None


def _role(index: int, *, path: Path, record: str, field: str) -> str:
    if not 0 <= index < len(MC_ROLES):
        raise ImportFormatError(path, f"{index} is not an option index 0–3", record=record,
                                field=field)
    return MC_ROLES[index]


def parse(path: Path, *, kind: str = KIND, split: str | None = None) -> list[ItemRecord]:
    path = Path(path)
    text = read_text(path)
    records: dict[str, ItemRecord] = {}
    first_row: dict[str, int] = {}
    # The reading of every table door (`table_rows`: a row named by the line it starts on, a
    # quote never closed refused) and its header rule (`header_problems`: a column named twice
    # is refused, since a reader keeps one of its cells; a missing one is named with what
    # resembles it).
    table = table_rows(text, path=path, delimiter="\t")
    header = table[0][1] if table else []
    if problems := header_problems(header, required=REQUIRED_COLUMNS, delimiter="\t"):
        raise ImportFormatError(path, "the header " + "; ".join(problems), field="(header)")
    for row_number, cells in table[1:]:
        # As csv.DictReader gives a row: a missing cell is None, extra cells under None.
        row = dict(zip(header, cells, strict=False))
        row.update({column: None for column in header[len(cells):]})
        if len(cells) > len(header):
            row[None] = cells[len(header):]
        record = _record(path, row, row_number, split)
        previous = records.get(record.external_id)
        if previous is None:
            records[record.external_id] = record
            first_row[record.external_id] = row_number
            continue
        # Another participant's trial of the same item: one item, one more judgment,
        # when the rows agree on the item (else the file contradicts itself).
        label = f"row {row_number} ({record.external_id})"
        if previous.columns() != record.columns():
            differing = [name for name in ItemRecord.COLUMN_FIELDS
                         if previous.columns()[name] != record.columns()[name]]
            raise ImportFormatError(
                path, f"repeats the item of row {first_row[record.external_id]} with "
                      f"different {', '.join(differing)}", record=label, field="item_id")
        previous.judgments.extend(record.judgments)
        # One participant answering one item twice is refused by name.
        validate_record(previous, path=path, index=label)
    return list(records.values())


def _record(path: Path, row: dict, row_number: int, split: str | None) -> ItemRecord:
    item_id = (row.get("item_id") or "").strip()
    label = f"row {row_number} ({item_id})" if item_id else f"row {row_number}"
    if None in row:
        raise ImportFormatError(path, "has more fields than the header", record=label,
                                field="(row)")
    short = [name for name, value in row.items() if value is None]
    if short:  # a truncated row (a cut-off last line): not a row of empty answers
        raise ImportFormatError(
            path, f"has fewer fields than the header (no {', '.join(short)}): a truncated row?",
            record=label, field=short[0])
    options = [option.strip() for option in (row["options"] or "").split("|")]
    if len(options) != 4:
        raise ImportFormatError(path, f"must hold 4 answers separated by |, got {len(options)}",
                                record=label, field="options")
    shown = [
        _role(_int(v, path=path, record=label, field="new_options"), path=path, record=label,
              field="new_options")
        for v in (row["new_options"] or "").split("|")
    ]
    if sorted(shown) != list(MC_ROLES):
        raise ImportFormatError(path, "must be a permutation of 0|1|2|3", record=label,
                                field="new_options")
    choice = _role(_int(row["answer_response"], path=path, record=label, field="answer_response"),
                   path=path, record=label, field="answer_response")
    rt = _int(row["RT"], path=path, record=label, field="RT")
    participant = (row["submission_ind"] or "").strip()
    if not participant:
        raise ImportFormatError(path, "is empty", record=label, field="submission_ind")
    source = (row["source"] or "").strip()
    extra = {"is_correct": choice == "A", "new_options": row["new_options"]}
    if row.get("trial_number"):
        extra["trial_number"] = _int(row["trial_number"], path=path, record=label,
                                     field="trial_number")
    if row.get("startDate"):
        extra["session_start"] = row["startDate"]
    record = ItemRecord(
        external_id=item_id,
        kind=KIND,
        content={
            "paragraph": (row["paragraph"] or "").replace("\\n", "\n").strip(),
            "question": (row["question"] or "").strip(),
            "answers": options,
            "critical_span": None,
            "distractor_span": None,
        },
        dataset=DATASET_BY_SOURCE.get(source.lower(), source.lower()),
        source=source,
        split=split or "",
        text_level=(row["difficulty"] or "").strip(),
        gold={"choice": "A"},
        metadata={"experiment": "in-lab QA"},
        judgments=[
            JudgmentRecord(
                worker=f"inlab-{participant}",
                choice=choice,
                presented_order=shown,
                time_spent_ms=rt,
                extra=extra,
            )
        ],
    )
    if rt < 0:
        raise ImportFormatError(path, "must not be negative", record=label, field="RT")
    return validate_record(record, path=path, index=label)
