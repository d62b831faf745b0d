"""System-level estimates of a Likert correctness project: each system's (item `source`)
accuracy and mean score from the human judgments alone, from a judge alone, and
prediction-powered (humans + the judge on every item), and the same for every pair of systems,
with the judgments still needed to tell them apart. The judge is the promoted LERC by default,
or any judge (`judge=`: `metric:f1`, an LLM or imported judge by name; see
metrics_app/judge_selectors.py): item by item its probability (else its score on a 0-1
scale, else its verdict) predicts accuracy, its 1-5 score (else 1 + 4 x that) the mean
score. The report names the judge and each prediction-powered estimate its effective n. The
statistics are metrics_app.domain.estimates; this module gathers the numbers."""
from __future__ import annotations

from itertools import combinations

import numpy as np
from django.db.models import Q

from annotation.domain.aggregation import aggregate_items
from annotation.domain.likert_scale import from_five_point
from annotation.judgment_selectors import JudgmentFrame, watermark, with_adjudications
from annotation.models import Project, RoutingDraw, TaskKind
from annotation.selectors import items_measured_on, measured_on_summary
from core.vocabulary import PROBABILITY_METRIC_NAME, ModelKind

from ..domain import estimates
from ..judge_selectors import judge_view, metric_version_on_project, predictor_values
from ..model_selectors import learned_metric_seen_items
from ..models import JudgeVerdict, MetricScore

# LERC's calibrated P(correct) predicts accuracy; its 1–5 score predicts the mean score.
PROBABILITY_METRIC, SCORE_METRIC = PROBABILITY_METRIC_NAME, ModelKind.REGRESSION.metric_name


def latest_metric_scores(project: Project, metric: str) -> tuple[str | None, dict[int, float]]:
    """(version, item id → value) of `metric` on this project, the version every report reads
    (`metric_version_on_project`: for LERC the version that serves the project), without the
    items that version trained or calibrated on (`learned_metric_seen_items`: the estimates
    then treat them as unscored, predicted "unsure", which keeps them unbiased)."""
    version = metric_version_on_project(project, metric)
    if version is None:
        return None, {}
    seen = learned_metric_seen_items(project, metric, version)
    rows = MetricScore.objects.filter(item__project=project, metric=metric, side="")
    values = rows.filter(version=version, value__isnull=False).values_list("item_id", "value")
    return version, {item_id: float(value) for item_id, value in values if item_id not in seen}


def metric_watermark(project: Project) -> int:
    """Changes whenever a LERC score, or an A/B answer's score (the leaderboard's metric
    judges), is stored for the project (the cache compares it)."""
    return watermark(MetricScore.objects.filter(item__project=project)
                     .filter(Q(metric__in=[PROBABILITY_METRIC, SCORE_METRIC]) | ~Q(side="")))


def _human_scores(frame: JudgmentFrame, *, project: Project) -> dict[int, float]:
    """Item id → its human score: a researcher's adjudicated score where one was recorded
    (`with_adjudications`, as the export's label and the metric report read it), else the
    mean of its judgments that count, or the median when the project's aggregation model says
    so."""
    mask = frame.data_mask() & ~np.isnan(frame.score)
    if not mask.any():
        return {}
    positions = frame.item_pos[mask]
    if project.aggregation_model == "median":
        item_ids = frame.item_table_ids[positions]
        triples = zip(frame.worker_id[mask].tolist(), item_ids.tolist(),
                      frame.score[mask].tolist(), strict=True)
        scores = {int(item): float(aggregate.label) for item, aggregate in
                  aggregate_items(triples, model="median", kind="likert").items()}
    else:
        total = np.bincount(positions, weights=frame.score[mask],
                            minlength=len(frame.item_table_ids))
        count = np.bincount(positions, minlength=len(frame.item_table_ids))
        judged = np.flatnonzero(count)
        scores = {int(frame.item_table_ids[i]): float(total[i] / count[i]) for i in judged}
    return with_adjudications(scores, project=project)


def clip_to_scale(quantity: dict, low: float, high: float) -> dict:
    """A quantity's estimates, points and interval bounds, inside its scale (an accuracy 0-1,
    a mean score 1 to the project's top score): a normal interval (prediction-powered) around
    0.97 ran to 104%, and the Horvitz-Thompson estimate of a routed draw whose labelled
    answers were all correct read 125% (a mean score of 6.3 on 1-5), outside its own clipped
    interval. Clipping only moves a number towards every value the truth can take."""
    for cell in quantity.values():
        if isinstance(cell, dict):
            for key in ("estimate", "low", "high"):
                if cell.get(key) is not None:
                    cell[key] = min(high, max(low, cell[key]))
    return quantity


def clip_share(quantity: dict) -> dict:
    """`clip_to_scale` of an accuracy: inside [0, 1]."""
    return clip_to_scale(quantity, 0.0, 1.0)


def _quantity(*, human: dict[int, float], predicted: dict[int, float], items: list[int],
              to_label, verdict, routed: dict[int, tuple[float, bool]] | None = None,
              unsure: float = estimates.UNSURE_PROBABILITY, unscored: str = "") -> dict:
    """The three estimates of one quantity (accuracy or mean score) over `items`. With a
    routing draw (`routed`: item → its probability of reaching humans and whether it was
    drawn), labels are weighted by 1/probability (active inference) instead of treated as a
    random sample. Without a prediction on any of the items there is no judge alone and no
    prediction-powered estimate: `judge_undefined` says why (`unscored`, `_unscored_reason`;
    None where the judge scored some)."""
    if routed and any(i in routed for i in items):
        return _routed_quantity(human=human, predicted=predicted, items=items,
                                to_label=to_label, verdict=verdict, routed=routed,
                                unscored=unscored)
    judged = [i for i in items if i in human]
    y_all = np.array([to_label(human[i]) for i in judged], dtype=float)
    scored = _judge_scored(predicted, items)
    alone = _judge_alone(human=human, predicted=predicted, items=items, to_label=to_label,
                         verdict=verdict)
    if scored and len(scored) < len(items):
        # A judge that saw only some of the system's items (a budget-capped LLM run, a
        # partial import): the estimate stays about every item, the unscored ones predicted
        # as maximally unsure (0.5 of P(correct), 3 of 1-5), as the routing counts them. Any
        # prediction fixed before the labels keeps PPI unbiased; only its width suffers.
        predicted = {**{i: unsure for i in items}, **{i: predicted[i] for i in scored}}
        scored = list(items)
    both = [i for i in judged if i in predicted]
    out = {"human": estimates.human_only(y_all, n_items=len(items)).as_dict(),
           # The same labels read as a sample of the questions the items were drawn from:
           # what a paper's "would it hold on new questions" interval means. Once every item
           # is judged the finite-population interval has width 0; this one does not.
           "human_new_questions": {**estimates.human_only(y_all).as_dict(),
                                   "method": "human_new_questions"}}
    if scored:
        f_all = np.array([predicted[i] for i in scored], dtype=float)
        y = np.array([to_label(human[i]) for i in both], dtype=float)
        f = np.array([predicted[i] for i in both], dtype=float)
        out["metric"] = alone
        out["ppi"] = estimates.prediction_powered(y, f, f_all).as_dict()
    out["judge_undefined"] = None if scored else unscored
    return out


def _judge_alone(*, human, predicted, items, to_label, verdict) -> dict:
    """The judge's own estimate (`estimates.metric_only`) from its own predictions only: its
    verdicts on the items it scored, its bias on the items it and the humans both judged. The
    unsure value the prediction-powered estimate gives an unscored item (0.5 reads "correct")
    is no verdict of the judge: counted here, a judge that scored half a system's items, or
    a learned judge beside the items its version saw, read as calling them all correct."""
    scored = [i for i in items if i in predicted]
    both = [i for i in scored if i in human]
    return estimates.metric_only(
        verdict(np.array([predicted[i] for i in scored], dtype=float)),
        verdict(np.array([predicted[i] for i in both], dtype=float)),
        np.array([to_label(human[i]) for i in both], dtype=float),
        n_labelled=sum(i in human for i in items))


def _routed_quantity(*, human, predicted, items, to_label, verdict, routed, unscored) -> dict:
    """Estimates over the routed population plus the items judged outside it (probability 1):
    humans alone = Horvitz–Thompson (λ = 0), prediction-powered = active inference. Unscored
    items are predicted 0.5, as the routing counted them."""
    population = [i for i in items if i in routed or i in human]
    labeled = [k for k, i in enumerate(population) if i in human]
    # A label from outside the draw (an earlier stage, or judged although not drawn) was
    # certain to be there: probability 1.
    pi = np.array([routed[i][0] if i in routed and (routed[i][1] or i not in human) else 1.0
                   for i in population])
    y = np.array([to_label(human[population[k]]) for k in labeled], dtype=float)
    f_all = np.array([predicted.get(i, estimates.UNSURE_PROBABILITY) for i in population],
                     dtype=float)
    out = {"human": estimates.active_estimate(y, labeled, f_all, pi, lam=0.0).as_dict(),
           "routed": True, "population": len(population)}
    out["human"]["method"] = "human_weighted"
    scored = _judge_scored(predicted, population)
    if scored:
        out["metric"] = _judge_alone(human=human, predicted=predicted, items=population,
                                     to_label=to_label, verdict=verdict)
        out["ppi"] = estimates.active_estimate(y, labeled, f_all, pi).as_dict()
    outside = len(_judge_scored(predicted, items))
    out["judge_undefined"] = (
        None if scored else unscored if not outside else
        f"the judge scored none of the {len(population)} items of this system's routed draw "
        f"and human labels (it scored {outside} outside them, which the routed estimate does "
        "not read)")
    return out


def _judge_scored(predicted: dict[int, float], items: list[int]) -> list[int]:
    """The items of an estimate's population the judge scored: with none, the estimate has no
    judge alone and no prediction-powered number, and says why (`judge_undefined`), drawn by
    routing or not. A judge's predictions on other systems' items are not this system's."""
    return [i for i in items if i in predicted]


def _routing_probabilities(project: Project,
                           human: dict[int, float]) -> dict[int, tuple[float, bool]]:
    """item → (the probability it had of reaching humans, whether the draw sent it), for every
    item of a routed stage's population. The probability is scaled by the share of the stage's
    drawn items judged so far: they are served in random order, so the judged ones are a random
    part of the draw."""
    rows = list(RoutingDraw.objects.filter(stage__project=project)
                .values_list("stage_id", "item_id", "probability", "drawn"))
    drawn_by_stage: dict[int, list[int]] = {}
    for stage_id, item_id, _probability, drawn in rows:
        if drawn:
            drawn_by_stage.setdefault(stage_id, []).append(item_id)
    completion = {stage_id: sum(i in human for i in ids) / len(ids)
                  for stage_id, ids in drawn_by_stage.items()}
    return {item_id: (probability * max(completion.get(stage_id, 0.0), 1e-9), drawn)
            for stage_id, item_id, probability, drawn in rows}


def judge_predictions(project: Project, ref: str) -> tuple[dict, dict[int, float],
                                                          dict[int, float]]:
    """({judge, version, ..., seen_items}, item -> predicted P(correct), item -> predicted 1-5
    score) of any judge; LookupError names what is missing. `seen_items`: the items a learned
    metric's version saw (left out of its predictions)."""
    view = judge_view(project, ref)
    if not view.calls:
        # Every verdict unparseable (or every score missing): no prediction on any item,
        # which the estimates must not present as a judge.
        if view.left_out_seen and not view.asked:
            raise LookupError(f"{view.label} was trained or calibrated on every item of "
                              f"{project.slug} it scored ({view.left_out_seen}): its "
                              "predictions there cannot correct human labels")
        raise LookupError(f"{view.label} has no usable verdict on {project.slug} "
                          f"({view.unparseable} of {view.asked} unparseable)")
    ids = sorted(view.calls)
    probability = dict(zip(ids, predictor_values(view, ids).tolist(), strict=True))
    scores = {i: c.score for i, c in view.calls.items() if c.score is not None}
    if scores and all(1 <= v <= 5 for v in scores.values()) and len(scores) == len(ids):
        score = scores
    else:
        score = {i: 1 + 4 * p for i, p in probability.items()}
    return ({"judge": view.label, "kind": view.kind, "probability": view.label,
             "probability_version": view.version, "score": view.label,
             "score_version": view.version, "left_out_seen": view.left_out_seen,
             "seen_items": view.seen_items},
            probability, score)


NO_LERC_SCORES = "no LERC scores stored for this project"


def _seen_every_item(version: str, scope: str, judge: str = "LERC") -> str:
    return (f"{judge} {version} was trained or calibrated on every item of this {scope} it "
            "scored")


def _unscored_reason(ids: list[int], *, judge: str | None, version: str | None,
                     any_prediction: bool, seen: frozenset[int]) -> str:
    """Why a system has no estimate from the judge alone and no prediction-powered one: no
    prediction of the judge (`judge`; None: the default LERC) on any of its items. No LERC
    score stored for the project, or every item it scored seen by its version in training
    (the project's note says the same); a learned judge's version that saw every item of the
    system it scored; else the judge scored none of the system's items."""
    if judge is None and not any_prediction:
        return _seen_every_item(version, "project") if version and seen else NO_LERC_SCORES
    if seen and not seen.isdisjoint(ids):
        return _seen_every_item(version, "system", judge or "LERC")
    return f"{judge or 'LERC'} scored none of this system's items"


def judge_watermark(project: Project) -> int:
    """Changes whenever a judge verdict is stored for the project."""
    return watermark(JudgeVerdict.objects.filter(item__project=project))


def estimates_report(frame: JudgmentFrame, *, project: Project, judge: str | None = None
                     ) -> dict:
    """{"systems": {source: {accuracy, mean_score, n_items, n_judged, n_scored}},
    "pairs": [{a, b, every_item_judged, accuracy: {human, ppi}}], "metric", "assumptions"},
    or {"skipped": why}.
    `judge`: any judge reference instead of the project's `estimates_judge` (whose default,
    blank, is the promoted LERC); `metric.chosen_by` says which (argument, project, default)."""
    if project.kind != TaskKind.LIKERT:
        return {"skipped": "system estimates are computed for Likert correctness projects"}
    items = list(items_measured_on(project).values_list("id", "source"))
    by_system: dict[str, list[int]] = {}
    for item_id, source in items:
        by_system.setdefault(source or "(none)", []).append(item_id)
    human = _human_scores(frame, project=project)
    routed = _routing_probabilities(project, human)
    chosen = "argument"
    if not judge and project.estimates_judge:
        judge, chosen = project.estimates_judge, "project"
    if judge:
        try:
            metric, probability, score = judge_predictions(project, judge)
            seen = metric.pop("seen_items")
        except LookupError as exc:
            where = (f"the project's estimates_judge {judge!r}" if chosen == "project"
                     else f"judge {judge!r}")
            return {"skipped": f"{where}: {exc}", "judge": judge}
        metric["chosen_by"] = chosen
    else:
        version, probability = latest_metric_scores(project, PROBABILITY_METRIC)
        score_version, score = latest_metric_scores(project, SCORE_METRIC)
        seen = learned_metric_seen_items(project, PROBABILITY_METRIC, version)
        left_out = len(seen)
        metric = {"judge": "lerc" if probability else None, "kind": "metric",
                  "probability": PROBABILITY_METRIC if probability else None,
                  "probability_version": version, "score": SCORE_METRIC if score else None,
                  "score_version": score_version, "chosen_by": "default",
                  "left_out_seen": left_out}
    report = {
        # A human score at or above the midpoint of the project's scale counts as correct.
        "correct_at": project.correct_at,
        "aggregation": project.aggregation_model,
        "metric": metric,
        "assumptions": estimates.ASSUMPTIONS,
        "systems": {}, "pairs": [],
        "measured_on": measured_on_summary(
            n_items=len(items), n_labelled=sum(item_id in human for item_id, _ in items)),
    }
    if metric.get("left_out_seen"):
        report["left_out_note"] = (
            f"{metric['judge'] or 'LERC'} {metric['probability_version'] or ''} was trained or "
            f"calibrated on {metric['left_out_seen']} of these items: its predictions there are "
            "not used (those items count as unscored, predicted unsure), since a prediction "
            "fitted to an item's human label would bias the prediction-powered estimate.")
    if not probability and not judge and version is not None and left_out:
        report["note"] = (f"{_seen_every_item(version, 'project')}: estimates are from the "
                          "human judgments alone.")
    elif not probability and not judge:
        report["note"] = (f"{NO_LERC_SCORES[0].upper()}{NO_LERC_SCORES[1:]}: estimates are "
                          "from the human judgments alone. Score the project with the promoted "
                          "LERC (score_project SLUG --metric lerc,lerc_prob) for "
                          "prediction-powered estimates.")
    # A judge's (LERC's) score is on 1-5; the humans' on the project's scale: read on theirs
    # (a judge agreeing with 7-point humans who gave 7 read 5 and "biased by -2").
    on_scale = {i: from_five_point(s, project.scale_top) for i, s in (score or {}).items()}
    for system, ids in sorted(by_system.items()):
        unscored = _unscored_reason(ids, judge=metric["judge"] if judge else None,
                                    version=metric["probability_version"],
                                    any_prediction=bool(probability), seen=seen)
        report["systems"][system] = {
            "n_items": len(ids), "n_judged": sum(i in human for i in ids),
            "n_scored": sum(i in probability for i in ids),
            "accuracy": clip_share(_quantity(human=human, predicted=probability, items=ids,
                                             to_label=lambda s: float(s >= project.correct_at),
                                             verdict=lambda p: (p >= 0.5).astype(float),
                                             routed=routed, unscored=unscored)),
            "mean_score": clip_to_scale(
                _quantity(human=human, predicted=on_scale, items=ids, to_label=float,
                          verdict=lambda s: s, routed=routed, unsure=project.correct_at,
                          unscored=unscored),
                1.0, float(project.scale_top)),
        }
    for a, b in combinations(sorted(by_system), 2):
        # Exact only when both systems had every item judged: a zero standard error alone
        # can also come from two systems each right on every judged item so far.
        pair = {"a": a, "b": b, "accuracy": {},
                "every_item_judged": all(
                    report["systems"][s]["n_judged"] == report["systems"][s]["n_items"]
                    for s in (a, b))}
        for method in ("human", "ppi", "human_new_questions"):
            first = report["systems"][a]["accuracy"].get(method)
            second = report["systems"][b]["accuracy"].get(method)
            if first and second:
                pair["accuracy"][method] = estimates.difference(
                    estimates.Estimate(**first), estimates.Estimate(**second),
                    bounds=(-1.0, 1.0), names=(a, b))  # shares differ by at most 100 points
        pair["shown"] = shown_difference(pair["accuracy"])
        report["pairs"].append(pair)
    return report


def shown_difference(differences: dict) -> str:
    """The method whose difference the pair's verdict reads (the dashboard, `report`): the
    prediction-powered one, else the humans' where the judge's cannot be made (a judge right
    on every labelled item gives no interval: `estimates.no_spread`) and theirs can; else
    the one whose reason is said."""
    for method in ("ppi", "human"):
        if (differences.get(method) or {}).get("difference") is not None:
            return method
    return "ppi" if "ppi" in differences else "human"
