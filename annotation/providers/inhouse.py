"""In-house annotators (experts with a signed personal link): everything happens locally.

Publishing opens the stage's HITs (the service records what this provider yields); approving or paying is a local record (experts are paid
outside the platform); blocking is the local worker status, which the task pages honour.
"""
from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from annotation.models import HitStatus, Provider

from .base import CrowdProvider, HitUpdate, Submission


class InhouseProvider(CrowdProvider):
    name = Provider.INHOUSE

    def publish_stage(self, *, stage) -> Iterator[HitUpdate]:
        for hit_id in stage.hits.filter(status=HitStatus.PENDING).values_list("pk", flat=True):
            yield HitUpdate(hit_id=hit_id, status=HitStatus.OPEN, external_id=f"inhouse-{hit_id}")

    def expire_stage(self, *, stage) -> Iterator[HitUpdate]:
        for hit_id in stage.hits.filter(status=HitStatus.OPEN).values_list("pk", flat=True):
            yield HitUpdate(hit_id=hit_id, status=HitStatus.EXPIRED)

    def extend_stage(self, *, stage, seconds: int) -> Iterator[HitUpdate]:
        for hit_id in stage.hits.filter(status=HitStatus.EXPIRED).values_list("pk", flat=True):
            yield HitUpdate(hit_id=hit_id, status=HitStatus.OPEN)

    def list_submissions(self, *, stage) -> Iterator[Submission]:
        """Nothing to reconcile: the local assignments are the only record."""
        return iter(())

    def approve(self, *, assignment, feedback: str = "") -> dict:
        return {"local": True}

    def reject(self, *, assignment, reason: str) -> dict:
        return {"local": True}

    def rejection_reversal_refusal(self, *, assignment, now) -> str:
        return ""  # a local record: experts are paid outside the platform

    def approve_rejected(self, *, assignment, feedback: str) -> dict:
        return {"local": True, "override_rejection": True}

    def bonus(self, *, assignment, amount: Decimal, reason: str, token: str) -> dict:
        return {"local": True, "note": "paid outside the platform"}
