"""Active routing: a draft stage's items are sent to humans with probabilities that grow with
LERC's uncertainty, so the human budget goes where the metric is least sure, and the
probabilities are recorded (`RoutingDraw`) so that the system estimates stay unbiased
(active inference, Zrnic and Candès 2024; metrics_app.domain.estimates).

A stage opts in with the setting `"routing": "uncertainty"` (`"random"`, the default, serves
every item of the stage); the draw is made here, before publishing, from the stored
`lerc_prob` scores of the promoted LERC, or of any judge given (`judge=`: `metric:NAME`, an
LLM or imported judge; its probability, else its verdict or score on a 0-1 scale). Items the
judge has not scored count as maximally unsure (P = 0.5). Publishing checks the mode and that
the draw exists (annotation/services/stages.py: `routing_guard`, the one owner of that check).
The admin action that runs the draw: metrics_app/stage_admin_actions.py."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db import transaction

from annotation.models import Stage, TaskKind
from annotation.stage_errors import StageError

from ..domain.estimates import routing_probabilities
from ..model_selectors import learned_metric_seen_items
from ..reports.estimates import PROBABILITY_METRIC, judge_predictions, latest_metric_scores
from .draws import draw_population, draw_record


@dataclass(frozen=True)
class RoutingSummary:
    population: int
    budget: int
    drawn: int
    scored: int
    metric_version: str | None

    def as_text(self) -> str:
        return (f"{self.drawn} of {self.population} items sent to humans (expected "
                f"{self.budget}); {self.scored} routed on "
                f"{_judge_name(self.metric_version)}, "
                f"{self.population - self.scored} unscored counted as unsure")


def _judge_name(version: str | None) -> str:
    """LERC's version, or another judge's label (`name@version`, `metric:NAME`)."""
    if version and ("@" in version or version.startswith("metric:")):
        return version
    return f"LERC {version or '—'}"


@transaction.atomic
def stage_route_by_uncertainty(*, stage: Stage, budget: int | None = None,
                               judge: str | None = None) -> RoutingSummary:
    """Draw which of the stage's items go to humans (Poisson sampling, seeded by the stage),
    on the P(correct) of `judge`, else the stage's `routing_judge` setting, else LERC;
    record every item's probability and whether it was drawn, and make the drawn items the
    stage's items. A draft stage may be drawn again (the new draw replaces the old one over
    the same population); a published one never."""
    stage = Stage.objects.select_for_update().get(pk=stage.pk)
    if stage.project.kind != TaskKind.LIKERT:
        raise StageError(f"{stage}: routing by uncertainty needs LERC's P(correct), which only "
                         "Likert correctness projects have")
    population, budget = draw_population(stage=stage, budget=budget,
                                         budget_setting="routing_budget", design="routing")
    from_setting = not judge and bool((stage.settings or {}).get("routing_judge"))
    if from_setting:
        judge = stage.settings["routing_judge"]
    if judge:
        try:
            about, predicted, _score = judge_predictions(stage.project, judge)
        except LookupError as exc:
            where = "the stage's routing_judge setting" if from_setting else "--judge"
            raise StageError(f"{stage}: {where} {judge!r}: {exc}") from None
        version = about["judge"]
    else:
        version, predicted = latest_metric_scores(stage.project, PROBABILITY_METRIC)
    if not predicted and version is not None and not judge:
        # Scores are stored, but every one is withheld: "no LERC scores stored" would send the
        # researcher to score a project that is scored.
        seen = len(learned_metric_seen_items(stage.project, PROBABILITY_METRIC, version))
        if seen:
            raise StageError(
                f"{stage}: LERC {version} was trained or calibrated on every item of "
                f"{stage.project.slug} it scored ({seen} items seen): its predictions there are its "
                "memory of their human labels, so they cannot route (train a version that "
                "leaves some of this project's items out, or route on another judge with "
                "--judge)")
    if not predicted:
        raise StageError(f"{stage}: no LERC scores stored for this project; score it with the "
                         f"promoted LERC first (score_project SLUG --metric {PROBABILITY_METRIC})")
    p = np.array([predicted.get(item.pk, 0.5) for item in population], dtype=float)
    pi = routing_probabilities(p, budget)
    drawn = draw_record(stage=stage, population=population, probabilities=pi, budget=budget,
                        predicted=predicted, metric_version=version or "",
                        settings={"routing": "uncertainty", "routing_budget": budget})
    return RoutingSummary(population=len(population), budget=budget, drawn=drawn,
                          scored=sum(item.pk in predicted for item in population),
                          metric_version=version)
