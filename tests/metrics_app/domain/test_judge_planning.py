"""The judge recommendation (metrics_app/domain/judge_planning.py): predicted interval widths
against simulation, the budget arithmetic, and the choice."""
from __future__ import annotations

import numpy as np
import pytest

from metrics_app.domain.estimates import prediction_powered
from metrics_app.domain.judge_planning import half_width, plan


def _population(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.6).astype(float)
    good = np.clip(0.8 * y + 0.1 + rng.normal(0, 0.1, n), 0, 1)
    noise = rng.random(n)
    return y, good, noise


def test_the_predicted_width_matches_the_width_of_real_draws():
    y, good, _ = _population()
    rng = np.random.default_rng(1)
    n = 200
    widths = []
    for _ in range(200):
        idx = rng.choice(len(y), n, replace=False)
        e = prediction_powered(y[idx], good[idx], good)
        widths.append((e.high - e.low) / 2)
    result = plan(y=y[:300], predictions={"good": good[:300]}, n_items=len(y), label_cost=1.0,
                  judge_costs={}, budget=n)
    predicted = result["per_judge"]["good"]["half_width_at_budget"]
    assert predicted == pytest.approx(np.mean(widths), rel=0.15)


def test_a_useful_judge_wins_a_useless_one_does_not_and_costs_come_out_of_the_budget():
    y, good, noise = _population()
    result = plan(y=y[:300], predictions={"good": good[:300], "noise": noise[:300]},
                  n_items=len(y), label_cost=0.5, judge_costs={"good": 40.0}, budget=100.0)
    per = result["per_judge"]
    assert per["humans"]["affordable_labels"] == 200
    assert per["good"]["affordable_labels"] == 120  # (100 - 40) / 0.5
    assert per["good"]["half_width_at_budget"] < per["humans"]["half_width_at_budget"]
    # A judge of pure noise buys nothing (its λ, fitted on the pilot, is near 0).
    assert per["noise"]["half_width_at_budget"] == pytest.approx(
        per["humans"]["half_width_at_budget"], rel=0.03)
    assert per["noise"]["lam"] < 0.1
    assert per["good"]["worth_labels"] > per["good"]["affordable_labels"]
    assert result["best"]["judge"] == "good" and result["best"]["cost"] == 100.0
    # An LLM run too dear for the budget leaves humans alone as the choice.
    dear = plan(y=y[:300], predictions={"good": good[:300]}, n_items=len(y), label_cost=0.5,
                judge_costs={"good": 99.5}, budget=100.0)
    assert dear["best"]["judge"] == "humans"
    rows = [r for r in result["table"] if r["judge"] == "good"]
    assert [r["n_labels"] for r in rows] == [25, 50, 100, 120]
    assert all(a["half_width"] > b["half_width"] for a, b in zip(rows, rows[1:], strict=False))


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="3 pilot labels"):
        plan(y=[1, 0], predictions={}, n_items=10, label_cost=1, judge_costs={}, budget=5)
    with pytest.raises(ValueError, match="label_cost"):
        plan(y=[1, 0, 1], predictions={}, n_items=10, label_cost=0, judge_costs={}, budget=5)
    with pytest.raises(ValueError, match="2 predictions for 3 labels"):
        plan(y=[1, 0, 1], predictions={"j": [1, 0]}, n_items=10, label_cost=1,
             judge_costs={}, budget=5)
    assert half_width(0.25, 1, 100) is None
    assert half_width(0.25, 100, 100) == 0.0
