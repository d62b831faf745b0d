"""Leases for background jobs: a job is "running" only while a live worker says so.

A worker claims a queued job with one conditional UPDATE (so two deliveries of the same
message cannot both run it), then a heartbeat thread refreshes `heartbeat_at` every
`QAJ_JOB_HEARTBEAT_SECONDS` while the job works -- including single steps that take minutes,
such as a report refresh. Every later write names the lease, so a worker that lost its lease
(the sweep gave the job to another run) stops instead of overwriting the new run's result.

The beat sweep (`stale_jobs_recover`) finds running jobs whose heartbeat is older than
`QAJ_JOB_STALE_AFTER_SECONDS`: their worker died (SIGKILL, out of memory, machine lost). They
are queued and sent again until `QAJ_JOB_MAX_ATTEMPTS` runs have started, then failed with the
reason. The broker's own redelivery (late acks) is a second path to the same end; whichever
comes first claims the job and the other finds nothing to do.

Used by project and item scoring jobs (`metrics_app/services/scoring.py`); LERC training keeps
its own heartbeat in the version's progress (`services/lerc/training.py`), and provider
publish/sync jobs hold no "running" row (they are idempotent and re-run by beat).
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection, models
from django.db.models import F, Q
from django.utils import timezone

from metrics_app.models import ScoringStatus

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """This worker no longer holds the job (it was recovered and given to another run, or
    failed by the sweep); it must stop without writing."""


def heartbeat_seconds() -> float:
    return float(getattr(settings, "QAJ_JOB_HEARTBEAT_SECONDS", 15))


def stale_after_seconds() -> float:
    return float(getattr(settings, "QAJ_JOB_STALE_AFTER_SECONDS", 120))


def max_attempts() -> int:
    return int(getattr(settings, "QAJ_JOB_MAX_ATTEMPTS", 3))


def _stale_filter(now) -> Q:
    cutoff = now - timedelta(seconds=stale_after_seconds())
    return Q(status=ScoringStatus.RUNNING) & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )


class JobLease:
    """This worker's claim on one job row; use as a context manager around the work.

    `claim()` returns None when there is nothing to do here: the job is finished, or running
    with a fresh heartbeat in another worker (a redelivered message), or out of attempts."""

    def __init__(self, model: type[models.Model], job_id: int):
        self.model = model
        self.job_id = job_id
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"[-100:]
        self.lost = threading.Event()
        self._heartbeat: Heartbeat | None = None

    # --- claiming -----------------------------------------------------------------------------

    def claim(self):
        now = timezone.now()
        claimable = Q(status=ScoringStatus.QUEUED) | _stale_filter(now)
        claimed = self.model.objects.filter(
            claimable, pk=self.job_id, attempts__lt=max_attempts(),
        ).update(status=ScoringStatus.RUNNING, lease=self.token, heartbeat_at=now,
                 started_at=now, finished_at=None, done=0, attempts=F("attempts") + 1)
        if not claimed:
            job = self.model.objects.filter(pk=self.job_id).first()
            logger.info("%s %s not claimed (status %s): nothing to do in this worker",
                        self.model.__name__, self.job_id, getattr(job, "status", "missing"))
            return None
        return self.model.objects.get(pk=self.job_id)

    def update(self, **fields) -> None:
        """Write fields of the job if this worker still holds it; LeaseLost otherwise."""
        if self.lost.is_set():
            raise LeaseLost(f"{self.model.__name__} {self.job_id} was taken from this worker")
        fields.setdefault("heartbeat_at", timezone.now())
        if not self.model.objects.filter(pk=self.job_id, lease=self.token,
                                         status=ScoringStatus.RUNNING).update(**fields):
            self.lost.set()
            raise LeaseLost(f"{self.model.__name__} {self.job_id} was taken from this worker")

    def finish(self, *, status: str, **fields) -> None:
        self.update(status=status, finished_at=timezone.now(), **fields)

    # --- heartbeat ----------------------------------------------------------------------------

    def __enter__(self) -> JobLease:
        self._heartbeat = Heartbeat(self._beat, every=heartbeat_seconds(),
                                    name=f"lease-{self.job_id}").start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._heartbeat.stop()

    def _beat(self) -> bool:
        alive = self.model.objects.filter(
            pk=self.job_id, lease=self.token, status=ScoringStatus.RUNNING,
        ).update(heartbeat_at=timezone.now())
        if not alive:
            self.lost.set()
        return bool(alive)


class Heartbeat:
    """Calls `beat()` every `every` seconds in a thread until stopped or until `beat` returns
    False. A beat that raises (a busy or restarting database) is logged and tried again at the
    next one. The thread uses, and closes, its own database connection."""

    def __init__(self, beat: Callable[[], bool], *, every: float, name: str = "heartbeat"):
        self.beat = beat
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.every + 30)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.every):
                try:
                    if not self.beat():
                        return
                except Exception:
                    logger.warning("%s: beat not written", self._thread.name, exc_info=True)
        finally:
            connection.close()


@contextmanager
def leased_run(model: type[models.Model], job_id: int) -> Iterator[tuple[JobLease, object]]:
    """Claim the job and run the body under its lease, heartbeat included: yields (lease, job),
    job None when there is nothing to do here (finished, or alive in another worker). A lost
    lease ends the run quietly (another run owns the job); any other error fails the job with
    its message and is raised again (for Celery's log)."""
    with JobLease(model, job_id) as lease:
        job = lease.claim()
        try:
            yield lease, job
        except LeaseLost:
            logger.warning("%s %s was taken over; this run stops", model.__name__, job_id)
        except Exception as exc:
            lease.finish(status=ScoringStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
            raise


def stale_jobs_recover(models_: Iterable[type[models.Model]],
                       send: Callable[[models.Model], object]) -> dict[str, int]:
    """Beat: running jobs without a fresh heartbeat lost their worker. Queue and `send` them
    again while attempts remain, otherwise fail them saying why. Returns counts."""
    counts = {"retried": 0, "failed": 0}
    now = timezone.now()
    for model in models_:
        for job in model.objects.filter(_stale_filter(now)).order_by("pk"):
            last = job.heartbeat_at or job.started_at
            silent = int((now - last).total_seconds()) if last else 0
            reason = (f"worker lost: no heartbeat for {silent}s "
                      f"(run {job.attempts} of {max_attempts()})")
            base = model.objects.filter(pk=job.pk, lease=job.lease, status=ScoringStatus.RUNNING)
            if job.attempts < max_attempts():
                if base.update(status=ScoringStatus.QUEUED, lease="", task_id="", error=reason):
                    logger.warning("%s %s: %s; sent again", model.__name__, job.pk, reason)
                    counts["retried"] += 1
                    send(model.objects.get(pk=job.pk))
            elif base.update(status=ScoringStatus.FAILED, lease="", finished_at=now,
                             error=f"{reason}; no runs left"):
                logger.warning("%s %s: %s; failed", model.__name__, job.pk, reason)
                counts["failed"] += 1
    return counts
