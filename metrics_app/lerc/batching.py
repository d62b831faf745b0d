"""Batches of encoded inputs as tensors: each batch padded to its own longest input (dynamic
padding), in input order for scoring baselines, sorted by length for scoring
(`metrics_app.domain.batching.length_sorted_batches`), or shuffled in length buckets for
training."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .data import Encoded

# Training batches are sorted by length within chunks of this many batches: far less padding
# than a plain shuffle, while every chunk still mixes the whole length range's neighbours.
LENGTH_BUCKET_BATCHES = 50


def sequential_batches(count: int, batch_size: int) -> list[list[int]]:
    return [list(range(start, min(start + batch_size, count)))
            for start in range(0, count, batch_size)]


def collate(encoded: Sequence[Encoded], pad_id: int):
    """Pad a batch to its own longest input: (input_ids, attention_mask, token_type_ids)."""
    width = max(len(e) for e in encoded)
    input_ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    token_types = torch.zeros((len(encoded), width), dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, e in enumerate(encoded):
        n = len(e)
        input_ids[row, :n] = torch.tensor(e.input_ids, dtype=torch.long)
        token_types[row, :n] = torch.tensor(e.token_type_ids, dtype=torch.long)
        mask[row, :n] = 1
    return input_ids, mask, token_types


def _input_length(item: Encoded | tuple[Encoded, Encoded]) -> int:
    return max(len(item[0]), len(item[1])) if isinstance(item, tuple) else len(item)


def epoch_batches(inputs: Sequence, batch_size: int, generator: torch.Generator, *,
                  group_by_length: bool) -> list[list[int]]:
    """A shuffled epoch of index batches. With group_by_length, chunks of
    LENGTH_BUCKET_BATCHES batches are sorted by length and cut into batches, whose order is
    shuffled again: far less padding, still random."""
    order = torch.randperm(len(inputs), generator=generator).tolist()
    if not group_by_length:
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    chunk = batch_size * LENGTH_BUCKET_BATCHES
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: _input_length(inputs[i]),
                      reverse=True)
        batches.extend(part[i:i + batch_size] for i in range(0, len(part), batch_size))
    shuffled = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffled]
