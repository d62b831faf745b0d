"""Broker unavailable (CELERY_BROKER_URL pointing at a closed port): workers' judgments are
still accepted (nothing on the submit path talks to the broker), a researcher's scoring request
is stored and answered instead of failing, and the job is sent once the broker is back."""
from __future__ import annotations

import json
import socket
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import Judgment, TaskKind
from annotation.services.access import assignment_token_make
from annotation.services.assignments import assignment_start
from metrics_app.models import ScoringJob, ScoringStatus
from metrics_app.services.scoring import scoring_jobs_enqueue_pending
from testing.factories import make_worker
from tests.support.tasks import make_task
from worker.celery import app as celery_app

pytestmark = [pytest.mark.reliability, pytest.mark.django_db(transaction=True)]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the socket is: nobody listens


def _use_broker(url: str, transport_options: dict) -> None:
    celery_app.conf.broker_url = url
    celery_app.conf.broker_transport_options = transport_options
    celery_app.conf.broker_connection_timeout = 1
    celery_app._pool = None  # connections are pooled per broker URL
    celery_app.amqp._producer_pool = None


@pytest.fixture
def tiny_lerc_options() -> dict:
    from tests.support.lerc import TINY_BERT, TINY_TRAIN_OPTIONS

    return {**TINY_TRAIN_OPTIONS, "backbone_config": dict(TINY_BERT)}


@pytest.fixture
def broker_down():
    saved = (celery_app.conf.broker_url, dict(celery_app.conf.broker_transport_options or {}))
    _use_broker(f"redis://127.0.0.1:{_closed_port()}/0", {})
    yield
    _use_broker(*saved)


def test_broker_down_judgments_accepted_and_scoring_jobs_sent_when_it_returns(
        client, broker_down, researcher, monkeypatch):
    with pytest.raises(Exception):  # noqa: B017 - kombu's OperationalError: really unreachable
        with celery_app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1)

    project, stage, items = make_task(TaskKind.LIKERT, n_items=3, owner=researcher)
    assignment = assignment_start(stage=stage, worker=make_worker())
    response = client.post(
        reverse("annotation:task-submit"), content_type="application/json",
        data=json.dumps({"answers": [{"item": item.pk, "score": 3} for item in items]}),
        HTTP_X_ASSIGNMENT_TOKEN=assignment_token_make(assignment=assignment))
    assert response.status_code == 200 and response.json()["ok"], response.content
    assert Judgment.objects.filter(assignment=assignment).count() == 3

    api = APIClient()
    api.force_authenticate(researcher)
    response = api.post(f"/api/metrics/projects/{project.slug}/scoring-jobs/",
                        {"metrics": ["em"]}, format="json")
    assert response.status_code == 202, response.content
    job = ScoringJob.objects.get(project=project)
    assert (job.status, job.task_id) == (ScoringStatus.QUEUED, "")

    # Still down: the periodic re-send leaves the job waiting, without raising.
    ScoringJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(hours=1))
    assert scoring_jobs_enqueue_pending() == 0

    # The broker is back: the job is sent, exactly once.
    sent = []
    monkeypatch.setattr("worker.tasks.metrics.score_project.apply_async",
                        lambda *args, **kwargs: sent.append(kwargs) or type("R", (), {"id": "t1"}))
    assert scoring_jobs_enqueue_pending() == 1
    assert scoring_jobs_enqueue_pending() == 0
    job.refresh_from_db()
    assert job.task_id == "t1" and sent == [{"args": [job.pk], "queue": job.queue}]


def test_pending_scoring_jobs_are_resent_by_beat(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["metrics-enqueue-pending-scoring"]
    assert entry["task"] == "metrics.enqueue_pending_scoring"
    assert "metrics.enqueue_pending_scoring" in celery_app.tasks


def test_a_lerc_version_queued_while_the_broker_was_down_is_sent_by_the_next_refresh(
        broker_down, settings, monkeypatch, tiny_lerc_options):
    """The beat refresh creates a version while the broker is down: the refresh still
    finishes (the version is stored, queued, not sent), and once the broker is back the next
    refresh sends it, so the project is not left with a queued version nobody will train
    (which would also keep every later refresh from retraining it)."""
    from metrics_app.models import ModelStatus, ModelVersion
    from metrics_app.services.lerc import lerc_refresh
    from testing.factories import make_item, make_judgment, make_project, make_stage

    settings.QAJ_LERC_TRAIN_OPTIONS = tiny_lerc_options
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    for score in (2, 3, 4):
        make_judgment(item=make_item(project), stage=stage, score=score)
    created = lerc_refresh(min_new_judgments=3)
    version = ModelVersion.objects.get()
    assert [v.pk for v in created] == [version.pk]
    assert (version.status, version.task_id) == (ModelStatus.QUEUED, "")

    ModelVersion.objects.filter(pk=version.pk).update(
        created_at=timezone.now() - timedelta(hours=1))
    assert lerc_refresh(min_new_judgments=3) == []  # still down: still waiting, no second one
    sent = []
    monkeypatch.setattr("worker.tasks.lerc.lerc_train.apply_async",
                        lambda *args, **kwargs: sent.append(kwargs) or type("R", (), {"id": "t"}))
    assert lerc_refresh(min_new_judgments=3) == []
    version.refresh_from_db()
    assert [s["args"] for s in sent] == [[version.pk]] and version.task_id
    assert ModelVersion.objects.count() == 1
    lerc_refresh(min_new_judgments=3)
    assert len(sent) == 1  # sent once
