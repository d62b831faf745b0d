"""Benchmark of the project report: a Likert project of 40,000 items × 3 judgments (MOCHA
scale) must give its report and dashboard charts in under 2 seconds.

    make bench B=reports        (bench/reports.py)

`build_benchmark_project` writes the rows through the importer's bulk path (minutes would go into per-row
services otherwise); `time_project_report` measures cold report, charts and a cache hit.
"""
from __future__ import annotations

import time

import numpy as np

from annotation.models import (
    Item,
    Judgment,
    Project,
    Provider,
    Stage,
    StageKind,
    TaskKind,
    Worker,
)

DATASETS = ("cosmosqa", "drop", "mcscript", "narrativeqa", "quoref", "socialiqa")
SOURCES = ("backtranslation", "gpt2", "mhpg", "xlnet")


def build_benchmark_project(
    *, n_items: int = 40_000, judgments_per_item: int = 3, n_workers: int = 300, seed: int = 0,
    slug: str = "bench-likert",
) -> Project:
    """A seeded Likert project: scores near a per-item truth, workers drawn without replacement
    per item. Rows go in through the importer's bulk path (COPY on PostgreSQL), so a million
    judgments take about a minute rather than the quarter hour model instances would."""
    from django.utils import timezone

    from annotation.services.imports import rows_insert

    rng = np.random.default_rng(seed)
    project = Project.objects.create(slug=slug, title="Benchmark", kind=TaskKind.LIKERT)
    stage = Stage.objects.create(project=project, kind=StageKind.FULL, name="full",
                                 provider=Provider.IMPORT)
    Worker.objects.bulk_create(
        [Worker(provider=Provider.IMPORT, external_id=f"{slug}-w{i}") for i in range(n_workers)]
    )
    worker_ids = np.array(
        Worker.objects.filter(external_id__startswith=f"{slug}-w").values_list("pk", flat=True)
    )
    now = timezone.now()
    content = {"passage": "p", "question": "q", "references": ["r"], "candidate": "c"}
    for start in range(0, n_items, 50_000):
        rows_insert(Item, [
            {"project_id": project.pk, "external_id": f"b{i}",
             "dataset": DATASETS[i % len(DATASETS)], "source": SOURCES[i % len(SOURCES)],
             "split": "dev", "content": content, "created_at": now}
            for i in range(start, min(n_items, start + 50_000))
        ])
    item_ids = np.array(project.items.order_by("id").values_list("pk", flat=True))
    truth = rng.integers(1, 6, size=n_items)
    chosen = _distinct_columns(rng, n_items, len(worker_ids), judgments_per_item)
    scores = np.clip(truth[:, None] + rng.integers(-1, 2, size=chosen.shape), 1, 5)
    times = rng.integers(3000, 60000, size=chosen.shape)
    rows = [
        {"item_id": int(item_ids[i]), "stage_id": stage.pk,
         "worker_id": int(worker_ids[chosen[i, j]]), "score": int(scores[i, j]),
         "time_spent_ms": int(times[i, j]), "created_at": now}
        for i in range(n_items) for j in range(judgments_per_item)
    ]
    for start in range(0, len(rows), 100_000):
        rows_insert(Judgment, rows[start:start + 100_000])
    return project


def _distinct_columns(rng: np.random.Generator, n_rows: int, n_values: int, k: int) -> np.ndarray:
    """k distinct values in [0, n_values) per row, without an n_rows × n_values matrix:
    redraw the rows that repeat a value until none do."""
    chosen = rng.integers(0, n_values, size=(n_rows, k))
    while True:
        ordered = np.sort(chosen, axis=1)
        clash = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if not clash.any():
            return chosen
        chosen[clash] = rng.integers(0, n_values, size=(int(clash.sum()), k))


def time_project_report(*, project: Project) -> dict[str, float]:
    """Seconds (wall and this process's CPU; on a shared machine the CPU time is the stable
    number) for: the cold report, its charts, and a cached report + charts (a dashboard view
    after the Celery refresh). matplotlib is imported first: a server imports it once."""
    import matplotlib.figure  # noqa: F401

    from .charts import dashboard_charts
    from .project import (
        cached_project_report,
        dashboard_charts_refresh,
        dashboard_data,
        project_report,
        report_refresh,
    )

    def timed(fn):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        return result, time.perf_counter() - wall, time.process_time() - cpu

    report, report_s, report_cpu = timed(lambda: project_report(project=project))
    _charts, charts_s, charts_cpu = timed(lambda: dashboard_charts(report))
    report_refresh(project=project)
    dashboard_charts_refresh(project=project)
    _cached, cached_s, cached_cpu = timed(lambda: dashboard_data(project=project))
    _report, cached_report_s, _cpu = timed(lambda: cached_project_report(project=project))
    return {
        "n_judgments": report["n_judgments"],
        "report_s": round(report_s, 3), "report_cpu_s": round(report_cpu, 3),
        "charts_s": round(charts_s, 3), "charts_cpu_s": round(charts_cpu, 3),
        "cold_total_s": round(report_s + charts_s, 3),
        "cached_report_s": round(cached_report_s, 4),
        "cached_dashboard_s": round(cached_s, 3), "cached_dashboard_cpu_s": round(cached_cpu, 3),
    }
