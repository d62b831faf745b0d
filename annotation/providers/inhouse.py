"""In-house annotators (experts with a signed personal link): everything happens locally.

Publishing opens the stage's HITs; approving or paying is a local record (experts are paid
outside the platform); blocking is the local worker status, which the task pages honour.
"""
from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from annotation.models import HitStatus, Provider

from .base import CrowdProvider, PublishReport, Submission


class InhouseProvider(CrowdProvider):
    name = Provider.INHOUSE

    def publish_stage(self, *, stage) -> PublishReport:
        pending = stage.hits.filter(status=HitStatus.PENDING)
        created = 0
        for hit in pending:
            hit.external_id = f"inhouse-{hit.pk}"
            hit.status = HitStatus.OPEN
            hit.save(update_fields=["external_id", "status"])
            created += 1
        return PublishReport(created=created)

    def expire_stage(self, *, stage) -> None:
        stage.hits.filter(status=HitStatus.OPEN).update(status=HitStatus.EXPIRED)

    def extend_stage(self, *, stage, seconds: int) -> None:
        stage.hits.filter(status=HitStatus.EXPIRED).update(status=HitStatus.OPEN)

    def list_submissions(self, *, stage) -> Iterator[Submission]:
        """Nothing to reconcile: the local assignments are the only record."""
        return iter(())

    def approve(self, *, assignment, feedback: str = "") -> dict:
        return {"local": True}

    def reject(self, *, assignment, reason: str) -> dict:
        return {"local": True}

    def bonus(self, *, assignment, amount: Decimal, reason: str, token: str) -> dict:
        return {"local": True, "note": "paid outside the platform"}
