"""The benchmarks in run order; each module exposes `BENCHMARK`. Imported lazily so that
`--only reports` never imports torch."""
from __future__ import annotations

import importlib

MODULES = {
    "annotator_load": "bench.annotator_load",
    "reports": "bench.reports",
    "report_scale": "bench.report_scale",
    "evouna_pages": "bench.evouna_pages",
    "import_export": "bench.import_export",
    "scoring": "bench.scoring",
    "metric_throughput": "bench.metric_throughput",
    "lerc_training": "bench.lerc_training",
    "publishing": "bench.publishing",
    "efficiency": "bench.efficiency",
    "aggregation": "bench.aggregation",
    "leaderboard": "bench.leaderboard",
    "judges": "bench.judges",
}


def names() -> list[str]:
    return list(MODULES)


def get(name: str):
    if name not in MODULES:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(MODULES)}")
    return importlib.import_module(MODULES[name]).BENCHMARK
