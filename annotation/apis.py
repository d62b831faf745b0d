"""REST API for researchers: projects, their items, stages and judgments.

One `APIView` per URL (`<Entity><Action>Api`), the style metrics_app's APIs share: validate input
with a serializer (annotation/serializers.py: shared by several endpoints, so kept in one
module), call one selector or service, serialize. Every project is opened through
annotation/access_selectors.py (`access_project`, `access_stage`, `access_item`), so a project the
user neither owns nor shares answers the same 404 as a missing one (not 403: its existence is not
disclosed). Lists are paginated by `core.api.paginated_response`.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.stage_errors import StageError
from core.api import JsonApiMixin, django_to_drf, paginated_response, with_errors

from .access_selectors import (
    NO_SUCH_PROJECT,
    access_item,
    access_project,
    access_stage,
    project_stage_by_ref,
)
from .models import Project, Stage
from .selectors import (
    attach_progress,
    item_list,
    judgment_list,
    project_list,
    project_progress,
    project_with_progress,
    stage_list,
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
    SpotCheckOutputSerializer,
    StageCreateInputSerializer,
    StageOutputSerializer,
    StageReleasePreviewSerializer,
    StageUpdateInputSerializer,
)
from .services.exports import non_data_stage_error
from .services.items import ItemInputError, StoredItems, item_create, items_bulk_create
from .services.projects import ProjectShareError, project_create, project_update
from .services.stages import StageEditRefused, stage_create, stage_update
from .spot_check_selectors import spot_check_list
from .stage_plan_selectors import stage_release_preview


def _project_with_progress(request, slug: str) -> Project:
    project = project_with_progress(user=request.user, slug=slug)
    if project is None:
        raise Http404(NO_SUCH_PROJECT)
    return project


def _query_filters(request, serializer_class, project: Project) -> dict:
    """The validated query parameters; `stage` names a stage of this project by id or name
    (`project_stage_by_ref`, as `export_data --stage` and the report APIs)."""
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    filters = dict(serializer.validated_data)
    if "stage" in filters:
        stage = project_stage_by_ref(project=project, ref=str(filters["stage"]))
        if stage is None:
            raise serializers.ValidationError({"stage": ["no such stage in this project"]})
        filters["stage"] = stage
    return filters


def _item_error(error: ItemInputError) -> serializers.ValidationError:
    detail = {error.field: [error.message]}
    if error.index is not None:
        return serializers.ValidationError({"items": {str(error.index): detail}})
    return serializers.ValidationError(detail)


def _stored_status(stored: StoredItems) -> int:
    """201 when the request created its items, 200 when it repeated a stored request."""
    return status.HTTP_201_CREATED if stored.created else status.HTTP_200_OK


# --- Projects -----------------------------------------------------------------------------------


class ProjectListCreateApi(JsonApiMixin, APIView):
    """List the projects you own or share, or create one."""

    @extend_schema(
        summary="Projects you own or that are shared with you",
        responses=with_errors({200: ProjectOutputSerializer(many=True)}, 400),
    )
    def get(self, request):
        return paginated_response(
            request=request, view=self, queryset=project_list(user=request.user),
            serializer_class=ProjectOutputSerializer,
            on_page=lambda page: attach_progress(page, project_progress(projects=page)))

    @extend_schema(
        summary="Create a project (you become its owner)",
        request=ProjectCreateInputSerializer,
        responses=with_errors({201: ProjectOutputSerializer}, 400, 415),
    )
    def post(self, request):
        serializer = ProjectCreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            project = project_create(owner=request.user, **serializer.validated_data)
        except DjangoValidationError as error:
            raise django_to_drf(error) from error
        except IntegrityError as error:  # a concurrent request took the slug
            raise serializers.ValidationError({"slug": ["already exists"]}) from error
        project = _project_with_progress(request, project.slug)
        return Response(ProjectOutputSerializer(project).data, status=status.HTTP_201_CREATED)


class ProjectDetailApi(JsonApiMixin, APIView):
    """One project you own or share (404 otherwise), with progress counts."""

    @extend_schema(
        summary="A project with its progress counts",
        responses=with_errors({200: ProjectOutputSerializer}, 404),
    )
    def get(self, request, project_slug: str):
        return Response(ProjectOutputSerializer(_project_with_progress(request, project_slug)).data)

    @extend_schema(
        summary="Change a project's title, sharing, settings or (superusers) owner; the kind never changes",
        request=ProjectUpdateInputSerializer,
        responses=with_errors({200: ProjectOutputSerializer}, 400, 404, 415),
    )
    def patch(self, request, project_slug: str):
        project = access_project(request.user, project_slug)
        serializer = ProjectUpdateInputSerializer(project, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        try:
            project_update(project=project, user=request.user, data=serializer.validated_data)
        except ProjectShareError as error:
            raise PermissionDenied(str(error)) from error
        except DjangoValidationError as error:
            raise django_to_drf(error) from error
        project = _project_with_progress(request, project.slug)
        return Response(ProjectOutputSerializer(project).data)


# --- Items --------------------------------------------------------------------------------------


class ItemListCreateApi(JsonApiMixin, APIView):
    """A project's items, filtered by dataset, split, source, domain, text level or stage; or add one."""

    @extend_schema(
        summary="Items of a project",
        parameters=[ItemFilterSerializer],
        responses=with_errors({200: ItemOutputSerializer(many=True)}, 400, 404),
    )
    def get(self, request, project_slug: str):
        project = access_project(request.user, project_slug)
        filters = _query_filters(request, ItemFilterSerializer, project)
        return paginated_response(request=request, view=self,
                                  queryset=item_list(project=project, filters=filters),
                                  serializer_class=ItemOutputSerializer)

    @extend_schema(
        summary="Add one item (content validated against the project's kind)",
        description=(
            "201: the item was created. 200: an item with this external id and every posted "
            "field equal is already stored (a retry after a lost response): it is answered and "
            "nothing is created. An existing external id with any posted field different is a "
            "400 naming that field."),
        request=ItemInputSerializer,
        responses=with_errors({201: ItemOutputSerializer, 200: ItemOutputSerializer},
                              400, 404, 415),
    )
    def post(self, request, project_slug: str):
        project = access_project(request.user, project_slug)
        serializer = ItemInputSerializer(data=request.data, context={"project": project})
        serializer.is_valid(raise_exception=True)
        try:
            stored = item_create(project=project, **serializer.validated_data)
        except ItemInputError as error:
            raise _item_error(error) from error
        return Response(ItemOutputSerializer(stored.items[0]).data, status=_stored_status(stored))


class ItemBulkCreateApi(JsonApiMixin, APIView):
    """Add many items in one request; an invalid item stores nothing and names its index and field."""

    @extend_schema(
        summary="Add many items at once: all or nothing",
        description=(
            "201: every item was created. 200: the request repeats one already stored (every "
            "external id exists in the project with every posted field equal: a retry after a "
            "lost response): nothing is created, `created` is 0 and `external_ids` lists the "
            "stored items. A request only partly stored, or with an existing external id whose "
            "posted fields differ, is a 400 naming the first such item's index and field; "
            "nothing is stored."),
        request=ItemBulkInputSerializer,
        responses=with_errors({201: ItemBulkOutputSerializer, 200: ItemBulkOutputSerializer},
                              400, 404, 415),
    )
    def post(self, request, project_slug: str):
        project = access_project(request.user, project_slug)
        serializer = ItemBulkInputSerializer(data=request.data, context={"project": project})
        serializer.is_valid(raise_exception=True)
        try:
            stored = items_bulk_create(project=project,
                                       items=serializer.validated_data["items"])
        except ItemInputError as error:
            raise _item_error(error) from error
        data = {"created": len(stored.items) if stored.created else 0,
                "external_ids": [i.external_id for i in stored.items]}
        return Response(ItemBulkOutputSerializer(data).data, status=_stored_status(stored))


class ItemDetailApi(JsonApiMixin, APIView):
    """One item, including its gold answer."""

    @extend_schema(
        summary="One item of a project", responses=with_errors({200: ItemOutputSerializer}, 404)
    )
    def get(self, request, project_slug: str, item_id: int):
        item = access_item(access_project(request.user, project_slug), item_id)
        return Response(ItemOutputSerializer(item).data)


# --- Stages -------------------------------------------------------------------------------------


def _stage_with_progress(project: Project, stage_id: int) -> Stage:
    stage = access_stage(project, stage_id, stages=stage_list(project=project))
    stage.progress = stage_progress(stages=[stage])[stage.pk]
    return stage


class StageListApi(JsonApiMixin, APIView):
    """A project's stages in order, each with its progress counts; or add a (draft) stage."""

    @extend_schema(
        summary="Stages of a project with their progress",
        responses=with_errors({200: StageOutputSerializer(many=True)}, 400, 404),
    )
    def get(self, request, project_slug: str):
        project = access_project(request.user, project_slug)
        return paginated_response(
            request=request, view=self, queryset=stage_list(project=project),
            serializer_class=StageOutputSerializer,
            on_page=lambda page: attach_progress(page, stage_progress(stages=page)))

    @extend_schema(
        summary="Add a stage: always a draft (publish it with the admin's Publish action); "
                "`status` is refused, and an item filter matching nothing is a 400 naming it",
        request=StageCreateInputSerializer,
        responses=with_errors({201: StageOutputSerializer}, 400, 404, 415),
    )
    def post(self, request, project_slug: str):
        project = access_project(request.user, project_slug)
        serializer = StageCreateInputSerializer(data=request.data,
                                                context={"project": project})
        serializer.is_valid(raise_exception=True)
        try:
            stage = stage_create(project=project, **serializer.validated_data)
        except StageError as error:
            raise serializers.ValidationError({"items": [str(error)]}) from error
        return Response(StageOutputSerializer(_stage_with_progress(project, stage.pk)).data,
                        status=status.HTTP_201_CREATED)


def _edit_errors(errors: dict[str, str]) -> dict[str, list[str]]:
    """{field: [why]}, a refused setting under `settings` as "KEY: why"."""
    detail: dict[str, list[str]] = {}
    for name, why in errors.items():
        field, _, key = name.partition(".")
        detail.setdefault(field, []).append(f"{key}: {why}" if key else why)
    return detail


class StageDetailApi(JsonApiMixin, APIView):
    """One stage with its progress counts; change its settings (never its status)."""

    @extend_schema(
        summary="One stage with its progress",
        responses=with_errors({200: StageOutputSerializer}, 404),
    )
    def get(self, request, project_slug: str, stage_id: int):
        project = access_project(request.user, project_slug)
        return Response(StageOutputSerializer(_stage_with_progress(project, stage_id)).data)

    @extend_schema(
        summary="Change a stage's fields and (drafts) its items by filter; `status`, `kind` "
                "and `provider` are refused by name, and once published what its HITs were "
                "built with (judgments per item, reward, required stage, agreement gate, "
                "the item, HIT, design and provider settings) is a 400 naming it",
        request=StageUpdateInputSerializer,
        responses=with_errors({200: StageOutputSerializer}, 400, 404, 415),
    )
    def patch(self, request, project_slug: str, stage_id: int):
        project = access_project(request.user, project_slug)
        stage = _stage_with_progress(project, stage_id)
        serializer = StageUpdateInputSerializer(stage, data=request.data, partial=True,
                                                context={"project": project})
        serializer.is_valid(raise_exception=True)
        try:
            stage_update(stage=stage, data=serializer.validated_data)
        except StageEditRefused as error:
            raise serializers.ValidationError(_edit_errors(error.errors)) from error
        except StageError as error:
            raise serializers.ValidationError({"items": [str(error)]}) from error
        return Response(StageOutputSerializer(_stage_with_progress(project, stage.pk)).data)


class StageReleasePreviewApi(JsonApiMixin, APIView):
    """Exactly which items publishing the stage releases (its HITs' items once built)."""

    @extend_schema(
        summary="The items a stage will release, before it is published",
        responses=with_errors({200: StageReleasePreviewSerializer}, 404),
    )
    def get(self, request, project_slug: str, stage_id: int):
        project = access_project(request.user, project_slug)
        stage = access_stage(project, stage_id, stages=stage_list(project=project))
        return Response(StageReleasePreviewSerializer(stage_release_preview(stage=stage)).data)


# --- Judgments ----------------------------------------------------------------------------------


class JudgmentListApi(JsonApiMixin, APIView):
    """A project's judgments that count (as in exports), oldest first. Read-only: judgments
    are append-only and only workers' submissions create them."""

    @extend_schema(
        summary="Judgments of a project, oldest first",
        parameters=[JudgmentFilterSerializer],
        responses=with_errors({200: JudgmentOutputSerializer(many=True)}, 400, 404),
    )
    def get(self, request, project_slug: str):
        project = access_project(request.user, project_slug)
        filters = _query_filters(request, JudgmentFilterSerializer, project)
        stage = filters.get("stage")
        # The one rule of every judgment export (`export_data --stage`, the preference pairs).
        if why := non_data_stage_error(
                stage, include_qualification=bool(filters.get("include_qualification"))):
            raise serializers.ValidationError({"stage": [
                f"{why}; add include_qualification=true to read them"]})
        return paginated_response(request=request, view=self,
                                  queryset=judgment_list(project=project, filters=filters),
                                  serializer_class=JudgmentOutputSerializer)


class SpotCheckListApi(JsonApiMixin, APIView):
    """A project's spot checks (recorded on the spot-check page), oldest first: every one, as
    the workers table counts them and `export_data --spot-checks` writes them. Read-only:
    they are recorded on the page, once per judgment."""

    @extend_schema(
        summary="Spot checks of a project, oldest first",
        responses=with_errors({200: SpotCheckOutputSerializer(many=True)}, 400, 404),
    )
    def get(self, request, project_slug: str):
        project = access_project(request.user, project_slug)
        return paginated_response(request=request, view=self,
                                  queryset=spot_check_list(project=project),
                                  serializer_class=SpotCheckOutputSerializer)
