"""The metrics page of a project: which automatic metric tracks the annotators best.

Reads the cached metric report (never scores in the request); the "compute" button queues a
ScoringJob for the Celery workers. Scatter plots are rendered server-side with matplotlib (Agg).
"""
from __future__ import annotations

import io

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.access_selectors import access_project
from metrics_app.metrics_page_selectors import STATS, metrics_page
from metrics_app.registry import metric_names
from metrics_app.services.meta_evaluation_report import (
    metric_report_cached,
    normalize_params,
    project_metric_versions,
    roc_curves,
    scatter_points,
)
from metrics_app.services.scoring import SCORABLE_KINDS, scoring_jobs_create


def _params_from(query) -> dict:
    return normalize_params({
        "znormalize": query.get("znormalize") == "1",
        "drop_exact_matches": query.get("drop_exact_matches") == "1",
        "drop_number_pairs": query.get("drop_number_pairs") == "1",
    })


@login_required
def project_metrics(request, slug: str):
    project = access_project(request.user, slug)
    params = _params_from(request.GET)
    stat = request.GET.get("stat", "pearson")
    if stat not in STATS:
        stat = "pearson"
    # The cached report comes from the report cache (services/meta_evaluation_report.py),
    # everything else the page shows from its selector (metrics_app/metrics_page_selectors.py).
    report, stale = metric_report_cached(project=project, params=params, any_resamples=True)
    context = {
        **metrics_page(project=project, report=report, stat=stat),
        "params": params, "stale": stale,
        "stored": project_metric_versions(project=project),
        "scorable": project.kind in SCORABLE_KINDS,
    }
    query = request.GET.copy()
    query.pop("stat", None)
    context["query_without_stat"] = query.urlencode()
    return render(request, "metrics_app/metrics.html", context)


@login_required
@require_POST
def project_metrics_compute(request, slug: str):
    project = access_project(request.user, slug)
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


def _png_response(figure) -> HttpResponse:
    """A matplotlib figure as a PNG answer the browser may keep for a minute."""
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    response = HttpResponse(buffer.getvalue(), content_type="image/png")
    response["Cache-Control"] = "private, max-age=60"
    return response


@login_required
def project_metric_scatter(request, slug: str, metric: str):
    """PNG scatter of one metric against the human gold score (jittered: scores are discrete)."""
    project = access_project(request.user, slug)
    params = _params_from(request.GET)  # the table's options: same items, filters and scale
    znormalize = params["znormalize"]
    xs, ys, total = scatter_points(project=project, metric=metric, params=params)
    if not xs:
        raise Http404("No scores for this metric")
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib.figure import Figure

    rng = np.random.default_rng(0)
    y = np.asarray(ys) + rng.uniform(-0.12, 0.12, len(ys)) * (0 if znormalize else 1)
    figure = Figure(figsize=(3.6, 2.8), dpi=110)
    axes = figure.subplots()
    axes.scatter(xs, y, s=6, alpha=0.25 if len(xs) > 500 else 0.6, color="#0b57d0",
                 edgecolors="none")
    axes.set_xlabel(metric)
    axes.set_ylabel("human score (z)" if znormalize else "human score")
    shown = f"n={total}" if total == len(xs) else f"{len(xs)} of n={total} shown"
    axes.set_title(f"{metric} vs human ({shown})", fontsize=9)
    axes.tick_params(labelsize=8)
    return _png_response(figure)


@login_required
def project_metric_roc(request, slug: str):
    """PNG of every metric's ROC curve (correct = mean human score ≥ 3) on the items the
    correct/incorrect table measures."""
    project = access_project(request.user, slug)
    curves, _binary = roc_curves(project=project, params=_params_from(request.GET))
    if not curves:
        raise Http404("No metric scores on items judged both correct and incorrect")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(4.6, 3.6), dpi=110)
    axes = figure.subplots()
    axes.plot([0, 1], [0, 1], linestyle=":", color="#888888", linewidth=1)
    ranked = sorted(curves.items(), key=lambda entry: -entry[1]["auc"])
    for name, curve in ranked:
        axes.plot(curve["fpr"], curve["tpr"], linewidth=1.3,
                  label=f"{name} (AUC {curve['auc']:.3f})")
    axes.set_xlabel("false positive rate (wrong answers accepted)", fontsize=8)
    axes.set_ylabel("true positive rate", fontsize=8)
    axes.set_title(f"ROC, n={next(iter(curves.values()))['n']} measured items", fontsize=9)
    axes.legend(fontsize=7, loc="lower right")
    axes.tick_params(labelsize=8)
    return _png_response(figure)
