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
"""
from __future__ import annotations

from core.leases import LeasedJobKind, stale_jobs_recover

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
