"""Judge tasks (thin: an id in, a service call). LLM calls wait on the network, so they run
on `default`."""
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


@shared_task(name="judges.recover_stale")
def recover_stale_judges() -> dict:
    from metrics_app.services.judges.runs import judge_jobs_recover_stale

    return judge_jobs_recover_stale()
