"""A project whose judgments all give one score (every answer judged 5) cannot teach a model
which answers are better: training says so before spending GPU time, and the scheduled refresh
does not queue such a version beat after beat. Before, the version trained in full and was
rejected with "validation pearson could not be computed", which said nothing of the data."""
from __future__ import annotations

import pytest

from annotation.models import TaskKind
from metrics_app.models import ModelStatus
from metrics_app.services.lerc import (
    LercError,
    lerc_refresh,
    lerc_refresh_due,
    model_version_create,
    model_version_train,
)
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker
from tests.support.lerc import toy_examples

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _all_judged(score: float, n: int = 12):
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    worker = make_worker()
    items = []
    for split in ("train", "dev"):
        for example in toy_examples(n):
            item = make_item(project, split=split, dataset="toy", content={
                "passage": example.passage, "question": example.question,
                "references": list(example.references), "candidate": example.candidate})
            make_judgment(item=item, stage=stage, worker=worker, score=score)
            items.append(item)
    return project, stage, items


def test_training_on_one_score_is_refused_before_training_saying_why(lerc_settings,
                                                                      monkeypatch):
    from metrics_app.lerc import training as lerc_training

    def never(*_args, **_kwargs):
        raise AssertionError("the training loop ran on data it cannot learn from")

    monkeypatch.setattr(lerc_training, "train", never)
    project, _stage, _items = _all_judged(5)
    version = model_version_create(projects=[project])
    with pytest.raises(LercError) as refused:
        model_version_train(model_version=version)
    assert str(refused.value) == (
        "not trained: all 8 training answers have the same score (5): a model cannot learn "
        "from them which answers are better; gather judgments that use more of the scale, "
        "then train")
    version.refresh_from_db()
    assert version.status == ModelStatus.FAILED and not version.artifact_uri
    assert version.error.startswith("DataRefused: not trained: all 8 training answers have "
                                    "the same score (5)")
    assert version.events.filter(event="failed", detail__contains="same score (5)").exists()
    assert version.data_snapshot["refused"].startswith("not trained: all 8 training answers")


def test_the_refresh_does_not_queue_a_project_whose_judgments_all_give_one_score(
        lerc_settings, monkeypatch):
    from metrics_app.services.lerc import training

    monkeypatch.setattr(training, "task_send", lambda *args, **kwargs: None)
    project, stage, items = _all_judged(5)
    assert lerc_refresh_due(min_new_judgments=10) == []
    assert lerc_refresh(min_new_judgments=10) == []  # beat after beat: nothing queued
    assert lerc_refresh(min_new_judgments=10) == []
    make_judgment(item=items[0], stage=stage, worker=make_worker(), score=2)
    assert [(p.pk, n) for p, _kind, n in lerc_refresh_due(min_new_judgments=10)] == [
        (project.pk, 25)]


def test_a_validation_number_that_cannot_be_computed_says_why_in_the_decision(lerc_settings):
    """Training answers vary, but every validation answer was judged 3: the version trains,
    and its rejection says why its validation Pearson is missing (it read "could not be
    computed" and nothing more)."""
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {**lerc_settings.QAJ_LERC_TRAIN_OPTIONS, "epochs": 1}
    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = []
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    worker = make_worker()
    for split in ("train", "dev"):
        for example in toy_examples(12):
            item = make_item(project, split=split, dataset="toy", content={
                "passage": example.passage, "question": example.question,
                "references": list(example.references), "candidate": example.candidate})
            make_judgment(item=item, stage=stage, worker=worker,
                          score=example.score if split == "train" else 3)
    version = model_version_train(model_version=model_version_create(projects=[project]))
    assert version.status == ModelStatus.REJECTED
    why = ("validation pearson could not be computed: every item has the same human score "
           "(3), so there is no variation to correlate")
    assert version.events.get(event="rejected").detail == f"automatic: {why}"
    assert version.events.get(event="evaluated").detail.startswith(
        "validation pearson undefined: every item has the same human score (3)")
