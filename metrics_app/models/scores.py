"""Cached automatic scores: one row per item, metric, version and side."""
from __future__ import annotations

from django.db import models

from annotation.models import Item


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
