"""Researcher dashboards for agreement, metrics and learned models."""
from django.urls import path  # noqa: F401

app_name = "metrics"

from . import metric_views, views_reports  # noqa: E402

urlpatterns: list = [
    path("<slug:slug>/dashboard/", views_reports.project_dashboard, name="project-dashboard"),
    path("<slug:slug>/dashboard/workers/<int:worker_id>/block/",
         views_reports.worker_block_view, name="worker-block"),
    path("<slug:slug>/metrics/", metric_views.project_metrics, name="project-metrics"),
    path("<slug:slug>/metrics/compute/", metric_views.project_metrics_compute,
         name="project-metrics-compute"),
    path("<slug:slug>/metrics/scatter/<str:metric>.png", metric_views.project_metric_scatter,
         name="metric-scatter"),
]
