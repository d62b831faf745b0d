"""Inter-annotator agreement: pure functions over numpy arrays (no database).

Two layouts are used:

* reliability data — an (annotators × items) matrix with NaN where an annotator did not judge
  an item (the layout of the `krippendorff` package). Workers may vary freely between items.
* value counts — an (items × values) matrix: how many judgments of each item took each value of
  the value domain. Every statistic here except Cohen's κ and the correlations depends only on
  these counts, and they stay small for big projects (40,000 items × 5 Likert values), whereas a
  dense annotators × items matrix of a crowd project with hundreds of workers would not.

Levels of measurement follow the kind of judgment: interval (and ordinal) for Likert scores,
nominal for A/B preferences and multiple-choice answers.

An undefined statistic (no item with two judgments, no variation at all, fewer than two pairs
for a correlation) is returned as None rather than NaN, so it serialises to JSON null.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from core.statistics import finite_or_none, has_variation

Level = Literal["nominal", "ordinal", "interval"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval")


@dataclass(frozen=True)
class Interval:
    low: float | None
    high: float | None
    n_resamples: int
    confidence: float

    def as_dict(self) -> dict:
        return {"low": self.low, "high": self.high, "n_resamples": self.n_resamples,
                "confidence": self.confidence}


# --------------------------------------------------------------------------------------------
# Layout conversions
# --------------------------------------------------------------------------------------------

def reliability_matrix(
    annotators: Sequence, items: Sequence, values: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(annotator, item, value) columns → (matrix annotators × items with NaN, annotator ids,
    item ids). Values must be numeric; code nominal labels first (`encode_labels`)."""
    annotator_ids, rows = np.unique(np.asarray(annotators), return_inverse=True)
    item_ids, cols = np.unique(np.asarray(items), return_inverse=True)
    matrix = np.full((len(annotator_ids), len(item_ids)), np.nan)
    matrix[rows, cols] = np.asarray(values, dtype=float)
    return matrix, annotator_ids, item_ids


def encode_labels(labels: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Nominal labels → (integer codes as floats, the label of each code)."""
    domain, codes = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    return codes.astype(float), domain


def value_counts_from_pairs(
    item_index: np.ndarray, values: np.ndarray, value_domain: Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Judgments as (item index 0..n-1, value) → (counts items × values, value domain).

    Values outside `value_domain` raise ValueError (a Likert score of 7 on a 1–5 scale is a data
    error, not a new category)."""
    item_index = np.asarray(item_index, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    domain = np.unique(values) if value_domain is None else np.asarray(value_domain, dtype=float)
    value_index = np.searchsorted(domain, values)
    if len(values) and (
        (value_index >= len(domain)).any() or (domain[np.minimum(value_index, len(domain) - 1)] != values).any()
    ):
        raise ValueError("values outside the value domain")
    n_items = int(item_index.max()) + 1 if len(item_index) else 0
    counts = np.zeros((n_items, len(domain)), dtype=np.int64)
    np.add.at(counts, (item_index, value_index), 1)
    return counts, domain


def value_counts_from_matrix(
    reliability_data: np.ndarray, value_domain: Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    data = np.asarray(reliability_data, dtype=float)
    rows, cols = np.nonzero(~np.isnan(data))
    counts, domain = value_counts_from_pairs(cols, data[rows, cols], value_domain)
    if counts.shape[0] < data.shape[1]:  # trailing items without any judgment
        counts = np.vstack([counts, np.zeros((data.shape[1] - counts.shape[0], len(domain)),
                                             dtype=np.int64)])
    return counts, domain


# --------------------------------------------------------------------------------------------
# Krippendorff's alpha
# --------------------------------------------------------------------------------------------

def krippendorff_alpha(
    reliability_data, level: Level = "interval", *, value_domain: Sequence | None = None
) -> float | None:
    """Krippendorff's α of an (annotators × items) matrix with NaN for missing judgments,
    computed by the `krippendorff` package. Items with a single judgment are not pairable and
    do not count. None when α is undefined (no pairable item, or a single value overall)."""
    import krippendorff

    data = np.asarray(reliability_data, dtype=float)
    if data.ndim != 2 or data.size == 0:
        return None
    if value_domain is None:
        value_domain = np.unique(data[~np.isnan(data)])
    if len(value_domain) < 2 or not ((~np.isnan(data)).sum(axis=0) >= 2).any():
        return None
    return finite_or_none(
        krippendorff.alpha(
            reliability_data=data, value_domain=value_domain, level_of_measurement=level
        )
    )


# Why a statistic of judgments has no value when no judgment counts (yet).
NO_JUDGMENTS = "no judgments that count yet"


def agreement_undefined_reason(counts: np.ndarray,
                               value_labels: Sequence[str] | None = None) -> str | None:
    """Why agreement (Krippendorff's α at any level, and Fleiss' κ over the same items) of
    these (items × values) counts is undefined, in the words every door shows (the dashboard,
    the cockpit, the publish guard, the report API, `manage.py report`); None when there is
    something to compute. The cases are exactly those where `krippendorff_alpha_from_counts`
    answers None: no judgment, no item with two judgments (agreement compares judgments of one
    item), or one answer only among the items judged twice (no variation: chance agreement is
    complete, and α = 1 − 0/0). `value_labels` (one per column) names that answer."""
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.sum() == 0:
        return NO_JUDGMENTS
    pairable = counts[counts.sum(axis=1) >= 2]
    if len(pairable) == 0:
        return ("no item has two judgments that count yet (agreement compares judgments of "
                "the same item)")
    used = np.flatnonzero(pairable.sum(axis=0) > 0)
    if len(used) < 2:
        named = f" ({value_labels[int(used[0])]})" if value_labels is not None else ""
        return (f"every judgment of the items judged twice gives the same answer{named}, "
                "so there is no variation to agree on")
    return None


def krippendorff_alpha_from_counts(
    counts: np.ndarray, value_domain: Sequence[float], level: Level = "interval"
) -> float | None:
    """Krippendorff's α from (items × values) counts — same numbers as `krippendorff_alpha`
    on the matrix (and as the `krippendorff` package's value_counts path, which the tests
    compare), without building it. Items with the same counts contribute the same coincidences,
    so they are summed per distinct pattern: a million Likert judgments have a few dozen
    patterns, and the package's per-item V × V tensors took most of a report's time."""
    counts = np.asarray(counts)
    if counts.ndim != 2 or len(value_domain) < 2 or not (counts.sum(axis=1) >= 2).any():
        return None
    # Values nobody used in a pairable item make the package's denominator 0 for a single
    # used value; treat "everyone always agrees on one value" as undefined, like the package.
    pairable = counts[counts.sum(axis=1) >= 2]
    if (pairable.sum(axis=0) > 0).sum() < 2:
        return None
    patterns, freq = _count_patterns(pairable)
    v = len(value_domain)
    o = (freq.astype(float) @ _pattern_coincidences(patterns)).reshape(1, v, v)
    return finite_or_none(float(
        _alpha_from_coincidences(o, np.asarray(value_domain, dtype=float), level)[0]))


def _count_patterns(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of an (items × values) count matrix and how often each occurs."""
    counts = np.asarray(counts, dtype=np.int64)
    # One integer key per row (mixed radix) — np.unique(axis=0) is far slower on 40,000 rows.
    base = int(counts.max()) + 1 if counts.size else 1
    if base ** counts.shape[1] < 2**62:
        keys = counts @ (base ** np.arange(counts.shape[1], dtype=np.int64))
        _keys, first, freq = np.unique(keys, return_index=True, return_counts=True)
        return counts[first], freq
    return np.unique(counts, axis=0, return_counts=True)


def _pattern_coincidences(patterns: np.ndarray) -> np.ndarray:
    """Per-item coincidence matrices (flattened V²) of count patterns (Krippendorff 2011):
    o_u[c,k] = (n_uc n_uk − [c=k] n_uc) / (m_u − 1)."""
    m = patterns.sum(axis=1).astype(float)
    outer = patterns[:, :, None] * patterns[:, None, :] - patterns[:, :, None] * np.eye(
        patterns.shape[1]
    )[None]
    return (outer / (m - 1)[:, None, None]).reshape(len(patterns), -1)


def _alpha_from_coincidences(o: np.ndarray, domain: np.ndarray, level: Level) -> np.ndarray:
    """Vectorised α for a batch of coincidence matrices o (B × V × V)."""
    n_v = o.sum(axis=1)  # B × V
    n = n_v.sum(axis=1)  # B
    v = len(domain)
    if level == "nominal":
        d = np.broadcast_to(1.0 - np.eye(v), o.shape)
    elif level == "interval":
        d = np.broadcast_to((domain[:, None] - domain[None, :]) ** 2, o.shape)
    elif level == "ordinal":
        cum = np.concatenate([np.zeros((len(o), 1)), np.cumsum(n_v, axis=1)], axis=1)
        lo = np.minimum(np.arange(v)[:, None], np.arange(v)[None, :])
        hi = np.maximum(np.arange(v)[:, None], np.arange(v)[None, :])
        between = cum[:, hi + 1] - cum[:, lo]  # Σ_{g=lo..hi} n_g
        d = (between - (n_v[:, :, None] + n_v[:, None, :]) / 2) ** 2
    else:
        raise ValueError(f"unknown level {level!r}")
    e = (n_v[:, :, None] * n_v[:, None, :] - n_v[:, :, None] * np.eye(v)[None]) / (
        n - 1
    )[:, None, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1 - (o * d).sum(axis=(1, 2)) / (e * d).sum(axis=(1, 2))


def _percentile_interval(
    estimates: np.ndarray, n_resamples: int, confidence: float
) -> Interval:
    estimates = estimates[np.isfinite(estimates)]
    if len(estimates) == 0:
        return Interval(None, None, n_resamples, confidence)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return Interval(float(low), float(high), n_resamples, confidence)


def _resampled_pattern_weights(
    counts: np.ndarray, n_resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap over items, done on the distinct count patterns: the number of times each
    pattern is drawn when n items are resampled with replacement is exactly multinomial with
    the patterns' frequencies, so 40,000 Likert items with ~35 distinct patterns cost ~35
    columns instead of 40,000."""
    patterns, freq = _count_patterns(counts)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(int(freq.sum()), freq / freq.sum(), size=n_resamples)
    return patterns, weights


def krippendorff_alpha_ci(
    counts: np.ndarray,
    value_domain: Sequence[float],
    level: Level = "interval",
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap CI of α resampling pairable items (items with ≥ 2 judgments; the
    others carry no information about agreement)."""
    counts = np.asarray(counts)
    pairable = counts[counts.sum(axis=1) >= 2]
    domain = np.asarray(value_domain, dtype=float)
    if len(pairable) < 2 or len(domain) < 2:
        return Interval(None, None, n_resamples, confidence)
    patterns, weights = _resampled_pattern_weights(pairable, n_resamples, seed)
    per_pattern = _pattern_coincidences(patterns)
    v = len(domain)
    o = (weights @ per_pattern).reshape(n_resamples, v, v)
    return _percentile_interval(_alpha_from_coincidences(o, domain, level), n_resamples, confidence)


def alpha_without_each(
    counts: np.ndarray,
    value_domain: Sequence[float],
    item_index: np.ndarray,
    value_index: np.ndarray,
    annotator_index: np.ndarray,
    level: Level = "interval",
) -> np.ndarray:
    """Leave-one-annotator-out α: for every annotator a (0..A-1), α of the data without a's
    judgments (NaN where undefined). An annotator whose removal raises α lowers agreement.

    Only items the annotator judged change, so each α is the full coincidence matrix minus the
    per-judgment differences, summed per annotator — one pass over the judgments."""
    counts = np.asarray(counts, dtype=float)
    domain = np.asarray(value_domain, dtype=float)
    v = len(domain)
    n_annotators = int(annotator_index.max()) + 1 if len(annotator_index) else 0
    patterns, freq = _count_patterns(counts[counts.sum(axis=1) >= 2])
    full = freq.astype(float) @ _pattern_coincidences(patterns) if len(patterns) else \
        np.zeros(v * v)
    before = counts[item_index]
    after = before.copy()
    after[np.arange(len(after)), value_index] -= 1

    def coincidences(rows: np.ndarray) -> np.ndarray:
        out = np.zeros((len(rows), v * v))
        ok = rows.sum(axis=1) >= 2
        if ok.any():
            out[ok] = _pattern_coincidences(rows[ok])
        return out

    # The difference depends only on the item's count pattern and the removed value: compute it
    # once per distinct (pattern, value) — a few dozen — instead of once per judgment.
    key_rows = np.column_stack([before, value_index]).astype(np.int64)
    base = int(key_rows.max(initial=0)) + 1
    if len(key_rows) == 0:
        first = inverse = np.zeros(0, dtype=np.int64)
    elif base ** (v + 1) < 2**62:
        _keys, first, inverse = np.unique(
            key_rows @ (base ** np.arange(v + 1, dtype=np.int64)),
            return_index=True, return_inverse=True,
        )
    else:
        _rows, first, inverse = np.unique(key_rows, axis=0, return_index=True,
                                          return_inverse=True)
    inverse = inverse.reshape(-1)
    delta = coincidences(before[first]) - coincidences(after[first])
    # How many of each (pattern, value) every annotator removes, then one matrix product:
    # never a judgments × V² array (a million judgments made it 200 MB and most of the time).
    per_annotator = np.bincount(
        np.asarray(annotator_index, dtype=np.int64) * len(first) + inverse,
        minlength=n_annotators * len(first)).reshape(n_annotators, len(first))
    removed = per_annotator.astype(float) @ delta
    o = (full[None, :] - removed).reshape(n_annotators, v, v)
    o = np.clip(o, 0, None)  # float noise
    return _alpha_from_coincidences(o, domain, level)


# --------------------------------------------------------------------------------------------
# Fleiss' kappa and percent agreement
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FleissResult:
    kappa: float | None
    n_items: int  # items used
    n_raters: int | None  # judgments per used item
    n_items_skipped: int  # items with another number of judgments


def fleiss_kappa_from_counts(counts: np.ndarray, *, n_raters: int | None = None) -> FleissResult:
    """Fleiss' κ (statsmodels) over an (items × categories) count table.

    Fleiss' κ assumes the same number of ratings per item. Items with another count are
    skipped and reported in `n_items_skipped`: by default the most common count among items
    with at least two ratings is used (the largest on a tie), or pass `n_raters` — e.g. the
    number of experts of a long-form QA domain, so κ covers the items every expert judged."""
    from statsmodels.stats.inter_rater import fleiss_kappa

    counts = np.asarray(counts)
    per_item = counts.sum(axis=1) if counts.size else np.zeros(0, dtype=int)
    rated = per_item[per_item >= 2]
    if n_raters is None:
        if len(rated) == 0:
            return FleissResult(None, 0, None, int((per_item > 0).sum()))
        values, freq = np.unique(rated, return_counts=True)
        n_raters = int(values[freq == freq.max()].max())
    keep = per_item == n_raters
    skipped = int(((per_item > 0) & ~keep).sum())
    table = counts[keep]
    if len(table) == 0 or n_raters < 2:
        return FleissResult(None, int(len(table)), n_raters, skipped)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = fleiss_kappa(table, method="fleiss")
    return FleissResult(finite_or_none(kappa), int(len(table)), n_raters, skipped)


def fleiss_kappa(reliability_data, *, n_raters: int | None = None) -> FleissResult:
    """Fleiss' κ of an (annotators × items) matrix with NaN for missing; see
    `fleiss_kappa_from_counts` for items with other numbers of ratings. The table comes from
    statsmodels' `aggregate_raters` over the items with exactly `n_raters` ratings."""
    from statsmodels.stats.inter_rater import aggregate_raters

    data = np.asarray(reliability_data, dtype=float)
    per_item = (~np.isnan(data)).sum(axis=0)
    counts, _domain = value_counts_from_matrix(data)
    chosen = fleiss_kappa_from_counts(counts, n_raters=n_raters).n_raters
    if chosen is None:
        return fleiss_kappa_from_counts(counts, n_raters=n_raters)
    columns = data[:, per_item == chosen].T  # items × annotators, exactly `chosen` non-NaN
    if len(columns) == 0:
        return FleissResult(None, 0, chosen, int((per_item > 0).sum()))
    ratings = columns[~np.isnan(columns)].reshape(len(columns), chosen)
    table, _categories = aggregate_raters(ratings)
    result = fleiss_kappa_from_counts(table, n_raters=chosen)
    return FleissResult(result.kappa, result.n_items, chosen,
                        int(((per_item > 0) & (per_item != chosen)).sum()))


def fleiss_kappa_ci(
    counts: np.ndarray,
    *,
    n_raters: int | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap CI of Fleiss' κ resampling the items it is computed on."""
    counts = np.asarray(counts)
    used = fleiss_kappa_from_counts(counts, n_raters=n_raters)
    if used.kappa is None or used.n_items < 2:
        return Interval(None, None, n_resamples, confidence)
    table = counts[counts.sum(axis=1) == used.n_raters].astype(float)
    patterns, weights = _resampled_pattern_weights(table, n_resamples, seed)
    r = used.n_raters
    n = weights.sum(axis=1)  # items per resample
    # Fleiss (1971): P_i = (Σ_j n_ij² − r) / (r(r−1)); p_j = Σ_i n_ij / (N r).
    p_item = ((patterns**2).sum(axis=1) - r) / (r * (r - 1))
    p_bar = weights @ p_item / n
    p_cat = weights @ patterns / (n * r)[:, None]
    p_e = (p_cat**2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappas = (p_bar - p_e) / (1 - p_e)
    return _percentile_interval(kappas, n_resamples, confidence)


def percent_agreement_from_counts(counts: np.ndarray) -> float | None:
    """Mean over items with ≥ 2 judgments of the share of agreeing judgment pairs,
    Σ_c n_c(n_c−1) / (m(m−1)); for two annotators this is the plain share of equal answers."""
    counts = np.asarray(counts, dtype=float)
    m = counts.sum(axis=1)
    ok = m >= 2
    if not ok.any():
        return None
    return float(((counts[ok] * (counts[ok] - 1)).sum(axis=1) / (m[ok] * (m[ok] - 1))).mean())


def percent_agreement(reliability_data) -> float | None:
    counts, _domain = value_counts_from_matrix(np.asarray(reliability_data, dtype=float))
    return percent_agreement_from_counts(counts)


# --------------------------------------------------------------------------------------------
# Two annotators
# --------------------------------------------------------------------------------------------

def _paired(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Drop pairs where either annotator has no value (NaN or None)."""
    a = np.asarray(a, dtype=object)
    b = np.asarray(b, dtype=object)
    if a.shape != b.shape:
        raise ValueError("both annotators need one value per item (NaN for missing)")

    def missing(x):
        return np.array([v is None or (isinstance(v, float) and np.isnan(v)) for v in x],
                        dtype=bool)

    keep = ~(missing(a) | missing(b))
    return a[keep], b[keep]


def _label_key(value):
    """One key per label: numbers by value (int 1, float 1.0 and numpy 1 are the same label;
    `str()` would make "1" and "1.0" two labels), anything else as itself."""
    if isinstance(value, bool | np.bool_):
        return value
    if isinstance(value, numbers.Number):
        number = float(value)
        return int(number) if number.is_integer() else number
    return value


def _sorted_labels(keys) -> list:
    keys = set(keys)
    if all(isinstance(k, numbers.Number) and not isinstance(k, bool) for k in keys):
        return sorted(keys)
    return sorted(keys, key=lambda k: (type(k).__name__, str(k)))


def cohen_kappa(
    a, b, *, weights: Literal["quadratic", "linear"] | None = None, labels: Sequence | None = None
) -> float | None:
    """Cohen's κ between two annotators (scikit-learn), unweighted or weighted. Numeric labels
    are compared by value. Weighted κ needs the full ordered scale as `labels` (e.g. 1-5):
    the distances between categories come from their positions on the scale, so a scale made
    of the observed labels only would shrink or stretch them. Values off the scale raise."""
    from sklearn.metrics import cohen_kappa_score

    a, b = _paired(a, b)
    a = [_label_key(v) for v in a.tolist()]
    b = [_label_key(v) for v in b.tolist()]
    observed = set(a) | set(b)
    if weights is not None:
        if labels is None:
            raise ValueError("weighted Cohen's kappa needs the full ordered scale as `labels`")
        scale = [_label_key(v) for v in labels]
        off_scale = observed - set(scale)
        if off_scale:
            raise ValueError(f"values not on the scale {scale}: {_sorted_labels(off_scale)}")
    else:
        scale = _sorted_labels(observed | {_label_key(v) for v in (labels or [])})
    if len(observed) < 2:
        return None  # a single label overall: chance agreement is 1, κ undefined
    code = {label: index for index, label in enumerate(scale)}
    with np.errstate(invalid="ignore", divide="ignore"):
        return finite_or_none(cohen_kappa_score(
            [code[v] for v in a], [code[v] for v in b], weights=weights,
            labels=list(range(len(scale))),
        ))


def cohen_kappa_from_confusion(
    confusion, *, weights: Literal["quadratic", "linear"] | None = None
) -> float | None:
    """Cohen's κ from a square confusion matrix whose rows and columns follow the ordered scale
    (the two annotators' label counts): scikit-learn's formula without rebuilding the matrix
    from label lists, for reports that already hold it (hundreds of annotator pairs). None when
    undefined: fewer than two labels used overall, or no chance disagreement."""
    observed = np.asarray(confusion, dtype=float)
    n_labels = observed.shape[0]
    used = (observed.sum(axis=0) + observed.sum(axis=1)) > 0
    if observed.sum() == 0 or used.sum() < 2:
        return None
    positions = np.arange(n_labels)
    distance = np.abs(positions[:, None] - positions[None, :]).astype(float)
    weight = {None: (distance > 0).astype(float), "linear": distance,
              "quadratic": distance ** 2}[weights]
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    chance = float((weight * expected).sum())
    if chance == 0:
        return None
    return 1.0 - float((weight * observed).sum()) / chance


def pearson(a, b) -> float | None:
    """Pearson r over the pairs where both values exist (None or NaN left out); None when
    undefined (fewer than two pairs, or a side without variation). The one definition: metric
    evaluation and LERC training use it too."""
    from scipy.stats import pearsonr

    return _correlation(pearsonr, a, b)


def spearman(a, b) -> float | None:
    """Spearman ρ, as `pearson` treats missing values and undefined cases."""
    from scipy.stats import spearmanr

    return _correlation(spearmanr, a, b)


def _correlation(statistic, a, b) -> float | None:
    # Numbers as floats: None becomes NaN, so the missing pairs drop out in one vectorized
    # step (the per-value check of `_paired` took seconds on 23,000-item metric reports).
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError("both annotators need one value per item (NaN for missing)")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if not (has_variation(a) and has_variation(b)):  # fewer than 2, or one value up to rounding
        return None
    return finite_or_none(statistic(a, b).statistic)


# --------------------------------------------------------------------------------------------
# Generic bootstrap
# --------------------------------------------------------------------------------------------

def bootstrap_ci(
    reliability_data,
    statistic: Callable[[np.ndarray], float | None],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap CI of any statistic of an (annotators × items) matrix, resampling
    items (columns) with replacement; undefined resamples are left out."""
    data = np.asarray(reliability_data, dtype=float)
    n_items = data.shape[1]
    if n_items < 2:
        return Interval(None, None, n_resamples, confidence)
    rng = np.random.default_rng(seed)
    estimates = np.empty(n_resamples)
    for i in range(n_resamples):
        value = statistic(data[:, rng.integers(0, n_items, n_items)])
        estimates[i] = np.nan if value is None else value
    return _percentile_interval(estimates, n_resamples, confidence)
