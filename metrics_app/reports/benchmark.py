"""Benchmark of the project report: a Likert project of 40,000 items × 3 judgments (MOCHA
scale) must give its report and dashboard charts in under 2 seconds.

    make bench B=reports        (bench/reports.py)

`build_benchmark_project` writes the rows with bulk_create (minutes would go into per-row
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
    rng = np.random.default_rng(seed)
    project = Project.objects.create(slug=slug, title="Benchmark", kind=TaskKind.LIKERT)
    stage = Stage.objects.create(project=project, kind=StageKind.FULL, name="full",
                                 provider=Provider.IMPORT)
    Worker.objects.bulk_create(
        [Worker(provider=Provider.IMPORT, external_id=f"{slug}-w{i}") for i in range(n_workers)]
    )
    worker_ids = list(
        Worker.objects.filter(external_id__startswith=f"{slug}-w").values_list("pk", flat=True)
    )
    Item.objects.bulk_create(
        [
            Item(project=project, external_id=f"b{i}", dataset=DATASETS[i % len(DATASETS)],
                 source=SOURCES[i % len(SOURCES)], split="dev",
                 content={"passage": "p", "question": "q", "references": ["r"],
                          "candidate": "c"})
            for i in range(n_items)
        ],
        batch_size=2000,
    )
    item_ids = list(project.items.order_by("id").values_list("pk", flat=True))
    truth = rng.integers(1, 6, size=n_items)
    judgments = []
    for position, item_id in enumerate(item_ids):
        chosen = rng.choice(len(worker_ids), size=judgments_per_item, replace=False)
        for w in chosen:
            score = int(np.clip(truth[position] + rng.integers(-1, 2), 1, 5))
            judgments.append(Judgment(item_id=item_id, stage=stage, worker_id=worker_ids[w],
                                      score=score, time_spent_ms=int(rng.integers(3000, 60000))))
    Judgment.objects.bulk_create(judgments, batch_size=5000)
    return project


def time_project_report(*, project: Project) -> dict[str, float]:
    """Seconds (wall and this process's CPU; on a shared machine the CPU time is the stable
    number) for: the cold report, its charts, and a cached report + charts (a dashboard view
    after the Celery refresh). matplotlib is imported first: a server imports it once."""
    import matplotlib.figure  # noqa: F401

    from .charts import dashboard_charts
    from .project import cached_project_report, dashboard_data, project_report, report_refresh

    def timed(fn):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        return result, time.perf_counter() - wall, time.process_time() - cpu

    report, report_s, report_cpu = timed(lambda: project_report(project=project))
    _charts, charts_s, charts_cpu = timed(lambda: dashboard_charts(report))
    report_refresh(project=project)
    dashboard_data(project=project)
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
