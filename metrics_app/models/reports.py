"""Cached reports, stale once judgments newer than their watermark arrive."""
from __future__ import annotations

from django.db import models

from annotation.models import Project, Stage


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
