"""Two refreshes of one cached report at once — the beat's and a researcher's click, two web
workers — leave one `Report` row, not two for readers to pick from, and readers get the newest
data. The race is forced: each refresh waits, after reading what is stored, for the other to
have read too (for a few seconds: with the project lock the other cannot get there)."""
from __future__ import annotations

import threading
import traceback

import pytest
from django.db import connections

from annotation.models import Project, StageKind, TaskKind
from metrics_app.models import Report
from metrics_app.reports import store
from metrics_app.reports.project import (
    CHARTS_KIND,
    REPORT_KIND,
    dashboard_charts_refresh,
    fresh_cached_report,
    report_refresh,
)
from metrics_app.services.meta_evaluation_report import (
    REPORT_KIND as METRIC_KIND,
)
from metrics_app.services.meta_evaluation_report import (
    metric_report_cached,
    metric_report_refresh,
)
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker
from tests.support.paths import require_shared_database

pytestmark = [pytest.mark.reliability, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _shared_database():
    require_shared_database()


@pytest.fixture
def project():
    project = make_project(TaskKind.LIKERT, slug="race", title="race")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"w{i}") for i in range(2)]
    for n in range(4):
        item = make_item(project)
        for i, worker in enumerate(workers):
            make_judgment(item=item, stage=stage, worker=worker, score=1 + (n + i) % 5)
    return project


def _side_by_side(monkeypatch, refresh) -> list[str]:
    """Run `refresh(project)` in two threads with their own connections, each pausing after
    reading the stored rows until the other has read them too (or 3 s have passed)."""
    read_both = threading.Barrier(2)
    original = store._project_stage_rows

    def rows_then_wait(**kwargs):
        rows = original(**kwargs)
        try:
            read_both.wait(timeout=3)
        except threading.BrokenBarrierError:
            pass  # the other refresh is waiting for the lock this one holds
        return rows

    monkeypatch.setattr(store, "_project_stage_rows", rows_then_wait)
    errors: list[str] = []

    def run() -> None:
        try:
            refresh(Project.objects.get(slug="race"))
        except Exception as exc:  # noqa: BLE001 - the point: nothing may escape
            errors.append("".join(traceback.format_exception(exc)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    monkeypatch.setattr(store, "_project_stage_rows", original)
    return errors


def test_two_report_refreshes_at_once_leave_one_row(monkeypatch, project):
    errors = _side_by_side(monkeypatch, lambda p: report_refresh(project=p))
    assert not errors, errors[0]
    assert Report.objects.filter(project=project, kind=REPORT_KIND).count() == 1
    errors = _side_by_side(monkeypatch, lambda p: dashboard_charts_refresh(project=p))
    assert not errors, errors[0]
    assert Report.objects.filter(project=project, kind=CHARTS_KIND).count() == 1

    # A new judgment: the next refresh replaces the one row and readers get its data.
    item = make_item(project)
    newest = make_judgment(item=item, stage=project.stages.get(), worker=make_worker(), score=3)
    report_refresh(project=project)
    assert Report.objects.filter(project=project, kind=REPORT_KIND).count() == 1
    assert fresh_cached_report(project=project)["judgment_watermark"] == newest.pk


def test_two_metric_report_refreshes_at_once_leave_one_row(monkeypatch, project):
    errors = _side_by_side(monkeypatch, lambda p: metric_report_refresh(project=p))
    assert not errors, errors[0]
    assert Report.objects.filter(project=project, kind=METRIC_KIND).count() == 1
    row, stale = metric_report_cached(project=project)
    assert row is not None and not stale


def test_a_refresh_that_read_older_judgments_does_not_overwrite_a_newer_copy(project):
    params = {"group_by": None, "version": 0}
    store.report_store(project=project, stage=None, kind="test", params=params,
                       data={"copy": "newer"}, judgment_watermark=10)
    row = store.report_store(project=project, stage=None, kind="test", params=params,
                             data={"copy": "older"}, judgment_watermark=9)
    assert row.data == {"copy": "newer"}
    store.report_store(project=project, stage=None, kind="test", params=params,
                       data={"copy": "same judgments, items edited"}, judgment_watermark=10)
    assert Report.objects.get(kind="test").data == {"copy": "same judgments, items edited"}


def test_a_refresh_removes_copies_an_earlier_race_left(project):
    params = {"group_by": None, "version": 0}
    for copy in ("one", "two"):
        Report.objects.create(project=project, kind="test", params=params, data={"copy": copy},
                              judgment_watermark=1)
    store.report_store(project=project, stage=None, kind="test", params=params,
                       data={"copy": "fresh"}, judgment_watermark=2)
    assert list(Report.objects.filter(kind="test").values_list("data", flat=True)) == [
        {"copy": "fresh"}]
