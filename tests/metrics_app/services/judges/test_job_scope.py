"""One run of a judge version on a project at a time, at every door: two judge jobs queued for
the same judge and project (a double click on the API, the API and `run_judge --queue`) run by
two real Celery worker processes must not both pay for every item."""
from __future__ import annotations

import pytest
from django.urls import reverse

from metrics_app.models import JudgeJob, ScoringStatus
from testing.factories import make_user
from testing.openai_server import FakeChatServer
from tests.metrics_app.services.judges.test_runs import _judge, _likert_project
from tests.support.celery_workers import send, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]

DONE = (ScoringStatus.DONE, ScoringStatus.FAILED)


def test_two_workers_never_pay_twice_for_one_judge_on_one_project(workers, redis_url, client):
    from worker.tasks.judges import run_judge as judge_run_task

    owner = make_user("owner")
    project = _likert_project(12)
    project.owner = owner
    project.save(update_fields=["owner"])
    client.force_login(owner)
    url = reverse("metrics-api:judge-jobs", args=[project.slug])
    first_worker = workers(queue="default")
    workers(queue="default")
    with FakeChatServer(latency=0.3) as server:
        version = _judge(server)
        answers = [client.post(url, {"judge": version.label, "concurrency": 2},
                               content_type="application/json") for _ in range(2)]
        queued = [a.json()["id"] for a in answers if a.status_code == 202]
        assert queued, [a.content for a in answers]
        for job_id in queued:
            send(judge_run_task, redis_url, job_id, queue="default")
        wait_for(lambda: JudgeJob.objects.filter(pk__in=queued, status__in=DONE).count()
                 == len(queued), first_worker, 120, "the judge jobs to finish")
        asked = server.stats["requests"]
    assert asked == 12, f"{asked} paid requests for 12 items"
    assert all(JudgeJob.objects.get(pk=pk).status == ScoringStatus.DONE for pk in queued)
