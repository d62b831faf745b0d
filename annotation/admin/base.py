"""What every annotation admin shares: scoping to the projects a researcher may see
(`ProjectScopedAdmin`), read-only admins for append-only rows, the stage filter, progress columns
and export responses."""
from __future__ import annotations

import io
import tempfile
import zipfile

from django.contrib import admin, messages
from django.contrib.admin.utils import get_fields_from_path
from django.db import models
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import FileResponse
from django.utils.html import format_html

from annotation.access_selectors import projects_visible_to, workers_visible_to
from annotation.models import (
    Assignment,
    Hit,
    Item,
    Project,
    Stage,
    Worker,
)


def count_of(model, fk: str, **filters) -> Coalesce:
    """A correlated COUNT subquery: several counts on one row without join fan-out."""
    subquery = (
        model.objects.filter(**{fk: OuterRef("pk")}, **filters)
        .order_by()
        .values(fk)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(subquery, output_field=IntegerField()), Value(0))


def export_response(projects: list[Project], fmt: str, *,
                    include_qualification: bool = False) -> FileResponse:
    """The judgments that count of one project as a file, or of several as a zip of one file
    each (`export_write`: the same rule as `export_data`); with `include_qualification` also
    practice and qualification judgments, and the file names say so. Written to a temporary
    file first: a large project never sits in memory."""
    from annotation.services.exports import export_write

    spool = tempfile.TemporaryFile()

    def write(project: Project, binary) -> None:
        text = io.TextIOWrapper(binary, encoding="utf-8", newline="")
        export_write(project=project, out=text, fmt=fmt, progress=False,
                     include_qualification=include_qualification)
        text.flush()
        text.detach()  # keep `binary` open

    what = "judgments-with-qualification" if include_qualification else "judgments"
    if len(projects) == 1:
        write(projects[0], spool)
        filename = f"{projects[0].slug}-{what}.{fmt}"
    else:
        with zipfile.ZipFile(spool, "w", zipfile.ZIP_DEFLATED) as archive:
            for project in projects:
                with archive.open(f"{project.slug}-{what}.{fmt}", "w") as member:
                    write(project, member)
        filename = f"{what}-{len(projects)}-projects.zip"
    spool.seek(0)
    return FileResponse(spool, as_attachment=True, filename=filename)


def progress_cell(progress) -> str:
    """The line every page shows for a project's or stage's progress (`Progress.text`: the
    judgments that count of the ones its plan wants; the cockpit and the API say the same)."""
    if progress is None:
        return "–"
    return progress.text()


class ScopedAllValuesFieldListFilter(admin.AllValuesFieldListFilter):
    """The values of a field in the rows this admin shows (its scoped `get_queryset`). Django's
    own filter reads every row of the related model for a path through a relation
    (`item__dataset` on judgments): it listed other researchers' datasets and sources."""

    def __init__(self, field, request, params, model, model_admin, field_path):
        super().__init__(field, request, params, model, model_admin, field_path)
        self.lookup_choices = (model_admin.get_queryset(request).order_by(field_path)
                               .values_list(field_path, flat=True).distinct())


def scoped_list_filter(model, entry):
    """A `list_filter` entry whose choices come from the admin's own rows: a relation offers
    only the related rows those reach (RelatedOnlyFieldListFilter), a plain field only the
    values they hold. Choices, booleans and dates name nothing of a project; a filter class
    written here decides its own lookups."""
    if isinstance(entry, tuple):
        path, filter_class = entry
        if filter_class is admin.RelatedFieldListFilter:
            return path, admin.RelatedOnlyFieldListFilter
        if filter_class is admin.AllValuesFieldListFilter:
            return path, ScopedAllValuesFieldListFilter
        return entry
    if not isinstance(entry, str):
        return entry  # a SimpleListFilter: its own lookups
    field = get_fields_from_path(model, entry)[-1]
    if field.remote_field is not None:
        return entry, admin.RelatedOnlyFieldListFilter
    if field.choices or isinstance(field, (models.BooleanField, models.DateField)):
        return entry
    return entry, ScopedAllValuesFieldListFilter


class ProjectScopedAdmin(admin.ModelAdmin):
    """Rows reachable from a project (`project_path`) are visible to the project's owner, the
    researchers it is shared with and superusers. Staff need no model permissions: the project
    is the unit of access."""

    project_path = "project"
    list_per_page = 50

    class Media:
        css = {"all": ("annotation/admin.css",)}

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        lookup = f"{self.project_path}__in" if self.project_path else "pk__in"
        return queryset.filter(**{lookup: projects_visible_to(request.user).values("pk")})

    def get_list_filter(self, request):
        # Every filter's choices from the scoped rows, however the entry is written.
        return [scoped_list_filter(self.model, entry)
                for entry in super().get_list_filter(request)]

    def _is_staff(self, request) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_module_permission(self, request):
        return self._is_staff(request)

    def has_view_permission(self, request, obj=None):
        return self._is_staff(request)

    def has_add_permission(self, request):
        return self._is_staff(request)

    def has_change_permission(self, request, obj=None):
        return self._is_staff(request)

    def has_delete_permission(self, request, obj=None):
        return self._is_staff(request)

    def _scoped_choices(self, request, model):
        # select_related: the choices' labels (str(item), str(stage)) name the project, which
        # would otherwise cost one query per selected option.
        if model not in (Project, Item, Stage, Hit, Assignment, Worker):
            return None
        if model in (Item, Stage):
            queryset = model.objects.select_related("project")
        elif model in (Hit, Assignment):
            queryset = model.objects.select_related("stage__project")
        else:
            queryset = model._default_manager.all()
        if request.user.is_superuser:
            return queryset
        visible = projects_visible_to(request.user).values("pk")
        if model is Project:
            return queryset.filter(pk__in=visible)
        if model in (Item, Stage):
            return queryset.filter(project__in=visible)
        if model in (Hit, Assignment):
            return queryset.filter(stage__project__in=visible)
        return workers_visible_to(request.user)  # model is Worker

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        queryset = self._scoped_choices(request, db_field.related_model)
        if queryset is not None:
            kwargs["queryset"] = queryset
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        queryset = self._scoped_choices(request, db_field.related_model)
        if queryset is not None:
            kwargs["queryset"] = queryset
        return super().formfield_for_manytomany(db_field, request, **kwargs)


class ReadOnlyAdmin(ProjectScopedAdmin):
    """Append-only rows: viewable, never added, changed or deleted through the admin."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class StageFilter(admin.SimpleListFilter):
    """Rows of one stage. Unlike RelatedOnlyFieldListFilter it loads the stages' projects in
    the same query (a stage's label names its project)."""

    title = "stage"
    parameter_name = "stage"

    def lookups(self, request, model_admin):
        present = model_admin.get_queryset(request).order_by().values("stage_id")
        stages = Stage.objects.filter(pk__in=present).select_related("project")
        return [(s.pk, str(s)) for s in stages]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(stage_id=self.value())
        return queryset


class ProgressColumnsMixin:
    """List columns over the `progress` a changelist attaches to each project or stage."""

    @admin.display(description="Items")
    def item_count(self, obj):
        return obj.progress.items

    @admin.display(description="Counted / wanted")
    def judgment_progress(self, obj):
        return progress_cell(obj.progress)

    @admin.display(description="Assignments")
    def assignment_summary(self, obj):
        return obj.progress.assignments_summary() or "–"


def mturk_production_on() -> bool:
    from annotation.providers.mturk_protocol import mturk_is_production

    return mturk_is_production()


class ProviderBannerMixin:
    """Shows a red banner on every page of the admin it is mixed into while MTurk production
    is on: publishing then spends real money."""

    def _production_banner(self, request) -> None:
        if mturk_production_on():
            messages.error(request, "MTurk PRODUCTION is ON (MTURK_PRODUCTION=true): publishing "
                                    "an MTurk stage creates real HITs and spends real money.")

    def changelist_view(self, request, extra_context=None):
        self._production_banner(request)
        return super().changelist_view(request, extra_context)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        if request.method == "GET":
            self._production_banner(request)
        return super().changeform_view(request, object_id, form_url, extra_context)


class StageProviderMixin(ProviderBannerMixin):
    """Stage pages: the banner, and the cost of the stage before anything is spent."""

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        # Status changes go through the actions (the logged status machine), never a form:
        # read-only on the add page too (a new stage is a draft).
        return fields if "status" in fields else fields + ("status",)

    @admin.display(description="Cost estimate")
    def cost_estimate(self, obj):
        from annotation.cost_selectors import stage_cost_estimate

        if obj is None or obj.pk is None:
            return "–"
        try:
            return stage_cost_estimate(stage=obj, plans=getattr(obj, "release_plans", None)
                                       ).as_text()
        except Exception as exc:  # e.g. no items yet, or a plan MTurk would refuse
            return f"cannot estimate: {exc}"


    @admin.display(description="Agreement report")
    def agreement_report(self, obj):
        from django.urls import NoReverseMatch, reverse

        if obj is None or obj.pk is None:
            return "–"
        try:
            url = reverse("metrics:project-dashboard", kwargs={"slug": obj.project.slug})
        except NoReverseMatch:
            return "–"
        from annotation.judgment_selectors import agreement_gate

        # The gate's stage and α, as the cockpit and the publish guard read them ("on the
        # previous stage" named none, nor whether it passed).
        gate = agreement_gate(obj)
        return format_html('<a href="{}?stage={}">Agreement and workers for this stage</a>{}',
                           url, obj.pk, f"; agreement gate: {gate.text()}" if gate else "")
