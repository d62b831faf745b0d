"""The judges page (`/metrics/SLUG/judges/`): every judge against the human labels side by
side (metrics_app/services/judges/alignment.py, cached), with a reliability plot per judge
that gives probabilities, and a form to upload a judge's verdicts (the service behind
`manage.py import_verdicts` and the API's `judges/verdicts/`: the same checks and messages)."""
from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotation.access_selectors import access_project
from metrics_app.reports.charts import reliability_png
from metrics_app.services.judges.alignment import PAGE_RESAMPLES, cached_judge_alignment_report
from metrics_app.services.judges.imports import (
    IMPORT_REFUSED,
    upload_rows,
    verdicts_import,
    verdicts_import_summary,
)

STATS = ("accuracy", "kappa", "roc_auc", "pearson", "spearman", "ece")


# A finished judge job precomputes the page's report (`PAGE_RESAMPLES`); the page computes in
# the request only when nothing is cached (a new human judgment or score since, another
# ?resamples=): 21 s at 200 resamples on EVOUNA-NQ x 5 judges, 0.05 s cached.


def _resamples(request) -> int:
    try:
        return max(0, min(5000, int(request.GET.get("resamples", PAGE_RESAMPLES))))
    except ValueError:
        return PAGE_RESAMPLES


class VerdictUploadForm(forms.Form):
    file = forms.FileField(help_text="a .jsonl or .csv file: item_id, verdict, score, "
                                     "probability, reasoning (docs/DATA_FORMATS.md)")
    judge = forms.CharField(required=False, help_text="empty: the file's judge column")
    version = forms.CharField(required=False, help_text="empty: the file's judge_version "
                                                        "column")


@login_required
def project_judges(request, slug: str):
    return _judges_page(request, access_project(request.user, slug), form=VerdictUploadForm())


@login_required
@require_POST
def judge_verdicts_upload(request, slug: str):
    """The page's upload form: stored, the page says what (as the command does); refused, the
    page shows every problem with its line, and nothing is stored."""
    project = access_project(request.user, slug)
    form = VerdictUploadForm(request.POST, request.FILES)
    error = ""
    if form.is_valid():
        given = form.cleaned_data
        try:
            result = verdicts_import(project=project, rows=upload_rows(given["file"]),
                                     judge=given["judge"] or None,
                                     version=given["version"] or None)
        except IMPORT_REFUSED as exc:
            error = str(exc)
        else:
            messages.success(request, verdicts_import_summary(result, project))
            return redirect("metrics:project-judges", project.slug)
    return _judges_page(request, project, form=form, error=error, status=400)


def _judges_page(request, project, *, form, error: str = "", status: int = 200):
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
        "project": project, "report": report, "rows": rows, "stats": STATS,
        "verdict_form": form, "verdict_error": error}, status=status)


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
