"""Serving: the synchronous batch endpoint refuses LERC (a model load in a web request); the
project scoring task caches LERC scores per version."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import TaskKind
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


def test_batch_scoring_endpoint_refuses_lerc_in_the_request(trained_model_dir):
    """LERC loads a model: the synchronous endpoint refuses it (400) and points at scoring
    jobs, which score with the promoted version in Celery (tested below)."""
    _served(trained_model_dir)
    client = APIClient()
    url = reverse("metrics-api:metric-score")
    assert client.post(url, {"metrics": ["lerc"], "items": ITEMS}, format="json"
                       ).status_code == 401

    client.force_authenticate(make_user())
    response = client.post(url, {"metrics": ["lerc"], "items": ITEMS}, format="json")
    assert response.status_code == 400
    assert "lerc" in str(response.json()) and "scoring job" in str(response.json())


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
