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

from metrics_app.domain.batching import batch_token_budget, length_sorted_batches

from .device import inference_dtype
from .features import SEMANTIC_FEATURES
from .model import build_encoder

__all__ = ["SEMANTIC_FEATURES", "SemanticEncoder"]


class SemanticEncoder:
    """The packaged MiniLM (or `backbone`), read-only, encoding texts into unit token vectors."""

    def __init__(self, backbone: str | os.PathLike | None = "", *, device: str = "cpu",
                 max_length: int = 256, batch_size: int = 64, precision: str = "auto"):
        encoder, self.tokenizer = build_encoder(backbone)
        self.device = torch.device(device)
        self.model = encoder.to(self.device, inference_dtype(self.device, precision)).eval()
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
        distinct text (`_key`) once, in batches of similar token counts (on CPU under the
        padded-token budget). The pass is compute-bound and batches sorted by characters were
        a third padding (an alias of 6 tokens beside one of 15): sorting by tokens cut it by 30%
        on EVOUNA answers."""
        distinct = sorted({self._key(t) for t in texts})
        if not distinct:
            return {}
        ids = self.tokenizer(distinct, truncation=True, max_length=self.max_length)["input_ids"]
        out = {}
        for chosen in length_sorted_batches([len(i) for i in ids], self.batch_size,
                                            batch_token_budget(self.device.type)):
            encoded = self.tokenizer.pad({"input_ids": [ids[i] for i in chosen]},
                                         return_tensors="pt")
            encoded = {k: v.to(self.device) for k, v in encoded.items()}
            states = self.model(**encoded).last_hidden_state
            mask = encoded["attention_mask"]
            for row, i in enumerate(chosen):
                length = int(mask[row].sum())
                tokens = states[row, :length].float()  # pooled and compared in fp32
                pooled = tokens.mean(dim=0)
                inner = tokens[1:length - 1] if length > 2 else tokens
                out[distinct[i]] = (torch.nn.functional.normalize(inner, dim=-1),
                                    torch.nn.functional.normalize(pooled, dim=0))
        return out

    def _stack(self, keys: tuple[str, ...], vectors) -> tuple[torch.Tensor, torch.Tensor,
                                                             torch.Tensor]:
        """One question's aliases as a padded block: token vectors (aliases × longest × dim),
        the mask of real tokens, and the sentence vectors (aliases × dim)."""
        tokens = [vectors[key][0] for key in keys]
        block = torch.nn.utils.rnn.pad_sequence(tokens, batch_first=True)
        # On the encoder's device (a GPU worker's GPU): a CPU mask beside CUDA vectors fails.
        lengths = torch.tensor([len(t) for t in tokens], device=block.device)
        mask = torch.arange(block.shape[1], device=block.device)[None, :] < lengths[:, None]
        return block, mask, torch.stack([vectors[key][1] for key in keys])

    def features(self, candidates: Sequence[str], references: Sequence[Sequence[str]]
                 ) -> list[list[float]]:
        """[[recall, precision, f1, cosine] (SEMANTIC_FEATURES)] per answer, each the maximum
        over its aliases; zeros for an empty answer or no alias.

        Every alias of an answer is compared in one batched product (TriviaQA lists about 14 a
        question; a loop over them cost as much as the encoder), and a question's stacked
        aliases are reused by all of its answers."""
        aliases = [[r for r in refs if (r or "").strip()] for refs in references]
        vectors = self._encode([c for c in candidates if (c or "").strip()]
                               + [r for refs in aliases for r in refs])
        stacks: dict[tuple[str, ...], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        rows = []
        for candidate, refs in zip(candidates, aliases, strict=True):
            if not (candidate or "").strip() or not refs:
                rows.append([0.0] * len(SEMANTIC_FEATURES))
                continue
            answer_tokens, answer_vector = vectors[self._key(candidate)]
            keys = tuple(sorted({self._key(reference) for reference in refs}))
            if keys not in stacks:
                stacks[keys] = self._stack(keys, vectors)
            block, mask, reference_vectors = stacks[keys]
            # similarity[a, i, j]: alias a's token i against the answer's token j.
            similarity = torch.einsum("aid,jd->aij", block, answer_tokens)
            counts = mask.sum(dim=1)
            recall = (similarity.max(dim=2).values * mask).sum(dim=1) / counts
            precision = (similarity.masked_fill(~mask[:, :, None], float("-inf"))
                         .max(dim=1).values.mean(dim=1))
            total = recall + precision
            f1 = torch.where(total > 0, 2 * recall * precision / total.clamp_min(1e-12),
                             torch.zeros_like(total))
            cosine = reference_vectors @ answer_vector
            best = torch.stack([recall, precision, f1, cosine]).max(dim=1).values
            rows.append([max(0.0, value) for value in best.tolist()])
        return rows
