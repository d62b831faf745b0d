"""Periodic assignment housekeeping (thin: the logic lives in annotation.services)."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="worker.tasks.assignments.release_abandoned_assignments")
def release_abandoned_assignments() -> int:
    """Return idle in-house/Prolific assignments so their items go to other workers."""
    from annotation.services.assignments import assignment_release_abandoned

    return assignment_release_abandoned()
