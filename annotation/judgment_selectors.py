"""The judgment loaders for statistics, all built on the counting rule
(`annotation.selectors.judgments_that_count`): `load_judgments` reads the judgments that count of
a project (or a stage) once into numpy columns (a `JudgmentFrame`) for agreement, reports and
stage gates; `judgment_rows` gives them as light rows and `item_gold_scores` as a human score per
item (adjudicated, else the project's mean or median: `with_adjudications`), for metric
evaluation and the judges page.

Two `values_list` queries (judgments, items) instead of model instances: a project of 40,000
items × 3 judgments loads in a fraction of a second and every report is array arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import FloatField, Max, Q, QuerySet, Value
from django.db.models.functions import Coalesce

from annotation.domain.aggregation import (
    LIKERT_LABELS,
    AggregateLabel,
    aggregate_items,
    aggregation_kind,
    mean_by_item,
    resolve_aggregation,
    znormalize_by_annotator,
)
from annotation.domain.agreement import (
    FleissResult,
    Level,
    agreement_undefined_reason,
    fleiss_kappa_from_counts,
    krippendorff_alpha_from_counts,
)
from annotation.domain.answers import VALIDITY_CHOICES
from annotation.models import (
    COLLECTION_STAGE_KINDS,
    NON_DATA_STAGE_KINDS,
    Adjudication,
    ExperimentMode,
    Item,
    Judgment,
    Project,
    Stage,
    TaskKind,
)
from annotation.selectors import data_only_for, judgment_time_ms, judgments_that_count
from core.vocabulary import MC_ROLES

MISSING = -1e300  # stands for NULL in the numeric query
GROUP_FIELDS = ("dataset", "split", "source", "domain", "text_level", "stage")
LIKERT_DOMAIN = np.arange(1.0, 6.0)
CHOICE_DOMAIN = np.array(MC_ROLES)


def watermark(rows: QuerySet | np.ndarray) -> int:
    """The one freshness rule of every cached result (project report, dashboard charts,
    metric evaluation, judge alignment, estimates, a LERC data set's pin): the highest id of the
    rows it read, 0 when none. Judgments, metric scores and judge verdicts are append-only, so
    a result whose watermarks still equal the tables' is fresh for new rows (what changes
    without a new row -- the counting rule, item edits -- is compared separately).
    `rows`: a queryset, or the ids already loaded (a `JudgmentFrame`'s)."""
    if isinstance(rows, QuerySet):
        return rows.aggregate(top=Max("id"))["top"] or 0
    return int(rows.max()) if len(rows) else 0


@dataclass
class JudgmentFrame:
    kind: str
    id: np.ndarray
    item_id: np.ndarray
    worker_id: np.ndarray
    stage_id: np.ndarray
    score: np.ndarray  # float, NaN when absent
    choice: np.ndarray  # str ("" when absent)
    time_ms: np.ndarray  # float, NaN when absent: the server's measure, else the browser's
    difficult: np.ndarray  # object: True / False / None
    aspects: list
    extra: list
    stage_names: dict[int, str]
    stage_kinds: dict[int, str]
    presented_order: list
    choices: list
    justification: list  # str per judgment ("" when none); A/B and MC only, [] for Likert
    # item columns, aligned with `item_table_ids`; `item_pos` maps each judgment to its row
    item_table_ids: np.ndarray
    item_pos: np.ndarray
    items: dict[str, np.ndarray] = field(default_factory=dict)
    # The one stage the frame was loaded for (`load_judgments(stage=...)`), None for a project.
    stage_read: int | None = None

    def data_mask(self) -> np.ndarray:
        """The judgments a read counts: those that are data, as the counting rule says
        (`judgments_that_count`): of data stages (not practice or qualification) and not of a
        practice item (every worker answers those first to learn the task) nor of an item
        removed from the study (excluded). A frame loaded with `include_non_data_stages` holds
        the others too, for worker-quality numbers (practice accuracy, STARC's practice rule).
        A frame read for one practice or qualification stage counts every judgment it holds
        (`data_only_for`: reading that stage is asking for its work), as the stage's own row
        and α do (`stage_mask`); a report narrowed to a qualification stage said "0 judgments,
        no judgments that count yet" above a stage row of 2 judgments and their α."""
        if "_data_mask" in self.__dict__:
            return self.__dict__["_data_mask"].copy()
        if (self.stage_read is not None
                and self.stage_kinds.get(self.stage_read) in NON_DATA_STAGE_KINDS):
            self.__dict__["_data_mask"] = self.stage_id == self.stage_read
            return self.__dict__["_data_mask"].copy()
        non_data = {pk for pk, kind in self.stage_kinds.items() if kind in NON_DATA_STAGE_KINDS}
        practice = ((self.items["is_practice"] | self.items["excluded"])[self.item_pos]
                    .astype(bool) if len(self) else np.zeros(0, dtype=bool))
        self.__dict__["_data_mask"] = ~np.isin(self.stage_id, list(non_data)) & ~practice
        return self.__dict__["_data_mask"].copy()

    def __len__(self) -> int:
        return len(self.id)

    @property
    def watermark(self) -> int:
        return watermark(self.id)

    def codes(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(sorted distinct values as str, code per judgment) of an item field or "stage";
        computed on the item table once, then indexed per judgment."""
        cache = self.__dict__.setdefault("_codes", {})
        if name not in cache:
            if name == "stage":
                ids = np.array(sorted(self.stage_names), dtype=np.int64)
                labels_per_id = np.array([self.stage_names[i] for i in ids], dtype=str)
                labels, inverse = np.unique(labels_per_id, return_inverse=True)
                cache[name] = (labels, inverse[np.searchsorted(ids, self.stage_id)]
                               if len(ids) else np.zeros(0, dtype=np.int64))
            else:
                labels, inverse = _factorize_as_text(self.items[name])
                cache[name] = (labels, inverse[self.item_pos] if len(inverse)
                               else np.zeros(len(self), dtype=np.int64))
        return cache[name]

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
        if "_coded" not in self.__dict__:
            self.__dict__["_coded"] = self._coded_values()
        return self.__dict__["_coded"]

    def _coded_values(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.kind == TaskKind.LIKERT:
            has = ~np.isnan(self.score)
            domain = np.union1d(LIKERT_DOMAIN, np.unique(self.score[has]))
            index = np.searchsorted(domain, self.score)
            return has, np.where(has, index, 0), domain
        has = self.choice != ""
        labels = self._choice_labels()
        index = np.searchsorted(labels, self.choice)
        return has, np.where(has, index, 0), np.arange(len(labels), dtype=float)

    def _choice_labels(self) -> np.ndarray:
        return np.union1d(CHOICE_DOMAIN, np.unique(self.choice[self.choice != ""]))

    def counts(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(items × values counts over the judgments in `mask`, numeric domain)."""
        has, index, domain = self.coded_values()
        keep = has if mask is None else has & mask
        flat = np.bincount(self.item_pos[keep] * len(domain) + index[keep],
                           minlength=len(self.item_table_ids) * len(domain))
        counts = flat.reshape(len(self.item_table_ids), len(domain))
        return counts[counts.sum(axis=1) > 0], domain

    def value_labels(self) -> list[str]:
        """The answer each column of `counts` stands for ("3", "A", "tie")."""
        _has, _index, domain = self.coded_values()
        if self.kind == TaskKind.LIKERT:
            return [format(float(v), "g") for v in domain]
        return [str(v) for v in self._choice_labels()]

    def alpha(self, *, level: Level | None = None, mask: np.ndarray | None = None) -> float | None:
        return self.alpha_with_reason(level=level, mask=mask)[0]

    def alpha_with_reason(self, *, level: Level | None = None, mask: np.ndarray | None = None
                          ) -> tuple[float | None, str | None]:
        """(α, None), or (None, why α is undefined: `agreement_undefined_reason`)."""
        counts, domain = self.counts(mask)
        alpha = krippendorff_alpha_from_counts(counts, domain, level or self.default_level())
        if alpha is not None:
            return alpha, None
        return None, (agreement_undefined_reason(counts, self.value_labels())
                      or "undefined for these judgments")

    def fleiss(self, *, mask: np.ndarray | None = None, n_raters: int | None = None) -> FleissResult:
        counts, _domain = self.counts(mask)
        return fleiss_kappa_from_counts(counts, n_raters=n_raters)


def load_judgments(
    *, project: Project, stage: Stage | None = None, include_non_data_stages: bool = False
) -> JudgmentFrame:
    """Every judgment of a project (or one stage) with its item's grouping columns.

    Only judgments that count (`annotation.selectors.judgments_that_count`: no rejected,
    returned or flagged work, no blocked worker); practice and qualification work (those
    stages, and practice items in any stage) is left out unless asked for or a practice or
    qualification `stage` is read (it tests workers, not items; `data_only_for`)."""
    queryset = judgments_that_count(project=project, data_stages_only=data_only_for(
        stage=stage, include_qualification=include_non_data_stages))
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    kind = project.kind
    rich = kind != TaskKind.LIKERT  # A/B and MC reports read aspects, difficulty, pilot guesses
    table, choice, rich_columns = _judgment_columns(queryset, kind=kind, rich=rich)
    item_id = table[:, 1].astype(np.int64)
    item_ids, items = _item_columns(project, rich=rich)
    stages = list(Stage.objects.filter(project=project).values_list("id", "name", "kind"))
    return JudgmentFrame(
        kind=kind,
        id=table[:, 0].astype(np.int64),
        item_id=item_id,
        worker_id=table[:, 2].astype(np.int64),
        stage_id=table[:, 3].astype(np.int64),
        score=table[:, 4],
        choice=choice,
        time_ms=table[:, 5],
        difficult=np.array(rich_columns[0], dtype=object),
        aspects=list(rich_columns[1]),
        extra=list(rich_columns[2]),
        stage_names={pk: name for pk, name, _kind in stages},
        stage_kinds={pk: kind for pk, _name, kind in stages},
        presented_order=list(rich_columns[3]),
        choices=list(rich_columns[4]),
        justification=list(rich_columns[5]),
        item_table_ids=item_ids,
        item_pos=np.searchsorted(item_ids, item_id),
        items=items,
        stage_read=stage.pk if stage is not None else None,
    )


def _factorize_as_text(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values as str, code per value), None read as "". pandas hashes the
    item column once; np.unique on a str array sorted 333,334 strings for every group field."""
    import pandas as pd

    values = pd.Series(values, dtype=object).fillna("")
    if pd.api.types.infer_dtype(values, skipna=False) not in ("string", "empty"):
        values = values.map(str)
    inverse, labels = pd.factorize(values, sort=True)
    return np.asarray(labels, dtype=str), inverse.astype(np.int64)


def _judgment_columns(queryset, *, kind: str, rich: bool) -> tuple[np.ndarray, np.ndarray, list]:
    """The judgments as a float table (id, item, worker, stage, score, time; NaN for NULL),
    their choices, and for A/B and MC the JSON columns (difficult, aspects, extra, presented
    order, choices) and the justification."""
    # Likert needs one query, and every statistic is order-free: no ORDER BY (sorting 120,000
    # rows costs more than reading them). A/B and MC read several column sets that must line
    # up row by row, so those queries are ordered by id.
    queryset = queryset.order_by("id") if rich else queryset.order_by()
    # One float matrix straight from the cursor; ids stay exact below 2**53. NULLs come back
    # as a sentinel so np.fromiter can read the flat rows (much faster than np.array on tuples).
    rows = fetch_plain_rows(queryset.annotate(
        _score=Coalesce("score", Value(MISSING, output_field=FloatField())),
        # Time on the item as the server measured it (a browser can claim anything), else as
        # the browser reported it (imported judgments, or stored before the server measured).
        _time=Coalesce(judgment_time_ms(), Value(-1)),
    ).values_list("id", "item_id", "worker_id", "stage_id", "_score", "_time"))
    table = np.fromiter(chain.from_iterable(rows), dtype=float, count=6 * len(rows)).reshape(
        -1, 6
    )
    table[table[:, 4] == MISSING, 4] = np.nan
    table[table[:, 5] < 0, 5] = np.nan
    n_rows = len(table)
    choice = (
        np.array([c for (c,) in fetch_plain_rows(queryset.values_list("choice"))], dtype=str)
        if kind != TaskKind.LIKERT and n_rows else np.full(n_rows, "", dtype=str)
    )
    rich_fields = ["difficult", "aspects", "extra", "presented_order", "choices",
                   "justification"]
    rich_columns = (
        list(zip(*queryset.values_list(*rich_fields), strict=True)) if rich and n_rows
        else [[None] * n_rows, [], [], [], [], []]
    )
    return table, choice, rich_columns


def _item_columns(project: Project, *, rich: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The project's item ids (sorted) and their grouping columns, flags, gold and metadata."""
    item_fields = ["id", "dataset", "source", "split", "domain", "text_level", "is_gold_check",
                   "is_practice", "external_id", "excluded"]
    item_queryset = Item.objects.filter(project=project).order_by("id")
    item_table = fetch_plain_rows(item_queryset.values_list(*item_fields))
    item_cols = list(zip(*item_table, strict=True)) if item_table else [()] * len(item_fields)
    item_ids = np.fromiter(item_cols[0], dtype=np.int64, count=len(item_cols[0]))
    items = {
        name: np.array(item_cols[i], dtype=object if i < 6 or i == 8 else bool)
        for i, name in enumerate(item_fields) if i > 0
    }
    # gold and metadata are JSON: decoding 40,000 of them would dominate a Likert report that
    # only needs the items with a gold answer (gold accuracy counts every one of them).
    labelled = item_queryset if rich else item_queryset.filter(
        Q(is_gold_check=True) | Q(is_practice=True) | Q(gold__isnull=False)
    )
    items["gold"] = np.full(len(item_ids), None, dtype=object)
    items["metadata"] = np.full(len(item_ids), None, dtype=object)
    for pk, gold, metadata in labelled.values_list("id", "gold", "metadata"):
        position = np.searchsorted(item_ids, pk)
        items["gold"][position] = gold
        items["metadata"][position] = metadata
    return item_ids, items


def fetch_plain_rows(queryset) -> list[tuple]:
    """Rows of a values_list over plain columns (ints, floats, strings, booleans) straight from
    the cursor, skipping Django's per-value converters (most of the time for 120,000 rows)."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def stage_agreement(*, stage: Stage, level: Level | None = None) -> float | None:
    """Krippendorff's α of one stage's judgments (interval for Likert, nominal for A/B and
    multiple choice unless `level` says otherwise); None when undefined or no data."""
    return stage_agreement_with_reason(stage=stage, level=level)[0]


def stage_agreement_with_reason(*, stage: Stage, level: Level | None = None
                                ) -> tuple[float | None, str | None]:
    """`stage_agreement` and, when it is None, why (`JudgmentFrame.alpha_with_reason`)."""
    frame = load_judgments(project=stage.project, stage=stage)
    return frame.alpha_with_reason(level=level)


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
    one stage) as light rows, ordered by id; practice and qualification work as in
    `load_judgments`."""
    queryset = judgments_that_count(project=project, data_stages_only=data_only_for(
        stage=stage, include_qualification=include_non_data_stages))
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    fields = [f for f in JudgmentRow.__dataclass_fields__]
    return [JudgmentRow(*values) for values in queryset.order_by("id").values_list(*fields)]


def latest_adjudications(*, project: Project, up_to: int | None = None
                         ) -> dict[int, Adjudication]:
    """item id → the item's latest adjudication (a later decision replaces an earlier one);
    `up_to`: only adjudications with id ≤ it (they are append-only, so an id pins the set, as
    a watermark pins judgments: `adjudication_watermark`)."""
    # Who decided is read by exports and pages: one query, not one per adjudication.
    rows = Adjudication.objects.filter(item__project=project).select_related("decided_by")
    if up_to is not None:
        rows = rows.filter(id__lte=up_to)
    latest: dict[int, Adjudication] = {}
    for adjudication in rows.order_by("id"):
        latest[adjudication.item_id] = adjudication
    return latest


def adjudication_watermark(project: Project) -> int:
    """The newest adjudication's id in the project (0 when there is none)."""
    return Adjudication.objects.filter(item__project=project).aggregate(
        top=Max("id"))["top"] or 0


def with_adjudications(labels: dict, *, project: Project,
                       standardize: tuple[float, float] | None = None,
                       up_to: int | None = None) -> dict:
    """`labels` (item id → the crowd's label: a Likert score, an A/B or STARC choice) with a
    researcher's latest adjudication in place of the crowd's wherever one was recorded, also
    on an item whose judgments no longer count: the one rule that an adjudicated label wins,
    for every door that reads an item's human label (the export, the metric report, the
    estimates, the judges page). Each door keeps its own choice of items (practice and
    excluded items stay out of the reports). `standardize` (mean, std): a Likert score is put
    on z-normalized gold's scale as (score - mean) / std. `up_to`: the adjudications a pinned
    data set read (`latest_adjudications`)."""
    decided = latest_adjudications(project=project, up_to=up_to)
    if not decided:
        return labels
    out = dict(labels)
    for item_id, adjudication in decided.items():
        if adjudication.score is not None:
            value = float(adjudication.score)
            if standardize is not None:
                mean, std = standardize
                value = (value - mean) / std if std > 0 else 0.0
            out[item_id] = value
        elif adjudication.choice:
            out[item_id] = adjudication.choice
    return out


def item_gold_scores(
    *, project: Project, stage: Stage | None = None, znormalize: bool = False
) -> dict[int, float]:
    """Likert gold score per item id: a researcher's adjudicated score when one was recorded
    (`with_adjudications`), else the mean of its judgments, or the median when the project's
    aggregation model says so; optionally z-normalized per annotator first (an adjudicated
    score is then standardized by the mean and spread of all the scores). Empty for A/B and
    multiple-choice projects: their labels are choices (`item_labels`)."""
    if project.kind != TaskKind.LIKERT:
        return {}
    triples = [
        (row.worker_id, row.item_id, row.score)
        for row in judgment_rows(project=project, stage=stage)
        if row.score is not None
    ]
    standardize = None
    if znormalize:
        scores = np.array([score for _, _, score in triples], dtype=float)
        standardize = (float(scores.mean()), float(scores.std())) if len(scores) else (0.0, 0.0)
    if project.aggregation_model == "median":
        if znormalize:
            triples = znormalize_by_annotator(triples)
        gold = {item: aggregate.label for item, aggregate in
                aggregate_items(triples, model="median", kind="likert").items()}
    else:
        gold = mean_by_item(triples, znormalize=znormalize)
    return with_adjudications(gold, project=project, standardize=standardize)


def human_score_name(project: Project) -> str:
    """What `item_gold_scores` makes of a Likert item's judgments, in words ("median human
    score" under the median aggregation, else "mean human score"; an adjudicated score
    replaces either): the one name every door gives the score that "correct" reads (the
    metrics page, `metric_report`, the dashboard's system accuracy). They said "mean human
    score" whatever the project aggregated by."""
    return f"{'median' if project.aggregation_model == 'median' else 'mean'} human score"


def vote_validity(judgment: dict) -> str | None:
    """"one" / "several" / "none" of a validity-judging MC judgment (from `extra.validity`, or
    from `choices` for rows imported without it)."""
    validity = (judgment["extra"] or {}).get("validity")
    if validity in VALIDITY_CHOICES:
        return validity
    choices = judgment["choices"] or []
    if len(choices) >= 2:
        return "several"
    if choices or judgment["choice"]:
        return "one"
    return "none"


def vote_label(judgment: dict, *, validity_mode: bool) -> str | None:
    """The label a judgment votes for: its choice, or in validity judging "several"/"none"."""
    if validity_mode:
        validity = vote_validity(judgment)
        if validity != "one":
            return validity
        return judgment["choice"] or next(iter(judgment["choices"] or []), None)
    return judgment["choice"] or None


def _model_aggregates(*, project: Project, stage: Stage | None, include_rejected: bool,
                      include_qualification: bool, model: str,
                      validity_mode: bool) -> tuple[dict[int, AggregateLabel], set[int]]:
    """(item id → the aggregation model's label for every judged item, the judged items).
    Read in one pass before the rows: Dawid–Skene, MACE and GLAD weigh each worker by their
    record over the whole project, so they see every judgment that counts (the same ones as
    the rows) at once."""
    queryset = judgments_that_count(
        Judgment.objects.filter(item__project=project), project=project,
        data_stages_only=not include_qualification, include_rejected=include_rejected)
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    kind = aggregation_kind(project.kind)
    triples = []
    for row in queryset.order_by("id").values("worker_id", "item_id", "score", "choice",
                                              "choices", "extra").iterator(chunk_size=2000):
        value = (row["score"] if kind == LIKERT_LABELS
                 else vote_label(row, validity_mode=validity_mode))
        triples.append((row["worker_id"], row["item_id"], value))
    # A Likert aggregate's confidence: its judgments on its side of the project's cut.
    return (aggregate_items(triples, model=model, kind=kind, cut=project.correct_at),
            {item for _, item, _ in triples})


@dataclass(frozen=True)
class ItemLabel:
    """An item's human label (`label`: the adjudicated one when recorded, else the model's),
    the aggregation model's verdict (`aggregate`, None when it gave none) and the adjudication
    (`adjudicated`: its label, None when there is none)."""

    label: Any
    aggregate: AggregateLabel | None
    adjudicated: Any = None


def item_labels(*, project: Project, stage: Stage | None = None,
                aggregation: str | None = None, include_rejected: bool = False,
                include_qualification: bool = False) -> dict[int, ItemLabel]:
    """item id → its human label, for every judged or adjudicated item: the project's
    aggregation model (`aggregation` overrides it for one call; ValueError when it does not fit
    the project's kind) over the judgments that count, replaced by a researcher's adjudication
    where one was recorded (`with_adjudications`). The one owner of an item's label: the export,
    the judges page's alignment and anything else that needs one label per item read it."""
    validity_mode = (project.kind == TaskKind.MC
                     and project.experiment_mode == ExperimentMode.VALIDITY)
    model = (resolve_aggregation(project.kind, aggregation) if aggregation
             else project.aggregation_model)
    aggregates, judged = _model_aggregates(
        project=project, stage=stage, include_rejected=include_rejected,
        include_qualification=include_qualification, model=model, validity_mode=validity_mode)
    decided = with_adjudications({}, project=project)
    return {item: ItemLabel(label=decided[item] if item in decided else
                            (aggregates[item].label if item in aggregates else None),
                            aggregate=aggregates.get(item), adjudicated=decided.get(item))
            for item in judged | decided.keys()}


# What the publish guard writes into the publish transition's reason when the researcher
# overrode a failing agreement gate (`annotation.services.stages.agreement_guard`).
AGREEMENT_OVERRIDE_MARK = "agreement guard OVERRIDDEN"


def agreement_override_reason(stage: Stage) -> str | None:
    """The reason the researcher gave to publish `stage` past its agreement gate (never empty:
    the guard refuses a blank one), or None when it was not published that way. The gate of a published stage is history: the cockpit and the
    dashboard showed "shut" / "blocked" beside a stage collecting after an override."""
    logged = (stage.transitions.filter(to_status="published",
                                       reason__contains=AGREEMENT_OVERRIDE_MARK)
              .order_by("-pk").values_list("reason", flat=True).first())
    if logged is None:
        return None
    return logged.split("reason: ", 1)[1] if "reason: " in logged else ""


# Why a gate's α is undefined when the project has no stage to measure it on.
NO_GATE_STAGE = "no earlier stage to measure it on"


def agreement_stage_for(stage: Stage) -> Stage | None:
    """The stage whose agreement gates this one: `settings["agreement_stage_id"]` (a stage of
    the same project; None when it names none), else the closest earlier trial/pilot/full
    stage of the project, else the required stage."""
    options = stage.settings or {}
    if options.get("agreement_stage_id"):
        # Only this project's: another project's alpha would open this one's gate (and show
        # that project's agreement on this one's pages).
        return Stage.objects.filter(pk=options["agreement_stage_id"],
                                    project_id=stage.project_id).first()
    earlier = (
        Stage.objects.filter(project_id=stage.project_id, kind__in=COLLECTION_STAGE_KINDS)
        .filter(Q(order__lt=stage.order) | Q(order=stage.order, pk__lt=stage.pk))
        .exclude(pk=stage.pk).order_by("-order", "-pk").first()
    )
    return earlier or stage.requires_stage


@dataclass(frozen=True)
class AgreementGate:
    """A stage's agreement gate as every door states it (the cockpit, the stage's admin page,
    the dashboard's and `report`'s stage rows): the stage whose α it reads (None when there is
    none to read), the threshold, that α or why it is undefined, and the reason the researcher
    gave to publish past it (None when they did not)."""

    gating: Stage | None
    threshold: float
    alpha: float | None
    undefined: str | None
    overridden: str | None

    @property
    def passes(self) -> bool:
        return self.alpha is not None and self.alpha >= self.threshold

    def text(self) -> str:
        """"needs α ≥ 0.6 on “trial” (α = 0.42)", with the override before it when there was
        one; the same sentence wherever the gate is shown."""
        where = f"“{self.gating.name}”" if self.gating is not None else "an earlier stage"
        shown = (f"α undefined: {self.undefined}" if self.alpha is None
                 else f"α = {self.alpha:.2f}")
        text = f"needs α ≥ {self.threshold:g} on {where} ({shown})"
        if self.overridden and not self.passes:
            text = f"published with an override (“{self.overridden}”); {text}"
        return text


def agreement_gate(stage: Stage, *, alpha_of=None) -> AgreementGate | None:
    """The agreement gate of `stage` (None when it has no threshold): the stage the publish
    guard reads (`agreement_stage_for`) and its α (`stage_alpha_with_reason`, or `alpha_of(stage)`
    when the caller holds them already). No stage to read (the first collection stage with a
    threshold, or an `agreement_stage_id` naming none of the project's stages) is a gate that
    does not pass, saying why, as the publish guard refuses it; the cockpit showed no gate at
    all there, beside a "publish" the guard then refused."""
    if stage.agreement_threshold is None:
        return None
    gating = agreement_stage_for(stage)
    if gating is not None:
        alpha, undefined = (alpha_of or (lambda s: stage_alpha_with_reason(stage=s)))(gating)
    else:
        named = (stage.settings or {}).get("agreement_stage_id")
        alpha, undefined = None, (f"agreement_stage_id {named} is not a stage of this project"
                                  if named else NO_GATE_STAGE)
    return AgreementGate(gating=gating, threshold=stage.agreement_threshold, alpha=alpha,
                         undefined=undefined, overridden=agreement_override_reason(stage))


def stage_mask(frame: JudgmentFrame, stage: Stage) -> np.ndarray:
    """The judgments of `frame` that a read of `stage` counts (`load_judgments(stage=...)`):
    the stage's own, and of a data stage only the data (`data_only_for`: no practice item's
    answers, which every stage begins with)."""
    mask = frame.stage_id == stage.pk
    if data_only_for(stage=stage):
        mask &= frame.data_mask()
    return mask


def stage_alpha(*, stage: Stage, level: str | None = None,
                frame: JudgmentFrame | None = None) -> float | None:
    """THE α of a stage, as its agreement gate checks it (the publish guard, the cockpit, the
    dashboard's stages): Krippendorff's alpha of the stage's judgments that count, practice
    items' answers left out of a data stage, at the stage's `agreement_level` (interval for
    Likert, nominal otherwise); None when too few to compute. `frame`: a project frame already
    loaded (the report's) is read instead of the database when it holds the stage's
    judgments."""
    return stage_alpha_with_reason(stage=stage, level=level, frame=frame)[0]


def stage_alpha_with_reason(*, stage: Stage, level: str | None = None,
                            frame: JudgmentFrame | None = None
                            ) -> tuple[float | None, str | None]:
    """(`stage_alpha`, None), or (None, why it is undefined), the one statement the publish
    guard, the cockpit and the dashboard's stage rows and gates give
    (`annotation.domain.agreement.agreement_undefined_reason`)."""
    level = level or (stage.settings or {}).get("agreement_level")
    if frame is not None:
        mask = stage_mask(frame, stage)
        if mask.any():
            return frame.alpha_with_reason(level=level, mask=mask)
    return stage_agreement_with_reason(stage=stage, level=level)
