"""Scoring with a trained LERC model (batched, under torch.inference_mode).

Inputs are sorted by token length and padded per batch, then the scores are put back in input
order (as COMET's `predict(length_batching=True)`); `length_sorted=False` scores in input order
(with batch_size=1 that is the one-at-a-time baseline the benchmark compares against).
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from .data import (
    Encoded,
    InputTooLong,
    LercExample,
    PairExample,
    collate,
    encode_pair,
    encode_quadruple,
    is_exact_match,
    length_sorted_batches,
    sequential_batches,
)
from .model import ClsHeadModel, load_model

# The top of MOCHA's 1–5 scale, which regression models are trained on (z-normalized gold is
# mapped back onto it).
EXACT_MATCH_SCORE = 5.0


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def autocast_context(device: torch.device, bf16: bool):
    """bf16 autocast on CUDA (when the GPU supports it); full precision on CPU, where bf16
    matmuls are slow on most machines."""
    enabled = bool(bf16 and device.type == "cuda" and torch.cuda.is_bf16_supported())
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def score_encoded(model: ClsHeadModel, encoded: Sequence[Encoded], *, pad_id: int,
                  batch_size: int = 64, device: torch.device | None = None,
                  length_sorted: bool = True, bf16: bool = True) -> list[float]:
    """One scalar per encoded input, in input order."""
    device = device or next(model.parameters()).device
    scores = [0.0] * len(encoded)
    batches = (length_sorted_batches([len(e) for e in encoded], batch_size) if length_sorted
               else sequential_batches(len(encoded), batch_size))
    was_training = model.training
    model.eval()
    with torch.inference_mode(), autocast_context(device, bf16):
        for indices in batches:
            input_ids, mask, types = collate([encoded[i] for i in indices], pad_id)
            values = model(input_ids.to(device), mask.to(device), types.to(device))
            for index, value in zip(indices, values.float().cpu().tolist(), strict=True):
                scores[index] = value
    model.train(was_training)
    return scores


def predict_scores(model: ClsHeadModel, tokenizer, examples: Sequence[LercExample], *,
                   max_length: int, batch_size: int = 64, length_sorted: bool = True,
                   bf16: bool = True, max_references: int | None = None
                   ) -> list[float | None]:
    """A score per example: the maximum over its references (the first `max_references` when
    given), or the scalar of (question, candidate) for a pairwise model. None when an input
    cannot fit `max_length` (per reference: the references that fit are still scored)."""
    encoded: list[Encoded] = []
    owner: list[int] = []
    for index, example in enumerate(examples):
        if model.input_kind == "pair":
            try:
                encoded.append(encode_pair(tokenizer, question=example.question,
                                           answer=example.candidate, max_length=max_length))
            except InputTooLong:
                continue
            owner.append(index)
            continue
        for reference in (example.references or ("",))[:max_references]:
            try:
                encoded.append(encode_quadruple(
                    tokenizer, passage=example.passage, question=example.question,
                    reference=reference, candidate=example.candidate, max_length=max_length))
            except InputTooLong:
                continue  # one over-long reference must not drop the others
            owner.append(index)
    raw = score_encoded(model, encoded, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                        length_sorted=length_sorted, bf16=bf16)
    best: list[float | None] = [None] * len(examples)
    for index, value in zip(owner, raw, strict=True):
        if best[index] is None or value > best[index]:
            best[index] = value
    return best


def predict_pairs(model: ClsHeadModel, tokenizer, pairs: Sequence[PairExample], *,
                  max_length: int, batch_size: int = 64, bf16: bool = True
                  ) -> list[tuple[float | None, float | None]]:
    """(score of A, score of B) per pair; (None, None) for a pair whose question alone cannot
    fit `max_length` (answers are cut, the question never)."""
    encoded, owner = [], []
    for index, pair in enumerate(pairs):
        try:
            both = [encode_pair(tokenizer, question=pair.question, answer=answer,
                                max_length=max_length)
                    for answer in (pair.answer_a, pair.answer_b)]
        except InputTooLong:
            continue
        encoded.extend(both)
        owner.append(index)
    raw = score_encoded(model, encoded, pad_id=tokenizer.pad_token_id, batch_size=batch_size,
                        bf16=bf16) if encoded else []
    result: list[tuple[float | None, float | None]] = [(None, None)] * len(pairs)
    for position, index in enumerate(owner):
        result[index] = (raw[2 * position], raw[2 * position + 1])
    return result


class LercScorer:
    """A loaded model folder, ready to score. Cheap to keep around in a worker process."""

    def __init__(self, folder: str | os.PathLike, *, device: str = "auto", batch_size: int = 64):
        self.device = pick_device(device)
        self.model, self.tokenizer, self.meta = load_model(folder, device=self.device)
        self.max_length = int(self.meta.get("train_config", {}).get("max_length", 512))
        self.batch_size = batch_size
        self.kind = "pairwise" if self.model.input_kind == "pair" else "regression"

    def score(self, examples: Sequence[LercExample], *, length_sorted: bool = True,
              batch_size: int | None = None, max_references: int | None = None,
              exact_match_score: float | None = EXACT_MATCH_SCORE) -> list[float | None]:
        """Scores in input order. A candidate that exactly matches a reference after SQuAD
        normalization gets `exact_match_score` without running the model: MOCHA never sent
        such candidates to annotators (they are correct by construction), so training data
        built from its protocol holds none, and the model has not learned to score them
        (on EVOUNA test questions they scored lower than paraphrases). None runs the model
        on them too."""
        if self.kind != "regression" or exact_match_score is None:
            matched = [False] * len(examples)
        else:
            matched = [is_exact_match(e.candidate, e.references[:max_references])
                       for e in examples]
        rest = [e for e, exact in zip(examples, matched, strict=True) if not exact]
        predicted = iter(predict_scores(
            self.model, self.tokenizer, rest, max_length=self.max_length,
            batch_size=batch_size or self.batch_size, length_sorted=length_sorted,
            max_references=max_references))
        return [exact_match_score if exact else next(predicted) for exact in matched]

    def score_pairs(self, pairs: Sequence[PairExample]
                    ) -> list[tuple[float | None, float | None]]:
        return predict_pairs(self.model, self.tokenizer, pairs, max_length=self.max_length,
                             batch_size=self.batch_size)
