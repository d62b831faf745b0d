"""Report tasks (thin: ids in, a report service call). Beat runs `reports_refresh_stale`; it
recomputes the project report and dashboard charts of every project whose judgments moved past
the cached watermark, one task per project so a big project does not hold up the others."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="worker.tasks.reports.report_refresh", acks_late=True)
def report_refresh(project_id: int, up_to: int | None = None) -> int:
    from metrics_app.reports.project import project_reports_refresh

    return project_reports_refresh(project_id=project_id, up_to=up_to)


@shared_task(name="worker.tasks.reports.reports_refresh_stale")
def reports_refresh_stale(here: bool = False) -> list[int]:
    """Send a refresh per stale project, with the newest judgment it is sent for; `here`:
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
