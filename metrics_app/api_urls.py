"""REST API routes for reports, metric scoring and model versions."""
from django.urls import path  # noqa: F401

app_name = "metrics-api"

from .apis import judges, metrics, reports  # noqa: E402

urlpatterns: list = [
    path("projects/<slug:slug>/report/", reports.ProjectReportApi.as_view(),
         name="project-report"),
    path("projects/<slug:slug>/leaderboard/", reports.ProjectLeaderboardApi.as_view(),
         name="project-leaderboard"),
    path("projects/<slug:slug>/metric-report/", metrics.MetricReportApi.as_view(),
         name="metric-report"),
    path("projects/<slug:slug>/scoring-jobs/", metrics.ScoringJobListCreateApi.as_view(),
         name="scoring-jobs"),
    path("projects/<slug:slug>/scoring-jobs/<int:job_id>/cancel/",
         metrics.ScoringJobCancelApi.as_view(), name="scoring-job-cancel"),
    path("projects/<slug:slug>/judges/report/", judges.JudgeReportApi.as_view(),
         name="judge-report"),
    path("projects/<slug:slug>/judges/plan/", judges.JudgePlanApi.as_view(), name="judge-plan"),
    path("projects/<slug:slug>/judges/verdicts/", judges.JudgeVerdictImportApi.as_view(),
         name="judge-verdicts"),
    path("projects/<slug:slug>/judge-jobs/", judges.JudgeJobListCreateApi.as_view(),
         name="judge-jobs"),
    path("projects/<slug:slug>/judge-jobs/<int:job_id>/cancel/",
         judges.JudgeJobCancelApi.as_view(), name="judge-job-cancel"),
    path("score/", metrics.MetricScoreApi.as_view(), name="metric-score"),
    path("score-jobs/<int:job_id>/", metrics.ItemScoringJobDetailApi.as_view(), name="score-job"),
]
