"""Fixtures for LERC tests: a tiny randomly initialised BERT (the packaged tokenizer, a small
config) and a toy fixture whose gold score is a function of the candidate/reference relation."""
from __future__ import annotations

import pytest

from tests.support.lerc import TINY_BERT, TINY_TRAIN_OPTIONS, toy_examples


@pytest.fixture
def tiny_options() -> dict:
    return {**TINY_TRAIN_OPTIONS, "backbone_config": dict(TINY_BERT)}


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    from metrics_app.lerc.backbone import default_backbone_path

    return AutoTokenizer.from_pretrained(str(default_backbone_path()), local_files_only=True)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The CI machine is shared: one intra-op thread avoids oversubscribing its cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def trained_model_dir(tmp_path_factory) -> str:
    """A tiny trained model folder (quality irrelevant) for serving tests."""
    from metrics_app.lerc.config import TrainConfig
    from metrics_app.lerc.training import train

    output = tmp_path_factory.mktemp("lerc-served")
    cfg = TrainConfig.from_dict({**TINY_TRAIN_OPTIONS, "epochs": 1, "output_dir": str(output)})
    return train(cfg, toy_examples(8), [])["model_dir"]


@pytest.fixture
def lerc_settings(settings, tmp_path, tiny_options):
    settings.QAJ_ARTIFACT_ROOT = str(tmp_path / "artifacts")
    settings.QAJ_LERC_TRAIN_OPTIONS = {**tiny_options, "epochs": 10}
    return settings
