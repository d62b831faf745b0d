"""LERC on the platform: datasets from gathered judgments, model versions, training, promotion,
refresh and stuck-job safety. The training itself is `metrics_app.lerc` (no Django there).

Life of a version: queued → training → evaluated → promoted | rejected; failed on an error or a
lost worker; cancelled on request. Every transition is logged in ModelVersionEvent.

Promotion rule: a new version is promoted only if its validation metric (Pearson, or pairwise
accuracy for A/B) is at least the promoted version's measured on the SAME validation judgments
(the incumbent is re-scored on the newcomer's validation set, so growing data never compares
apples with oranges). The test split / held-out dataset is reported, never used to decide.

Promotion is scoped by project set: a version competes with, and replaces, only the promoted
version trained on the same set of projects (the refresh trains per project, so project B's
model never replaces project A's after being compared on B's judgments alone). The `lerc`
metric for a project serves the most recently promoted version whose projects include it.

One module per job: `datasets` (judgments to examples and splits), `training` (versions,
the training run, its heartbeat), `evaluation` (scorers and validation/test numbers),
`promotion` (the floor, promote, roll back, which version serves), `model_card`, `refresh`
(scheduled retraining and stuck-job safety), `options` (a version's stored options and the one
place they become a TrainConfig); `common` holds what they share.
"""
from .common import NAME_BY_KIND, TASK_KIND_BY_MODEL_KIND, LercError
from .datasets import SPLIT_MODES, VAL_SPLITS, LercDataset, lerc_dataset_build, mc_pretraining_build
from .evaluation import lerc_minimal_pair_accuracy, model_version_scorer
from .model_card import (
    hidden_project_slugs,
    model_card,
    model_card_page,
    model_version_summary,
    write_model_card,
)
from .options import default_train_options
from .promotion import (
    PromotionNeedsForce,
    hand_promotion_objection,
    model_version_decide,
    model_version_for_label,
    model_version_promote,
    model_version_rollback,
    promoted_model_version,
)
from .refresh import lerc_refresh, lerc_refresh_due
from .training import (
    TrainingElsewhere,
    model_version_cancel,
    model_version_create,
    model_version_enqueue,
    model_version_train,
    model_version_train_here,
    model_version_worker_lost,
)

__all__ = [
    "LercDataset",
    "LercError",
    "NAME_BY_KIND",
    "PromotionNeedsForce",
    "SPLIT_MODES",
    "TASK_KIND_BY_MODEL_KIND",
    "TrainingElsewhere",
    "VAL_SPLITS",
    "default_train_options",
    "hand_promotion_objection",
    "lerc_dataset_build",
    "lerc_minimal_pair_accuracy",
    "lerc_refresh",
    "lerc_refresh_due",
    "mc_pretraining_build",
    "hidden_project_slugs",
    "model_card",
    "model_card_page",
    "model_version_summary",
    "model_version_cancel",
    "model_version_create",
    "model_version_decide",
    "model_version_enqueue",
    "model_version_for_label",
    "model_version_promote",
    "model_version_rollback",
    "model_version_scorer",
    "model_version_train",
    "model_version_train_here",
    "model_version_worker_lost",
    "promoted_model_version",
    "write_model_card",
]
