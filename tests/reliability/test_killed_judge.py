"""A Celery worker SIGKILLed in the middle of an LLM judge job (against the local chat fake,
with a 429 burst and malformed answers on the way), on Redis.

The judge job holds the job lease (core/leases.py): once its
heartbeat is stale the sweep sends it again, a second worker finishes it asking only for the
items the killed run had not stored, and a later run of the same version asks nothing."""
from __future__ import annotations

import signal

import pytest
from django.test import override_settings

from annotation.models import Item, TaskKind
from core.leases import LeasedJobKind, stale_jobs_recover
from metrics_app.models import JudgeJob, JudgeVerdict, ScoringStatus
from metrics_app.services.judges.runs import FLUSH_EVERY, judge_job_create
from metrics_app.services.judges.versions import judge_version_create
from testing.factories import item_content, make_project
from testing.openai_server import FakeChatServer
from tests.support.celery_workers import send, wait_for
from worker.tasks.judges import run_judge

pytestmark = [pytest.mark.reliability, pytest.mark.integration, pytest.mark.slow]

N_ITEMS = 240
CONCURRENCY = 4
LEASE_SECONDS = 5


def test_judge_job_killed_mid_way_resumes_without_asking_twice(workers, redis_url,
                                                               django_capture_on_commit_callbacks):
    queue = "default"
    project = make_project(TaskKind.LIKERT)
    Item.objects.bulk_create([
        Item(project=project, external_id=f"q{n}",
             content={**item_content(TaskKind.LIKERT, n), "candidate": f"answer {n}"})
        for n in range(N_ITEMS)])
    lease = {"QAJ_JOB_HEARTBEAT_SECONDS": "1", "QAJ_JOB_STALE_AFTER_SECONDS": str(LEASE_SECONDS)}
    with FakeChatServer(latency=0.1, malformed_rate=0.05, seed=5) as server:
        version = judge_version_create(name="killed", config={
            "base_url": server.url, "model": "fake-judge"})[0]
        with django_capture_on_commit_callbacks(execute=False):
            job = judge_job_create(project=project, version=version, concurrency=CONCURRENCY)
        server.rate_limit_burst(10)
        first = workers(redis_url, queue, **lease)
        send(run_judge, redis_url, job.pk, queue=queue)
        wait_for(lambda: JudgeVerdict.objects.filter(judge_version=version).count() >= 60,
                 first, 120, "verdicts to be stored")
        first.kill(signal.SIGKILL)
        job.refresh_from_db()
        assert job.status == ScoringStatus.RUNNING and job.attempts == 1
        stored_by_first = JudgeVerdict.objects.filter(judge_version=version).count()
        assert stored_by_first < N_ITEMS

        second = workers(redis_url, queue, **lease)

        def sweep_until_rerun():
            with override_settings(QAJ_JOB_STALE_AFTER_SECONDS=LEASE_SECONDS):
                stale_jobs_recover([LeasedJobKind(JudgeJob, resend=lambda stale: send(
                    run_judge, redis_url, stale.pk, queue=queue))])
            return JudgeJob.objects.get(pk=job.pk).attempts >= 2

        wait_for(sweep_until_rerun, second, 120, "the killed judge job to be run again")
        wait_for(lambda: JudgeJob.objects.get(pk=job.pk).status != ScoringStatus.RUNNING,
                 second, 180, "the rerun to finish")
        job.refresh_from_db()
        assert job.status == ScoringStatus.DONE, (job.status, job.error)
        verdicts = JudgeVerdict.objects.filter(judge_version=version)
        assert verdicts.count() == N_ITEMS == verdicts.values("item").distinct().count()
        assert job.detail["cached"] >= stored_by_first
        assert job.detail["cached"] + job.detail["calls"] == N_ITEMS
        assert verdicts.filter(parsed=False).count() > 0  # malformed answers kept, counted
        assert server.stats["429"] == 10
        # Asked again only what the killed run had in flight or had not yet stored.
        answered = server.stats["answered"] + server.stats["broken_body"]
        assert N_ITEMS <= answered <= N_ITEMS + CONCURRENCY + FLUSH_EVERY

        # Another run of the same version: nothing asked.
        before = server.stats["requests"]
        with django_capture_on_commit_callbacks(execute=False):
            again = judge_job_create(project=project, version=version, concurrency=CONCURRENCY)
        send(run_judge, redis_url, again.pk, queue=queue)
        wait_for(lambda: JudgeJob.objects.get(pk=again.pk).status == ScoringStatus.DONE,
                 second, 60, "the third run")
        assert server.stats["requests"] == before
        assert JudgeJob.objects.get(pk=again.pk).detail["calls"] == 0
