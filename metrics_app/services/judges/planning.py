"""The judge recommendation for a study (metrics_app/domain/judge_planning.py): the project's
human labels as the pilot, every judge's values on those items, what running each judge over
every item costs (LLM judges: their mean cost per stored verdict; metrics: nothing), and the
researcher's budget and price per human label."""
from __future__ import annotations

import numpy as np

from annotation.models import Project
from annotation.selectors import items_measured_on, measured_on_summary

from ...domain.estimates import UNSURE_PROBABILITY
from ...domain.judge_planning import plan, plan_costs_error
from ...judge_selectors import default_refs, judge_view, predictor_values
from ...models import JudgeVerdict, JudgeVersion
from .alignment import human_labels
from .runs import judged_items


def judge_plan(*, project: Project, budget: float, label_cost: float,
               refs: list[str] | None = None) -> dict:
    if why := plan_costs_error(budget=budget, label_cost=label_cost):
        raise ValueError(why)  # before the data is read: the input is what is wrong
    human = human_labels(project)
    n_items = items_measured_on(project).count()
    n_judged = judged_items(project).count()
    views = []
    errors = {}
    for ref in refs or default_refs(project):
        try:
            views.append(judge_view(project, ref))
        except LookupError as exc:
            errors[ref] = str(exc)
    # The pilot: labelled items every judge scored (the same items for all), a learned
    # metric's seen items among them: the estimates predict those unsure for good, so the plan
    # does too (left out instead, the pilot would hold only the items the judge predicts and
    # promise a narrower interval than the estimates will give).
    common = sorted(set(human).intersection(*(set(v.calls) | v.seen_items for v in views))
                    if views else human)
    if len(common) < 3 <= len(human):
        # The pilot is the labelled items every judge scored: name the judge that narrows it,
        # or "needs 3 pilot labels" reads wrong beside a project with many.
        covered = ", ".join(
            f"{view.label} scored {len(set(human) & (set(view.calls) | view.seen_items))}"
            for view in views)
        raise ValueError(f"a plan needs at least 3 pilot items (labelled items every judge "
                         f"scored): {len(human)} items carry a human label, but {covered} of "
                         f"them ({len(common)} in common); run the judge on more labelled "
                         "items or leave it out of the plan")
    y = [human[i]["label"] for i in common]
    predictions, costs = {}, {}
    for view in views:
        predictions[view.label] = _pilot_predictions(view, common)
        # A run asks every item of the study, gold checks too (`judged_items`); the estimates'
        # population (`n_items`) leaves those out, and the plan priced the judge on it.
        costs[view.label] = _judge_cost(view, n_judged)
    result = plan(y=y, predictions=predictions, n_items=n_items, label_cost=label_cost,
                  judge_costs=costs, budget=budget)
    result["errors"] = errors
    result["measured_on"] = measured_on_summary(n_items=n_items, n_labelled=len(human))
    # A learned judge's predictions on the answers its version trained or calibrated on are
    # not used (`metric_view`): say how many, or a weak learned judge on a pilot it memorized
    # reads as a bug.
    result["left_out_seen"] = {view.label: view.left_out_seen for view in views
                               if view.left_out_seen}
    return result


def _pilot_predictions(view, items: list[int]) -> list[float]:
    """The judge's value on each pilot item as the estimates read it: `predictor_values` where
    it has a usable prediction, unsure (`UNSURE_PROBABILITY`) on an item its learned version
    saw."""
    scored = [i for i in items if i in view.calls]
    values = dict(zip(scored, predictor_values(view, scored).tolist(), strict=True))
    return [values.get(i, UNSURE_PROBABILITY) for i in items]


def _judge_cost(view, n_items: int) -> float:
    if view.kind != "llm":
        return 0.0
    version = JudgeVersion.objects.get(judge__name=view.label.split("@")[0],
                                       version=view.version)
    costs = [c for c in JudgeVerdict.objects.filter(judge_version=version)
             .values_list("cost", flat=True) if c is not None]
    per_call = float(np.mean(costs)) if costs else 0.0
    calls_per_item = 2 if view.orders else 1
    return per_call * calls_per_item * n_items
