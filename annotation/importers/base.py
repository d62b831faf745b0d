"""Records every importer yields, their validation, and the error every importer raises.

Importers are pure parsers: they read a file, build `ItemRecord`s (with their
`JudgmentRecord`s) and validate them with `annotation.domain.item_content`; they never touch the
database. `annotation.services.imports.import_records` writes them.
"""
from __future__ import annotations

import codecs
import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotation.domain.answers import AB_TIE_CHOICES, aspect_names_error, presented_order_error
from annotation.domain.control_characters import (
    control_character_message,
    find_control_character,
    note_problem,
)
from annotation.domain.design import MAX_UNIT_LENGTH, design_unit_for
from annotation.domain.item_content import (
    ITEM_TRIMMED_FIELDS,
    KNOWN_SPLITS,
    ItemContentError,
    group_key_for,
    item_columns_trimmed,
    normalize_answer_systems,
    normalize_split,
    validate_gold,
    validate_item_content,
    validate_item_text,
)
from annotation.domain.json_values import NON_FINITE_MESSAGE, find_non_finite, is_finite_number
from core.json_limits import (
    json_loads_limited,
    refuse_duplicate_keys,
    without_byte_order_mark,
)
from core.vocabulary import AB_CHOICES, MC_ROLES, TaskKind

# Name of the IMPORTED stage that receives judgments when a record names none.
DEFAULT_IMPORT_STAGE = "imported"
# The most `time_spent_ms` a judgment may carry: the largest value every database's positive
# integer column holds (PostgreSQL's integer), about 24.8 days; more is an error in the file,
# not an OverflowError when stored.
MAX_TIME_SPENT_MS = 2**31 - 1


class ImportFormatError(ValueError):
    """A file or record that cannot be imported. The message names file, record and field."""

    def __init__(self, path: str | Path, message: str, *, record: Any = None, field: str = ""):
        self.path = str(path)
        self.record = record
        self.field = field
        where = self.path
        if record is not None:
            where += f": record {record}"
        if field:
            where += f": field {field!r}"
        super().__init__(f"{where}: {message}")


@dataclass
class JudgmentRecord:
    """One worker's answer. `worker` is the worker's external id (provider `import`)."""

    worker: str
    stage: str = DEFAULT_IMPORT_STAGE
    # The kind of stage that collected it where it came from (an export's `stage_kind`): a
    # practice or qualification answer goes into an imported stage of that kind, which the
    # counting rule keeps out of the data (annotation.services.imports.imported_stage_kind).
    stage_kind: str = ""
    score: float | None = None
    choice: str = ""
    choices: list = field(default_factory=list)
    difficult: bool | None = None
    justification: str = ""
    aspects: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    presented_order: list = field(default_factory=list)
    time_spent_ms: int | None = None
    # The time the exporting server measured (an export's `server_time_ms`): stored as it is,
    # so the workers' median time reads the same number in the copy. Not part of the answer:
    # a re-import compares `VALUE_FIELDS` only.
    server_time_ms: int | None = None

    VALUE_FIELDS = (
        "score", "choice", "choices", "difficult", "justification", "aspects", "extra",
        "presented_order", "time_spent_ms",
    )

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.VALUE_FIELDS}


@dataclass
class ItemRecord:
    """One item with its optional judgments, as it will be stored."""

    external_id: str
    kind: str
    content: dict
    dataset: str = ""
    source: str = ""
    split: str = ""
    domain: str = ""
    text_level: str = ""
    group_key: str = ""
    design_unit: str = ""  # the STARC design unit; derived when empty (columns())
    gold: dict | None = None
    is_gold_check: bool = False
    is_practice: bool = False
    excluded: bool = False
    exclusion_reason: str = ""
    metadata: dict = field(default_factory=dict)
    judgments: list[JudgmentRecord] = field(default_factory=list)
    # A researcher's latest decision on the item (an export's `adjudication`: {"score",
    # "choice", "note"}), or None: the item's label in every report, so a copy keeps it.
    adjudication: dict | None = None
    # The external id as the file wrote it (`validate_record` trims `external_id`), for messages.
    given_external_id: str = field(default="", compare=False, repr=False)

    @property
    def label(self) -> str:
        """The record in a message: its external id, quoted as the file wrote it when that
        had spaces around it (" q1 " is not mistaken for the file's "q1")."""
        given = self.given_external_id or self.external_id
        return self.external_id if given == self.external_id else repr(given)

    # Fields that must match when the external id already exists in the project: they define
    # what was judged. Flags (excluded, practice, ...) may be changed by researchers afterwards.
    IDENTITY_FIELDS = (
        "content", "gold", "dataset", "source", "split", "domain", "text_level",
    )
    COLUMN_FIELDS = (
        "dataset", "source", "split", "domain", "text_level", "group_key", "design_unit",
        "content", "gold", "is_gold_check", "is_practice", "excluded", "exclusion_reason",
        "metadata",
    )

    def columns(self) -> dict[str, Any]:
        columns = {name: getattr(self, name) for name in self.COLUMN_FIELDS}
        columns["design_unit"] = self.design_unit or design_unit_for(
            external_id=self.external_id, metadata=self.metadata)
        columns["group_key"] = group_key_for(kind=self.kind, content=self.content,
                                             group_key=self.group_key)
        return columns


class Records(list):
    """What `parse` returns: the records, and `left_out`, one sentence per kind of thing the
    file holds that the format deliberately does not import (how many, and why), so every door
    (the admin's preview, `import_data`) says so instead of showing smaller counts unexplained."""

    def __init__(self, records=(), *, left_out=()):
        super().__init__(records)
        self.left_out = [note for note in left_out if note]


def left_out_note(count: int, what: str) -> str:
    """"3 true/false judgment(s) of ...: ..." when count > 0, else "" (dropped by Records)."""
    return f"{count} {what}" if count else ""


def split_from_path(path: Path, explicit: str | None) -> str:
    """The split given on the command line, else one read from the file name (dev.json → dev)."""
    if explicit is not None:
        return normalize_split(explicit)
    return KNOWN_SPLITS.get(path.stem.lower(), "")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_judgment(kind: str, judgment: JudgmentRecord) -> None:
    """Raise ItemContentError (field prefixed with `judgments`) when a value does not fit."""
    if not isinstance(judgment.worker, str) or not judgment.worker.strip():
        raise ItemContentError("worker", "must be a non-empty string")
    if len(judgment.worker) > 255:
        raise ItemContentError("worker", "must be at most 255 characters")
    if not isinstance(judgment.stage, str) or not judgment.stage.strip():
        raise ItemContentError("stage", "must be a non-empty string")
    if len(judgment.stage) > 100:
        raise ItemContentError("stage", "must be at most 100 characters")
    score = judgment.score
    if score is not None and (not isinstance(score, (int, float)) or isinstance(score, bool)):
        raise ItemContentError("score", f"must be a number, got {type(score).__name__}")
    if score is not None and not is_finite_number(score):
        raise ItemContentError("score", NON_FINITE_MESSAGE)
    if not isinstance(judgment.choice, str):
        raise ItemContentError("choice", f"must be a string, got {type(judgment.choice).__name__}")
    if len(judgment.choice) > 10:
        raise ItemContentError("choice", "must be at most 10 characters")
    if kind == TaskKind.LIKERT:
        # The top of the scale is the project's (scale_labels: a 7-point project collects
        # 6s and 7s); `import_records` checks it against the project the file goes into.
        if score is None or score < 1:
            raise ItemContentError("score", "must be a number from 1 to the project's top "
                                            "score (5 by default)")
    elif kind == TaskKind.AB:
        # A tie is what a stage offering ties stores, so an export of one imports back.
        if judgment.choice not in (*AB_CHOICES, *AB_TIE_CHOICES):
            raise ItemContentError("choice", f"must be A or B (or a tie: "
                                             f"{', '.join(AB_TIE_CHOICES)})")
    elif kind == TaskKind.MC:
        if judgment.choice not in ("", *MC_ROLES):
            raise ItemContentError("choice", "must be one of A, B, C, D (or empty)")
        if not isinstance(judgment.choices, list) or not all(
            isinstance(c, str) and c in MC_ROLES for c in judgment.choices
        ):
            raise ItemContentError("choices", "must be a list of role letters A–D")
    for name in ("choices", "aspects", "presented_order"):
        if not isinstance(getattr(judgment, name), list):
            raise ItemContentError(name, "must be a list")
    # The rules of the task page's answers: every report reads these as the page stores them.
    if aspect_names_error(judgment.aspects) is not None:
        raise ItemContentError("aspects", "must be a list of aspect names (non-blank strings)")
    if (wrong := presented_order_error(kind, judgment.presented_order)) is not None:
        raise ItemContentError("presented_order", wrong)
    if judgment.difficult is not None and not isinstance(judgment.difficult, bool):
        raise ItemContentError("difficult", "must be true, false or null")
    if not isinstance(judgment.justification, str):
        raise ItemContentError("justification", "must be a string")
    if not isinstance(judgment.extra, dict):
        raise ItemContentError("extra", "must be an object")
    for name in ("time_spent_ms", "server_time_ms"):
        spent = getattr(judgment, name)
        if spent is not None and (not _is_int(spent) or spent < 0):
            raise ItemContentError(name, "must be a non-negative integer or null")
        if spent is not None and spent > MAX_TIME_SPENT_MS:
            raise ItemContentError(name, f"must be at most {MAX_TIME_SPENT_MS} "
                                         f"(about 24.8 days), got {spent}")


ADJUDICATION_FIELDS = ("score", "choice", "note")
# Written by the export beside the decision, for people reading the file; ignored on import.
INFORMATIONAL_ADJUDICATION_FIELDS = ("decided_by", "created_at")


def _check_adjudication(kind: str, adjudication: Any) -> None:
    """Raise ItemContentError (field prefixed with `adjudication`) when the decision does not
    fit the kind: a Likert score from 1 (the project's top is checked where it is known,
    `import_records`), an A/B side or a STARC role, and a text note."""
    if not isinstance(adjudication, dict):
        raise ItemContentError("adjudication", "must be an object or null")
    unknown = set(adjudication) - set(ADJUDICATION_FIELDS) - set(INFORMATIONAL_ADJUDICATION_FIELDS)
    if unknown:
        raise ItemContentError("adjudication", f"unknown field(s) {', '.join(sorted(unknown))}")
    score, choice = adjudication.get("score"), adjudication.get("choice") or ""
    note = adjudication.get("note") or ""
    if not isinstance(note, str):
        raise ItemContentError("adjudication.note", "must be a string")
    if (problem := note_problem(note)) is not None:
        raise ItemContentError("adjudication.note", problem)
    if kind == TaskKind.LIKERT:
        # Whole points, as `adjudication_record` stores a researcher's decision: 2.5 is no
        # point of the scale.
        if (not isinstance(score, (int, float)) or isinstance(score, bool)
                or not is_finite_number(score) or score < 1 or score != int(score) or choice):
            raise ItemContentError("adjudication.score", "must be a whole score from 1 to the "
                                                         "project's top score, and no choice")
        return
    allowed = AB_CHOICES if kind == TaskKind.AB else MC_ROLES
    if score is not None or choice not in allowed:
        raise ItemContentError("adjudication.choice", f"must be one of {', '.join(allowed)}, "
                                                      "and no score")


# Column widths of annotation.models.Item: longer values are an import error, not a crash.
_STRING_COLUMNS = {
    "dataset": 100, "source": 100, "split": 20, "domain": 100, "text_level": 20,
    "group_key": 64, "design_unit": MAX_UNIT_LENGTH, "exclusion_reason": 200,
}


def validate_record(record: ItemRecord, *, path: str | Path, index: Any) -> ItemRecord:
    """Check one record; raise ImportFormatError naming file, record and field."""
    label = index
    try:
        if not isinstance(record.external_id, str) or not record.external_id.strip():
            raise ItemContentError("external_id", "must be a non-empty string")
        record.given_external_id = record.given_external_id or record.external_id
        # Names and labels without the spaces around them, as the API and the admin store them.
        for name, value in item_columns_trimmed(
                {name: getattr(record, name) for name in ITEM_TRIMMED_FIELDS}).items():
            setattr(record, name, value)
        if len(record.external_id) > 255:
            raise ItemContentError("external_id", "must be at most 255 characters")
        for name, width in _STRING_COLUMNS.items():
            if not isinstance(getattr(record, name), str):
                raise ItemContentError(name, "must be a string")
            if len(getattr(record, name)) > width:
                raise ItemContentError(name, f"must be at most {width} characters")
        for name in ("is_gold_check", "is_practice", "excluded"):
            if not isinstance(getattr(record, name), bool):
                raise ItemContentError(name, "must be true or false")
        if not isinstance(record.metadata, dict):
            raise ItemContentError("metadata", "must be an object")
        # Each answer's system in its one spelling, as every door stores it.
        record.content = normalize_answer_systems(record.kind, record.content)
        try:
            validate_item_content(record.kind, record.content)
        except ItemContentError as exc:
            raise ItemContentError(f"content.{exc.field}", str(exc).split(": ", 1)[1]) from None
        validate_gold(record.kind, record.gold)
        if record.adjudication is not None:
            _check_adjudication(record.kind, record.adjudication)
        _refuse_control_characters(record)
        seen: set[tuple[str, str]] = set()
        for position, judgment in enumerate(record.judgments):
            try:
                _check_judgment(record.kind, judgment)
            except ItemContentError as exc:
                message = str(exc).split(": ", 1)[1]
                raise ItemContentError(f"judgments[{position}].{exc.field}", message) from None
            # Who and in which stage without the spaces around them, as the stage API and
            # form store a stage's name: "trial " is the platform's stage "trial".
            judgment.worker, judgment.stage = judgment.worker.strip(), judgment.stage.strip()
            key = (judgment.worker, judgment.stage)
            if key in seen:
                raise ItemContentError(
                    f"judgments[{position}].worker",
                    f"worker {judgment.worker!r} judges this item twice in stage {judgment.stage!r}",
                )
            seen.add(key)
    except ItemContentError as exc:
        raise ImportFormatError(
            path, str(exc).split(": ", 1)[1], record=label, field=exc.field
        ) from None
    return record


def _refuse_control_characters(record: ItemRecord) -> None:
    """The item rule (`validate_item_text`), and the same for the judgments' text: NUL cannot
    be stored by PostgreSQL (COPY failed with a DataError), and no other control character but
    tab, line feed and carriage return belongs in text; refused by field name on every
    database."""
    validate_item_text({"content": record.content, "gold": record.gold,
                        "metadata": record.metadata, "external_id": record.external_id,
                        **{name: getattr(record, name) for name in _STRING_COLUMNS}})
    for position, judgment in enumerate(record.judgments):
        where = f"judgments[{position}]"
        if (hit := find_control_character(dict(vars(judgment)), where)) is not None:
            raise ItemContentError(hit[0], control_character_message(hit[1]))
        # No JSON column stores NaN or Infinity (`extra`, however the value arrived).
        if (path := find_non_finite(dict(vars(judgment)), where)) is not None:
            raise ItemContentError(path, NON_FINITE_MESSAGE)


FOLDER_FILES_NAMED = 5  # files of a folder a refusal names, when a file was expected


def require_file(path: Path) -> Path:
    if not path.exists():
        raise ImportFormatError(path, "file not found")
    if path.is_dir():
        # A folder where one file is read (only lfqa-experts reads a folder): name what is in
        # it, so the researcher picks the file rather than guessing.
        names = sorted(child.name for child in path.iterdir()
                       if child.is_file() and not child.name.startswith("."))
        shown = ", ".join(names[:FOLDER_FILES_NAMED])
        more = f" and {len(names) - FOLDER_FILES_NAMED} more" if len(names) > FOLDER_FILES_NAMED else ""
        held = f"it holds {shown}{more}" if names else "it holds no files"
        raise ImportFormatError(
            path, f"is a folder, not a file: this format reads one file; {held}")
    if not path.is_file():
        raise ImportFormatError(path, "is not a file")
    return path


def json_parse(text: str, *, path: Path, record: Any = None, field: str = "") -> Any:
    """`text` parsed by the rule every door reads JSON with (`core.json_limits`: nesting
    depth, and only JSON's own values), or ImportFormatError naming the file (and the record
    and field given) and what is wrong: a malformed document's line and column, a nesting
    too deep for the parser (never a RecursionError), a key given twice in one object (never
    an entry silently dropped)."""
    import json

    try:
        return json_loads_limited(text, object_pairs_hook=refuse_duplicate_keys)
    except json.JSONDecodeError as exc:
        at = (f"column {exc.colno}" if record is not None
              else f"line {exc.lineno}, column {exc.colno}")
        raise ImportFormatError(path, f"malformed JSON at {at}: {exc.msg}", record=record,
                                field=field) from None
    except ValueError as exc:  # JsonTooDeep, NaN or Infinity, a duplicate key
        raise ImportFormatError(path, str(exc), record=record, field=field) from None


def json_lines_not_array(text: str, *, path: str | Path, what: str, instead: str = "") -> None:
    """ImportFormatError when a JSON Lines `text` is one JSON document instead, saying so: one
    JSON array (what `json.dump(rows, f, indent=2)` writes) or one object over several lines (a
    pretty-printed object, a MOCHA or OneStopQA file). Read line by line, its first line "["
    was "malformed JSON" (item files) or ten "not JSON" errors (verdicts) for a file that is
    valid JSON, and an object's "{" a hundred "Extra data" errors. `what` names the rows,
    `instead` another way to send them."""
    start = text.lstrip()[:1]
    # Lines as JSON Lines has them: "\n" only (`splitlines` also breaks at U+2028 and other
    # separators a JSON string may hold, so a one-line object read as pretty-printed).
    lines = sum(1 for line in text.split("\n") if line.strip())
    if start != "[" and not (start == "{" and lines > 1):
        return
    try:
        value = json_loads_limited(text, object_pairs_hook=refuse_duplicate_keys)
    except ValueError:  # not one document: its lines are read, and their problems named
        return
    if isinstance(value, list):
        raise ImportFormatError(
            path, f"holds one JSON array of {len(value)} value(s), not one JSON object per "
                  f"line: write the {what} as JSON Lines (e.g. `jq -c '.[]'`)"
                  + (f", {instead}" if instead else ""))
    if isinstance(value, dict):
        raise ImportFormatError(
            path, f"holds one JSON object written over {lines} lines (keys: "
                  f"{', '.join(map(str, list(value)[:3]))}{', ...' if len(value) > 3 else ''}), "
                  f"not one JSON object per line: write the {what} as JSON Lines, one object "
                  "on each line" + (f", {instead}" if instead else ""))


def read_text(path: Path) -> str:
    """The file's text, read the one way every importer reads files (`decode_text`)."""
    require_file(path)
    return decode_text(path.read_bytes(), path=path)


def decode_text(data: bytes, *, path: str | Path) -> str:
    """A file's bytes as text, by the one rule of every file door (the importers, and judge
    verdicts from the command, the API and the judges page): UTF-8, with a leading
    byte-order mark dropped (Notepad and Excel write one; it is no part of the data), or UTF-16
    when the file begins with UTF-16's byte-order mark. A byte that is not UTF-8 is an
    ImportFormatError naming `path`, the byte's line and its position, never a guess at
    another encoding."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        # Excel's "Unicode text" and Notepad's "Unicode" are UTF-16 with this mark: the mark
        # says which encoding it is, so this is no guess.
        try:
            return without_byte_order_mark(data.decode("utf-16"))
        except UnicodeDecodeError as exc:
            raise ImportFormatError(
                path, f"not UTF-16 text although it begins with UTF-16's byte-order mark: byte "
                      f"{exc.start + 1} ({exc.reason}); save the file as UTF-8") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        binary = binary_file_kind(data)
        if binary:
            # "save the file as UTF-8 (it may be Latin-1 …)" sent the researcher who picked
            # an image or a workbook by mistake to re-encode it.
            raise ImportFormatError(
                path, f"not a text file: it looks like {binary}; choose the data file itself "
                      "(JSON, JSON Lines or TSV text; save a spreadsheet as UTF-8 CSV/TSV)"
            ) from None
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        raise ImportFormatError(
            path, f"not UTF-8 text: line {line}, byte {exc.start - line_start + 1} of the line "
                  f"is 0x{data[exc.start]:02X} ({exc.reason}); save the file as UTF-8 (it may "
                  "be Latin-1 or Windows-1252)") from None
    return without_byte_order_mark(text)


_BINARY_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"), (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive (an .xlsx or .docx file is one)"),
    (b"\x1f\x8b", "a gzip archive (unpack it first)"),
    (b"\xd0\xcf\x11\xe0", "an old Office file (.xls or .doc)"),
)


def binary_file_kind(data: bytes) -> str:
    """What a file that is not text looks like ("a PNG image"), from its first bytes, or ""
    when it may be text in another encoding."""
    for signature, kind in _BINARY_SIGNATURES:
        if data.startswith(signature):
            return kind
    return "a binary file, not text" if b"\x00" in data[:8192] else ""


# The longest cell a table may hold: a whole upload (csv's own default, 131,072 characters, made
# a long reasoning an uncaught csv.Error at every verdict door).
TABLE_CELL_LIMIT = 2**31 - 1


def table_rows(text: str, *, path: str | Path, delimiter: str = ",",
               ) -> list[tuple[int, list[str]]]:
    """(line, cells) of every row of a CSV or TSV text, the header first, by the one reading of
    every table door (the in-lab TSV, judge verdict CSVs): `line` is where the row starts in
    the file (a quoted cell may hold line breaks), blank lines are skipped, a cell may be as
    long as the file. A quoted cell that is never closed, or text after a closing quote, is an
    ImportFormatError naming the line where the row starts: csv's lenient reading took the
    rest of the file into that one cell, and the rows after it vanished without a word."""
    csv.field_size_limit(TABLE_CELL_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    rows = []
    while True:
        line = reader.line_num + 1
        try:
            cells = next(reader, None)
        except csv.Error as exc:
            raise ImportFormatError(
                path, f"malformed {'TSV' if delimiter == chr(9) else 'CSV'}: the row starting on "
                      f"line {line} {_table_error(str(exc))}") from None
        if cells is None:
            return rows
        if cells:
            rows.append((line, cells))


def _table_error(message: str) -> str:
    """csv's error, said as what the researcher can look for in the row."""
    if message == "unexpected end of data":
        return ("opens a quoted cell that is never closed (a stray '\"'?), so nothing after it "
                "could be read")
    if "expected after" in message:
        return ("has text after the quote that closes a quoted cell (a stray '\"' at the start "
                "of a cell? a quote inside a quoted cell is written twice: \"\")")
    return f"cannot be read ({message})"


def header_problems(names, *, required=(), known=None, delimiter: str = ",") -> list[str]:
    """What is wrong with a table's header row, by the one rule of every CSV/TSV door (the
    in-lab TSV, judge verdict CSVs), each as a phrase that follows "the header ...": a column
    named twice (a reader keeps one of its cells and drops the other without a word), a
    `required` column missing and, when `known` is given, a column outside it. A column that
    is a wanted one but for case or surrounding spaces (`Item_ID`, ` verdict`) is named beside
    the one it resembles: in a spreadsheet the two look alike, and "missing item_id" alone
    sends the researcher to look at a header that seems to have it. A header whose cells are
    separated by another character than `delimiter` (Excel saves "CSV" with ';' where the
    decimal mark is a comma) says so. Empty names (a trailing delimiter) are no columns."""
    names = [name for name in names or () if name]
    problems = []
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        problems.append(f"names {', '.join(map(repr, twice))} twice (a reader would keep one "
                        "of its cells and drop the other)")
    wanted = {*required, *(known or ())}
    resembles = {name: column for name in names if name not in wanted
                 for column in wanted if name.strip().lower() == column.lower()}

    def hint(given: list[str]) -> str:
        near = [f"{name!r} for {column!r}" for entry in given
                for name, column in resembles.items() if entry in (name, column)]
        return (f" (it has {', '.join(near)}: column names are matched exactly, in case and "
                "spaces)") if near else ""

    if missing := [column for column in required if column not in names]:
        other = next((mark for mark in (";", "\t", ",", "|") if mark != delimiter and any(
            column in name.split(mark) for name in names for column in missing)), None)
        separated = (f" (its cells are separated by {other!r}, not {delimiter!r}: save the file "
                     f"with {delimiter!r} between cells)") if other else ""
        problems.append(f"has no column(s) {', '.join(missing)}{hint(missing)}{separated}")
    if known is not None and (unknown := sorted(set(names) - set(known))):
        problems.append(f"has unknown column(s) {', '.join(map(repr, unknown))}{hint(unknown)} "
                        f"(known: {', '.join(known)})")
    return problems


def load_json(path: Path) -> Any:
    """The parsed JSON document (`read_text`, `json_parse`), or ImportFormatError naming the
    file and what is wrong (a malformed document's line and column)."""
    return json_parse(read_text(path), path=path)


def expect(value: Any, types: type | tuple[type, ...], *, path: Path, record: Any, field: str,
           what: str) -> Any:
    """`value` when it has one of `types` (bool never counts as a number), else an error."""
    ok = isinstance(value, types)
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        ok = False
    if not ok:
        raise ImportFormatError(
            path, f"must be {what}, got {type(value).__name__}", record=record, field=field
        )
    return value
