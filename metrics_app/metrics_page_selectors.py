"""What the metrics page shows of a project (metrics_app/views/metrics_page.py), besides the
cached report the view reads: its recent scoring jobs, the metrics one may compute, and the
report's numbers as tables, with the names the page gives the baselines."""
from __future__ import annotations

from typing import Any

from annotation.judgment_selectors import human_score_name
from annotation.models import Project, TaskKind
from core.vocabulary import ModelKind
from metrics_app.models import Report, ScoringJob
from metrics_app.registry import metric_description, metric_names

STATS = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ"}
DEFAULT_METRICS = ("em", "f1", "bleu1", "bleu4", "rougeL", "meteor", "length")


def correlation_table(data: dict, stat: str) -> dict:
    """The report's correlations as rows of one statistic per group; per group the best
    metric is starred."""
    groups = data.get("groups") or []
    rows = []
    best: dict[str, str | None] = {}
    for group in groups:
        values = [(cells[group][stat], name) for name, cells in data["correlations"].items()
                  if group in cells and cells[group][stat] is not None]
        # no star when every metric ties (or only one metric has a value)
        best[group] = max(values)[1] if len({v for v, _ in values}) > 1 else None
    for name, cells in data.get("correlations", {}).items():
        row = {"name": name, "version": data["metrics"].get(name, ""), "cells": []}
        for group in groups:
            cell = cells.get(group) or {}
            row["cells"].append({
                "value": cell.get(stat), "ci": (cell.get("ci") or {}).get(stat) or [None, None],
                "why": cell.get("undefined"),
                "n": cell.get("n", 0), "best": best.get(group) == name,
            })
        rows.append(row)
    n_by_group = []
    for group in groups:
        ns = [cells[group]["n"] for cells in data["correlations"].values() if group in cells]
        n_by_group.append(max(ns) if ns else 0)
    for row in rows:  # a metric measured on fewer items (a learned one's unseen answers) says so
        for cell, n in zip(row["cells"], n_by_group, strict=True):
            cell["fewer"] = cell["value"] is not None and cell["n"] < n
    return {"groups": list(zip(groups, n_by_group, strict=True)), "rows": rows}


def accuracy_rows(section: dict, groups: list[str], labels: dict | None = None) -> list[dict]:
    """Table rows; per column the best *metric* is starred (baselines in `labels` never are),
    and nothing is starred when every metric ties."""
    labels = labels or {}
    rows = []
    for name, cells in section.items():
        rows.append({"name": labels.get(name, name), "baseline": name in labels, "cells": [
            {"value": cells.get(g, {}).get("accuracy"), "n": cells.get(g, {}).get("n", 0),
             "why": cells.get(g, {}).get("undefined"), "best": False}
            for g in groups
        ]})
    for index in range(len(groups)):
        column = [r["cells"][index]["value"] for r in rows
                  if not r["baseline"] and r["cells"][index]["value"] is not None]
        if len(set(column)) < 2:
            continue
        top = max(column)
        for r in rows:
            r["cells"][index]["best"] = not r["baseline"] and r["cells"][index]["value"] == top
    return rows


PAIRWISE_BASELINE_LABELS = {"random": "Random (baseline)",
                            "always_human": "Always human (baseline)",
                            "longer_answer": "Longer answer (baseline)"}
RECENT_JOBS = 5


def offered_metrics(project: Project) -> list[str]:
    """The metrics the page offers to compute: all but the A/B learned metric (`lerc_ab`) on
    projects of other kinds, whose items it cannot score (the job said only that no version
    of it was promoted)."""
    pairwise = ModelKind.PAIRWISE.metric_name
    return [name for name in metric_names()
            if name != pairwise or project.kind == TaskKind.AB]


def metrics_page(*, project: Project, report: Report | None, stat: str) -> dict[str, Any]:
    """The page's context but for the request's own options: `report` is the cached metric
    report (None: none yet), `stat` the correlation the table shows (a key of STATS)."""
    data = report.data if report else {}
    jobs = list(ScoringJob.objects.filter(project=project)[:RECENT_JOBS])
    context: dict[str, Any] = {
        "project": project, "stat": stat, "stats": STATS, "report": report, "data": data,
        "jobs": jobs,
        "running": any(job.status in ScoringJob.lease_states.in_flight for job in jobs),
        # Jobs the page offers to cancel (queued or running); whoever sees the page may.
        "cancellable_ids": {job.pk for job in jobs
                            if job.status in ScoringJob.lease_states.in_flight},
        "available": [{"name": n, "description": metric_description(n),
                       "checked": n in DEFAULT_METRICS} for n in offered_metrics(project)],
        "is_likert": project.kind == TaskKind.LIKERT,
        # The score "correct" reads, named as the project aggregates it.
        "human_score_name": human_score_name(project),
        # A learned metric is measured only on answers its version did not see.
        "left_out_seen": sorted((data.get("left_out_seen") or {}).items()),
    }
    if data.get("correlations"):
        context["table"] = correlation_table(data, stat)
    if data.get("decision"):
        decision = data["decision"]
        context["decision"] = {**decision, "rows": [
            {"name": name, **groups["overall"], "best": decision["best"].get("overall") == name}
            for name, groups in sorted(decision["metrics"].items(),
                                       key=lambda entry: -(entry[1]["overall"]["accuracy"] or 0))
        ]}
        # Two human values (EVOUNA's correct / wrong): scatter plots show two bands; ROC says more.
        context["binary_gold"] = decision.get("binary_gold", False)
    if data.get("significance"):
        context["significance"] = data["significance"]["pairs"]
    if data.get("minimal_pairs"):
        groups = list(next(iter(data["minimal_pairs"].values())).keys())
        context["minimal_pairs"] = {"groups": groups,
                                    "rows": accuracy_rows(data["minimal_pairs"], groups)}
    if data.get("pairwise"):
        pairwise = data["pairwise"]
        merged = {**pairwise["baselines"], **pairwise["metrics"]}
        context["pairwise"] = {"groups": pairwise["groups"],
                               "rows": accuracy_rows(merged, pairwise["groups"],
                                                     PAIRWISE_BASELINE_LABELS),
                               "unit": pairwise.get("unit", "")}
    return context
