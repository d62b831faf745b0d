from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Item, Project, Stage


class MetricScore(models.Model):
    """Cached automatic score of one item by one metric at one version."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="metric_scores")
    metric = models.CharField(max_length=50)
    version = models.CharField(max_length=50, help_text="Metric implementation or model version.")
    value = models.FloatField(null=True, help_text="Null when the metric could not score it.")
    side = models.CharField(
        max_length=1, blank=True, help_text="A/B items: which answer was scored (A or B)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["item", "metric", "version", "side"], name="metric_score_unique"
            )
        ]
        indexes = [models.Index(fields=["metric", "version"], name="metric_score_metric_idx")]

    def __str__(self) -> str:
        return f"{self.metric}@{self.version} item {self.item_id} = {self.value}"


class ModelStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    TRAINING = "training", "Training"
    EVALUATED = "evaluated", "Evaluated"
    PROMOTED = "promoted", "Promoted"
    REJECTED = "rejected", "Rejected"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class ModelKind(models.TextChoices):
    REGRESSION = "regression", "LERC regression (1–5 score)"
    PAIRWISE = "pairwise", "Pairwise Bradley–Terry (A/B)"


class ModelVersion(models.Model):
    """One trained learned-metric model, kept forever with its evaluation."""

    name = models.CharField(max_length=50, default="lerc")
    number = models.PositiveIntegerField(help_text="Version number within the name.")
    kind = models.CharField(max_length=20, choices=ModelKind.choices, default=ModelKind.REGRESSION)
    projects = models.ManyToManyField(Project, blank=True, related_name="model_versions")
    backbone = models.CharField(max_length=500)
    config = models.JSONField(default=dict, blank=True)
    data_snapshot = models.JSONField(
        default=dict, blank=True,
        help_text="Which judgments it saw: counts, max judgment id, hash of the ids.",
    )
    status = models.CharField(
        max_length=20, choices=ModelStatus.choices, default=ModelStatus.QUEUED
    )
    metrics = models.JSONField(default=dict, blank=True)
    progress = models.JSONField(default=dict, blank=True, help_text="epoch, step, loss ...")
    artifact_uri = models.CharField(max_length=1000, blank=True)
    task_id = models.CharField(max_length=255, blank=True)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    promoted_at = models.DateTimeField(null=True, blank=True)

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


class Report(models.Model):
    """A computed report (agreement, metric evaluation ...) cached until judgments change."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="reports")
    stage = models.ForeignKey(Stage, null=True, blank=True, on_delete=models.CASCADE)
    kind = models.CharField(max_length=50)
    params = models.JSONField(default=dict, blank=True)
    data = models.JSONField(default=dict)
    judgment_watermark = models.BigIntegerField(
        default=0, help_text="Highest judgment id included; newer judgments make it stale."
    )
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-computed_at"]

    def __str__(self) -> str:
        return f"{self.kind} report for {self.project.slug}"


from .scoring_models import ScoringJob, ScoringStatus  # noqa: E402,F401  (own module, same app)
