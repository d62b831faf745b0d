"""Writing imported records: items, workers, imported stages and judgments, in one transaction.

Judgments go into closed stages of provider `import`: kind IMPORTED (data), or practice /
qualification for the answers an export marks so (`imported_stage_kind`), which stay out of the
data as they were where they came from.

`import_records` is idempotent: an item whose external id already exists with the same content is
left alone, a judgment that already exists (same worker, item and stage) with the same value is
skipped, so importing a file twice creates nothing the second time. An existing external id with
different content, or an existing judgment with a different value, stops the import with
`ImportConflictError` and nothing is written.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import connection, models, transaction
from django.utils import timezone
from tqdm import tqdm

from annotation.domain.item_content import item_columns_trimmed, normalize_answer_systems
from annotation.domain.json_values import json_equal, json_key
from annotation.domain.send_filter import item_send_filter
from annotation.importers.base import ItemRecord, JudgmentRecord
from annotation.models import (
    NON_DATA_STAGE_KINDS,
    Adjudication,
    Item,
    Judgment,
    Project,
    Provider,
    Stage,
    StageKind,
    TaskKind,
    Worker,
)
from annotation.selectors import rows_stored_untrimmed
from core.text_match import SEND_FILTER_PREFIX

CHUNK_SIZE = 2000
# Below this many records a progress bar is noise.
PROGRESS_MIN_RECORDS = 2000


class ImportConflictError(ValueError):
    """A record disagrees with what the project already holds."""


@dataclass
class ImportSummary:
    items_created: int = 0
    items_unchanged: int = 0
    # Of items_unchanged: items kept as they were although the file's texts differ
    # (keep_existing_items), the file's judgments attached to them.
    items_kept_differing: int = 0
    judgments_created: int = 0
    judgments_unchanged: int = 0
    # Researchers' decisions the file carries (an export's `adjudication`): stored, or already
    # the item's latest decision.
    adjudications_created: int = 0
    adjudications_unchanged: int = 0
    workers_created: int = 0
    # The file's workers that were already known (from an earlier import, into any project).
    workers_unchanged: int = 0
    stages_created: list[str] = field(default_factory=list)
    # Records the file gave: none is an empty file, which was not "imported before".
    records: int = 0
    # Records MOCHA's send filter stores excluded (never sent out to annotators).
    items_filtered: int = 0

    def filtered_note(self) -> str:
        """The sentence every import door says about MOCHA's send filter (empty: none)."""
        if not self.items_filtered:
            return ""
        return (f"Not sent out: {self.items_filtered} Likert candidate(s) that match a "
                "reference exactly after normalization, or number-vs-number pairs on DROP "
                "(MOCHA's rule): stored excluded, the reason in their exclusion_reason")

    @property
    def created_anything(self) -> bool:
        return bool(self.items_created or self.judgments_created or self.workers_created
                    or self.adjudications_created)

    def as_text(self) -> str:
        text = (
            f"items: {self.items_created} created, {self.items_unchanged} already present; "
            f"judgments: {self.judgments_created} created, "
            f"{self.judgments_unchanged} already present; "
            f"workers: {self.workers_created} created, {self.workers_unchanged} already present"
        )
        if self.adjudications_created or self.adjudications_unchanged:
            text += (f"; adjudications: {self.adjudications_created} created, "
                     f"{self.adjudications_unchanged} already present")
        if not self.records:
            text += " — the file holds no records"
        elif not self.created_anything:
            text += " — nothing new: this data was imported before"
        return text


# Stored and incoming values are compared by `json_equal`: 5 and 5.0 are equal, the key order
# of dicts is ignored (jsonb reorders keys), and a float PostgreSQL gives back as a whole number
# (1e23) is the float it stored.


def _judgment_value(source) -> dict:
    return {name: getattr(source, name) for name in JudgmentRecord.VALUE_FIELDS}


def _chunks(sequence: list, size: int):
    for start in range(0, len(sequence), size):
        yield sequence[start:start + size]


def rows_insert(model: type[models.Model], rows: list[dict]) -> list[int] | None:
    """Insert rows (dicts of field attname → value). Returns their ids in order when the
    backend hands them back, else None.

    On PostgreSQL the rows go through COPY, on SQLite through one executemany: building tens of
    thousands of model instances and compiling them through bulk_create costs several times
    more than the database's own work. Other backends use bulk_create.
    """
    if not rows:
        return []
    names = list(rows[0])
    if connection.vendor == "sqlite":
        _insert_sqlite(model, names, rows)
        return None
    if connection.vendor != "postgresql":
        created = model.objects.bulk_create([model(**row) for row in rows], batch_size=CHUNK_SIZE)
        ids = [obj.pk for obj in created]
        return None if any(pk is None for pk in ids) else ids
    # Columns the rows leave out (e.g. a field added later) get their model defaults, as
    # bulk_create would give them: COPY only knows database defaults.
    defaults = {
        f.attname: f.get_default() for f in model._meta.concrete_fields
        if not f.primary_key and f.attname not in names
    }
    names += list(defaults)
    fields = [model._meta.get_field(name) for name in names]
    json_columns = [i for i, f in enumerate(fields) if isinstance(f, models.JSONField)]
    buffer = io.StringIO()
    # CSV with every value quoted; NULL is the empty string, and FORCE_NULL makes a (quoted)
    # empty value NULL in the nullable columns, none of which can hold an empty string.
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n")
    encode = json.JSONEncoder(ensure_ascii=False).encode
    for row in rows:
        values = [row[name] if name in row else defaults[name] for name in names]
        for i in json_columns:
            value = values[i]
            if value is not None:
                # Most judgments carry empty lists and objects: skip the encoder for them.
                values[i] = ("[]" if isinstance(value, list) else "{}") if (
                    not value and isinstance(value, (list, dict))
                ) else encode(value)
        writer.writerow(["" if v is None else v for v in values])
    buffer.seek(0)
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    nullable = ", ".join(quote(f.column) for f in fields if f.null)
    options = "FORMAT csv" + (f", FORCE_NULL ({nullable})" if nullable else "")
    with connection.cursor() as cursor:
        cursor.cursor.copy_expert(
            f"COPY {quote(model._meta.db_table)} ({columns}) FROM STDIN WITH ({options})", buffer
        )
    return None


def _insert_sqlite(model: type[models.Model], names: list[str], rows: list[dict]) -> None:
    """One executemany of a prepared INSERT: what bulk_create does, without compiling each row
    (SQLite's variable limit makes bulk_create send ~60 rows per statement)."""
    defaults = {
        f.attname: f.get_default() for f in model._meta.concrete_fields
        if not f.primary_key and f.attname not in names
    }
    names = names + list(defaults)
    fields = [model._meta.get_field(name) for name in names]
    converters = []
    for f in fields:
        if isinstance(f, models.JSONField):
            converters.append(lambda v, f=f: None if v is None else json.dumps(v, cls=f.encoder))
        elif isinstance(f, models.DateTimeField):
            converters.append(connection.ops.adapt_datetimefield_value)
        else:
            converters.append(None)
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} "
        f"({', '.join(quote(f.column) for f in fields)}) VALUES ({', '.join('?' * len(fields))})"
    )
    values = []
    for row in rows:
        line = [row[name] if name in row else defaults[name] for name in names]
        for i, convert in enumerate(converters):
            if convert is not None:
                line[i] = convert(line[i])
        values.append(line)
    with connection.cursor() as cursor:
        cursor.cursor.executemany(sql, values)


def _stored_untrimmed(queryset, column: str, names, what: str) -> dict:
    """The one row stored with spaces around each of `names` that no row holds exactly
    (`rows_stored_untrimmed`); ImportConflictError naming the rows when several trim alike
    (the file's name would be any of them: they are merged by hand, not guessed)."""
    found = rows_stored_untrimmed(queryset, column, names)
    for name, values in found.several.items():
        raise ImportConflictError(
            f"{what} {name!r}: stored {len(values)} times with spaces around it "
            f"({', '.join(repr(value) for value in values)}); merge them into one before "
            "importing (docs/RELIABILITY.md, trimmed names)")
    return found.one


def _item_ids(project: Project, external_ids: list[str]) -> dict[str, int]:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT external_id, id FROM {Item._meta.db_table} "
                "WHERE project_id = %s AND external_id = ANY(%s)",
                [project.pk, external_ids],
            )
            return dict(cursor.fetchall())
    return dict(
        Item.objects.filter(project=project, external_id__in=external_ids)
        .values_list("external_id", "id")
    )


def imported_stage_kind(stage_kind: str) -> str:
    """The kind of the stage that stores an imported judgment collected in a stage of
    `stage_kind` (an export's `stage_kind`; "" when the file gives none): practice and
    qualification answers test the workers, not the items, so they keep their kind and the
    counting rule (NON_DATA_STAGE_KINDS) keeps them out of the data, as in the project they
    came from; every other judgment is data, in an IMPORTED stage."""
    return stage_kind if stage_kind in NON_DATA_STAGE_KINDS else StageKind.IMPORTED


def import_stage_get_or_create(*, project: Project, name: str,
                               kind: str = StageKind.IMPORTED) -> tuple[Stage, bool]:
    """The project's imported stage called `name` (provider import) of `kind` (IMPORTED, or
    practice / qualification for answers that are not data: `imported_stage_kind`), created
    closed on first use.

    A stage of that name collected on the platform itself is refused: its judgments are already
    in the project (an export of it re-imported here would store every judgment a second time,
    under new `import` workers), so they can only go into another project. So is an imported
    stage of that name of another kind: its judgments would be counted (or not) unlike the
    file's.
    """
    stage = Stage.objects.filter(
        models.Q(kind=StageKind.IMPORTED)
        | models.Q(kind__in=NON_DATA_STAGE_KINDS, provider=Provider.IMPORT),
        project=project, name=name).first()
    if stage is None:
        # A stage stored before names were trimmed ("batch1 ") is the file's "batch1".
        stage = _stored_untrimmed(Stage.objects.filter(
            models.Q(kind=StageKind.IMPORTED)
            | models.Q(kind__in=NON_DATA_STAGE_KINDS, provider=Provider.IMPORT),
            project=project), "name", [name], "stage").get(name)
    if stage is not None:
        if stage.kind != kind:
            raise ImportConflictError(
                f"stage {name!r} of project {project.slug!r} was imported with kind "
                f"{stage.kind!r}, but the file's judgments of it go into kind {kind!r} "
                "(stage_kind); they would be counted unlike the file says. Import into another "
                "project, or rename the stage in the file")
        return stage, False
    collected = Stage.objects.filter(project=project, name=name).first()
    if collected is not None:
        raise ImportConflictError(
            f"stage {name!r} of project {project.slug!r} was collected on the platform "
            f"({collected.get_kind_display()} stage); its judgments are already here. Import "
            "an export of it into another project, or rename the stage in the file"
        )
    order = Stage.objects.filter(project=project).count()
    from .stages import stage_close, stage_create, stage_name_error

    if (error := stage_name_error(name)) is not None:
        raise ImportConflictError(f"stage {name!r}: its name {error}")

    stage = stage_create(project=project, kind=kind, name=name, provider=Provider.IMPORT,
                         order=order)
    # Closed at once, through the logged status machine: it holds judgments made elsewhere.
    stage_close(stage=stage, actor="import_data",
                reason="imported judgments: collected elsewhere, never published here")
    return stage, True


def import_workers_get_or_create(*, external_ids: Iterable[str]) -> tuple[dict[str, Worker], int]:
    """Workers with provider `import` by external id, creating the missing ones in bulk."""
    wanted = sorted(set(external_ids))
    workers: dict[str, Worker] = {}
    for chunk in _chunks(wanted, CHUNK_SIZE):
        for worker in Worker.objects.filter(provider=Provider.IMPORT, external_id__in=chunk):
            workers[worker.external_id] = worker
    missing = [external_id for external_id in wanted if external_id not in workers]
    if missing:
        # A worker stored before names were trimmed (" w1 ") is the file's "w1".
        workers.update(_stored_untrimmed(Worker.objects.filter(provider=Provider.IMPORT),
                                         "external_id", missing, "worker"))
        missing = [external_id for external_id in missing if external_id not in workers]
    if missing:
        # ignore_conflicts: an import into another project may create the same worker at the
        # same moment; the row is then read back below.
        Worker.objects.bulk_create(
            [Worker(provider=Provider.IMPORT, external_id=external_id) for external_id in missing],
            batch_size=CHUNK_SIZE, ignore_conflicts=True,
        )
        for chunk in _chunks(missing, CHUNK_SIZE):
            for worker in Worker.objects.filter(provider=Provider.IMPORT, external_id__in=chunk):
                workers[worker.external_id] = worker
    return workers, len(missing)


def _fit_likert_scale(*, project: Project, records: list[ItemRecord]) -> None:
    """Put Likert judgments on the project's own scale (1 to the number of its labels).

    Binary correctness judgments (EVOUNA's true/false, marked extra.binary) become the top of
    the scale or 1, so a 3-point project stores 3/1 rather than MOCHA's 5/1; any other score
    outside the scale stops the import, naming the record and the worker.
    """
    if project.kind != TaskKind.LIKERT:
        return
    top = project.scale_top
    for record in records:
        decided = (record.adjudication or {}).get("score")
        if decided is not None and not 1 <= decided <= top:
            raise ImportConflictError(
                f"record {record.label}: field 'adjudication.score': {decided:g} is "
                f"outside project {project.slug!r}'s scale 1-{top}")
        for position, judgment in enumerate(record.judgments):
            binary = judgment.extra.get("binary") if isinstance(judgment.extra, dict) else None
            if isinstance(binary, bool):
                judgment.score = float(top) if binary else 1.0
            elif judgment.score is not None and not 1 <= judgment.score <= top:
                raise ImportConflictError(
                    f"record {record.label}: field 'judgments[{position}].score': worker "
                    f"{judgment.worker!r} gave "
                    f"{judgment.score:g}, outside project {project.slug!r}'s scale 1-{top}"
                )


@transaction.atomic
def import_records(
    *,
    project: Project,
    records: Iterable[ItemRecord],
    keep_existing_items: bool = False,
    progress: bool | None = None,
    description: str = "importing",
) -> ImportSummary:
    """Store validated records (items with optional judgments) in `project`, all or nothing.

    keep_existing_items: an existing external id whose content differs is kept as it is and the
    record's judgments are attached to it (e.g. in-lab responses onto OneStopQA items imported
    from the dataset file, whose texts differ in punctuation) instead of being an error.
    """
    records = list(records)
    summary = ImportSummary(records=len(records))
    # One import into a project at a time: a second one (Confirm clicked twice, the command run
    # while the browser import runs) waits here, then finds the first one's items and judgments
    # and creates nothing, instead of colliding with them on the unique constraints.
    # NO KEY UPDATE: rows that merely point at the project (an item added through the API, a
    # stage) are not held up by it.
    list(Project.objects.select_for_update(no_key=True).filter(pk=project.pk)
         .values_list("pk", flat=True))
    for record in records:
        if record.kind != project.kind:
            raise ImportConflictError(
                f"record {record.label}: kind {record.kind!r} does not fit project "
                f"{project.slug!r} of kind {project.kind!r}"
            )
    _fit_likert_scale(project=project, records=records)
    summary.items_filtered = _send_filter_records(records)
    seen: dict[str, ItemRecord] = {}
    for record in records:
        if (first := seen.setdefault(record.external_id, record)) is not record:
            spellings = ("" if first.label == record.label else
                         f" (as {first.label} and {record.label}: ids are stored trimmed)")
            raise ImportConflictError(
                f"record {record.label}: external id appears twice{spellings}")

    show = len(records) >= PROGRESS_MIN_RECORDS if progress is None else progress
    bar = tqdm(total=len(records), desc=description, unit="item", file=sys.stderr,
               disable=not show)

    stage_kinds: dict[str, str] = {}
    for record in records:
        for judgment in record.judgments:
            kind = imported_stage_kind(judgment.stage_kind)
            if stage_kinds.setdefault(judgment.stage, kind) != kind:
                raise ImportConflictError(
                    f"record {record.label}: stage {judgment.stage!r} goes into kind "
                    f"{kind!r} here and kind {stage_kinds[judgment.stage]!r} in an earlier "
                    "record (stage_kind); one stage has one kind")
    stages: dict[str, Stage] = {}
    for name in sorted(stage_kinds):
        stages[name], created = import_stage_get_or_create(project=project, name=name,
                                                           kind=stage_kinds[name])
        if created:
            summary.stages_created.append(name)
    workers, summary.workers_created = import_workers_get_or_create(
        external_ids=(j.worker for record in records for j in record.judgments)
    )
    summary.workers_unchanged = len(workers) - summary.workers_created

    # A project without items needs no look-ups of existing items and judgments.
    fresh_project = not Item.objects.filter(project=project).exists()
    if not fresh_project:
        _refuse_renamed_copy(project, records)
    try:
        for chunk in _chunks(records, CHUNK_SIZE):
            _import_chunk(project, chunk, stages, workers, summary, keep_existing_items,
                          fresh_project)
            bar.update(len(chunk))
    finally:
        bar.close()
    return summary


def _send_filter_records(records: list[ItemRecord]) -> int:
    """MOCHA's send filter (`annotation.domain.send_filter`) on the records that carry no
    judgments, in place (the admin preview counts what it excluded); how many it filters. A
    record with judgments is a study's measurement and stays as the file gives it."""
    filtered = 0
    for record in records:
        if record.judgments:
            continue
        record.excluded, record.exclusion_reason = item_send_filter(
            kind=record.kind, content=record.content, dataset=record.dataset,
            excluded=record.excluded, exclusion_reason=record.exclusion_reason,
            gold_check=record.is_gold_check)
        filtered += record.exclusion_reason.startswith(SEND_FILTER_PREFIX)
    return filtered


def _refuse_renamed_copy(project: Project, records: list[ItemRecord]) -> None:
    """ImportConflictError when every item the file would add repeats an item the project
    holds (the same content, gold and source) under another external id. Formats that take part
    of the id from the file's name (EVOUNA's dataset `evouna_nq`, the long-form experts'
    domain) give a copy of a file imported before under another name ("evouna_nq (1).json", a
    second download) new ids for the same items: it doubled the project without a word."""
    # An id stored with spaces around it (before every door trimmed them) is the file's id.
    stored_ids = {external_id.strip() for external_id in
                  Item.objects.filter(project=project).values_list("external_id", flat=True)}
    new = [record for record in records if record.external_id not in stored_ids]
    if not new:
        return

    def key(content, gold, source) -> str:
        return json_key([content, gold, source])

    stored: dict[str, str] = {}
    for external_id, content, gold, source in Item.objects.filter(project=project).values_list(
            "external_id", "content", "gold", "source").iterator(chunk_size=CHUNK_SIZE):
        # Compared in the one spelling of a system name the records are in (an item stored
        # before that rule is the same item, as `_import_chunk` compares it).
        content = normalize_answer_systems(project.kind, content)
        stored.setdefault(key(content, gold, source), external_id)
    repeated = {record.external_id: stored.get(key(record.content, record.gold, record.source))
                for record in new}
    if all(repeated.values()):
        first = new[0].external_id
        raise ImportConflictError(
            f"every one of the {len(new)} item(s) this file would add repeats an item project "
            f"{project.slug!r} already holds under another external id (e.g. {first!r} is "
            f"{repeated[first]!r}): is the file a copy, under another name, of one imported "
            "before? Nothing imported. To hold a second copy on purpose, import it into "
            "another project")


def _import_chunk(
    project: Project,
    chunk: list[ItemRecord],
    stages: dict[str, Stage],
    workers: dict[str, Worker],
    summary: ImportSummary,
    keep_existing_items: bool,
    fresh_project: bool,
) -> None:
    identity = ItemRecord.IDENTITY_FIELDS
    existing: dict[str, dict] = {}
    if not fresh_project:
        for values in Item.objects.filter(
            project=project, external_id__in=[r.external_id for r in chunk]
        ).values("id", "external_id", *identity):
            existing[values["external_id"]] = values
        # An item stored before names were trimmed (" q1 ") is the file's "q1".
        absent = [r.external_id for r in chunk if r.external_id not in existing]
        for external_id, item in _stored_untrimmed(Item.objects.filter(project=project),
                                                   "external_id", absent, "item").items():
            existing[external_id] = {"id": item.pk, "external_id": item.external_id,
                                     **{name: getattr(item, name) for name in identity}}
    now = timezone.now()
    new_items = []
    for record in chunk:
        item = existing.get(record.external_id)
        if item is None:
            new_items.append({"project_id": project.pk, "external_id": record.external_id,
                              "created_at": now, **record.columns()})
            continue
        # A content stored before the one spelling of a system name (`normalize_answer_systems`,
        # which the record went through) is the same content.
        # So is a label stored with spaces around it before every door trimmed them.
        stored = {**item_columns_trimmed(item),
                  "content": normalize_answer_systems(record.kind, item["content"])}
        differing = [
            name for name in identity
            if not json_equal(stored[name], getattr(record, name))
        ]
        if differing and not keep_existing_items:
            raise ImportConflictError(
                f"record {record.label}: an item with this external id already exists in "
                f"project {project.slug!r} with different {', '.join(differing)}; "
                "give it another external id, import into another project, or keep the "
                "existing items and attach the file's judgments to them (import_data "
                "--keep-existing-items, the import form's 'Keep existing items')"
            )
        summary.items_unchanged += 1
        summary.items_kept_differing += bool(differing)
    item_ids = _insert_items(project, existing, new_items, summary)
    judged = [(record, j) for record in chunk for j in record.judgments]
    if judged:
        _insert_judgments(judged, existing, item_ids, stages, workers, summary, now)
    decided = [record for record in chunk if record.adjudication is not None]
    if decided:
        _insert_adjudications(decided, existing, item_ids, summary)


def _adjudication_value(source) -> dict:
    """A decision as the file and the table both give it: score, choice and note."""
    if isinstance(source, dict):
        return {"score": source.get("score"), "choice": source.get("choice") or "",
                "note": source.get("note") or ""}
    return {"score": source.score, "choice": source.choice, "note": source.note}


def _insert_adjudications(decided: list[ItemRecord], existing: dict[str, dict],
                          item_ids: dict[str, int], summary: ImportSummary) -> None:
    """Store the records' adjudications (an export carries each item's latest decision) on
    items that have none; an item whose latest decision is the file's is left alone (importing
    again adds nothing), and one decided otherwise here is an ImportConflictError: an import
    never overrules a researcher's decision, nor is the file's dropped without a word."""
    latest: dict[int, Adjudication] = {}
    earlier = [existing[r.external_id]["id"] for r in decided if r.external_id in existing]
    for adjudication in Adjudication.objects.filter(item_id__in=earlier).order_by("id"):
        latest[adjudication.item_id] = adjudication
    new = []
    for record in decided:
        item_id = item_ids[record.external_id]
        wanted = _adjudication_value(record.adjudication)
        stored = latest.get(item_id)
        if stored is None:
            new.append(Adjudication(item_id=item_id, **wanted))
        elif json_equal(_adjudication_value(stored), wanted):
            summary.adjudications_unchanged += 1
        else:
            raise ImportConflictError(
                f"record {record.label}: field 'adjudication': the item's latest "
                f"adjudication in this project is {stored.label!r}, the file's "
                f"{Adjudication(**wanted).label!r}; an import does not overrule a "
                "researcher's decision (record a new one on the adjudication page, or import "
                "into another project)")
    Adjudication.objects.bulk_create(new)
    summary.adjudications_created += len(new)


def _insert_items(project: Project, existing: dict[str, dict], new_items: list[dict],
                  summary: ImportSummary) -> dict[str, int]:
    """Insert the chunk's new items; the item id of every record of the chunk by external id."""
    item_ids = {external_id: item["id"] for external_id, item in existing.items()}
    if new_items:
        ids = rows_insert(Item, new_items)
        summary.items_created += len(new_items)
        if ids is None:
            item_ids.update(_item_ids(project, [row["external_id"] for row in new_items]))
        else:
            item_ids.update(
                (row["external_id"], pk) for row, pk in zip(new_items, ids, strict=True)
            )
    return item_ids


def _insert_judgments(judged: list[tuple[ItemRecord, JudgmentRecord]], existing: dict[str, dict],
                      item_ids: dict[str, int], stages: dict[str, Stage],
                      workers: dict[str, Worker], summary: ImportSummary, now) -> None:
    """Insert the chunk's judgments; one that is already stored must be identical (judgments
    are append-only), anything else is an ImportConflictError."""
    # Only items that existed before this import can already have judgments.
    stored = {}
    earlier = [item["id"] for item in existing.values()]
    if earlier:
        value_fields = JudgmentRecord.VALUE_FIELDS
        for values in Judgment.objects.filter(
            item_id__in=earlier, stage__in=list(stages.values())
        ).values("worker_id", "item_id", "stage_id", *value_fields):
            key = (values["worker_id"], values["item_id"], values["stage_id"])
            stored[key] = {name: values[name] for name in value_fields}
    new_judgments = []
    worker_ids = {external_id: worker.pk for external_id, worker in workers.items()}
    stage_ids = {name: stage.pk for name, stage in stages.items()}
    for record, judgment in judged:
        item_id = item_ids[record.external_id]
        worker_id = worker_ids[judgment.worker]
        stage_id = stage_ids[judgment.stage]
        previous = stored.get((worker_id, item_id, stage_id))
        if previous is not None:
            if not json_equal(previous, _judgment_value(judgment)):
                raise ImportConflictError(
                    f"record {record.label}: worker {judgment.worker!r} already has a "
                    f"different judgment of this item in stage {judgment.stage!r} "
                    "(judgments are append-only)"
                )
            summary.judgments_unchanged += 1
            continue
        new_judgments.append({"item_id": item_id, "worker_id": worker_id, "stage_id": stage_id,
                              "created_at": now, "server_time_ms": judgment.server_time_ms,
                              **judgment.values()})
    if new_judgments:
        rows_insert(Judgment, new_judgments)
        summary.judgments_created += len(new_judgments)
