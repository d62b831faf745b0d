"""REST endpoint for a project's report (the same dict as `manage.py report --json`)."""
from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api_common import with_errors
from annotation.judgment_selectors import GROUP_FIELDS
from annotation.selectors import project_stage_by_ref, projects_visible_to
from metrics_app.apis.report_schemas import ProjectReportSerializer
from metrics_app.reports.project import cached_project_report


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
        # Not visible and not existing look the same: 404.
        project = get_object_or_404(projects_visible_to(request.user), slug=slug)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        stage = None
        if filters.validated_data.get("stage"):
            stage = project_stage_by_ref(project=project, ref=filters.validated_data["stage"])
            if stage is None:
                raise Http404("No such stage in this project.")
        return Response(cached_project_report(
            project=project, stage=stage, group_by=filters.validated_data.get("group_by")
        ))
