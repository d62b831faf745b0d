"""metrics_app/metrics_page_selectors.py: what the metrics page shows besides the cached report:
recent jobs and whether one runs, the metrics to choose, and the report's numbers as tables
(best metric starred, ties unstarred, baselines named and never starred)."""
from __future__ import annotations

import pytest

from annotation.models import TaskKind
from metrics_app.metrics_page_selectors import RECENT_JOBS, metrics_page
from metrics_app.models import Report, ScoringJob, ScoringStatus
from testing.factories import make_project

pytestmark = pytest.mark.django_db


def _cells(value, n=10):
    return {"overall": {"accuracy": value, "n": n}}


def test_no_report_yet_lists_the_jobs_and_the_metric_choices():
    project = make_project(TaskKind.LIKERT)
    for _ in range(RECENT_JOBS + 2):
        ScoringJob.objects.create(project=project, metrics=["f1"], status=ScoringStatus.DONE)
    context = metrics_page(project=project, report=None, stat="pearson")
    assert context["data"] == {} and "table" not in context and "pairwise" not in context
    assert len(context["jobs"]) == RECENT_JOBS and context["running"] is False
    assert context["is_likert"] is True
    f1 = next(choice for choice in context["available"] if choice["name"] == "f1")
    assert f1["checked"] is True and f1["description"]
    ScoringJob.objects.create(project=project, metrics=["f1"], status=ScoringStatus.QUEUED)
    assert metrics_page(project=project, report=None, stat="pearson")["running"] is True


def test_the_reports_numbers_become_tables_with_the_baselines_named():
    project = make_project(TaskKind.AB)
    report = Report.objects.create(project=project, kind="metric_report", data={
        "groups": ["all"],
        "metrics": {"f1": "1", "em": "1"},
        "correlations": {
            "f1": {"all": {"pearson": 0.5, "spearman": 0.4, "n": 9, "ci": {"pearson": [0.1, 0.8]}}},
            "em": {"all": {"pearson": 0.3, "spearman": 0.4, "n": 7}},
        },
        "pairwise": {"groups": ["overall"], "unit": "pairs",
                     "baselines": {"random": _cells(0.9)},
                     "metrics": {"f1": _cells(0.7), "em": _cells(0.6)}},
    })
    context = metrics_page(project=project, report=report, stat="pearson")
    table = context["table"]
    assert table["groups"] == [("all", 9)]
    rows = {row["name"]: row["cells"][0] for row in table["rows"]}
    assert rows["f1"]["best"] and not rows["em"]["best"]
    assert rows["f1"]["ci"] == [0.1, 0.8] and rows["em"]["ci"] == [None, None]
    # Spearman ties: nobody starred.
    tied = metrics_page(project=project, report=report, stat="spearman")["table"]
    assert not any(row["cells"][0]["best"] for row in tied["rows"])
    pairwise = {row["name"]: row for row in context["pairwise"]["rows"]}
    # The baseline scores highest, is named for the page and never starred; the best metric is.
    assert pairwise["Random (baseline)"]["baseline"]
    assert not pairwise["Random (baseline)"]["cells"][0]["best"]
    assert pairwise["f1"]["cells"][0]["best"] and not pairwise["em"]["cells"][0]["best"]
    assert context["pairwise"]["unit"] == "pairs" and context["is_likert"] is False
