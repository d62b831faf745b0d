"""Ctrl-C during the metric commands a researcher runs by hand (`score_project`, `run_judge`,
`report`, `metric_report`): one line saying what the stop left stored, exit status 1, no
traceback; and what the line says is what is stored."""
from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

import metrics_app.reports.project as project_reports
import metrics_app.services.judges.runs as judge_runs
import metrics_app.services.meta_evaluation_report as meta_report
import metrics_app.services.scoring as scoring
from annotation.models import TaskKind
from metrics_app.models import JudgeJob, JudgeVerdict, MetricScore, Report, ScoringStatus
from metrics_app.services.judges.versions import judge_version_create
from testing.factories import item_content, make_item, make_judgment, make_project, make_stage
from testing.openai_server import FakeChatServer

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _likert_project(n: int, *, judged: bool = False):
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    for i in range(n):
        content = item_content(TaskKind.LIKERT, i)
        content["candidate"] = "on the mat" if i % 2 else f"in the garden {i}"
        item = make_item(project, content=content)
        if judged:
            make_judgment(item=item, stage=stage, score=1 + i % 5)
    return project


def _stopped(*args, match: str) -> CommandError:
    with pytest.raises(CommandError, match=r"^interrupted \(Ctrl-C\): " + match) as stopped:
        call_command(*args, stdout=io.StringIO(), stderr=io.StringIO())
    assert stopped.value.returncode == 1  # manage.py exits 1, printing this one line
    assert "\n" not in str(stopped.value)
    return stopped.value


def test_score_project_stopped_keeps_the_stored_batches_and_a_rerun_scores_the_rest(
        monkeypatch):
    project = _likert_project(6)
    real_build = scoring.build_metric

    def stops_at_the_third_batch(name, **kwargs):
        metric = real_build(name, **kwargs)
        real_score, calls = metric.score_batch, []

        def score_batch(inputs):
            calls.append(1)
            if len(calls) == 3:
                raise KeyboardInterrupt
            return real_score(inputs)

        metric.score_batch = score_batch
        return metric

    monkeypatch.setattr(scoring, "build_metric", stops_at_the_third_batch)
    _stopped("score_project", project.slug, "--metric", "f1", "--batch-size", "2",
             "--no-progress", match=r"the scores stored before the stop are kept .*run the "
                                    r"same command again to score the rest$")
    assert MetricScore.objects.filter(item__project=project, metric="f1").count() == 4
    monkeypatch.setattr(scoring, "build_metric", real_build)
    out = io.StringIO()
    call_command("score_project", project.slug, "--metric", "f1", "--no-progress", stdout=out)
    assert "2 scored, 4 already stored" in out.getvalue()


def test_run_judge_stopped_stores_the_answers_paid_for_and_a_rerun_asks_only_the_rest(
        monkeypatch):
    """Before: the answers since the last stored batch (up to 50) were lost with the Ctrl-C,
    and the rerun paid for them again."""
    project = _likert_project(5)
    monkeypatch.setattr(judge_runs, "FLUSH_SECONDS", 3600.0)  # one batch: nothing flushed yet
    real_wait, waits = judge_runs.wait, []

    def ctrl_c_at_the_third_wait(*args, **kwargs):
        waits.append(1)
        if len(waits) == 3:
            raise KeyboardInterrupt
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(judge_runs, "wait", ctrl_c_at_the_third_wait)
    with FakeChatServer() as server:
        version = judge_version_create(name="fake", config={
            "base_url": server.url, "model": "fake-judge"})[0]
        _stopped("run_judge", project.slug, version.label, "--concurrency", "1",
                 "--no-progress",
                 match=r"the verdicts answered before the stop are stored and this run's "
                       r"judge job is marked failed; run the same command again to ask only "
                       r"the rest")
        asked = server.stats["requests"]
        assert asked in (2, 3)  # two answered; the third sent, or not yet, at the stop
        assert JudgeVerdict.objects.filter(judge_version=version).count() == 2
        job = JudgeJob.objects.get()
        assert job.status == ScoringStatus.FAILED and "Ctrl-C" in job.error
        monkeypatch.setattr(judge_runs, "wait", real_wait)
        call_command("run_judge", project.slug, version.label, "--no-progress",
                     stdout=io.StringIO())
        assert server.stats["requests"] == asked + 3  # the two stored ones not asked again
    assert JudgeVerdict.objects.filter(judge_version=version).count() == 5


def test_report_stopped_while_computing_leaves_the_cached_report_as_it_was(monkeypatch):
    project = _likert_project(4, judged=True)
    call_command("report", project.slug, "--json", stdout=io.StringIO())
    before = list(Report.objects.filter(project=project).values_list("pk", "computed_at"))
    assert before

    def ctrl_c(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(project_reports, "project_report_with_fingerprint", ctrl_c)
    _stopped("report", project.slug, "--refresh",
             match=r"no report stored: a report is stored only once fully computed, so the "
                   r"cached one is as it was$")
    after = list(Report.objects.filter(project=project).values_list("pk", "computed_at"))
    assert after == before


def test_metric_report_stopped_while_computing_stores_no_report(monkeypatch):
    project = _likert_project(4, judged=True)
    scoring.project_score_metrics(project=project, metric_names=["f1"])

    def ctrl_c(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(meta_report, "metric_report_compute", ctrl_c)
    _stopped("metric_report", project.slug, "--resamples", "0", match=r"no report stored")
    assert not Report.objects.filter(project=project, kind=meta_report.REPORT_KIND).exists()


def test_a_report_stopped_while_printing_says_it_is_stored(monkeypatch):
    project = _likert_project(4, judged=True)

    class StopsPrinting(io.StringIO):
        def write(self, text):
            raise KeyboardInterrupt

    with pytest.raises(CommandError, match=r"^interrupted \(Ctrl-C\): the report is computed "
                                           r"and stored; only its printing stopped$"):
        call_command("report", project.slug, stdout=StopsPrinting())
    assert Report.objects.filter(project=project).exists()
