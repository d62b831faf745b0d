"""The one job lease: a background job is "running" only while a live worker says so.

Every job that runs in a worker and must not run twice or stay "running" forever holds this
lease: project and item scoring jobs, judge runs, LERC training (and any later job). A job
kind is a model with these columns (the lease protocol):

    status        the job's state; the model's `lease_states` names its queued, running and
                  failed values
    lease         the owner id of the worker holding it (`owner_id()`: host:pid:nonce)
    heartbeat_at  when the holder last said it is alive
    started_at, finished_at, error
    attempts      optional: runs started so far; with it a stale job is sent again until
                  `QAJ_JOB_MAX_ATTEMPTS` runs have started, without it a stale job fails

A kind whose `lease_states` names a `cancelled` value can be cancelled by hand (`job_cancel`):
one conditional UPDATE makes a queued or running job cancelled, so a queued one is never
claimed and the sweep never sees it again. A worker running it finds out the way it finds out
that it lost its lease, at its next write or heartbeat (no second polling loop): its write
records its numbers (progress, cost) on the cancelled row and raises `JobCancelled`, so what it
already did and paid for stays counted, and the row stays cancelled.

A worker claims a job with one conditional UPDATE (`JobLease.claim`), so two deliveries of the
same message cannot both run it; a `Heartbeat` thread then renews `heartbeat_at` every
`QAJ_JOB_HEARTBEAT_SECONDS` while the job works, including single steps that take minutes.
Writes that name the lease (`JobLease.update`) stop a worker that lost its lease (the sweep
gave the job to another run) from overwriting the new run's result.

Recovery (`stale_jobs_recover`, run by one beat task over every job kind): a running job whose
heartbeat is older than `QAJ_JOB_STALE_AFTER_SECONDS` lost its worker (SIGKILL, out of memory,
machine lost); it is queued and sent again while attempts remain, otherwise failed with the
reason. The broker's own redelivery (late acks) is a second path to the same end; whichever
comes first claims the job and the other finds nothing to do.

Sending a job's task (`job_send`) records its task id; a job the broker never took keeps none
and beat sends it (`jobs_unsent`).

Plain Django (and the task sender of `core/background.py`): the job kinds live in the apps
above; this module knows only the protocol.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, NamedTuple

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import F, Q
from django.utils import timezone

from .background import task_send

logger = logging.getLogger(__name__)


class LeaseStates(NamedTuple):
    """The status values a job kind uses for the lease (a model's `lease_states`);
    `cancelled` empty: the kind cannot be cancelled by hand."""

    queued: str
    running: str
    failed: str
    cancelled: str = ""

    @property
    def in_flight(self) -> tuple[str, str]:
        """Queued or running: the job is not finished, failed or cancelled (a stale running
        one too: the sweep sends it again or fails it)."""
        return (self.queued, self.running)


class LeaseLost(Exception):
    """This worker no longer holds the job (it was recovered and given to another run, or
    failed by the sweep); it must stop without writing."""


class JobCancelled(LeaseLost):
    """Someone cancelled the job this worker runs (`job_cancel`): it stops asking for more
    work; the write that found out recorded its numbers on the cancelled row."""


# Columns of the lease protocol: a cancelled job keeps the status, times and reason its
# cancellation wrote; its worker's last write records only the job's own numbers.
_PROTOCOL_FIELDS = frozenset({"status", "lease", "heartbeat_at", "started_at", "finished_at",
                              "error", "attempts", "task_id"})


# --- the settings (one of each for every job kind) ---------------------------------------------

def heartbeat_seconds() -> float:
    return float(getattr(settings, "QAJ_JOB_HEARTBEAT_SECONDS", 15))


def stale_after_seconds() -> float:
    """How long a running job may be silent before it counts as lost. The one setting for
    every job kind (`QAJ_JOB_STALE_AFTER_SECONDS`; config/settings/base.py maps the old
    `QAJ_LERC_STALE_AFTER_SECONDS` onto it)."""
    return float(getattr(settings, "QAJ_JOB_STALE_AFTER_SECONDS", 120))


def max_attempts() -> int:
    """Runs a job may start (`QAJ_JOB_MAX_ATTEMPTS`); at least 1: a job that may never run
    is not a setting (0 failed every job unrun, and the LERC refresh's count of failures in a
    row indexed an empty list)."""
    return max(1, int(getattr(settings, "QAJ_JOB_MAX_ATTEMPTS", 3)))


# --- owners ------------------------------------------------------------------------------------

def owner_id() -> str:
    """A new owner id for one run in this process: `host:pid:nonce` (the nonce tells two runs
    of the same process apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"[-100:]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def owner_state(owner: str) -> Literal["dead", "alive", "elsewhere"]:
    """"dead" (this host, the process is gone), "alive" (this host, running) or "elsewhere"
    (another host, or unknown) for an owner id `host:pid[:nonce]`. A reused pid reads as
    alive: the safe side, the caller then waits for the heartbeat to go stale."""
    host, _sep, rest = (owner or "").partition(":")
    pid = rest.partition(":")[0]
    if not host or host != socket.gethostname() or not pid.isdigit():
        return "elsewhere"
    if int(pid) == os.getpid():
        return "alive"
    return "alive" if _pid_alive(int(pid)) else "dead"


# --- staleness ---------------------------------------------------------------------------------

def heartbeat_age(job: models.Model, now=None) -> float | None:
    """Seconds since the job's holder last beat (or started it); None when it never started."""
    last = job.heartbeat_at or job.started_at
    if last is None:
        return None
    return ((now or timezone.now()) - last).total_seconds()


def stale_filter(model: type[models.Model], now=None) -> Q:
    """Running jobs of `model` whose holder has been silent for longer than the stale limit."""
    cutoff = (now or timezone.now()) - timedelta(seconds=stale_after_seconds())
    return Q(status=model.lease_states.running) & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )


def claimable_filter(model: type[models.Model], now=None) -> Q:
    """Jobs of `model` a worker may claim: queued, or running with a stale heartbeat (its
    worker was lost)."""
    return Q(status=model.lease_states.queued) | stale_filter(model, now)


def held_filter(model: type[models.Model], now=None) -> Q:
    """Running jobs of `model` whose holder beat within the stale limit: a live worker holds
    them, and with them their scope (a stale one lost its worker: the sweep sends it again or
    fails it, and it holds nothing)."""
    return Q(status=model.lease_states.running) & ~stale_filter(model, now)


def _counts_attempts(model: type[models.Model]) -> bool:
    return any(field.name == "attempts" for field in model._meta.get_fields())


# --- the lease ---------------------------------------------------------------------------------

class JobLease:
    """This worker's claim on one job row; use as a context manager around the work (it runs
    the heartbeat thread).

    `claim()` returns None when there is nothing to do here: the job is finished, or running
    with a fresh heartbeat in another worker (a redelivered message), or out of attempts."""

    def __init__(self, model: type[models.Model], job_id: int):
        self.model = model
        self.states: LeaseStates = model.lease_states
        self.job_id = job_id
        self.token = owner_id()
        self.lost = threading.Event()
        self.cancelled = threading.Event()
        self._heartbeat: Heartbeat | None = None

    # --- claiming -----------------------------------------------------------------------------

    def claim(self, *, claimable: Q | None = None, **fields):
        """Make the job running under this lease if it is `claimable` (default:
        `claimable_filter`: queued, or running with a stale heartbeat), setting `fields` too; the job, or None. With an
        `attempts` column the run counts and a job out of attempts is not claimed."""
        now = timezone.now()
        if claimable is None:
            claimable = claimable_filter(self.model, now)
        jobs = self.model.objects.filter(claimable, pk=self.job_id)
        if _counts_attempts(self.model):
            jobs = jobs.filter(attempts__lt=max_attempts())
            fields.setdefault("attempts", F("attempts") + 1)
        claimed = jobs.update(status=self.states.running, lease=self.token, heartbeat_at=now,
                              **fields)
        if not claimed:
            job = self.model.objects.filter(pk=self.job_id).first()
            logger.info("%s %s not claimed (status %s): nothing to do in this worker",
                        self.model.__name__, self.job_id, getattr(job, "status", "missing"))
            return None
        return self.model.objects.get(pk=self.job_id)

    def _held(self):
        return self.model.objects.filter(pk=self.job_id, lease=self.token,
                                         status=self.states.running)

    def update(self, **fields) -> None:
        """Write fields of the job (and renew the heartbeat) if this worker still holds it;
        LeaseLost otherwise. JobCancelled when it was cancelled by hand while this worker ran
        it: the job's own numbers among `fields` (not its status, times or error) are written
        to the cancelled row first, so what this run did and paid for stays counted."""
        if not self.lost.is_set() and self.beat(**fields):
            return
        if self.cancelled.is_set():
            numbers = {name: value for name, value in fields.items()
                       if name not in _PROTOCOL_FIELDS}
            if numbers:
                self.model.objects.filter(pk=self.job_id, lease=self.token,
                                          status=self.states.cancelled).update(**numbers)
            raise JobCancelled(f"{self.model.__name__} {self.job_id} was cancelled")
        raise LeaseLost(f"{self.model.__name__} {self.job_id} was taken from this worker")

    def finish(self, *, status: str, **fields) -> None:
        self.update(status=status, finished_at=timezone.now(), **fields)

    def beat(self, **fields) -> bool:
        """Renew the heartbeat (writing `fields` with it) while this worker holds the job;
        False (and `lost` set) once it does not."""
        fields.setdefault("heartbeat_at", timezone.now())
        alive = self._held().update(**fields)
        if not alive:
            if self.states.cancelled and self.model.objects.filter(
                    pk=self.job_id, lease=self.token, status=self.states.cancelled).exists():
                self.cancelled.set()
            self.lost.set()
        return bool(alive)

    # --- heartbeat ----------------------------------------------------------------------------

    def __enter__(self) -> JobLease:
        self._heartbeat = Heartbeat(self.beat, every=heartbeat_seconds(),
                                    name=f"lease-{self.job_id}").start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._heartbeat.stop()


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
def leased_run(model: type[models.Model], job_id: int, *,
               claim_lock: Callable[[], object] | None = None, **claim_fields
               ) -> Iterator[tuple[JobLease, object]]:
    """Claim the job (a new run: started now, not finished, plus `claim_fields`, which may
    name `claimable`) and run the body under its lease, heartbeat included: yields (lease,
    job), job None when there is nothing to do here (finished, or alive in another worker). A
    lost lease ends the run quietly (another run owns the job); any other error fails the job
    with its message and is raised again (for Celery's log).

    `claim_lock`: called in the claim's transaction just before it, to take a row lock that
    claims which must not overlap take first (one run of a scope at a time: with it a
    `claimable` that looks at the other jobs of the scope sees their committed claims)."""
    with JobLease(model, job_id) as lease:
        with transaction.atomic():
            if claim_lock is not None:
                claim_lock()
            job = lease.claim(started_at=timezone.now(), finished_at=None, **claim_fields)
        try:
            yield lease, job
        except JobCancelled:
            logger.info("%s %s was cancelled; this run stops", model.__name__, job_id)
        except LeaseLost:
            logger.warning("%s %s was taken over; this run stops", model.__name__, job_id)
        except Exception as exc:
            try:
                lease.finish(status=lease.states.failed, error=f"{type(exc).__name__}: {exc}")
            except JobCancelled:
                # Cancelled before it broke: the row stays cancelled; the error is logged.
                pass
            raise


# --- cancelling by hand ------------------------------------------------------------------------

def job_cancel(model: type[models.Model], job_id: int, *, reason: str) -> bool:
    """Cancel a queued or running job of a kind that can be cancelled, with `reason` as its
    error text (who and when): one conditional UPDATE, so it races safely with a claim (a
    cancelled job is never claimed) and with a finish (whichever writes first wins). A running
    job's worker stops at its next write or heartbeat (`JobLease.update`); its lease stays on
    the row so that write can still record its numbers. False when the job is neither queued
    nor running (finished, failed or already cancelled)."""
    states = model.lease_states
    if not states.cancelled:
        raise ValueError(f"{model.__name__} jobs cannot be cancelled")
    return bool(model.objects.filter(pk=job_id, status__in=(states.queued, states.running))
                .update(status=states.cancelled, finished_at=timezone.now(), error=reason))


def scope_lock(row: models.Model) -> None:
    """Lock the row a kind's jobs are queued under (a project) until the transaction ends:
    two requests queuing a job in one scope take turns, so the second one's look for a job
    already in flight sees the first one's (PostgreSQL; SQLite's IMMEDIATE transactions take
    turns anyway). NO KEY UPDATE: rows that merely point at it are not held up."""
    list(type(row).objects.select_for_update(no_key=True).filter(pk=row.pk)
         .values_list("pk", flat=True))


def job_in_flight(model: type[models.Model], *,
                  same: Callable[[models.Model], bool] | None = None, **scope):
    """The oldest queued or running job of `model` in `scope` (field lookups: `project=`,
    `judge_version=` ...), if any: what a second request to queue the same work answers with
    instead of a second job. `same`: what else must match that the database cannot compare
    alike everywhere (a JSON list in any order). Queuing asks it under `scope_lock`, so two
    requests at once take turns."""
    jobs = model.objects.filter(status__in=model.lease_states.in_flight, **scope).order_by("pk")
    if same is None:
        return jobs.first()
    return next((job for job in jobs if same(job)), None)


def job_send(job: models.Model, task_name: str, **options) -> bool:
    """Send the job's task (`core/background.py` `task_send`, by name; `options` go to
    `apply_async`: queue ...) and record its task id; False when the broker is unreachable:
    the job stays queued without a task id, and beat sends it (`jobs_unsent`)."""
    try:
        result = task_send(task_name, args=[job.pk], **options)
    except Exception:
        logger.warning("%s %s not sent (broker unavailable); will retry", type(job).__name__,
                       job.pk, exc_info=True)
        return False
    type(job).objects.filter(pk=job.pk).update(task_id=result.id or "")
    return True


def job_send_after(job: models.Model, task_name: str, *, holder: models.Model,
                   **options) -> bool:
    """Send a queued job again later because `holder`, another job of its scope, is running in
    a live worker (one run of a scope at a time): by then the holder has stored its results,
    so the job does only what is left. Noted on the job (`detail.waiting_for_job`). With the
    broker down its task id is cleared, and beat sends it (`jobs_unsent`)."""
    model = type(job)
    model.objects.filter(pk=job.pk).update(detail={"waiting_for_job": holder.pk})
    logger.info("%s %s waits for job %s (the same scope)", model.__name__, job.pk, holder.pk)
    if job_send(job, task_name, countdown=max(10, int(stale_after_seconds() // 4)), **options):
        return True
    model.objects.filter(pk=job.pk, status=model.lease_states.queued).update(task_id="")
    return False


def jobs_unsent(model: type[models.Model], *, older_than_seconds: float):
    """Queued jobs of `model` that never reached the broker (no task id: it was down when they
    were queued, or a sweep queued them again), oldest first, for beat to send. Jobs younger
    than `older_than_seconds` are left alone: their task id is written just after sending."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return model.objects.filter(status=model.lease_states.queued, task_id="",
                                created_at__lte=cutoff).order_by("pk")


# --- recovery ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class LeasedJobKind:
    """One kind of lease-holding job for the sweep: its model, how to send a job again
    (`resend`; None: a stale job is failed, not retried), and what else to record when the
    sweep fails one (`on_failed(job, reason)`, after the row is failed)."""

    model: type[models.Model]
    resend: Callable[[models.Model], object] | None = None
    on_failed: Callable[[models.Model, str], object] | None = None


def stale_jobs_recover(kinds: Iterable[LeasedJobKind]) -> dict[str, int]:
    """Running jobs without a fresh heartbeat lost their worker. Queue and send them again
    while attempts remain (kinds that can be resent), otherwise fail them saying why. Returns
    counts."""
    counts = {"retried": 0, "failed": 0}
    now = timezone.now()
    for kind in kinds:
        model, states = kind.model, kind.model.lease_states
        retries = kind.resend is not None and _counts_attempts(model)
        for job in model.objects.filter(stale_filter(model, now)).order_by("pk"):
            silent = int(heartbeat_age(job, now) or 0)
            if retries:
                reason = (f"worker lost: no heartbeat for {silent}s "
                          f"(run {job.attempts} of {max_attempts()})")
            else:
                reason = f"worker lost: no heartbeat for {silent}s (last worker {job.lease or '?'})"
            held = model.objects.filter(pk=job.pk, lease=job.lease, status=states.running)
            if retries and job.attempts < max_attempts():
                if held.update(status=states.queued, lease="", task_id="", error=reason):
                    logger.warning("%s %s: %s; sent again", model.__name__, job.pk, reason)
                    counts["retried"] += 1
                    kind.resend(model.objects.get(pk=job.pk))
                continue
            if retries:
                reason = f"{reason}; no runs left"
            if held.update(status=states.failed, lease="", finished_at=now, error=reason):
                logger.warning("%s %s: %s; failed", model.__name__, job.pk, reason)
                counts["failed"] += 1
                if kind.on_failed is not None:
                    kind.on_failed(model.objects.get(pk=job.pk), reason)
    return counts
