"""Blocking and unblocking a selection of workers on their provider in the background (the
admin's "Block / unblock on the provider too"). One provider call per worker took the web
request past any timeout (68 s for 1,000 workers whose provider credentials failed), so the
request does what is local at once and queues the provider's calls:

- block: the local block is written at once (`workers_block`, one request of constant
  queries), one `ProviderCall` row per worker written PENDING under one batch token, then a
  Celery task (`worker.tasks.providers.worker_provider_calls_run`) makes the calls;
- unblock: the refusals (`worker_provider_unblock_check`) are answered at once; the provider
  is called first, in the task, and a worker is unblocked here only once the provider has
  unblocked them (as `worker_unblock_everywhere`: a failure leaves them blocked on both sides).

Each worker's outcome stays on their call's row (the admin's Provider calls, searched by the
batch token): SUCCEEDED, or FAILED with the provider's error; every call goes through
`provider_call_run`, so a redelivered task repeats only what has not succeeded."""
from __future__ import annotations

import dataclasses

from django.contrib.auth import get_user_model
from django.utils import timezone

from annotation.access_selectors import workers_visible_to
from annotation.models import ProviderCall, ProviderCallStatus, Worker
from annotation.providers import get_provider
from annotation.providers.calls import new_token, provider_call_run
from annotation.services.workers import (
    WorkerUnblockRefused,
    worker_blocked_by,
    worker_provider_unblock_check,
    worker_unblock,
    workers_block,
)
from core.background import BrokerUnreachable, task_send_or_fail_fast

BLOCK_OPERATION = "BlockWorker"
UNBLOCK_OPERATION = "UnblockWorker"
RUN_TASK = "worker.tasks.providers.worker_provider_calls_run"


class ProviderCallNotSent(Exception):
    """A queued call the task no longer makes, and why (recorded FAILED on its row)."""


@dataclasses.dataclass
class ProviderCallsQueued:
    """What a block or unblock on the provider did in the request: `batch` names its calls
    (`ProviderCall.key` ends with it), `queued` of them sent to the task queue; `refused`: the
    workers whose unblock was refused, each sentence naming them; `not_queued`: why nothing
    was sent (the broker is unreachable; the calls are marked FAILED saying so)."""
    batch: str
    queued: int = 0
    refused: list[str] = dataclasses.field(default_factory=list)
    not_queued: str = ""


def workers_block_on_provider_enqueue(*, workers, reason: str, by=None) -> ProviderCallsQueued:
    """Block these workers here now (`workers_block`: for `by`'s projects, or globally for a
    superuser) and queue the block on each one's provider."""
    ids = workers_block(workers=workers, reason=reason, by=by)
    return _calls_queue(operation=BLOCK_OPERATION, worker_ids=ids, by=by,
                        request={"reason": reason.strip()})


def workers_unblock_on_provider_enqueue(*, workers, reason: str = "",
                                        by=None) -> ProviderCallsQueued:
    """Queue the unblock of these workers on their provider, then here; a worker whose block
    `by` may not lift there (`worker_provider_unblock_check`) is refused at once, unchanged."""
    allowed, refused = [], []
    for worker in workers:
        try:
            worker_provider_unblock_check(worker=worker, by=by)
        except WorkerUnblockRefused as exc:
            refused.append(str(exc))
        else:
            allowed.append(worker.pk)
    queued = _calls_queue(operation=UNBLOCK_OPERATION, worker_ids=allowed, by=by,
                          request={"reason": reason.strip() or "unblocked"})
    queued.refused = refused
    return queued


def _calls_queue(*, operation: str, worker_ids: list[int], by,
                 request: dict) -> ProviderCallsQueued:
    """One PENDING call per worker under a new batch token, then the task that makes them."""
    verb = "block" if operation == BLOCK_OPERATION else "unblock"
    batch = new_token(verb)
    queued = ProviderCallsQueued(batch=batch)
    if not worker_ids:
        return queued
    request = {**request, "batch": batch, "queued_by": getattr(by, "pk", None)}
    ProviderCall.objects.bulk_create([
        ProviderCall(provider=provider, operation=operation, key=f"{provider}:{verb}:{pk}:{batch}",
                     token=new_token("qaj"), worker_id=pk, request=request)
        for pk, provider in Worker.objects.filter(pk__in=worker_ids).order_by("pk")
        .values_list("pk", "provider")])
    try:
        task_send_or_fail_fast(RUN_TASK, args=[batch])
    except BrokerUnreachable as exc:
        queued.not_queued = f"the task broker is unreachable ({exc})"
        _batch_calls(batch).filter(status=ProviderCallStatus.PENDING).update(
            status=ProviderCallStatus.FAILED, completed_at=timezone.now(),
            error=f"not sent: {queued.not_queued}")
        return queued
    queued.queued = len(worker_ids)
    return queued


def _batch_calls(batch: str):
    return ProviderCall.objects.filter(key__endswith=f":{batch}")


def worker_provider_calls_run(*, batch: str) -> dict[str, int]:
    """Make the batch's calls still pending (the task's body): each worker's block or unblock
    on their provider, and after an unblock there, the unblock here. A failure is recorded on
    the worker's call (FAILED, the provider's error) and the next worker goes on. Returns how
    many succeeded and failed."""
    outcome = {"succeeded": 0, "failed": 0}
    calls = _batch_calls(batch).filter(status=ProviderCallStatus.PENDING).select_related(
        "worker").order_by("pk")
    for call in calls:
        try:
            _call_make(call)
        except Exception as exc:  # noqa: BLE001 - the provider's answer, kept on its row
            ProviderCall.objects.filter(pk=call.pk).update(
                status=ProviderCallStatus.FAILED, completed_at=timezone.now(),
                error=(str(exc) if isinstance(exc, ProviderCallNotSent)
                       else f"{type(exc).__name__}: {exc}")[:2000])
            outcome["failed"] += 1
        else:
            outcome["succeeded"] += 1
    return outcome


def _call_make(call: ProviderCall) -> None:
    worker = call.worker
    reason = (call.request or {}).get("reason", "")
    by_pk = (call.request or {}).get("queued_by")
    by = get_user_model().objects.filter(pk=by_pk).first() if by_pk else None
    if by_pk and by is None and call.operation == BLOCK_OPERATION:
        # The account was deleted since the click (an unblock still goes: the local blocks
        # went with the account, and the provider's must not outlive them).
        raise ProviderCallNotSent("not sent: the account that queued it has been deleted "
                                  "since")
    if by is not None and not workers_visible_to(by).filter(pk=worker.pk).exists():
        # The researcher lost the projects this worker worked on (a share revoked, the staff
        # flag removed) after the click: their next page would not show the worker either.
        raise ProviderCallNotSent(f"not sent: {by.get_username()}, who queued it, no longer "
                                  f"has access to {worker}'s projects")
    provider = get_provider(worker.provider)
    if call.operation == BLOCK_OPERATION:
        # Unblocked here since the click (a block by mistake, undone at once, whose unblock's
        # task ran first): blocking on the provider now would leave the worker blocked on the
        # whole requester account while active here.
        if not worker_blocked_by(worker=worker, by=by):
            raise ProviderCallNotSent(f"not sent: {worker} was unblocked here before the "
                                      "block reached the provider")
        provider_call_run(provider=call.provider, operation=call.operation, key=call.key,
                          call_fn=lambda _token: provider.block(worker=worker, reason=reason))
        return
    # Someone may have blocked the worker since the click: their block stays.
    worker_provider_unblock_check(worker=worker, by=by)
    provider_call_run(provider=call.provider, operation=call.operation, key=call.key,
                      call_fn=lambda _token: provider.unblock(worker=worker, reason=reason))
    worker_unblock(worker=worker, by=by)
