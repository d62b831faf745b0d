"""What uncertainty routing (`routing.py`) and adaptive pairing (`pairing.py`) share: a draft
stage's population of items and its budget, checked the same way, and the draw itself —
Poisson sampling seeded by the stage, every item's probability recorded as a `RoutingDraw` (so
estimates can weight by it and anyone can audit it), the drawn items made the stage's items and
the design written into its settings."""
from __future__ import annotations

import numpy as np

from annotation.models import Item, RoutingDraw, Stage, StageKind, StageStatus
from annotation.services.stage_plans import stage_items_choose
from annotation.stage_errors import StageError


def draw_population(*, stage: Stage, budget: int | None, budget_setting: str,
                    design: str) -> tuple[list[Item], int]:
    """The items a draft stage draws from (an earlier draw's population, so a redraw covers
    the same items; else the stage's data items) and the budget (`budget`, else the stage's
    `budget_setting`). `design` names the draw in the refusals ("routing", "pairing")."""
    if stage.status != StageStatus.DRAFT:
        raise StageError(f"{stage} is {stage.get_status_display().lower()}: its {design} draw "
                         "is fixed once it is published")
    if stage.kind not in (StageKind.TRIAL, StageKind.FULL, StageKind.PILOT):
        raise StageError(f"{stage}: only trial, pilot and full stages are drawn by {design} "
                         "(qualification and practice items go to every worker)")
    budget = int(budget if budget is not None else (stage.settings or {}).get(budget_setting)
                 or 0)
    earlier = list(stage.routing_draws.select_related("item").order_by("item_id"))
    population = ([draw.item for draw in earlier] if earlier
                  else [item for item in stage_items_choose(stage=stage, store=False)
                        if not item.is_practice and not item.is_gold_check])
    if not population:
        raise StageError(f"{stage} has no items to draw from")
    if not 1 <= budget <= len(population):
        raise StageError(f"{stage}: the {design} budget must be between 1 and the "
                         f"{len(population)} items of the stage, not {budget}")
    return population, budget


def draw_record(*, stage: Stage, population: list[Item], probabilities: np.ndarray,
                budget: int, predicted: dict[int, float] | None, metric_version: str,
                settings: dict) -> int:
    """Draw with `probabilities` (seeded by the stage, the population and the budget), record
    each item's probability (items of probability 0 are not recorded when `predicted` is None:
    they could never be drawn), make the drawn items the stage's items and merge `settings`
    into the stage's. Returns how many were drawn."""
    drawn = (np.random.default_rng([stage.pk, len(population), budget])
             .random(len(probabilities)) < probabilities)
    RoutingDraw.objects.filter(stage=stage).delete()
    RoutingDraw.objects.bulk_create([
        RoutingDraw(stage=stage, item=item, probability=float(prob), drawn=bool(sent),
                    predicted=None if predicted is None else predicted.get(item.pk),
                    metric_version=metric_version)
        for item, prob, sent in zip(population, probabilities, drawn, strict=True)
        if predicted is not None or prob > 0])
    stage.items.set([item for item, sent in zip(population, drawn, strict=True) if sent])
    stage.settings = {**(stage.settings or {}), **settings}
    stage.save(update_fields=["settings", "updated_at"])
    return int(drawn.sum())
