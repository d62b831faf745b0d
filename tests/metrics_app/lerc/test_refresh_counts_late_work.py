"""Work held for review (or awaiting its provider's verification) when a version read its
data does not count then, so that version never trained on it. Once the researcher approves
it, it counts: the scheduled refresh counts it as new too. Before, the refresh counted only
judgments above the version's watermark, so held work approved after a training never made
a project due again, however much of it there was (a finished study's last version lacked it
for good)."""
from __future__ import annotations

import pytest

from annotation.models import Assignment, AssignmentStatus, TaskKind
from metrics_app.models import ModelStatus
from metrics_app.services.lerc import lerc_refresh_due, model_version_create, model_version_train
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)
from tests.support.lerc import toy_examples

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _due(n: int):
    return [(p.pk, new) for p, _kind, new in lerc_refresh_due(min_new_judgments=n)]


def test_held_work_approved_after_a_training_makes_the_project_due(lerc_settings):
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {**lerc_settings.QAJ_LERC_TRAIN_OPTIONS, "epochs": 1}
    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = []
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    counted, held_worker = make_worker(), make_worker()
    items = []
    for split in ("train", "dev"):
        for example in toy_examples(12):
            item = make_item(project, split=split, dataset="toy", content={
                "passage": example.passage, "question": example.question,
                "references": list(example.references), "candidate": example.candidate})
            make_judgment(item=item, stage=stage, worker=counted, score=example.score)
            items.append((item, example.score))
    held = make_assignment(stage, worker=held_worker, items=[i for i, _ in items],
                           status=AssignmentStatus.FLAGGED)
    for item, score in items:
        make_judgment(item=item, stage=stage, worker=held_worker, assignment=held, score=score)
    version = model_version_train(model_version=model_version_create(projects=[project]))
    assert version.status in (ModelStatus.PROMOTED, ModelStatus.REJECTED)
    assert _due(10) == []  # nothing new: the held work does not count
    Assignment.objects.filter(pk=held.pk).update(status=AssignmentStatus.APPROVED)
    # The 24 approved judgments count now and the version never read them.
    assert _due(24) == [(project.pk, 24)]
    assert _due(25) == []
