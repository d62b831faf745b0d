from __future__ import annotations

from django.db import models

from .crowd import Assignment, Hit, Worker
from .stage import Provider, Stage


class ProviderCallStatus(models.TextChoices):
    PENDING = "pending", "Pending (sent or about to be sent; outcome unknown)"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed (the provider refused it)"


class ProviderCall(models.Model):
    """One outbound side effect on a crowd provider (create a HIT, pay a bonus, approve ...).

    The row is written and committed BEFORE the provider is called: `key` says what the call is
    for (one bonus of one assignment, one HIT ...) so a redelivered Celery task finds the row and
    never repeats a call that succeeded; `token` is what the provider receives as its idempotency
    token (MTurk UniqueRequestToken), so a retry of a call whose response was lost cannot create a
    second HIT or pay twice either.
    """

    provider = models.CharField(max_length=20, choices=Provider.choices)
    operation = models.CharField(max_length=60)
    key = models.CharField(max_length=200, unique=True)
    token = models.CharField(max_length=64)
    status = models.CharField(
        max_length=10, choices=ProviderCallStatus.choices, default=ProviderCallStatus.PENDING
    )
    stage = models.ForeignKey(
        Stage, null=True, blank=True, on_delete=models.CASCADE, related_name="provider_calls"
    )
    hit = models.ForeignKey(
        Hit, null=True, blank=True, on_delete=models.CASCADE, related_name="provider_calls"
    )
    assignment = models.ForeignKey(
        Assignment, null=True, blank=True, on_delete=models.CASCADE, related_name="provider_calls"
    )
    worker = models.ForeignKey(
        Worker, null=True, blank=True, on_delete=models.CASCADE, related_name="provider_calls"
    )
    amount = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True)
    request = models.JSONField(default=dict, blank=True)
    response = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["operation", "status"], name="providercall_op_status_idx")
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.operation} {self.key} ({self.status})"
