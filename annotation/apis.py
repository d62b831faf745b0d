"""REST API for researchers: projects, their items, stages and judgments.

Views stay thin: they validate input with the serializers in annotation/serializers.py, call a
selector or service, and serialize. Every queryset starts from `projects_visible_to`, so a project
the user neither owns nor shares answers 404 (not 403: its existence is not disclosed).
"""
from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.db.models import Count
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from .api_common import JsonApiMixin, django_to_drf, with_errors
from .models import Item, Judgment, Project, Stage
from .selectors import (
    attach_progress,
    item_list,
    judgment_list,
    project_progress,
    projects_visible_to,
    stage_progress,
)
from .serializers import (
    ItemBulkInputSerializer,
    ItemBulkOutputSerializer,
    ItemFilterSerializer,
    ItemInputSerializer,
    ItemOutputSerializer,
    JudgmentFilterSerializer,
    JudgmentOutputSerializer,
    ProjectCreateInputSerializer,
    ProjectOutputSerializer,
    ProjectUpdateInputSerializer,
    StageOutputSerializer,
)
from .services.items import ItemInputError, item_create, items_bulk_create
from .services.projects import ProjectShareError, project_create, project_update


def visible_projects(request):
    return (
        projects_visible_to(request.user)
        .select_related("owner")
        .prefetch_related("shared_with")
        .order_by("-created_at", "id")
    )


def with_progress(project: Project) -> Project:
    project.progress = project_progress(projects=[project])[project.pk]
    return project


class ProjectScopedMixin(JsonApiMixin):
    # Views under /api/projects/<slug>/: the project must be visible to the user.

    def get_project(self) -> Project:
        if not hasattr(self, "_project"):
            self._project = get_object_or_404(
                projects_visible_to(self.request.user), slug=self.kwargs["project_slug"]
            )
        return self._project

    def filters(self, serializer_class) -> dict:
        serializer = serializer_class(data=self.request.query_params)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


# --- Projects -----------------------------------------------------------------------------------


class ProjectListCreateApi(JsonApiMixin, generics.ListAPIView):
    """List the projects you own or share, or create one."""

    serializer_class = ProjectOutputSerializer

    def get_queryset(self):
        return visible_projects(self.request)

    @extend_schema(
        summary="Projects you own or that are shared with you",
        responses=with_errors({200: ProjectOutputSerializer(many=True)}, 400),
    )
    def get(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        attach_progress(page, project_progress(projects=page))
        return self.get_paginated_response(ProjectOutputSerializer(page, many=True).data)

    @extend_schema(
        summary="Create a project (you become its owner)",
        request=ProjectCreateInputSerializer,
        responses=with_errors({201: ProjectOutputSerializer}, 400, 415),
    )
    def post(self, request, *args, **kwargs):
        serializer = ProjectCreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            project = project_create(owner=request.user, **serializer.validated_data)
        except DjangoValidationError as error:
            raise django_to_drf(error) from error
        except IntegrityError as error:  # a concurrent request took the slug
            raise serializers.ValidationError({"slug": ["already exists"]}) from error
        project = visible_projects(request).get(pk=project.pk)
        return Response(
            ProjectOutputSerializer(with_progress(project)).data, status=status.HTTP_201_CREATED
        )


class ProjectDetailApi(JsonApiMixin, generics.RetrieveAPIView):
    """One project you own or share (404 otherwise), with progress counts."""

    serializer_class = ProjectOutputSerializer
    lookup_field = "slug"
    lookup_url_kwarg = "project_slug"

    def get_queryset(self):
        return visible_projects(self.request)

    @extend_schema(
        summary="A project with its progress counts",
        responses=with_errors({200: ProjectOutputSerializer}, 404),
    )
    def get(self, request, *args, **kwargs):
        return Response(ProjectOutputSerializer(with_progress(self.get_object())).data)

    @extend_schema(
        summary="Change a project's title, sharing or settings (the kind never changes)",
        request=ProjectUpdateInputSerializer,
        responses=with_errors({200: ProjectOutputSerializer}, 400, 404, 415),
    )
    def patch(self, request, *args, **kwargs):
        project = self.get_object()
        serializer = ProjectUpdateInputSerializer(project, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        try:
            project_update(project=project, user=request.user, data=serializer.validated_data)
        except ProjectShareError as error:
            raise PermissionDenied(str(error)) from error
        except DjangoValidationError as error:
            raise django_to_drf(error) from error
        project = visible_projects(request).get(pk=project.pk)
        return Response(ProjectOutputSerializer(with_progress(project)).data)


# --- Items --------------------------------------------------------------------------------------


def item_error_response(error: ItemInputError) -> serializers.ValidationError:
    detail = {error.field: [error.message]}
    if error.index is not None:
        return serializers.ValidationError({"items": {str(error.index): detail}})
    return serializers.ValidationError(detail)


class ItemListCreateApi(ProjectScopedMixin, generics.ListAPIView):
    """A project's items, filtered by dataset, split, source, domain, text level or stage; or add one."""

    serializer_class = ItemOutputSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Item.objects.none()
        filters = dict(self.filters(ItemFilterSerializer))
        if "stage" in filters:
            project = self.get_project()
            stage = Stage.objects.filter(project=project, pk=filters["stage"]).first()
            if stage is None:
                raise serializers.ValidationError({"stage": ["no such stage in this project"]})
            filters["stage"] = stage
        return item_list(project=self.get_project(), filters=filters)

    @extend_schema(
        summary="Items of a project",
        parameters=[ItemFilterSerializer],
        responses=with_errors({200: ItemOutputSerializer(many=True)}, 400, 404),
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Add one item (content validated against the project's kind)",
        request=ItemInputSerializer,
        responses=with_errors({201: ItemOutputSerializer}, 400, 404, 415),
    )
    def post(self, request, *args, **kwargs):
        project = self.get_project()
        serializer = ItemInputSerializer(data=request.data, context={"project": project})
        serializer.is_valid(raise_exception=True)
        try:
            item = item_create(project=project, **serializer.validated_data)
        except ItemInputError as error:
            raise item_error_response(error) from error
        return Response(ItemOutputSerializer(item).data, status=status.HTTP_201_CREATED)


class ItemBulkCreateApi(ProjectScopedMixin, generics.GenericAPIView):
    """Add many items in one request; an invalid item stores nothing and names its index and field."""

    serializer_class = ItemBulkInputSerializer

    @extend_schema(
        summary="Add many items at once: all or nothing",
        request=ItemBulkInputSerializer,
        responses=with_errors({201: ItemBulkOutputSerializer}, 400, 404, 415),
    )
    def post(self, request, *args, **kwargs):
        project = self.get_project()
        serializer = ItemBulkInputSerializer(data=request.data, context={"project": project})
        serializer.is_valid(raise_exception=True)
        try:
            items = items_bulk_create(project=project, items=serializer.validated_data["items"])
        except ItemInputError as error:
            raise item_error_response(error) from error
        data = {"created": len(items), "external_ids": [i.external_id for i in items]}
        return Response(ItemBulkOutputSerializer(data).data, status=status.HTTP_201_CREATED)


class ItemDetailApi(ProjectScopedMixin, generics.RetrieveAPIView):
    """One item, including its gold answer."""

    serializer_class = ItemOutputSerializer
    lookup_url_kwarg = "item_id"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Item.objects.none()
        return Item.objects.filter(project=self.get_project())

    @extend_schema(
        summary="One item of a project", responses=with_errors({200: ItemOutputSerializer}, 404)
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


# --- Stages -------------------------------------------------------------------------------------


class StageQuerysetMixin(ProjectScopedMixin):
    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Stage.objects.none()
        return (
            Stage.objects.filter(project=self.get_project())
            .select_related("project")
            .annotate(explicit_item_count=Count("items"))
            .order_by("order", "id")
        )


class StageListApi(StageQuerysetMixin, generics.ListAPIView):
    """A project's stages in order, each with its progress counts."""

    serializer_class = StageOutputSerializer

    @extend_schema(
        summary="Stages of a project with their progress",
        responses=with_errors({200: StageOutputSerializer(many=True)}, 400, 404),
    )
    def get(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        attach_progress(page, stage_progress(stages=page))
        return self.get_paginated_response(StageOutputSerializer(page, many=True).data)


class StageDetailApi(StageQuerysetMixin, generics.RetrieveAPIView):
    """One stage with its progress counts."""

    serializer_class = StageOutputSerializer
    lookup_url_kwarg = "stage_id"

    @extend_schema(
        summary="One stage with its progress",
        responses=with_errors({200: StageOutputSerializer}, 404),
    )
    def get(self, request, *args, **kwargs):
        stage = self.get_object()
        stage.progress = stage_progress(stages=[stage])[stage.pk]
        return Response(StageOutputSerializer(stage).data)


# --- Judgments ----------------------------------------------------------------------------------


class JudgmentListApi(ProjectScopedMixin, generics.ListAPIView):
    """A project's judgments, oldest first. Read-only: judgments are append-only and only
    workers' submissions create them."""

    serializer_class = JudgmentOutputSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Judgment.objects.none()
        filters = dict(self.filters(JudgmentFilterSerializer))
        if "stage" in filters:
            stage = Stage.objects.filter(project=self.get_project(), pk=filters["stage"]).first()
            if stage is None:
                raise serializers.ValidationError({"stage": ["no such stage in this project"]})
            filters["stage"] = stage
        return judgment_list(project=self.get_project(), filters=filters)

    @extend_schema(
        summary="Judgments of a project, oldest first",
        parameters=[JudgmentFilterSerializer],
        responses=with_errors({200: JudgmentOutputSerializer(many=True)}, 400, 404),
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

