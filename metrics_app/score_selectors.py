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


def item_metric_scores_note(item_id: int) -> str:
    """What the item rule says about an item whose content is scored ("" when it is not): the
    cached scores were computed from its content, and rescoring skips an item already scored
    at the metric's version (`metrics_app.services.scoring`), so a changed text would keep
    its old scores. Registered as an `annotation.hooks` content reader."""
    metrics = sorted(set(MetricScore.objects.filter(item_id=item_id)
                         .values_list("metric", flat=True)))
    if not metrics:
        return ""
    return f"it has metric scores ({', '.join(metrics)}) computed from this content"
