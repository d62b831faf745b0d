"""The one job lease (core/leases.py): a job is "running" only while a live worker renews its
heartbeat; a second claim is refused; a dead worker's job is sent again or failed with the
reason by one sweep over every job kind (scoring, item scoring, judge runs, LERC training); a
worker that lost its lease writes nothing."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from annotation.models import TaskKind
from core.leases import (
    JobLease,
    LeasedJobKind,
    LeaseLost,
    claimable_filter,
    held_filter,
    job_in_flight,
    jobs_unsent,
    owner_state,
    stale_jobs_recover,
)
from metrics_app.models import (
    ItemScoringJob,
    JudgeJob,
    MetricScore,
    ModelStatus,
    ModelVersion,
    ScoringJob,
    ScoringStatus,
)
from metrics_app.services import job_leases, scoring
from metrics_app.services.judges.versions import judge_version_create
from metrics_app.services.lerc import model_version_create
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
        assert stale_jobs_recover([LeasedJobKind(ScoringJob, resend=sent.append)]) == {"retried": 0, "failed": 0}
        _age(job, 90)
        assert stale_jobs_recover([LeasedJobKind(ScoringJob, resend=sent.append)]) == {"retried": 1, "failed": 0}
        job.refresh_from_db()
        assert job.status == ScoringStatus.QUEUED and [s.pk for s in sent] == [job.pk]
        assert job.error.startswith("worker lost: no heartbeat for 90s (run 1 of 2)")

        JobLease(ScoringJob, job.pk).claim()       # the second run dies too
        _age(job, 61)
        assert stale_jobs_recover([LeasedJobKind(ScoringJob, resend=sent.append)]) == {"retried": 0, "failed": 1}
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
    stale_jobs_recover([LeasedJobKind(ScoringJob, resend=lambda _job: None)])
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
    from metrics_app.services.lerc import training

    version = training.model_version_create(projects=[_job().project])
    beats = []

    def silent_step(model_version, _reporter):
        for _ in range(6):
            time.sleep(0.25)
            beats.append(ModelVersion.objects.get(pk=model_version.pk).heartbeat_at)
        raise TrainingCancelled("stopped by the test")

    monkeypatch.setattr(training, "_train_and_evaluate", silent_step)
    with override_settings(QAJ_JOB_HEARTBEAT_SECONDS=0.1):
        finished = training.model_version_train(model_version=version)
    assert finished.status == ModelStatus.CANCELLED
    assert len({beat for beat in beats if beat}) >= 3, beats


# --- every job kind holds the same lease ---------------------------------------------------------

def _judge_job() -> JudgeJob:
    version = judge_version_create(name="lease", config={"base_url": "http://judge.invalid",
                                                         "model": "fake-judge"})[0]
    return JudgeJob.objects.create(project=_job().project, judge_version=version,
                                   metrics=[version.label])


def _model_version() -> ModelVersion:
    return model_version_create(projects=[_job().project])


JOB_KINDS = {
    "scoring": lambda: _job(),
    "item scoring": lambda: ItemScoringJob.objects.create(metrics=["em"], items=[]),
    "judge run": _judge_job,
    "lerc training": _model_version,
}


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_a_second_claim_of_a_running_job_is_refused(kind):
    job = JOB_KINDS[kind]()
    first, second = JobLease(type(job), job.pk), JobLease(type(job), job.pk)
    claimed = first.claim()
    assert claimed.status == type(job).lease_states.running and claimed.lease == first.token
    assert second.claim() is None
    job.refresh_from_db()
    assert job.lease == first.token


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_a_beat_renews_the_heartbeat_only_for_the_holder(kind):
    job = JOB_KINDS[kind]()
    holder, other = JobLease(type(job), job.pk), JobLease(type(job), job.pk)
    holder.claim()
    type(job).objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert holder.beat() is True
    job.refresh_from_db()
    assert (timezone.now() - job.heartbeat_at).total_seconds() < 60
    assert other.beat() is False and other.lost.is_set()
    with pytest.raises(LeaseLost):
        other.update(error="not mine")


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_in_flight_held_and_unsent_read_the_same_way_for_every_kind(kind):
    """One rule for every kind, read from its `lease_states` (the judge runs' copy read the
    scoring jobs' statuses, right only because JudgeJob borrows ScoringJobBase's columns):
    queued or running is in flight, the oldest first; finished, failed or cancelled is not; a
    running job holds its scope only while its heartbeat is fresh."""
    queued, running, done = (JOB_KINDS[kind]() for _ in range(3))
    model, states = type(queued), type(queued).lease_states
    assert states.in_flight == (states.queued, states.running)
    JobLease(model, running.pk).claim()
    model.objects.filter(pk=done.pk).update(status=states.failed)
    in_flight = model.objects.filter(pk__in=[queued.pk, running.pk, done.pk])
    assert job_in_flight(model, pk__in=[running.pk, done.pk]).pk == running.pk
    assert job_in_flight(model, pk__in=[queued.pk, running.pk]).pk == queued.pk
    assert job_in_flight(model, pk__in=[queued.pk, running.pk],
                         same=lambda job: job.pk != queued.pk).pk == running.pk
    assert job_in_flight(model, pk=done.pk) is None
    assert list(in_flight.filter(held_filter(model)).values_list("pk", flat=True)) == [running.pk]
    assert sorted(in_flight.filter(claimable_filter(model)).values_list("pk", flat=True)) == \
        [queued.pk]
    mine = [queued.pk, running.pk, done.pk]
    assert [job.pk for job in jobs_unsent(model, older_than_seconds=0) if job.pk in mine] == \
        [queued.pk]  # never sent (no task id), queued: beat sends it
    assert not jobs_unsent(model, older_than_seconds=3600).filter(pk__in=mine).exists()
    model.objects.filter(pk=running.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert not in_flight.filter(held_filter(model)).exists()
    assert sorted(in_flight.filter(claimable_filter(model)).values_list("pk", flat=True)) == \
        sorted([queued.pk, running.pk])


@pytest.mark.parametrize(("kind", "recovered"), [
    ("scoring", ScoringStatus.QUEUED), ("item scoring", ScoringStatus.QUEUED),
    ("judge run", ScoringStatus.QUEUED), ("lerc training", ModelStatus.FAILED),
])
def test_the_one_sweep_recovers_a_stale_job_of_every_kind(kind, recovered, monkeypatch):
    """Scoring and judge jobs are sent again (attempts remain), a LERC version is failed at
    once and the failure logged on it; a fresh job of the same kind is left alone."""
    sent = []
    monkeypatch.setattr(job_leases, "scoring_job_send", sent.append)
    monkeypatch.setattr(job_leases, "judge_job_send", sent.append)
    stale, fresh = JOB_KINDS[kind](), JOB_KINDS[kind]()
    model = type(stale)
    JobLease(model, stale.pk).claim()
    JobLease(model, fresh.pk).claim()
    model.objects.filter(pk=stale.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=200))
    with override_settings(QAJ_JOB_STALE_AFTER_SECONDS=120):
        counts = job_leases.stale_jobs_recover_all()
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == recovered and stale.lease == ""
    assert stale.error.startswith("worker lost: no heartbeat for 200s")
    assert fresh.status == model.lease_states.running
    if recovered == ModelStatus.FAILED:
        assert counts == {"retried": 0, "failed": 1} and sent == []
        assert stale.finished_at is not None
        assert stale.events.filter(event="failed", detail=stale.error).exists()
    else:
        assert counts == {"retried": 1, "failed": 0} and [j.pk for j in sent] == [stale.pk]


def test_the_old_lerc_stale_setting_name_still_sets_the_one_limit():
    env = {**os.environ, "QAJ_LERC_STALE_AFTER_SECONDS": "300"}
    env.pop("QAJ_JOB_STALE_AFTER_SECONDS", None)
    code = ("import django; django.setup(); from core.leases import stale_after_seconds; "
            "print(stale_after_seconds())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "300.0"


def test_owner_state_tells_a_dead_process_here_from_a_live_one_and_another_host():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    host = socket.gethostname()
    assert owner_state(f"{host}:{child.pid}:ab12cd34") == "dead"
    assert owner_state(f"{host}:{os.getppid()}") == "alive"
    assert owner_state(f"{host}:{os.getpid()}:ab12cd34") == "alive"
    assert owner_state("gpu-other-machine:4242:ab12cd34") == "elsewhere"
    assert owner_state("") == "elsewhere"
