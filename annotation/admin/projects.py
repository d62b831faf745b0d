"""Admin of the study design: projects, items, stages and their transitions."""
from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.db.models import Count
from django.utils.html import format_html, format_html_join

from annotation.domain.item_content import ItemContentError, validate_gold, validate_item_content
from annotation.models import (
    AdaptiveTarget,
    Item,
    Judgment,
    Project,
    RoutingDraw,
    Stage,
    StageKind,
    StageStatus,
    StageTransition,
)
from annotation.selectors import (
    attach_progress,
    items_in_stage,
    project_progress,
    projects_visible_to,
    stage_progress,
    stages_with_progress,
)
from annotation.services.stage_errors import StageError
from annotation.services.stage_plans import stage_items_select

from .actions import STAGE_ACTIONS, ProviderActionForm
from .base import (
    ProgressColumnsMixin,
    ProjectScopedAdmin,
    ReadOnlyAdmin,
    StageFilter,
    StageProviderMixin,
    count_of,
    export_response,
    progress_cell,
)
from .home_links import ProjectHomeLinksMixin
from .imports import ProjectImportMixin
from .stage_settings_form import (
    StageSettingsFormMixin,
    settings_fieldsets,
    stage_settings_form_class,
)


class StageInline(admin.TabularInline):
    model = Stage
    fields = ("name", "kind", "status", "provider", "order", "judgments_per_item")
    extra = 0
    show_change_link = True


@admin.register(Project)
class ProjectAdmin(ProjectImportMixin, ProjectHomeLinksMixin, ProgressColumnsMixin,
                   ProjectScopedAdmin):
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
        ("Analysis", {"fields": ("aggregation",)}),
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

        return format_html('<a href="{}">cockpit</a> · <a href="{}">dashboard</a>',
                           reverse("metrics:project-cockpit", args=[obj.slug]),
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


class StageAdminForm(StageSettingsFormMixin, forms.ModelForm):
    """A stage's settings. Its items are chosen by filter and count (`stage_items_select`), not
    listed one by one: a stage of 1,458 items posted as a list is refused by Django
    (TooManyFieldsSent) and makes the page 10,000 px tall.

    Its `settings` are typed fields for the stage's task kind and provider
    (`stage_settings_form_class`, schema in annotation/domain/stage_settings.py)."""

    item_choice = forms.ChoiceField(
        label="Items", required=False, initial="keep",
        choices=[("keep", "Keep the current choice"),
                 ("kind", "Chosen by the stage's kind when published (clears the list)"),
                 ("filter", "Choose by the filter below")],
        help_text="Only a draft stage's items can change.")
    item_dataset = forms.CharField(label="…dataset", required=False, max_length=100)
    item_split = forms.CharField(label="…split", required=False, max_length=50)
    item_source = forms.CharField(label="…answering system (source)", required=False,
                                  max_length=100)
    item_count = forms.IntegerField(
        label="…how many", required=False, min_value=1,
        help_text="A random sample of the matching items, the same every time for this stage; "
                  "empty for all of them.")

    class Meta:
        model = Stage
        fields = (
            "project", "kind", "name", "order", "status", "provider",
            "judgments_per_item", "requires_stage", "agreement_threshold", "reward_per_hit",
            "settings",
        )

    def clean(self):
        cleaned = super().clean()
        project = cleaned.get("project") or getattr(self.instance, "project", None)
        if project is None:
            return cleaned
        required = cleaned.get("requires_stage")
        if required is not None and required.project_id != project.pk:
            self.add_error("requires_stage", "must be a stage of the same project")
        others = Stage.objects.filter(project=project).exclude(pk=self.instance.pk)
        name = cleaned.get("name")
        if name and others.filter(name=name).exists():
            self.add_error("name", f"the project already has a stage named {name!r}")
        if (cleaned.get("kind") == StageKind.QUALIFICATION
                and others.filter(kind=StageKind.QUALIFICATION).exists()):
            self.add_error("kind", "the project already has a qualification stage; workers "
                                   "qualify once per project (edit that stage instead)")
        if cleaned.get("item_choice") == "filter" and not any(
                cleaned.get(f) for f in ("item_dataset", "item_split", "item_source",
                                         "item_count")):
            self.add_error("item_choice", "give a dataset, split, source or number of items")
        self.clean_stage_settings(cleaned)
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
    autocomplete_fields = ("project", "requires_stage")
    readonly_fields = ("chosen_items", "progress_summary", "cost_estimate", "agreement_report",
                       "settings_stored", "created_at", "updated_at")

    def _kind_and_provider(self, request, obj) -> tuple[str | None, str | None]:
        """What the settings fields are built for: the saved stage's project kind and provider;
        on the add page the project and provider the link names (?project=ID&provider=...)."""
        if obj is not None and obj.pk:
            return obj.project.kind, obj.provider
        project = Project.objects.filter(pk=request.GET.get("project") or None).first() \
            if str(request.GET.get("project", "")).isdigit() else None
        return (project.kind if project else None), (request.GET.get("provider") or None)

    def get_form(self, request, obj=None, change=False, **kwargs):
        kind, provider = self._kind_and_provider(request, obj)
        kwargs["form"] = stage_settings_form_class(self.form, kind, provider)
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fieldsets(self, request, obj=None):
        kind, provider = self._kind_and_provider(request, obj)
        specs = stage_settings_form_class(self.form, kind, provider).setting_specs
        note = ("" if obj is not None and obj.pk else
                "Save the stage to see the settings of its project's kind and its provider.")
        return [
            (None, {"fields": ("project", "kind", "name", "order", "status", "provider",
                               "judgments_per_item", "requires_stage", "agreement_threshold",
                               "reward_per_hit")}),
            ("Items", {"fields": ("item_choice", "item_dataset", "item_split", "item_source",
                                  "item_count", "chosen_items")}),
            *[(f"Settings: {group}", options | ({"description": note} if note and n == 0
                                                else {}))
              for n, (group, options) in enumerate(settings_fieldsets(specs))],
            ("Advanced settings", {"classes": ("collapse",),
                                   "fields": ("settings", "settings_stored")}),
            ("Progress and cost", {"fields": ("progress_summary", "cost_estimate",
                                              "agreement_report", "created_at", "updated_at")}),
        ]

    @admin.display(description="All stored settings (read-only)")
    def settings_stored(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        return format_html("<pre>{}</pre>", json.dumps(obj.settings or {}, indent=2,
                                                       sort_keys=True, ensure_ascii=False))

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        choice = form.cleaned_data.get("item_choice") or "keep"
        if choice == "keep":
            return
        stage = form.instance
        try:
            n = stage_items_select(
                stage=stage, count=form.cleaned_data.get("item_count"),
                **({} if choice == "kind" else {
                    "dataset": form.cleaned_data.get("item_dataset") or "",
                    "split": form.cleaned_data.get("item_split") or "",
                    "source": form.cleaned_data.get("item_source") or ""}))
        except StageError as error:
            messages.error(request, f"Items not changed: {error}")
            return
        messages.info(request, f"{stage}: {n} items chosen." if n else
                      f"{stage}: items will be chosen by kind when it is published.")

    @admin.display(description="Chosen items")
    def chosen_items(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        n = obj.items.count()
        if not n and obj.status == StageStatus.DRAFT:
            return "none listed: chosen by the stage's kind when it is published"
        if not n:
            return "not listed: the stage's kind chose them (see Progress)"
        by_dataset = obj.items.values_list("dataset").annotate(n=Count("id")).order_by("-n")
        return f"{n} items (" + ", ".join(f"{d or '–'}: {c}" for d, c in by_dataset[:5]) + ")"

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


@admin.register(RoutingDraw)
class RoutingDrawAdmin(ReadOnlyAdmin):
    """A routed stage's draw: which items had what chance of reaching humans. Read-only: the
    estimates weight by these probabilities, so they are never edited."""

    project_path = "stage__project"
    list_display = ("stage", "item", "predicted", "probability", "drawn", "metric_version")
    list_filter = ("drawn", StageFilter)
    list_select_related = ("stage__project", "item")
    search_fields = ("stage__name", "stage__project__slug", "item__external_id")


@admin.register(AdaptiveTarget)
class AdaptiveTargetAdmin(ReadOnlyAdmin):
    """Adaptive redundancy: how many judgments each item of such a stage is to get now.
    Written by the submit that changes it, never by hand."""

    project_path = "stage__project"
    list_display = ("stage", "item", "target", "settled", "updated_at")
    list_filter = ("settled", StageFilter)
    list_select_related = ("stage__project", "item")
    search_fields = ("stage__name", "stage__project__slug", "item__external_id")
