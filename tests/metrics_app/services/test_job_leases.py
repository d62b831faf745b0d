"""Job leases: a scoring job is "running" only while a live worker renews its heartbeat; a
dead worker's job is sent again or failed with the reason; a second delivery never runs a job
twice; a worker that lost its lease writes nothing."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from annotation.models import TaskKind
from metrics_app.models import MetricScore, ScoringJob, ScoringStatus
from metrics_app.services import scoring
from metrics_app.services.job_leases import JobLease, LeaseLost, stale_jobs_recover
from testing.factories import make_item, make_project

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _job(n_items: int = 3) -> ScoringJob:
    project = make_project(kind=TaskKind.LIKERT)
    for n in range(n_items):
        make_item(project, content={"passage": "", "question": "q?", "references": [f"a{n}"],
                                    "candidate": f"a{n}"})
    return ScoringJob.objects.create(project=project, metrics=["em"])


def _age(job: ScoringJob, seconds: float) -> None:
    """As if the worker holding the job last beat `seconds` ago (then died)."""
    ScoringJob.objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_a_job_alive_in_another_worker_is_not_run_again():
    job = _job()
    alive = JobLease(ScoringJob, job.pk)
    assert alive.claim() is not None
    assert scoring.scoring_job_run(job_id=job.pk) is None      # the redelivered message
    job.refresh_from_db()
    assert (job.status, job.lease, job.attempts) == (ScoringStatus.RUNNING, alive.token, 1)
    assert not MetricScore.objects.exists()


def test_a_dead_workers_job_is_sent_again_then_failed_with_the_reason_after_the_last_run():
    job = _job()
    sent = []
    with override_settings(QAJ_JOB_STALE_AFTER_SECONDS=60, QAJ_JOB_MAX_ATTEMPTS=2):
        JobLease(ScoringJob, job.pk).claim()       # a worker starts the job, then dies
        _age(job, 30)
        assert stale_jobs_recover([ScoringJob], send=sent.append) == {"retried": 0, "failed": 0}
        _age(job, 90)
        assert stale_jobs_recover([ScoringJob], send=sent.append) == {"retried": 1, "failed": 0}
        job.refresh_from_db()
        assert job.status == ScoringStatus.QUEUED and [s.pk for s in sent] == [job.pk]
        assert job.error.startswith("worker lost: no heartbeat for 90s (run 1 of 2)")

        JobLease(ScoringJob, job.pk).claim()       # the second run dies too
        _age(job, 61)
        assert stale_jobs_recover([ScoringJob], send=sent.append) == {"retried": 0, "failed": 1}
    job.refresh_from_db()
    assert job.status == ScoringStatus.FAILED and job.finished_at is not None
    assert "worker lost: no heartbeat for 61s (run 2 of 2); no runs left" == job.error
    assert len(sent) == 1
    assert scoring.scoring_job_run(job_id=job.pk) is None       # a late message: nothing runs


def test_a_worker_that_lost_its_lease_stops_without_writing():
    job = _job()
    first = JobLease(ScoringJob, job.pk)
    first.claim()
    _age(job, 10_000)
    stale_jobs_recover([ScoringJob], send=lambda _job: None)
    done = scoring.scoring_job_run(job_id=job.pk)                # the rerun finishes
    assert done.status == ScoringStatus.DONE and done.attempts == 2
    with pytest.raises(LeaseLost):
        first.update(done=1)
    with pytest.raises(LeaseLost):
        first.finish(status=ScoringStatus.FAILED, error="late")
    job.refresh_from_db()
    assert (job.status, job.error, job.done) == (ScoringStatus.DONE, "", 3)


def test_a_failing_job_is_failed_with_its_error_not_left_running(monkeypatch):
    job = _job()

    def broken(**_kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(scoring, "project_score_metrics", broken)
    with pytest.raises(RuntimeError):
        scoring.scoring_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == ScoringStatus.FAILED and job.error == "RuntimeError: disk full"
    assert job.finished_at is not None


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_renews_the_lease_during_one_long_step(monkeypatch):
    """A step longer than the lease time (a big report refresh) keeps the job alive."""
    job = _job()
    beats = []

    def slow_refresh(**_kwargs):
        for _ in range(6):
            time.sleep(0.25)
            beats.append(ScoringJob.objects.get(pk=job.pk).heartbeat_at)

    monkeypatch.setattr("metrics_app.services.meta_evaluation_report.metric_report_refresh",
                        slow_refresh)
    with override_settings(QAJ_JOB_HEARTBEAT_SECONDS=0.1, QAJ_JOB_STALE_AFTER_SECONDS=0.5):
        done = scoring.scoring_job_run(job_id=job.pk)
    assert done.status == ScoringStatus.DONE and done.attempts == 1
    assert len(set(beats)) >= 3, beats                         # renewed while the step ran


@pytest.mark.django_db(transaction=True)
def test_lerc_training_renews_its_heartbeat_during_a_long_silent_step(monkeypatch):
    """Building data or evaluating reports no progress for minutes; the heartbeat thread keeps
    the version from looking dead (the stale check would fail it)."""
    from metrics_app.lerc.config import TrainingCancelled
    from metrics_app.models import ModelStatus, ModelVersion
    from metrics_app.services.lerc import training

    version = training.model_version_create(projects=[_job().project])
    beats = []

    def silent_step(model_version, _reporter):
        for _ in range(6):
            time.sleep(0.25)
            beats.append((ModelVersion.objects.get(pk=model_version.pk).progress or {})
                         .get("heartbeat"))
        raise TrainingCancelled("stopped by the test")

    monkeypatch.setattr(training, "_train_and_evaluate", silent_step)
    with override_settings(QAJ_JOB_HEARTBEAT_SECONDS=0.1):
        finished = training.model_version_train(model_version=version)
    assert finished.status == ModelStatus.CANCELLED
    assert len({beat for beat in beats if beat}) >= 3, beats
