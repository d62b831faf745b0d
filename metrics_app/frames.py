"""A project's items, judgments and metric scores as pandas DataFrames, for notebooks.

    from metrics_app.frames import setup, project_frames
    setup()                                   # once per notebook (Django settings, database)
    frames = project_frames("evouna-nq")
    frames.items        # one row per item: ids, grouping columns, content fields, gold,
                        #   `study_item`: whether reports measure metrics and judges on it
    frames.judgments    # one row per judgment, `counts` says whether it counts (the rule
                        #   every report uses: data stages, work not rejected, worker not blocked)
    frames.scores       # one row per item (and A/B side), one column per metric; for a
                        #   learned metric (lerc, lerc_prob, lerc_ab) also
                        #   `<metric>_seen_by_version`: its version trained or calibrated on
                        #   the item, so its score there is memory, not a judgment
    frames.human        # per item: mean score of the judgments that count, n judgments, and
                        #   `label`: the item's human label as every report reads it (an
                        #   adjudication, else the project's aggregation model), and
                        #   `study_item` (keep those rows to reproduce the metric report)
    frames.judgments[frames.judgments.counts].groupby("worker").score.mean()

`setup()` reads the same environment as `manage.py` (DATABASE_URL, or the default SQLite file);
nothing here writes to the database. docs/ANALYSIS.md shows a session.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

ITEM_COLUMNS = ["id", "external_id", "dataset", "split", "source", "domain", "text_level",
                "group_key", "is_gold_check", "is_practice", "excluded"]
JUDGMENT_COLUMNS = ["id", "item_id", "item__external_id", "worker__external_id", "stage__name",
                    "stage__kind", "score", "choice", "difficult", "justification",
                    "time_spent_ms", "created_at"]


def setup(settings_module: str = "config.settings.dev") -> None:
    """Configure Django for a notebook or script (a no-op when it already is)."""
    import django
    from django.apps import apps

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module)
    if not apps.ready:
        django.setup()


@dataclass
class ProjectFrames:
    items: pd.DataFrame
    judgments: pd.DataFrame
    scores: pd.DataFrame
    human: pd.DataFrame


def project_frames(slug: str) -> ProjectFrames:
    """Every table of one project (see the module docstring); LookupError for an unknown slug."""
    from annotation.models import Judgment, Project
    from annotation.selectors import items_measured_on, judgments_that_count
    from metrics_app.model_selectors import LEARNED_METRIC_MODELS, learned_metric_seen_items
    from metrics_app.models import MetricScore
    from metrics_app.score_selectors import project_metric_versions

    project = Project.objects.filter(slug=slug).first()
    if project is None:
        raise LookupError(f"no project with slug {slug!r}")

    rows = list(project.items.order_by("id").values(*ITEM_COLUMNS, "content", "gold"))
    items = pd.DataFrame(rows, columns=[*ITEM_COLUMNS, "content", "gold"])
    content = pd.json_normalize([row["content"] or {} for row in rows], max_level=0)
    content.columns = [name if name not in items.columns else f"content_{name}"
                       for name in content.columns]
    items = pd.concat([items.drop(columns=["content"]), content], axis=1)
    items = items.rename(columns={"id": "item_id"}).set_index("item_id", drop=False)

    judgments = pd.DataFrame(
        list(Judgment.objects.filter(item__project=project).order_by("id")
             .values(*JUDGMENT_COLUMNS)), columns=JUDGMENT_COLUMNS)
    judgments = judgments.rename(columns={
        "id": "judgment_id", "item__external_id": "external_id",
        "worker__external_id": "worker", "stage__name": "stage", "stage__kind": "stage_kind"})
    counting = set(judgments_that_count(project=project).values_list("id", flat=True))
    judgments["counts"] = judgments["judgment_id"].isin(counting)

    versions = project_metric_versions(project=project)
    score_rows = []
    for name, version in versions.items():
        score_rows += [(item_id, side, name, value) for item_id, side, value in
                       MetricScore.objects.filter(item__project=project, metric=name,
                                                  version=version)
                       .values_list("item_id", "side", "value")]
    long = pd.DataFrame(score_rows, columns=["item_id", "side", "metric", "value"])
    scores = (long.pivot_table(index=["item_id", "side"], columns="metric", values="value",
                               aggfunc="first", dropna=False).reset_index()
              if len(long) else pd.DataFrame(columns=["item_id", "side"]))
    scores.columns.name = None
    # Raw data keeps every row; the flag lets a notebook measure a learned metric against the
    # humans only where its version did not see the answer, as every report does.
    for name, version in versions.items():
        if name in LEARNED_METRIC_MODELS and name in scores.columns:
            seen = learned_metric_seen_items(project, name, version)
            scores[f"{name}_seen_by_version"] = scores["item_id"].isin(seen)

    counted = judgments[judgments["counts"]]
    human = (counted.groupby("item_id")
             .agg(mean_score=("score", "mean"), n_judgments=("judgment_id", "size"))
             if len(counted) else pd.DataFrame(columns=["mean_score", "n_judgments"]))
    # The items every report measures a metric or judge on (`items_measured_on`: no gold
    # check, practice or qualification-only item): a notebook correlating on every row of
    # `human` disagreed with the metric report's n and numbers.
    study = set(items_measured_on(project).values_list("pk", flat=True))
    items["study_item"] = items["item_id"].isin(study)
    human = _with_labels(human, project)
    human["study_item"] = human.index.isin(study)
    return ProjectFrames(items=items, judgments=judgments, scores=scores, human=human)


def _with_labels(human: pd.DataFrame, project) -> pd.DataFrame:
    """`human` with `label`: the item's human label from the selectors every report reads
    (`item_gold_scores` for a Likert score: the adjudicated score, else the mean or the median
    as the project's aggregation says; `item_labels` for an A/B or STARC label), and a row for
    an adjudicated item none of whose judgments counts. `mean_score` alone is another number
    than the metric report's once an item is adjudicated or the project aggregates by median:
    a notebook correlating with it disagreed with the report it set out to reproduce."""
    from annotation.judgment_selectors import item_gold_scores, item_labels
    from annotation.models import TaskKind

    labels = (item_gold_scores(project=project) if project.kind == TaskKind.LIKERT
              else {pk: entry.label for pk, entry in item_labels(project=project).items()})
    rows = human.index.union(pd.Index(sorted(labels), dtype="int64"))
    human = human.reindex(rows)
    human.index.name = "item_id"
    human["n_judgments"] = human["n_judgments"].fillna(0).astype(int)
    human["label"] = pd.Series(labels, dtype=object if project.kind != TaskKind.LIKERT
                               else "float64").reindex(rows)
    return human
