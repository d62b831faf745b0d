"""Fixtures for LERC tests: a tiny randomly initialised BERT (the packaged tokenizer, a small
config) and a toy fixture whose gold score is a function of the candidate/reference relation."""
from __future__ import annotations

import pytest

from metrics_app.lerc.data import LercExample

TINY_BERT = {
    "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "max_position_embeddings": 128,
}
# Memorise fast: high learning rate, no dropout, no warmup (tests only; never for real data).
TINY_TRAIN_OPTIONS = {
    "backbone_config": TINY_BERT, "batch_size": 4, "epochs": 20, "learning_rate": 1e-3,
    "max_length": 64, "warmup_ratio": 0.0, "dropout": 0.0, "progress_every": 1,
}
COLORS = ["red", "blue", "green", "yellow", "black", "white", "purple", "orange"]


def toy_examples(n: int = 24, offset: int = 0) -> list[LercExample]:
    """Exact copy of the reference → 5, hedged → 3, another colour → 1."""
    examples = []
    for i in range(offset, offset + n):
        ref = COLORS[i % 8]
        kind = i % 3
        candidate = [ref, f"maybe {ref} or {COLORS[(i + 1) % 8]}", COLORS[(i + 3) % 8]][kind]
        examples.append(LercExample(
            question=f"What color is thing {i}?", references=(ref,), candidate=candidate,
            passage=f"Thing {i} is {ref}.", score=[5.0, 3.0, 1.0][kind], id=str(i),
        ))
    return examples


@pytest.fixture
def tiny_options() -> dict:
    return {**TINY_TRAIN_OPTIONS, "backbone_config": dict(TINY_BERT)}


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    from metrics_app.lerc.model import default_backbone_path

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
    from metrics_app.lerc.train import TrainConfig, train

    output = tmp_path_factory.mktemp("lerc-served")
    cfg = TrainConfig.from_dict({**TINY_TRAIN_OPTIONS, "epochs": 1, "output_dir": str(output)})
    return train(cfg, toy_examples(8), [])["model_dir"]
