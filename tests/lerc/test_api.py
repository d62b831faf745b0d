"""Serving over REST: the metrics API's batch endpoint scores with LERC through the registry
(authenticated, size-limited), with the promoted version or a pinned one."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import TaskKind
from metrics_app.lerc.data import LercExample
from metrics_app.lerc.infer import LercScorer
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import model_version_create
from tests.factories import make_project, make_user

pytestmark = pytest.mark.django_db

ITEMS = [
    {"id": "a", "passage": "Thing 1 is red.", "question": "What color is thing 1?",
     "references": ["red", "crimson"], "candidate": "red"},
    {"id": "b", "question": "What color is thing 2?", "references": ["blue"],
     "candidate": "green"},
]


def _served(model_dir, status=ModelStatus.PROMOTED):
    version = model_version_create(projects=[make_project(kind=TaskKind.LIKERT)])
    ModelVersion.objects.filter(pk=version.pk).update(
        status=status, artifact_uri=model_dir, promoted_at=timezone.now())
    version.refresh_from_db()
    return version


def test_batch_scoring_endpoint_uses_promoted_lerc(trained_model_dir):
    version = _served(trained_model_dir)
    client = APIClient()
    url = reverse("metrics-api:metric-score")
    assert client.post(url, {"metrics": ["lerc"], "items": ITEMS}, format="json"
                       ).status_code == 401

    client.force_authenticate(make_user())
    response = client.post(url, {"metrics": ["lerc"], "items": ITEMS}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["versions"] == {"lerc": f"v{version.number}"}
    expected = LercScorer(trained_model_dir).score([
        LercExample(question=i["question"], references=tuple(i["references"]),
                    candidate=i["candidate"], passage=i.get("passage", "")) for i in ITEMS])
    assert [r["lerc"] for r in body["results"]] == pytest.approx(expected, abs=1e-4)

    pinned = client.post(url, {"metrics": ["lerc"], "model": "v999", "items": ITEMS},
                         format="json").json()
    assert "there is no lerc v999" in pinned["errors"]["lerc"]

    too_many = client.post(url, {"metrics": ["lerc"], "items": ITEMS * 200}, format="json")
    assert too_many.status_code == 400


def test_score_project_task_caches_lerc_scores(trained_model_dir):
    from metrics_app.models import MetricScore
    from tests.factories import make_item
    from worker.tasks.lerc import lerc_score_project

    version = _served(trained_model_dir)
    project = make_project(kind=TaskKind.LIKERT)
    items = [make_item(project) for _ in range(3)]
    summary = lerc_score_project.run(project.pk)
    assert summary["lerc"]["scored"] == 3 and summary["lerc"]["error"] == ""
    stored = MetricScore.objects.filter(item__project=project, metric="lerc",
                                        version=f"v{version.number}")
    assert sorted(stored.values_list("item_id", flat=True)) == [i.pk for i in items]
    assert all(isinstance(value, float) for value in stored.values_list("value", flat=True))
    assert lerc_score_project.run(project.pk)["lerc"]["cached"] == 3
