"""Writes on workers. Blocking is one function so that provider code can extend it (e.g. also
block the worker on MTurk) without the admin or the API changing."""
from __future__ import annotations

from django.db import transaction

from annotation.models import Worker, WorkerStatus


@transaction.atomic
def worker_block(*, worker: Worker, reason: str) -> Worker:
    """Mark a worker blocked: they get no new assignments. Blocking again updates the reason."""
    worker = Worker.objects.select_for_update().get(pk=worker.pk)
    worker.status = WorkerStatus.BLOCKED
    worker.blocked_reason = reason.strip()
    worker.save(update_fields=["status", "blocked_reason"])
    return worker


@transaction.atomic
def worker_unblock(*, worker: Worker) -> Worker:
    """Let a blocked worker take assignments again; unblocking an active worker is a no-op."""
    worker = Worker.objects.select_for_update().get(pk=worker.pk)
    if worker.status == WorkerStatus.ACTIVE and not worker.blocked_reason:
        return worker
    worker.status = WorkerStatus.ACTIVE
    worker.blocked_reason = ""
    worker.save(update_fields=["status", "blocked_reason"])
    return worker
