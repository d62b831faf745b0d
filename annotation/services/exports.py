"""Exporting a project's judgments (one row each), per-item aggregates or spot checks, as JSON
Lines or CSV.

Rows are streamed: items are read in id order, a chunk at a time, with their judgments, so a
large project never sits in memory. The JSON Lines rows are exactly what the `jsonl` importer
reads back (see docs/DATA_FORMATS.md), so export → import round-trips.
"""
from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from statistics import fmean, pstdev
from typing import IO, Any

from django.db.models import F, QuerySet
from tqdm import tqdm

from annotation.domain.aggregation import (
    majority_by_item,
    resolve_aggregation,
)
from annotation.domain.answers import VALIDITY_CHOICES
from annotation.domain.csv_safe import SafeDictWriter
from annotation.judgment_selectors import (
    item_labels,
    latest_adjudications,
    vote_label,
    vote_validity,
)
from annotation.models import (
    DEFAULT_LIKERT_LABELS,
    NON_DATA_STAGE_KINDS,
    Adjudication,
    ExperimentMode,
    Item,
    Judgment,
    Project,
    SpotCheck,
    Stage,
    TaskKind,
)
from annotation.selectors import judgments_that_count
from annotation.services.adjudication import adjudicated_labels
from annotation.spot_check_selectors import SPOT_CHECK_COLUMNS, spot_check_row, spot_checks_loaded
from core.json_limits import json_dumps_strict
from core.vocabulary import AB_CHOICES, MC_ROLES

CHUNK_SIZE = 2000
# The scale of a Likert project created without labels (`DEFAULT_LIKERT_LABELS`).
DEFAULT_SCALE_TOP = len(DEFAULT_LIKERT_LABELS)
PROGRESS_MIN_ITEMS = 2000
EXPORT_FORMATS = ("jsonl", "csv")

ITEM_COLUMNS = (
    "external_id", "dataset", "source", "split", "domain", "text_level", "group_key",
    "design_unit", "content", "gold", "is_gold_check", "is_practice", "excluded", "exclusion_reason", "metadata",
)
JUDGMENT_COLUMNS = (
    "worker", "worker_provider", "stage", "stage_kind", "score", "choice", "choices",
    "difficult", "justification", "aspects", "extra", "presented_order", "time_spent_ms",
    "server_time_ms", "created_at", "assignment_id", "hit_id", "provider_assignment_id", "assignment_status",
    "counts",
)
AGGREGATE_COLUMNS = ("n_judgments", "n_workers", "mean_score", "score_std", "choice_counts",
                     "majority", "majority_tie", "validity_counts", "adjudicated",
                     "adjudication_note", "label", "aggregation", "aggregate_label",
                     "confidence", "counted")
_JUDGMENT_VALUES = {
    "worker": "worker__external_id",
    "worker_provider": "worker__provider",
    "stage": "stage__name",
    "stage_kind": "stage__kind",
    "score": "score",
    "choice": "choice",
    "choices": "choices",
    "difficult": "difficult",
    "justification": "justification",
    "aspects": "aspects",
    "extra": "extra",
    "presented_order": "presented_order",
    "time_spent_ms": "time_spent_ms",  # as the browser reported it
    "server_time_ms": "server_time_ms",  # as the server measured it (what review rules read)
    "created_at": "created_at",
    # Which piece of paid work a judgment came from, and where its review stands: a reader of
    # the export can check that only accepted work was used (empty for imported judgments).
    "assignment_id": "assignment_id",
    "hit_id": "assignment__hit__external_id",
    "provider_assignment_id": "assignment__external_id",
    "assignment_status": "assignment__status",
}


def counted_label(*, include_qualification: bool, include_rejected: bool) -> str:
    """What an aggregate row counted (its `counted` column): "data" (the counting rule), with
    "+practice+qualification" and/or "+rejected" when the export asked for them."""
    return ("data" + ("+practice+qualification" if include_qualification else "")
            + ("+rejected" if include_rejected else ""))


def non_data_stage_error(stage: Stage | None, *, include_qualification: bool = False
                         ) -> str | None:
    """Why an export of `stage` is refused, or None: a practice or qualification stage's
    judgments test workers, not items, and are exported only when asked for
    (`include_qualification`; a preference export never asks). The one rule of the judgment
    exports (`export_write`, `export_data`, the judgments API) and the preference pairs: the
    latter wrote an empty file for such a stage."""
    if stage is None or stage.kind not in NON_DATA_STAGE_KINDS or include_qualification:
        return None
    return (f"stage {stage.name!r} is a {stage.kind} stage: its judgments test workers, "
            "not items")


def export_note(*, project: Project, stage: Stage | None = None,
                include_qualification: bool = False, include_rejected: bool = False,
                per_judgment_rows: bool = True) -> str:
    """What an export of `project` (or of one `stage`) holds and what it leaves out, in words,
    from the counting rule the rows follow (`judgments_that_count`): the note the export
    command and the admin's export actions give beside the file, as the dashboard says "56
    judgments in all data stages" and progress "20 collected but not counted": "56 judgments
    that count, in all data stages; left out: 20 that do not count (…) and 15 answers of
    practice or qualification work or on items excluded from the study". An export said
    nothing of what it left out, so a file of 56 rows read as the whole study of 91."""
    everything = Judgment.objects.filter(item__project=project)
    if stage is not None:
        everything = everything.filter(stage=stage)
    data_only = not include_qualification
    written_judgments = judgments_that_count(everything, project=project,
                                             data_stages_only=data_only,
                                             include_rejected=include_rejected)
    written = written_judgments.count()
    kept_by_stage = (judgments_that_count(everything, project=project, data_stages_only=True,
                                          include_rejected=True).count()
                     if data_only else everything.count())
    non_data = everything.count() - kept_by_stage
    not_counted = kept_by_stage - written
    where = f"in stage “{stage.name}”" if stage is not None else "in all data stages"
    if include_qualification:
        where = (f"in stage “{stage.name}”" if stage is not None
                 else "in all stages") + ", practice and qualification answers included"
    held = (f"{written} judgment{'s' if written != 1 else ''}, {where}, work that does not "
            f"count included (its `counts` column says which)" if include_rejected
            else f"{written} judgment{'s that count' if written != 1 else ' that counts'}, "
                 f"{where}")
    left = []
    if not_counted:
        # STARC's practice rule is a reason too: a participant who failed a practice item.
        practice = (", participants who failed the practice" if project.kind == TaskKind.MC
                    else "")
        left.append(f"{not_counted} that do not count (rejected, returned or flagged work, "
                    f"unverified sessions, blocked workers{practice})")
    if non_data:
        left.append(f"{non_data} answer{'s' if non_data != 1 else ''} of practice or "
                    f"qualification work or on items excluded from the study")
    # A whole project's per-judgment export is also a copy of its items: an item with no
    # judgment written is one row with none ("10000 rows written: 9690 judgments" read as
    # 310 rows unexplained).
    unjudged = (Item.objects.filter(project=project).exclude(
        pk__in=written_judgments.values("item_id")).count()
        if per_judgment_rows and stage is None else 0)
    if unjudged:
        held += (f", and {unjudged} item{'s' if unjudged != 1 else ''} with none of them, one "
                 "row each with no judgment")
    # A decision replaces the item's earlier ones: rows carry the latest (the item's label).
    decisions = Adjudication.objects.filter(item__project=project)
    decided = decisions.values("item_id").distinct().count()
    if decided:
        held += (f"; the latest adjudication of {decided} item{'s' if decided != 1 else ''}"
                 if per_judgment_rows else "")
        replaced = decisions.count() - decided
        if replaced:
            left.append(f"{replaced} earlier adjudication{'s' if replaced != 1 else ''} "
                        "replaced by a later one")
    settings = settings_not_carried(project)
    return (held + ("; left out: " + " and ".join(left) if left else "; nothing left out")
            + ("; not in the file, set on a copy before reading its numbers: "
               + ", ".join(settings) if settings else ""))


def settings_not_carried(project: Project) -> list[str]:
    """The project's settings that change the numbers a copy reads and that no export holds
    (a file holds items and judgments, not a project), when they are not the defaults a
    project created from the file gets: its aggregation model (each item's label), its Likert
    scale (a copy on 5 points refuses the scores above 5) and its STARC mode (the analytics)."""
    settings = []
    if project.aggregation_model != resolve_aggregation(project.kind, ""):
        settings.append(f"aggregation model {project.aggregation_model}")
    if project.kind == TaskKind.LIKERT and project.scale_top != DEFAULT_SCALE_TOP:
        settings.append(f"{project.scale_top}-point scale")
    if project.kind == TaskKind.MC and project.experiment_mode not in ("", ExperimentMode.QA):
        settings.append(f"STARC mode {project.experiment_mode}")
    return settings


def _item_chunks(project: Project) -> Iterator[list[dict]]:
    """The project's items as dicts, in id order, CHUNK_SIZE at a time (keyset pagination)."""
    last_id = 0
    while True:
        chunk = list(
            Item.objects.filter(project=project, id__gt=last_id)
            .order_by("id")
            .values("id", *ITEM_COLUMNS)[:CHUNK_SIZE]
        )
        if not chunk:
            return
        yield chunk
        last_id = chunk[-1]["id"]


def _judgments_by_item(item_ids: list[int], *, project: Project, stage: Stage | None,
                       data_stages_only: bool, include_rejected: bool) -> dict[int, list[dict]]:
    """The judgments of these items that count (`judgments_that_count`), or every one of them
    with `include_rejected` (audits). `counts` says which count, so a file imported again
    brings only those back as data: a blocked worker's approved work says so nowhere else."""
    queryset = judgments_that_count(
        Judgment.objects.filter(item_id__in=item_ids), project=project,
        data_stages_only=data_stages_only, include_rejected=include_rejected)
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    counting = set(judgments_that_count(
        queryset, project=project, data_stages_only=data_stages_only)
        .values_list("id", flat=True)) if include_rejected else None
    grouped: dict[int, list[dict]] = defaultdict(list)
    for row in queryset.order_by("item_id", "id").values("id", "item_id", **{
        f"j_{name}": F(path) for name, path in _JUDGMENT_VALUES.items()
    }):
        judgment = {name: row[f"j_{name}"] for name in _JUDGMENT_VALUES}
        judgment["counts"] = counting is None or row["id"] in counting
        judgment["created_at"] = judgment["created_at"].isoformat()
        grouped[row["item_id"]].append(judgment)
    return grouped


def _item_part(project: Project, item: dict) -> dict[str, Any]:
    return {"project": project.slug, "kind": project.kind,
            **{name: item[name] for name in ITEM_COLUMNS}}


def judgment_rows(*, project: Project, stage: Stage | None = None,
                  progress: bool | None = None, include_rejected: bool = False,
                  include_qualification: bool = False) -> Iterator[dict[str, Any]]:
    """One row per judgment: {project, kind, item columns..., "judgment": {...}}: the judgments
    that count (`judgments_that_count`). Practice and qualification judgments only with
    `include_qualification` (their `stage_kind` says which they are); rejected, returned or
    flagged work and blocked workers' judgments only with `include_rejected`.

    Without `stage`, an item nobody judged yet appears once with "judgment": null, so the export
    is a complete copy of the project's items. Every row ends with the item's `adjudication`,
    a researcher's latest decision on it (null without): the item's label in every report,
    which the `jsonl` import stores again, so a copy's labels are the original's.
    """
    decisions = item_adjudications(project=project)
    for item, item_judgments in _items_with_judgments(
            project=project, stage=stage, progress=progress,
            data_stages_only=not include_qualification, include_rejected=include_rejected):
        adjudication = decisions.get(item["id"])
        if not item_judgments and stage is None:
            yield {**_item_part(project, item), "judgment": None, "adjudication": adjudication}
        for judgment in item_judgments:
            yield {**_item_part(project, item), "judgment": judgment,
                   "adjudication": adjudication}


def item_adjudications(*, project: Project) -> dict[int, dict]:
    """item id → its latest adjudication as an export writes it (and the `jsonl` import reads
    it): {"score", "choice", "note"}, and `decided_by` and `created_at` for the reader."""
    return {item_id: {"score": a.score, "choice": a.choice, "note": a.note,
                      "decided_by": a.decided_by.get_username() if a.decided_by else "",
                      "created_at": a.created_at.isoformat()}
            for item_id, a in latest_adjudications(project=project).items()}


def _items_with_judgments(*, project: Project, stage: Stage | None, progress: bool | None,
                          data_stages_only: bool, include_rejected: bool
                          ) -> Iterator[tuple[dict, list[dict]]]:
    """Every item of the project in id order with its judgments, a chunk at a time, advancing
    the progress bar per chunk."""
    with _progress(project, progress) as bar:
        for chunk in _item_chunks(project):
            judgments = _judgments_by_item([i["id"] for i in chunk], project=project,
                                           stage=stage, data_stages_only=data_stages_only,
                                           include_rejected=include_rejected)
            for item in chunk:
                yield item, judgments.get(item["id"], [])
            bar.update(len(chunk))


def _marked_roles(judgment: dict, *, validity_mode: bool) -> list[str]:
    """Roles a judgment marks as correct: in validity judging every role in `choices`."""
    if validity_mode and judgment["choices"]:
        return list(judgment["choices"])
    return [judgment["choice"]] if judgment["choice"] else []


def aggregate_rows(*, project: Project, stage: Stage | None = None,
                   progress: bool | None = None, include_rejected: bool = False,
                   aggregation: str | None = None,
                   include_qualification: bool = False) -> Iterator[dict[str, Any]]:
    """One row per item: item columns + number of judgments and workers, mean score and its
    population standard deviation (Likert); for A/B and MC the choice counts and the majority
    label (None on a tie, `majority_tie` true); `aggregate_label` and `confidence` by the
    project's aggregation model (`aggregation`: the project's setting unless the argument
    overrides it; ValueError when it does not fit the project's kind); `label` is the item's
    adjudicated answer when a researcher recorded one (`adjudicated`, `adjudication_note`),
    else `aggregate_label`. In validity-judging MC projects each role
    counts the judges who marked it correct, `validity_counts` counts one/several/none, and
    the majority is over role / "several" / "none"."""
    roles = AB_CHOICES if project.kind == TaskKind.AB else MC_ROLES
    validity_mode = project.kind == TaskKind.MC and project.experiment_mode == ExperimentMode.VALIDITY
    model = (resolve_aggregation(project.kind, aggregation) if aggregation
             else project.aggregation_model)
    decided = adjudicated_labels(project=project)
    human = item_labels(project=project, stage=stage, aggregation=model,
                        include_rejected=include_rejected,
                        include_qualification=include_qualification)
    counted = counted_label(include_qualification=include_qualification,
                            include_rejected=include_rejected)
    for item, item_judgments in _items_with_judgments(
            project=project, stage=stage, progress=progress,
            data_stages_only=not include_qualification, include_rejected=include_rejected):
        scores = [j["score"] for j in item_judgments if j["score"] is not None]
        row = {
            **_item_part(project, item),
            "n_judgments": len(item_judgments),
            "n_workers": len({j["worker"] for j in item_judgments}),
            "mean_score": round(fmean(scores), 6) if scores else None,
            "score_std": round(pstdev(scores), 6) if scores else None,
            "choice_counts": None, "majority": None, "majority_tie": None,
            "validity_counts": None,
        }
        if project.kind != TaskKind.LIKERT:
            counts = Counter(role for j in item_judgments
                             for role in _marked_roles(j, validity_mode=validity_mode))
            row["choice_counts"] = {role: counts.get(role, 0) for role in roles}
            labels = [(item["id"], label) for j in item_judgments
                      if (label := vote_label(j, validity_mode=validity_mode))]
            majority = majority_by_item(labels).get(item["id"])
            if majority is not None:
                row["majority"], row["majority_tie"] = majority[0], majority[1]
            if validity_mode:
                validity = Counter(vote_validity(j) for j in item_judgments)
                row["validity_counts"] = {v: validity.get(v, 0)
                                          for v in VALIDITY_CHOICES}
        # The item's label (`item_labels`, the label every door reads): a researcher's
        # adjudication when there is one (it always wins), else the aggregation model's label
        # (by default the majority for A/B and multiple choice, the mean score for Likert).
        entry = human.get(item["id"])
        aggregate = entry.aggregate if entry else None
        model_label = aggregate.label if aggregate else None
        if isinstance(model_label, float):
            model_label = round(model_label, 6)
        adjudication = decided.get(item["id"])
        row["adjudicated"] = adjudication["label"] if adjudication else None
        row["adjudication_note"] = adjudication["note"] if adjudication else None
        label = entry.label if entry else None
        row["label"] = round(label, 6) if isinstance(label, float) else label
        row["aggregation"] = model
        row["aggregate_label"] = model_label
        row["confidence"] = round(aggregate.confidence, 6) if aggregate else None
        row["counted"] = counted
        yield row


class _progress:
    def __init__(self, project: Project, progress: bool | None):
        self.project = project
        self.progress = progress

    def __enter__(self):
        total = Item.objects.filter(project=self.project).count()
        show = total >= PROGRESS_MIN_ITEMS if self.progress is None else self.progress
        self.bar = tqdm(total=total, desc=f"exporting {self.project.slug}", unit="item",
                        file=sys.stderr, disable=not show)
        return self.bar

    def __exit__(self, *exc):
        self.bar.close()
        return False


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json_dumps_strict(value, ensure_ascii=False, sort_keys=True)
    return value


def csv_columns(*, project: Project, aggregate: bool) -> list[str]:
    columns = ["project", "kind", *ITEM_COLUMNS]
    if not aggregate:
        # The item's adjudication last, so the earlier columns keep their places.
        return columns + list(JUDGMENT_COLUMNS) + ["adjudication"]
    columns += [c for c in AGGREGATE_COLUMNS if c not in ("choice_counts", "validity_counts")]
    if project.kind != TaskKind.LIKERT:
        roles = AB_CHOICES if project.kind == TaskKind.AB else MC_ROLES
        columns += [f"count_{role}" for role in roles]
    if project.kind == TaskKind.MC and project.experiment_mode == ExperimentMode.VALIDITY:
        columns += [f"validity_{v}" for v in VALIDITY_CHOICES]
    return columns


def _flatten(row: dict[str, Any]) -> dict[str, Any]:
    flat = {key: value for key, value in row.items()
            if key not in ("judgment", "choice_counts", "validity_counts")}
    if "judgment" in row:
        judgment = row["judgment"] or {}
        flat.update({name: judgment.get(name) for name in JUDGMENT_COLUMNS})
    if row.get("choice_counts"):
        flat.update({f"count_{role}": n for role, n in row["choice_counts"].items()})
    if row.get("validity_counts"):
        flat.update({f"validity_{v}": n for v, n in row["validity_counts"].items()})
    return flat


def export_write(*, project: Project, out: IO[str], fmt: str = "jsonl", aggregate: bool = False,
                 stage: Stage | None = None, progress: bool | None = None,
                 include_rejected: bool = False, aggregation: str | None = None,
                 include_qualification: bool = False) -> int:
    """Write the export to `out`; returns the number of rows written. Only judgments that count
    (`annotation.selectors.judgments_that_count`: data stages, accepted work, no blocked
    worker); practice and qualification judgments with `include_qualification`, rejected work
    with `include_rejected` (audits). `aggregation` overrides the project's aggregation model
    in an aggregated export (ValueError when it does not fit the project's kind, or without
    `aggregate`). A practice or qualification `stage` needs `include_qualification`
    (ValueError). CSV cells that a spreadsheet would run as a formula are escaped
    (`csv_safe`); JSON Lines are verbatim."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use {' or '.join(EXPORT_FORMATS)}")
    if aggregation and not aggregate:
        raise ValueError("an aggregation model applies to aggregated (per-item) exports only")
    if why := non_data_stage_error(stage, include_qualification=include_qualification):
        raise ValueError(f"{why}; they are exported only when asked (--include-qualification)")
    if aggregate:
        resolve_aggregation(project.kind, aggregation)  # a bad model fails before any output
        rows = aggregate_rows(project=project, stage=stage, progress=progress,
                              include_rejected=include_rejected, aggregation=aggregation,
                              include_qualification=include_qualification)
    else:
        rows = judgment_rows(project=project, stage=stage, progress=progress,
                             include_rejected=include_rejected,
                             include_qualification=include_qualification)
    return _rows_write(rows, out=out, fmt=fmt,
                       columns=csv_columns(project=project, aggregate=aggregate),
                       flatten=_flatten)


def spot_checks_write(*, checks: QuerySet[SpotCheck], out: IO[str], fmt: str = "jsonl") -> int:
    """Write the spot checks `checks` (`spot_check_list`: a project's; the admin's selection),
    oldest first, one row each (`SPOT_CHECK_COLUMNS`); returns the number written. CSV cells a
    spreadsheet would run as a formula are escaped (a note is free text), as every export's."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use {' or '.join(EXPORT_FORMATS)}")
    rows = (spot_check_row(check)
            for check in spot_checks_loaded(checks).iterator(chunk_size=CHUNK_SIZE))
    return _rows_write(rows, out=out, fmt=fmt, columns=list(SPOT_CHECK_COLUMNS),
                       flatten=dict)


def _rows_write(rows: Iterator[dict[str, Any]], *, out: IO[str], fmt: str, columns: list[str],
                flatten: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """Each row as a JSON line (verbatim), or flattened as a CSV row of `columns`
    (formula-safe)."""
    count = 0
    if fmt == "jsonl":
        for row in rows:
            out.write(json_dumps_strict(row, ensure_ascii=False) + "\n")
            count += 1
        return count
    writer = SafeDictWriter(out, fieldnames=columns, extrasaction="raise")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _csv_value(value) for key, value in flatten(row).items()})
        count += 1
    return count
