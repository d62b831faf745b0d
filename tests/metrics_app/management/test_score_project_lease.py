"""`score_project` (a researcher scoring a project by hand) is a scoring job held in this
process, under the job lease the metrics page's and the API's jobs hold: refused while a live
worker scores the same metric on the project, shown with its progress where jobs are shown,
cancelled by the doors that cancel jobs, failed (never resent to a worker) when stopped.

Before: the command scored outside any job, so a worker's BERTScore or LERC job and the
command scored the same answers twice at once, the metrics page showed nothing of the
command's run and could not stop it."""
from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

import metrics_app.services.scoring as scoring
from annotation.models import TaskKind
from core import leases
from metrics_app.models import MetricScore, ScoringJob, ScoringStatus
from metrics_app.services.job_leases import leased_job_cancel, stale_jobs_recover_all
from metrics_app.services.scoring import scoring_jobs_create
from testing.factories import item_content, make_item, make_project, make_stage

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _project(n: int = 6):
    project = make_project(TaskKind.LIKERT)
    make_stage(project)
    for i in range(n):
        make_item(project, content=item_content(TaskKind.LIKERT, i))
    return project


def _before_each_batch(monkeypatch, before) -> None:
    """Call `before(n)` before the n-th batch a metric scores (metrics are cached: the patch
    is undone after the test)."""
    real_build, calls = scoring.build_metric, []

    def build(name, **kwargs):
        metric = real_build(name, **kwargs)
        real_score = metric.score_batch

        def score_batch(inputs):
            calls.append(1)
            before(len(calls))
            return real_score(inputs)

        monkeypatch.setattr(metric, "score_batch", score_batch)
        return metric

    monkeypatch.setattr(scoring, "build_metric", build)


def _held_elsewhere(project, metrics: list[str]) -> ScoringJob:
    """A job a live worker on another machine runs (fresh heartbeat)."""
    return ScoringJob.objects.create(
        project=project, metrics=metrics, status=ScoringStatus.RUNNING,
        lease="gpu-box:4242:abcd1234", heartbeat_at=timezone.now(),
        started_at=timezone.now(), attempts=1)


def test_score_project_is_refused_while_a_worker_scores_the_same_metric():
    project = _project()
    held = _held_elsewhere(project, ["bleu1", "f1"])
    with pytest.raises(CommandError, match=rf"scoring job {held.pk} .*running.*f1"):
        call_command("score_project", project.slug, "--metric", "f1,rougeL", "--no-progress",
                     stdout=io.StringIO())
    assert not MetricScore.objects.filter(item__project=project).exists()
    # Another metric is not held: it is scored.
    call_command("score_project", project.slug, "--metric", "rougeL", "--no-progress",
                 stdout=io.StringIO())
    assert MetricScore.objects.filter(item__project=project, metric="rougeL").count() == 6


def test_score_project_runs_as_a_job_the_queuing_doors_see_with_its_progress(monkeypatch):
    """While the command scores, the metrics page's or the API's request to queue the same
    metric answers the command's job (nothing queued twice), whose progress it shows; after,
    the job is done with the command's numbers."""
    project = _project()
    seen, sent = {}, []

    def look_in_the_middle(n):
        if n == 1:
            seen["jobs"] = scoring_jobs_create(project=project, metric_names=["f1"])

    _before_each_batch(monkeypatch, look_in_the_middle)
    monkeypatch.setattr(scoring, "scoring_job_send", lambda job: sent.append(job.pk))
    out = io.StringIO()
    call_command("score_project", project.slug, "--metric", "f1", "--batch-size", "2",
                 "--no-progress", stdout=out)
    [job] = ScoringJob.objects.filter(project=project)
    assert [j.pk for j in seen["jobs"]] == [job.pk]
    assert sent == []
    assert job.status == ScoringStatus.DONE and job.total == 6 and job.done == 6
    assert job.detail["f1"]["scored"] == 6
    assert "6 scored, 0 already stored" in out.getvalue()


def test_score_project_cancelled_at_another_door_stops_and_keeps_its_scores(monkeypatch):
    project = _project()

    def cancel_after_the_first_batch(n):
        if n == 2:
            leased_job_cancel(job=ScoringJob.objects.get(project=project))

    _before_each_batch(monkeypatch, cancel_after_the_first_batch)
    with pytest.raises(CommandError, match=r"cancelled"):
        call_command("score_project", project.slug, "--metric", "f1", "--batch-size", "2",
                     "--no-progress", stdout=io.StringIO())
    job = ScoringJob.objects.get(project=project)
    assert job.status == ScoringStatus.CANCELLED
    stored = MetricScore.objects.filter(item__project=project, metric="f1").count()
    assert 2 <= stored < 6


def test_score_project_stopped_by_ctrl_c_is_failed_not_resent_to_a_worker(monkeypatch, settings):
    settings.QAJ_JOB_STALE_AFTER_SECONDS = 0
    project = _project()

    def stop(n):
        raise KeyboardInterrupt

    _before_each_batch(monkeypatch, stop)
    sent = []
    monkeypatch.setattr(leases, "task_send", lambda name, args, **options: sent.append(args))
    with pytest.raises(CommandError, match=r"interrupted"):
        call_command("score_project", project.slug, "--metric", "f1", "--no-progress",
                     stdout=io.StringIO(), stderr=io.StringIO())
    job = ScoringJob.objects.get(project=project)
    assert job.status == ScoringStatus.FAILED and "Ctrl-C" in job.error
    stale_jobs_recover_all()
    assert sent == []
    assert ScoringJob.objects.get(pk=job.pk).status == ScoringStatus.FAILED


def test_a_worker_waits_for_a_run_of_the_same_metric_and_then_scores_only_the_rest(monkeypatch):
    """The same rule at the worker's door: a queued job one of whose metrics another job
    scores in a live worker (or `score_project`) is not started beside it; it is sent again
    later and then scores what is left. Before: both scored the same answers at once."""
    from core import leases

    project = _project()
    held = _held_elsewhere(project, ["f1"])
    [job] = scoring_jobs_create(project=project, metric_names=["f1", "rougeL"])
    sent = []
    monkeypatch.setattr(leases, "task_send", lambda name, args, **options: sent.append(
        (name, args, options)) or type("Result", (), {"id": "later"})())
    assert scoring.scoring_job_run(job_id=job.pk) is None
    job.refresh_from_db()
    assert job.status == ScoringStatus.QUEUED and job.attempts == 0
    assert job.detail == {"waiting_for_job": held.pk}
    assert [(name, args, options.get("countdown", 0) > 0) for name, args, options in sent] == [
        ("metrics.score_project", [job.pk], True)]
    assert not MetricScore.objects.filter(item__project=project).exists()
    ScoringJob.objects.filter(pk=held.pk).update(status=ScoringStatus.DONE)
    assert scoring.scoring_job_run(job_id=job.pk).status == ScoringStatus.DONE
    assert MetricScore.objects.filter(item__project=project).count() == 12


@pytest.mark.parametrize("step", ["reading-inputs", "report-refresh"])
def test_score_project_stopped_by_ctrl_c_at_any_step_is_failed(monkeypatch, settings, step):
    """From the review: Ctrl-C while the inputs were read (before the scoring) or while the
    metric report was refreshed (after it, a long step) left the job running, and the stale
    sweep sent the run its user stopped to a worker."""
    import metrics_app.services.meta_evaluation_report as reports

    settings.QAJ_JOB_STALE_AFTER_SECONDS = 0
    project = _project()
    if step == "report-refresh":
        def refresh(**kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(reports, "metric_report_refresh", refresh)
    else:
        real, calls = scoring.project_metric_inputs, []

        def inputs(**kwargs):
            calls.append(1)
            if len(calls) == 2:  # the command's own count is the first read
                raise KeyboardInterrupt
            return real(**kwargs)

        monkeypatch.setattr(scoring, "project_metric_inputs", inputs)
    sent = []
    monkeypatch.setattr(leases, "task_send", lambda name, args, **options: sent.append(args)
                        or type("Sent", (), {"id": "x"})())
    with pytest.raises(CommandError, match="interrupted"):
        call_command("score_project", project.slug, "--metric", "f1", "--no-progress",
                     stdout=io.StringIO(), stderr=io.StringIO())
    stale_jobs_recover_all()
    job = ScoringJob.objects.get(project=project)
    assert (job.status, sent) == (ScoringStatus.FAILED, []), job.error
    assert "Ctrl-C" in job.error


def test_a_job_with_a_model_option_holds_the_metrics_that_take_no_model():
    """From the review: `f1,lerc --model X` queues an F1 job carrying the model option, which
    scores the same F1 as a plain F1 job; the model was compared for F1 too, so both scored F1
    on the same answers at once."""
    project = _project()
    held = ScoringJob.objects.create(
        project=project, metrics=["f1"], options={"model": "lerc-v1"},
        status=ScoringStatus.RUNNING, lease="gpu-box:1:ab", heartbeat_at=timezone.now(),
        started_at=timezone.now(), attempts=1)
    waiting = ScoringJob.objects.create(project=project, metrics=["f1"], queue="default")
    assert scoring.scoring_run_holder(waiting) == held


def test_score_project_whose_job_another_run_took_over_says_so(monkeypatch):
    """From the review: the command's lease went stale (a suspended laptop) and another run
    took the job over; the command printed its metrics and exited 0 as if it had scored. It
    now fails naming who holds the job."""
    project = _project()
    _before_each_batch(monkeypatch, lambda n: ScoringJob.objects.filter(project=project).update(
        lease="other-box:1:zz", status=ScoringStatus.RUNNING))
    out = io.StringIO()
    with pytest.raises(CommandError, match="taken over by other-box:1:zz"):
        call_command("score_project", project.slug, "--metric", "f1", "--batch-size", "2",
                     "--no-progress", stdout=out, stderr=io.StringIO())
    assert "f1" not in out.getvalue()
