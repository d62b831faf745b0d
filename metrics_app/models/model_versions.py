"""Trained LERC model versions (every one kept) and the log of what happened to each."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Project
from core import vocabulary
from core.choices import django_choices
from core.leases import LeaseStates


class ModelStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    TRAINING = "training", "Training"
    EVALUATED = "evaluated", "Evaluated"
    PROMOTED = "promoted", "Promoted"
    REJECTED = "rejected", "Rejected"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


ModelKind = django_choices(vocabulary.ModelKind, module=__name__)


class ModelVersion(models.Model):
    """One trained learned-metric model, kept forever with its evaluation."""

    name = models.CharField(max_length=50, default=vocabulary.ModelKind.REGRESSION.model_name)
    number = models.PositiveIntegerField(help_text="Version number within the name.")
    kind = models.CharField(max_length=20, choices=ModelKind.choices, default=ModelKind.REGRESSION)
    projects = models.ManyToManyField(Project, blank=True, related_name="model_versions")
    backbone = models.CharField(max_length=500)
    config = models.JSONField(default=dict, blank=True)
    data_snapshot = models.JSONField(
        default=dict, blank=True,
        help_text="Which judgments it saw: counts, max judgment id, hash of the ids.",
    )
    examples_seen = models.JSONField(
        default=dict, blank=True, editable=False,
        help_text="The items and passage groups it trained and calibrated on, and its test items: "
                  "the reports measure it against humans only on answers it did not see.")
    status = models.CharField(
        max_length=20, choices=ModelStatus.choices, default=ModelStatus.QUEUED
    )
    metrics = models.JSONField(default=dict, blank=True)
    progress = models.JSONField(default=dict, blank=True, help_text="epoch, step, loss ...")
    # The job lease (core/leases.py) of the training run: the worker training the version and
    # when it last said so; the beat sweep fails a version silent for QAJ_JOB_STALE_AFTER_SECONDS.
    lease = models.CharField(max_length=100, blank=True,
                             help_text="Worker training the version (host:pid:token).")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    artifact_uri = models.CharField(max_length=1000, blank=True)
    task_id = models.CharField(max_length=255, blank=True)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    promoted_at = models.DateTimeField(null=True, blank=True)

    lease_states = LeaseStates(queued=ModelStatus.QUEUED, running=ModelStatus.TRAINING,
                               failed=ModelStatus.FAILED)

    class Meta:
        ordering = ["name", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["name", "number"], name="model_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.number} ({self.status})"


class ModelVersionEvent(models.Model):
    """Promotion, rollback and status log of model versions (who, when, why)."""

    model_version = models.ForeignKey(ModelVersion, on_delete=models.CASCADE, related_name="events")
    event = models.CharField(max_length=50)
    detail = models.TextField(blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.model_version}: {self.event}"
