"""Crowd-provider jobs: publish a stage, sync and review it, grant qualifications, pay bonuses.

Tasks take ids and call services. They are safe to run twice (Celery redelivers a task whose
worker died, CELERY_TASK_ACKS_LATE): every provider side effect goes through
`provider_call_run`, so a redelivered task finds the calls that succeeded and repeats only the
unfinished ones with their original idempotency tokens.
"""
from __future__ import annotations

import logging
from decimal import Decimal

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="worker.tasks.providers.stage_publish")
def stage_publish(stage_id: int, user_id: int | None = None,
                  override_reason: str | None = None,
                  confirmed_total: str | None = None) -> dict:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import AnonymousUser

    from annotation.models import Stage
    from annotation.services.stages import stage_publish as publish

    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    if user_id and user is None:  # deleted since the click: refused (`queued_access_refusal`)
        user = AnonymousUser()
    result = publish(stage=Stage.objects.get(pk=stage_id), user=user,
                     override_reason=override_reason,
                     confirmed_total=Decimal(confirmed_total) if confirmed_total else None,
                     actor="Celery task worker.tasks.providers.stage_publish",
                     queued=True)
    return {"created": result.report.created, "failed": result.report.failed,
            "status": result.stage.status}


@shared_task(name="worker.tasks.providers.worker_provider_calls_run")
def worker_provider_calls_run(batch: str) -> dict:
    """The admin's "Block / unblock on the provider too", queued: the batch's calls, one per
    worker (`annotation.services.review.provider_blocks`)."""
    from annotation.services.review.provider_blocks import worker_provider_calls_run as run

    return run(batch=batch)


@shared_task(name="worker.tasks.providers.stage_sync")
def stage_sync(stage_id: int) -> dict:
    from annotation.models import Stage
    from annotation.services.review import SyncAlreadyRunning, stage_sync_and_review

    try:
        sync, review = stage_sync_and_review(stage=Stage.objects.get(pk=stage_id))
    except SyncAlreadyRunning as busy:  # the beat's next run, or a redelivery: not an error
        logger.info("stage %s: %s", stage_id, busy)
        return {"skipped": str(busy)}
    if review.errors:
        logger.warning("review of stage %s: %s", stage_id, "; ".join(review.errors[:10]))
    return {"listed": sync.listed, "flagged": sync.flagged, "approved": review.approved,
            "rejected": review.rejected, "bonuses": review.bonuses, "errors": len(review.errors),
            "never_listed": review.never_listed, "reconciled": sync.reconciled,
            "reoffered": sync.reoffered, "given_back": sync.given_back,
            "recruiting_problem": sync.recruiting_problem, "held_paid": sync.held_paid,
            "kept_rejected": sync.kept_rejected, "overruled": sync.overruled}


@shared_task(name="worker.tasks.providers.providers_sync_all")
def providers_sync_all() -> int:
    """Beat entry: queue a sync of every stage due for one (`stage_ids_to_sync`)."""
    from annotation.selectors import stage_ids_to_sync

    ids = stage_ids_to_sync()
    for stage_id in ids:
        stage_sync.delay(stage_id)
    return len(ids)


@shared_task(name="worker.tasks.providers.qualification_grant")
def qualification_grant(qualification_id: int) -> None:
    from annotation.models import WorkerQualification
    from annotation.services.qualification import qualification_grant as grant

    grant(qualification=WorkerQualification.objects.select_related("worker", "stage")
          .get(pk=qualification_id))


@shared_task(name="worker.tasks.providers.assignment_bonus")
def assignment_bonus(assignment_id: int, amount: str, reason: str, key: str) -> None:
    from annotation.models import Assignment
    from annotation.services.review import assignment_bonus_pay

    assignment_bonus_pay(assignment=Assignment.objects.get(pk=assignment_id),
                         amount=Decimal(amount), reason=reason, key=key)
