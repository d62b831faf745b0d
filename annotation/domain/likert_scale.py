"""The correctness cut of a Likert scale: the one rule that turns a score into correct or
incorrect, at every door (adaptive redundancy, judge alignment, the estimates, the metric
report's decision table, the LLM judge's verdict, LERC's labels).

A project's scale runs 1 to `Project.scale_top` (one label per point: a 7-point project
collects 1..7). The cut is the scale's midpoint, (1 + top) / 2: 3 on 1-5, 4 on 1-7; a score at
or above it is correct. Pure functions.
"""
from __future__ import annotations

# The scale without labels, the LLM judge's `likert` scale and LERC's (MOCHA / EVOUNA gold).
FIVE_POINT_TOP = 5


def _checked_top(scale_top: int) -> int:
    if isinstance(scale_top, bool) or not isinstance(scale_top, int) or scale_top < 2:
        raise ValueError(f"a Likert scale's top score must be a whole number of at least 2 "
                         f"(a scale 1 to top), not {scale_top!r}")
    return scale_top


def likert_correct_at(scale_top: int = FIVE_POINT_TOP) -> float:
    """The lowest score that counts as correct on a 1..`scale_top` scale: its midpoint
    (3.0 on 1-5, 4.0 on 1-7, 2.5 on 1-4). ValueError naming a top that is not a scale."""
    return (1 + _checked_top(scale_top)) / 2


def is_likert_correct(score: float, scale_top: int = FIVE_POINT_TOP) -> bool:
    """Whether `score` on a 1..`scale_top` scale counts as correct (at or above the cut)."""
    return float(score) >= likert_correct_at(scale_top)


def from_five_point(score: float, scale_top: int) -> float:
    """A 1-5 score (a judge's, LERC's) mapped linearly onto 1..`scale_top`, the inverse of
    `to_five_point`: how a judge's score predicts a project's mean score on its own scale (a
    judge agreeing with humans who gave 7 reads 7, not 5)."""
    top = _checked_top(scale_top)
    return 1 + (top - 1) * (float(score) - 1) / (FIVE_POINT_TOP - 1)


def to_five_point(score: float, scale_top: int) -> float:
    """`score` on 1..`scale_top` mapped linearly onto 1-5 (1 stays 1, the top becomes 5, the
    cut becomes 3): how a project's gold on another scale enters LERC, which trains and is
    evaluated on 1-5. Linear everywhere (a z-normalized gold mapped back may lie a little past
    the scale's ends and stays proportionally past 1-5's)."""
    top = _checked_top(scale_top)
    return 1 + (FIVE_POINT_TOP - 1) * (float(score) - 1) / (top - 1)
