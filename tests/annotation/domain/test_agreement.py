"""Agreement statistics against hand-computed examples and the reference packages."""
from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa, to_table
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from annotation.domain import agreement as ag

nan = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
# 12 units, values 1–5 with missing data. Published: nominal .743, ordinal .815, interval .849.
KRIPPENDORFF_2011 = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
])

# Fleiss (1971) worked example as given on Wikipedia: 10 subjects, 14 raters, 5 categories,
# κ = 0.210.
FLEISS_TABLE = np.array([
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
])


@pytest.mark.parametrize("level,published", [("nominal", 0.743), ("ordinal", 0.815),
                                             ("interval", 0.849)])
def test_krippendorff_published_example(level, published):
    assert ag.krippendorff_alpha(KRIPPENDORFF_2011, level) == pytest.approx(published, abs=5e-4)
    counts, domain = ag.value_counts_from_matrix(KRIPPENDORFF_2011)
    # Unit 12 has a single value: it is kept in the counts but cannot be paired.
    assert counts[11].sum() == 1
    assert ag.krippendorff_alpha_from_counts(counts, domain, level) == pytest.approx(
        krippendorff.alpha(KRIPPENDORFF_2011, level_of_measurement=level)
    )


def test_krippendorff_hand_computed_two_coders():
    # Units (1,1) (1,2) (2,2) (2,2): o11=2, o12=o21=1, o22=4; n1=3, n2=5, n=8.
    # α = 1 − (n−1)·(o12+o21) / (2·n1·n2) = 1 − 7·2/30 = 8/15.
    data = [[1, 1, 2, 2], [1, 2, 2, 2]]
    assert ag.krippendorff_alpha(data, "nominal") == pytest.approx(8 / 15)
    # Interval with values 1 and 2 (δ² = 1 for the only disagreeing pair) is the same here.
    assert ag.krippendorff_alpha(data, "interval") == pytest.approx(8 / 15)


def test_krippendorff_undefined_cases():
    assert ag.krippendorff_alpha([[1, nan], [nan, 2]], "interval") is None  # nothing pairable
    assert ag.krippendorff_alpha([[3, 3], [3, 3]], "interval") is None  # no variation
    assert ag.krippendorff_alpha(np.empty((0, 0)), "nominal") is None
    counts = np.array([[2, 0], [0, 1]])
    assert ag.krippendorff_alpha_from_counts(counts, [1, 2], "nominal") is None


def test_value_counts_reject_out_of_domain():
    with pytest.raises(ValueError):
        ag.value_counts_from_pairs(np.array([0, 0]), np.array([1.0, 7.0]), [1, 2, 3, 4, 5])


@pytest.mark.parametrize("level", ag.LEVELS)
def test_alpha_random_matrices_match_package(level):
    rng = np.random.default_rng(7)
    for _ in range(5):
        data = rng.integers(1, 6, size=(8, 40)).astype(float)
        data[rng.random(data.shape) < 0.6] = nan  # workers vary between items; some singletons
        expected = krippendorff.alpha(data, level_of_measurement=level,
                                      value_domain=[1, 2, 3, 4, 5])
        counts, domain = ag.value_counts_from_matrix(data, [1, 2, 3, 4, 5])
        assert ag.krippendorff_alpha_from_counts(counts, domain, level) == pytest.approx(expected)
        # The vectorised formula used for the bootstrap reproduces the package.
        pairable = counts[counts.sum(axis=1) >= 2]
        o = ag._pattern_coincidences(pairable).sum(axis=0).reshape(1, 5, 5)
        assert ag._alpha_from_coincidences(o, domain, level)[0] == pytest.approx(expected)


@pytest.mark.parametrize("level", ag.LEVELS)
def test_alpha_bootstrap_matches_naive_resampling(level):
    """The pattern-multinomial bootstrap is the item bootstrap: its interval agrees with a
    plain loop of krippendorff.alpha over resampled item columns."""
    rng = np.random.default_rng(3)
    truth = rng.integers(1, 6, size=120)
    data = np.clip(truth + rng.integers(-1, 2, size=(4, 120)), 1, 5).astype(float)
    data[rng.random(data.shape) < 0.3] = nan
    data[:, (~np.isnan(data)).sum(axis=0) < 2] = nan  # only pairable items are resampled
    counts, domain = ag.value_counts_from_matrix(data, [1, 2, 3, 4, 5])
    fast = ag.krippendorff_alpha_ci(counts, domain, level, n_resamples=2000, seed=1)
    keep = (~np.isnan(data)).sum(axis=0) >= 2
    naive = ag.bootstrap_ci(
        data[:, keep],
        lambda m: ag.krippendorff_alpha(m, level, value_domain=[1, 2, 3, 4, 5]),
        n_resamples=400, seed=2,
    )
    point = ag.krippendorff_alpha(data, level)
    assert fast.low < point < fast.high
    assert fast.low == pytest.approx(naive.low, abs=0.03)
    assert fast.high == pytest.approx(naive.high, abs=0.03)
    # Seeded: the same seed gives the same interval.
    assert ag.krippendorff_alpha_ci(counts, domain, level, n_resamples=2000, seed=1) == fast


@pytest.mark.parametrize("level", ag.LEVELS)
def test_alpha_without_each_annotator(level):
    rng = np.random.default_rng(11)
    data = rng.integers(1, 6, size=(5, 30)).astype(float)
    data[rng.random(data.shape) < 0.3] = nan
    rows, cols = np.nonzero(~np.isnan(data))
    counts, domain = ag.value_counts_from_matrix(data, [1, 2, 3, 4, 5])
    value_index = np.searchsorted(domain, data[rows, cols])
    result = ag.alpha_without_each(counts, domain, cols, value_index, rows, level)
    for annotator in range(5):
        expected = krippendorff.alpha(np.delete(data, annotator, axis=0),
                                      level_of_measurement=level, value_domain=[1, 2, 3, 4, 5])
        assert result[annotator] == pytest.approx(expected)


def test_fleiss_published_example_and_statsmodels():
    result = ag.fleiss_kappa_from_counts(FLEISS_TABLE)
    assert result.kappa == pytest.approx(0.210, abs=5e-4)
    assert result.kappa == pytest.approx(sm_fleiss_kappa(FLEISS_TABLE))
    assert (result.n_items, result.n_raters, result.n_items_skipped) == (10, 14, 0)


def test_fleiss_items_with_other_rater_counts_are_skipped():
    # 3 annotators; items 0–3 judged by all three, item 4 by two, item 5 by one.
    data = np.array([
        [0, 1, 1, 0, 1, 0],
        [0, 1, 0, 0, 1, nan],
        [0, 1, 1, 1, nan, nan],
    ])
    result = ag.fleiss_kappa(data)
    expected = sm_fleiss_kappa(aggregate_raters(data[:, :4].T)[0])
    assert result.kappa == pytest.approx(expected)
    assert (result.n_items, result.n_raters, result.n_items_skipped) == (4, 3, 2)
    # Asking for the pairs judged by exactly two uses item 4 alone (κ undefined: no spread).
    two = ag.fleiss_kappa(data, n_raters=2)
    assert (two.n_items, two.n_items_skipped) == (1, 5)


def test_fleiss_ci_contains_estimate():
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 2, size=200)
    ratings = np.where(rng.random((200, 3)) < 0.8, truth[:, None], 1 - truth[:, None])
    table = aggregate_raters(ratings)[0]
    kappa = ag.fleiss_kappa_from_counts(table).kappa
    ci = ag.fleiss_kappa_ci(table, n_resamples=1000, seed=0)
    assert ci.low < kappa < ci.high
    naive = ag.bootstrap_ci(
        ratings.T.astype(float), lambda m: ag.fleiss_kappa(m).kappa, n_resamples=400, seed=4
    )
    assert ci.low == pytest.approx(naive.low, abs=0.04)
    assert ci.high == pytest.approx(naive.high, abs=0.04)


def test_cohen_kappa_hand_and_references():
    # 50 items: both yes 20, A yes/B no 5, A no/B yes 10, both no 15 → p_o .7, p_e .5, κ .4.
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert ag.cohen_kappa(a, b) == pytest.approx(0.4)
    rng = np.random.default_rng(0)
    x = rng.integers(1, 6, 80)
    y = np.clip(x + rng.integers(-1, 2, 80), 1, 5)
    table = to_table(np.column_stack([x, y]), bins=np.arange(0.5, 6))[0]
    assert ag.cohen_kappa(x, y) == pytest.approx(cohens_kappa(table).kappa)
    assert ag.cohen_kappa(x, y, weights="quadratic", labels=[1, 2, 3, 4, 5]) == pytest.approx(
        cohens_kappa(table, wt="quadratic").kappa
    )


def test_cohen_kappa_compares_numeric_labels_by_value():
    from sklearn.metrics import cohen_kappa_score

    ints = [1, 2, 3, 1, 2, 3, 3, 1]
    mixed = [1.0, 2, 3.0, 2.0, 2, np.int64(3), 1.0, 1]   # same values, other number types
    expected = cohen_kappa_score(ints, [1, 2, 3, 2, 2, 3, 1, 1])
    assert ag.cohen_kappa(ints, mixed) == pytest.approx(expected)
    assert ag.cohen_kappa([1, 2, 1, 2], [1.0, 2.0, 1.0, 2.0]) == pytest.approx(1.0)


def test_weighted_cohen_kappa_uses_the_full_scale():
    # Only 1, 2 and 5 of a 1-5 scale observed: 2 and 5 are three steps apart on the scale,
    # one step apart among the observed labels; the weights must come from the 1-5 scale.
    x = [1, 2, 5, 2, 1, 5, 2, 2, 1, 5]
    y = [2, 2, 5, 1, 1, 2, 2, 5, 1, 5]
    table = to_table(np.column_stack([x, y]), bins=np.arange(0.5, 6))[0]
    assert table.shape == (5, 5)
    expected = cohens_kappa(table, wt="quadratic").kappa
    assert ag.cohen_kappa(x, y, weights="quadratic", labels=[1, 2, 3, 4, 5]) == pytest.approx(
        expected)
    assert ag.cohen_kappa(x, [float(v) for v in y], weights="quadratic",
                          labels=[1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(expected)
    observed_only = cohens_kappa(to_table(np.column_stack([x, y]),
                                          bins=[0.5, 1.5, 2.5, 5.5])[0], wt="quadratic").kappa
    assert observed_only != pytest.approx(expected)  # why the scale matters
    with pytest.raises(ValueError, match="full ordered scale"):
        ag.cohen_kappa(x, y, weights="quadratic")
    with pytest.raises(ValueError, match="not on the scale"):
        ag.cohen_kappa(x, y, weights="quadratic", labels=[1, 2, 3])


def test_two_annotator_statistics_drop_missing_pairs():
    a = [1, 2, 3, 4, 5, nan, 2]
    b = [2, 2, 3, 5, 4, 3, nan]
    assert ag.pearson(a, b) == pytest.approx(pearsonr([1, 2, 3, 4, 5], [2, 2, 3, 5, 4])[0])
    assert ag.spearman(a, b) == pytest.approx(spearmanr([1, 2, 3, 4, 5], [2, 2, 3, 5, 4])[0])
    assert ag.cohen_kappa([1, None], [1, 2]) is None  # one pair with one label: undefined
    assert ag.pearson([1, 1, 1], [1, 2, 3]) is None


def test_percent_agreement_hand_computed():
    # Item 0: three agree (3 of 3 pairs); item 1: 2 of 3 agree (1 of 3 pairs); item 2: a
    # single judgment (ignored). Mean = (1 + 1/3) / 2.
    data = np.array([[1, 1, 2], [1, 1, nan], [1, 2, nan]])
    assert ag.percent_agreement(data) == pytest.approx((1 + 1 / 3) / 2)
    assert ag.percent_agreement([[1, nan], [nan, 1]]) is None


def test_reliability_matrix_and_label_coding():
    codes, labels = ag.encode_labels(["B", "A", "B"])
    assert list(labels) == ["A", "B"] and list(codes) == [1, 0, 1]
    matrix, workers, items = ag.reliability_matrix(["w2", "w1", "w1"], [10, 10, 11], codes)
    assert list(workers) == ["w1", "w2"] and list(items) == [10, 11]
    assert matrix[0, 0] == 0 and matrix[1, 0] == 1 and np.isnan(matrix[1, 1])


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_from_confusion_equals_scikit_learn_on_the_labels(weights):
    """The annotator-pairs report computes κ from the confusion matrix it already holds; it must
    be scikit-learn's κ of the label lists behind that matrix, including unused scale points."""
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(7)
    for _ in range(20):
        a = rng.integers(0, 5, size=40)
        b = np.clip(a + rng.integers(-1, 2, size=40), 0, 3)  # scale point 4 often unused by b
        confusion = np.zeros((5, 5), dtype=int)
        np.add.at(confusion, (a, b), 1)
        expected = cohen_kappa_score(a, b, weights=weights, labels=list(range(5)))
        assert ag.cohen_kappa_from_confusion(confusion, weights=weights) == pytest.approx(
            expected)


def test_cohen_kappa_from_confusion_is_undefined_for_one_label_or_no_pairs():
    one_label = np.zeros((3, 3), dtype=int)
    one_label[1, 1] = 6
    assert ag.cohen_kappa_from_confusion(one_label) is None
    assert ag.cohen_kappa_from_confusion(np.zeros((3, 3), dtype=int)) is None
    disagree = np.array([[0, 3], [3, 0]])
    assert ag.cohen_kappa_from_confusion(disagree) == pytest.approx(-1.0)
