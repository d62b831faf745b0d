"""LERC tasks (routed to the `gpu` queue by CELERY_TASK_ROUTES, except the beat checks
`lerc_refresh` and `lerc_fail_stale`, which go to `default`). Thin: ids in, services do the
work. Late acks + reject-on-worker-lost mean a task whose worker dies is delivered again; the
services make that safe (a finished version is left alone, a dead one resumes or is failed)."""
from __future__ import annotations

from celery import shared_task

from core.vocabulary import ModelKind


@shared_task(bind=True, name="worker.tasks.lerc.lerc_train", acks_late=True,
             reject_on_worker_lost=True, max_retries=None)
def lerc_train(self, model_version_id: int) -> str:
    from metrics_app.models import ModelVersion
    from metrics_app.services.lerc import TrainingElsewhere, model_version_train

    try:
        version = model_version_train(model_version=ModelVersion.objects.get(pk=model_version_id))
    except TrainingElsewhere as exc:
        # Unbounded: every retry ends once the version is finished, failed or resumed here.
        raise self.retry(countdown=exc.countdown) from exc
    return version.status


@shared_task(name="worker.tasks.lerc.lerc_evaluate", acks_late=True, reject_on_worker_lost=True)
def lerc_evaluate(model_version_id: int) -> str:
    """Apply the promotion rule again to an evaluated version (e.g. after a rollback)."""
    from metrics_app.models import ModelVersion
    from metrics_app.services.lerc import model_version_decide

    version = model_version_decide(model_version=ModelVersion.objects.get(pk=model_version_id))
    return version.status


@shared_task(name="worker.tasks.lerc.lerc_score_project", acks_late=True)
def lerc_score_project(project_id: int, model_version_id: int | None = None) -> dict:
    """Score every item of a project with LERC and cache the scores (MetricScore)."""
    from annotation.models import Project
    from metrics_app.models import ModelVersion
    from metrics_app.services.scoring import project_score_metrics

    project = Project.objects.get(pk=project_id)
    metric = ModelKind.for_task_kind(project.kind).metric_name
    model = None
    if model_version_id is not None:
        model = f"v{ModelVersion.objects.get(pk=model_version_id).number}"
    return project_score_metrics(project=project, metric_names=[metric], model=model)


@shared_task(name="worker.tasks.lerc.lerc_refresh")
def lerc_refresh() -> list[int]:
    """Beat: enqueue retraining for projects with enough new judgments."""
    from metrics_app.services.lerc import lerc_refresh as refresh

    return [version.id for version in refresh()]


@shared_task(name="worker.tasks.lerc.lerc_fail_stale")
def lerc_fail_stale() -> list[int]:
    """Beat: versions 'training' whose worker stopped sending heartbeats become failed."""
    from metrics_app.services.lerc import model_versions_fail_stale

    return [version.id for version in model_versions_fail_stale()]
