"""Serving: the batch endpoint queues LERC as a job scored in Celery (never a model load in a
web request); the project scoring task caches LERC scores per version."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import TaskKind
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import model_version_create
from testing.factories import make_project, make_user

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


def test_batch_scoring_endpoint_queues_lerc_as_a_job_scored_in_celery(trained_model_dir,
                                                                      monkeypatch):
    """LERC loads a model: the endpoint never scores it in the request but stores a job (202)
    whose Celery task scores the items with the promoted version, as the registry does."""
    from metrics_app.models import ItemScoringJob
    from metrics_app.registry import MetricInput, get_metric
    from metrics_app.services import scoring
    from worker.tasks.metrics import score_items

    version = _served(trained_model_dir)
    client = APIClient()
    url = reverse("metrics-api:metric-score")
    assert client.post(url, {"metrics": ["lerc"], "items": ITEMS}, format="json"
                       ).status_code == 401

    owner = make_user()
    client.force_authenticate(owner)
    with monkeypatch.context() as patched:  # nothing model-based is built in the request
        patched.setattr(scoring, "get_metric", lambda *a, **k: pytest.fail("built in request"))
        response = client.post(url, {"metrics": ["lerc", "f1"], "items": ITEMS}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    job = ItemScoringJob.objects.get(pk=body["id"])
    assert body == {"id": job.pk, "status": "queued",
                    "url": reverse("metrics-api:score-job", args=[job.pk])}
    assert (job.queue, job.requested_by, job.total) == ("gpu", owner, 4)
    queued = client.get(body["url"]).json()
    assert queued["status"] == "queued" and queued["results"] is None
    assert queued["progress"] == {"done": 0, "total": 4}

    score_items.run(job.pk)

    done = client.get(body["url"]).json()
    assert done["status"] == "done" and done["error"] == "", done
    assert done["progress"] == {"done": 4, "total": 4}
    assert done["metrics"] == ["lerc", "f1"] and done["model"] is None
    assert done["versions"]["lerc"] == f"v{version.number}"
    inputs = [MetricInput(id=row["id"], question=row["question"],
                          references=row["references"], candidate=row["candidate"],
                          passage=row.get("passage", "")) for row in ITEMS]
    direct = get_metric("lerc").score_batch(inputs)
    assert [row["id"] for row in done["results"]] == ["a", "b"]
    assert [row["lerc"] for row in done["results"]] == pytest.approx(direct, abs=1e-5)
    assert [row["f1"] for row in done["results"]] == get_metric("f1").score_batch(inputs)

    client.force_authenticate(make_user("someone-else"))
    assert client.get(body["url"]).status_code == 404


def test_lerc_job_whose_model_cannot_load_ends_failed_with_the_reason(tmp_path):
    from metrics_app.models import ItemScoringJob
    from worker.tasks.metrics import score_items

    _served(str(tmp_path / "missing-model"))
    client = APIClient()
    client.force_authenticate(make_user())
    body = client.post(reverse("metrics-api:metric-score"),
                       {"metrics": ["lerc", "em"], "items": ITEMS}, format="json").json()
    score_items.run(body["id"])
    failed = client.get(body["url"]).json()
    assert failed["status"] == "failed" and failed["error"].startswith("lerc"), failed
    assert "missing-model" in failed["error"]
    # The other metric's scores are kept; LERC's are null.
    assert [(row["lerc"], row["em"]) for row in failed["results"]] == [(None, 1.0), (None, 0.0)]
    assert ItemScoringJob.objects.get(pk=body["id"]).finished_at is not None


@pytest.mark.reliability
def test_a_leftover_lerc_score_project_message_becomes_one_guarded_scoring_job(
        trained_model_dir):
    """`lerc_score_project` is sent by nothing any more; a message still in a broker becomes an
    ordinary scoring job (job lease, one run) scoring with the promoted version: nothing is
    scored by the message itself, a second copy reuses the waiting job, and the job caches the
    scores per version as any scoring job does."""
    from metrics_app.models import MetricScore, ScoringJob, ScoringStatus
    from testing.factories import make_item
    from worker.tasks.lerc import lerc_score_project
    from worker.tasks.metrics import score_project

    version = _served(trained_model_dir)
    project = make_project(kind=TaskKind.LIKERT)
    items = [make_item(project) for _ in range(3)]
    outcome = lerc_score_project.run(project.pk)
    job = ScoringJob.objects.get(pk=outcome["scoring_job"])
    assert outcome["created"] and outcome["ignored_model_version"] is None
    assert (job.metrics, job.queue, job.options, job.status, job.requested_by) == (
        ["lerc"], "gpu", {}, ScoringStatus.QUEUED, None)
    assert not MetricScore.objects.exists()  # the message scored nothing itself
    copy = lerc_score_project.run(project.pk)
    assert (copy["scoring_job"], copy["created"]) == (job.pk, False)
    assert ScoringJob.objects.count() == 1

    score_project.run(job.pk)
    job.refresh_from_db()
    assert job.status == ScoringStatus.DONE and job.attempts == 1, job.error
    assert job.detail["lerc"]["scored"] == 3 and job.detail["lerc"]["error"] == ""
    stored = MetricScore.objects.filter(item__project=project, metric="lerc",
                                        version=f"v{version.number}")
    assert sorted(stored.values_list("item_id", flat=True)) == [i.pk for i in items]
    assert all(isinstance(value, float) for value in stored.values_list("value", flat=True))
    score_project.run(job.pk)  # a redelivery of the job's own task: the lease runs it once
    assert ScoringJob.objects.get(pk=job.pk).attempts == 1
    # A copy arriving after the job finished queues a new one, which finds everything cached.
    late = lerc_score_project.run(project.pk)
    assert late["created"] and late["scoring_job"] != job.pk
    score_project.run(late["scoring_job"])
    assert ScoringJob.objects.get(pk=late["scoring_job"]).detail["lerc"]["cached"] == 3


def test_a_leftover_lerc_score_project_message_for_a_deleted_project_scores_nothing():
    from metrics_app.models import ScoringJob
    from worker.tasks.lerc import lerc_score_project

    outcome = lerc_score_project.run(987654)
    assert outcome["scoring_job"] is None and "project 987654 no longer exists" in outcome["note"]
    assert not ScoringJob.objects.exists()