"""Aggregating several judgments of an item into one gold label. Pure functions.

Gold score per Likert item = mean of its judgments (MOCHA). Optionally each annotator's scores
are z-normalized first (Blatz et al. 2004, as in "Evaluating QA Evaluation"), which removes
annotators' personal offsets and spreads before averaging.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from statistics import fmean, pstdev


def znormalize_by_annotator(
    triples: Iterable[tuple[Hashable, Hashable, float]],
) -> list[tuple[Hashable, Hashable, float]]:
    """(annotator, item, score) → the same with each annotator's scores z-normalized.

    An annotator with a single score, or with no spread, gets 0 for every score: they carry no
    information about relative quality.
    """
    triples = list(triples)
    by_annotator: dict[Hashable, list[float]] = defaultdict(list)
    for annotator, _item, score in triples:
        by_annotator[annotator].append(score)
    stats = {
        annotator: (fmean(scores), pstdev(scores)) for annotator, scores in by_annotator.items()
    }
    normalized = []
    for annotator, item, score in triples:
        mean, std = stats[annotator]
        normalized.append((annotator, item, (score - mean) / std if std > 0 else 0.0))
    return normalized


def mean_by_item(
    triples: Iterable[tuple[Hashable, Hashable, float]], *, znormalize: bool = False
) -> dict[Hashable, float]:
    """Mean score per item from (annotator, item, score) triples."""
    triples = list(triples)
    if znormalize:
        triples = znormalize_by_annotator(triples)
    by_item: dict[Hashable, list[float]] = defaultdict(list)
    for _annotator, item, score in triples:
        by_item[item].append(score)
    return {item: fmean(scores) for item, scores in by_item.items()}


def majority_by_item(
    pairs: Iterable[tuple[Hashable, Hashable]],
) -> dict[Hashable, tuple[Hashable | None, bool, Counter]]:
    """(item, label) pairs → item: (majority label or None on a tie, is_tie, counts)."""
    counts: dict[Hashable, Counter] = defaultdict(Counter)
    for item, label in pairs:
        counts[item][label] += 1
    result = {}
    for item, counter in counts.items():
        ranked = counter.most_common()
        tie = len(ranked) > 1 and ranked[0][1] == ranked[1][1]
        result[item] = (None if tie else ranked[0][0], tie, counter)
    return result
