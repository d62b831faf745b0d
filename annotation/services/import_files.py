"""Importing one data file into a project: parse it, store it (or rehearse storing it), summarise.

The one path for `manage.py import_data` and the admin's browser import. `import_file` parses
the file with the format's importer and stores the records with `import_records` (all or
nothing, idempotent). With `dry_run=True` the very same work runs inside a transaction that is
rolled back, so the preview a researcher confirms counts exactly what the import will create,
and meets the same errors. Every refusal is an `ImportRefused` whose message names the file,
the record and the field; nothing is written then.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import OperationalError, transaction

from annotation.domain.item_content import answers_identical
from annotation.importers import ImportFormatError, ItemRecord, importer_for, normalize_split
from annotation.importers.detect import (
    CSV_EXPORT_REFUSAL,
    FormatMismatch,
    format_mismatch,
    is_csv_export,
)
from annotation.models import Project, TaskKind
from annotation.services.imports import ImportConflictError, ImportSummary, import_records
from annotation.services.projects import readable_title
from core.db_busy import BUSY_MESSAGE, is_database_busy

SAMPLE_SIZE = 5


class ImportRefused(ValueError):
    """The file cannot be imported; nothing was written. The message says why and where."""


class ImportWrongFormat(ImportRefused):
    """The file does not fit the chosen format but clearly is another known one
    (`mismatch.detected`). The message ends "choose the format X instead" (the admin's words); a door
    with its own way to choose, such as `import_data`, says it with `mismatch.reason(path)`."""

    def __init__(self, path: Path, mismatch: FormatMismatch):
        self.path, self.mismatch = path, mismatch
        super().__init__(f"{mismatch.reason(path)}: choose the format {mismatch.detected} "
                         "instead")


def wrong_format_check(path: Path, format_name: str) -> None:
    """ImportWrongFormat when `path`, refused as `format_name`, clearly is another format;
    ImportRefused when it is a CSV export, which no format imports (`is_csv_export`: a JSON
    format called its header "malformed JSON at line 1, column 1")."""
    mismatch = format_mismatch(path, format_name)
    if mismatch is not None:
        raise ImportWrongFormat(path, mismatch)
    if is_csv_export(path):
        raise ImportRefused(f"{path}: {CSV_EXPORT_REFUSAL}")


@dataclass
class NewProject:
    """A project created by the import itself (in the same transaction as its items)."""

    slug: str
    title: str = ""
    kind: str | None = None  # default: the format's kind
    owner: object = None


@dataclass
class ImportGroup:
    split: str
    dataset: str
    source: str
    items: int = 0
    judgments: int = 0


@dataclass
class ImportOutcome:
    """What an import created (or, for a dry run, would create) and what the file holds."""

    project: Project
    summary: ImportSummary
    dry_run: bool
    format_name: str = ""
    records: int = 0
    judgments: int = 0
    workers: int = 0
    stages: list[str] = field(default_factory=list)
    # Items with a gold answer (what a qualification stage releases and grades against),
    # practice items, gold/attention checks and items excluded from the study.
    with_gold: int = 0
    practice: int = 0
    gold_checks: int = 0
    excluded: int = 0
    groups: list[ImportGroup] = field(default_factory=list)
    sample: list[ItemRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # What the file holds that its format does not import, one sentence each (`Records`).
    left_out: list[str] = field(default_factory=list)
    project_created: bool = False
    # The sentence on the file's A/B items whose two answers are one text, or "".
    identical_answers: str = ""


def identical_answers_note(records: list[ItemRecord]) -> str:
    """How many A/B items of the file have two answers of one text (`answers_identical`), in
    the words the admin's preview and `import_data` show; "" when none. They are stored: a
    gold attention check may pair an answer with itself on purpose."""
    same = [r for r in records if r.kind == TaskKind.AB and answers_identical(r.content)]
    if not same:
        return ""
    gold = sum(r.is_gold_check for r in same)
    return (f"{len(same)} A/B item(s) whose two answers are the same text"
            + (f" ({gold} of them gold checks)" if gold else "")
            + ": stored (an attention check may pair an answer with itself), but the "
            "leaderboard leaves their votes out (the judge can only guess).")


def _describe(records: list[ItemRecord]) -> dict:
    groups: dict[tuple[str, str, str], ImportGroup] = {}
    workers: set[str] = set()
    stages: set[str] = set()
    for record in records:
        key = (record.split, record.dataset, record.source)
        group = groups.setdefault(key, ImportGroup(*key))
        group.items += 1
        group.judgments += len(record.judgments)
        for judgment in record.judgments:
            workers.add(judgment.worker)
            stages.add(judgment.stage)
    return {
        "records": len(records),
        "judgments": sum(len(r.judgments) for r in records),
        "workers": len(workers),
        "stages": sorted(stages),
        "with_gold": sum(r.gold is not None for r in records),
        "practice": sum(r.is_practice for r in records),
        "gold_checks": sum(r.is_gold_check for r in records),
        "excluded": sum(r.excluded for r in records),
        "groups": sorted(groups.values(), key=lambda g: (g.split, g.dataset, g.source)),
        "sample": records[:SAMPLE_SIZE],
        "identical_answers": identical_answers_note(records),
    }


def _warnings(outcome: ImportOutcome, records: list[ItemRecord]) -> list[str]:
    summary = outcome.summary
    warnings = []
    if not summary.created_anything:  # an empty file is refused (`import_file_empty_check`)
        warnings.append("Nothing new: every item and judgment of this file is already in the "
                        "project (it was imported before).")
    same = summary.items_unchanged - summary.items_kept_differing
    if same:
        warnings.append(f"{same} item(s) already in the project with the same "
                        "content: left as they are.")
    if summary.items_kept_differing:
        warnings.append(f"{summary.items_kept_differing} item(s) already in the project with "
                        "different content (keep existing items): left as they are, and the "
                        "file's judgments attached to them.")
    if summary.judgments_unchanged:
        warnings.append(f"{summary.judgments_unchanged} judgment(s) already stored: skipped.")
    warnings.extend(f"Not imported, by the {outcome.format_name} format's rule: {note}."
                    for note in outcome.left_out)
    if summary.filtered_note():
        warnings.append(f"{summary.filtered_note()}.")
    if outcome.identical_answers:
        warnings.append(outcome.identical_answers)
    if records and not any(r.split for r in records):
        warnings.append("No item has a split (train/dev/test): name the file dev.jsonl etc. or "
                        "give the split.")
    if outcome.project.owner_id is None:
        warnings.append(f"Project {outcome.project.slug!r} has no owner: only superusers see it.")
    return warnings


# Bytes a file may hold and still hold nothing: whitespace and a UTF-8 byte-order mark.
_BLANK_BYTES = b" \t\r\n\x0b\x0c\xef\xbb\xbf"


def import_file_empty_check(path: str | Path) -> None:
    """ImportRefused when `path` is a file holding nothing (no bytes, or only blank lines and
    a byte-order mark): "PATH: the file is empty: nothing to import", in every format, at every
    import door (`import_data`, the admin's import and create-from-file pages), before anything
    else is asked of the file (its kind, its format) or written (a project `--create` would
    make). The items API refuses an empty list the same way. Read until the first byte that is
    not blank, so a real file costs one read. A folder (the lfqa-experts format) is its
    importer's to read."""
    path = Path(path)
    if not path.is_file():
        return
    with path.open("rb") as handle:
        while chunk := handle.read(65536):
            if chunk.strip(_BLANK_BYTES):
                return
    raise ImportRefused(f"{path}: the file is empty: nothing to import")


def _parse(importer, path: Path, *, format_name: str, kind: str,
           split: str | None) -> list[ItemRecord]:
    try:
        records = importer.parse(path, kind=kind, split=split)
    except ImportFormatError as exc:
        wrong_format_check(path, format_name)  # a file of another format says which
        raise ImportRefused(str(exc)) from None
    except UnicodeDecodeError as exc:  # every format is read as UTF-8 text
        raise ImportRefused(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    if not records:
        # A file with no record to store ("[]", "{}", a folder of empty lists, or only rows
        # the format leaves out) imports nothing: refused, as an empty file is, saying what
        # the file held instead.
        left_out = list(getattr(records, "left_out", []))
        raise ImportRefused(f"{path}: the file holds no records: nothing to import"
                            + (f" (it holds only what {format_name} does not import: "
                               + "; ".join(left_out) + ")" if left_out else ""))
    return records


def import_project_create(spec: NewProject, kind: str) -> Project:
    """The project an import creates, checked as the admin checks one (a slug the URLs can
    reach, a title that fits), at every door: `import_data --create` and the browser import.
    Its title is the one given, without the spaces around it (as the admin's and the API's
    fields store one), else one annotators can read (`readable_title`) at both doors: the
    browser import titled it with the bare slug where `import_data` wrote a sentence."""
    title = (spec.title or "").strip() or readable_title(spec.slug, kind)
    project = Project(slug=spec.slug, title=title, kind=kind, owner=spec.owner)
    try:
        project.full_clean()
    except ValidationError as exc:
        problems = "; ".join(f"{name}: {' '.join(errors)}"
                             for name, errors in exc.message_dict.items())
        raise ImportRefused(f"project {spec.slug!r} cannot be created: {problems}") from None
    project.save()
    return project


def new_project_kind(importer, path: Path, requested: str | None) -> str | None:
    """The task kind of a project created from `path`: the one asked for, else the format's,
    else the one the file states (a `jsonl` export names its project's kind on every line);
    None when none of them says (the door then asks for it)."""
    if requested:
        return requested
    if importer.KIND is not None:
        return importer.KIND
    declared = getattr(importer, "declared_kind", None)
    kind = declared(path) if declared is not None else None
    return kind if kind in TaskKind.values else None


def import_file(
    *,
    format_name: str,
    path: str | Path,
    project: Project | None = None,
    new_project: NewProject | None = None,
    split: str | None = None,
    keep_existing_items: bool = False,
    dry_run: bool = False,
    progress: bool | None = False,
) -> ImportOutcome:
    """Import `path` (in `format_name`) into `project`, or into a project created from
    `new_project`; all or nothing. `dry_run`: do everything, then roll it back."""
    if (project is None) == (new_project is None):
        raise ValueError("give exactly one of project and new_project")
    try:
        importer = importer_for(format_name)
    except ValueError as exc:
        raise ImportRefused(str(exc)) from None
    path = Path(path)
    import_file_empty_check(path)
    if project is not None:
        kind = project.kind
    else:
        kind = new_project_kind(importer, path, new_project.kind)
        if kind is None:
            wrong_format_check(path, format_name)  # a dataset file given as jsonl
            raise ImportRefused(f"choose the task kind of the new project: {format_name} files "
                                "hold items of any kind")
        if Project.objects.filter(slug=new_project.slug).exists():
            raise ImportRefused(f"a project with slug {new_project.slug!r} already exists; "
                                "import into it from its own page, or choose another slug")
    if importer.KIND is not None and importer.KIND != kind:
        wrong_format_check(path, format_name)  # the file's own format may fit the project
        target = project.slug if project is not None else new_project.slug
        raise ImportRefused(f"format {format_name} holds {importer.KIND} items; project "
                            f"{target!r} is {kind}")
    if split is not None:  # the split typed at a door, spelled as the file-name rule spells it
        split = normalize_split(split) or None
    records = _parse(importer, path, format_name=format_name, kind=kind, split=split)
    try:
        with transaction.atomic():
            created = project is None
            if created:
                project = import_project_create(new_project, kind)
            summary = import_records(
                project=project, records=records, keep_existing_items=keep_existing_items,
                progress=progress, description=f"importing {path.name}",
            )
            outcome = ImportOutcome(project=project, summary=summary, dry_run=dry_run,
                                    project_created=created, format_name=format_name,
                                    left_out=list(getattr(records, "left_out", [])),
                                    **_describe(records))
            outcome.warnings = _warnings(outcome, records)
            if dry_run:
                transaction.set_rollback(True)
    except ImportConflictError as exc:
        raise ImportRefused(f"{path}: {exc}") from None
    except OperationalError as exc:
        if not is_database_busy(exc):
            raise
        raise ImportRefused(f"{path}: {BUSY_MESSAGE}") from None
    return outcome
