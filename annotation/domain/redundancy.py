"""Adaptive redundancy: collect `min` judgments per item and more, up to `max`, only while the
judges disagree (the share of the most common label is below `agreement`). Pure functions; the
stage setting is `"redundancy": {"min": 2, "max": 5, "agreement": 0.75}`.

A Likert judgment's label is its side of the project's correctness cut (`likert_correct_at`:
the scale's midpoint, score ≥ 3 on 1-5, ≥ 4 on 1-7), the verdict the judgments are collected for; A/B and multiple-choice judgments are labelled by the choice.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from annotation.domain.likert_scale import FIVE_POINT_TOP, is_likert_correct

MAX_JUDGMENTS = 20


@dataclass(frozen=True)
class AdaptiveRedundancy:
    min: int
    max: int
    agreement: float


def adaptive_redundancy(settings: dict | None) -> AdaptiveRedundancy | None:
    """The stage's adaptive-redundancy setting, or None when it has none. Raises ValueError
    naming what is wrong."""
    raw = (settings or {}).get("redundancy")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError('"redundancy" must be an object like {"min": 2, "max": 5, '
                         '"agreement": 0.75}')
    unknown = set(raw) - {"min", "max", "agreement"}
    if unknown:
        raise ValueError(f'"redundancy" has unknown keys: {", ".join(sorted(unknown))} '
                         "(allowed: min, max, agreement)")
    low, high, agreement = raw.get("min", 2), raw.get("max", 5), raw.get("agreement", 0.75)
    for name, value in (("min", low), ("max", high)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f'"redundancy" {name} must be a whole number, not {value!r}')
    if not 1 <= low <= high <= MAX_JUDGMENTS:
        raise ValueError(f'"redundancy" needs 1 ≤ min ≤ max ≤ {MAX_JUDGMENTS}; got min {low}, '
                         f"max {high}")
    if isinstance(agreement, bool) or not isinstance(agreement, int | float) \
            or not 0.5 < agreement <= 1:
        raise ValueError(f'"redundancy" agreement must be a share above 0.5 and at most 1, not '
                         f"{agreement!r}")
    return AdaptiveRedundancy(min=low, max=high, agreement=float(agreement))


def likert_label(score: float, scale_top: int = FIVE_POINT_TOP) -> bool:
    """A Likert judgment's label: whether its score on 1..`scale_top` is correct."""
    return is_likert_correct(score, scale_top)


def next_target(labels: Sequence[Hashable], rule: AdaptiveRedundancy) -> tuple[int, bool]:
    """(how many judgments the item should get, whether it is settled) given its labels so
    far: `min` until it has them; then settled when the most common label's share reaches
    `agreement`, else one more, up to `max` (settled there, disagreeing)."""
    n = len(labels)
    if n < rule.min:
        return rule.min, False
    top = Counter(labels).most_common(1)[0][1]
    if top / n >= rule.agreement:
        return n, True
    if n >= rule.max:
        return rule.max, True
    return n + 1, False
