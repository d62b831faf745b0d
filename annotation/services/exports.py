"""Exporting a project's judgments (one row each) or per-item aggregates, as JSON Lines or CSV.

Rows are streamed: items are read in id order, a chunk at a time, with their judgments, so a
large project never sits in memory. The JSON Lines rows are exactly what the `jsonl` importer
reads back (see docs/DATA_FORMATS.md), so export → import round-trips.
"""
from __future__ import annotations

import csv
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from statistics import fmean, pstdev
from typing import IO, Any

from django.db.models import F
from tqdm import tqdm

from annotation.domain.item_content import AB_CHOICES, MC_ROLES
from annotation.models import Item, Judgment, Project, Stage, StageKind

CHUNK_SIZE = 2000
PROGRESS_MIN_ITEMS = 2000
EXPORT_FORMATS = ("jsonl", "csv")
# Practice and qualification answers test workers, not items: aggregates leave them out.
NON_DATA_STAGE_KINDS = (StageKind.PRACTICE, StageKind.QUALIFICATION)

ITEM_COLUMNS = (
    "external_id", "dataset", "source", "split", "domain", "text_level", "group_key", "content",
    "gold", "is_gold_check", "is_practice", "excluded", "exclusion_reason", "metadata",
)
JUDGMENT_COLUMNS = (
    "worker", "worker_provider", "stage", "stage_kind", "score", "choice", "choices",
    "difficult", "justification", "aspects", "extra", "presented_order", "time_spent_ms",
    "created_at",
)
AGGREGATE_COLUMNS = ("n_judgments", "n_workers", "mean_score", "score_std", "choice_counts")
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
    "time_spent_ms": "time_spent_ms",
    "created_at": "created_at",
}


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


def _judgments_by_item(item_ids: list[int], *, stage: Stage | None,
                       data_stages_only: bool) -> dict[int, list[dict]]:
    queryset = Judgment.objects.filter(item_id__in=item_ids)
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    elif data_stages_only:
        queryset = queryset.exclude(stage__kind__in=NON_DATA_STAGE_KINDS)
    grouped: dict[int, list[dict]] = defaultdict(list)
    for row in queryset.order_by("item_id", "id").values("item_id", **{
        f"j_{name}": F(path) for name, path in _JUDGMENT_VALUES.items()
    }):
        judgment = {name: row[f"j_{name}"] for name in _JUDGMENT_VALUES}
        judgment["created_at"] = judgment["created_at"].isoformat()
        grouped[row["item_id"]].append(judgment)
    return grouped


def _item_part(project: Project, item: dict) -> dict[str, Any]:
    return {"project": project.slug, "kind": project.kind,
            **{name: item[name] for name in ITEM_COLUMNS}}


def judgment_rows(*, project: Project, stage: Stage | None = None,
                  progress: bool | None = None) -> Iterator[dict[str, Any]]:
    """One row per judgment: {project, kind, item columns..., "judgment": {...}}.

    Without `stage`, an item nobody judged yet appears once with "judgment": null, so the export
    is a complete copy of the project's items.
    """
    with _progress(project, progress) as bar:
        for chunk in _item_chunks(project):
            judgments = _judgments_by_item([i["id"] for i in chunk], stage=stage,
                                           data_stages_only=False)
            for item in chunk:
                item_judgments = judgments.get(item["id"], [])
                if not item_judgments and stage is None:
                    yield {**_item_part(project, item), "judgment": None}
                for judgment in item_judgments:
                    yield {**_item_part(project, item), "judgment": judgment}
            bar.update(len(chunk))


def aggregate_rows(*, project: Project, stage: Stage | None = None,
                   progress: bool | None = None) -> Iterator[dict[str, Any]]:
    """One row per item: item columns + number of judgments and workers, mean score and its
    population standard deviation (Likert), choice counts (A/B and MC)."""
    roles = AB_CHOICES if project.kind == "ab" else MC_ROLES
    with _progress(project, progress) as bar:
        for chunk in _item_chunks(project):
            judgments = _judgments_by_item([i["id"] for i in chunk], stage=stage,
                                           data_stages_only=True)
            for item in chunk:
                item_judgments = judgments.get(item["id"], [])
                scores = [j["score"] for j in item_judgments if j["score"] is not None]
                row = {
                    **_item_part(project, item),
                    "n_judgments": len(item_judgments),
                    "n_workers": len({j["worker"] for j in item_judgments}),
                    "mean_score": round(fmean(scores), 6) if scores else None,
                    "score_std": round(pstdev(scores), 6) if scores else None,
                    "choice_counts": None,
                }
                if project.kind != "likert":
                    counts = Counter(j["choice"] for j in item_judgments if j["choice"])
                    row["choice_counts"] = {role: counts.get(role, 0) for role in roles}
                yield row
            bar.update(len(chunk))


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
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return value


def csv_columns(*, project: Project, aggregate: bool) -> list[str]:
    columns = ["project", "kind", *ITEM_COLUMNS]
    if not aggregate:
        return columns + list(JUDGMENT_COLUMNS)
    columns += [c for c in AGGREGATE_COLUMNS if c != "choice_counts"]
    if project.kind != "likert":
        roles = AB_CHOICES if project.kind == "ab" else MC_ROLES
        columns += [f"count_{role}" for role in roles]
    return columns


def _flatten(row: dict[str, Any]) -> dict[str, Any]:
    flat = {key: value for key, value in row.items() if key not in ("judgment", "choice_counts")}
    if "judgment" in row:
        judgment = row["judgment"] or {}
        flat.update({name: judgment.get(name) for name in JUDGMENT_COLUMNS})
    if row.get("choice_counts"):
        flat.update({f"count_{role}": n for role, n in row["choice_counts"].items()})
    return flat


def export_write(*, project: Project, out: IO[str], fmt: str = "jsonl", aggregate: bool = False,
                 stage: Stage | None = None, progress: bool | None = None) -> int:
    """Write the export to `out`; returns the number of rows written."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use {' or '.join(EXPORT_FORMATS)}")
    produce = aggregate_rows if aggregate else judgment_rows
    rows = produce(project=project, stage=stage, progress=progress)
    count = 0
    if fmt == "jsonl":
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
        return count
    writer = csv.DictWriter(out, fieldnames=csv_columns(project=project, aggregate=aggregate),
                            extrasaction="raise")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _csv_value(value) for key, value in _flatten(row).items()})
        count += 1
    return count
