"""Statistics helpers both apps share (pure numpy, no Django): a number fit for strict JSON,
the percentile interval of bootstrap resamples, and how many resamples a report may ask for."""
from __future__ import annotations

import math

import numpy as np

# Bootstrap resamples per interval a report may ask for (0: no intervals), at every door (the
# report APIs, `metric_report`, `judge_report`): beyond it one report runs for hours.
MAX_RESAMPLES = 5000


def resamples_check(value, name: str = "n_resamples") -> None:
    """ValueError naming `name` unless `value` is a whole number from 0 to MAX_RESAMPLES."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RESAMPLES:
        raise ValueError(f"{name}: a whole number of bootstrap resamples from 0 to "
                         f"{MAX_RESAMPLES}, not {value!r}")


# Values whose variance is at most this share of their mean square are one number up to
# floating-point rounding (0.1 + 0.2 beside 0.3): a statistic that divides by their variation
# (a correlation) is undefined there, not a confident correlation of the rounding noise.
ROUNDING_VARIANCE = 1e-12


def has_variation(values) -> bool:
    """Whether `values` (two or more) vary by more than floating-point rounding
    (`ROUNDING_VARIANCE`)."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return False
    centred = values - values.mean()
    return float((centred * centred).mean()) > ROUNDING_VARIANCE * (
        float((values * values).mean()) + 1e-300)


def finite_or_none(value: float) -> float | None:
    """`value` as a Python float, or None where it is NaN or ±inf (undefined statistics read as
    missing, and strict JSON has no NaN)."""
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def percentile_interval(estimates: np.ndarray, confidence: float) -> list[float | None]:
    """The percentile interval of the resamples where the statistic is defined: a resample
    with one distinct value gives NaN or ±inf (0/0, x/0), which would otherwise become a
    missing upper bound ("[-1.00, ]" on the metrics page)."""
    estimates = estimates[np.isfinite(estimates)]
    if len(estimates) == 0:
        return [None, None]
    alpha = (1 - confidence) / 2
    low, high = np.quantile(estimates, [alpha, 1 - alpha])
    return [finite_or_none(low), finite_or_none(high)]
