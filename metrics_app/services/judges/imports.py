"""Verdicts imported from a file: JSONL (one object per line) or CSV (a header row), each row
`item_id` (the item's external id in the project), and at least one of `verdict`, `score`,
`probability`; optional `reasoning`, `order` (A/B: AB or BA). The judge's name and version
are given with the file (or in columns `judge` / `judge_version`, which must then agree on
every row).

Any other column (a misspelt `probabilty`), a CSV column named twice, or a row with more cells
than the header is refused.

Verdicts: correct/incorrect (also yes/no, true/false, 1/0) for Likert items, A/B for A/B
items, A–D for multiple choice. Scores are numbers (Likert: 1–5), probabilities 0–1.

Everything is checked before anything is stored: unknown item ids, the same item twice (A/B:
in the same order, a missing order counting as AB), values out of range, a version that
already holds other verdicts on this project. Every problem is reported (up to 20, with line
numbers) and nothing is stored. The same file imported again as the same version stores
nothing and is no error (`unchanged` counts its rows)."""
from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path

from django.db import transaction

from annotation.domain.control_characters import (
    control_character_message,
    find_control_character,
)
from annotation.importers.base import (
    ImportFormatError,
    decode_text,
    header_problems,
    json_lines_not_array,
    require_file,
    table_rows,
)
from annotation.models import Project, TaskKind
from annotation.selectors import rows_stored_untrimmed
from core.json_limits import json_loads_limited, refuse_duplicate_keys
from core.leases import scope_lock
from core.uploads import upload_size_error

from ...domain.judge_prompts import (
    TASK_VERDICTS,
    JudgeConfigError,
    task_score_problem,
    task_verdict,
)
from ...models import JudgeKind, JudgeVerdict
from .versions import judge_label_error, judge_version_create

MAX_ERRORS = 20
# Where the rows came from, for an upload that is too large: the command takes any size.
LARGER_FILES = "manage.py import_verdicts"


class VerdictImportError(ValueError):
    def __init__(self, errors: list[str]):
        shown = errors[:MAX_ERRORS]
        more = f"\n... and {len(errors) - MAX_ERRORS} more" if len(errors) > MAX_ERRORS else ""
        super().__init__(f"{len(errors)} problem(s), nothing imported:\n" + "\n".join(shown)
                         + more)
        self.errors = errors


# What refuses an import at every door (the command, the API, the judges page), each
# answering its message: the file's problems, or a judge name taken by another kind of judge.
IMPORT_REFUSED = (VerdictImportError, JudgeConfigError)


def read_rows(path: Path) -> list[tuple[int, dict]]:
    """(line number, row) from a .jsonl or .csv file; VerdictImportError on a broken file."""
    path = Path(path)
    try:
        require_file(path)  # a folder or a missing path named as every import door names it
        data = path.read_bytes()
    except ImportFormatError as exc:
        raise VerdictImportError([str(exc)]) from None
    except OSError as exc:
        raise VerdictImportError([f"{path}: cannot read ({exc})"]) from None
    return file_rows(str(path), data)


def file_rows(name: str, data: bytes) -> list[tuple[int, dict]]:
    """(line number, row) from a file's bytes, read as .jsonl or .csv by its `name` (a path
    from the command, an uploaded file's name from the API and the judges page: one parser
    for every door); VerdictImportError on a broken file."""
    try:  # the encoding rule of every file door: a BOM dropped, UTF-16 by its mark
        text = decode_text(data, path=name)
    except ImportFormatError as exc:
        raise VerdictImportError([str(exc)]) from None
    rows, errors = [], []
    suffix = Path(name).suffix.lower()
    if suffix == ".csv":
        try:  # the reading of every table door: lines where rows start, no silent swallowing
            table = table_rows(text, path=name)
        except ImportFormatError as exc:
            raise VerdictImportError([str(exc)]) from None
        header = table[0][1] if table else []
        # The header rule of every table door: a column named twice (csv.DictReader kept its
        # last cell; a JSON line naming a key twice is refused too), item_id missing, or a
        # column outside COLUMNS, each named with what it resembles (`Item_ID`, ` verdict`).
        if problems := header_problems(header, required=("item_id",), known=COLUMNS):
            raise VerdictImportError([f"{name}: the CSV header {problem}"
                                      for problem in problems])
        for line, cells in table[1:]:
            if len(cells) > len(header):
                errors.append(f"line {line}: {len(cells) - len(header)} more cell(s) than the "
                              "header has columns")
                continue
            rows.append((line, {column: value for column, value in zip(header, cells, strict=False)
                                if column and value != ""}))
    elif suffix in (".jsonl", ".ndjson", ".json"):
        try:  # a file that is one JSON array (json.dump(verdicts, f, indent=2)) said so
            json_lines_not_array(text, path=name, what="verdicts",
                                 instead="or send the list as the API's `verdicts`")
        except ImportFormatError as exc:
            raise VerdictImportError([str(exc)]) from None
        # Lines as a text file gives them: str.splitlines would also cut at U+2028 or U+0085
        # inside a reasoning, which JSON strings may hold as they are.
        for line, raw in enumerate(io.StringIO(text, newline=None), start=1):
            if not raw.strip():
                continue
            try:  # the rule every JSON door reads by (depth, NaN, lone surrogates, keys twice)
                row = json_loads_limited(raw, object_pairs_hook=refuse_duplicate_keys)
            except json.JSONDecodeError as exc:
                errors.append(f"line {line}: not JSON ({exc.msg})")
                continue
            except ValueError as exc:
                errors.append(f"line {line}: {exc}")
                continue
            _json_row(line, row, rows, errors)
    else:
        raise VerdictImportError([f"{name}: use a .jsonl or .csv file"])
    if errors:
        raise VerdictImportError(errors)
    if not rows:
        raise VerdictImportError([f"{name}: no rows"])
    return rows


def upload_rows(upload) -> list[tuple[int, dict]]:
    """(line number, row) from an uploaded file (Django's `UploadedFile`: the API's and the
    judges page's), within the upload limit of every upload door (`core.uploads`)."""
    if error := upload_size_error(upload.size, command=LARGER_FILES):
        raise VerdictImportError([error])
    return file_rows(upload.name, upload.read())


def json_rows(values: list) -> list[tuple[int, dict]]:
    """(line number, row) from verdicts already parsed from a JSON body (the API's
    `verdicts` list, read by the rule of every JSON door, `core.api.LimitedJSONParser`): the
    Nth verdict is line N, as the Nth line of a JSONL file, and is checked as that line."""
    rows: list[tuple[int, dict]] = []
    errors: list[str] = []
    for line, row in enumerate(values, start=1):
        _json_row(line, row, rows, errors)
    if errors:
        raise VerdictImportError(errors)
    if not rows:
        raise VerdictImportError(["no rows"])
    return rows


def _json_row(line: int, row, rows: list, errors: list[str]) -> None:
    """A JSON line's (or a JSON body's) verdict: kept in `rows`, or its problem in `errors`."""
    if not isinstance(row, dict):
        errors.append(f"line {line}: not a JSON object")
    elif error := _unknown_columns(row):
        errors.append(f"line {line}: {error}")
    else:
        rows.append((line, row))


# Every column a verdict file may hold (module docstring).
COLUMNS = ("item_id", "verdict", "score", "probability", "reasoning", "order", "judge",
           "judge_version")


def _unknown_columns(names) -> str | None:
    """Why columns outside COLUMNS are refused, or None: a misspelt `probability` was dropped
    without a word, and the judge was read by its verdicts alone. The header rule of the CSV
    (`header_problems`), so a JSON key `Item_ID` is named beside `item_id` as a column is."""
    problems = header_problems(list(names), known=COLUMNS)
    return problems[0].removeprefix("has ") if problems else None


def _number(value, name: str, line: int, errors: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        # float(true) is 1.0: a JSON `true` in a score or probability column is no number.
        errors.append(f"line {line}: {name} {value!r} is not a number")
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        errors.append(f"line {line}: {name} {value!r} is not a number")
        return None
    except OverflowError:  # a whole number of hundreds of digits: valid JSON, no float
        errors.append(f"line {line}: {name} is too large to be a number")
        return None
    if not math.isfinite(number):
        errors.append(f"line {line}: {name} {value!r} is not finite")
        return None
    return number


def _verdict(value, kind: str, line: int, errors: list[str]) -> str:
    """The row's verdict as stored, by the rule an LLM judge's answers are read with
    (`task_verdict`)."""
    if value is None:
        return ""
    verdict = task_verdict(kind, value)
    if verdict is None:
        errors.append(f"line {line}: verdict {value!r} is not one of "
                      f"{', '.join(TASK_VERDICTS[kind])}")
        return ""
    return verdict


def _mixed_scores_error(kind: str, score_line: int, decided_line: int) -> str:
    """Rows that decide (a verdict or a probability) mixed with rows that only score: on
    Likert items a score decides too (3 or more is correct; the report reads each item by
    what it has), on other items a score has no threshold that makes it a verdict, and the
    report could not read the judge's items alike."""
    return (f"line {score_line}: a score without a verdict or probability, while line "
            f"{decided_line} gives one: on {kind} items a score has no threshold that makes "
            "it a verdict; give every row a verdict (or a probability), or none")


def verdicts_import(*, project: Project, path: Path | None = None,
                    rows: list[tuple[int, dict]] | None = None, judge: str | None = None,
                    version: str | None = None, description: str = "") -> dict:
    """Validate the whole file (at `path`, or its `rows` as `file_rows` or `json_rows` read
    them from an upload or a JSON body), then store it as one judge version in one
    transaction. Returns {judge, version, label, imported, unchanged}. VerdictImportError
    lists every problem found; the same rule and messages at every door (the command, the
    API, the judges page)."""
    if (path is None) == (rows is None):
        raise TypeError("give a path or rows")
    if rows is None:
        rows = read_rows(path)
    errors: list[str] = []
    # Names without the spaces around them at every door: the API's and the judges page's
    # fields trim what they are given, so `--judge " gpt-x "` is the judge the API stores.
    judge, version = (judge or "").strip() or None, (version or "").strip() or None
    names = {str(r.get("judge")).strip() for _, r in rows if r.get("judge")}
    versions = {str(r.get("judge_version")).strip() for _, r in rows if r.get("judge_version")}
    for what, given, column in (("judge", judge, names), ("version", version, versions)):
        if len(column) > 1:
            errors.append(f"the file names several {what}s: {', '.join(sorted(column))}")
        elif given and column and column != {given}:
            errors.append(f"the file's {what} {column.pop()!r} differs from the one given "
                          f"({given!r})")
    judge = judge or (names.pop() if len(names) == 1 else None)
    version = version or (versions.pop() if len(versions) == 1 else None)
    if not judge:
        errors.append("no judge name (give one with the file, or a `judge` column)")
    if not version:
        errors.append("no judge version (give one with the file, or a `judge_version` column)")
    if judge and version and (error := judge_label_error(judge, version)):
        errors.append(error)
    items = dict(project.items.values_list("external_id", "id"))
    # An item stored with spaces around its id before every door trimmed them (" q0 ") is the
    # file's "q0" (or " q0 ", as the project's own export wrote it).
    wanted = {str(row.get("item_id")).strip() for _, row in rows
              if row.get("item_id") not in (None, "")}
    untrimmed = rows_stored_untrimmed(project.items.all(), "external_id",
                                      wanted.difference(items))
    items.update((name, item.pk) for name, item in untrimmed.one.items())
    kind = project.kind
    seen: dict[tuple[str, str], int] = {}
    parsed = []
    # The first row that says correct/incorrect (A/B: which side) itself, and the first with
    # only a score: see _mixed_scores_error.
    first_decided = first_score_only = 0
    for line, row in rows:
        external = row.get("item_id")
        if external in (None, ""):
            errors.append(f"line {line}: no item_id")
            continue
        given, external = external, str(external).strip()  # stored trimmed; said as given
        order = str(row.get("order") or "").upper()
        if order not in ("", "AB", "BA") or (order and kind != TaskKind.AB):
            errors.append(f"line {line}: order {row.get('order')!r} (AB or BA, A/B items only)")
        if external in untrimmed.several:
            errors.append(f"line {line}: item_id {given!r} is any of the items "
                          f"{', '.join(map(repr, untrimmed.several[external]))} of "
                          f"{project.slug} (stored with spaces around it): merge them first")
            continue
        if external not in items:
            errors.append(f"line {line}: item_id {given!r} is not an item of "
                          f"{project.slug}")
            continue
        # A verdict without an order counts as shown AB (the leaderboard reads it so), so a
        # row without one and a row in order AB are the same verdict twice. The order is
        # stored as given: "not recorded" keeps the position effect out of its fit.
        shown = order or ("AB" if kind == TaskKind.AB else "")
        if (external, shown) in seen:
            first = seen[external, shown]
            same = (f" in order {shown} (a missing order counts as AB)"
                    if kind == TaskKind.AB else "")
            errors.append(f"line {line}: item_id {given!r}{same} again (first on line "
                          f"{first})")
            continue
        seen[external, shown] = line
        verdict = _verdict(row.get("verdict"), kind, line, errors)
        score = _number(row.get("score"), "score", line, errors)
        probability = _number(row.get("probability"), "probability", line, errors)
        if problem := task_score_problem(kind, score):
            errors.append(f"line {line}: {problem}")
        if probability is not None and not 0 <= probability <= 1:
            errors.append(f"line {line}: probability {probability:g} is outside 0..1")
        if not verdict and score is None and probability is None:
            errors.append(f"line {line}: no verdict, score or probability")
        elif verdict or probability is not None:
            first_decided = first_decided or line
        else:
            first_score_only = first_score_only or line
        reasoning = str(row.get("reasoning") or "")
        if found := find_control_character(reasoning):
            errors.append(f"line {line}: reasoning {control_character_message(found[1])}")
        # Stored whole: the file is the researcher's record (an LLM run cuts its own answers at
        # 4000 characters to bound what an endpoint sends; a file's reasoning was cut silently).
        parsed.append((items[external], order, verdict, score, probability, reasoning))
    if first_decided and first_score_only and kind != TaskKind.LIKERT:
        errors.append(_mixed_scores_error(kind, first_score_only, first_decided))
    if errors:
        raise VerdictImportError(errors)
    with transaction.atomic():
        # The same file sent twice at once (a double click on the page, an API retry): the
        # second waits here for the first, then finds its verdicts stored (`unchanged`) instead
        # of inserting them again (a unique violation: a 500).
        scope_lock(project)
        judge_version, _ = judge_version_create(
            name=judge, kind=JudgeKind.IMPORTED, config={"version": version},
            description=description, version_name=version)
        stored = set(JudgeVerdict.objects.filter(
            judge_version=judge_version, item__project=project).values_list(
            "item_id", "order", "verdict", "score", "probability", "reasoning"))
        if stored and stored == set(parsed):
            # The same file again (a script run twice): nothing new, nothing refused.
            return {"judge": judge, "version": judge_version.version,
                    "label": judge_version.label, "imported": 0, "unchanged": len(stored)}
        if stored:
            raise VerdictImportError([f"{judge}@{version} already holds other verdicts on "
                                      f"{project.slug}: import a new version"])
        JudgeVerdict.objects.bulk_create([
            JudgeVerdict(judge_version=judge_version, item_id=item_id, order=order,
                         content_hash=hashlib.sha256(f"import:{item_id}:{order}".encode())
                         .hexdigest(),
                         verdict=verdict, score=score, probability=probability,
                         reasoning=reasoning)
            for item_id, order, verdict, score, probability, reasoning in parsed
        ], batch_size=2000)
    return {"judge": judge, "version": judge_version.version, "label": judge_version.label,
            "imported": len(parsed), "unchanged": 0}


def verdicts_import_summary(result: dict, project: Project) -> str:
    """What an import stored, as the command and the judges page say it."""
    unchanged = (f" ({result['unchanged']} already imported, unchanged)"
                 if result["unchanged"] else "")
    return (f"{result['label']}: {result['imported']} verdicts imported on {project.slug}"
            f"{unchanged}")
