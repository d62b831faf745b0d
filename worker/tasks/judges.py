"""Judge tasks (thin: an id in, a service call). LLM calls wait on the network, so they run
on `default`. A judge run whose worker died is recovered by the one job lease sweep
(`metrics.recover_stale_jobs`)."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="judges.run", acks_late=True)
def run_judge(job_id: int) -> None:
    from metrics_app.services.judges.runs import judge_job_run

    judge_job_run(job_id=job_id)


@shared_task(name="judges.enqueue_pending")
def enqueue_pending_judges() -> int:
    from metrics_app.services.judges.runs import judge_jobs_enqueue_pending

    return judge_jobs_enqueue_pending()
