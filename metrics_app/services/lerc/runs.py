"""What the LERC Celery tasks run (worker/tasks/lerc.py): an id in, one service call, the
outcome out, so the tasks hold no queries and no branching on kind."""
from __future__ import annotations

from annotation.models import Project
from core.vocabulary import ModelKind
from metrics_app.models import ModelVersion
from metrics_app.services.scoring import project_score_metrics

from .common import version_event
from .promotion import model_version_decide
from .refresh import DECISION_ERROR
from .training import model_version_train


def model_version_train_run(*, model_version_id: int) -> str:
    """Train (or resume, or leave alone) one version; its status afterwards. Raises
    TrainingElsewhere when another machine's worker holds it (the task retries)."""
    version = ModelVersion.objects.get(pk=model_version_id)
    return model_version_train(model_version=version).status


def model_version_decide_run(*, model_version_id: int) -> str:
    """Apply the promotion rule to a version trained but not yet decided (a decided one is
    left alone); its status afterwards. A decision that raises is logged on the version, so
    the sweep that gives up on it (`refresh.model_versions_decide_pending`) can say why."""
    version = ModelVersion.objects.get(pk=model_version_id)
    try:
        return model_version_decide(model_version=version).status
    except Exception as exc:
        version_event(version, DECISION_ERROR, f"{type(exc).__name__}: {exc}")
        raise


def project_score_lerc(*, project_id: int, model_version_id: int | None = None) -> dict:
    """Score every item of a project with the LERC metric of its kind (the pairwise one for
    A/B projects), with the given version or the promoted one, caching the scores."""
    project = Project.objects.get(pk=project_id)
    metric = ModelKind.for_task_kind(project.kind).metric_name
    model = None
    if model_version_id is not None:
        # Named with its model, so a version of the other kind is refused, never read as this
        # kind's version of the same number.
        version = ModelVersion.objects.get(pk=model_version_id)
        model = f"{version.name}:v{version.number}"
    return project_score_metrics(project=project, metric_names=[metric], model=model)
