"""Reads of judgments shaped for statistics: shared by reports, metric evaluation and LERC."""
from __future__ import annotations

from dataclasses import dataclass

from annotation.models import Judgment, Project, Stage, StageKind

from .aggregation import mean_by_item

# Practice and qualification answers test the workers, not the items: they never count towards
# an item's gold label.
NON_DATA_STAGE_KINDS = (StageKind.PRACTICE, StageKind.QUALIFICATION)


@dataclass(frozen=True)
class JudgmentRow:
    id: int
    item_id: int
    worker_id: int
    stage_id: int
    score: float | None
    choice: str
    choices: list
    difficult: bool | None
    aspects: list
    extra: dict
    presented_order: list
    time_spent_ms: int | None


def judgment_rows(
    *, project: Project, stage: Stage | None = None, include_non_data_stages: bool = False
) -> list[JudgmentRow]:
    """Every judgment of a project (or one stage) as light rows, ordered by id."""
    queryset = Judgment.objects.filter(item__project=project)
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    elif not include_non_data_stages:
        queryset = queryset.exclude(stage__kind__in=NON_DATA_STAGE_KINDS)
    fields = [f for f in JudgmentRow.__dataclass_fields__]
    return [JudgmentRow(*values) for values in queryset.order_by("id").values_list(*fields)]


def item_gold_scores(
    *, project: Project, stage: Stage | None = None, znormalize: bool = False
) -> dict[int, float]:
    """Likert gold score per item id: mean of its judgments, optionally z-normalized per
    annotator first."""
    triples = [
        (row.worker_id, row.item_id, row.score)
        for row in judgment_rows(project=project, stage=stage)
        if row.score is not None
    ]
    return mean_by_item(triples, znormalize=znormalize)
