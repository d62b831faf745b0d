"""LERC tasks (routed to the `gpu` queue by CELERY_TASK_ROUTES, except the beat check
`lerc_refresh`, which goes to `default`). Thin: ids in, one service call each
(metrics_app/services/lerc/runs.py). Late acks + reject-on-worker-lost mean a task whose worker
dies is delivered again; the services make that safe (a finished version is left alone, a dead
one resumes or is failed by the job lease sweep, `metrics.recover_stale_jobs`, which also sends
`lerc_evaluate` again for a version trained but never decided)."""
from __future__ import annotations

from celery import shared_task


@shared_task(bind=True, name="worker.tasks.lerc.lerc_train", acks_late=True,
             reject_on_worker_lost=True, max_retries=None)
def lerc_train(self, model_version_id: int) -> str:
    from metrics_app.services.lerc import TrainingElsewhere
    from metrics_app.services.lerc.runs import model_version_train_run

    try:
        return model_version_train_run(model_version_id=model_version_id)
    except TrainingElsewhere as exc:
        # Unbounded: every retry ends once the version is finished, failed or resumed here.
        raise self.retry(countdown=exc.countdown) from exc


@shared_task(name="worker.tasks.lerc.lerc_evaluate", acks_late=True, reject_on_worker_lost=True)
def lerc_evaluate(model_version_id: int) -> str:
    """Decide a version trained but never decided (sent again by the lease sweep); a decided
    version is left alone, so a late or second delivery decides nothing twice."""
    from metrics_app.services.lerc.runs import model_version_decide_run

    return model_version_decide_run(model_version_id=model_version_id)


@shared_task(name="worker.tasks.lerc.lerc_score_project", acks_late=True)
def lerc_score_project(project_id: int, model_version_id: int | None = None) -> dict:
    """Legacy: nothing sends this any more. A message still in a broker becomes an ordinary
    scoring job of the project's LERC metric (job lease, one run, the promoted version)."""
    from metrics_app.services.lerc.runs import lerc_scoring_job_for_message

    return lerc_scoring_job_for_message(project_id=project_id,
                                        model_version_id=model_version_id)


@shared_task(name="worker.tasks.lerc.lerc_refresh")
def lerc_refresh() -> list[int]:
    """Beat: enqueue retraining for projects with enough new judgments."""
    from metrics_app.services.lerc import lerc_refresh as refresh

    return [version.id for version in refresh()]
