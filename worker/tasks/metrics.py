"""Metric scoring tasks (thin: an id in, a service call).

`score_project` and `score_items` run on the queue chosen when they are enqueued: `default` for
the baselines, `gpu` for model-based metrics such as LERC
(`metrics_app.services.scoring.metric_queue`).
"""
from __future__ import annotations

from celery import shared_task


@shared_task(name="metrics.score_project", acks_late=True)
def score_project(job_id: int) -> None:
    from metrics_app.services.scoring import scoring_job_run

    scoring_job_run(job_id=job_id)


@shared_task(name="metrics.enqueue_pending_scoring")
def enqueue_pending_scoring() -> int:
    """Beat: send scoring jobs (project and posted items) created while the broker was
    unreachable."""
    from metrics_app.services.scoring import scoring_jobs_enqueue_pending

    return scoring_jobs_enqueue_pending()


@shared_task(name="metrics.score_items", acks_late=True)
def score_items(job_id: int) -> None:
    """Score the posted items of an `ItemScoringJob` (queue chosen when it is enqueued)."""
    from metrics_app.services.scoring import item_scoring_job_run

    item_scoring_job_run(job_id=job_id)


@shared_task(name="metrics.recover_stale_jobs")
def recover_stale_jobs() -> dict:
    """Beat: running jobs of every kind (scoring, judge runs, LERC training) whose worker
    stopped heartbeating are sent again or failed (the job lease, core/leases.py)."""
    from metrics_app.services.job_leases import stale_jobs_recover_all

    return stale_jobs_recover_all()
