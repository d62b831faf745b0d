"""Run provider side effects at most once.

`provider_call_run` writes a `ProviderCall` row (key + provider token) before the provider is
called and records the outcome afterwards. A second run with the same key — a retried admin
action, a Celery task redelivered after its worker died — returns the stored response of a call
that succeeded instead of calling again; a call whose outcome is unknown (timeout, lost response)
is repeated with the SAME provider token, which the provider deduplicates.

Call it outside any long transaction: the row must be committed before the network call so that
a crash after the call still leaves the token behind.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.utils import timezone

from annotation.models import ProviderCall, ProviderCallStatus


class ProviderCallRefused(Exception):
    """The provider refused the call for good (not a transient fault)."""


class ApprovedOnProvider(ProviderCallRefused):
    """A rejection refused because the provider holds the work approved and paid already
    (MTurk's auto-approval delay ran out, or it was approved on the provider's site): it can
    no longer be rejected there."""


def new_token(prefix: str) -> str:
    # MTurk accepts at most 64 characters; a random part keeps tokens unique across databases
    # sharing one requester account (test databases, staging and production).
    return f"{prefix}-{uuid.uuid4().hex}"[:64]


def provider_call_get_or_create(
    *,
    provider: str,
    operation: str,
    key: str,
    token: str | None = None,
    stage=None,
    hit=None,
    assignment=None,
    worker=None,
    amount: Decimal | None = None,
    request: dict | None = None,
) -> ProviderCall:
    call, _ = ProviderCall.objects.get_or_create(
        key=key,
        defaults={
            "provider": provider,
            "operation": operation,
            "token": token or new_token("qaj"),
            "stage": stage,
            "hit": hit,
            "assignment": assignment,
            "worker": worker,
            "amount": amount,
            "request": request or {},
        },
    )
    return call


def provider_call_run(
    *,
    provider: str,
    operation: str,
    key: str,
    call_fn: Callable[[str], dict[str, Any] | None],
    token: str | None = None,
    **fields,
) -> dict[str, Any]:
    """Run `call_fn(token)` unless the call with this key already succeeded.

    `call_fn` raises `ProviderCallRefused` for a definite refusal (the row becomes FAILED and the
    error propagates); any other exception leaves the row PENDING so a later retry repeats the
    call with the same token.
    """
    call = provider_call_get_or_create(
        provider=provider, operation=operation, key=key, token=token, **fields
    )
    if call.status == ProviderCallStatus.SUCCEEDED:
        return call.response
    call.attempts += 1
    call.save(update_fields=["attempts"])
    try:
        response = call_fn(call.token) or {}
    except ProviderCallRefused as exc:
        call.status = ProviderCallStatus.FAILED
        call.error = str(exc)[:2000]
        call.completed_at = timezone.now()
        call.save(update_fields=["status", "error", "completed_at"])
        raise
    except Exception as exc:
        call.error = f"{type(exc).__name__}: {exc}"[:2000]
        call.save(update_fields=["error"])
        raise
    call.status = ProviderCallStatus.SUCCEEDED
    call.response = _jsonable(response)
    call.error = ""
    call.completed_at = timezone.now()
    call.save(update_fields=["status", "response", "error", "completed_at"])
    return call.response


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
