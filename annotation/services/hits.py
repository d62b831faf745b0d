"""HIT rows as the providers report them: what a publish created, what an expire or extend
changed. Providers only translate; they yield `HitUpdate`s and this records each one as it
arrives, so a HIT a worker can already accept on MTurk is known locally at once."""
from __future__ import annotations

from collections.abc import Iterable

from annotation.models import Hit, HitStatus, Stage, StageStatus
from annotation.providers import CrowdProvider, HitFailure, HitUpdate, PublishReport
from annotation.providers.calls import new_token

RECORDED_FIELDS = ("external_id", "hit_type_id", "expires_at", "unique_request_token")


def hit_update_record(*, update: HitUpdate) -> None:
    """Write what the provider did to one HIT (fields it left as None stay as they are)."""
    fields = {"status": update.status}
    fields.update({name: getattr(update, name) for name in RECORDED_FIELDS
                   if getattr(update, name) is not None})
    Hit.objects.filter(pk=update.hit_id).update(**fields)


def hit_updates_record(updates: Iterable[HitUpdate]) -> int:
    """Record every update (an expire or extend of a stage); how many HITs changed."""
    n = 0
    for update in updates:
        hit_update_record(update=update)
        n += 1
    return n


def stage_hits_publish(*, stage: Stage, provider: CrowdProvider) -> PublishReport:
    """Create the stage's pending HITs on `provider`, recording each as it is created, and say
    how many were created, found created already, or failed (publish again to retry)."""
    if provider.needs_request_tokens:
        _request_tokens_store(stage)
    report = PublishReport()
    for outcome in provider.publish_stage(stage=stage):
        if isinstance(outcome, HitFailure):
            report.failed += outcome.count
            report.errors.append(outcome.error)
        else:
            hit_update_record(update=outcome)
            if outcome.created:
                report.created += 1
            else:
                report.already_created += 1
        # Closed meanwhile (the admin's Close beside a background publish): create no more.
        # What was created is expired by the close, or by the publish (`stage_publish`).
        if Stage.objects.filter(pk=stage.pk, status=StageStatus.CLOSED).exists():
            break
    return report


def _request_tokens_store(stage: Stage) -> None:
    """Give every pending HIT its idempotency token, committed BEFORE any create call: a create
    whose answer is lost is retried with the same token, which the provider deduplicates."""
    for hit in stage.hits.filter(status=HitStatus.PENDING, unique_request_token=""):
        hit.unique_request_token = new_token(f"qaj-hit-{hit.pk}")
        hit.save(update_fields=["unique_request_token"])
