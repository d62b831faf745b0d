"""The judges page (`/metrics/SLUG/judges/`): every judge against the human labels side by
side (metrics_app/services/judges/alignment.py, cached), with a reliability plot per judge
that gives probabilities."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from annotation.access_selectors import access_project
from metrics_app.reports.charts import reliability_png
from metrics_app.services.judges.alignment import PAGE_RESAMPLES, cached_judge_alignment_report

STATS = ("accuracy", "kappa", "roc_auc", "pearson", "spearman", "ece")


# A finished judge job precomputes the page's report (`PAGE_RESAMPLES`); the page computes in
# the request only when nothing is cached (a new human judgment or score since, another
# ?resamples=): 21 s at 200 resamples on EVOUNA-NQ x 5 judges, 0.05 s cached.


def _resamples(request) -> int:
    try:
        return max(0, min(5000, int(request.GET.get("resamples", PAGE_RESAMPLES))))
    except ValueError:
        return PAGE_RESAMPLES


@login_required
def project_judges(request, slug: str):
    project = access_project(request.user, slug)
    report = cached_judge_alignment_report(project=project, n_resamples=_resamples(request))
    rows = []
    for label, judge in (report.get("judges") or {}).items():
        rows.append({"label": label, "judge": judge,
                     "cells": [{"name": name, "value": judge.get(name),
                                "ci": judge["ci"].get(name),
                                "why": (judge.get("undefined") or {}).get(name)}
                               for name in STATS],
                     "estimate": (report.get("estimates") or {}).get(label)})
    return render(request, "metrics_app/judges.html", {
        "project": project, "report": report, "rows": rows, "stats": STATS})


@login_required
def project_judge_reliability(request, slug: str, label: str):
    """PNG: the judge's reliability diagram (mean probability vs observed rate per bin)."""
    project = access_project(request.user, slug)
    report = cached_judge_alignment_report(project=project, n_resamples=_resamples(request))
    judge = (report.get("judges") or {}).get(label)
    if not judge or not judge.get("reliability"):
        raise Http404("No probabilities from this judge")
    response = HttpResponse(reliability_png(judge, label=label), content_type="image/png")
    response["Cache-Control"] = "private, max-age=60"
    return response
