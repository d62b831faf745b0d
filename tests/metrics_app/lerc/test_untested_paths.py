"""Learning-rate search, gradient accumulation, and cancelling a version already training."""
from __future__ import annotations

import pytest
import torch

from metrics_app.lerc.config import PAPER_LEARNING_RATES, TrainConfig
from metrics_app.lerc.model import load_model, read_meta
from metrics_app.lerc.training import train
from metrics_app.models import ModelStatus
from metrics_app.services.lerc import (
    model_version_cancel,
    model_version_create,
    model_version_train,
)
from metrics_app.services.lerc import training as lerc_training
from tests.support.lerc import likert_project_from_toy, toy_examples


def test_learning_rate_search_keeps_the_best_validation_pearson(tmp_path, tiny_options):
    examples = toy_examples(12)
    cfg = TrainConfig.from_dict({**tiny_options, "epochs": 2, "tune_learning_rate": True,
                                 "output_dir": str(tmp_path)})
    result = train(cfg, examples, examples)
    search = result["learning_rate_search"]
    assert set(search) == {f"{lr:g}" for lr in PAPER_LEARNING_RATES}
    best = max(search, key=lambda lr: search[lr] if search[lr] is not None else -2)
    assert f"{result['learning_rate']:g}" == best
    assert result["val_pearson"] == search[best]
    # The served folder is the winning run's model.
    assert f"{read_meta(result['model_dir'])['learning_rate']:g}" == best
    for lr in PAPER_LEARNING_RATES:
        assert (tmp_path / "runs" / f"lr-{lr:g}" / "model").is_dir()


def test_gradient_accumulation_matches_one_bigger_batch(tmp_path, tiny_options):
    examples = toy_examples(8)
    # Same shuffled order cut into 8 or 2 × 4 (no length grouping); clipping sees the same
    # summed gradient either way.
    base = {**tiny_options, "epochs": 1, "group_by_length": False, "dropout": 0.0}

    def one_step(name, **options):
        seen = []
        cfg = TrainConfig.from_dict({**base, **options, "output_dir": str(tmp_path / name)})
        result = train(cfg, examples, [], progress=seen.append)
        steps = {p["global_step"] for p in seen if p.get("phase") == "train"}
        model, _tokenizer, _meta = load_model(result["model_dir"], device=torch.device("cpu"))
        return model.state_dict(), steps

    big, big_steps = one_step("big", batch_size=8, grad_accumulation=1)
    accumulated, accumulated_steps = one_step("acc", batch_size=4, grad_accumulation=2)
    unaccumulated, plain_steps = one_step("plain", batch_size=4, grad_accumulation=1)
    assert big_steps == accumulated_steps == {1}  # two micro-batches, one optimizer step
    assert plain_steps == {1, 2}
    for name, value in big.items():
        assert torch.allclose(value, accumulated[name], atol=1e-5), name
    assert any(not torch.allclose(value, unaccumulated[name], atol=1e-5)
               for name, value in big.items())


@pytest.mark.django_db
def test_cancelling_a_version_in_training_stops_it(lerc_settings, monkeypatch):
    project, _ = likert_project_from_toy(6)
    version = model_version_create(projects=[project])
    real_call = lerc_training._ProgressReporter.__call__
    answered = {}

    def cancel_once_training(self, info, force=False):
        if info.get("phase") == "data built" and not answered:
            answered["status"] = model_version_cancel(model_version=version).status
        return real_call(self, info, force)

    monkeypatch.setattr(lerc_training._ProgressReporter, "__call__", cancel_once_training)
    result = model_version_train(model_version=version)
    # The request only flags a version in training; the training loop stops at its check.
    assert answered["status"] == ModelStatus.TRAINING
    assert result.status == ModelStatus.CANCELLED
    assert not result.artifact_uri
    events = list(result.events.values_list("event", flat=True))
    assert events[-2:] == ["cancel requested", "cancelled"]
