"""Adaptive pairing for A/B stages: before publishing, draw which of a draft stage's items
(each a pair of systems) go to the judges, with probabilities that favour the pairs of systems
that most reduce the uncertainty of the ranking (`pair_sampling_probabilities`: towards the
design that minimizes the variance of the adjacent differences, with a uniform floor), given
every judgment the project has so far. Every item's probability and whether it was drawn are
recorded (`RoutingDraw`, as for uncertainty routing): the likelihood fit of the leaderboard
stays valid under this design, and the record lets anyone reweight or audit the draw.

A stage opts in with `"pairing": "adaptive"` and a `pairing_budget` (expected items)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db import transaction

from annotation.domain.item_content import answer_system, answers_identical
from annotation.judgment_selectors import load_judgments
from annotation.models import Stage, TaskKind
from annotation.stage_errors import StageError
from core.vocabulary import AB_CHOICES

from ..domain.leaderboard import (
    LeaderboardError,
    check_system_count,
    fit_counts,
    pair_sampling_probabilities,
    pair_table,
)
from ..reports.leaderboard import board_mask, frame_votes
from .draws import draw_population, draw_record

FLOOR = 0.1
METRIC_VERSION = "leaderboard:adaptive-pairing"


@dataclass(frozen=True)
class PairingSummary:
    population: int
    budget: int
    drawn: int
    systems: int
    votes_so_far: int

    def as_text(self) -> str:
        return (f"{self.drawn} of {self.population} items drawn (expected {self.budget}) over "
                f"{self.systems} systems, paired adaptively on {self.votes_so_far} earlier votes")


def _pair_probabilities(stage: Stage, systems: list[str], batch: int) -> tuple[dict, int]:
    """(unordered system pair → share of the next `batch` comparisons, votes so far)."""
    index = {name: i for i, name in enumerate(systems)}
    frame = load_judgments(project=stage.project)
    # The votes the leaderboard reads (`board_mask`: no gold check's, which test workers).
    votes, info = (frame_votes(frame, board_mask(frame, stage.project)) if len(frame)
                   else (None, {}))
    k = len(systems)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    if votes is None:
        return {p: 1 / len(pairs) for p in pairs}, 0
    check_system_count(len(votes.systems))  # the earlier votes' fit, as the board's
    theta = np.zeros(k)
    done = np.zeros(len(pairs))
    table = pair_table(votes, position=info.get("order_recorded", False))
    fit = fit_counts(table.design, table.counts, ties=bool((votes.outcome == 2).any()))
    for n, name in enumerate(votes.systems):
        if name in index:
            theta[index[name]] = fit.beta[0, n]
    for (left, right), counts in zip(table.rows, table.counts, strict=True):
        a, b = votes.systems[left], votes.systems[right]
        if a in index and b in index:
            i, j = sorted((index[a], index[b]))
            done[pairs.index((i, j))] += counts.sum()
    eta = float(fit.eta[0]) if np.isfinite(fit.eta[0]) else None
    covariance = np.eye(k) * 1e6  # systems without votes: their order is fully open
    for n, name in enumerate(votes.systems):
        for m, other in enumerate(votes.systems):
            if name in index and other in index:
                covariance[index[name], index[other]] = fit.covariance[n, m]
    _pairs, prob = pair_sampling_probabilities(theta, done, batch=batch, eta=eta, floor=FLOOR,
                                               covariance=covariance)
    return {p: float(q) for p, q in zip(pairs, prob, strict=True)}, len(votes)


@transaction.atomic
def stage_draw_adaptive_pairs(*, stage: Stage, budget: int | None = None) -> PairingSummary:
    """Draw the items of a draft A/B stage by adaptive pairing (Poisson sampling seeded by the
    stage), record every item's probability, and make the drawn items the stage's items. A
    draft stage may be drawn again over the same population; a published one never."""
    stage = Stage.objects.select_for_update().get(pk=stage.pk)
    if stage.project.kind != TaskKind.AB:
        raise StageError(f"{stage}: adaptive pairing ranks the systems of A/B items; this is "
                         f"a {stage.project.kind} project")
    population, budget = draw_population(stage=stage, budget=budget,
                                         budget_setting="pairing_budget", design="pairing")
    item_systems = [tuple(answer_system(item.content or {}, side, source=item.source,
                                        metadata=item.metadata) for side in AB_CHOICES)
                    for item in population]
    systems = sorted({s for pair in item_systems for s in pair})
    index = {name: i for i, name in enumerate(systems)}
    try:
        # The leaderboard's cap (`check_system_count`): the design's memory grows with the
        # square of the pairs, so a `system` naming the item exhausted the server's memory.
        check_system_count(len(systems))
        share, votes_so_far = _pair_probabilities(stage, systems, budget)
    except LeaderboardError as error:
        raise StageError(f"{stage}: adaptive pairing cannot rank these systems: {error}"
                         ) from None
    # An item whose two answers are one text compares nothing (the leaderboard leaves its
    # votes out): it is never drawn, as a pair of one system is not.
    keys = [tuple(sorted((index[a], index[b]))) if not answers_identical(item.content) else
            (index[a], index[a]) for (a, b), item in zip(item_systems, population, strict=True)]
    available = {key: keys.count(key) for key in set(keys)}
    # Only pairs the stage has items for can be drawn: their shares are renormalized.
    total = sum(share.get(key, 0) for key in available)
    pi = np.array([min(1.0, budget * share[key] / total / available[key])
                   if key[0] != key[1] else 0.0 for key in keys])
    drawn = draw_record(stage=stage, population=population, probabilities=pi, budget=budget,
                        predicted=None, metric_version=METRIC_VERSION,
                        settings={"pairing": "adaptive", "pairing_budget": budget})
    return PairingSummary(population=len(population), budget=budget, drawn=drawn,
                          systems=len(systems), votes_so_far=votes_so_far)
