"""Pure functions of metric evaluation: correlations, bootstrap, minimal pairs, A/B accuracy."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau, pearsonr, spearmanr

from core.text_match import is_exact_match, is_number_pair
from metrics_app.domain import meta_evaluation


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


@pytest.mark.parametrize("x_levels,y_levels", [(3, 2), (50, 5), (300, 300), (1, 4)])
def test_resampled_kendall_from_contingency_tables_equals_scipy_on_the_expanded_items(
        x_levels, y_levels):
    rng = np.random.default_rng(x_levels)
    x = rng.integers(0, x_levels, 300).astype(float)
    y = rng.integers(0, y_levels, 300).astype(float)
    (xc, yc), freq = meta_evaluation.distinct_rows(x, y)
    counts = meta_evaluation.resample_row_counts(rng, freq, 15)
    expected = [kendalltau(np.repeat(xc, row.astype(int)), np.repeat(yc, row.astype(int)))
                .statistic for row in counts]
    np.testing.assert_allclose(meta_evaluation._resampled_kendall(xc, yc, counts), expected,
                               atol=1e-12)


def test_distinct_rows_keep_every_item_and_resamples_draw_n_items():
    x = np.array([1.0, 1.0, 2.0, 2.0, 2.0, 3.0])
    y = np.array([5.0, 5.0, 1.0, 5.0, 1.0, 1.0])
    (xc, yc), freq = meta_evaluation.distinct_rows(x, y)
    assert sorted(zip(xc.tolist(), yc.tolist(), freq.tolist(), strict=True)) == [
        (1.0, 5.0, 2), (2.0, 1.0, 2), (2.0, 5.0, 1), (3.0, 1.0, 1)]
    counts = meta_evaluation.resample_row_counts(np.random.default_rng(0), freq, 4000)
    assert (counts.sum(axis=1) == 6).all()
    # Each row is drawn in proportion to how many items share it.
    np.testing.assert_allclose(counts.mean(axis=0), freq, atol=0.1)
    # Few items per row (the items themselves are drawn) and many (multinomial over rows):
    # both give the resampled items' multiplicities, with the binomial variance per row.
    for n_rows, per_row in ((500, 1), (5, 400)):
        freq = np.full(n_rows, per_row)
        counts = meta_evaluation.resample_row_counts(np.random.default_rng(1), freq, 3000)
        n = n_rows * per_row
        assert (counts.sum(axis=1) == n).all()
        share = per_row / n
        np.testing.assert_allclose(counts.var(axis=0).mean(), n * share * (1 - share),
                                   rtol=0.1)


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
    from metrics_app.lerc.validation import pairwise_accuracy_of_labels

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
    assert is_number_pair(candidate, references) is numbers


# --- correct / incorrect, and comparing two metrics ----------------------------------------------

def test_decision_statistics_match_scikit_learn_and_intervals_cover_them():
    from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, roc_auc_score

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 500)
    scores = labels * 0.4 + rng.normal(0, 0.3, 500)
    result = meta_evaluation.decision_statistics(scores, labels, 0.2, n_resamples=300)
    predicted = (scores >= 0.2).astype(int)
    assert result["accuracy"] == pytest.approx(accuracy_score(labels, predicted))
    assert result["f1"] == pytest.approx(f1_score(labels, predicted))
    assert result["kappa"] == pytest.approx(cohen_kappa_score(labels, predicted))
    assert result["roc_auc"] == pytest.approx(roc_auc_score(labels, scores))
    for name in ("accuracy", "f1", "kappa", "roc_auc"):
        low, high = result["ci"][name]
        assert low < result[name] < high and high - low < 0.25, name
    # One class only: κ is 0 (as scikit-learn says), AUC undefined; nothing divides by zero.
    same = meta_evaluation.decision_statistics([0.1, 0.9, 0.5], [1, 1, 1], 0.5, n_resamples=20)
    assert same["accuracy"] == pytest.approx(2 / 3) and same["roc_auc"] is None
    assert same["kappa"] == pytest.approx(cohen_kappa_score([1, 1, 1], [0, 1, 1]))


@pytest.mark.reliability
def test_kappa_of_one_label_on_both_sides_is_undefined_not_zero():
    """Every human and the judge say "correct" for every item: chance agreement is 1 and κ is
    0/0 (scikit-learn: NaN; the annotator pairs' κ: None), never "0.000 [0.000, 0.000]" (the
    human ceiling of a project whose judgments all give one score read so)."""
    import warnings

    from sklearn.metrics import cohen_kappa_score

    from metrics_app.domain.judge_alignment import human_ceiling

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(cohen_kappa_score([1, 1, 1], [1, 1, 1]))
    both = meta_evaluation.decision_statistics([0.9, 0.8, 0.7], [1, 1, 1], 0.5, n_resamples=50)
    assert both["accuracy"] == 1.0 and both["kappa"] is None
    assert both["ci"]["kappa"] == [None, None]
    ceiling = human_ceiling({1: [1, 1, 1], 2: [1, 1, 1], 3: [1, 1]}, n_resamples=50)
    assert ceiling["accuracy"] == 1.0 and ceiling["kappa"] is None
    assert ceiling["ci"]["kappa"] == [None, None]


def test_validation_half_is_stable_and_about_half():
    keys = [f"question {n}" for n in range(2000)]
    chosen = [meta_evaluation.is_validation_key(key) for key in keys]
    assert 0.45 < sum(chosen) / len(keys) < 0.55
    assert chosen == [meta_evaluation.is_validation_key(key) for key in keys]
    assert meta_evaluation.is_validation_key("Who?") == meta_evaluation.is_validation_key(" who? ")


def _three(rng, n, rho_a, rho_b):
    human = rng.normal(size=n)
    a = rho_a * human + np.sqrt(1 - rho_a**2) * rng.normal(size=n)
    b = rho_b * human + np.sqrt(1 - rho_b**2) * rng.normal(size=n)
    return human, a, b


def test_williams_test_holds_its_size_and_finds_a_real_difference():
    """Under the null (both metrics equally correlated with the humans) the one-sided test
    rejects at 5% about 5% of the time; with a real difference nearly always. Swapping the
    metrics negates t."""
    rng = np.random.default_rng(7)

    def p_value(human, a, b):
        r_ah, r_bh, r_ab = (pearsonr(x, y).statistic for x, y in ((a, human), (b, human), (a, b)))
        return meta_evaluation.williams_test(r_ah, r_bh, r_ab, len(human))

    null = [p_value(*_three(rng, 200, 0.5, 0.5))["p_one_sided"] for _ in range(400)]
    assert 0.02 < np.mean(np.array(null) < 0.05) < 0.09
    real = [p_value(*_three(rng, 200, 0.7, 0.4))["p_one_sided"] for _ in range(50)]
    assert np.mean(np.array(real) < 0.05) > 0.95
    forward = meta_evaluation.williams_test(0.6, 0.4, 0.5, 100)
    backward = meta_evaluation.williams_test(0.4, 0.6, 0.5, 100)
    assert forward["t"] == pytest.approx(-backward["t"]) and forward["df"] == 97
    assert forward["p_two_sided"] == pytest.approx(backward["p_two_sided"])
    assert forward["p_one_sided"] + backward["p_one_sided"] == pytest.approx(1.0)
    assert meta_evaluation.williams_test(0.5, 0.5, 0.3, 50)["p_two_sided"] == pytest.approx(1.0)


def test_paired_bootstrap_difference_of_correlations():
    rng = np.random.default_rng(11)
    human, a, b = _three(rng, 300, 0.7, 0.4)
    result = meta_evaluation.paired_bootstrap_pearson_difference(a, b, human, n_resamples=500)
    expected = pearsonr(a, human).statistic - pearsonr(b, human).statistic
    assert result["difference"] == pytest.approx(expected)
    low, high = result["ci"]
    assert 0 < low < expected < high and result["p_not_better"] < 0.01
    tie = meta_evaluation.paired_bootstrap_pearson_difference(a, a, human, n_resamples=100)
    assert tie["difference"] == 0 and tie["p_not_better"] == 1.0


def test_weighted_auc_of_resamples_equals_scikit_learn_on_the_resampled_items():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(5)
    labels = rng.integers(0, 2, 200)
    scores = np.round(labels * 0.3 + rng.normal(0, 0.3, 200), 1)   # many ties
    rows = [rng.integers(0, 200, 200) for _ in range(5)]
    counts = np.array([np.bincount(r, minlength=200) for r in rows], dtype=float)
    expected = [roc_auc_score(labels[r], scores[r]) for r in rows]
    assert meta_evaluation._weighted_auc(scores, labels, counts) == pytest.approx(expected)


def test_weighted_pearson_fast_path_equals_the_general_one():
    rng = np.random.default_rng(9)
    x, y = rng.normal(5, 2, 300), rng.normal(-3, 1, 300)
    counts = np.array([np.bincount(rng.integers(0, 300, 300), minlength=300) for _ in range(7)],
                      dtype=float)
    general = meta_evaluation._weighted_pearson(np.tile(x, (7, 1)), np.tile(y, (7, 1)), counts)
    assert meta_evaluation._weighted_pearson(x, y, counts) == pytest.approx(general, abs=1e-12)


def test_paired_bootstraps_of_several_metrics_share_the_resamples():
    rng = np.random.default_rng(5)
    human = rng.integers(1, 6, 400).astype(float)
    metrics = {"good": human + rng.normal(0, 1, 400), "fair": human + rng.normal(0, 2, 400),
               "noise": rng.normal(0, 1, 400)}
    pairs = [("good", "fair"), ("fair", "good"), ("good", "noise")]
    results = meta_evaluation.paired_bootstrap_pearson_differences(metrics, human, pairs,
                                                                   n_resamples=400)
    for a, b in pairs:
        expected = pearsonr(metrics[a], human).statistic - pearsonr(metrics[b], human).statistic
        assert results[(a, b)]["difference"] == pytest.approx(expected)
    # The same resamples for every metric: swapping a pair mirrors its interval exactly.
    low, high = results[("good", "fair")]["ci"]
    assert results[("fair", "good")]["ci"] == pytest.approx([-high, -low])
    assert low > 0 and results[("good", "noise")]["p_not_better"] == 0.0
    single = meta_evaluation.paired_bootstrap_pearson_difference(
        metrics["good"], metrics["fair"], human, n_resamples=400)
    assert single["ci"] == pytest.approx([low, high])


def test_bootstrap_intervals_of_few_items_have_both_bounds_inside_minus_one_and_one():
    """Five items, four of one human score: many resamples hold one distinct value, whose
    0/0 (or rounding noise / 0) once made the lower bound infinite, shown as "[, -0.44]"."""
    result = meta_evaluation.correlations([0.176, 0.863, 0.541, 0.3, 0.423], [3, 1, 1, 1, 1])
    for name, (low, high) in result["ci"].items():
        assert low is not None and high is not None, name
        assert -1.0 <= low <= result[name] <= high <= 1.0, name


def test_an_interval_with_a_missing_bound_is_spelled_out():
    from metrics_app.templatetags.metrics_dashboard import interval

    assert interval([-0.0742, 0.5]) == "[-0.074, 0.500]"
    assert interval([-1.0, None], 2) == "no interval (too few distinct values)"
    assert interval([None, None]) == "" and interval(None) == ""
