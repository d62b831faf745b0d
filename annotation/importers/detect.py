"""Which known format a data file is, told from its shape alone.

A file given to the wrong importer (an LFQA expert file or an EVOUNA file as `mocha`, a
OneStopQA file as `jsonl`, ...) was refused with what that importer missed ("field '(top
level)': must be an object {dataset: {id: entry}}, got list"): true, but it did not say what
to do. `format_mismatch` names the format the file clearly has, for every import door (the
`import_data` command and the admin's import page, both through
`annotation.services.import_files.import_file`). It is asked only once a file is refused, so
it costs a valid import nothing.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import ImportFormatError, read_text

TSV_RESPONSE_COLUMNS = {"item_id", "answer_response", "new_options"}
LFQA_FIELDS = {"question_text", "answer1", "answer2", "BetterAnswer"}
EVOUNA_FIELDS = {"question", "golden_answer"}
MOCHA_FIELDS = {"reference", "candidate", "score"}
MINIMAL_PAIR_FIELDS = {"candidate1", "candidate2", "score1", "score2"}
JSONL_FIELDS = {"external_id", "content"}


@dataclass(frozen=True)
class FormatMismatch:
    """A refused file that clearly is another known format: `detected`, described by `what`."""

    chosen: str
    detected: str
    what: str

    def reason(self, path: str | Path) -> str:
        """What is wrong, as the start of a sentence the door ends with what to do."""
        return f"{path} does not fit the format {self.chosen}: it is {self.what}"


def _first_entry(document: Any) -> Any:
    """The first entry of a MOCHA-layout document {dataset: {id: entry}}, or None."""
    if not isinstance(document, dict) or not document:
        return None
    entries = next(iter(document.values()))
    if not isinstance(entries, dict) or not entries:
        return None
    return next(iter(entries.values()))


def _has(value: Any, fields: set[str]) -> bool:
    return isinstance(value, dict) and fields <= value.keys()


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else None


# (format, what its files are, is this parsed JSON document one)
JSON_SHAPES: tuple[tuple[str, str, Callable[[Any], bool]], ...] = (
    ("mocha", "a MOCHA file ({dataset: {id: {context, question, reference, candidate, "
              "score}}})", lambda doc: _has(_first_entry(doc), MOCHA_FIELDS)),
    ("mocha-minimal-pairs", "a MOCHA minimal-pairs file ({dataset: {id: {candidate1, "
                            "candidate2, score1, score2}}})",
     lambda doc: _has(_first_entry(doc), MINIMAL_PAIR_FIELDS)),
    ("onestopqa", "the OneStopQA dataset ({\"data\": [articles with paragraphs]})",
     lambda doc: isinstance(doc, dict) and _has(_first(doc.get("data")), {"paragraphs"})),
    ("lfqa-experts", "a long-form QA expert comparison file (question_text, answer1, answer2, "
                     "BetterAnswer)", lambda doc: _has(_first(doc), LFQA_FIELDS)),
    ("evouna", "an EVOUNA judgment file (question, golden_answer, answer_ and judge_ of each "
               "system)", lambda doc: _has(_first(doc), EVOUNA_FIELDS)
     and any(key.startswith("judge_") for key in _first(doc))),
)
RESPONSES_WHAT = ("OneStopQA in-lab responses (a TSV with item_id, answer_response, "
                  "new_options)")
JSONL_WHAT = "JSON Lines items (one object per line with external_id and content)"
# The first cells of the header of `export_data --format csv` (and the admin's CSV export).
CSV_EXPORT_HEADER = ("project", "kind", "external_id")
# Why a CSV export is refused by every format, and what to import instead.
CSV_EXPORT_REFUSAL = ("is a CSV export (header project, kind, external_id, ...): CSV exports "
                      "are for spreadsheets and do not import back (a cell beginning with = + - "
                      "@ carries a protective '); import the project's JSON Lines export "
                      "instead (export_data SLUG, or the admin's JSON Lines export action)")


def is_csv_export_header(first_line: str) -> bool:
    """Whether a file's first non-blank line is the header of a CSV export."""
    cells = [cell.strip().strip('"') for cell in first_line.split(",")]
    return tuple(cells[:len(CSV_EXPORT_HEADER)]) == CSV_EXPORT_HEADER


def is_csv_export(path: str | Path) -> bool:
    """Whether `path` is a CSV export (`is_csv_export_header`): every format refuses one with
    `CSV_EXPORT_REFUSAL` (a JSON format read its header as "malformed JSON at line 1")."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        text = read_text(path)
    except (ImportFormatError, OSError, UnicodeDecodeError):
        return False
    return is_csv_export_header(next((line for line in text.split("\n") if line.strip()), ""))
LFQA_FOLDER_WHAT = "a folder of long-form QA expert comparison files"


def detected_format(path: str | Path) -> tuple[str, str] | None:
    """(format, what its files are) of the known format `path` clearly has, or None when it
    fits none (a file that cannot be read as text fits none)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        found = detected_format(files[0]) if files else None
        return ("lfqa-experts", LFQA_FOLDER_WHAT) if found and found[0] == "lfqa-experts" \
            else None
    try:
        text = read_text(path)
    except (ImportFormatError, OSError, UnicodeDecodeError):
        return None
    first_line = next((line for line in text.split("\n") if line.strip()), "")
    if TSV_RESPONSE_COLUMNS <= set(first_line.rstrip("\r").split("\t")):
        return "onestopqa-responses", RESPONSES_WHAT
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        document = None
    for name, what, fits in JSON_SHAPES:
        if fits(document):
            return name, what
    try:
        first = json.loads(first_line)
    except (ValueError, RecursionError):
        return None
    return ("jsonl", JSONL_WHAT) if _has(first, JSONL_FIELDS) else None


def format_mismatch(path: str | Path, chosen: str) -> FormatMismatch | None:
    """The other known format a file refused as `chosen` clearly has, or None (it has none,
    or it is `chosen` itself and the refusal is about its content)."""
    found = detected_format(path)
    if found is None or found[0] == chosen:
        return None
    return FormatMismatch(chosen=chosen, detected=found[0], what=found[1])
