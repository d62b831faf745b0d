"""Report tasks (thin: ids in, a report service call). Beat runs `reports_refresh_stale`; it
recomputes the project report, dashboard charts and judges page report of every project whose
judgments moved past the cached watermark, one task per project so a big project does not hold
up the others."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="worker.tasks.reports.report_refresh", acks_late=True)
def report_refresh(project_id: int, up_to: int | None = None) -> int:
    from annotation.models import Project
    from metrics_app.reports.project import project_reports_refresh
    from metrics_app.services.judges.alignment import judge_alignment_precompute

    watermark = project_reports_refresh(project_id=project_id, up_to=up_to)
    project = Project.objects.filter(pk=project_id).first()
    if project is not None:
        # The judges page's report too (computed only when its stored copy is stale), so its
        # first visitor after an import or new judgments does not wait for it.
        judge_alignment_precompute(project=project)
    return watermark


@shared_task(name="worker.tasks.reports.reports_refresh_stale")
def reports_refresh_stale(here: bool = False) -> list[int]:
    """Send a refresh per stale project, with the newest judgment it is sent for (None: its
    judgments are all read, another input changed, `stale_report_watermarks`); `here`:
    refresh them in this process instead (the demo's start, so the first dashboard visit
    reads a cached report: it took 18 s)."""
    from metrics_app.reports.project import stale_report_watermarks

    stale = stale_report_watermarks()
    for project_id, up_to in stale.items():
        if here:
            report_refresh(project_id, up_to)
        else:
            report_refresh.delay(project_id, up_to)
    return list(stale)
