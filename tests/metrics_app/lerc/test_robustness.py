"""Over-long inputs, the training-set cap, heartbeats, evaluation races, minimal pairs held
out, z-normalized gold on the 1–5 scale."""
from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from annotation.models import TaskKind
from metrics_app.lerc.config import TrainConfig
from metrics_app.lerc.data import LercExample, PairExample, capped_examples
from metrics_app.lerc.inference import predict_pairs, predict_scores
from metrics_app.lerc.model import build_encoder, model_class
from metrics_app.lerc.training import train
from metrics_app.lerc.validation import pairwise_accuracy_of_labels
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import (
    lerc_dataset_build,
    lerc_minimal_pair_accuracy,
    model_version_create,
    model_version_train,
)
from metrics_app.services.lerc import training as lerc_training
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker
from tests.support.lerc import TINY_BERT, likert_project_from_toy, toy_examples

LONG = " ".join(["word"] * 200)


def untrained(kind: str):
    encoder, tokenizer = build_encoder("", dict(TINY_BERT))
    return model_class(kind)(encoder), tokenizer


def test_an_over_long_question_leaves_its_pair_unscored_not_the_evaluation():
    model, tokenizer = untrained("PairwiseScorer")
    pairs = [PairExample(question="Why?", answer_a="because", answer_b="no", label=1.0),
             PairExample(question=LONG, answer_a="because", answer_b="no", label=1.0),
             PairExample(question="How?", answer_a="so", answer_b="like this", label=0.0)]
    scores = predict_pairs(model, tokenizer, pairs, max_length=64)
    assert scores[1] == (None, None)
    assert all(isinstance(v, float) for pair in (scores[0], scores[2]) for v in pair)
    alone = predict_pairs(model, tokenizer, [pairs[0], pairs[2]], max_length=64)
    assert [*scores[0], *scores[2]] == pytest.approx([*alone[0], *alone[1]], abs=1e-5)
    assert pairwise_accuracy_of_labels(scores, [p.label for p in pairs]) is not None


def test_an_over_long_reference_is_skipped_the_others_still_score():
    model, tokenizer = untrained("LercRegressor")
    example = LercExample(question="What color?", references=(LONG, "red", "blue"),
                          candidate="red", passage="It is red.")
    [with_long] = predict_scores(model, tokenizer, [example], max_length=64)
    [without] = predict_scores(model, tokenizer, [replace(example, references=("red", "blue"))],
                               max_length=64)
    assert with_long == pytest.approx(without, abs=1e-5)
    assert predict_scores(model, tokenizer, [replace(example, references=(LONG,))],
                          max_length=64) == [None]


def test_training_cap_is_a_seeded_random_subset():
    examples = toy_examples(60)
    cfg = TrainConfig(max_train_examples=10, seed=3)
    chosen = capped_examples(cfg, examples)
    assert len(chosen) == 10 and chosen != examples[:10]
    assert capped_examples(cfg, examples) == chosen  # seeded
    assert capped_examples(replace(cfg, seed=4), examples) != chosen
    assert [int(e.id) for e in chosen] == sorted(int(e.id) for e in chosen)
    assert capped_examples(TrainConfig(), examples) == examples


def test_heartbeat_is_time_based_not_only_every_n_steps(tmp_path, tiny_options):
    examples = toy_examples(16)  # 4 micro-batches of 4 per epoch

    def train_phases(**options):
        seen = []
        cfg = TrainConfig.from_dict({**tiny_options, "epochs": 2, "progress_every": 10**6,
                                     "grad_accumulation": 2, **options,
                                     "output_dir": str(tmp_path / str(len(options)))})
        train(cfg, examples, examples[:4], progress=seen.append)
        return seen

    rare = train_phases(heartbeat_seconds=10**9)
    # Without the time limit: one report per epoch end only (plus encoding and validation).
    assert [p["phase"] for p in rare].count("train") == 2
    assert rare[0]["phase"] == "encoding" and "validated" in [p["phase"] for p in rare]
    frequent = train_phases(heartbeat_seconds=0.0, max_grad_norm=1.0)
    # Every micro-batch, even between optimizer steps (accumulation over 2).
    assert [p["phase"] for p in frequent].count("train") == 8


@pytest.mark.django_db
def test_service_heartbeats_around_data_and_evaluation(lerc_settings, monkeypatch):
    project, _ = likert_project_from_toy(6)
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {**lerc_settings.QAJ_LERC_TRAIN_OPTIONS, "epochs": 1}
    phases = []
    real_call = lerc_training._ProgressReporter.__call__

    def record(self, info, force=False):
        phases.append(info.get("phase"))
        return real_call(self, info, force)

    monkeypatch.setattr(lerc_training._ProgressReporter, "__call__", record)
    version = model_version_train(model_version=model_version_create(projects=[project]))
    assert version.status == ModelStatus.PROMOTED, version.error
    assert phases[:2] == ["building data", "data built"]
    assert phases.count("evaluating") >= 3  # before storing, before test, before pairs


@pytest.mark.django_db
@pytest.mark.parametrize("meanwhile", ["failed by the stale check", "cancel requested"])
def test_a_version_failed_or_cancelled_during_evaluation_is_not_overwritten(
        lerc_settings, monkeypatch, meanwhile):
    project, _ = likert_project_from_toy(6)
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {**lerc_settings.QAJ_LERC_TRAIN_OPTIONS, "epochs": 1}
    version = model_version_create(projects=[project])
    real_store = lerc_training.artifact_store

    def store_while_something_happens(folder, key):
        if meanwhile == "cancel requested":
            ModelVersion.objects.filter(pk=version.pk).update(cancel_requested=True)
        else:
            ModelVersion.objects.filter(pk=version.pk).update(
                status=ModelStatus.FAILED, error="worker lost: no progress heartbeat")
        return real_store(folder, key)

    monkeypatch.setattr(lerc_training, "artifact_store", store_while_something_happens)
    result = model_version_train(model_version=version)
    version.refresh_from_db()
    expected = (ModelStatus.CANCELLED if meanwhile == "cancel requested"
                else ModelStatus.FAILED)
    assert result.status == version.status == expected
    assert not version.events.filter(event__in=("evaluated", "promoted")).exists()
    assert not ModelVersion.objects.filter(status=ModelStatus.PROMOTED).exists()


class FixedScorer:
    """Scores role 1 above role 2 for every pair it is given."""

    def score(self, examples):
        return [5.0 if e.candidate == "good" else 1.0 for e in examples]


@pytest.mark.django_db
def test_minimal_pairs_count_only_held_out_items():
    project = make_project(kind=TaskKind.LIKERT)
    stage, annotator = make_stage(project), make_worker()
    for pair, split in (("trained", "train"), ("held", "test"), ("held-dev", "dev")):
        for role, candidate in ((1, "good"), (2, "bad")):
            item = make_item(project, split=split, metadata={"minimal_pair": pair,
                                                             "pair_role": role},
                             content={"passage": f"p {pair}", "question": "q?",
                                      "references": ["ref"], "candidate": candidate})
            make_judgment(item=item, stage=stage, worker=annotator, score=3 + role)
    dataset = lerc_dataset_build(projects=[project], split_mode="item")
    assert len(dataset.train) == 2
    assert lerc_minimal_pair_accuracy(FixedScorer(), [project], trained_on=dataset.train) == {
        "accuracy": 1.0, "n": 2}
    assert lerc_minimal_pair_accuracy(FixedScorer(), [project])["n"] == 3  # unrestricted


@pytest.mark.django_db
def test_minimal_pairs_leave_out_excluded_and_practice_items():
    """A version's minimal-pair accuracy reads the items every LERC door reads: a pair with an
    item removed from the study (`Item.excluded`) or a practice item is no pair. Before: all
    three pairs counted (n 3)."""
    project = make_project(kind=TaskKind.LIKERT)
    for pair, flags in (("kept", {}), ("excluded", {"excluded": True}),
                        ("practice", {"is_practice": True})):
        for role, candidate in ((1, "good"), (2, "bad")):
            make_item(project, split="test", **(flags if role == 2 else {}),
                      metadata={"minimal_pair": pair, "pair_role": role},
                      content={"passage": f"p {pair}", "question": "q?",
                               "references": ["ref"], "candidate": candidate})
    assert lerc_minimal_pair_accuracy(FixedScorer(), [project]) == {"accuracy": 1.0, "n": 1}


@pytest.mark.django_db
def test_znormalized_gold_is_mapped_back_onto_the_1_to_5_scale():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    strict, lenient = make_worker(), make_worker()
    items = [make_item(project, split="train", content={
        "passage": "", "question": f"q{i}?", "references": ["r"], "candidate": f"c{i}"})
        for i in range(3)]
    for item, low, high in zip(items, (1, 2, 3), (3, 4, 5), strict=True):
        make_judgment(item=item, stage=stage, worker=strict, score=low)
        make_judgment(item=item, stage=stage, worker=lenient, score=high)
    dataset = lerc_dataset_build(projects=[project], split_mode="item", znormalize=True)
    raw = [1, 2, 3, 3, 4, 5]
    mean, std = statistics.fmean(raw), statistics.pstdev(raw)
    z = statistics.pstdev([1, 2, 3])
    assert [e.score for e in dataset.train] == pytest.approx(
        [mean - std / z, mean, mean + std / z])
    assert all(1 <= e.score <= 5 for e in dataset.train)
    assert dataset.snapshot["projects"][project.slug]["znormalize_scale"] == pytest.approx(
        {"mean": mean, "std": std})
