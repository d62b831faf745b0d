"""The project report behind `manage.py report`, the REST endpoint and the dashboard, and its
cache in `Report` (valid while no newer judgment exists)."""
from __future__ import annotations

import math

import numpy as np
from django.db.models import Max

from annotation.models import Judgment, Project, Stage, TaskKind

from ..models import Report
from .agreement import agreement_report
from .data import load_judgments
from .lfqa import lfqa_report
from .likert import likert_report
from .stages import stages_report
from .starc import starc_report
from .workers import worker_report

REPORT_KIND = "project"
# Bump when the report's content or definitions change: cached reports of another version are
# recomputed even though no judgment arrived.
REPORT_VERSION = 5


def _params(group_by: str | None) -> dict:
    return {"group_by": group_by, "version": REPORT_VERSION}


def _clean(value):
    """numpy scalars → Python, NaN/inf → None, so the result is strict JSON."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def project_report(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None
) -> dict:
    """Every analysis of a project (or one stage) as one JSON-ready dict with the keys
    `agreement`, `workers`, `likert`, `lfqa`, `starc` (empty dicts for other task kinds)."""
    # Practice/qualification judgments are loaded too: workers are scored on them; every
    # item-level analysis masks them out.
    frame = load_judgments(project=project, stage=stage, include_non_data_stages=True)
    report = {
        "project": project.slug,
        "kind": project.kind,
        "stage": stage.name if stage else None,
        "group_by": group_by,
        "judgment_watermark": frame.watermark,
        "n_judgments": int(frame.data_mask().sum()) if len(frame) else 0,
        "agreement": agreement_report(frame, group_by=group_by),
        "stages": stages_report(frame, project=project),
        "workers": worker_report(frame, tolerance=project.qualification_tolerance),
        "likert": likert_report(frame) if project.kind == TaskKind.LIKERT else {},
        "lfqa": lfqa_report(frame) if project.kind == TaskKind.AB else {},
        "starc": starc_report(frame, experiment_mode=project.experiment_mode)
        if project.kind == TaskKind.MC else {},
    }
    return _clean(report)


def judgment_watermark(*, project: Project, stage: Stage | None = None) -> int:
    queryset = Judgment.objects.filter(item__project=project)
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    return queryset.aggregate(top=Max("id"))["top"] or 0


def cached_project_report(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None,
    refresh: bool = False,
) -> dict:
    """`project_report` from the `Report` cache when no judgment arrived since it was computed
    (judgments are append-only, so the highest id is a complete change marker)."""
    if not refresh:
        cached = _cached_row(project=project, stage=stage, group_by=group_by)
        if cached is not None and cached.judgment_watermark == judgment_watermark(
            project=project, stage=stage
        ):
            return cached.data
    return report_refresh(project=project, stage=stage, group_by=group_by)


def _cached_row(*, project: Project, stage: Stage | None, group_by: str | None) -> Report | None:
    # Compared in Python: JSON equality lookups differ between SQLite and PostgreSQL.
    for row in Report.objects.filter(project=project, stage=stage, kind=REPORT_KIND):
        if row.params == _params(group_by):
            return row
    return None


def report_refresh(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None
) -> dict:
    """Recompute and store the report (one row per project, stage and parameters)."""
    data = project_report(project=project, stage=stage, group_by=group_by)
    params = _params(group_by)
    row = _cached_row(project=project, stage=stage, group_by=group_by)
    if row is not None:
        row.data = data
        row.judgment_watermark = data["judgment_watermark"]
        row.save(update_fields=["data", "judgment_watermark", "computed_at"])
    else:
        # Reports of an older REPORT_VERSION for the same parameters are replaced, not kept.
        outdated = [
            r.pk for r in Report.objects.filter(
                project=project, stage=stage, kind__in=[REPORT_KIND, CHARTS_KIND]
            )
            if (r.params or {}).get("group_by") == group_by and r.params != params
        ]
        Report.objects.filter(pk__in=outdated).delete()
        Report.objects.create(
            project=project, stage=stage, kind=REPORT_KIND, params=params, data=data,
            judgment_watermark=data["judgment_watermark"],
        )
    return data


def stale_report_projects() -> list[int]:
    """Ids of projects whose project-wide report is missing or older than their judgments."""
    latest = dict(
        Judgment.objects.values_list("item__project").annotate(top=Max("id")).values_list(
            "item__project", "top"
        )
    )
    cached = {
        project_id: watermark
        for project_id, watermark, params in Report.objects.filter(
            kind=REPORT_KIND, stage=None
        ).values_list("project_id", "judgment_watermark", "params")
        if params == _params(None)
    }
    return sorted(pk for pk, top in latest.items() if cached.get(pk, -1) < top)


CHARTS_KIND = "project-charts"


def dashboard_data(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None
) -> tuple[dict, dict]:
    """(report, chart SVGs) for the dashboard; the charts are cached beside the report with
    the same watermark, so a page view after the Celery refresh renders nothing."""
    from .charts import dashboard_charts

    report = cached_project_report(project=project, stage=stage, group_by=group_by)
    params = _params(group_by)
    rows = [r for r in Report.objects.filter(project=project, stage=stage, kind=CHARTS_KIND)
            if r.params == params]
    if rows and rows[0].judgment_watermark == report["judgment_watermark"]:
        return report, rows[0].data
    charts = dashboard_charts(report)
    if rows:
        rows[0].data = charts
        rows[0].judgment_watermark = report["judgment_watermark"]
        rows[0].save(update_fields=["data", "judgment_watermark", "computed_at"])
    else:
        Report.objects.create(project=project, stage=stage, kind=CHARTS_KIND, params=params,
                              data=charts, judgment_watermark=report["judgment_watermark"])
    return report, charts
