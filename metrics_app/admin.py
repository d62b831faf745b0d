"""Admin for metrics_app. Cached scores and reports are computed, never edited by hand, so
they are read-only; researchers see only rows of projects visible to them."""
from __future__ import annotations

import json

from django.contrib import admin, messages
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from annotation.admin.base import ReadOnlyAdmin
from metrics_app.access_selectors import access_model_version, item_scoring_jobs_visible_to
from metrics_app.domain.judge_prompts import config_shown
from metrics_app.models import (
    ItemScoringJob,
    Judge,
    JudgeJob,
    JudgeVerdict,
    JudgeVersion,
    ScoringJob,
)

from .models import MetricScore, ModelVersion, ModelVersionEvent, Report

# The field of the "Promote anyway" page that confirms a promotion against the promotion rule.
PROMOTE_FORCE_FIELD = "force_promotion"


@admin.register(MetricScore)
class MetricScoreAdmin(ReadOnlyAdmin):
    project_path = "item__project"
    list_display = ("item", "metric", "version", "side", "value", "created_at")
    list_filter = ("metric", "version", "side")
    list_select_related = ("item__project",)
    search_fields = ("item__external_id", "metric", "version")


@admin.register(Report)
class ReportAdmin(ReadOnlyAdmin):
    list_display = ("kind", "project", "stage", "judgment_watermark", "computed_at")
    list_filter = ("kind", ("project", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("project", "stage__project")
    search_fields = ("kind", "project__slug", "project__title")


class CancelJobsMixin:
    """The "Cancel selected jobs" action of the project scoring job and judge job admins:
    whoever sees a job (its project is theirs or shared with them) may cancel it, as they may
    queue it. Each job is cancelled through `leased_job_cancel`; one already finished is
    reported and skipped."""

    actions = ["cancel_jobs"]

    @admin.action(description="Cancel selected jobs")
    def cancel_jobs(self, request, queryset):
        from .services.job_leases import JobNotCancellable, job_label, leased_job_cancel

        for job in queryset.order_by("pk"):
            try:
                job = leased_job_cancel(job=job, user=request.user)
            except JobNotCancellable as exc:
                self.message_user(request, str(exc), level=messages.WARNING)
                continue
            self.message_user(request, f"{job_label(job)}: {job.error}")


@admin.register(ScoringJob)
class ScoringJobAdmin(CancelJobsMixin, ReadOnlyAdmin):
    """Scoring runs with their progress; queued from the metrics page or API, run in Celery."""

    list_display = ("__str__", "status", "progress_bar", "queue", "requested_by", "created_at",
                    "finished_at")
    list_filter = ("status", "queue", ("project", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("project", "requested_by")
    search_fields = ("project__slug", "project__title", "task_id")
    readonly_fields = ("progress_bar",)

    @admin.display(description="Progress")
    def progress_bar(self, obj):
        return format_html('<progress max="100" value="{}"></progress> {} / {} ({}%)',
                           obj.percent, obj.done, obj.total, obj.percent)


@admin.register(ItemScoringJob)
class ItemScoringJobAdmin(ReadOnlyAdmin):
    """Scoring of items posted to `POST /api/metrics/score/` with heavy metrics (no project):
    each researcher sees the jobs they created, superusers all."""

    list_display = ("__str__", "status", "progress_bar", "queue", "requested_by", "created_at",
                    "finished_at")
    list_filter = ("status", "queue")
    list_select_related = ("requested_by",)
    search_fields = ("task_id", "requested_by__username")
    readonly_fields = ("progress_bar",)

    def get_queryset(self, request):
        # No project to scope by (ReadOnlyAdmin's scoping): the requester's own jobs.
        return (admin.ModelAdmin.get_queryset(self, request)
                & item_scoring_jobs_visible_to(request.user))

    @admin.display(description="Progress")
    def progress_bar(self, obj):
        return format_html('<progress max="100" value="{}"></progress> {} / {} ({}%)',
                           obj.percent, obj.done, obj.total, obj.percent)


# --- LERC model versions ----------------------------------------------------------------------


class ModelVersionEventInline(admin.TabularInline):
    model = ModelVersionEvent
    extra = 0
    can_delete = False
    fields = ("created_at", "event", "detail", "user")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ModelVersion)
class ModelVersionAdmin(ReadOnlyAdmin):
    """Model versions with their training progress. Cancel is open to whoever sees the version;
    promote and roll back change the metric served to everyone, so superusers only."""

    project_path = "projects"
    list_display = ("__str__", "kind", "status", "progress_bar", "validation_metric",
                    "card_page", "backbone", "created_at", "promoted_at")
    list_filter = ("name", "kind", "status")
    search_fields = ("name", "backbone", "projects__slug")
    readonly_fields = ("progress_bar", "validation_metric", "card", "config_json",
                       "metrics_json", "data_snapshot_json", "progress_json")
    fieldsets = (
        (None, {"fields": ("name", "number", "kind", "status", "backbone", "projects",
                           "progress_bar", "validation_metric", "artifact_uri", "error",
                           ("created_at", "started_at", "finished_at", "promoted_at"))}),
        ("Model card", {"fields": ("card",)}),
        ("Raw data (JSON)", {"classes": ("collapse",),
                             "fields": ("config_json", "metrics_json", "data_snapshot_json",
                                        "progress_json")}),
    )
    inlines = [ModelVersionEventInline]
    actions = ["cancel_training", "promote_version", "rollback_promoted"]

    def get_queryset(self, request):
        return super().get_queryset(request).distinct()

    # A version may be trained on projects of several researchers. The card, the projects
    # field, the raw JSON and the log name them all: a researcher who does not see every one
    # gets the page without them, and the card page, which names only those they see.
    RESEARCHER_FIELDS = ("name", "number", "kind", "status", "backbone", "card_page",
                         "progress_bar", "validation_metric", "error",
                         ("created_at", "started_at", "finished_at", "promoted_at"))

    @staticmethod
    def _names_hidden_projects(request, obj) -> bool:
        from .services.lerc import hidden_project_slugs

        if request.user.is_superuser or obj is None:
            return False
        visible = access_model_version(request.user, obj.pk).visible_project_ids
        return bool(hidden_project_slugs(obj, visible))

    def get_fieldsets(self, request, obj=None):
        if self._names_hidden_projects(request, obj):
            return ((None, {"fields": self.RESEARCHER_FIELDS}),)
        return super().get_fieldsets(request, obj)

    def get_inlines(self, request, obj):
        if self._names_hidden_projects(request, obj):
            return []
        return super().get_inlines(request, obj)

    def get_search_fields(self, request):
        fields = super().get_search_fields(request)
        if request.user.is_superuser:
            return fields
        return tuple(f for f in fields if not f.startswith("projects__"))

    def get_search_results(self, request, queryset, search_term):
        """A researcher finds versions by the slugs of projects they see, never by another's
        (a match would confirm that slug)."""
        from annotation.access_selectors import projects_visible_to

        results, duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if request.user.is_superuser or not term:
            return results, duplicates
        by_project = queryset.filter(projects__in=projects_visible_to(request.user).filter(
            slug__icontains=term))
        return (results | by_project).distinct(), True

    @admin.display(description="Progress")
    def progress_bar(self, obj):
        progress = obj.progress or {}
        epochs, epoch = progress.get("epochs"), progress.get("epoch")
        if not epochs or not epoch:
            return progress.get("phase", "—")
        per_epoch = progress.get("steps_per_epoch") or 1
        done = (epoch - 1) * per_epoch + progress.get("step", 0)
        loss = progress.get("loss")
        return format_html(
            '<progress max="{}" value="{}"></progress> {} · epoch {}/{} · step {}/{} · loss {}',
            epochs * per_epoch, done, progress.get("phase", ""), epoch, epochs,
            progress.get("step", 0), per_epoch, "—" if loss is None else f"{loss:.3f}",
        )

    @admin.display(description="Validation")
    def validation_metric(self, obj):
        validation = (obj.metrics or {}).get("validation") or {}
        for key in ("pearson", "pairwise_accuracy"):
            if validation.get(key) is not None:
                return f"{key} {validation[key]:.3f} (n={validation.get('n')})"
        return "—"

    @admin.display(description="Card")
    def card_page(self, obj):
        from django.urls import reverse

        return format_html('<a href="{}">model card</a>',
                           reverse("metrics:model-card", args=[obj.pk]))

    @admin.display(description="Model card")
    def card(self, obj):
        """The card rendered from its Markdown (raw HTML in it is escaped, not passed on)."""
        from markdown_it import MarkdownIt

        from .services.lerc import model_card

        html = MarkdownIt("commonmark", {"html": False}).enable("table").render(model_card(obj))
        link = self.card_page(obj)
        return mark_safe(f'<p>{link} (the page: tables, a chart, the data it saw)</p>'  # noqa: S308
                         f'<div class="model-card">{html}</div>')  # (escaped above)

    @staticmethod
    def _json(value):
        return format_html('<pre style="white-space: pre-wrap; max-height: 30em; overflow: auto">'
                           '{}</pre>', json.dumps(value, indent=2, sort_keys=True, default=str))

    @admin.display(description="Config")
    def config_json(self, obj):
        return self._json(obj.config)

    @admin.display(description="Metrics")
    def metrics_json(self, obj):
        return self._json(obj.metrics)

    @admin.display(description="Data snapshot")
    def data_snapshot_json(self, obj):
        return self._json(obj.data_snapshot)

    @admin.display(description="Progress (raw)")
    def progress_json(self, obj):
        return self._json(obj.progress)

    def _run(self, request, queryset, action, **kwargs):
        from .services.lerc import LercError

        for version in queryset:
            try:
                action(model_version=version, user=request.user, **kwargs)
                self.message_user(request, f"{version.name} v{version.number}: done")
            except LercError as exc:
                self.message_user(request, str(exc), level=messages.ERROR)

    @admin.action(description="Cancel training")
    def cancel_training(self, request, queryset):
        from .services.lerc import model_version_cancel

        self._run(request, queryset, model_version_cancel)

    @admin.action(description="Promote (serve this version)")
    def promote_version(self, request, queryset):
        from django.contrib.admin import helpers
        from django.template.response import TemplateResponse

        from .services.lerc import LercError, PromotionNeedsForce, model_version_promote

        if not request.user.is_superuser:
            self.message_user(request, "Only superusers promote model versions.", messages.ERROR)
            return None
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one version to promote.", messages.ERROR)
            return None
        version = queryset.get()
        # A version the promotion rule has not shown at least as good as the one serving is
        # promoted only from the page that shows the numbers ("Promote anyway").
        force = request.POST.get(PROMOTE_FORCE_FIELD) == "yes"
        try:
            model_version_promote(model_version=version, user=request.user,
                                  reason="by hand in the admin", force=force)
        except PromotionNeedsForce as exc:
            return TemplateResponse(request, "admin/metrics_app/modelversion/promote_force.html", {
                **self.admin_site.each_context(request),
                "title": f"Promote {version.name} v{version.number} against the promotion rule?",
                "opts": self.model._meta, "version": version, "objection": str(exc),
                "action": request.POST.get("action", ""),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME, "selected": [version.pk],
                "force_field": PROMOTE_FORCE_FIELD})
        except LercError as exc:
            self.message_user(request, str(exc), level=messages.ERROR)
            return None
        self.message_user(request, f"{version.name} v{version.number}: promoted"
                          + (" (forced over the promotion rule)" if force else ""))
        return None

    @admin.action(description="Roll back to the previously promoted version")
    def rollback_promoted(self, request, queryset):
        from .services.lerc import LercError, model_version_rollback

        if not request.user.is_superuser:
            self.message_user(request, "Only superusers roll back model versions.",
                              messages.ERROR)
            return
        # Promotion is per project set: the selected version names the set to roll back (two
        # versions of one set would roll it back twice).
        if queryset.count() != 1:
            self.message_user(request, "Select one version of the project set to roll back.",
                              messages.ERROR)
            return
        selected = queryset.get()
        try:
            version = model_version_rollback(model_version=selected, user=request.user)
            self.message_user(request, f"{selected.name}: v{version.number} is served again")
        except LercError as exc:
            self.message_user(request, str(exc), level=messages.ERROR)


class _GlobalReadOnlyAdmin(admin.ModelAdmin):
    """Judges and their versions belong to no project: staff read them; they are made by
    `create_judge` / `import_verdicts` (a version's config never changes)."""

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Judge)
class JudgeAdmin(_GlobalReadOnlyAdmin):
    list_display = ("name", "kind", "created_at")
    list_filter = ("kind",)
    search_fields = ("name",)


@admin.register(JudgeVersion)
class JudgeVersionAdmin(_GlobalReadOnlyAdmin):
    list_display = ("__str__", "created_at")
    list_filter = ("judge__kind",)
    list_select_related = ("judge",)
    search_fields = ("judge__name", "version")
    # The config as pages show it: a base_url stored with credentials (before they were
    # refused) has them blanked.
    exclude = ("config",)
    readonly_fields = ("shown_config",)

    @admin.display(description="config")
    def shown_config(self, obj):
        return json.dumps(config_shown(obj.config), indent=2, ensure_ascii=False)


@admin.register(JudgeVerdict)
class JudgeVerdictAdmin(ReadOnlyAdmin):
    project_path = "item__project"
    list_display = ("item", "judge_version", "order", "verdict", "score", "probability",
                    "parsed", "cost", "created_at")
    list_filter = ("parsed", "verdict")
    list_select_related = ("item__project", "judge_version__judge")
    search_fields = ("item__external_id", "judge_version__judge__name")


@admin.register(JudgeJob)
class JudgeJobAdmin(CancelJobsMixin, ReadOnlyAdmin):
    """LLM judge runs with their progress, cost and budget; queued by `run_judge --queue` or
    the API, run in Celery."""

    list_display = ("__str__", "status", "progress_bar", "spent", "budget", "requested_by",
                    "created_at", "finished_at")
    list_filter = ("status", ("project", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("project", "requested_by", "judge_version__judge")
    search_fields = ("project__slug", "judge_version__judge__name", "task_id")
    readonly_fields = ("progress_bar",)

    @admin.display(description="Progress")
    def progress_bar(self, obj):
        return format_html('<progress max="100" value="{}"></progress> {} / {} ({}%)',
                           obj.percent, obj.done, obj.total, obj.percent)
