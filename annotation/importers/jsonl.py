"""The canonical JSON Lines format: one item per line, with optional judgments, for every kind.

    {"external_id": "q17-c2", "dataset": "narrativeqa", "split": "dev",
     "content": {...kind-specific...}, "gold": {"score": 4.0},
     "judgments": [{"worker": "w1", "score": 4}, {"worker": "w2", "score": 5}]}

A line may carry a single `"judgment": {...}` (or null) instead of `"judgments"`: that is the
layout `export_data --format jsonl` writes (one line per judgment), so an export imports back.
Lines that repeat an external id must repeat the same item fields; their judgments are merged.
See docs/DATA_FORMATS.md for every field.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from annotation.domain.item_content import normalize_split

from .base import (
    DEFAULT_IMPORT_STAGE,
    ImportFormatError,
    ItemRecord,
    JudgmentRecord,
    Records,
    json_lines_not_array,
    json_parse,
    left_out_note,
    read_text,
    validate_record,
)
from .detect import CSV_EXPORT_REFUSAL, is_csv_export_header

KIND = None  # the project's kind; a line may repeat it in "kind"

ITEM_FIELDS = {
    "external_id", "dataset", "source", "split", "domain", "text_level", "group_key",
    "design_unit", "content", "gold", "is_gold_check", "is_practice", "excluded",
    "exclusion_reason", "metadata", "adjudication",
}
# Written by export_data for people reading the file; ignored on import.
INFORMATIONAL_ITEM_FIELDS = {"kind", "project"}
# `stage_kind` is read too: practice and qualification answers stay out of the data on import;
# and `server_time_ms`, the time the exporting server measured, which the workers' median time
# reads.
JUDGMENT_FIELDS = {"worker", "stage", "stage_kind", "server_time_ms",
                   *JudgmentRecord.VALUE_FIELDS}
INFORMATIONAL_JUDGMENT_FIELDS = {"worker_provider", "created_at",
                                 "assignment_id", "hit_id", "provider_assignment_id",
                                 "assignment_status", "counts"}

# Review outcomes of work that does not count: `NOT_COUNTED_ASSIGNMENT_STATUSES` of
# annotation/selectors.py, spelled here as text to keep the parser pure (a test holds them equal).
NOT_ACCEPTED_STATUSES = frozenset({"rejected", "returned", "flagged"})

_DEFAULTS: dict[str, Any] = {
    "dataset": "", "source": "", "split": "", "domain": "", "text_level": "", "group_key": "",
    "design_unit": "", "gold": None, "is_gold_check": False, "is_practice": False, "excluded": False,
    "exclusion_reason": "", "metadata": {}, "adjudication": None,
}


def _lines(text: str):
    """(line number, line) of a JSON Lines text as a text file gives them (\n, \r\n or \r),
    never split at U+2028, U+2029 or U+0085 inside a string (the export writes them as they
    are; str.splitlines would cut a line there): one reading for the records and the kind."""
    return enumerate(io.StringIO(text, newline=None), start=1)


def declared_kind(path: Path) -> str | None:
    """The kind the file's first record states in its informational `kind` field (the export
    writes its project's kind on every line), or None when it states none or the first line
    cannot be read (parsing the file names that problem): the kind of a project created from
    the file when none is given, so an export imports back into a new project as it is."""
    try:
        text = read_text(path)
    except (ImportFormatError, OSError):
        return None
    first = next((line for _, line in _lines(text) if line.strip()), "")
    try:
        raw = json_parse(first, path=path)
    except ImportFormatError:
        return None
    kind = raw.get("kind") if isinstance(raw, dict) else None
    return kind if isinstance(kind, str) and kind else None


def _judgment(raw: Any, *, path: Path, record: Any, field: str) -> JudgmentRecord:
    if not isinstance(raw, dict):
        raise ImportFormatError(path, "must be an object", record=record, field=field)
    unknown = set(raw) - JUDGMENT_FIELDS - INFORMATIONAL_JUDGMENT_FIELDS
    if unknown:
        raise ImportFormatError(
            path, f"unknown field(s) {', '.join(sorted(unknown))}", record=record, field=field
        )
    if "worker" not in raw:
        raise ImportFormatError(path, "is missing", record=record, field=f"{field}.worker")
    values = {name: raw[name] for name in JUDGMENT_FIELDS if name in raw}
    for name in ("choices", "aspects", "presented_order"):
        if values.get(name) is None:
            values.pop(name, None)
    if values.get("extra") is None:
        values.pop("extra", None)
    for name in ("choice", "justification", "stage_kind"):
        if values.get(name) is None:
            values[name] = ""
    if not isinstance(values["stage_kind"], str):
        raise ImportFormatError(path, "must be a string (the kind of the stage it came from)",
                                record=record, field=f"{field}.stage_kind")
    values.setdefault("stage", DEFAULT_IMPORT_STAGE)
    return JudgmentRecord(**values)


def parse_line(raw: Any, *, kind: str, path: Path, line: int, split: str | None) -> ItemRecord:
    record_label = f"line {line}"
    if not isinstance(raw, dict):
        raise ImportFormatError(path, "must be a JSON object", record=record_label, field="line")
    external_id = raw.get("external_id")
    if isinstance(external_id, str) and external_id:
        record_label = f"line {line} ({external_id})"
    unknown = set(raw) - ITEM_FIELDS - INFORMATIONAL_ITEM_FIELDS - {"judgments", "judgment"}
    if unknown:
        raise ImportFormatError(
            path, f"unknown field(s) {', '.join(sorted(unknown))}", record=record_label,
            field=sorted(unknown)[0],
        )
    for required in ("external_id", "content"):
        if required not in raw:
            raise ImportFormatError(path, "is missing", record=record_label, field=required)
    if "kind" in raw and raw["kind"] != kind:
        raise ImportFormatError(
            path, f"is {raw['kind']!r} but the project's kind is {kind!r}",
            record=record_label, field="kind",
        )
    if "judgments" in raw and "judgment" in raw:
        raise ImportFormatError(
            path, "give either judgments (a list) or judgment (one), not both",
            record=record_label, field="judgment",
        )
    columns = {name: raw.get(name, default) for name, default in _DEFAULTS.items()}
    for name in ("dataset", "source", "split", "domain", "text_level", "group_key",
                 "design_unit", "exclusion_reason"):
        if columns[name] is None:
            columns[name] = ""
    if columns["metadata"] is None:
        columns["metadata"] = {}
    if split is not None and not columns["split"]:
        columns["split"] = split
    if isinstance(columns["split"], str):  # one spelling, as --split and file names
        columns["split"] = normalize_split(columns["split"])
    raw_judgments = raw.get("judgments", [])
    if "judgment" in raw:
        raw_judgments = [] if raw["judgment"] is None else [raw["judgment"]]
        field_name = "judgment"
    else:
        field_name = "judgments"
    if not isinstance(raw_judgments, list):
        raise ImportFormatError(path, "must be a list", record=record_label, field="judgments")
    judgments = [
        _judgment(
            entry, path=path, record=record_label,
            field=field_name if field_name == "judgment" else f"judgments[{position}]",
        )
        for position, entry in enumerate(raw_judgments)
        # An audit export (`export_data --include-rejected`) carries work the study did not
        # accept: it is never imported as data.
        if not _not_accepted(entry)
    ]
    record = ItemRecord(
        external_id=external_id, kind=kind, content=raw["content"], judgments=judgments,
        **columns,
    )
    return validate_record(record, path=path, index=record_label)


def _not_accepted(entry: Any) -> bool:
    """Work the exporting study did not count: rejected, returned or flagged, or marked
    `counts: false` (an audit export's blocked workers' and unverified work)."""
    return isinstance(entry, dict) and (entry.get("assignment_status") in NOT_ACCEPTED_STATUSES
                                        or entry.get("counts") is False)


def _check_providers(providers: dict[str, tuple[str, int]], entries: list, *, path: Path,
                     line: int) -> None:
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("worker_provider") or _not_accepted(entry):
            continue
        worker, provider = entry.get("worker"), entry["worker_provider"]
        first = providers.setdefault(worker, (provider, line))
        if first[0] != provider:
            raise ImportFormatError(
                path, f"worker {worker!r} is a {provider} worker here and a {first[0]} worker on "
                      f"line {first[1]}: two people with one id, whom the import would merge "
                      "into one; give one of them another id",
                record=f"line {line}", field="worker_provider")


def _not_a_csv_export(text: str, *, path: Path) -> None:
    """ImportFormatError when `text` is a CSV export, saying so: read as JSON Lines its header
    was "malformed JSON at column 1". A CSV export is written for spreadsheets (a cell a
    spreadsheet would run as a formula gets a leading `'`, objects are JSON strings) and is not
    an import format; the JSON Lines export of the same project is, verbatim. The other formats
    refuse one in the same words (`annotation.importers.detect.is_csv_export`)."""
    first = next((line for _, line in _lines(text) if line.strip()), "")
    if is_csv_export_header(first):
        raise ImportFormatError(path, CSV_EXPORT_REFUSAL, record="line 1")


def parse(path: Path, *, kind: str, split: str | None = None) -> list[ItemRecord]:
    path = Path(path)
    records: dict[str, ItemRecord] = {}
    merged: dict[str, int] = {}
    not_accepted = 0
    # worker id → (provider, line) as the export names it: two providers' workers with one id
    # are two people, whom the import (provider `import`, keyed by id) would make one.
    providers: dict[str, tuple[str, int]] = {}
    text = read_text(path)
    _not_a_csv_export(text, path=path)
    json_lines_not_array(text, path=path, what="items",
                         instead="or import a dataset file by its own format (mocha, onestopqa, "
                                 "evouna, ...)")
    for line_number, line in _lines(text):
        if not line.strip():
            continue
        raw = json_parse(line, path=path, record=f"line {line_number}", field="line")
        record = parse_line(raw, kind=kind, path=path, line=line_number, split=split)
        entries = [raw["judgment"]] if "judgment" in raw else raw.get("judgments", [])
        not_accepted += sum(1 for entry in entries if _not_accepted(entry))
        _check_providers(providers, entries, path=path, line=line_number)
        previous = records.get(record.external_id)
        if previous is None:
            records[record.external_id] = record
            continue
        if (previous.columns() != record.columns()
                or previous.adjudication != record.adjudication):
            raise ImportFormatError(
                path, "repeats an external id with different item fields",
                record=f"line {line_number} ({record.external_id})", field="external_id",
            )
        previous.judgments.extend(record.judgments)
        merged[record.external_id] = line_number
    for external_id, line_number in merged.items():
        # Merged lines may give one worker two judgments of the item in one stage.
        validate_record(records[external_id], path=path, index=f"line {line_number}")
    return Records(records.values(), left_out=[left_out_note(
        not_accepted, "judgment(s) of rejected, returned or flagged work (assignment_status) "
                      "or that the study did not count (counts: false): an audit export's "
                      "unaccepted work is never imported as data")])
