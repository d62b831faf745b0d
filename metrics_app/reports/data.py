"""Judgments of a project loaded once into numpy columns for the report builders.

Two `values_list` queries (judgments, items) instead of model instances: a project of 40,000
items × 3 judgments loads in a fraction of a second and every report is array arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from annotation.models import Item, Judgment, Project, Stage, TaskKind

from ..agreement import (
    FleissResult,
    Level,
    fleiss_kappa_from_counts,
    krippendorff_alpha_from_counts,
)
from ..selectors import NON_DATA_STAGE_KINDS

GROUP_FIELDS = ("dataset", "split", "source", "domain", "text_level", "stage")
LIKERT_DOMAIN = np.arange(1.0, 6.0)
CHOICE_DOMAIN = np.array(["A", "B", "C", "D"])


@dataclass
class JudgmentFrame:
    kind: str
    id: np.ndarray
    item_id: np.ndarray
    worker_id: np.ndarray
    stage_id: np.ndarray
    score: np.ndarray  # float, NaN when absent
    choice: np.ndarray  # str ("" when absent)
    time_ms: np.ndarray  # float, NaN when absent
    difficult: np.ndarray  # object: True / False / None
    aspects: list
    extra: list
    stage_names: dict[int, str]
    stage_kinds: dict[int, str]
    presented_order: list
    choices: list
    # item columns, aligned with `item_table_ids`; `item_pos` maps each judgment to its row
    item_table_ids: np.ndarray
    item_pos: np.ndarray
    items: dict[str, np.ndarray] = field(default_factory=dict)

    def data_mask(self) -> np.ndarray:
        """Judgments of data stages (not practice or qualification)."""
        non_data = {pk for pk, kind in self.stage_kinds.items() if kind in NON_DATA_STAGE_KINDS}
        return ~np.isin(self.stage_id, list(non_data))

    def __len__(self) -> int:
        return len(self.id)

    @property
    def watermark(self) -> int:
        return int(self.id.max()) if len(self.id) else 0

    def item_column(self, name: str) -> np.ndarray:
        """An item attribute per judgment (dataset, source, ...; "stage" is the stage name)."""
        if name == "stage":
            return np.array([self.stage_names[s] for s in self.stage_id], dtype=object)
        return self.items[name][self.item_pos]

    # -- values -------------------------------------------------------------------------------

    def default_level(self) -> Level:
        return "interval" if self.kind == TaskKind.LIKERT else "nominal"

    def coded_values(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mask of judgments with a value, value index into the domain, numeric domain)."""
        if self.kind == TaskKind.LIKERT:
            has = ~np.isnan(self.score)
            domain = np.union1d(LIKERT_DOMAIN, np.unique(self.score[has]))
            index = np.searchsorted(domain, self.score)
            return has, np.where(has, index, 0), domain
        has = self.choice != ""
        labels = np.union1d(CHOICE_DOMAIN, np.unique(self.choice[has]))
        index = np.searchsorted(labels, self.choice)
        return has, np.where(has, index, 0), np.arange(len(labels), dtype=float)

    def counts(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(items × values counts over the judgments in `mask`, numeric domain)."""
        has, index, domain = self.coded_values()
        keep = has if mask is None else has & mask
        counts = np.zeros((len(self.item_table_ids), len(domain)), dtype=np.int64)
        np.add.at(counts, (self.item_pos[keep], index[keep]), 1)
        return counts[counts.sum(axis=1) > 0], domain

    def alpha(self, *, level: Level | None = None, mask: np.ndarray | None = None) -> float | None:
        counts, domain = self.counts(mask)
        return krippendorff_alpha_from_counts(counts, domain, level or self.default_level())

    def fleiss(self, *, mask: np.ndarray | None = None, n_raters: int | None = None) -> FleissResult:
        counts, _domain = self.counts(mask)
        return fleiss_kappa_from_counts(counts, n_raters=n_raters)


def load_judgments(
    *, project: Project, stage: Stage | None = None, include_non_data_stages: bool = False
) -> JudgmentFrame:
    """Every judgment of a project (or one stage) with its item's grouping columns.

    Practice and qualification stages are left out unless asked for (they test workers, not
    items), as in `metrics_app.selectors.judgment_rows`."""
    queryset = Judgment.objects.filter(item__project=project)
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    elif not include_non_data_stages:
        queryset = queryset.exclude(stage__kind__in=NON_DATA_STAGE_KINDS)
    kind = project.kind
    rich = kind != TaskKind.LIKERT  # A/B and MC reports read aspects, difficulty, pilot guesses
    fields = ["id", "item_id", "worker_id", "stage_id", "score", "choice", "time_spent_ms"]
    if rich:
        fields += ["difficult", "aspects", "extra", "presented_order", "choices"]
    rows = list(queryset.order_by("id").values_list(*fields))
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(fields)

    def ints(values) -> np.ndarray:
        return np.fromiter(values, dtype=np.int64, count=len(values))

    def floats(values) -> np.ndarray:
        return np.array([np.nan if v is None else v for v in values], dtype=float)

    item_id = ints(columns[1])
    item_table = list(
        Item.objects.filter(project=project).order_by("id").values_list(
            "id", "dataset", "source", "split", "domain", "text_level", "is_gold_check",
            "is_practice", "gold", "metadata", "external_id",
        )
    )
    item_cols = list(zip(*item_table, strict=True)) if item_table else [()] * 11
    item_ids = ints(item_cols[0])
    items = {
        name: np.array(item_cols[i], dtype=object)
        for i, name in enumerate(
            ["dataset", "source", "split", "domain", "text_level", "is_gold_check",
             "is_practice", "gold", "metadata", "external_id"], start=1
        )
    }
    stages = list(Stage.objects.filter(project=project).values_list("id", "name", "kind"))
    return JudgmentFrame(
        kind=kind,
        id=ints(columns[0]),
        item_id=item_id,
        worker_id=ints(columns[2]),
        stage_id=ints(columns[3]),
        score=floats(columns[4]),
        choice=np.array(columns[5], dtype=str) if rows else np.array([], dtype=str),
        time_ms=floats(columns[6]),
        difficult=np.array(columns[7], dtype=object) if rich else np.full(len(rows), None),
        aspects=list(columns[8]) if rich else [],
        extra=list(columns[9]) if rich else [],
        stage_names={pk: name for pk, name, _kind in stages},
        stage_kinds={pk: kind for pk, _name, kind in stages},
        presented_order=list(columns[10]) if rich else [],
        choices=list(columns[11]) if rich else [],
        item_table_ids=item_ids,
        item_pos=np.searchsorted(item_ids, item_id),
        items=items,
    )
