"""System-level estimates of a Likert correctness project: each system's (item `source`)
accuracy and mean score from the human judgments alone, from the promoted LERC alone, and
prediction-powered (humans + LERC on every item), and the same for every pair of systems, with
the judgments still needed to tell them apart. The statistics are metrics_app.domain.estimates;
this module gathers the numbers."""
from __future__ import annotations

from itertools import combinations

import numpy as np
from django.db.models import Max

from annotation.judgment_selectors import JudgmentFrame
from annotation.models import Project, TaskKind

from ..domain import estimates
from ..models import MetricScore

CORRECT_AT = 3.0  # a mean human score of 3 or more on the 1–5 scale counts as correct
# LERC's calibrated P(correct) predicts accuracy; its 1–5 score predicts the mean score.
PROBABILITY_METRIC, SCORE_METRIC = "lerc_prob", "lerc"


def _latest_scores(project: Project, metric: str) -> tuple[str | None, dict[int, float]]:
    """(version, item id → value) of the version of `metric` stored last for this project."""
    rows = MetricScore.objects.filter(item__project=project, metric=metric, side="")
    last = rows.aggregate(top=Max("id"))["top"]
    if last is None:
        return None, {}
    version = MetricScore.objects.get(pk=last).version
    values = rows.filter(version=version, value__isnull=False).values_list("item_id", "value")
    return version, {item_id: float(value) for item_id, value in values}


def metric_watermark(project: Project) -> int:
    """Changes whenever a LERC score is stored for the project (the cache compares it)."""
    return (MetricScore.objects.filter(item__project=project,
                                       metric__in=[PROBABILITY_METRIC, SCORE_METRIC])
            .aggregate(top=Max("id"))["top"] or 0)


def _human_means(frame: JudgmentFrame) -> dict[int, float]:
    mask = frame.data_mask() & ~np.isnan(frame.score)
    if not mask.any():
        return {}
    positions = frame.item_pos[mask]
    total = np.bincount(positions, weights=frame.score[mask],
                        minlength=len(frame.item_table_ids))
    count = np.bincount(positions, minlength=len(frame.item_table_ids))
    judged = np.flatnonzero(count)
    return {int(frame.item_table_ids[i]): float(total[i] / count[i]) for i in judged}


def _quantity(*, human: dict[int, float], predicted: dict[int, float], items: list[int],
              to_label, verdict) -> dict:
    """The three estimates of one quantity (accuracy or mean score) over `items`."""
    judged = [i for i in items if i in human]
    y_all = np.array([to_label(human[i]) for i in judged], dtype=float)
    scored = [i for i in items if i in predicted]
    both = [i for i in judged if i in predicted]
    out = {"human": estimates.human_only(y_all, n_items=len(items)).as_dict()}
    if scored:
        f_all = np.array([predicted[i] for i in scored], dtype=float)
        y = np.array([to_label(human[i]) for i in both], dtype=float)
        f = np.array([predicted[i] for i in both], dtype=float)
        out["metric"] = estimates.metric_only(verdict(f_all), verdict(f), y)
        out["ppi"] = estimates.prediction_powered(y, f, f_all).as_dict()
    return out


def estimates_report(frame: JudgmentFrame, *, project: Project) -> dict:
    """{"systems": {source: {accuracy, mean_score, n_items, n_judged, n_scored}},
    "pairs": [{a, b, accuracy: {human, ppi}}], "metric", "assumptions"}, or {"skipped": why}."""
    if project.kind != TaskKind.LIKERT:
        return {"skipped": "system estimates are computed for Likert correctness projects"}
    items = list(project.items.filter(is_practice=False, excluded=False, is_gold_check=False)
                 .values_list("id", "source"))
    by_system: dict[str, list[int]] = {}
    for item_id, source in items:
        by_system.setdefault(source or "(none)", []).append(item_id)
    human = _human_means(frame)
    version, probability = _latest_scores(project, PROBABILITY_METRIC)
    score_version, score = _latest_scores(project, SCORE_METRIC)
    report = {
        "correct_at": CORRECT_AT,
        "metric": {"probability": PROBABILITY_METRIC if probability else None,
                   "probability_version": version, "score": SCORE_METRIC if score else None,
                   "score_version": score_version},
        "assumptions": estimates.ASSUMPTIONS,
        "systems": {}, "pairs": [],
    }
    if not probability:
        report["note"] = ("No LERC scores stored for this project: estimates are from the human "
                          "judgments alone. Score the project with the promoted LERC "
                          "(score_project SLUG --metric lerc,lerc_prob) for prediction-powered estimates.")
    for system, ids in sorted(by_system.items()):
        report["systems"][system] = {
            "n_items": len(ids), "n_judged": sum(i in human for i in ids),
            "n_scored": sum(i in probability for i in ids),
            "accuracy": _quantity(human=human, predicted=probability, items=ids,
                                  to_label=lambda s: float(s >= CORRECT_AT),
                                  verdict=lambda p: (p >= 0.5).astype(float)),
            "mean_score": _quantity(human=human, predicted=score, items=ids,
                                    to_label=float, verdict=lambda s: s),
        }
    for a, b in combinations(sorted(by_system), 2):
        pair = {"a": a, "b": b, "accuracy": {}}
        for method in ("human", "ppi"):
            first = report["systems"][a]["accuracy"].get(method)
            second = report["systems"][b]["accuracy"].get(method)
            if first and second:
                pair["accuracy"][method] = estimates.difference(
                    estimates.Estimate(**first), estimates.Estimate(**second))
        report["pairs"].append(pair)
    return report
