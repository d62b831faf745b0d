"""`import_data` is the job that changes a project's data, so it leaves the project report
computed: the dashboard's first visitor reads it instead of computing it in the request."""
from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from annotation.models import Judgment, Project
from metrics_app.models import Report
from metrics_app.reports.project import REPORT_KIND, cached_project_report
from tests.support.imports import LIKERT_ROW, write_jsonl

pytestmark = pytest.mark.django_db


def _import(path, *args) -> str:
    out = io.StringIO()
    call_command("import_data", "jsonl", str(path), "--project", "study", "--create",
                 "--kind", "likert", "--no-progress", *args, stdout=out)
    return out.getvalue()


def test_an_import_leaves_the_report_computed_and_current(tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "items.jsonl", [LIKERT_ROW])
    output = _import(path)
    project = Project.objects.get(slug="study")
    report = Report.objects.get(project=project, kind=REPORT_KIND, stage=None)
    assert report.judgment_watermark == max(Judgment.objects.values_list("id", flat=True))
    assert report.data["n_judgments"] == 2
    assert "Project report precomputed" in output and "succeeded" not in output

    # The dashboard's read is a cache hit: computing it again would be a failure here.
    def refuse(**kwargs):
        raise AssertionError("the report was computed again instead of read")

    monkeypatch.setattr("metrics_app.reports.project.project_report", refuse)
    assert cached_project_report(project=project)["n_judgments"] == 2


def test_no_report_skips_it_and_a_repeat_import_changes_nothing(tmp_path):
    path = write_jsonl(tmp_path / "items.jsonl", [LIKERT_ROW])
    output = _import(path, "--no-report")
    assert "precomputed" not in output
    assert not Report.objects.filter(kind=REPORT_KIND).exists()
    again = _import(path)
    assert "nothing new" in again and "precomputed" not in again
