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

from dataclasses import dataclass

from django.db import transaction

from annotation.models import Judgment, Project
from core.leases import owner_state
from metrics_app.models import ModelKind, ModelStatus, ModelVersion

from .common import version_event
from .training import model_version_create, model_version_enqueue

DEMO_PROJECT_SLUG = "demo-evouna-nq"
DEMO_TRAIN_OPTIONS = {
    "epochs": 1, "max_length": 256, "max_train_examples": 2000, "max_val_examples": 500,
    "max_test_examples": 500,
}
DEMO_REASON = "demo: first start of rundemo (small CPU run on the EVOUNA-NQ sample)"


@dataclass(frozen=True)
class DemoTraining:
    version: ModelVersion
    resumed: bool  # False: queued now for the first time


@transaction.atomic
def lerc_demo_training_ensure(*, project_slug: str = DEMO_PROJECT_SLUG) -> DemoTraining | None:
    """Queue the demo's training run on the first start (no model version exists); None when
    any version exists already (a later start never trains a new one by itself) or the demo
    project has no judgments.

    One exception: a version left "training" by a worker process of this machine that is gone
    (the demo was stopped mid-training, and the filesystem broker had already handed the task
    out) is sent again, and the training task resumes it (a redelivery; see
    `model_version_train`). A version still queued keeps its message in the broker and is not
    sent twice."""
    interrupted = [version for version in ModelVersion.objects.filter(status=ModelStatus.TRAINING)
                   if owner_state(version.lease) == "dead"]
    for version in interrupted:
        version_event(version, "requeued", "rundemo started again after it stopped mid-training")
        model_version_enqueue(model_version=version)
    if interrupted:
        return DemoTraining(version=interrupted[0], resumed=True)
    if ModelVersion.objects.exists():
        return None
    project = Project.objects.filter(slug=project_slug).first()
    if project is None or not Judgment.objects.filter(item__project=project).exists():
        return None
    version = model_version_create(projects=[project], kind=ModelKind.REGRESSION,
                                   train_options=DEMO_TRAIN_OPTIONS, reason=DEMO_REASON)
    model_version_enqueue(model_version=version)
    return DemoTraining(version=version, resumed=False)
