"""Scoring posted items with heavy metrics: `POST /api/metrics/score/` stores an
`ItemScoringJob` (202) instead of scoring in the request, the Celery task scores it, and only its
creator (or a superuser) reads the results. LERC end to end: tests/metrics_app/lerc/test_api.py."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from core.leases import JobLease
from metrics_app.models import ItemScoringJob, ScoringStatus
from metrics_app.registry import MetricInput, get_metric
from metrics_app.services.scoring import (
    item_scoring_job_create,
    item_scoring_job_run,
    scoring_jobs_enqueue_pending,
)
from testing.factories import make_user
from worker.tasks import metrics as metric_tasks

pytestmark = pytest.mark.django_db

URL = "/api/metrics/score/"


def _item(i: int) -> dict:
    return {"id": f"i{i}", "question": f"where is cat {i}?", "references": ["on the mat"],
            "candidate": ["on the mat", "under a chair", "on a mat"][i % 3]}


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_heavy_metric_job_needs_credentials():
    response = APIClient().post(URL, {"metrics": ["meteor"], "items": [_item(0)]},
                                format="json")
    assert response.status_code == 401
    assert not ItemScoringJob.objects.exists()
    assert APIClient().get(reverse("metrics-api:score-job", args=[1])).status_code == 401


def test_size_limits_sync_stays_100_jobs_take_1000():
    client = _client(make_user())
    cheap = client.post(URL, {"metrics": ["f1"], "items": [_item(i) for i in range(101)]},
                        format="json")
    assert cheap.status_code == 400 and "100" in str(cheap.json()["items"])
    accepted = client.post(URL, {"metrics": ["meteor"], "items": [_item(i) for i in range(1000)]},
                           format="json")
    assert accepted.status_code == 202
    too_many = client.post(URL, {"metrics": ["meteor"], "items": [_item(i) for i in range(1001)]},
                           format="json")
    assert too_many.status_code == 400 and "1000" in str(too_many.json()["items"])
    assert ItemScoringJob.objects.count() == 1
    with pytest.raises(ValueError, match="1000"):
        item_scoring_job_create(metric_names=["meteor"], user=None, inputs=[
            MetricInput(id=str(i), question="q", references=["a"], candidate="a")
            for i in range(1001)])


def test_job_scores_in_input_order_with_progress_and_only_its_creator_reads_it():
    owner, other = make_user("owner"), make_user("other")
    items = [_item(i) for i in range(7)]
    body = _client(owner).post(URL, {"metrics": ["bertscore", "em"], "items": items},
                               format="json").json()
    job = ItemScoringJob.objects.get(pk=body["id"])
    assert job.queue == "default" and job.total == 14

    seen = []
    original = JobLease.update

    def record(self, **fields):
        original(self, **fields)
        stored = ItemScoringJob.objects.get(pk=job.pk)
        seen.append((stored.status, stored.done))

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(JobLease, "update", record)
        item_scoring_job_run(job_id=job.pk, batch_size=3)
    # bertscore takes its 7 items in one call (encoder metrics ask for bigger calls, see
    # items_per_call), em 3 at a time: progress after each call.
    assert [done for status, done in seen if status == ScoringStatus.RUNNING] == [0, 7, 10, 13, 14]

    read = _client(owner).get(body["url"]).json()
    assert read["status"] == "done" and read["progress"] == {"done": 14, "total": 14}
    inputs = [MetricInput(**{"passage": "", **row}) for row in items]
    assert [row["id"] for row in read["results"]] == [row["id"] for row in items]
    assert [row["em"] for row in read["results"]] == get_metric("em").score_batch(inputs)
    assert [row["bertscore"] for row in read["results"]] == pytest.approx(
        get_metric("bertscore").score_batch(inputs), abs=1e-5)

    assert _client(other).get(body["url"]).status_code == 404
    superuser = make_user("boss")
    superuser.is_superuser = True
    superuser.save()
    assert _client(superuser).get(body["url"]).json()["results"] == read["results"]
    assert _client(owner).get(reverse("metrics-api:score-job", args=[job.pk + 99])
                              ).status_code == 404

    # A redelivered task leaves a finished job as it is.
    finished = ItemScoringJob.objects.get(pk=job.pk)
    assert item_scoring_job_run(job_id=job.pk) is None
    again = ItemScoringJob.objects.get(pk=job.pk)
    assert (again.finished_at, again.attempts, again.results) == (
        finished.finished_at, 1, finished.results)


def test_meteor_without_java_ends_the_job_failed_with_the_reason(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name, *args, **kwargs: None)
    client = _client(make_user())
    body = client.post(URL, {"metrics": ["meteor", "f1"], "items": [_item(0), _item(1)]},
                       format="json").json()
    metric_tasks.score_items.run(body["id"])
    read = client.get(body["url"]).json()
    assert read["status"] == "failed" and "Java" in read["error"], read
    assert [row["meteor"] for row in read["results"]] == [None, None]
    assert [row["f1"] for row in read["results"]] == [1.0, 0.0]


def test_an_exception_while_scoring_fails_the_job_and_reaches_celery(monkeypatch):
    from metrics_app.services import scoring

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(scoring, "score_inputs", broken)
    client = _client(make_user())
    body = client.post(URL, {"metrics": ["bertscore"], "items": [_item(0)]},
                       format="json").json()
    with pytest.raises(RuntimeError):
        metric_tasks.score_items.run(body["id"])
    read = client.get(body["url"]).json()
    assert read["status"] == "failed" and read["error"] == "RuntimeError: out of memory"
    assert read["results"] is None


def test_broker_down_job_is_stored_answered_and_sent_later_by_the_beat_task(
        monkeypatch, django_capture_on_commit_callbacks):
    def down(*args, **kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(metric_tasks.score_items, "apply_async", down)
    client = _client(make_user())
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(URL, {"metrics": ["lerc"], "items": [_item(0)]}, format="json")
    assert response.status_code == 202
    job = ItemScoringJob.objects.get(pk=response.json()["id"])
    assert (job.status, job.task_id, job.queue) == (ScoringStatus.QUEUED, "", "gpu")

    ItemScoringJob.objects.filter(pk=job.pk).update(
        created_at=timezone.now() - timedelta(hours=1))
    assert scoring_jobs_enqueue_pending() == 0  # still down

    sent = []
    monkeypatch.setattr(metric_tasks.score_items, "apply_async",
                        lambda *args, **kwargs: sent.append(kwargs) or type("R", (), {"id": "t9"}))
    assert metric_tasks.enqueue_pending_scoring.run() == 1
    assert scoring_jobs_enqueue_pending() == 0
    job.refresh_from_db()
    assert job.task_id == "t9" and sent == [{"args": [job.pk], "queue": "gpu"}]
