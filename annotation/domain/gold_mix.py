"""How many gold/attention items go in a batch: the one rule of a stage's HIT plan (its cost
estimate, MTurk HITs, a Prolific study's places) and of the pages that pick items themselves
(Prolific, in-house), so the places a study is created with are exactly the batches its pages
hand out, and a researcher can say ahead what each batch holds.

Pure functions. The rate is read as the researcher wrote it (0.58, not the float nearest to
it), so 0.58 of 25 is 14.5, rounded up to 15, not the float product 14.4999… rounded down:

- a full batch of `per_batch` items holds round-half-up(per_batch × rate) gold items, at
  least one when the rate is above 0 (a rate too small to round to one item, 0.04 of 10,
  gave none: the researcher who asked for attention checks got none, unseen), at most
  per_batch − 1 (a batch is never all gold) and none in a batch of one;
- a short batch (the last of a pool, or a Likert passage with fewer candidates than a
  batch: fewer regular items than a full batch holds) gets gold in proportion to its regular
  items, round-half-up(regular × rate / (1 − rate)), at least one as a full batch does (a
  study of short passages at 0.1 had no gold at all), never more than a full batch.

Whether a batch can have gold at all is the caller's (a Likert batch takes gold from its own
passage only; one without gold items keeps its slots for regular items).
"""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal


def _share(rate: float) -> Decimal:
    return Decimal(repr(float(rate)))


def _half_up(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_HALF_UP))


def gold_per_batch(per_batch: int, rate: float) -> int:
    """Gold items in a full batch of `per_batch` items at `rate`."""
    if per_batch < 2 or rate <= 0:
        return 0
    return min(per_batch - 1, max(1, _half_up(per_batch * _share(rate))))


def gold_with_regular(n_regular: int, *, per_batch: int, rate: float) -> int:
    """Gold items that go with `n_regular` regular items in a batch of `per_batch`: a full
    batch's `gold_per_batch` when they fill the rest of it, else in proportion (a short
    batch), at least one, never more."""
    full = gold_per_batch(per_batch, rate)
    if n_regular <= 0 or not full:
        return 0
    if n_regular >= per_batch - full:
        return full
    share = _share(rate)
    return min(full, max(1, _half_up(n_regular * share / (1 - share))))


def gold_per_batch_text(per_batch: int, rate: float) -> str:
    """"1 gold item in each batch of 5 (20%; gold rate 0.15)": what the rate gives a batch."""
    n = gold_per_batch(per_batch, rate)
    if rate <= 0:
        return "no gold items"
    items = "item" if n == 1 else "items"
    share = f"{100 * n / per_batch:.0f}%"
    return (f"{n} gold {items} in each batch of {per_batch} ({share}; gold rate "
            f"{_share(rate).normalize():f})")
