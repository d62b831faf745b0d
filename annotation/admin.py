"""Admin for the annotation models.

Researchers (staff, not superuser) see only projects they own or that are shared with them, and
only those projects' items, stages, HITs, assignments, judgments and workers: every admin here
filters `get_queryset` through `projects_visible_to` and restricts foreign-key choices the same
way. Judgments and stage transitions are append-only and therefore read-only. Progress columns
come from `annotation.selectors` in a fixed number of grouped queries per page.
"""
from __future__ import annotations

import io
import tempfile
import zipfile

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import FileResponse
from django.utils.html import format_html, format_html_join

from .admin_actions import (
    ASSIGNMENT_ACTIONS,
    STAGE_ACTIONS,
    WORKER_ACTIONS,
    ProviderActionForm,
    ProviderBannerMixin,
    StageProviderMixin,
    WorkerHistoryMixin,
)
from .domain.item_content import ItemContentError, validate_gold, validate_item_content
from .models import (
    Assignment,
    AssignmentItem,
    Hit,
    HitItem,
    InhouseLink,
    Item,
    Judgment,
    Project,
    Provider,
    Stage,
    StageTransition,
    Worker,
    WorkerBlock,
    WorkerQualification,
)
from .selectors import (
    attach_progress,
    items_in_stage,
    project_progress,
    projects_visible_to,
    stage_progress,
    stages_with_progress,
    workers_visible_to,
)
from .services.workers import worker_block, worker_unblock


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


def export_response(projects: list[Project], fmt: str) -> FileResponse:
    """The judgments of one project as a file, or of several as a zip of one file each.
    Written to a temporary file first: a large project never sits in memory."""
    from .services.exports import export_write

    spool = tempfile.TemporaryFile()

    def write(project: Project, binary) -> None:
        text = io.TextIOWrapper(binary, encoding="utf-8", newline="")
        export_write(project=project, out=text, fmt=fmt, progress=False)
        text.flush()
        text.detach()  # keep `binary` open

    if len(projects) == 1:
        write(projects[0], spool)
        filename = f"{projects[0].slug}-judgments.{fmt}"
    else:
        with zipfile.ZipFile(spool, "w", zipfile.ZIP_DEFLATED) as archive:
            for project in projects:
                with archive.open(f"{project.slug}-judgments.{fmt}", "w") as member:
                    write(project, member)
        filename = f"judgments-{len(projects)}-projects.zip"
    spool.seek(0)
    return FileResponse(spool, as_attachment=True, filename=filename)


def progress_cell(progress) -> str:
    if progress is None:
        return "–"
    return f"{progress.judgments} / {progress.wanted} ({progress.percent}%)"


class ProjectScopedAdmin(admin.ModelAdmin):
    """Rows reachable from a project (`project_path`) are visible to the project's owner, the
    researchers it is shared with and superusers. Staff need no model permissions: the project
    is the unit of access."""

    project_path = "project"
    list_per_page = 50

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        lookup = f"{self.project_path}__in" if self.project_path else "pk__in"
        return queryset.filter(**{lookup: projects_visible_to(request.user).values("pk")})

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


# --- Projects -----------------------------------------------------------------------------------


class StageInline(admin.TabularInline):
    model = Stage
    fields = ("name", "kind", "status", "provider", "order", "judgments_per_item")
    extra = 0
    show_change_link = True


class ProgressColumnsMixin:
    """List columns over the `progress` a changelist attaches to each project or stage."""

    @admin.display(description="Items")
    def item_count(self, obj):
        return obj.progress.items

    @admin.display(description="Judgments / wanted")
    def judgment_progress(self, obj):
        return progress_cell(obj.progress)

    @admin.display(description="Assignments")
    def assignment_summary(self, obj):
        return obj.progress.assignments_summary() or "–"


@admin.register(Project)
class ProjectAdmin(ProgressColumnsMixin, ProjectScopedAdmin):
    project_path = ""
    list_display = (
        "title", "slug", "kind", "owner", "item_count", "judgment_progress",
        "assignment_summary", "dashboard_link", "created_at",
    )
    list_filter = ("kind", "experiment_mode")
    list_select_related = ("owner",)
    search_fields = ("title", "slug", "owner__username")
    prepopulated_fields = {"slug": ("title",)}
    filter_horizontal = ("shared_with",)
    readonly_fields = ("progress_table", "created_at", "updated_at")
    inlines = (StageInline,)
    actions = ("export_jsonl", "export_csv")
    fieldsets = (
        (None, {"fields": ("title", "slug", "kind", "instructions", "owner", "shared_with")}),
        ("Progress", {"fields": ("progress_table",)}),
        ("Collection", {"fields": (
            "items_per_hit", "redundancy", "reward_per_hit", "budget_cap",
            "qualification_threshold", "qualification_tolerance",
            "assignment_timeout_minutes", "gold_rate",
        )}),
        ("Kind-specific", {"fields": (
            "scale_labels", "justification_min_length", "aspects", "aspect_preferences",
            "experiment_mode", "bonus_per_correct",
        )}),
        (None, {"fields": ("created_at", "updated_at")}),
    )

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        # One page of projects, then three grouped queries for all their counts.
        changelist.result_list = attach_progress(
            changelist.result_list, project_progress(projects=list(changelist.result_list))
        )
        return changelist

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields.append("owner")
        return fields

    def _export(self, request, queryset, fmt: str):
        projects = list(queryset.order_by("slug"))
        if not projects:
            self.message_user(request, "No project selected.", messages.WARNING)
            return None
        return export_response(projects, fmt)

    @admin.action(description="Export judgments of selected projects (JSON Lines)")
    def export_jsonl(self, request, queryset):
        return self._export(request, queryset, "jsonl")

    @admin.action(description="Export judgments of selected projects (CSV)")
    def export_csv(self, request, queryset):
        return self._export(request, queryset, "csv")

    def get_actions(self, request):
        actions = super().get_actions(request)
        # Only the owner may delete a project; the bulk action cannot tell owners apart.
        if not request.user.is_superuser:
            actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request, obj=None):
        if request.user.is_superuser:
            return True
        return self._is_staff(request) and (obj is None or obj.owner_id == request.user.pk)

    def save_model(self, request, obj, form, change):
        if not change and obj.owner_id is None:
            obj.owner = request.user
        super().save_model(request, obj, form, change)

    @admin.display(description="Reports")
    def dashboard_link(self, obj):
        from django.urls import reverse

        return format_html('<a href="{}">dashboard</a>',
                           reverse("metrics:project-dashboard", args=[obj.slug]))

    @admin.display(description="Progress per stage")
    def progress_table(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        total = project_progress(projects=[obj])[obj.pk]
        rows = [("All data stages", "", total.items, progress_cell(total),
                 total.assignments_summary() or "–")]
        rows += [
            (stage.name, stage.get_status_display(), progress.items, progress_cell(progress),
             progress.assignments_summary() or "–")
            for stage, progress in stages_with_progress(project=obj)
        ]
        body = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows
        )
        return format_html(
            "<table><thead><tr><th>Stage</th><th>Status</th><th>Items</th>"
            "<th>Judgments / wanted</th><th>Assignments</th></tr></thead><tbody>{}</tbody>"
            "</table>",
            body,
        )


# --- Items --------------------------------------------------------------------------------------


class ItemAdminForm(forms.ModelForm):
    class Meta:
        model = Item
        fields = (
            "project", "external_id", "dataset", "source", "split", "domain", "text_level",
            "group_key", "content", "gold", "is_gold_check", "is_practice", "excluded",
            "exclusion_reason", "metadata",
        )

    def clean(self):
        cleaned = super().clean()
        project = cleaned.get("project") or getattr(self.instance, "project", None)
        if project is None:
            return cleaned
        for name, check in (("content", validate_item_content), ("gold", validate_gold)):
            if name in cleaned:
                try:
                    check(project.kind, cleaned[name])
                except ItemContentError as error:
                    self.add_error(name, str(error))
        return cleaned


class ItemStageFilter(admin.SimpleListFilter):
    """Items released in a stage (its explicit items, or all project items when it names none)."""

    title = "stage"
    parameter_name = "stage"

    def lookups(self, request, model_admin):
        stages = Stage.objects.filter(project__in=projects_visible_to(request.user).values("pk"))
        return [(s.pk, str(s)) for s in stages.select_related("project")]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        stage = Stage.objects.filter(
            pk=self.value(), project__in=projects_visible_to(request.user).values("pk")
        ).first()
        if stage is None:
            return queryset.none()
        return queryset.filter(pk__in=items_in_stage(stage=stage).values("pk"))


@admin.register(Item)
class ItemAdmin(ProjectScopedAdmin):
    form = ItemAdminForm
    list_display = (
        "external_id", "project", "dataset", "split", "source", "domain", "text_level",
        "is_gold_check", "excluded", "n_judgments",
    )
    list_filter = (
        ("project", admin.RelatedOnlyFieldListFilter), "dataset", "split", "source", "domain",
        "text_level", ItemStageFilter, "is_gold_check", "is_practice", "excluded",
    )
    list_select_related = ("project",)
    search_fields = ("external_id", "dataset", "source", "group_key")
    autocomplete_fields = ("project",)
    readonly_fields = ("created_at",)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_judgments=count_of(Judgment, "item"))

    @admin.display(description="Judgments", ordering="n_judgments")
    def n_judgments(self, obj):
        return obj.n_judgments


# --- Stages -------------------------------------------------------------------------------------


class StageAdminForm(forms.ModelForm):
    class Meta:
        model = Stage
        fields = (
            "project", "kind", "name", "order", "status", "provider", "items",
            "judgments_per_item", "requires_stage", "agreement_threshold", "reward_per_hit",
            "settings",
        )

    def clean(self):
        cleaned = super().clean()
        project = cleaned.get("project")
        if project is None:
            return cleaned
        foreign = [i for i in cleaned.get("items") or [] if i.project_id != project.pk]
        if foreign:
            self.add_error("items", f"{len(foreign)} item(s) belong to another project, "
                                    f"e.g. {foreign[0]}")
        required = cleaned.get("requires_stage")
        if required is not None and required.project_id != project.pk:
            self.add_error("requires_stage", "must be a stage of the same project")
        return cleaned


@admin.register(Stage)
class StageAdmin(ProgressColumnsMixin, StageProviderMixin, ProjectScopedAdmin):
    form = StageAdminForm
    action_form = ProviderActionForm
    actions = STAGE_ACTIONS
    list_display = (
        "name", "project", "kind", "status", "provider", "order", "item_count",
        "judgment_progress", "assignment_summary",
    )
    list_filter = (
        ("project", admin.RelatedOnlyFieldListFilter), "kind", "status", "provider",
    )
    list_select_related = ("project",)
    search_fields = ("name", "project__slug", "project__title")
    autocomplete_fields = ("project", "requires_stage", "items")
    readonly_fields = ("progress_summary", "cost_estimate", "agreement_report", "created_at",
                       "updated_at")

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        changelist.result_list = attach_progress(
            changelist.result_list, stage_progress(stages=list(changelist.result_list))
        )
        return changelist

    @admin.display(description="Progress")
    def progress_summary(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        progress = stage_progress(stages=[obj])[obj.pk]
        return (
            f"{progress.items} items; judgments {progress_cell(progress)}; "
            f"assignments: {progress.assignments_summary() or 'none'}"
        )


@admin.register(StageTransition)
class StageTransitionAdmin(ReadOnlyAdmin):
    project_path = "stage__project"
    list_display = ("stage", "from_status", "to_status", "user", "created_at", "reason")
    list_filter = ("to_status", "from_status", "stage__kind")
    list_select_related = ("stage__project", "user")
    search_fields = ("stage__name", "stage__project__slug", "reason")


# --- Crowd --------------------------------------------------------------------------------------


class HitItemInline(admin.TabularInline):
    model = HitItem
    extra = 0
    autocomplete_fields = ("item",)


@admin.register(Hit)
class HitAdmin(ProjectScopedAdmin):
    project_path = "stage__project"
    list_display = (
        "__str__", "stage", "provider", "external_id", "status", "max_assignments", "reward",
        "n_items", "n_assignments", "expires_at",
    )
    list_filter = ("provider", "status", "stage__kind")
    list_select_related = ("stage__project",)
    search_fields = ("external_id", "hit_type_id", "stage__name", "stage__project__slug")
    # What MTurk holds (id, reward, assignments, expiry, status) changes through the actions
    # that call it (publish, extend, expire, sync), never by typing here.
    readonly_fields = ("stage", "provider", "external_id", "hit_type_id", "unique_request_token",
                       "max_assignments", "reward", "status", "expires_at", "created_at")
    inlines = (HitItemInline,)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            n_items=count_of(HitItem, "hit"), n_assignments=count_of(Assignment, "hit")
        )

    @admin.display(description="Items", ordering="n_items")
    def n_items(self, obj):
        return obj.n_items

    @admin.display(description="Assignments", ordering="n_assignments")
    def n_assignments(self, obj):
        return obj.n_assignments


class AssignmentItemInline(admin.TabularInline):
    """What the worker was shown, in order: a record, never edited (the presented order maps
    the labels a page sent back to the items' answers)."""

    model = AssignmentItem
    extra = 0
    fields = ("item", "position", "presented_order", "first_shown_at")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Assignment)
class AssignmentAdmin(ProviderBannerMixin, ProjectScopedAdmin):
    project_path = "stage__project"
    action_form = ProviderActionForm
    actions = ASSIGNMENT_ACTIONS
    list_display = (
        "__str__", "worker", "stage", "status", "n_items", "n_judgments", "started_at",
        "submitted_at", "provider_confirmed", "bonus_paid",
    )
    list_filter = (
        "status", StageFilter, "stage__kind", "stage__provider",
        ("provider_confirmed_at", admin.EmptyFieldListFilter),
    )
    list_select_related = ("worker", "stage__project")
    search_fields = ("external_id", "worker__external_id", "worker__display_name")
    # Money and provider state change only through the actions, which call the provider:
    # an edited "Approved" or bonus would say "changed successfully" while MTurk still shows
    # Submitted and no bonus, and no sync would repair it. Only the researcher's note is typed.
    readonly_fields = ("stage", "hit", "worker", "external_id", "status", "draft", "bonus_paid",
                       "completion_code", "started_at", "last_seen_at", "submitted_at",
                       "reviewed_at", "provider_confirmed_at")
    inlines = (AssignmentItemInline,)

    def has_add_permission(self, request, obj=None):
        return False  # assignments start when a worker opens a task page

    @admin.display(boolean=True, description="confirmed by provider",
                   ordering="provider_confirmed_at")
    def provider_confirmed(self, obj: Assignment) -> bool | None:
        if obj.stage.provider not in (Provider.MTURK, Provider.PROLIFIC):
            return None
        return obj.provider_confirmed_at is not None

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            n_items=count_of(AssignmentItem, "assignment"),
            n_judgments=count_of(Judgment, "assignment"),
        )

    @admin.display(description="Items", ordering="n_items")
    def n_items(self, obj):
        return obj.n_items

    @admin.display(description="Judgments", ordering="n_judgments")
    def n_judgments(self, obj):
        return obj.n_judgments


class BlockActionForm(ActionForm):
    reason = forms.CharField(
        required=False, label="Reason (for block)",
        widget=forms.TextInput(attrs={"size": 40}),
    )


class WorkerBlockInline(admin.TabularInline):
    """The blocks on a worker: a researcher sees their own, a superuser everyone's."""

    model = WorkerBlock
    extra = 0
    fields = ("researcher", "reason", "created_at")
    readonly_fields = fields
    can_delete = False

    def get_queryset(self, request):
        queryset = super().get_queryset(request).select_related("researcher")
        return queryset if request.user.is_superuser else queryset.filter(researcher=request.user)

    def has_add_permission(self, request, obj=None):
        return False  # blocks are set with the Block action, which says where they apply


@admin.register(Worker)
class WorkerAdmin(WorkerHistoryMixin, ProjectScopedAdmin):
    list_display = (
        "__str__", "provider", "external_id", "status", "n_assignments", "n_judgments",
        "created_at",
    )
    list_filter = ("provider", "status")
    search_fields = ("external_id", "display_name", "email")
    readonly_fields = ("created_at", "provider_history")
    action_form = BlockActionForm
    actions = ("block_workers", "unblock_workers", *WORKER_ACTIONS)
    inlines = [WorkerBlockInline]

    def get_queryset(self, request):
        queryset = admin.ModelAdmin.get_queryset(self, request)
        if not request.user.is_superuser:
            queryset = queryset.filter(pk__in=workers_visible_to(request.user).values("pk"))
        if request.user.is_superuser:
            return queryset.annotate(n_assignments=count_of(Assignment, "worker"),
                                     n_judgments=count_of(Judgment, "worker"))
        # A researcher sees the totals of their own projects only, not other studies' work.
        visible = projects_visible_to(request.user).values("pk")
        return queryset.annotate(
            n_assignments=count_of(Assignment, "worker", stage__project__in=visible),
            n_judgments=count_of(Judgment, "worker", item__project__in=visible))

    def has_delete_permission(self, request, obj=None):
        # Workers are shared across projects and their judgments are kept forever.
        return request.user.is_superuser

    @admin.display(description="Assignments", ordering="n_assignments")
    def n_assignments(self, obj):
        return obj.n_assignments

    @admin.display(description="Judgments", ordering="n_judgments")
    def n_judgments(self, obj):
        return obj.n_judgments

    @admin.action(description="Block selected workers")
    def block_workers(self, request, queryset):
        reason = request.POST.get("reason", "").strip() or f"Blocked by {request.user} in the admin"
        for worker in queryset:
            worker_block(worker=worker, reason=reason, by=request.user)
        scope = ("in every project" if request.user.is_superuser
                 else "in your projects (owned or shared with you)")
        self.message_user(request, f"Blocked {len(queryset)} worker(s) {scope}.",
                          messages.SUCCESS)

    @admin.action(description="Unblock selected workers")
    def unblock_workers(self, request, queryset):
        for worker in queryset:
            worker_unblock(worker=worker, by=request.user)
        self.message_user(request, f"Lifted your block on {len(queryset)} worker(s).",
                          messages.SUCCESS)


@admin.register(WorkerQualification)
class WorkerQualificationAdmin(ProjectScopedAdmin):
    project_path = "stage__project"
    list_display = ("worker", "stage", "passed", "score", "n_items", "granted_externally",
                    "created_at")
    list_filter = ("passed", "granted_externally", "stage__kind")
    list_select_related = ("worker", "stage__project")
    search_fields = ("worker__external_id", "worker__display_name", "stage__name")
    autocomplete_fields = ("worker", "stage")


@admin.register(InhouseLink)
class InhouseLinkAdmin(ProjectScopedAdmin):
    list_display = ("worker", "project", "stage", "revoked", "expires_at", "created_at")
    list_filter = ("revoked", ("project", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("worker", "project", "stage__project")
    search_fields = ("worker__external_id", "worker__display_name", "project__slug")
    autocomplete_fields = ("worker", "project", "stage")
    readonly_fields = ("created_at",)


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyAdmin):
    project_path = "item__project"
    list_display = (
        "id", "item", "worker", "stage", "score", "choice", "difficult", "time_spent_ms",
        "created_at",
    )
    list_filter = (
        ("item__project", admin.RelatedOnlyFieldListFilter),
        StageFilter, "stage__kind", "stage__status",
        "worker__provider", "item__dataset", "item__split", "item__source", "difficult",
    )
    list_select_related = ("item__project", "worker", "stage__project")
    search_fields = ("item__external_id", "worker__external_id", "justification")
    readonly_fields = [f.name for f in Judgment._meta.fields]
    show_full_result_count = False
