"""The statistics helpers both apps share (core/statistics.py): one definition of "a number fit
for JSON" and of the bootstrap percentile interval, used by agreement (annotation) and by the
meta-evaluation and judge alignment (metrics_app)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from annotation.domain import agreement
from core.statistics import finite_or_none, percentile_interval
from metrics_app.domain import judge_alignment, meta_evaluation


@pytest.mark.parametrize(("value", "expected"), [
    (np.float64(0.25), 0.25), (3, 3.0), (math.nan, None), (math.inf, None), (-np.inf, None),
])
def test_finite_or_none(value, expected):
    result = finite_or_none(value)
    assert result == expected and (result is None or type(result) is float)


def test_percentile_interval_ignores_undefined_resamples():
    estimates = np.array([np.nan, *np.linspace(0.0, 1.0, 101), np.inf, -np.inf])
    low, high = percentile_interval(estimates, 0.9)
    assert low == pytest.approx(0.05) and high == pytest.approx(0.95)
    assert type(low) is float


def test_percentile_interval_of_nothing_defined_is_missing():
    assert percentile_interval(np.array([np.nan, np.inf]), 0.95) == [None, None]
    assert percentile_interval(np.array([]), 0.95) == [None, None]


def test_both_apps_use_the_one_definition():
    assert agreement.finite_or_none is finite_or_none
    assert meta_evaluation.finite_or_none is finite_or_none
    assert meta_evaluation.percentile_interval is percentile_interval
    assert judge_alignment.percentile_interval is percentile_interval
    assert agreement.cohen_kappa([1, 1, 1], [1, 1, 1]) is None  # undefined kappa: None, not NaN
