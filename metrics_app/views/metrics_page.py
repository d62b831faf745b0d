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

from annotation.access_selectors import access_project
from metrics_app.access_selectors import access_project_job
from metrics_app.metrics_page_selectors import STATS, metrics_page
from metrics_app.models import ScoringJob
from metrics_app.registry import metric_names
from metrics_app.reports.charts import metric_scatter_png, roc_png
from metrics_app.score_selectors import project_metric_versions
from metrics_app.services.job_leases import JobNotCancellable, leased_job_cancel
from metrics_app.services.meta_evaluation_report import (
    metric_report_cached_with_reason,
    normalize_params,
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
    report, stale_reason = metric_report_cached_with_reason(project=project, params=params,
                                                           any_resamples=True)
    context = {
        **metrics_page(project=project, report=report, stat=stat),
        "params": params, "stale": bool(stale_reason), "stale_reason": stale_reason,
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
    # A job already queued or running with the same metrics is answered, not queued twice.
    messages.success(request, f"Scoring {', '.join(names)}: job(s) "
                              f"{', '.join(str(job.pk) for job in jobs)} (one already queued "
                              "or running with the same metrics is reused, not queued "
                              "twice); this page refreshes until they finish.")
    return redirect(target)


@login_required
@require_POST
def scoring_job_cancel_view(request, slug: str, job_id: int):
    """The job list's Cancel button: whoever may open the page (and so queue a job) may cancel
    one of its queued or running jobs."""
    project = access_project(request.user, slug)
    job = access_project_job(project, ScoringJob, job_id)
    try:
        job = leased_job_cancel(job=job, user=request.user)
    except JobNotCancellable as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Scoring job {job.pk}: {job.error}.")
    return redirect("metrics:project-metrics", project.slug)


def _png_response(png: bytes) -> HttpResponse:
    """A PNG answer the browser may keep for a minute."""
    response = HttpResponse(png, content_type="image/png")
    response["Cache-Control"] = "private, max-age=60"
    return response


@login_required
def project_metric_scatter(request, slug: str, metric: str):
    """PNG scatter of one metric against the human gold score (jittered: scores are discrete)."""
    project = access_project(request.user, slug)
    params = _params_from(request.GET)  # the table's options: same items, filters and scale
    xs, ys, total = scatter_points(project=project, metric=metric, params=params)
    if not xs:
        raise Http404("No scores for this metric")
    return _png_response(metric_scatter_png(xs, ys, total=total, metric=metric,
                                            znormalize=params["znormalize"]))


@login_required
def project_metric_roc(request, slug: str):
    """PNG of every metric's ROC curve (correct = the project's human score at or above its
    scale's midpoint, `Project.correct_at`; `human_score_name`) on the items the correct/incorrect table measures."""
    project = access_project(request.user, slug)
    curves, _binary = roc_curves(project=project, params=_params_from(request.GET))
    if not curves:
        raise Http404("No metric scores on items judged both correct and incorrect")
    return _png_response(roc_png(curves))
