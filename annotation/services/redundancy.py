"""Adaptive redundancy of a stage (`annotation/domain/redundancy.py` has the rule): after every
submit, the submitted items' targets are brought up to date, and picking
(`assignments/picking.py::_target`) serves an item again only while it is below its target.

An item is settled by the judgments that count (`judgments_that_count`: not rejected, returned
or flagged work, nor a blocked worker's), as every other door reads them; what gives a slot back
is `annotation.selectors.judgments_releasing_slots`, the rule fixed redundancy reads too. The picking deficit
counts every judgment of the stage, so the stored target adds the item's judgments that do not
count: each one is replaced. Blocking or unblocking a worker and rejecting an assignment change
which judgments count without a submit, so they call `adaptive_targets_refresh` (so does a Prolific session the
provider does not know: until then its judgments are presumed to count).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from annotation.domain.redundancy import likert_label, next_target
from annotation.models import (
    AdaptiveTarget,
    Judgment,
    Provider,
    Stage,
    TaskKind,
)
from annotation.selectors import judgments_releasing_slots
from annotation.stage_errors import GuardFailed
from annotation.stage_plan_selectors import stage_adaptive_rule


def adaptive_redundancy_guard(*, stage: Stage) -> None:
    """Checked at publishing: a well-formed setting, and a provider that picks items per
    worker (MTurk HITs are built with fixed items before anyone answers)."""
    rule = stage_adaptive_rule(stage, strict=True)
    if rule is not None and stage.provider == Provider.MTURK:
        raise GuardFailed(f"{stage}: adaptive redundancy needs items picked per worker "
                          "(in-house or Prolific); MTurk HITs fix their items when published")


def _labels(stage: Stage, ids: list[int] | None) -> tuple[dict[int, list], dict[int, int]]:
    """({item id: labels of the judgments that count}, {item id: judgments that do not}) in
    the stage, for `ids` (None: every item)."""
    likert = stage.project.kind == TaskKind.LIKERT
    top = stage.project.scale_top
    labels: dict[int, list] = defaultdict(list)
    given = Judgment.objects.filter(stage=stage)
    if ids is not None:
        given = given.filter(item_id__in=ids)
    # The one rule of what gives a slot back (`judgments_releasing_slots`): a Prolific session
    # still being verified is presumed real until the provider says otherwise
    # (`assignment_verification_failed` then refreshes the targets).
    released = judgments_releasing_slots(given, project=stage.project)
    counted = given.exclude(pk__in=released.values("pk"))
    for item_id, score, choice in counted.values_list("item_id", "score", "choice"):
        if likert and score is not None:
            labels[item_id].append(likert_label(score, top))
        elif not likert and choice:
            labels[item_id].append(choice)
    # Judgments that do not count still hold a slot in the picking deficit: the target makes
    # room for one replacement each.
    not_counted: dict[int, int] = defaultdict(int)
    for item_id in released.values_list("item_id", flat=True):
        not_counted[item_id] += 1
    return labels, not_counted


def adaptive_targets_update(*, stage: Stage, item_ids: Iterable[int]) -> int:
    """Recompute the targets of these items from their judgments in the stage; returns how
    many rows changed."""
    rule = stage_adaptive_rule(stage)
    ids = list(item_ids)
    if rule is None or not ids:
        return 0
    labels, not_counted = _labels(stage, ids)
    existing = {t.item_id: t for t in AdaptiveTarget.objects.filter(stage=stage, item_id__in=ids)}
    changed = 0
    for item_id in ids:
        target, settled = next_target(labels.get(item_id, []), rule)
        target += not_counted[item_id]
        row = existing.get(item_id)
        if row is None:
            AdaptiveTarget.objects.create(stage=stage, item_id=item_id, target=target,
                                          settled=settled)
            changed += 1
        elif (row.target, row.settled) != (target, settled):
            row.target, row.settled = target, settled
            row.save(update_fields=["target", "settled", "updated_at"])
            changed += 1
    return changed


def adaptive_targets_refresh(*, judgments) -> int:
    """Recompute the targets of the items of these judgments (a queryset), in each stage of
    theirs with adaptive redundancy: called when which of them count
    changes without a submit (a worker blocked or unblocked, an assignment rejected, a session
    the provider does not know, an abandoned assignment released with items it confirmed)."""
    pairs: dict[int, set[int]] = defaultdict(set)
    for stage_id, item_id in judgments.order_by().values_list("stage_id", "item_id").distinct():
        pairs[stage_id].add(item_id)
    changed = 0
    for stage in Stage.objects.filter(pk__in=pairs).select_related("project"):
        changed += adaptive_targets_update(stage=stage, item_ids=sorted(pairs[stage.pk]))
    return changed


def adaptive_redundancy_summary(*, stage: Stage) -> dict | None:
    """What adaptive redundancy did in a stage: items settled by agreement, items that reached
    `max` still disagreeing, judgments given, and judgments saved against a fixed redundancy of
    `max` (for the items whose collection is finished)."""
    rule = stage_adaptive_rule(stage)
    if rule is None:
        return None
    # Practice and excluded items are not data (`judgments_that_count`): every worker answers
    # a practice item, which would read as judgments spent beyond any redundancy.
    targets = list(AdaptiveTarget.objects.filter(stage=stage).exclude(item__is_practice=True)
                   .exclude(item__excluded=True).values_list("item_id", "target", "settled"))
    counts = defaultdict(int)
    for item_id in Judgment.objects.filter(stage=stage).values_list("item_id", flat=True):
        counts[item_id] += 1
    finished = [(i, t) for i, t, settled in targets if settled]
    # Items that needed every judgment allowed (whether the last one settled them or not);
    # a target also makes room for replacing judgments that do not count.
    _counted, not_counted = _labels(stage, None)
    at_max = sum(1 for i, t in finished if t - not_counted[i] >= rule.max)
    spent = sum(counts[i] for i, _t in finished)
    return {
        "stage": stage.name, "min": rule.min, "max": rule.max, "agreement": rule.agreement,
        "items_finished": len(finished), "items_settled_by_agreement": len(finished) - at_max,
        "items_reaching_max": at_max, "items_collecting": len(targets) - len(finished),
        "judgments_finished_items": spent,
        "judgments_fixed_redundancy": rule.max * len(finished),
        "judgments_saved": rule.max * len(finished) - spent,
    }
