"""System-level estimates with honest intervals: human judgments alone, a metric alone, and
prediction-powered inference (PPI++) that combines a few human judgments with the metric's
predictions on every item. Pure numpy.

The estimand is the *finite* population the researcher holds: a system's accuracy (or mean
score) over the project's items of that system. Every item has the metric's prediction; a
sample of them has human labels. Two things follow that the `ppi-python` package (written for
an infinite unlabeled pool) does not give, and that are written here:

- the finite-population correction: once the metric has scored every item, its mean has no
  sampling error, and sampling n of N items without replacement shrinks the variance by
  (1 − n/N). Without it, intervals over-cover as the human sample grows (at n = 1,000 of 4,700
  items the uncorrected interval is 13% too wide);
- active sampling (Zrnic & Candès 2024, "Active Statistical Inference"): items are sent to
  humans with known probabilities π_i (higher where the metric is unsure), and the estimate
  weights each human label by 1/π_i, so it stays unbiased whatever the routing.

`superpopulation_ppi` keeps ppi-python's own interval (PPI++, Angelopoulos, Duchi and Zrnic
2023) for the other estimand: the accuracy on the distribution the items were drawn from.

Assumptions, reported next to every estimate: the human-labelled items of a system are a
simple random sample of its items (or, with active sampling, drawn with the recorded
probabilities); human labels are the truth being estimated (annotator error is not modelled);
intervals are 95% Student-t intervals (Wilson or bootstrap for humans alone).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from annotation.domain.agreement import NO_JUDGMENTS

Z95 = 1.959963984540054
# The prediction of an item a judge gives none on that can be used (unscored, or seen by a
# learned metric's version in training): maximally unsure, P(correct) 0.5. Fixed before the
# labels, it keeps a prediction-powered estimate unbiased; only its width suffers.
UNSURE_PROBABILITY = 0.5
BOOTSTRAP_UP_TO = 2000  # scores; more are summarised by the normal interval

ASSUMPTIONS = {
    "human": "Human-labelled items are a simple random sample of the system's items; interval: "
             "Wilson score for correct/incorrect, percentile bootstrap for scores, both "
             "narrowed by the finite-population correction.",
    "human_new_questions": "The same human labels read as a random sample of the questions "
                           "the items come from (no finite-population correction): whether a "
                           "result would hold on new questions like these.",
    "metric": "The metric's verdict on every item; no interval: its error is systematic, not "
              "sampling noise. Bias = metric minus humans on the items both judged.",
    "ppi": "Prediction-powered (PPI++ with the power-tuning weight λ fitted on the labelled "
           "items): the metric's mean over every item, corrected by the human-minus-metric "
           "residual on the labelled sample. Valid for any metric, however biased, provided "
           "the labelled items are a random sample; Student-t interval with the "
           "finite-population correction.",
    "active": "Labelled items drawn with recorded probabilities π; each residual weighted by "
              "1/π (Horvitz–Thompson), so the estimate is unbiased for any routing.",
}


def too_few_labels(n: int, needed: str) -> str:
    """Why an estimate (or its interval) cannot be made from `n` human labels, in the words
    every door shows (the dashboard, the report API, `manage.py report`, `judge_report`);
    `needed` says what asks for more ("an interval needs 2")."""
    if n == 0:
        return NO_JUDGMENTS
    return f"{n} item{'' if n == 1 else 's'} with a human label; {needed}"


PPI_NEEDS = "a prediction-powered estimate needs 2 (to measure the judge's error)"
# Why a prediction-powered estimate is worth no number of human judgments: its own sampling
# error is 0, so there is nothing to compare the humans' with.
EVERY_ITEM_JUDGED = "every item judged: exact for these items"
SAME_RESIDUAL = ("the human label minus the judge's prediction is the same on every labelled "
                 "item: those labels show no error of the judge, which does not make it exact "
                 "on the items not labelled")
SAME_LABEL = ("every labelled item has the same value: a sample without spread does not make "
              "the items not labelled certain")
SAME_BIAS = ("the judge minus the humans is the same on every labelled item: a sample without "
             "spread does not make the bias certain")
# A standard error at or below this, from labels of part of the items, is a sample without
# spread (rounding: a power-tuning weight of 0.9999999999999998 leaves a residual of 1e-16).
NO_SPREAD = 1e-9


def no_spread(se: float, n: int, total: float) -> bool:
    """Whether a standard error of (about) 0 comes from labels without spread while items
    remain unlabelled: n labels that all agree (every answer correct, or the judge right on
    each) measure no error, they do not show that there is none, so such an estimate gets no
    interval (one of width 0 would read as exact and tell any two systems apart). The one
    rule of the human-only, judge-bias, prediction-powered and active estimates, and of the
    judge plan's predicted widths (`metrics_app/domain/judge_planning.py`). Every item
    labelled (n = total) is exact, not this."""
    return n < total and se <= NO_SPREAD


@dataclass(frozen=True)
class Estimate:
    method: str
    estimate: float | None
    low: float | None
    high: float | None
    se: float | None
    n_human: int
    n_items: int
    # PPI only: the power-tuning weight and the human-only sample size it is worth.
    lam: float | None = None
    effective_n: float | None = None
    # Why the estimate, or its interval, is missing (`too_few_labels`); and why `effective_n`
    # is (EVERY_ITEM_JUDGED, SAME_RESIDUAL). None where there is a number.
    undefined: str | None = None
    effective_n_undefined: str | None = None

    def as_dict(self) -> dict:
        return {k: _round(v) for k, v in asdict(self).items()}


def _round(value):
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 6)
    return value


def _fpc(n: int, total: int) -> float:
    """Finite-population correction of a variance: sampling n of `total` without replacement."""
    return max(0.0, 1.0 - n / total) if total > 0 else 1.0


def _normal(method, estimate, se, n, total, **extra) -> Estimate:
    """Estimate ± t(0.975, n − 1)·se: Student's quantile rather than 1.96 widens a hundred-label
    interval by 1.2%, which the residuals' heavy tails (mostly 0, sometimes ±1) need."""
    from scipy.stats import t

    quantile = float(t.ppf(0.975, max(1, n - 1)))
    return Estimate(method, float(estimate), float(estimate - quantile * se),
                    float(estimate + quantile * se), float(se), n, total, **extra)


def human_only(y: Sequence[float], *, n_items: int | None = None, n_resamples: int = 2000,
               seed: int = 0) -> Estimate:
    """Mean of the human labels with a 95% interval, the finite-population correction applied
    when `n_items` (the system's items) is given. Correct/incorrect labels get the Wilson score
    interval: the percentile bootstrap of a proportion under-covers at a hundred labels (92.6%
    in bench/efficiency.py's simulation, down to 92.0% for one system), the Wilson interval is
    the textbook remedy (Brown, Cai and DasGupta 2001). Scores get a percentile bootstrap."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    total = n_items if n_items is not None else n
    # Without `n_items` the labels are read as a sample of an unbounded population (new
    # questions like these): never all of it.
    population = total if n_items is not None else math.inf
    if n == 0:
        return Estimate("human", None, None, None, None, 0, total,
                        undefined=too_few_labels(0, ""))
    mean = float(y.mean())
    if n == 1:
        return Estimate("human", mean, None, None, None, 1, total,
                        undefined=too_few_labels(1, "an interval needs 2"))
    fpc = _fpc(n, total) if n_items is not None else 1.0
    if np.isin(y, (0.0, 1.0)).all():
        return _wilson(mean, n, total, fpc)
    if n > BOOTSTRAP_UP_TO:
        # Thousands of scores: the bootstrap distribution of their mean is normal to well
        # within its own Monte-Carlo error, and resampling 40,000 scores 2,000 times would
        # cost seconds on every report refresh.
        se = math.sqrt(fpc * float(y.var(ddof=1)) / n)
        if no_spread(se, n, population):
            return Estimate("human", mean, None, None, None, n, total, undefined=SAME_LABEL)
        return Estimate("human", mean, mean - Z95 * se, mean + Z95 * se, se, n, total)
    rng = np.random.default_rng(seed)
    # The resampled statistic is a mean, a function of the values alone: drawn from them
    # sorted, the interval does not depend on the order the items came in (their ids follow
    # the order a file was imported in).
    y = np.sort(y)
    # Means of resamples in chunks: 2,000 × n draws at once would be 16 MB at n = 1,000.
    means = np.concatenate([
        y[rng.integers(0, n, size=(min(500, n_resamples - start), n))].mean(axis=1)
        for start in range(0, n_resamples, 500)])
    shrink = math.sqrt(fpc)
    se = float(means.std(ddof=1)) * shrink
    if no_spread(se, n, population):
        return Estimate("human", mean, None, None, None, n, total, undefined=SAME_LABEL)
    low, high = np.percentile(means, [2.5, 97.5])
    return Estimate("human", mean, mean - (mean - float(low)) * shrink,
                    mean + (float(high) - mean) * shrink, se, n, total)


def _wilson(share: float, n: int, total: int, fpc: float) -> Estimate:
    """Wilson score interval of a proportion; the finite-population correction enters as a
    larger effective sample (n / fpc). The whole population judged: no uncertainty left."""
    if fpc <= 0:
        return Estimate("human", share, share, share, 0.0, n, total)
    m = n / fpc
    z2 = Z95**2
    center = (share + z2 / (2 * m)) / (1 + z2 / m)
    half = Z95 * math.sqrt(share * (1 - share) / m + z2 / (4 * m * m)) / (1 + z2 / m)
    return Estimate("human", share, max(0.0, center - half), min(1.0, center + half),
                    math.sqrt(share * (1 - share) / m), n, total)


def classical_se(y: Sequence[float], n_items: int) -> float:
    """Standard error of the human-only mean of n labels out of `n_items` (normal theory)."""
    y = np.asarray(y, dtype=float)
    if len(y) < 2:
        return math.nan
    return math.sqrt(_fpc(len(y), n_items) * y.var(ddof=1) / len(y))


def power_tuning_weight(y: np.ndarray, f: np.ndarray) -> float:
    """λ minimizing the variance of mean(λ·f over all items) + mean(y − λ·f over the sample)
    when the metric's mean over all items is known exactly (finite population): the slope of
    y on f, clipped to [0, 1] (0 = humans alone, 1 = plain PPI)."""
    if len(y) < 2:
        return 0.0
    var_f = float(f.var(ddof=1))
    if var_f <= 0:
        return 0.0
    cov = float(np.cov(y, f, ddof=1)[0, 1])
    return min(1.0, max(0.0, cov / var_f))


def prediction_powered(y: Sequence[float], f_labeled: Sequence[float],
                       f_all: Sequence[float], *, lam: float | None = None) -> Estimate:
    """PPI++ estimate of the mean of y over all items: λ·mean(f_all) + mean(y − λ·f_labeled),
    with a 95% normal interval and the finite-population correction. `f_all` is the metric on
    every item of the population (labelled ones included); `y`/`f_labeled` are aligned."""
    y = np.asarray(y, dtype=float)
    f = np.asarray(f_labeled, dtype=float)
    f_all = np.asarray(f_all, dtype=float)
    n, total = len(y), len(f_all)
    if n < 2 or total < n:
        return Estimate("ppi", None, None, None, None, n, total,
                        undefined=too_few_labels(n, PPI_NEEDS))
    lam = power_tuning_weight(y, f) if lam is None else lam
    residual = y - lam * f
    estimate = lam * float(f_all.mean()) + float(residual.mean())
    se = math.sqrt(_fpc(n, total) * residual.var(ddof=1) / n)
    if no_spread(se, n, total):
        if lam == 0 and np.isin(y, (0.0, 1.0)).all():
            # Weight 0: the estimate is the humans' share, whose interval is well defined
            # without spread (Wilson's, as `human_only` gives it): 10 of 10 correct is not
            # "no interval" here and [0.77, 1] there.
            return replace(_wilson(float(y.mean()), n, total, _fpc(n, total)),
                           method="ppi", lam=0.0, effective_n=float(n))
        return _unmeasured("ppi", estimate, n, total, lam=lam)
    classical = classical_se(y, total)
    effective = (n * classical**2 / se**2) if se > 0 and math.isfinite(classical) else None
    return _normal("ppi", estimate, se, n, total, lam=lam, effective_n=effective,
                   effective_n_undefined=_worth_undefined(se, n, total))


def _unmeasured(method: str, estimate: float, n: int, total: int, *, lam: float) -> Estimate:
    """A prediction-powered (or active) estimate whose labels show no error of the judge
    (`no_spread`): the point estimate, no interval and no effective n, saying why."""
    why = SAME_RESIDUAL if lam else SAME_LABEL  # λ = 0: the humans' labels alone
    return Estimate(method, float(estimate), None, None, None, n, total, lam=lam,
                    undefined=why, effective_n_undefined=why)


def _worth_undefined(se: float, n: int, total: int) -> str | None:
    """Why a prediction-powered estimate's effective n is None: a standard error of 0, every
    item being labelled (a sample without spread has no interval at all: `_unmeasured`)."""
    if se > 0:
        return None
    return EVERY_ITEM_JUDGED if n >= total else SAME_RESIDUAL


def superpopulation_ppi(y: Sequence[float], f_labeled: Sequence[float],
                        f_unlabeled: Sequence[float]) -> Estimate:
    """ppi-python's PPI++ interval (power-tuned λ) for the mean of the distribution the items
    come from: no finite-population correction, the unlabelled pool treated as a sample."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    y = np.asarray(y, dtype=float)
    f = np.asarray(f_labeled, dtype=float)
    f_unlabeled = np.asarray(f_unlabeled, dtype=float)
    if len(y) < 2 or len(f_unlabeled) < 1:
        return Estimate("ppi_superpopulation", None, None, None, None, len(y),
                        len(f_unlabeled))
    low, high = ppi_mean_ci(y, f, f_unlabeled, alpha=0.05)
    estimate = ppi_mean_pointestimate(y, f, f_unlabeled)
    low, high, estimate = (float(np.ravel(v)[0]) for v in (low, high, estimate))
    return Estimate("ppi_superpopulation", estimate, low, high, (high - low) / (2 * Z95),
                    len(y), len(f_unlabeled))


def routing_probabilities(p: Sequence[float], budget: float, *,
                          uniform_share: float = 0.3) -> np.ndarray:
    """Probabilities of sending each item to humans so that they sum to `budget`: proportional
    to the metric's uncertainty √(p(1−p)) (the residual's standard deviation when p is
    calibrated, which minimizes the estimate's variance), mixed with a uniform share so that no
    item is nearly impossible to draw (1/π weights stay bounded), and capped at 1.

    The uniform share, 0.3, was chosen on the EVOUNA-NQ answers alone (bench/efficiency.py's
    simulation, budgets 100–500): 0.1 and 0.2 under-covered (94.1%, 94.7%) at the same width,
    0.5 widened the intervals by 2%."""
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    total = len(p)
    if total == 0 or budget <= 0:
        return np.zeros(total)
    budget = min(float(budget), float(total))
    uncertainty = np.sqrt(p * (1 - p))
    if uncertainty.sum() <= 0:
        uncertainty = np.ones(total)
    weight = (1 - uniform_share) * uncertainty / uncertainty.sum() + uniform_share / total
    pi = np.minimum(1.0, budget * weight)
    # Capping at 1 loses budget; hand it to the uncapped items (a few passes settle it).
    for _ in range(20):
        missing = budget - pi.sum()
        free = pi < 1.0
        if missing <= 1e-9 or not free.any():
            break
        pi[free] = np.minimum(1.0, pi[free] + missing * weight[free] / weight[free].sum())
    return pi


def active_estimate(y_labeled: Sequence[float], labeled: Sequence[int], f_all: Sequence[float],
                    pi: Sequence[float], *, lam: float | None = None) -> Estimate:
    """Active inference (Zrnic & Candès 2024) for the mean of y over all items, each item
    having been labelled independently with probability π_i (Poisson sampling):
    (1/N)·Σ[λ·f_i + ξ_i·(y_i − λ·f_i)/π_i], with the Horvitz–Thompson variance estimate and λ
    chosen to minimize it. `labeled` are the indices (into f_all / pi) of the labelled items."""
    f_all = np.asarray(f_all, dtype=float)
    pi = np.asarray(pi, dtype=float)
    index = np.asarray(labeled, dtype=int)
    y = np.asarray(y_labeled, dtype=float)
    total, n = len(f_all), len(index)
    if n < 2:
        return Estimate("active", None, None, None, None, n, total,
                        undefined=too_few_labels(n, PPI_NEEDS))
    p, f = pi[index], f_all[index]
    if np.any(p <= 0):
        raise ValueError("a labelled item has sampling probability 0")
    # Var(estimate) ≈ (1/N²)·Σ_labeled (1−π)/π²·(y − λf)²: quadratic in λ.
    w = (1 - p) / p**2
    if lam is None:
        denominator = float((w * f * f).sum())
        lam = min(1.0, max(0.0, float((w * y * f).sum()) / denominator)) if denominator > 0 else 0.0
    residual = y - lam * f
    estimate = lam * float(f_all.mean()) + float((residual / p).sum()) / total
    se = math.sqrt(float((w * residual**2).sum())) / total
    if no_spread(se, n, total):
        return _unmeasured("active", estimate, n, total, lam=lam)
    # What the same number of labels drawn at random (humans alone) would give: the
    # population variance of y estimated with the same 1/π weights.
    share = (1 / p) / (1 / p).sum()
    var_y = float((share * y**2).sum() - ((share * y).sum()) ** 2)
    classical = _fpc(n, total) * var_y / n
    effective = n * classical / se**2 if se > 0 and classical > 0 else None
    return _normal("active", estimate, se, n, total, lam=lam, effective_n=effective,
                   effective_n_undefined=_worth_undefined(se, n, total))


def judge_bias_undefined(n_both: int, n_labelled: int) -> str | None:
    """Why the judge's bias cannot be measured (None: it can) from `n_both` items the judge and
    the humans both judged, of `n_labelled` items with a human label: fewer than 2 because the
    judge scored other items than the humans is said so, not "no judgments that count yet"."""
    if n_both >= 2:
        return None
    if n_labelled > n_both:
        if n_labelled == 1:
            return "the judge did not score the 1 human-labelled item; its bias needs 2"
        scored = "none" if n_both == 0 else str(n_both)
        return (f"the judge scored {scored} of the {n_labelled} human-labelled items; its "
                "bias needs 2")
    return too_few_labels(n_both, "the judge's bias needs 2")


def metric_only(f_all: Sequence[float], f_labeled: Sequence[float], y: Sequence[float], *,
                n_labelled: int = 0, n_resamples: int = 2000, seed: int = 0) -> dict:
    """The metric's own estimate (mean of its verdicts over every item), and its bias against
    the humans on the items both judged (metric − human, with a bootstrap 95% interval).
    `n_labelled`: the items with a human label, scored by the judge or not (why the bias is
    undefined: `judge_bias_undefined`)."""
    f_all = np.asarray(f_all, dtype=float)
    f = np.asarray(f_labeled, dtype=float)
    y = np.asarray(y, dtype=float)
    out = {"method": "metric", "estimate": _round(float(f_all.mean())) if len(f_all) else None,
           "n_items": len(f_all), "n_human": len(y), "bias": None, "bias_low": None,
           "bias_high": None, "bias_undefined": judge_bias_undefined(len(y), n_labelled)}
    if len(y) >= 2:
        diff = np.sort(f - y)  # sorted: the interval does not follow the items' order
        rng = np.random.default_rng(seed)
        means = diff[rng.integers(0, len(diff), size=(n_resamples, len(diff)))].mean(axis=1)
        out["bias"] = _round(float(diff.mean()))
        if no_spread(float(diff.std()), len(diff), len(f_all)):
            out["bias_undefined"] = SAME_BIAS
        else:
            low, high = np.percentile(means, [2.5, 97.5])
            out.update(bias_low=_round(float(low)), bias_high=_round(float(high)))
    return out


def difference(a: Estimate, b: Estimate, *, bounds: tuple[float, float] | None = None,
               names: tuple[str, str] = ("a", "b")) -> dict:
    """a − b for estimates from independent samples (different systems' items), with a 95%
    interval and the human judgments still needed, at the same method and the current
    difference, for the interval to exclude zero.

    The interval recovers each side's own interval (MOVER, Zou and Donner 2008): with Wilson
    intervals of two shares it is Newcombe's hybrid score interval, which stays inside
    [−1, 1], and with symmetric normal intervals it is the usual δ ± z·√(se_a² + se_b²).
    `bounds` (for shares: (−1, 1)) clips what remains. Systems answering the same questions
    err together, so treating them as independent makes the interval wider than a paired one,
    never narrower."""
    if a.estimate is None or b.estimate is None or a.se is None or b.se is None:
        # Why: the first side's own reason (a single label, none), named.
        side, why = next((name, e.undefined) for name, e in zip(names, (a, b), strict=True)
                         if e.estimate is None or e.se is None)
        return {"method": a.method, "difference": None, "low": None, "high": None,
                "separated": None, "more_judgments_needed": None,
                "undefined": f"{side}: {why}" if why else None}
    delta = a.estimate - b.estimate
    se = math.sqrt(a.se**2 + b.se**2)
    if None not in (a.low, a.high, b.low, b.high):
        low = delta - math.hypot(a.estimate - a.low, b.high - b.estimate)
        high = delta + math.hypot(a.high - a.estimate, b.estimate - b.low)
    else:
        low, high = delta - Z95 * se, delta + Z95 * se
    if bounds is not None:
        low, high = max(bounds[0], low), min(bounds[1], high)
    separated = low > 0 or high < 0
    n = a.n_human + b.n_human
    more = None
    if separated:
        more = 0
    elif abs(delta) > 1e-12 and se > 0:
        # The standard error shrinks as 1/√n (ignoring the finite-population correction, so
        # this errs on the side of asking for more): n·(z·se/|Δ|)² judgments in all.
        more = math.ceil(n * (Z95 * se / abs(delta)) ** 2) - n
    return {"method": a.method, "difference": _round(delta), "low": _round(low),
            "high": _round(high), "se": _round(se), "separated": separated,
            "more_judgments_needed": more}
