"""The jobs that hold the job lease (core/leases.py) and their one recovery sweep.

Every kind of background job that can be left "running" by a dead worker is listed here, with
what recovery does to it:

- project and item scoring jobs (`ScoringJob`, `ItemScoringJob`; services/scoring.py) and
  judge runs (`JudgeJob`; services/judges/runs.py) are sent again until QAJ_JOB_MAX_ATTEMPTS
  runs have started, then failed with the reason;
- LERC training (`ModelVersion`; services/lerc/training.py) is failed at once (a retrain is a
  new version) and the failure is logged on the version;
- a LERC version trained but never decided (its evaluation stored, the promotion decision
  lost with its worker or message) holds no lease, so the same sweep looks for it too
  (services/lerc/refresh.py `model_versions_decide_pending`): its decision is sent again a
  bounded number of times, then the version is failed with the reason.

Provider publish/sync jobs hold no "running" row (they are idempotent and re-run by beat).
A new lease-holding job kind is added to `leased_job_kinds`.

Project scoring jobs and judge runs can be cancelled by hand (`leased_job_cancel`, the one
service of the admin action, the API and the metrics page); LERC training has its own
(`model_version_cancel`: a version's cancellation is logged as an event).
"""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from core.leases import LeasedJobKind, job_cancel, stale_jobs_recover

from ..models import ItemScoringJob, JudgeJob, ModelVersion, ScoringJob
from .judges.runs import judge_job_send
from .lerc.refresh import model_versions_decide_pending
from .lerc.training import model_version_worker_lost
from .scoring import scoring_job_send


def leased_job_kinds() -> list[LeasedJobKind]:
    return [
        LeasedJobKind(ScoringJob, resend=scoring_job_send),
        LeasedJobKind(ItemScoringJob, resend=scoring_job_send),
        LeasedJobKind(JudgeJob, resend=judge_job_send),
        LeasedJobKind(ModelVersion, on_failed=model_version_worker_lost),
    ]


def stale_jobs_recover_all() -> dict[str, int]:
    """Beat: every running job whose worker stopped beating, of every kind, is sent again or
    failed (core/leases.py `stale_jobs_recover`), and so is every LERC promotion decision that
    never ran (`model_versions_decide_pending`). Returns counts."""
    counts = stale_jobs_recover(leased_job_kinds())
    for outcome, n in model_versions_decide_pending().items():
        counts[outcome] += n
    return counts


class JobNotCancellable(ValueError):
    """The job is not queued or running (done, failed or already cancelled); the message
    names the job and its status."""


def job_label(job: ScoringJob | JudgeJob) -> str:
    """"judge job 12" / "scoring job 7": how messages name a job."""
    return f"{'judge' if isinstance(job, JudgeJob) else 'scoring'} job {job.pk}"


def leased_job_cancel(*, job: ScoringJob | JudgeJob, user=None) -> ScoringJob | JudgeJob:
    """Cancel a queued or running project scoring job or judge run, recording who and when in
    its `error`. Queued: it is never run when its message arrives. Running: its worker stops at
    its next stored batch or heartbeat (core/leases.py `JobLease.update`), keeping the scores
    or verdicts stored so far and counting their cost in `spent`. Either way the sweep never
    sends it again. JobNotCancellable for a job already done, failed or cancelled. Returns the
    job as stored now."""
    if not isinstance(job, ScoringJob | JudgeJob):
        raise TypeError(f"{type(job).__name__} jobs cannot be cancelled here")
    model = type(job)
    who = user.get_username() if getattr(user, "pk", None) else "an operator"
    when = timezone.now().strftime("%Y-%m-%d %H:%M:%S UTC")
    with transaction.atomic():
        # Locked so the reason says truly what the job was (a worker's claim waits).
        was = (model.objects.select_for_update().filter(pk=job.pk)
               .values_list("status", flat=True).first())
        if not job_cancel(model, job.pk, reason=f"cancelled by {who} at {when} (was {was})"):
            raise JobNotCancellable(f"{job_label(job)} is {was or 'gone'}; only a queued or "
                                    "running job can be cancelled")
    return model.objects.get(pk=job.pk)
