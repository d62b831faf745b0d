"""System-level estimates: human alone, metric alone, prediction-powered and active inference.

The finite population is a made-up system of 3,000 answers whose correctness the "metric"
predicts well but with a bias (it calls too many answers correct), so the metric alone is off
while PPI and active inference must still cover the true accuracy."""
from __future__ import annotations

import numpy as np
import pytest

from metrics_app.domain import estimates


def population(seed: int = 0, size: int = 3000):
    rng = np.random.default_rng(seed)
    # The metric's P(correct): most answers clearly right or wrong, some unsure.
    p = np.clip(rng.beta(0.6, 0.4, size=size), 0.001, 0.999)
    y = (rng.random(size) < p).astype(float)  # calibrated: y ~ Bernoulli(p)
    biased = np.clip(p + 0.15, 0, 1)  # an over-generous metric
    return y, p, biased


def test_human_only_interval_contains_the_mean_and_narrows_with_the_population_correction():
    y = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1] * 10, dtype=float)
    alone = estimates.human_only(y)
    assert alone.estimate == pytest.approx(0.7)
    assert alone.low < 0.7 < alone.high
    # 100 of 120 items judged: far less left to guess than 100 of 100,000.
    nearly_all = estimates.human_only(y, n_items=120)
    few = estimates.human_only(y, n_items=100_000)
    assert nearly_all.high - nearly_all.low < 0.5 * (few.high - few.low)
    assert estimates.human_only([], n_items=5).estimate is None
    assert estimates.human_only([1.0], n_items=5).low is None


def test_a_perfect_metric_gives_the_exact_value_and_a_useless_one_falls_back_to_humans():
    y, p, _ = population()
    rng = np.random.default_rng(1)
    sample = rng.choice(len(y), size=200, replace=False)
    exact = estimates.prediction_powered(y[sample], y[sample], y)
    assert exact.estimate == pytest.approx(y.mean())
    # Right on all 200 labels does not show it right on the other 2,800: no interval of
    # width 0 (tests/metrics_app/reports/test_estimates_without_spread.py).
    assert exact.se is None and exact.undefined == estimates.SAME_RESIDUAL
    noise = rng.random(len(y))
    useless = estimates.prediction_powered(y[sample], noise[sample], noise)
    assert useless.lam < 0.2  # power tuning turns the noise off …
    human = estimates.human_only(y[sample], n_items=len(y))
    assert abs(useless.estimate - human.estimate) < 0.03  # … and humans carry the estimate


def test_ppi_covers_the_true_accuracy_although_the_metric_alone_is_biased():
    y, _p, biased = population()
    truth = y.mean()
    rng = np.random.default_rng(2)
    covered, widths, human_widths = 0, [], []
    for rep in range(300):
        sample = rng.choice(len(y), size=200, replace=False)
        ppi = estimates.prediction_powered(y[sample], biased[sample], biased)
        human = estimates.human_only(y[sample], n_items=len(y), n_resamples=400, seed=rep)
        covered += ppi.low <= truth <= ppi.high
        widths.append(ppi.high - ppi.low)
        human_widths.append(human.high - human.low)
    assert 0.91 <= covered / 300 <= 0.99
    assert np.mean(widths) < 0.8 * np.mean(human_widths)
    metric = estimates.metric_only(biased, biased[:300], y[:300])
    assert metric["estimate"] - truth > 0.1  # the metric alone is badly off …
    assert metric["bias_low"] > 0.05  # … and its measured bias says so


def test_active_routing_is_unbiased_and_narrower_than_random_sampling():
    y, p, _ = population()
    truth = y.mean()
    pi = estimates.routing_probabilities(p, 200)
    assert pi.sum() == pytest.approx(200, rel=1e-6)
    assert pi.min() > 0 and pi.max() <= 1
    # The unsure items are the likelier ones to reach humans.
    assert pi[np.abs(p - 0.5) < 0.1].mean() > 2 * pi[np.abs(p - 0.5) > 0.45].mean()
    rng = np.random.default_rng(3)
    values, covered, active_widths, random_widths = [], 0, [], []
    for _ in range(300):
        drawn = np.flatnonzero(rng.random(len(y)) < pi)
        active = estimates.active_estimate(y[drawn], drawn, p, pi)
        values.append(active.estimate)
        covered += active.low <= truth <= active.high
        active_widths.append(active.high - active.low)
        sample = rng.choice(len(y), size=200, replace=False)
        plain = estimates.prediction_powered(y[sample], p[sample], p)
        random_widths.append(plain.high - plain.low)
    assert abs(np.mean(values) - truth) < 0.005
    assert 0.91 <= covered / 300 <= 0.99
    assert np.mean(active_widths) < 0.9 * np.mean(random_widths)
    with pytest.raises(ValueError, match="probability 0"):
        estimates.active_estimate([1.0, 0.0], [0, 1], p[:2], np.array([0.0, 0.5]))


def test_routing_probabilities_hand_lost_budget_to_the_uncapped_items():
    p = np.array([0.5] * 10 + [0.0] * 90)
    pi = estimates.routing_probabilities(p, 30)
    assert pi.sum() == pytest.approx(30)
    assert np.all(pi[:10] == 1.0)  # all unsure items go to humans
    assert estimates.routing_probabilities([], 10).size == 0


def test_finite_ppi_agrees_with_ppi_python_when_the_population_is_huge():
    rng = np.random.default_rng(4)
    size = 200_000
    p = rng.random(size)
    y = (rng.random(size) < p).astype(float)
    sample = rng.choice(size, size=300, replace=False)
    ours = estimates.prediction_powered(y[sample], p[sample], p)
    theirs = estimates.superpopulation_ppi(y[sample], p[sample], p)
    assert ours.estimate == pytest.approx(theirs.estimate, abs=0.01)
    assert ours.high - ours.low == pytest.approx(theirs.high - theirs.low, rel=0.05)


def test_difference_says_whether_two_systems_are_told_apart_and_how_many_more_judgments():
    a = estimates.Estimate("ppi", 0.80, 0.76, 0.84, 0.02, 200, 4000)
    b = estimates.Estimate("ppi", 0.70, 0.66, 0.74, 0.02, 200, 4000)
    apart = estimates.difference(a, b)
    assert apart["difference"] == pytest.approx(0.10)
    assert apart["separated"] is True and apart["more_judgments_needed"] == 0
    close = estimates.difference(a, estimates.Estimate("ppi", 0.78, 0.74, 0.82, 0.02, 200, 4000))
    assert close["separated"] is False
    # se √2·0.02 = 0.0283 against a 0.02 difference: (1.96·0.0283/0.02)² = 7.7 × 400 judgments.
    assert close["more_judgments_needed"] == pytest.approx(7.68 * 400 - 400, rel=0.01)
    tie = estimates.difference(a, a)
    assert tie["separated"] is False and tie["more_judgments_needed"] is None


def test_thousands_of_scores_get_the_normal_interval_the_bootstrap_would_give():
    rng = np.random.default_rng(6)
    scores = rng.integers(1, 6, size=5000).astype(float)
    many = estimates.human_only(scores)
    half = 1.959964 * scores.std(ddof=1) / np.sqrt(5000)
    assert many.high - many.estimate == pytest.approx(half)
    few = estimates.human_only(scores[:1500], seed=1)  # bootstrapped
    assert few.high - few.low == pytest.approx(
        2 * 1.959964 * scores[:1500].std(ddof=1) / np.sqrt(1500), rel=0.1)


def test_a_difference_of_two_shares_never_leaves_plus_minus_100_points():
    """Two systems judged on two items each (2 of 2 right against 1 of 2): the normal interval
    ran to +119 points; the interval built from the two Wilson intervals stays inside ±1 and
    still contains the difference."""
    a = estimates.human_only([1.0, 1.0])
    b = estimates.human_only([1.0, 0.0])
    result = estimates.difference(a, b, bounds=(-1.0, 1.0))
    assert result["difference"] == pytest.approx(0.5)
    assert -1.0 <= result["low"] < 0.5 < result["high"] <= 1.0
    assert result["separated"] is False
    # A symmetric interval on each side gives back the usual δ ± z·√(se_a² + se_b²).
    c = estimates.Estimate("ppi", 0.8, 0.8 - 1.959964 * 0.03, 0.8 + 1.959964 * 0.03, 0.03, 9, 9)
    d = estimates.Estimate("ppi", 0.6, 0.6 - 1.959964 * 0.04, 0.6 + 1.959964 * 0.04, 0.04, 9, 9)
    normal = estimates.difference(c, d)
    assert normal["low"] == pytest.approx(0.2 - 1.959964 * 0.05, abs=1e-6)
    assert normal["high"] == pytest.approx(0.2 + 1.959964 * 0.05, abs=1e-6)
    # A bound clips what a wide interval would still overstep.
    wide = estimates.Estimate("ppi", 0.9, 0.3, 1.5, 0.3, 3, 9)
    narrow = estimates.Estimate("ppi", 0.1, -0.5, 0.7, 0.3, 3, 9)
    assert estimates.difference(wide, narrow, bounds=(-1.0, 1.0))["high"] == 1.0


@pytest.mark.reliability
def test_bootstrap_intervals_do_not_depend_on_the_order_of_the_items():
    """The human-only interval of mean scores (and a metric's bias interval) resampled the
    values in the order the items came in, their ids' order, which follows the import order:
    600 real EVOUNA answers imported in another row order moved the upper bound of chatgpt's
    mean score ("new questions" interval, the dashboard's estimates) from 4.567 to 4.534."""
    rng = np.random.default_rng(8)
    scores = rng.integers(1, 6, 120).astype(float)
    verdicts = (rng.random(120) < 0.7).astype(float)
    labels = (scores >= 3).astype(float)
    shuffled = rng.permutation(120)
    human_only, metric_only = estimates.human_only, estimates.metric_only
    assert human_only(scores).as_dict() == human_only(scores[shuffled]).as_dict()
    assert human_only(scores, n_items=300).as_dict() == \
        human_only(scores[shuffled], n_items=300).as_dict()
    assert metric_only(verdicts, verdicts, labels) == metric_only(
        verdicts[shuffled], verdicts[shuffled], labels[shuffled])


def test_a_prediction_powered_estimate_of_weight_zero_keeps_the_humans_interval():
    """Weight 0 is the humans' share alone: 10 of 10 labels correct of 50 items has Wilson's
    interval there as in the human-only estimate, not "no interval" (labels without spread
    remove only an interval the judge's error would give)."""
    from metrics_app.domain.estimates import human_only, prediction_powered

    f_all = np.linspace(0.0, 1.0, 50)
    ppi = prediction_powered(np.ones(10), f_all[:10], f_all, lam=0.0)
    human = human_only(np.ones(10), n_items=50)
    assert (ppi.low, ppi.high) == (human.low, human.high) and ppi.low < 1.0
    assert ppi.undefined is None and ppi.lam == 0.0 and ppi.effective_n == 10.0


def test_why_the_judges_bias_is_undefined_names_labels_the_judge_did_not_score():
    """Fewer than 2 items judged by both: said as the humans' count when the judge scored
    every labelled item, and as the judge's when it scored other items than the humans."""
    assert estimates.judge_bias_undefined(2, 10) is None
    assert estimates.judge_bias_undefined(0, 0) == estimates.NO_JUDGMENTS
    assert estimates.judge_bias_undefined(1, 1) == (
        "1 item with a human label; the judge's bias needs 2")
    assert estimates.judge_bias_undefined(0, 10) == (
        "the judge scored none of the 10 human-labelled items; its bias needs 2")
    assert estimates.judge_bias_undefined(1, 4) == (
        "the judge scored 1 of the 4 human-labelled items; its bias needs 2")
    assert estimates.judge_bias_undefined(0, 1) == (
        "the judge did not score the 1 human-labelled item; its bias needs 2")
