"""How every cached report is written and found: one `Report` row per (project, stage, kind,
params), its params compared in Python (`report_cached`): a JSON equality lookup compares the
stored text on SQLite, key order included, and the parsed value on PostgreSQL, so a row whose
params were stored in another key order (a database restored from a PostgreSQL dump, whose
jsonb reorders keys) would be found on one and missed on the other, while `report_store`
kept refreshing that same row.

Each refresh used to read "is there a row?" and then delete and create: two refreshes of one
report at once (the beat's and a researcher's click, two web workers) both found none and both
created one, leaving two copies for readers to pick from. Here the replace is one transaction
that first locks the project row, so refreshes of one project's reports take turns; the
computation itself runs before, outside any transaction (on SQLite a transaction holds the
database's only write lock)."""
from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from annotation.models import Project, Stage

from ..models import Report


def report_store(
    *, project: Project, stage: Stage | None, kind: str, params: dict, data: dict,
    judgment_watermark: int, supersedes: Callable[[Report], bool] | None = None,
) -> Report:
    """Store `data` as the one cached report of (project, stage, kind, params) and return its
    row. Other rows of the project and stage for which `supersedes(row)` is true (an older
    report version, the previous options of a one-per-project report) are deleted with any
    duplicate copy. A stored copy computed from newer judgments than this one (a refresh that
    finished first although it started later) is kept as it is and returned."""
    with transaction.atomic():
        # NO KEY UPDATE, as imports take it: rows that merely point at the project (a new
        # item, a judgment) are not held up; another refresh of this project waits here.
        list(Project.objects.select_for_update(no_key=True).filter(pk=project.pk)
             .values_list("pk", flat=True))
        rows = _project_stage_rows(project=project, stage=stage)
        same = [r for r in rows if r.kind == kind and r.params == params]  # newest first
        replaced = [r.pk for r in rows if r not in same and supersedes is not None
                    and supersedes(r)]
        replaced += [r.pk for r in same[1:]]  # copies an earlier race left
        Report.objects.filter(pk__in=replaced).delete()
        if not same:
            return Report.objects.create(project=project, stage=stage, kind=kind, params=params,
                                         data=data, judgment_watermark=judgment_watermark)
        row = same[0]
        if row.judgment_watermark > judgment_watermark:
            return row
        row.data, row.judgment_watermark = data, judgment_watermark
        row.save(update_fields=["data", "judgment_watermark", "computed_at"])
        return row


def report_rows(*, project: Project, stage: Stage | None, kind: str) -> list[Report]:
    """The cached reports of one kind of the project (or stage), newest first, whatever their
    params (to pick from with a rule of one's own)."""
    return [row for row in _project_stage_rows(project=project, stage=stage) if row.kind == kind]


def report_cached(*, project: Project, stage: Stage | None, kind: str, params: dict
                  ) -> Report | None:
    """THE lookup of a cached report: the newest row of (project, stage, kind) whose params
    equal `params` (compared in Python, as `report_store` compares them), or None. Whether
    it is fresh is the reader's rule (a watermark, a fingerprint)."""
    return next((row for row in report_rows(project=project, stage=stage, kind=kind)
                 if row.params == params), None)


def _project_stage_rows(*, project: Project, stage: Stage | None) -> list[Report]:
    """The project's (or stage's) cached reports, newest first."""
    return list(Report.objects.filter(project=project, stage=stage).order_by("-computed_at",
                                                                              "-pk"))
