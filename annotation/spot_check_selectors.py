"""Random spot checks: which judgments a researcher is shown to check, and how many of each
worker's judgments were checked (the workers table). The decision itself is recorded by
annotation/services/spot_checks.py.

The pool is the submitted or approved work that counts (`judgments_that_count`: never
practice or qualification work, unless the stage asked for is a practice or qualification
stage) that nobody has spot-checked yet. The sample is random but reproducible: each
judgment of the pool is ranked by a hash of (project, seed, judgment id) and the `size`
lowest are shown, so the same seed shows the same sample on every reload, and recording a
decision only replaces the decided judgment by the next one in that order.

The spot checks recorded are read at every door by `spot_check_list` (all of the project's,
as the workers table counts them): the API's `spot-checks/` list, `export_data --spot-checks`
and the admin's CSV, whose rows are `spot_check_row`.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

from django.db.models import Q, QuerySet

from annotation.models import (
    NON_DATA_STAGE_KINDS,
    AssignmentStatus,
    Judgment,
    Project,
    SpotCheck,
    SpotCheckVerdict,
    Stage,
)
from annotation.selectors import judgments_that_count

# The columns of a spot check row in exports (export_data, the admin's CSV): the item by its
# external id, as the judgment exports name it.
SPOT_CHECK_COLUMNS = ("project", "stage", "item", "judgment", "worker", "verdict", "note",
                      "checked_by", "checked_at")
DEFAULT_SAMPLE_SIZE = 10
MAX_SAMPLE_SIZE = 100
CHECKED_STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED)


def spot_check_pool(*, project: Project, stage: Stage | None = None) -> QuerySet[Judgment]:
    """The judgments of `project` (of `stage` when given) a spot check may draw: submitted or
    approved (imported judgments have no assignment), counting, not spot-checked yet."""
    practice_stage = stage is not None and stage.kind in NON_DATA_STAGE_KINDS
    pool = judgments_that_count(project=project, data_stages_only=not practice_stage)
    if stage is not None:
        pool = pool.filter(stage=stage)
    return (pool.filter(Q(assignment__isnull=True) | Q(assignment__status__in=CHECKED_STATUSES))
            .exclude(spot_check__isnull=False))


def _rank(project_id: int, seed: str, judgment_id: int) -> bytes:
    return hashlib.sha256(f"{project_id}:{seed}:{judgment_id}".encode()).digest()


def spot_check_sample(*, project: Project, seed: str, size: int = DEFAULT_SAMPLE_SIZE,
                      stage: Stage | None = None) -> list[Judgment]:
    """`size` judgments of the pool (at most MAX_SAMPLE_SIZE), drawn by `seed`: the same seed
    gives the same sample until some of it is decided. Items and workers loaded."""
    size = max(1, min(int(size), MAX_SAMPLE_SIZE))
    ids = spot_check_pool(project=project, stage=stage).values_list("id", flat=True)
    chosen = sorted(ids, key=lambda pk: _rank(project.pk, seed, pk))[:size]
    rows = Judgment.objects.filter(pk__in=chosen).select_related("item", "worker", "stage")
    by_id = {j.pk: j for j in rows}
    return [by_id[pk] for pk in chosen if pk in by_id]


def spot_check_counts(*, project: Project) -> dict[int, dict[str, int]]:
    """worker id → {"spot_checked": n, "spot_problems": n} over the spot checks of `project`."""
    counts: dict[int, dict[str, int]] = defaultdict(lambda: {"spot_checked": 0, "spot_problems": 0})
    for worker_id, verdict in (SpotCheck.objects.filter(judgment__item__project=project)
                               .values_list("judgment__worker_id", "verdict")):
        counts[worker_id]["spot_checked"] += 1
        counts[worker_id]["spot_problems"] += verdict == SpotCheckVerdict.PROBLEM
    return dict(counts)


def spot_check_list(*, project: Project, stage: Stage | None = None) -> QuerySet[SpotCheck]:
    """Every spot check of `project` (of `stage` when given), oldest first, with what a row
    names loaded: all of them, whether or not the judgment still counts, as the workers
    table counts them (`spot_check_counts`)."""
    checks = SpotCheck.objects.filter(judgment__item__project=project)
    if stage is not None:
        checks = checks.filter(judgment__stage=stage)
    return spot_checks_loaded(checks)


def spot_checks_loaded(checks: QuerySet[SpotCheck]) -> QuerySet[SpotCheck]:
    """`checks` (any selection: the admin's) oldest first, with what `spot_check_row` reads."""
    return checks.select_related("judgment__item__project", "judgment__stage",
                                 "judgment__worker", "checked_by").order_by("id")


def spot_check_row(check: SpotCheck) -> dict[str, Any]:
    """One spot check as an export row (`SPOT_CHECK_COLUMNS`); `checked_by` is None when the
    researcher's account is gone."""
    judgment = check.judgment
    return {"project": judgment.item.project.slug, "stage": judgment.stage.name,
            "item": judgment.item.external_id, "judgment": judgment.pk,
            "worker": judgment.worker.external_id, "verdict": check.verdict,
            "note": check.note,
            "checked_by": check.checked_by.get_username() if check.checked_by else None,
            "checked_at": check.created_at.isoformat()}
