"""Cancelling project scoring jobs and LLM judge runs by hand (`leased_job_cancel`), and one
queued run at a time: a queued job cancelled never runs; a running one stops at its next stored
batch or heartbeat, keeps what it stored and paid for, and ends cancelled (not failed); the
sweep never sends a cancelled job again; queuing the same job twice answers the one in flight,
also when two requests race (the project's row lock)."""
from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from annotation.models import TaskKind
from core import leases
from core.leases import JobCancelled, JobLease, job_cancel
from metrics_app.models import JudgeJob, JudgeVerdict, MetricScore, ScoringJob, ScoringStatus
from metrics_app.services import scoring
from metrics_app.services.job_leases import (
    JobNotCancellable,
    leased_job_cancel,
    stale_jobs_recover_all,
)
from metrics_app.services.judges import runs
from metrics_app.services.judges.runs import (
    JudgeJobInFlight,
    judge_job_create,
    judge_job_run,
    judge_jobs_enqueue_pending,
)
from testing.factories import make_item, make_project, make_user
from testing.openai_server import FakeChatServer
from tests.metrics_app.services.judges.test_runs import FAST, _judge, _likert_project
from tests.support.paths import require_shared_database

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _scoring_project(n_items: int = 4):
    project = make_project(kind=TaskKind.LIKERT)
    for n in range(n_items):
        make_item(project, content={"passage": "", "question": "q?", "references": [f"a{n}"],
                                    "candidate": f"a{n}"})
    return project


@pytest.fixture
def sent(monkeypatch):
    """Every task the services send (nothing reaches a broker)."""
    calls = []

    def task_send(name, *, args=(), **options):
        calls.append((name, list(args)))
        return type("Result", (), {"id": f"task-{len(calls)}"})()

    # a job's own send (`job_send`), and one sent again later (`job_send_after`)
    monkeypatch.setattr(leases, "task_send", task_send)
    return calls


def _stale(model, job) -> None:
    model.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1),
                                           started_at=timezone.now() - timedelta(hours=1),
                                           created_at=timezone.now() - timedelta(hours=1))


# --- the lease ---------------------------------------------------------------------------------

def test_a_cancelled_job_s_worker_finds_out_at_its_next_write_or_beat_and_keeps_its_numbers():
    project = _scoring_project(1)
    job = ScoringJob.objects.create(project=project, metrics=["em"])
    lease = JobLease(ScoringJob, job.pk)
    assert lease.claim(started_at=timezone.now()) is not None
    lease.update(done=1, total=4)
    assert job_cancel(ScoringJob, job.pk, reason="cancelled by alice")
    assert lease.beat() is False and lease.cancelled.is_set()  # the heartbeat thread's check
    with pytest.raises(JobCancelled):
        lease.finish(status=ScoringStatus.DONE, done=3, error="")
    job.refresh_from_db()
    # Its numbers are recorded; its status, end and reason stay the cancellation's.
    assert (job.status, job.done, job.total, job.error) == (
        ScoringStatus.CANCELLED, 3, 4, "cancelled by alice")
    assert not job_cancel(ScoringJob, job.pk, reason="again")


# --- scoring jobs ------------------------------------------------------------------------------

def test_a_queued_scoring_job_cancelled_is_never_run_nor_sent_again(sent):
    alice = make_user("alice")
    project = _scoring_project()
    job = ScoringJob.objects.create(project=project, metrics=["em"])
    cancelled = leased_job_cancel(job=job, user=alice)
    assert cancelled.status == ScoringStatus.CANCELLED and cancelled.finished_at is not None
    assert cancelled.error.startswith("cancelled by alice at ") and "(was queued)" in cancelled.error
    assert cancelled.get_status_display() == "Cancelled"
    assert scoring.scoring_job_run(job_id=job.pk) is None       # its message arrives
    assert not MetricScore.objects.exists()
    _stale(ScoringJob, job)
    assert stale_jobs_recover_all() == {"retried": 0, "failed": 0}
    assert scoring.scoring_jobs_enqueue_pending() == 0 and sent == []
    assert ScoringJob.objects.get(pk=job.pk).status == ScoringStatus.CANCELLED


@pytest.mark.parametrize("status", [ScoringStatus.DONE, ScoringStatus.FAILED,
                                    ScoringStatus.CANCELLED])
def test_a_finished_job_is_not_cancelled_and_the_refusal_says_why(status):
    project = _scoring_project(1)
    job = ScoringJob.objects.create(project=project, metrics=["em"], status=status,
                                    error="as it was")
    with pytest.raises(JobNotCancellable, match=f"scoring job {job.pk} is {status}; only a "
                                                "queued or running job can be cancelled"):
        leased_job_cancel(job=job, user=make_user("alice"))
    assert ScoringJob.objects.get(pk=job.pk).error == "as it was"


def test_a_running_scoring_job_cancelled_stops_after_its_batch_and_keeps_its_scores(
        monkeypatch, sent):
    """Cancelled while it scores its first metric: that metric's stored batch stays, the
    second metric is never scored, and the job ends cancelled with the batch counted."""
    alice = make_user("alice")
    project = _scoring_project(4)
    job = ScoringJob.objects.create(project=project, metrics=["em", "f1"])
    real_build = scoring.build_metric

    class CancelledWhileScoring:
        def __init__(self, metric):
            self.metric, self.version = metric, metric.version

        def score_batch(self, batch):
            leased_job_cancel(job=job, user=alice)  # from the admin, mid-batch
            return self.metric.score_batch(batch)

        def close(self):
            scoring.close_metric(self.metric)

    def build_metric(name, **options):
        metric = real_build(name, **options)
        return CancelledWhileScoring(metric) if name == "em" else metric

    monkeypatch.setattr(scoring, "build_metric", build_metric)
    scoring.scoring_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == ScoringStatus.CANCELLED and "(was running)" in job.error
    assert set(MetricScore.objects.values_list("metric", flat=True)) == {"em"}
    assert MetricScore.objects.count() == 4 and job.done == 4 and job.total == 8
    _stale(ScoringJob, job)
    assert stale_jobs_recover_all()["retried"] == 0 and sent == []


def test_a_scoring_job_cancelled_mid_run_brings_its_stored_scores_into_the_report(
        monkeypatch, sent):
    """The scores a cancelled run stored before it stopped reach the cached metric report, as
    a finished run's do: the report is refreshed, not left stale ("new metric scores")."""
    from annotation.models import StageKind
    from metrics_app.services.meta_evaluation_report import (
        metric_report_cached_with_reason,
        metric_report_refresh,
    )
    from testing.factories import make_judgment, make_stage

    alice = make_user("alice")
    project = _scoring_project(4)
    stage = make_stage(project, kind=StageKind.FULL)
    for item, score in zip(project.items.order_by("pk"), (5, 1, 4, 2), strict=True):
        make_judgment(item=item, stage=stage, score=score)
    metric_report_refresh(project=project)
    job = ScoringJob.objects.create(project=project, metrics=["em", "f1"])
    real_build = scoring.build_metric

    class CancelledWhileScoring:
        def __init__(self, metric):
            self.metric, self.version = metric, metric.version

        def score_batch(self, batch):
            leased_job_cancel(job=job, user=alice)
            return self.metric.score_batch(batch)

        def close(self):
            scoring.close_metric(self.metric)

    def build_metric(name, **options):
        metric = real_build(name, **options)
        return CancelledWhileScoring(metric) if name == "em" else metric

    monkeypatch.setattr(scoring, "build_metric", build_metric)
    scoring.scoring_job_run(job_id=job.pk)
    assert ScoringJob.objects.get(pk=job.pk).status == ScoringStatus.CANCELLED
    report, stale_reason = metric_report_cached_with_reason(project=project)
    assert stale_reason == ""
    assert set(report.data["metrics"]) == {"em"}


def test_the_same_scoring_job_queued_twice_answers_the_one_in_flight(
        django_capture_on_commit_callbacks, sent):
    alice = make_user("alice")
    project = _scoring_project()
    with django_capture_on_commit_callbacks(execute=True):
        (first,) = scoring.scoring_jobs_create(project=project, metric_names=["em", "f1"],
                                               user=alice)
    with django_capture_on_commit_callbacks(execute=True):
        (again,) = scoring.scoring_jobs_create(project=project, metric_names=["f1", "em"],
                                               user=alice)
    assert again.pk == first.pk and len(sent) == 1          # nothing queued twice
    ScoringJob.objects.filter(pk=first.pk).update(status=ScoringStatus.RUNNING)
    (running,) = scoring.scoring_jobs_create(project=project, metric_names=["em", "f1"])
    assert running.pk == first.pk
    (other,) = scoring.scoring_jobs_create(project=project, metric_names=["em"])
    assert other.pk != first.pk                               # other metrics: a job of its own
    leased_job_cancel(job=first, user=alice)
    (after,) = scoring.scoring_jobs_create(project=project, metric_names=["em", "f1"])
    assert after.pk not in (first.pk, other.pk)               # the cancelled one is not reused


# --- judge jobs --------------------------------------------------------------------------------

def test_a_queued_judge_job_cancelled_asks_nothing_and_is_never_sent_again(
        django_capture_on_commit_callbacks, sent):
    project = _likert_project(3)
    with FakeChatServer() as server:
        version = _judge(server)
        with django_capture_on_commit_callbacks(execute=False):
            job = judge_job_create(project=project, version=version)
        leased_job_cancel(job=job, user=make_user("alice"))
        assert judge_job_run(job_id=job.pk, retry=FAST) is None
        assert server.stats["requests"] == 0
    _stale(JudgeJob, job)
    assert stale_jobs_recover_all()["retried"] == 0
    assert judge_jobs_enqueue_pending() == 0 and sent == []
    assert JudgeJob.objects.get(pk=job.pk).status == ScoringStatus.CANCELLED


def test_a_running_judge_job_cancelled_mid_run_keeps_its_paid_verdicts(monkeypatch, sent):
    """The wrong prompt over many items: cancelled once 5 verdicts are stored. No request is
    sent after that; the answers already on their way (paid for) are stored and counted; the
    job ends cancelled with `spent` the cost of every stored verdict; nothing sends it again,
    and a new run asks only the rest."""
    monkeypatch.setattr(runs, "FLUSH_EVERY", 1)
    alice = make_user("alice")
    project = _likert_project(40)
    project.shared_with.add(alice)  # a run checks that its requester still sees it
    with FakeChatServer(latency=0.05) as server:
        version = _judge(server)
        job = judge_job_create(project=project, version=version, concurrency=4, user=alice)
        asked_at_cancel = []

        def cancel_after_five(done, detail):
            if done >= 5 and not asked_at_cancel:
                leased_job_cancel(job=job, user=alice)
                asked_at_cancel.append(server.stats["requests"])

        judge_job_run(job_id=job.pk, retry=FAST, progress=cancel_after_five)
        asked = server.stats["requests"]
        job.refresh_from_db()
        verdicts = JudgeVerdict.objects.filter(judge_version=version, item__project=project)
        assert job.status == ScoringStatus.CANCELLED
        assert job.error.startswith("cancelled by alice")
        assert asked < 40 and asked <= asked_at_cancel[0] + 4  # at most those in flight
        assert verdicts.count() == asked == server.stats["answered"]  # every paid one stored
        assert job.done == verdicts.count() and job.detail["stopped"] == "cancelled"
        assert job.spent == pytest.approx(sum(v.cost for v in verdicts)) and job.spent > 0
        _stale(JudgeJob, job)
        assert stale_jobs_recover_all()["retried"] == 0 and sent == []
        rest = judge_job_create(project=project, version=version, concurrency=4)
        assert rest.pk != job.pk
        judge_job_run(job_id=rest.pk, retry=FAST)
        assert server.stats["requests"] == 40  # the new run asked only the rest


def test_the_same_judge_run_queued_twice_answers_the_one_in_flight_or_names_it(sent):
    project = _likert_project(2)
    with FakeChatServer() as server:
        version = _judge(server)
        first = judge_job_create(project=project, version=version, budget=1.0, concurrency=2)
        assert judge_job_create(project=project, version=version, budget=1.0,
                                concurrency=2).pk == first.pk
        with pytest.raises(JudgeJobInFlight, match=f"judge job {first.pk} .* is queued .*"
                                                   "cancel it") as refused:
            judge_job_create(project=project, version=version, budget=5.0, concurrency=2)
        assert refused.value.job.pk == first.pk
        assert JudgeJob.objects.count() == 1
        leased_job_cancel(job=first)
        assert JudgeJob.objects.get(pk=first.pk).error.startswith("cancelled by an operator")
        again = judge_job_create(project=project, version=version, budget=5.0, concurrency=2)
        assert again.pk != first.pk


@pytest.mark.django_db(transaction=True)
def test_two_requests_queuing_one_judge_run_at_once_make_one_job(monkeypatch, sent):
    """Both requests look for a job in flight before either has stored one: without the
    project's row lock both found none and both queued (and paid for) the run."""
    require_shared_database()
    project = _likert_project(2)
    with FakeChatServer() as server:
        version = _judge(server)
        real_lookup = runs.job_in_flight

        def slow_lookup(*args, **kwargs):
            found = real_lookup(*args, **kwargs)
            time.sleep(0.5)  # the other request looks meanwhile
            return found

        monkeypatch.setattr(runs, "job_in_flight", slow_lookup)
        barrier = threading.Barrier(2)
        outcomes = []

        def queue():
            try:
                barrier.wait()
                outcomes.append(judge_job_create(project=project, version=version).pk)
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                outcomes.append(repr(exc))
            finally:
                connections.close_all()

        threads = [threading.Thread(target=queue) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(outcomes) == 2 and outcomes[0] == outcomes[1], outcomes
    assert JudgeJob.objects.filter(project=project).count() == 1


def test_a_cancelled_job_whose_run_then_breaks_stays_cancelled(monkeypatch):
    """The error of a run cancelled meanwhile is raised for Celery's log, but the job is not
    turned into a failed one (the researcher stopped it; it did not fail)."""
    project = _scoring_project(2)
    job = ScoringJob.objects.create(project=project, metrics=["em"])

    def broken(**kwargs):
        leased_job_cancel(job=job, user=make_user("alice"))
        raise RuntimeError("the metric broke after the cancel")

    monkeypatch.setattr(scoring, "project_score_metrics", broken)
    with pytest.raises(RuntimeError, match="broke after the cancel"):
        scoring.scoring_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == ScoringStatus.CANCELLED and job.error.startswith("cancelled by alice")


def test_run_judge_queue_names_the_job_in_flight_instead_of_queuing_another(sent):
    from django.core.management import CommandError, call_command

    project = _likert_project(2)
    with FakeChatServer() as server:
        version = _judge(server)
        out = _call(call_command, "run_judge", project.slug, version.label, "--queue")
        job = JudgeJob.objects.get()
        assert out.strip() == f"judge job {job.pk} queued ({version.label} on {project.slug})"
        out = _call(call_command, "run_judge", project.slug, version.label, "--queue")
        assert f"judge job {job.pk} is already queued" in out and JudgeJob.objects.count() == 1
        with pytest.raises(CommandError, match=f"judge job {job.pk} .* cancel it"):
            call_command("run_judge", project.slug, version.label, "--queue", "--budget", "1")
        assert server.stats["requests"] == 0


def _call(call_command, *args) -> str:
    import io

    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_a_judge_request_retrying_when_the_run_is_cancelled_is_not_sent_again(
        monkeypatch, sent):
    """Every request is rate-limited (429, Retry-After 0.05 s) and would be retried 60 times.
    The job is cancelled while they retry: once the run learns it (its next write), no request
    is sent again; the items stay unjudged (not failed) for a later run."""
    monkeypatch.setattr(runs, "FLUSH_SECONDS", 0.1)
    alice = make_user("alice")
    project = _likert_project(4)
    project.shared_with.add(alice)  # a run checks that its requester still sees it
    patient = runs.RetryPolicy(attempts=60, base_delay=0.05, max_delay=0.05)
    with FakeChatServer() as server:
        server.rate_limit_burst(100_000)
        version = _judge(server)
        job = judge_job_create(project=project, version=version, concurrency=2, user=alice)

        def cancel_while_retrying(done, detail):
            if server.stats["429"] and not JudgeJob.objects.filter(
                    pk=job.pk, status=ScoringStatus.CANCELLED).exists():
                leased_job_cancel(job=job, user=alice)

        started = time.monotonic()
        judge_job_run(job_id=job.pk, retry=patient, progress=cancel_while_retrying)
        took = time.monotonic() - started
        asked = server.stats["requests"]
        time.sleep(0.3)
        assert server.stats["requests"] == asked  # nothing still retrying in the background
    job.refresh_from_db()
    assert job.status == ScoringStatus.CANCELLED and job.detail["stopped"] == "cancelled"
    # Two requests would have retried 60 times each (3 s apart); they stopped within a few
    # backoffs of the next write after the cancel.
    assert asked < 40 and took < 2.5, (asked, took)
    assert job.detail["failed"] == 0 and job.detail["errors"] == []
    assert not JudgeVerdict.objects.filter(judge_version=version).exists()
