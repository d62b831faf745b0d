"""Choosing a judge for a study: with a budget for human judgments (and what each judge costs
to run over every item), which judge and how many human labels give the narrowest
prediction-powered interval on an accuracy over N items? Pure numpy.

The width is predicted from labels already in hand (a pilot): the PPI++ standard error with
n labels of N items is sqrt((1 - n/N) * Var(y - λf) / n), λ the power-tuning weight fitted
on the pilot (metrics_app.domain.estimates); humans alone have Var(y). The 95% half-width is
t(0.975, n-1) times that. A judge's running cost comes out of the same budget.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .estimates import NO_SPREAD, power_tuning_weight

DEFAULT_GRID = (25, 50, 100, 200, 400, 800, 1600, 3200)
# Why no width is predicted: a pilot without spread (`estimates.no_spread`, the estimates'
# own rule: such labels give no interval, so they predict none, not a width of 0).
SAME_PILOT_LABEL = "every pilot label is the same: the pilot predicts no width"
SAME_PILOT_RESIDUAL = ("the human label minus the judge's prediction is the same on every "
                       "pilot item: the pilot shows no error of the judge and predicts no "
                       "width")


def half_width(variance: float, n: int, n_items: int) -> float | None:
    from scipy.stats import t

    if n < 2 or n_items < 1:
        return None
    fpc = max(0.0, 1 - n / n_items)
    return float(t.ppf(0.975, n - 1) * math.sqrt(fpc * variance / n))


def plan_costs_error(*, budget: float, label_cost: float) -> str:
    """Why a plan cannot be made for this budget and price per human label ("" when it can):
    the budget a finite number of dollars, 0 or more, the label's price finite and above 0.
    The rule of every door that plans (`judge_report --plan --label-cost`, the plan API's
    `budget` and `label_cost`): the command printed plans for `--plan -3`, `--plan inf` and
    `--label-cost nan` where the API answered 400."""
    if not (isinstance(budget, int | float) and math.isfinite(budget) and budget >= 0):
        return (f"the budget (budget, --plan) must be a number of dollars, 0 or more, "
                f"not {budget!r}")
    if not (isinstance(label_cost, int | float) and math.isfinite(label_cost)
            and label_cost > 0):
        return (f"the cost of a human label (label_cost, --label-cost) must be a number of "
                f"dollars above 0, not {label_cost!r}")
    return ""


def plan(*, y: Sequence[float], predictions: dict[str, Sequence[float]], n_items: int,
         label_cost: float, judge_costs: dict[str, float], budget: float,
         grid: Sequence[int] = DEFAULT_GRID) -> dict:
    """{"table": [{judge, n_labels, cost, half_width}], "best": {...} | None, "per_judge"}.
    `y` are pilot human labels and `predictions[judge]` that judge's values on the same items
    (0-1); `judge_costs[judge]` what running it over all `n_items` costs; "humans" (no judge)
    is always a candidate."""
    if why := plan_costs_error(budget=budget, label_cost=label_cost):
        raise ValueError(why)
    y = np.asarray(y, dtype=float)
    if len(y) < 3:
        raise ValueError("a plan needs at least 3 pilot labels")
    variances = {"humans": float(y.var(ddof=1))}
    lambdas = {"humans": 0.0}
    for name, values in predictions.items():
        f = np.asarray(values, dtype=float)
        if f.shape != y.shape:
            raise ValueError(f"{name}: {len(f)} predictions for {len(y)} labels")
        lam = power_tuning_weight(y, f)
        lambdas[name] = lam
        variances[name] = float((y - lam * f).var(ddof=1))
    table, per_judge = [], {}
    for name, variance in variances.items():
        unpredictable = None
        if variance <= NO_SPREAD**2:
            unpredictable = SAME_PILOT_LABEL if name == "humans" else SAME_PILOT_RESIDUAL
        fixed = 0.0 if name == "humans" else float(judge_costs.get(name, 0.0))
        affordable = int(max(0, (budget - fixed) // label_cost))
        affordable = min(affordable, n_items)
        sizes = sorted({n for n in grid if n <= affordable} | ({affordable} if affordable >= 2
                                                              else set()))
        for n in sizes:
            table.append({"judge": name, "n_labels": n, "cost": round(fixed + n * label_cost, 4),
                          "half_width": (None if unpredictable
                                         else half_width(variance, n, n_items))})
        best_n = affordable if affordable >= 2 and not unpredictable else None
        per_judge[name] = {"lam": lambdas[name], "residual_variance": variance,
                           "judge_cost": fixed, "affordable_labels": affordable,
                           "half_width_at_budget": (half_width(variance, best_n, n_items)
                                                    if best_n else None),
                           "half_width_undefined": unpredictable,
                           # labels humans alone would need for the same width
                           "worth_labels": (None if variance <= 0 or not best_n
                                            or variances["humans"] <= NO_SPREAD**2 else
                                            round(best_n * variances["humans"] / variance, 1))}
    candidates = [(v["half_width_at_budget"], name) for name, v in per_judge.items()
                  if v["half_width_at_budget"] is not None]
    best = None
    best_undefined = None
    if not candidates and any(v["half_width_undefined"] and v["affordable_labels"] >= 2
                              for v in per_judge.values()):
        best_undefined = "no width can be predicted: " + "; ".join(
            f"{name}: {v['half_width_undefined']}" for name, v in per_judge.items()
            if v["half_width_undefined"])
    if candidates:
        width, name = min(candidates)
        best = {"judge": name, "n_labels": per_judge[name]["affordable_labels"],
                "half_width": width, "cost": round(per_judge[name]["judge_cost"]
                                                   + per_judge[name]["affordable_labels"]
                                                   * label_cost, 4)}
    return {"budget": budget, "label_cost": label_cost, "n_items": n_items,
            "pilot_labels": len(y), "table": table, "per_judge": per_judge, "best": best,
            "best_undefined": best_undefined}

