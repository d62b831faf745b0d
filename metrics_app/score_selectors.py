"""Reads of the stored metric scores (`MetricScore`) that several reports and pages share."""
from __future__ import annotations

from django.db.models import Max

from annotation.models import Project

from .models import MetricScore


def project_metric_versions(*, project: Project) -> dict[str, str]:
    """metric name → the version stored most recently for this project."""
    latest: dict[str, str] = {}
    rows = (MetricScore.objects.filter(item__project=project)
            .values("metric", "version").annotate(last=Max("id")).order_by("last"))
    for row in rows:
        latest[row["metric"]] = row["version"]
    return dict(sorted(latest.items()))
