"""REST endpoints for a project's report (the same dict as `manage.py report --json`) and its
leaderboard (JSON or CSV)."""
from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access_selectors import access_project, access_stage
from annotation.api_common import with_errors
from annotation.judgment_selectors import GROUP_FIELDS
from annotation.models import TaskKind
from metrics_app.apis.report_schemas import LeaderboardSerializer, ProjectReportSerializer
from metrics_app.reports.leaderboard import leaderboard_csv
from metrics_app.reports.project import cached_project_report


def _project_stage_filters(request, slug: str, filter_serializer):
    """The visible project (not visible and not existing look the same: 404), its stage named
    by `?stage=` (404 when it has none such) and the validated query."""
    project = access_project(request.user, slug)
    filters = filter_serializer(data=request.query_params)
    filters.is_valid(raise_exception=True)
    stage = None
    if filters.validated_data.get("stage"):
        stage = access_stage(project, filters.validated_data["stage"])
    return project, stage, filters


class ProjectReportApi(APIView):
    """GET /api/metrics/projects/<slug>/report/?stage=<name or id>&group_by=<field>"""

    class FilterSerializer(serializers.Serializer):
        stage = serializers.CharField(required=False)
        group_by = serializers.ChoiceField(choices=GROUP_FIELDS, required=False)

    @extend_schema(
        parameters=[OpenApiParameter("stage", str), OpenApiParameter("group_by", str,
                                                                      enum=list(GROUP_FIELDS))],
        responses=with_errors({200: ProjectReportSerializer}, 400, 404),
    )
    def get(self, request, slug: str):
        project, stage, filters = _project_stage_filters(request, slug, self.FilterSerializer)
        return Response(cached_project_report(
            project=project, stage=stage, group_by=filters.validated_data.get("group_by")
        ))


class ProjectLeaderboardApi(APIView):
    """GET /api/metrics/projects/<slug>/leaderboard/?stage=<name or id>&output=csv

    The `leaderboard` key of the project report (A/B projects: systems ranked from the
    judgments); `output=csv` gives one row per system and category."""

    class FilterSerializer(serializers.Serializer):
        stage = serializers.CharField(required=False)
        # Not `format`: DRF reads that one for content negotiation and answers 404 to csv.
        output = serializers.ChoiceField(choices=["json", "csv"], required=False)

    @extend_schema(
        parameters=[OpenApiParameter("stage", str),
                    OpenApiParameter("output", str, enum=["json", "csv"])],
        responses=with_errors({(200, "application/json"): LeaderboardSerializer,
                               (200, "text/csv"): OpenApiTypes.STR}, 400, 404),
    )
    def get(self, request, slug: str):
        project, stage, filters = _project_stage_filters(request, slug, self.FilterSerializer)
        if project.kind != TaskKind.AB:
            raise serializers.ValidationError(
                {"project": f"{project.slug} is a {project.kind} project: the leaderboard "
                            "ranks the systems of A/B items"})
        board = cached_project_report(project=project, stage=stage).get("leaderboard") or {}
        if filters.validated_data.get("output") == "csv":
            response = HttpResponse(leaderboard_csv(board), content_type="text/csv")
            response["Content-Disposition"] = (
                f'attachment; filename="{project.slug}-leaderboard.csv"')
            return response
        return Response(board)
