"""Pure statistics of the judge alignment report (metrics_app/domain/judge_alignment.py),
checked against scikit-learn, statsmodels and hand counts."""
from __future__ import annotations

import numpy as np
import pytest

from metrics_app.domain.judge_alignment import (
    binary_alignment,
    expected_calibration_error,
    human_ceiling,
    length_bias,
    paired_comparison,
    position_bias,
    rate_gap,
)


def _data(n=400, seed=1):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    prob = np.clip(0.5 + (labels - 0.5) * 0.6 + rng.normal(0, 0.25, n), 0, 1)
    return labels, prob


def test_binary_alignment_matches_scikit_learn():
    from sklearn.metrics import accuracy_score, cohen_kappa_score, roc_auc_score

    labels, prob = _data()
    stats = binary_alignment(rank=prob, threshold=0.5, labels=labels,
                             human_mean=1 + 4 * labels, probability=prob, n_resamples=300)
    pred = (prob >= 0.5).astype(int)
    assert stats["accuracy"] == pytest.approx(accuracy_score(labels, pred))
    assert stats["kappa"] == pytest.approx(cohen_kappa_score(labels, pred))
    assert stats["roc_auc"] == pytest.approx(roc_auc_score(labels, prob))
    assert stats["confusion"]["judge_correct_human_incorrect"] == int(((pred == 1) &
                                                                      (labels == 0)).sum())
    for name in ("accuracy", "kappa", "roc_auc", "pearson", "ece"):
        low, high = stats["ci"][name]
        assert low < stats[name] < high, name


def test_ece_is_zero_for_a_calibrated_judge_and_large_for_an_overconfident_one():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 20000)
    y = (rng.uniform(0, 1, 20000) < p).astype(int)
    assert expected_calibration_error(p, y, n_resamples=0)["ece"] < 0.02
    overconfident = np.where(p > 0.5, 0.99, 0.01)
    result = expected_calibration_error(overconfident, y, n_resamples=50)
    assert result["ece"] > 0.2
    assert sum(b["n"] for b in result["bins"]) == 20000


def test_paired_comparison_is_mcnemars_exact_test():
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(3)
    a = rng.uniform(size=300) < 0.8
    b = rng.uniform(size=300) < 0.7
    result = paired_comparison(a, b, n_resamples=500)
    table = [[int((a & b).sum()), int((a & ~b).sum())], [int((~a & b).sum()),
                                                          int((~a & ~b).sum())]]
    assert result["mcnemar_p"] == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert result["accuracy_difference"] == pytest.approx(a.mean() - b.mean())
    assert result["ci"][0] < result["accuracy_difference"] < result["ci"][1]
    assert paired_comparison(a, a)["mcnemar_p"] == 1.0


def test_human_ceiling_leaves_one_out():
    # Item 1: three agree; item 2: two of three say correct; item 3: one label (left out).
    ceiling = human_ceiling({1: [1, 1, 1], 2: [1, 1, 0], 3: [1]}, n_resamples=0)
    # Item 2's "0" faces a majority of 1s (wrong); each "1" faces a tie (left out).
    assert ceiling["n_items"] == 2 and ceiling["n_pairs"] == 4
    assert ceiling["accuracy"] == pytest.approx(3 / 4)
    assert human_ceiling({1: [1], 2: [0]})["n_pairs"] == 0


def test_length_bias_sees_a_judge_that_likes_long_answers():
    rng = np.random.default_rng(5)
    length = rng.integers(1, 60, 500).astype(float)
    human = rng.integers(0, 2, 500).astype(float)
    judge = ((length > 30) | (human == 1)).astype(float)
    card = length_bias(length, judge, human, n_resamples=200)
    assert card["favours_longer"] is True and card["difference"] > 0.2
    fair = length_bias(length, human, human, n_resamples=200)
    assert fair["difference"] == pytest.approx(0.0) and not fair["favours_longer"]
    assert [t["tercile"] for t in card["terciles"]] == ["short", "medium", "long"]


def test_position_and_rate_gap():
    card = position_bias([True] * 80 + [False] * 20, [True] * 30 + [False] * 20,
                         n_resamples=200)
    assert card["first_position_rate"] == 0.8 and card["ci_first"][0] > 0.5
    assert card["position_consistency"] == 0.6
    gap = rate_gap([1, 1, 1, 0], [1, 0, 0, 0], n_resamples=100)
    assert gap["gap"] == pytest.approx(0.5) and gap["judge_rate"] == 0.75
