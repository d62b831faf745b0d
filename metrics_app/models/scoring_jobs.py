"""A run of automatic metrics over a project's items (queued from the metrics page or API)."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Project
from core.leases import LeaseStates


class ScoringStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    # By hand (admin, API, metrics page): never run again; what it did before stays stored.
    CANCELLED = "cancelled", "Cancelled"


class ScoringJobBase(models.Model):
    """What every scoring job records: its metrics and queue, status and progress, timings."""

    metrics = models.JSONField(default=list, help_text="Metric names to compute.")
    options = models.JSONField(default=dict, blank=True, help_text="e.g. a model version.")
    queue = models.CharField(max_length=50, default="default")
    status = models.CharField(
        max_length=20, choices=ScoringStatus.choices, default=ScoringStatus.QUEUED
    )
    done = models.PositiveIntegerField(default=0, help_text="Inputs scored so far (all metrics).")
    total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=255, blank=True)
    # The job lease (core/leases.py): who runs the job and when it last said so. A running job
    # whose heartbeat is older than QAJ_JOB_STALE_AFTER_SECONDS lost its worker; the beat sweep
    # sends it again (up to QAJ_JOB_MAX_ATTEMPTS runs) or fails it.
    lease = models.CharField(max_length=100, blank=True,
                             help_text="Worker running the job (host:pid:token).")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Runs started so far.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    lease_states = LeaseStates(queued=ScoringStatus.QUEUED, running=ScoringStatus.RUNNING,
                               failed=ScoringStatus.FAILED, cancelled=ScoringStatus.CANCELLED)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else (100 if self.status == "done" else 0)


class ScoringJob(ScoringJobBase):
    """Progress and outcome of scoring a project with some metrics in a Celery task."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="scoring_jobs")
    detail = models.JSONField(
        default=dict, blank=True,
        help_text="Per metric: version, scored, cached, unscorable, error.",
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta(ScoringJobBase.Meta):
        pass

    def __str__(self) -> str:
        return f"scoring {', '.join(self.metrics)} on {self.project.slug} ({self.status})"


class ItemScoringJob(ScoringJobBase):
    """Scoring of posted items (no project) with metrics too heavy for a web request: `POST
    /api/metrics/score/` stores the items, a Celery task scores them, the requester reads the
    results at `GET /api/metrics/score-jobs/<id>/`."""

    items = models.JSONField(
        default=list, blank=True,
        help_text="The posted inputs: {id, question, references, candidate, passage}.",
    )
    results = models.JSONField(
        null=True, blank=True, help_text="[{id, metric: value, ...}] in input order, once run."
    )
    detail = models.JSONField(default=dict, blank=True, help_text="Per metric: version, error.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta(ScoringJobBase.Meta):
        pass

    def __str__(self) -> str:
        return f"scoring {', '.join(self.metrics)} on {len(self.items)} items ({self.status})"
