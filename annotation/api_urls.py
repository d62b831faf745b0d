"""REST API routes for projects, items and judgments (see annotation/apis.py)."""
from django.urls import path

from . import apis

app_name = "annotation-api"

urlpatterns: list = [
    path("projects/", apis.ProjectListCreateApi.as_view(), name="project-list"),
    path("projects/<slug:project_slug>/", apis.ProjectDetailApi.as_view(), name="project-detail"),
    path(
        "projects/<slug:project_slug>/items/", apis.ItemListCreateApi.as_view(), name="item-list"
    ),
    path(
        "projects/<slug:project_slug>/items/bulk/",
        apis.ItemBulkCreateApi.as_view(),
        name="item-bulk-create",
    ),
    path(
        "projects/<slug:project_slug>/items/<int:item_id>/",
        apis.ItemDetailApi.as_view(),
        name="item-detail",
    ),
    path(
        "projects/<slug:project_slug>/stages/", apis.StageListApi.as_view(), name="stage-list"
    ),
    path(
        "projects/<slug:project_slug>/stages/<int:stage_id>/",
        apis.StageDetailApi.as_view(),
        name="stage-detail",
    ),
    path(
        "projects/<slug:project_slug>/stages/<int:stage_id>/release-preview/",
        apis.StageReleasePreviewApi.as_view(),
        name="stage-release-preview",
    ),
    path(
        "projects/<slug:project_slug>/judgments/",
        apis.JudgmentListApi.as_view(),
        name="judgment-list",
    ),
    path(
        "projects/<slug:project_slug>/spot-checks/",
        apis.SpotCheckListApi.as_view(),
        name="spot-check-list",
    ),
]
