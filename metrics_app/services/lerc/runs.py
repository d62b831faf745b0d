"""What the LERC Celery tasks run (worker/tasks/lerc.py): an id in, one service call, the
outcome out, so the tasks hold no queries and no branching on kind."""
from __future__ import annotations

import logging

from django.db import transaction

from annotation.models import Project
from core.vocabulary import ModelKind
from metrics_app.models import ModelVersion, ScoringJob, ScoringStatus
from metrics_app.services.scoring import scoring_jobs_create

from .common import version_event
from .promotion import model_version_decide
from .refresh import DECISION_ERROR
from .training import model_version_train

logger = logging.getLogger(__name__)


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


def lerc_scoring_job_for_message(*, project_id: int, model_version_id: int | None = None
                                 ) -> dict:
    """What a leftover `lerc_score_project` message (a task nothing sends any more) does: it
    becomes an ordinary scoring job of the project's LERC metric (`scoring_jobs_create`, run
    under the job lease by `metrics.score_project`), never a scoring run of its own.

    The message has no requester, so it may not choose a version: the job scores with the
    version that serves the project (the promoted one), and a `model_version_id` it names is
    only logged. A queued or running job of the same metric for the project (a redelivered
    message, the same message sent twice) is reused, not doubled. Returns
    {"scoring_job": id or None, "created": bool, "ignored_model_version": id or None, "note"}."""
    outcome = {"scoring_job": None, "created": False,
               "ignored_model_version": model_version_id, "note": ""}
    with transaction.atomic():
        # Messages for one project take turns, so two copies find each other's job.
        project = Project.objects.select_for_update().filter(pk=project_id).first()
        if project is None:
            outcome["note"] = f"project {project_id} no longer exists; nothing scored"
            logger.warning("lerc_score_project: %s", outcome["note"])
            return outcome
        metric = ModelKind.for_task_kind(project.kind).metric_name
        waiting = (ScoringJob.objects.filter(project=project, status__in=(
            ScoringStatus.QUEUED, ScoringStatus.RUNNING)).order_by("pk"))
        job = next((job for job in waiting
                    if job.metrics == [metric] and not (job.options or {}).get("model")), None)
        if job is None:
            try:
                job = scoring_jobs_create(project=project, metric_names=[metric])[0]
            except ValueError as exc:  # a project kind with nothing LERC can score
                outcome["note"] = f"{project.slug}: {exc}"
                logger.warning("lerc_score_project: %s", outcome["note"])
                return outcome
            outcome["created"] = True
    outcome["scoring_job"] = job.pk
    outcome["note"] = (f"{project.slug}: {metric} scored by scoring job {job.pk} with the "
                       "promoted version")
    if model_version_id is not None:
        outcome["note"] += (f"; the message named model version id {model_version_id}, which "
                            "a message without a requester may not choose (ignored)")
    logger.warning("lerc_score_project (legacy message): %s", outcome["note"])
    return outcome
