"""REST API routes for reports, metric scoring and model versions."""
from django.urls import path  # noqa: F401

app_name = "metrics-api"

from . import apis, apis_reports  # noqa: E402

urlpatterns: list = [
    path("projects/<slug:slug>/report/", apis_reports.ProjectReportApi.as_view(),
         name="project-report"),
    path("projects/<slug:slug>/metric-report/", apis.MetricReportApi.as_view(),
         name="metric-report"),
    path("projects/<slug:slug>/scoring-jobs/", apis.ScoringJobListCreateApi.as_view(),
         name="scoring-jobs"),
    path("score/", apis.MetricScoreApi.as_view(), name="metric-score"),
    path("score-jobs/<int:job_id>/", apis.ItemScoringJobDetailApi.as_view(), name="score-job"),
]
