"""The LERC networks and their on-disk format.

A model folder holds `lerc.json` (model class name, training config, label of the backbone),
`config.json` (the encoder's Hugging Face config), the tokenizer files and `model.safetensors`
(every weight, encoder and heads). The class name is saved with the weights and resolved
through `MODEL_CLASSES`, so loading never has to guess which head a checkpoint carries.

Each model kind is a class (`MODEL_KINDS` maps a `TrainConfig.kind` to it) that knows its own
training inputs, how its head starts and its training loss; the training loop calls these and
never asks which kind it trains.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from .backbone import frozen_layers_check, max_length_check, resolve_backbone
from .batching import collate
from .config import KIND_PAIRWISE, KIND_REGRESSION, TrainConfig
from .data import encode_preference_pairs, encode_scored_examples

META_FILE = "lerc.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT_VERSION = 1


def hub_offline() -> None:
    # Belt and braces: even a mistyped path must not trigger a download from the Hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def build_encoder(backbone: str | os.PathLike | None, backbone_config: dict | None = None):
    """(encoder, tokenizer). With `backbone_config` the encoder is randomly initialised from that
    config (tests use a tiny BERT) while the tokenizer still comes from the backbone folder."""
    # Imported after `hub_offline()` has set the offline flags, which the Hub client reads when it
    # is first imported.
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    hub_offline()
    path = resolve_backbone(backbone)
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if backbone_config:
        base = AutoConfig.from_pretrained(str(path), local_files_only=True)
        config = type(base)(**{**base.to_dict(), **backbone_config})
        config.vocab_size = len(tokenizer)
        encoder = AutoModel.from_config(config)
    else:
        encoder = AutoModel.from_pretrained(str(path), local_files_only=True)
    return encoder, tokenizer


class ClsHeadModel(nn.Module):
    """Encoder + linear layers on the final [CLS] state (the paper's pooled representation).

    Also carries the 3-way head of MOCHA's multiple-choice pre-training (first / second / both
    correct), which any kind may run before its own training (`mc_logits`)."""

    kind: str = ""
    input_kind: str = ""
    calibrates = False  # whether a calibrated judge is fitted on its validation scores
    # TrainConfig.freeze_word_embeddings=None means this (chosen on validation per kind).
    freezes_word_embeddings = False
    # TrainConfig.dropout=None means this; None here keeps the backbone's own rates.
    training_dropout: float | None = None

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder
        hidden = encoder.config.hidden_size
        self.dropout = nn.Dropout(getattr(encoder.config, "hidden_dropout_prob", 0.1))
        self.head = nn.Linear(hidden, 1)
        self.mc_head = nn.Linear(hidden, 3)

    def cls_state(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None and getattr(self.encoder.config, "type_vocab_size", 0) > 1:
            kwargs["token_type_ids"] = token_type_ids
        output = self.encoder(**kwargs)
        return self.dropout(output.last_hidden_state[:, 0])

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        """One scalar per input."""
        return self.head(self.cls_state(input_ids, attention_mask, token_type_ids)).squeeze(-1)

    def mc_logits(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        return self.mc_head(self.cls_state(input_ids, attention_mask, token_type_ids))

    def freeze_word_embeddings(self, freeze: bool | None = None) -> None:
        """Train everything but the word-embedding matrix when `freeze` says so (None: this
        kind's default, `TrainConfig.freeze_word_embeddings`); position and token-type
        embeddings and their LayerNorm still train."""
        if self.freezes_word_embeddings if freeze is None else freeze:
            self.encoder.get_input_embeddings().weight.requires_grad_(False)

    def freeze_lower_layers(self, count: int) -> None:
        """Keep the embedding layer and the lowest `count` transformer layers as pre-trained
        (`TrainConfig.frozen_layers`): nothing below the first trained layer needs a gradient,
        so the backward pass stops there."""
        if count <= 0:
            return
        embeddings = getattr(self.encoder, "embeddings", None)
        layers = getattr(getattr(self.encoder, "encoder", None), "layer", None)
        if embeddings is None or layers is None:
            raise ValueError("frozen_layers: this backbone has no embeddings / encoder.layer "
                             "stack to freeze (a BERT-like encoder is needed)")
        frozen_layers_check(count, len(layers))
        for module in (embeddings, *layers[:count]):
            module.requires_grad_(False)

    def score_batch(self, encoded: list, pad_id: int, device: torch.device) -> torch.Tensor:
        """Collate, move to `device` and score (float32)."""
        ids, mask, types = collate(encoded, pad_id)
        return self(ids.to(device), mask.to(device), types.to(device)).float()

    @staticmethod
    def encode_training_set(cfg: TrainConfig, tokenizer, examples) -> tuple[list, list, int]:
        """(inputs, targets, skipped as too long) for this kind's training loss."""
        raise NotImplementedError

    def init_head(self, targets: list[float]) -> None:
        """Before the first epoch of a run from scratch; nothing by default."""

    def training_loss(self, batch: list, target: torch.Tensor, pad_id: int,
                      device: torch.device) -> torch.Tensor:
        raise NotImplementedError


class LercRegressor(ClsHeadModel):
    """LERC: [CLS] passage [SEP] question [SEP] reference [SEP] candidate [SEP] → score (1–5),
    trained with MSE on human scores."""

    kind = KIND_REGRESSION
    input_kind = "quadruple"
    calibrates = True
    freezes_word_embeddings = True  # EVOUNA validation: docs/LERC.md, "Frozen word embeddings"
    training_dropout = 0.0  # EVOUNA validation: docs/LERC.md, "No dropout"

    encode_training_set = staticmethod(encode_scored_examples)

    def init_head(self, targets: list[float]) -> None:
        # Start the head at the mean gold score: from a zero bias, the first epochs of a short
        # run go to learning the offset of the 1–5 scale rather than the judgments.
        with torch.no_grad():
            self.head.bias.fill_(sum(targets) / len(targets))

    def training_loss(self, batch, target, pad_id, device):
        return nn.functional.mse_loss(self.score_batch(batch, pad_id, device), target)


class PairwiseScorer(ClsHeadModel):
    """A/B variant: [CLS] question [SEP] answer [SEP] → scalar; trained with the Bradley–Terry
    cross-entropy so that the preferred answer of a pair scores higher."""

    kind = KIND_PAIRWISE
    input_kind = "pair"

    encode_training_set = staticmethod(encode_preference_pairs)

    def training_loss(self, batch, target, pad_id, device):
        """Both answers of every pair in one forward pass: A's first, then B's."""
        scores = self.score_batch([a for a, _b in batch] + [b for _a, b in batch], pad_id,
                                  device)
        return nn.functional.binary_cross_entropy_with_logits(
            scores[: len(batch)] - scores[len(batch):], target)


# The save format's registry: the class name written in lerc.json → the class.
MODEL_CLASSES: dict[str, type[ClsHeadModel]] = {
    "LercRegressor": LercRegressor,
    "PairwiseScorer": PairwiseScorer,
}
# TrainConfig.kind → the class that trains it.
MODEL_KINDS: dict[str, type[ClsHeadModel]] = {cls.kind: cls for cls in MODEL_CLASSES.values()}


def model_for_kind(kind: str) -> type[ClsHeadModel]:
    try:
        return MODEL_KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r}") from None


def build_model(cfg: TrainConfig, device: torch.device) -> tuple[ClsHeadModel, Any]:
    """The encoder with the head of `cfg.kind` on `device`, dropout set as configured; and its
    tokenizer."""
    encoder, tokenizer = build_encoder(cfg.backbone, cfg.backbone_config)
    positions = getattr(encoder.config, "max_position_embeddings", None)
    if isinstance(positions, int):
        max_length_check(cfg.max_length, positions)
    model = model_for_kind(cfg.kind)(encoder).to(device)
    model.freeze_word_embeddings(cfg.freeze_word_embeddings)
    model.freeze_lower_layers(cfg.frozen_layers)
    rate = model.training_dropout if cfg.dropout is None else cfg.dropout
    if rate is not None:
        for module in model.modules():
            if isinstance(module, nn.Dropout):
                module.p = rate
    return model, tokenizer


def model_class(name: str) -> type[ClsHeadModel]:
    try:
        return MODEL_CLASSES[name]
    except KeyError:
        raise ValueError(
            f"unknown LERC model class {name!r}; known: {', '.join(sorted(MODEL_CLASSES))}"
        ) from None


def save_model(model: ClsHeadModel, tokenizer, folder: str | os.PathLike, *,
               train_config: dict | None = None, extra: dict | None = None) -> Path:
    """Write a self-describing model folder (see the module docstring)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.encoder.config.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    state = {key: value.detach().contiguous().cpu() for key, value in model.state_dict().items()}
    save_file(state, str(folder / WEIGHTS_FILE))
    meta = {
        "format_version": FORMAT_VERSION,
        "model_class": type(model).__name__,
        "train_config": train_config or {},
        **(extra or {}),
    }
    (folder / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
    return folder


def read_meta(folder: str | os.PathLike) -> dict:
    return json.loads((Path(folder) / META_FILE).read_text())


def load_model(folder: str | os.PathLike, *, device: str | torch.device = "cpu"):
    """(model in eval mode, tokenizer, meta) from a folder written by `save_model`."""
    # After `hub_offline()`, as in build_encoder.
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    hub_offline()
    folder = Path(folder)
    meta = read_meta(folder)
    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    encoder = AutoModel.from_config(config)
    model = model_class(meta["model_class"])(encoder)
    state = load_file(str(folder / WEIGHTS_FILE))
    missing, unexpected = model.load_state_dict(state, strict=False)
    # The encoder's unused pooler may be absent from a checkpoint; anything else is corruption.
    missing = [key for key in missing if ".pooler." not in key]
    if missing or unexpected:
        raise ValueError(f"checkpoint {folder} does not fit {meta['model_class']}: "
                         f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model.to(device)
    model.eval()
    return model, tokenizer, meta
