"""A Celery worker SIGKILLed in the middle of a scoring job, on Redis and on RabbitMQ.

The job holds a lease renewed by a heartbeat (core/leases.py). Once the
heartbeat is older than the lease time, the beat sweep sends the job again; a second worker
finishes it. Whatever the broker does with the killed worker's unacknowledged message (RabbitMQ
hands it back at once, Redis after its visibility timeout) cannot start a second run while the
first looks alive, nor a third once the job is done. The job ends done exactly once: every
item has one score per metric, and the job was started twice (the killed run and the rerun).
"""
from __future__ import annotations

import signal
import time
import uuid

import pytest
from django.test import override_settings

from annotation.models import TaskKind
from core.leases import LeasedJobKind, stale_jobs_recover
from metrics_app.models import MetricScore, ScoringJob, ScoringStatus
from testing.factories import item_content, make_item, make_project
from tests.support.celery_workers import send, wait_for
from tests.support.paths import IN_CI
from worker.tasks.metrics import score_project

pytestmark = [pytest.mark.reliability, pytest.mark.integration, pytest.mark.slow]

N_ITEMS = 800
LEASE_SECONDS = 5  # QAJ_JOB_STALE_AFTER_SECONDS for this test (default 120)
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672//"


@pytest.fixture(params=["redis", "rabbitmq"])
def broker(request):
    """(broker URL, queue): Redis under this run's key prefix, or RabbitMQ with a queue of
    this test's own (deleted afterwards), so concurrent runs never take each other's tasks."""
    if request.param == "redis":
        yield request.getfixturevalue("redis_url"), "gpu"
        return
    import kombu

    queue = f"gpu-test-{uuid.uuid4().hex[:10]}"
    try:
        with kombu.Connection(RABBITMQ_URL, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        if IN_CI:
            pytest.fail(f"RabbitMQ at {RABBITMQ_URL} is required in CI: {exc}")
        pytest.skip(f"RabbitMQ at {RABBITMQ_URL} is not reachable: {exc}")
    yield RABBITMQ_URL, queue
    with kombu.Connection(RABBITMQ_URL) as conn:
        kombu.Queue(queue, channel=conn.default_channel).delete()


def test_scoring_job_killed_mid_way_is_recovered_within_the_lease_and_done_exactly_once(
        workers, broker):
    broker_url, queue = broker
    project = make_project(TaskKind.LIKERT)
    for n in range(N_ITEMS):
        content = item_content(TaskKind.LIKERT, n)
        content["candidate"] = f"{content['candidate']} variant {n}"
        make_item(project, content=content)
    job = ScoringJob.objects.create(project=project, metrics=["bertscore"], queue=queue)
    lease = {"QAJ_JOB_HEARTBEAT_SECONDS": "1", "QAJ_JOB_STALE_AFTER_SECONDS": str(LEASE_SECONDS)}
    first = workers(broker_url, queue, **lease)
    send(score_project, broker_url, job.pk, queue=queue)
    wait_for(lambda: ScoringJob.objects.get(pk=job.pk).done > 0, first, 240, "scoring to start")
    first.kill(signal.SIGKILL)
    killed_at = time.monotonic()
    job.refresh_from_db()
    assert job.status == ScoringStatus.RUNNING and 0 < job.done < job.total, job.done
    assert job.attempts == 1
    partial = MetricScore.objects.filter(item__project=project).count()

    second = workers(broker_url, queue, **lease)

    def sweep_until_rerun():
        # What the beat task does every minute, here every second with the test's lease time.
        with override_settings(QAJ_JOB_STALE_AFTER_SECONDS=LEASE_SECONDS):
            stale_jobs_recover([LeasedJobKind(ScoringJob, resend=lambda stale: send(
                score_project, broker_url, stale.pk, queue=queue))])
        return ScoringJob.objects.get(pk=job.pk).attempts >= 2

    wait_for(sweep_until_rerun, second, 120, "the killed job to be run again")
    recovered_after = time.monotonic() - killed_at
    # Seen dead within the lease (plus sweep and worker start-up), not the broker's hour.
    assert recovered_after < LEASE_SECONDS + 60, recovered_after
    wait_for(lambda: ScoringJob.objects.get(pk=job.pk).status != ScoringStatus.RUNNING,
             second, 300, "the rerun to finish")
    job.refresh_from_db()
    assert job.status == ScoringStatus.DONE, (job.status, job.error)
    assert job.attempts == 2 and job.done == job.total == N_ITEMS
    scores = MetricScore.objects.filter(item__project=project, metric="bertscore")
    assert scores.count() == N_ITEMS >= partial
    assert scores.values("item").distinct().count() == N_ITEMS

    # A late copy of the message (the broker's redelivery) finds the job done: nothing runs.
    send(score_project, broker_url, job.pk, queue=queue)
    time.sleep(3)
    job.refresh_from_db()
    assert job.status == ScoringStatus.DONE and job.attempts == 2
