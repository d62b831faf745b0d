"""Pure functions of metric evaluation: correlations, bootstrap, minimal pairs, A/B accuracy."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau, pearsonr, spearmanr

from metrics_app.domain import meta_evaluation
from metrics_app.domain.text_match import is_exact_match


def test_correlations_match_scipy_and_intervals_cover_the_estimate():
    rng = np.random.default_rng(1)
    human = rng.integers(1, 6, 300).astype(float)
    metric = human + rng.normal(0, 1.5, 300)
    result = meta_evaluation.correlations(metric, human, n_resamples=300, kendall_resamples=100)
    assert result["n"] == 300
    assert result["pearson"] == pytest.approx(pearsonr(metric, human).statistic)
    assert result["spearman"] == pytest.approx(spearmanr(metric, human).statistic)
    assert result["kendall"] == pytest.approx(kendalltau(metric, human).statistic)
    for name in meta_evaluation.CORRELATIONS:
        low, high = result["ci"][name]
        assert low < result[name] < high
        assert high - low < 0.3


def test_bootstrap_ranks_from_counts_equal_spearman_of_the_explicit_resample():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 4, 50).astype(float)   # heavy ties on both sides
    y = rng.integers(1, 6, 50).astype(float)
    idx = rng.integers(0, 50, 50)
    counts = np.bincount(idx, minlength=50)[None, :].astype(float)
    rx = meta_evaluation._resample_ranks(x, counts)
    ry = meta_evaluation._resample_ranks(y, counts)
    ours = meta_evaluation._weighted_pearson(rx, ry, counts)[0]
    assert ours == pytest.approx(spearmanr(x[idx], y[idx]).statistic)
    assert meta_evaluation._weighted_pearson(x, y, counts)[0] == pytest.approx(
        pearsonr(x[idx], y[idx]).statistic)


def test_constant_or_tiny_inputs_give_none():
    assert meta_evaluation.correlations([1, 1, 1, 1], [1, 2, 3, 4])["pearson"] is None
    assert meta_evaluation.correlations([1, 2], [1, 2])["spearman"] is None
    with pytest.raises(ValueError):
        meta_evaluation.correlations([1, 2, 3], [1, 2])


def test_minimal_pair_accuracy_counts_ties_half_and_skips_missing():
    result = meta_evaluation.minimal_pair_accuracy([(0.9, 0.1), (0.5, 0.5), (0.1, 0.9), (None, 1)])
    assert result == {"accuracy": pytest.approx((1 + 0.5) / 3), "n": 3, "ties": 1, "wins": 1}
    assert meta_evaluation.minimal_pair_accuracy([])["accuracy"] is None


def test_minimal_pairs_are_complete_pairs_with_the_better_candidate_first():
    items = [
        {"id": 1, "metadata": {"minimal_pair": "p", "pair_role": 1}, "gold": {"score": 4}},
        {"id": 2, "metadata": {"minimal_pair": "p", "pair_role": 2}, "gold": {"score": 2}},
        # stored the other way round: the gold scores decide
        {"id": 3, "metadata": {"minimal_pair": "q", "pair_role": 1}, "gold": {"score": 1}},
        {"id": 4, "metadata": {"minimal_pair": "q", "pair_role": "2"}, "gold": {"score": 5}},
        # no gold: role 1 is the better one
        {"id": 5, "metadata": {"minimal_pair": 7, "pair_role": 2}, "gold": None},
        {"id": 6, "metadata": {"minimal_pair": 7, "pair_role": 1}, "gold": None},
        # incomplete, unknown role, not a pair
        {"id": 7, "metadata": {"minimal_pair": "r", "pair_role": 1}, "gold": None},
        {"id": 8, "metadata": {"minimal_pair": "s", "pair_role": "x"}, "gold": None},
        {"id": 9, "metadata": {}, "gold": {"score": 3}},
    ]
    pairs = [(key, better["id"], worse["id"])
             for key, better, worse in meta_evaluation.minimal_pairs(items)]
    assert pairs == [("p", 1, 2), ("q", 4, 3), ("7", 6, 5)]


def test_training_pairs_count_a_tie_half_like_the_metric_report():
    """One definition: LERC validation and promotion measure pairwise accuracy as the metric
    report does (a tie counts half, whichever answer was preferred)."""
    from metrics_app.lerc.train import pairwise_accuracy_of_labels

    assert pairwise_accuracy_of_labels([(0.3, 0.3)], [1.0]) == 0.5
    assert pairwise_accuracy_of_labels([(0.3, 0.3)], [0.0]) == 0.5
    assert pairwise_accuracy_of_labels([(0.9, 0.1), (0.2, 0.8), (0.5, 0.5)],
                                       [1.0, 1.0, 0.5]) == 0.5  # no preference: left out


def test_pairwise_and_baselines():
    comparisons = [(10, 5, "A"), (3, 8, "A"), (4, 4, "B"), (1, 2, "B"), (None, 2, "A")]
    assert meta_evaluation.pairwise_accuracy(comparisons) == {
        "accuracy": pytest.approx((2 + 0.5) / 4), "n": 4, "ties": 1}
    human = meta_evaluation.always_human_accuracy(
        [("human", "model", "A"), ("model", "human", "A"), ("human", "human", "A")])
    assert human == {"accuracy": 0.5, "n": 2, "ties": 0}   # H/H does not count
    assert meta_evaluation.random_accuracy(7)["accuracy"] == 0.5


@pytest.mark.parametrize("candidate,references,exact,numbers", [
    ("The Cat!", ["cat"], True, False),
    ("12", ["13"], False, True),
    ("1,200.", ["1300"], False, True),
    ("12 cats", ["13"], False, False),
    ("twelve", ["12"], False, False),
])
def test_study_filters(candidate, references, exact, numbers):
    assert is_exact_match(candidate, references) is exact
    assert meta_evaluation.is_number_pair(candidate, references) is numbers
