"""Reads of judgments shaped for statistics: shared by reports, metric evaluation and LERC."""
from __future__ import annotations

from dataclasses import dataclass

from annotation.models import Project, Stage
from annotation.selectors import NON_DATA_STAGE_KINDS as NON_DATA_STAGE_KINDS
from annotation.selectors import judgments_that_count

from .aggregation import mean_by_item


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
    """The judgments that count (`annotation.selectors.judgments_that_count`) of a project (or
    one stage) as light rows, ordered by id."""
    queryset = judgments_that_count(
        project=project, data_stages_only=stage is None and not include_non_data_stages)
    if stage is not None:
        queryset = queryset.filter(stage=stage)
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
