"""Researcher dashboards for agreement, metrics and learned models."""
from django.urls import path  # noqa: F401

app_name = "metrics"

from .views import (  # noqa: E402
    adjudication,
    cockpit,
    dashboard,
    judges_page,
    metrics_page,
    model_card_page,
    spot_check,
)

urlpatterns: list = [
    path("models/<int:version_id>/", model_card_page.model_card_view, name="model-card"),
    path("<slug:slug>/cockpit/", cockpit.project_cockpit, name="project-cockpit"),
    path("<slug:slug>/dashboard/", dashboard.project_dashboard, name="project-dashboard"),
    path("<slug:slug>/dashboard/workers/<int:worker_id>/block/",
         dashboard.worker_block_view, name="worker-block"),
    path("<slug:slug>/dashboard/workers/<int:worker_id>/unblock/",
         dashboard.worker_unblock_view, name="worker-unblock"),
    path("<slug:slug>/metrics/", metrics_page.project_metrics, name="project-metrics"),
    path("<slug:slug>/metrics/compute/", metrics_page.project_metrics_compute,
         name="project-metrics-compute"),
    path("<slug:slug>/metrics/jobs/<int:job_id>/cancel/", metrics_page.scoring_job_cancel_view,
         name="scoring-job-cancel"),
    path("<slug:slug>/metrics/scatter/<str:metric>.png", metrics_page.project_metric_scatter,
         name="metric-scatter"),
    path("<slug:slug>/metrics/roc.png", metrics_page.project_metric_roc, name="metric-roc"),
    path("<slug:slug>/judges/", judges_page.project_judges, name="project-judges"),
    path("<slug:slug>/judges/verdicts/", judges_page.judge_verdicts_upload,
         name="judge-verdicts-upload"),
    path("<slug:slug>/judges/reliability/<str:label>.png", judges_page.project_judge_reliability,
         name="judge-reliability"),
    path("<slug:slug>/adjudicate/", adjudication.adjudication_page, name="adjudicate"),
    path("<slug:slug>/adjudicate/record/", adjudication.adjudication_submit,
         name="adjudicate-record"),
    path("<slug:slug>/spot-check/", spot_check.spot_check_page, name="spot-check"),
    path("<slug:slug>/spot-check/record/", spot_check.spot_check_submit,
         name="spot-check-record"),
]
