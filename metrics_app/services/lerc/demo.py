"""The demo's own LERC model: on the first start of `rundemo` (no model version exists yet),
one small CPU training run on the demo's EVOUNA-NQ judgments is queued for the background
worker, so `score --metric lerc` and the metrics pages have a served model minutes later.

Sized for a laptop or a 2-core box: the sample's ~1,350 usable judgments (exact matches are
dropped; about 1,100 train, 110 validation, 140 test), one epoch, validation and test capped at
500 each. Measured on 2 cores: 66 s for training and evaluation on an idle machine, 6–7 minutes
while other work shared the cores. The promotion floor (beat F1, BERTScore and METEOR on the
validation judgments) passed every time: validation Pearson 0.92–0.95 against METEOR's
0.66–0.68 (test: 0.84 against 0.66). Should a run be refused by the floor, the version ends
"rejected" and its model card (admin) shows the decision.
"""
from __future__ import annotations

from django.db import transaction

from annotation.models import Judgment, Project
from metrics_app.models import ModelKind, ModelVersion

from .training import model_version_create, model_version_enqueue

DEMO_PROJECT_SLUG = "demo-evouna-nq"
DEMO_TRAIN_OPTIONS = {
    "epochs": 1, "max_length": 256, "max_train_examples": 2000, "max_val_examples": 500,
    "max_test_examples": 500,
}
DEMO_REASON = "demo: first start of rundemo (small CPU run on the EVOUNA-NQ sample)"


@transaction.atomic
def lerc_demo_training_ensure(*, project_slug: str = DEMO_PROJECT_SLUG) -> ModelVersion | None:
    """Queue the demo's training run on the first start; None when any model version exists
    already (trained, training, queued or failed: a later start never retrains by itself) or
    the demo project has no judgments."""
    if ModelVersion.objects.exists():
        return None
    project = Project.objects.filter(slug=project_slug).first()
    if project is None or not Judgment.objects.filter(item__project=project).exists():
        return None
    version = model_version_create(projects=[project], kind=ModelKind.REGRESSION,
                                   train_options=DEMO_TRAIN_OPTIONS, reason=DEMO_REASON)
    model_version_enqueue(model_version=version)
    return version
