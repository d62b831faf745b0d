"""Semantic overlap of an answer with its references, for the calibrated judge: what a long
answer says in other words than the reference ("amyotrophic lateral sclerosis" for "motor
neuron disease", "a fire damaged the West Wing" for "electrical fire").

On EVOUNA's validation answers of more than 8 words, every correct answer the lexical judge
rejected held no reference alias at all: no rewrite of the words can reach those, only a reading
of their meaning. These features read it with the packaged sentence encoder (MiniLM, not
fine-tuned: it was trained for semantic similarity, the fine-tuned LERC encoder for a score), one
pass over the answer and one over each distinct alias, never over pairs:

- `semantic_recall`: BERTScore recall, each reference token's best cosine with any answer token,
  averaged: "is the reference's meaning somewhere in the answer", which a long answer can reach;
- `semantic_precision` and `semantic_f1`: the other direction, and their harmonic mean;
- `semantic_cosine`: cosine of the mean-pooled sentence embeddings (the encoder's own training
  objective).

Each is the maximum over the question's aliases, like the lexical features. No idf weights and
no baseline rescaling: the calibrator learns the scale. Needs torch; the calibrator itself stays
pure and takes the values as plain numbers.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from .features import SEMANTIC_FEATURES
from .model import build_encoder

__all__ = ["SEMANTIC_FEATURES", "SemanticEncoder"]


class SemanticEncoder:
    """The packaged MiniLM (or `backbone`), read-only, encoding texts into unit token vectors."""

    def __init__(self, backbone: str | os.PathLike | None = "", *, device: str = "cpu",
                 max_length: int = 256, batch_size: int = 64):
        encoder, self.tokenizer = build_encoder(backbone)
        self.model = encoder.to(device).eval()
        self.device = torch.device(device)
        self.max_length = max_length
        self.batch_size = batch_size

    def _key(self, text: str) -> str:
        # An uncased tokenizer reads "Paris" and "paris" alike: TriviaQA's aliases often differ
        # only in case, so each is encoded once.
        text = " ".join(text.split())
        return text.lower() if getattr(self.tokenizer, "do_lower_case", False) else text

    @torch.inference_mode()
    def _encode(self, texts: Sequence[str]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """{key: (unit token vectors without [CLS]/[SEP], unit mean-pooled vector)}, each
        distinct text (`_key`) once, in length-sorted batches."""
        distinct = sorted({self._key(t) for t in texts}, key=len)
        out = {}
        for start in range(0, len(distinct), self.batch_size):
            batch = distinct[start:start + self.batch_size]
            encoded = self.tokenizer(batch, padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="pt")
            encoded = {k: v.to(self.device) for k, v in encoded.items()}
            states = self.model(**encoded).last_hidden_state
            mask = encoded["attention_mask"]
            for i, text in enumerate(batch):
                length = int(mask[i].sum())
                tokens = states[i, :length]
                pooled = tokens.mean(dim=0)
                inner = tokens[1:length - 1] if length > 2 else tokens
                out[text] = (torch.nn.functional.normalize(inner.float(), dim=-1),
                             torch.nn.functional.normalize(pooled.float(), dim=0))
        return out

    def features(self, candidates: Sequence[str], references: Sequence[Sequence[str]]
                 ) -> list[list[float]]:
        """[[recall, precision, f1, cosine] (SEMANTIC_FEATURES)] per answer, each the maximum
        over its aliases; zeros for an empty answer or no alias."""
        aliases = [[r for r in refs if (r or "").strip()] for refs in references]
        vectors = self._encode([c for c in candidates if (c or "").strip()]
                               + [r for refs in aliases for r in refs])
        rows = []
        for candidate, refs in zip(candidates, aliases, strict=True):
            if not (candidate or "").strip() or not refs:
                rows.append([0.0] * len(SEMANTIC_FEATURES))
                continue
            answer_tokens, answer_vector = vectors[self._key(candidate)]
            best = [0.0] * len(SEMANTIC_FEATURES)
            for key in {self._key(reference) for reference in refs}:
                reference_tokens, reference_vector = vectors[key]
                similarity = reference_tokens @ answer_tokens.T
                recall = float(similarity.max(dim=1).values.mean())
                precision = float(similarity.max(dim=0).values.mean())
                f1 = (2 * recall * precision / (recall + precision)
                      if recall + precision > 0 else 0.0)
                cosine = float(reference_vector @ answer_vector)
                best = [max(a, b) for a, b in zip(best, (recall, precision, f1, cosine),
                                                  strict=True)]
            rows.append(best)
        return rows
