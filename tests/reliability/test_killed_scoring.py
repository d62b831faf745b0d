"""A Celery worker SIGKILLed in the middle of a scoring job: the late-acked task is delivered
again to the next worker, which finishes the job; every item ends with exactly one score per
metric (scores are cached per item, metric and version; a redelivery reuses them)."""
from __future__ import annotations

import signal

import pytest

from annotation.models import TaskKind
from metrics_app.models import MetricScore, ScoringJob, ScoringStatus
from testing.factories import item_content, make_item, make_project
from tests.support.celery_workers import send, wait_for
from worker.tasks.metrics import score_project

pytestmark = [pytest.mark.reliability, pytest.mark.integration, pytest.mark.slow]

N_ITEMS = 800


def test_scoring_job_killed_mid_way_is_redelivered_and_scores_each_item_once(workers,
                                                                             redis_url):
    project = make_project(TaskKind.LIKERT)
    for n in range(N_ITEMS):
        content = item_content(TaskKind.LIKERT, n)
        content["candidate"] = f"{content['candidate']} variant {n}"
        make_item(project, content=content)
    job = ScoringJob.objects.create(project=project, metrics=["bertscore"], queue="gpu")
    # Unacknowledged messages go back to the queue after 2 s without a consumer.
    env = {"QAJ_BROKER_VISIBILITY_TIMEOUT": "2", "CELERY_BROKER_URL": redis_url}
    first = workers(**env)
    send(score_project, redis_url, job.pk)
    wait_for(lambda: ScoringJob.objects.get(pk=job.pk).done > 0, first, 240, "scoring to start")
    first.kill(signal.SIGKILL)
    job.refresh_from_db()
    assert job.status == ScoringStatus.RUNNING and 0 < job.done < job.total, job.done
    partial = MetricScore.objects.filter(item__project=project).count()

    second = workers(**env)
    wait_for(lambda: ScoringJob.objects.get(pk=job.pk).status != ScoringStatus.RUNNING,
             second, 300, "the redelivered job to finish")
    job.refresh_from_db()
    assert job.status == ScoringStatus.DONE, (job.status, job.error)
    scores = MetricScore.objects.filter(item__project=project, metric="bertscore")
    assert scores.count() == N_ITEMS >= partial
    assert scores.values("item").distinct().count() == N_ITEMS
