"""A qualification result as the whole number a provider stores (MTurk's qualification value,
0-100), kept in agreement with the pass/fail decision made here.

The local decision compares the exact score with `project.qualification_threshold`; MTurk
compares an integer value with an integer threshold when a worker accepts the next stage's
HIT. Rounding both to the nearest percent let a worker who failed locally (2 of 3 right, 0.667,
against 0.67) through MTurk's gate (67 ≥ 67), to be refused by our page after accepting.
"""
from __future__ import annotations

import math
from decimal import Decimal


def percent_threshold(threshold: float) -> int:
    """The pass mark in whole percent, rounded up (0.67 → 67, 0.665 → 67): read through its
    decimal text, so 0.67 is not 67.00000000000001 and rounded up to 68."""
    return max(0, min(100, math.ceil(Decimal(str(threshold)) * 100)))


def granted_value(*, score: float, passed: bool, threshold: float) -> int:
    """The score in whole percent, rounded down, then moved to the right side of the pass mark
    when rounding put it on the wrong one: a pass is at least `percent_threshold`, a fail
    below it (a pass mark of 0 % lets every value through, so a fail is then 0)."""
    value = max(0, min(100, math.floor(score * 100 + 1e-9)))
    mark = percent_threshold(threshold)
    if passed:
        return max(value, mark)
    return max(0, min(value, mark - 1))
