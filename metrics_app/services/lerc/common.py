"""What the LERC service modules share: model names per kind, the trained statuses, the error
and the event log of a version (`version_event`)."""
from __future__ import annotations

from annotation.models import TaskKind
from core import vocabulary
from metrics_app.models import ModelKind, ModelStatus, ModelVersion, ModelVersionEvent

NAME_BY_KIND = {kind: vocabulary.ModelKind(kind).model_name for kind in ModelKind}


TASK_KIND_BY_MODEL_KIND = {ModelKind.REGRESSION: TaskKind.LIKERT, ModelKind.PAIRWISE: TaskKind.AB}


# Finished training and evaluation: the promotion rule's verdict is in (or pending), and the
# weights are stored. A version label scores only with one of these (a rejected version may be
# compared by hand; a queued, failed or cancelled one has no model).
TRAINED = (ModelStatus.PROMOTED, ModelStatus.EVALUATED, ModelStatus.REJECTED)


def decision_pending(version: ModelVersion) -> bool:
    """Trained and evaluated, but the promotion rule never gave its verdict (the worker died
    between the two, or the decision raised): evaluated, never promoted, no decision stored.
    A version that was decided, or promoted by hand and later replaced, is evaluated too and
    never decided again (a late redelivery must not promote it a second time)."""
    return (version.status == ModelStatus.EVALUATED and version.promoted_at is None
            and "promotion_decision" not in (version.metrics or {}))


class LercError(Exception):
    """A LERC request that cannot be carried out; the message says why."""


class DataRefused(LercError):
    """A version refused before training for its data (no training example, one score): the
    same pinned judgments refuse again. Its version is failed with the reason stored under
    REFUSED in its data snapshot, and the scheduled refresh counts new judgments from it
    (`refresh.lerc_refresh_due`) rather than queue the same data again each beat."""


# The data snapshot key of a version refused for its data (the refusal's message).
REFUSED = "refused"


def version_event(model_version: ModelVersion, event: str, detail: str = "", user=None) -> None:
    from .model_card import model_card_refresh

    ModelVersionEvent.objects.create(model_version=model_version, event=event, detail=detail,
                                     user=user)
    model_card_refresh(model_version)  # the card on disk follows the status


def versions_locked(name: str) -> None:
    """Lock every version of the model `name` (in id order) for the rest of the transaction:
    the one lock that promotions, promotion decisions and training claims of a model take, so
    they happen one at a time and each sees the others' outcome."""
    list(ModelVersion.objects.select_for_update().filter(name=name).order_by("pk")
         .values_list("pk", flat=True))
