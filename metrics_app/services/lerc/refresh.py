"""Scheduled work: retrain when enough new judgments arrived (counting only work gathered here
unless imports are asked for). Versions whose worker stopped beating are failed by the one
lease sweep (metrics_app/services/job_leases.py)."""
from __future__ import annotations

from django.conf import settings
from django.db import transaction

from annotation.models import Project, StageKind
from annotation.selectors import judgments_that_count
from metrics_app.models import ModelKind, ModelStatus, ModelVersion

from .common import IN_FLIGHT, NAME_BY_KIND, TASK_KIND_BY_MODEL_KIND, TRAINED
from .options import default_train_options_check
from .training import model_version_create, model_version_enqueue, model_versions_send_pending


def lerc_refresh_due(*, min_new_judgments: int) -> list[tuple[Project, ModelKind, int]]:
    """(project, model kind, new judgments) for projects that gathered at least
    `min_new_judgments` data judgments since the last version trained on them. Only judgments
    that count (`annotation.selectors.judgments_that_count`, the rule the training data is read
    by: no practice or qualification work, no rejected or returned assignment, no blocked
    worker) are counted; judgments in imported stages do not count unless
    QAJ_LERC_REFRESH_COUNTS_IMPORTS is true.

    "Since" counts from the latest version that includes the project and finished training
    (promoted, evaluated or rejected): counting from the promoted one would retrain after every
    rejection on every beat, and counting from a failed one (e.g. a lost worker) would wait for
    N more judgments before replacing a version that never trained. A project whose newest
    version is in flight is skipped.
    """
    due = []
    for kind, task_kind in TASK_KIND_BY_MODEL_KIND.items():
        for project in Project.objects.filter(kind=task_kind).order_by("id"):
            versions = (ModelVersion.objects.filter(name=NAME_BY_KIND[kind], projects=project)
                        .exclude(status=ModelStatus.CANCELLED))
            if _in_flight(project, kind):
                continue
            latest = (versions.filter(status__in=TRAINED).order_by("-created_at", "-id")
                      .first())
            since = int(((latest.data_snapshot or {}).get("watermarks") or {})
                        .get(str(project.id), 0)) if latest else 0
            new = judgments_that_count(project=project).filter(id__gt=since)
            if not getattr(settings, "QAJ_LERC_REFRESH_COUNTS_IMPORTS", False):
                # Imported judgments were gathered elsewhere (and a re-import of the same file
                # adds none): only work collected here makes a refresh due.
                new = new.exclude(stage__kind=StageKind.IMPORTED)
            new = new.count()
            if new >= min_new_judgments:
                due.append((project, kind, new))
    return due


def _in_flight(project: Project, kind: ModelKind) -> bool:
    """Whether the project's newest version of the kind (not cancelled) is queued or
    training."""
    newest = (ModelVersion.objects.filter(name=NAME_BY_KIND[kind], projects=project)
              .exclude(status=ModelStatus.CANCELLED).order_by("-created_at", "-id").first())
    return newest is not None and newest.status in IN_FLIGHT


def lerc_refresh(*, min_new_judgments: int | None = None) -> list[ModelVersion]:
    """Create and enqueue a training version for every project that is due; first send the
    queued versions that never reached the broker (`model_versions_send_pending`)."""
    model_versions_send_pending()
    if min_new_judgments is None:
        min_new_judgments = int(getattr(settings, "QAJ_LERC_MIN_NEW_JUDGMENTS", 500))
    due = lerc_refresh_due(min_new_judgments=min_new_judgments)
    if due:
        # Refused before any version is created (the task fails saying what to fix), not
        # queued to fail on the worker.
        default_train_options_check()
    created = []
    for project, kind, new in due:
        with transaction.atomic():
            # Refreshes take turns per project (a second beat, an overlapping run): one that
            # finds a version queued meanwhile by another does not queue a second one.
            Project.objects.select_for_update().filter(pk=project.pk).first()
            if _in_flight(project, kind):
                continue
            version = model_version_create(projects=[project], kind=kind,
                                           reason=f"refresh: {new} new judgments in {project.slug}")
            model_version_enqueue(model_version=version)
        created.append(version)
    return created
