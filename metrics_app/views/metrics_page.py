"""The metrics page of a project: which automatic metric tracks the annotators best.

Reads the cached metric report (never scores in the request); the "compute" button queues a
ScoringJob for the Celery workers. Scatter plots are PNGs drawn by metrics_app/reports/charts.py.
"""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.models import Project, TaskKind
from annotation.selectors import projects_visible_to
from metrics_app.models import ScoringJob, ScoringStatus
from metrics_app.registry import metric_description, metric_names
from metrics_app.reports.charts import metric_scatter_png, roc_png
from metrics_app.score_selectors import project_metric_versions
from metrics_app.services.meta_evaluation_report import (
    metric_report_cached,
    normalize_params,
    roc_curves,
    scatter_points,
)
from metrics_app.services.scoring import SCORABLE_KINDS, scoring_jobs_create

STATS = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ"}
DEFAULT_METRICS = ("em", "f1", "bleu1", "bleu4", "rougeL", "meteor", "length")


def _visible_project(request, slug: str) -> Project:
    project = projects_visible_to(request.user).filter(slug=slug).first()
    if project is None:
        raise Http404("No such project")
    return project


def _params_from(query) -> dict:
    return normalize_params({
        "znormalize": query.get("znormalize") == "1",
        "drop_exact_matches": query.get("drop_exact_matches") == "1",
        "drop_number_pairs": query.get("drop_number_pairs") == "1",
    })


def _correlation_table(data: dict, stat: str) -> dict:
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
                "n": cell.get("n", 0), "best": best.get(group) == name,
            })
        rows.append(row)
    n_by_group = []
    for group in groups:
        ns = [cells[group]["n"] for cells in data["correlations"].values() if group in cells]
        n_by_group.append(max(ns) if ns else 0)
    return {"groups": list(zip(groups, n_by_group, strict=True)), "rows": rows}


def _accuracy_rows(section: dict, groups: list[str], labels: dict | None = None) -> list[dict]:
    """Table rows; per column the best *metric* is starred (baselines in `labels` never are),
    and nothing is starred when every metric ties."""
    labels = labels or {}
    rows = []
    for name, cells in section.items():
        rows.append({"name": labels.get(name, name), "baseline": name in labels, "cells": [
            {"value": cells.get(g, {}).get("accuracy"), "n": cells.get(g, {}).get("n", 0),
             "best": False}
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


@login_required
def project_metrics(request, slug: str):
    project = _visible_project(request, slug)
    params = _params_from(request.GET)
    stat = request.GET.get("stat", "pearson")
    if stat not in STATS:
        stat = "pearson"
    report, stale = metric_report_cached(project=project, params=params, any_resamples=True)
    data = report.data if report else {}
    jobs = list(ScoringJob.objects.filter(project=project)[:5])
    running = any(job.status in (ScoringStatus.QUEUED, ScoringStatus.RUNNING) for job in jobs)
    context = {
        "project": project, "params": params, "stat": stat, "stats": STATS,
        "report": report, "stale": stale, "data": data, "jobs": jobs, "running": running,
        "available": [{"name": n, "description": metric_description(n),
                       "checked": n in DEFAULT_METRICS} for n in metric_names()],
        "stored": project_metric_versions(project=project),
        "is_likert": project.kind == TaskKind.LIKERT,
        "scorable": project.kind in SCORABLE_KINDS,
    }
    if data.get("correlations"):
        context["table"] = _correlation_table(data, stat)
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
                                    "rows": _accuracy_rows(data["minimal_pairs"], groups)}
    if data.get("pairwise"):
        pairwise = data["pairwise"]
        labels = {"random": "Random (baseline)", "always_human": "Always human (baseline)",
                  "longer_answer": "Longer answer (baseline)"}
        merged = {**pairwise["baselines"], **pairwise["metrics"]}
        context["pairwise"] = {"groups": pairwise["groups"],
                               "rows": _accuracy_rows(merged, pairwise["groups"], labels),
                               "unit": pairwise.get("unit", "")}
    query = request.GET.copy()
    query.pop("stat", None)
    context["query_without_stat"] = query.urlencode()
    return render(request, "metrics_app/metrics.html", context)


@login_required
@require_POST
def project_metrics_compute(request, slug: str):
    project = _visible_project(request, slug)
    known = set(metric_names())
    names = [n for n in request.POST.getlist("metric") if n in known]
    target = reverse("metrics:project-metrics", args=[project.slug])
    if project.kind not in SCORABLE_KINDS:
        messages.error(request, "Multiple-choice items have no candidate or reference answers "
                                "to score.")
        return redirect(target)
    if not names:
        messages.error(request, "Choose at least one metric to compute.")
        return redirect(target)
    jobs = scoring_jobs_create(project=project, metric_names=names, user=request.user)
    messages.success(request, f"Queued {', '.join(names)} ({len(jobs)} job(s)); this page "
                              "refreshes until they finish.")
    return redirect(target)


def _png_response(png: bytes) -> HttpResponse:
    """A PNG answer the browser may keep for a minute."""
    response = HttpResponse(png, content_type="image/png")
    response["Cache-Control"] = "private, max-age=60"
    return response


@login_required
def project_metric_scatter(request, slug: str, metric: str):
    """PNG scatter of one metric against the human gold score (jittered: scores are discrete)."""
    project = _visible_project(request, slug)
    params = _params_from(request.GET)  # the table's options: same items, filters and scale
    xs, ys, total = scatter_points(project=project, metric=metric, params=params)
    if not xs:
        raise Http404("No scores for this metric")
    return _png_response(metric_scatter_png(xs, ys, total=total, metric=metric,
                                            znormalize=params["znormalize"]))


@login_required
def project_metric_roc(request, slug: str):
    """PNG of every metric's ROC curve (correct = mean human score ≥ 3) on the items the
    correct/incorrect table measures."""
    project = _visible_project(request, slug)
    curves, _binary = roc_curves(project=project, params=_params_from(request.GET))
    if not curves:
        raise Http404("No metric scores on items judged both correct and incorrect")
    return _png_response(roc_png(curves))
