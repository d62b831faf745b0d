"""Scoring with a LERC model (batched, under torch.inference_mode): raw scores of examples or
pairs, the validation numbers the training loop picks its epoch by, and `LercScorer`, a loaded
model folder with its calibrated judge.

Inputs are sorted by token length and padded per batch, then the scores are put back in input
order (as COMET's `predict(length_batching=True)`); `length_sorted=False` scores in input order
(with batch_size=1 that is the one-at-a-time baseline the benchmark compares against).
"""
from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch

from core.text_match import is_exact_match
from metrics_app.domain.batching import batch_token_budget, length_sorted_batches

from .batching import collate, sequential_batches
from .calibration import Calibrator
from .config import KIND_PAIRWISE, KIND_REGRESSION, TrainConfig
from .data import (
    Encoded,
    InputTooLong,
    LercExample,
    PairExample,
    encode_joined,
    encode_pair,
    encode_quadruple,
    examples_as_judged,
)
from .device import autocast_context, inference_dtype, pick_device
from .model import ClsHeadModel, load_model
from .semantic import SemanticEncoder
from .validation import pairwise_metrics, pearson_metrics

# The top of MOCHA's 1–5 scale, which regression models are trained on (z-normalized gold is
# mapped back onto it).
EXACT_MATCH_SCORE = 5.0


def score_encoded(model: ClsHeadModel, encoded: Sequence[Encoded], *, pad_id: int,
                  batch_size: int = 64, device: torch.device | None = None,
                  length_sorted: bool = True, bf16: bool = True) -> list[float]:
    """One scalar per encoded input, in input order. Length-sorted batches hold at most
    `batch_size` inputs and, on CPU, the padded-token budget (`batch_token_budget`)."""
    device = device or next(model.parameters()).device
    scores = [0.0] * len(encoded)
    batches = (length_sorted_batches([len(e) for e in encoded], batch_size,
                                     batch_token_budget(device.type)) if length_sorted
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
                   bf16: bool = True, max_references: int | None = None,
                   reference_mode: str = "each", max_reference_tokens: int = 64
                   ) -> list[float | None]:
    """A score per example: with `reference_mode="joined"` the scalar of one input holding
    every reference alias; with "each" the maximum over its references (the first
    `max_references` when given); for a pairwise model the scalar of (question, candidate).
    None when an input cannot fit `max_length` (per reference: the references that fit are
    still scored)."""
    encoded: list[Encoded] = []
    owner: list[int] = []
    for index, example in enumerate(examples):
        if model.input_kind != "pair" and reference_mode == "joined":
            try:
                encoded.append(encode_joined(
                    tokenizer, passage=example.passage, question=example.question,
                    references=(example.references or ("",))[:max_references],
                    candidate=example.candidate, max_length=max_length,
                    max_reference_tokens=max_reference_tokens))
            except InputTooLong:
                continue
            owner.append(index)
            continue
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


def _regression_validation(model, tokenizer, cfg: TrainConfig, examples) -> dict[str, Any]:
    predictions = predict_scores(model, tokenizer, examples, max_length=cfg.max_length,
                                 batch_size=cfg.eval_batch_size, bf16=cfg.bf16,
                                 reference_mode=cfg.reference_mode,
                                 max_reference_tokens=cfg.max_reference_tokens)
    return pearson_metrics(predictions, examples)


def _pairwise_validation(model, tokenizer, cfg: TrainConfig, pairs) -> dict[str, Any]:
    scores = predict_pairs(model, tokenizer, pairs, max_length=cfg.max_length,
                           batch_size=cfg.eval_batch_size, bf16=cfg.bf16)
    return pairwise_metrics(scores, pairs)


VALIDATION_BY_KIND = {KIND_REGRESSION: _regression_validation,
                      KIND_PAIRWISE: _pairwise_validation}


def evaluate(model: ClsHeadModel, tokenizer, cfg: TrainConfig, examples) -> dict[str, Any]:
    """Validation metrics: Pearson (overall and per dataset) or pairwise accuracy."""
    if not examples:
        return {}
    return VALIDATION_BY_KIND[cfg.kind](model, tokenizer, cfg, examples)


# Answers whose details a scorer keeps (a few hundred bytes each): on a project of up to this
# many answers, the second metric of a run (lerc after lerc_prob) finds every answer scored.
DETAILS_KEPT = 50_000


class LercScorer:
    """A loaded model folder, ready to score. Cheap to keep around in a worker process."""

    def __init__(self, folder: str | os.PathLike, *, device: str = "auto", batch_size: int = 64,
                 precision: str = "auto"):
        self.device = pick_device(device)
        self.model, self.tokenizer, self.meta = load_model(folder, device=self.device)
        # "auto": bf16 weights on a CPU with native bf16 instructions (`inference_dtype`); the
        # semantic encoder follows the same choice.
        self.precision = precision
        self.model.to(inference_dtype(self.device, precision))
        train_config = self.meta.get("train_config", {})
        self.max_length = int(train_config.get("max_length", 512))
        # Folders written before the joined layout existed carry no reference_mode: "each".
        self.reference_mode = train_config.get("reference_mode", "each")
        self.max_reference_tokens = int(train_config.get("max_reference_tokens", 64))
        self.batch_size = batch_size
        self.kind = self.model.kind
        self.calibrator = Calibrator.load(folder) if self.model.calibrates else None
        self._semantic: SemanticEncoder | None = None
        # Recent answers' details: `score --metric lerc,lerc_prob` asks for the same answers
        # once per metric, and each pass costs two encoders.
        self._details: OrderedDict[tuple, dict] = OrderedDict()

    def semantic_features(self, candidates, references) -> list[list[float]]:
        """The semantic encoder's values (`semantic.py`), loading it on first use."""
        if self._semantic is None:
            self._semantic = SemanticEncoder(device=str(self.device), precision=self.precision)
        return self._semantic.features(candidates, references)

    def score(self, examples: Sequence[LercExample], *, length_sorted: bool = True,
              batch_size: int | None = None, max_references: int | None = None,
              exact_match_score: float | None = EXACT_MATCH_SCORE,
              calibrated: bool = True) -> list[float | None]:
        """1–5 scores in input order (see `score_details`)."""
        return [d["score"] for d in self.score_details(
            examples, length_sorted=length_sorted, batch_size=batch_size,
            max_references=max_references, exact_match_score=exact_match_score,
            calibrated=calibrated)]

    def score_details(self, examples: Sequence[LercExample], *, length_sorted: bool = True,
                      batch_size: int | None = None, max_references: int | None = None,
                      exact_match_score: float | None = EXACT_MATCH_SCORE,
                      calibrated: bool = True) -> list[dict]:
        """Per example {"score", "probability", "raw"} in input order (`_computed_details`);
        an answer scored with the same options among the last `DETAILS_KEPT` is not scored
        again (the model folder of a scorer never changes)."""
        options = (max_references, exact_match_score, calibrated)
        examples = examples_as_judged(examples)  # a label or emphasis is not the answer
        keys = [(e.question, tuple(e.references), e.candidate, e.passage, options)
                for e in examples]
        missing = list(dict.fromkeys(k for k in keys if k not in self._details))
        if missing:
            firsts = {}
            for key, example in zip(keys, examples, strict=True):
                firsts.setdefault(key, example)
            computed = self._computed_details(
                [firsts[k] for k in missing], length_sorted=length_sorted,
                batch_size=batch_size, max_references=max_references,
                exact_match_score=exact_match_score, calibrated=calibrated)
            for key, detail in zip(missing, computed, strict=True):
                self._details[key] = detail
        for key in keys:
            self._details.move_to_end(key)
        details = [dict(self._details[k]) for k in keys]
        while len(self._details) > DETAILS_KEPT:
            self._details.popitem(last=False)
        return details

    def _computed_details(self, examples: Sequence[LercExample], *, length_sorted: bool,
                          batch_size: int | None, max_references: int | None,
                          exact_match_score: float | None, calibrated: bool) -> list[dict]:
        """Per example {"score": 1–5, "probability": P(correct) or None, "raw": the encoder's
        output}, in input order.

        With a calibrated judge in the folder (every model trained since model format 2), the
        score and probability come from it (`calibration.py`). Two answers need no model: an
        empty candidate is wrong (score 1, probability 0), and a candidate that exactly matches
        a reference after SQuAD normalization gets `exact_match_score` (probability 1) — MOCHA
        never sent such candidates to annotators (they are correct by construction), so
        training data built from its protocol holds none and the encoder has not learned them.
        `exact_match_score=None` runs the model on both, and `calibrated=False` returns the
        encoder's own output as the score (both used to inspect the raw encoder). A calibrated
        judge that gives the encoder's score no weight (one fitted by the "choose" rule that left
        it out) is served without running it ("raw" is then None); one fitted on semantic
        features runs the packaged sentence encoder."""
        rule: list[tuple[float, float] | None] = [None] * len(examples)
        if self.kind == KIND_REGRESSION and exact_match_score is not None:
            for index, e in enumerate(examples):
                if not (e.candidate or "").strip():
                    rule[index] = (1.0, 0.0)
                elif is_exact_match(e.candidate, e.references[:max_references]):
                    rule[index] = (exact_match_score, 1.0)
        rest = [e for e, fixed in zip(examples, rule, strict=True) if fixed is None]
        judged = self.calibrator is not None and calibrated
        if judged and not self.calibrator.uses_encoder:
            raw = [None] * len(rest)  # the encoder's score has no weight: not computed
        else:
            raw = predict_scores(
                self.model, self.tokenizer, rest, max_length=self.max_length,
                batch_size=batch_size or self.batch_size, length_sorted=length_sorted,
                max_references=max_references, reference_mode=self.reference_mode,
                max_reference_tokens=self.max_reference_tokens)
        if judged and rest:
            references = [(e.references or ("",))[:max_references] for e in rest]
            candidates = [e.candidate for e in rest]
            questions = [e.question or "" for e in rest]
            semantic = (self.semantic_features(candidates, references)
                        if self.calibrator.reads_semantic else None)
            probabilities = self.calibrator.probabilities(raw, candidates, references, questions,
                                                          semantic)
            scores = self.calibrator.scores(raw, candidates, references, probabilities, questions,
                                            semantic)
        else:
            probabilities = [None] * len(rest)
            scores = raw
        computed = iter(zip(raw, scores, probabilities, strict=True))
        details = []
        for fixed in rule:
            if fixed is not None:
                details.append({"score": fixed[0], "probability": fixed[1], "raw": None})
            else:
                value, score, probability = next(computed)
                details.append({"score": score, "probability": probability, "raw": value})
        return details

    def score_pairs(self, pairs: Sequence[PairExample]
                    ) -> list[tuple[float | None, float | None]]:
        return predict_pairs(self.model, self.tokenizer, pairs, max_length=self.max_length,
                             batch_size=self.batch_size)
