"""How every cached report is written: one `Report` row per (project, stage, kind, params).

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
        # Compared in Python: JSON equality lookups differ between SQLite and PostgreSQL.
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


def _project_stage_rows(*, project: Project, stage: Stage | None) -> list[Report]:
    """The project's (or stage's) cached reports, newest first."""
    return list(Report.objects.filter(project=project, stage=stage).order_by("-computed_at",
                                                                              "-pk"))
