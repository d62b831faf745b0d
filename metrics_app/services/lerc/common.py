"""What the LERC service modules share: model names per kind, the in-flight statuses, the error
and the event log of a version (`version_event`)."""
from __future__ import annotations

from annotation.models import TaskKind
from metrics_app.models import ModelKind, ModelStatus, ModelVersion, ModelVersionEvent

NAME_BY_KIND = {ModelKind.REGRESSION: "lerc", ModelKind.PAIRWISE: "lerc-ab"}


TASK_KIND_BY_MODEL_KIND = {ModelKind.REGRESSION: TaskKind.LIKERT, ModelKind.PAIRWISE: TaskKind.AB}


IN_FLIGHT = (ModelStatus.QUEUED, ModelStatus.TRAINING)


class LercError(Exception):
    """A LERC request that cannot be carried out; the message says why."""


def version_event(model_version: ModelVersion, event: str, detail: str = "", user=None) -> None:
    from .model_card import model_card_refresh

    ModelVersionEvent.objects.create(model_version=model_version, event=event, detail=detail,
                                     user=user)
    model_card_refresh(model_version)  # the card on disk follows the status
