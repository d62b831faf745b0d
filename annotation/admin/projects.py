"""Admin of the study design: projects, items, stages and their transitions."""
from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.utils.html import format_html, format_html_join

from annotation.access_selectors import projects_visible_to
from annotation.domain.design import design_unit_for
from annotation.domain.item_content import (
    ItemContentError,
    group_key_for,
    item_columns_trimmed,
    normalize_split,
    validate_gold,
    validate_item_content,
    validate_item_text,
)
from annotation.domain.numbers import row_id_of
from annotation.hooks import stage_admin_actions_registered
from annotation.models import (
    OPEN_STAGE_STATUSES,
    AdaptiveTarget,
    Item,
    Judgment,
    Project,
    RoutingDraw,
    Stage,
    StageStatus,
    StageSync,
    StageTransition,
)
from annotation.selectors import (
    attach_progress,
    items_in_stage,
    project_progress,
    stage_open_gate_problem,
    stage_progress,
    stages_with_progress,
)
from annotation.services.items import (
    item_content_to_store,
    item_delete_error,
    item_edit_errors,
    item_exclusion,
)
from annotation.services.projects import (
    PROJECT_FIXED_FIELDS,
    ProjectShareError,
    project_share_check,
    share_refusals,
    shareable_users,
)
from annotation.services.stage_plans import (
    ITEM_FILTER_FIELDS,
    stage_item_filter_errors,
    stage_items_fixed_refusal,
    stage_items_select,
)
from annotation.services.stages import (
    STAGE_EDIT_FIELDS,
    STAGE_FIXED_FIELDS,
    identity_kind,
    project_delete_refusal,
    project_edit_errors,
    stage_by_hand_errors,
    stage_delete_refusal,
    stage_edit_errors,
    stage_identity_clashes,
    stage_identity_errors,
    stage_requirement_error,
    stage_row_lock,
)
from annotation.stage_errors import StageError
from annotation.stage_plan_selectors import stage_release_preview

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
    PREFIX,
    StageSettingsFormMixin,
    settings_fieldsets,
    stage_settings_form_class,
)


def stage_form_lock(form: forms.ModelForm) -> None:
    """Hold a saved stage's row (after its project's budget) for the rest of the admin's
    transaction (Django's change page runs in one, its save included) and read its status
    under it: the lock `stage_update` takes for the API. A form saved while the stage is being
    published waits for the publish (`_publish_draft` holds the row from its checks until the
    stage is published), then is judged as an edit of a live stage, instead of checked as a
    draft and written over the HITs that publish built."""
    stage = form.instance
    if stage.pk is None:
        return
    stage_row_lock(stage)
    stage.status = Stage.objects.values_list("status", flat=True).get(pk=stage.pk)


def stage_edit_errors_on_form(form: forms.ModelForm, cleaned: dict) -> None:
    """The stage edit rule (`annotation.services.stages.stage_edit_errors`) on an admin form
    of a saved stage: each refused change named on its field (a setting on its typed field,
    else the settings box)."""
    stage = form.instance
    if stage.pk is None:
        return
    changes = {name: cleaned[name] for name in (*STAGE_EDIT_FIELDS, "settings")
               if name in form.fields and name in cleaned}
    for name, why in stage_edit_errors(stage=stage, changes=changes).items():
        field = name
        if name.startswith("settings."):
            key = name.partition(".")[2]
            typed = PREFIX + key.replace(".", "__")
            field, why = (typed, why) if typed in form.fields else ("settings", f"{key}: {why}")
        form.add_error(field if field in form.fields else None, why)


class StageInlineForm(forms.ModelForm):
    """A stage row of the project page: the rules of the stage form hold here too (a stage made
    by hand is never an imported one; a live stage's judgments per item, any saved stage's kind
    and provider)."""

    class Meta:
        model = Stage
        fields = ("name", "kind", "provider", "order", "judgments_per_item")

    def clean(self):
        cleaned = super().clean()
        stage_form_lock(self)
        if self.instance.pk is None:  # the API's rule for a stage made by hand
            for name, why in stage_by_hand_errors(kind=cleaned.get("kind"),
                                                  provider=cleaned.get("provider")).items():
                self.add_error(name, why)
        if not self.errors:
            stage_edit_errors_on_form(self, cleaned)
        return cleaned


class StageInlineFormSet(forms.BaseInlineFormSet):
    """A published stage's row cannot be deleted (`stage_delete_refusal`): the errors of a
    row marked for deletion are never looked at, so the formset says it."""

    def clean(self):
        super().clean()
        refusals = [stage_delete_refusal(form.instance) for form in self.deleted_forms
                    if form.instance.pk is not None]
        refusals = [why for why in refusals if why]
        if refusals:
            raise forms.ValidationError(refusals)
        self._identities_check()

    def _identities_check(self) -> None:
        """The stage rule of every door (`stage_identity_clashes`) over the page as saved: the
        rows kept, beside the project's stages the page does not show, so two new rows of one
        name (or two qualification stages) are refused as one added at a time would be. The
        error goes on the rows added or changed (a saved row left as it was is not the one to
        fix)."""
        kept = [form for form in self.forms if form not in self.deleted_forms
                and getattr(form, "cleaned_data", None)
                and (form.instance.pk or form.has_changed())]
        shown = {form.instance.pk for form in self.forms if form.instance.pk}
        rest = [(name, identity_kind(kind, provider)) for name, kind, provider in
                Stage.objects.filter(project=self.instance).exclude(pk__in=shown)
                .values_list("name", "kind", "provider")] if self.instance.pk else []
        rows = [(form.cleaned_data.get("name") or form.instance.name,
                 identity_kind(form.cleaned_data.get("kind") or form.instance.kind,
                               form.cleaned_data.get("provider") or form.instance.provider))
                for form in kept]
        for index, form in enumerate(kept):
            if form.instance.pk and not form.has_changed():
                continue
            name, kind = rows[index]
            others = rest + rows[:index] + rows[index + 1:]
            for field, why in stage_identity_clashes(name=name, kind=kind,
                                                     others=others).items():
                form.add_error(field if field in form.fields else None, why)


class StageInline(admin.TabularInline):
    model = Stage
    form = StageInlineForm
    formset = StageInlineFormSet
    fields = ("name", "kind", "status", "provider", "order", "judgments_per_item")
    # A stage's status changes only through Publish / Close / Extend (logged, with checks).
    readonly_fields = ("status",)
    extra = 0
    show_change_link = True


class ProjectAdminForm(forms.ModelForm):
    """The project page: the settings its live stages read, and its budget, follow the API's
    rule (`annotation.services.stages.project_edit_errors`)."""

    class Meta:
        model = Project
        fields = ("title", "slug", "kind", "instructions", "owner", "shared_with",
                  "items_per_hit", "redundancy", "reward_per_hit", "budget_cap",
                  "qualification_threshold", "qualification_tolerance",
                  "assignment_timeout_minutes", "gold_rate", "scale_labels",
                  "justification_min_length", "aspects", "aspect_preferences",
                  "experiment_mode", "bonus_per_correct", "aggregation", "estimates_judge")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "shared_with" in self.fields:  # only accounts a share can name (`share_refusals`)
            self.fields["shared_with"].queryset = shareable_users(self.instance)

    def clean(self):
        cleaned = super().clean()
        if "shared_with" in cleaned and "shared_with" in self.changed_data:
            owner = cleaned.get("owner") or getattr(self.instance, "owner", None)
            kept = (self.instance.shared_with.values_list("pk", flat=True)
                    if self.instance.pk else ())
            for why in share_refusals(owner=owner, users=cleaned["shared_with"], kept=kept):
                self.add_error("shared_with", why)
        if self.instance.pk is not None and not self.errors:
            changes = {name: cleaned[name] for name in self.changed_data if name in cleaned}
            for name, why in project_edit_errors(project=self.instance,
                                                 changes=changes).items():
                self.add_error(name if name in self.fields else None, why)
        return cleaned


@admin.register(Project)
class ProjectAdmin(ProjectImportMixin, ProjectHomeLinksMixin, ProgressColumnsMixin,
                   ProjectScopedAdmin):
    form = ProjectAdminForm
    project_path = ""
    # Columns that fit beside the filters in a 1,280 px window (nine were cut off): slug and
    # kind under the title, the creation date short.
    list_display = (
        "title_and_slug", "owner", "item_count", "judgment_progress",
        "assignment_summary", "dashboard_link", "created_on",
    )
    list_display_links = ("title_and_slug",)
    list_filter = ("kind", "experiment_mode")
    list_select_related = ("owner",)
    search_fields = ("title", "slug", "owner__username")
    prepopulated_fields = {"slug": ("title",)}
    filter_horizontal = ("shared_with",)
    readonly_fields = ("progress_table", "created_at", "updated_at")
    inlines = (StageInline,)
    actions = ("export_jsonl", "export_csv", "export_jsonl_with_qualification",
               "export_csv_with_qualification")
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
        ("Analysis", {"fields": ("aggregation", "estimates_judge")}),
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
        """The API's rules (`annotation.services.projects`): the owner is a superuser's to
        change, who the project is shared with its owner's (`project_share_check`), and the
        slug and kind never change once the project exists (`PROJECT_FIXED_FIELDS`)."""
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields.append("owner")
        if obj is not None and obj.pk is not None:
            fields.extend(PROJECT_FIXED_FIELDS)
            if not self._may_share(request, obj):
                fields.append("shared_with")
        return fields

    def get_prepopulated_fields(self, request, obj=None):
        # The slug is typed (prefilled from the title) only on the add page: read-only after.
        return {} if obj is not None and obj.pk is not None else super(
            ).get_prepopulated_fields(request, obj)

    @staticmethod
    def _may_share(request, obj) -> bool:
        try:
            project_share_check(project=obj, user=request.user)
        except ProjectShareError:
            return False
        return True

    def save_related(self, request, form, formsets, change):
        # Read-only above; checked again here so no other form can slip a sharing change past.
        if change and "shared_with" in form.changed_data and not self._may_share(request,
                                                                                form.instance):
            raise PermissionDenied("only the project's owner may change who it is shared with")
        super().save_related(request, form, formsets, change)

    def _export(self, request, queryset, fmt: str, *, include_qualification: bool = False):
        projects = list(queryset.order_by("slug"))
        if not projects:
            self.message_user(request, "No project selected.", messages.WARNING)
            return None
        from annotation.services.exports import export_note

        # What each file holds and leaves out (the export command's note), shown on the next
        # page: the file itself is the rows.
        for project in projects:
            self.message_user(request, f"Exported {project.slug}: " + export_note(
                project=project, include_qualification=include_qualification))
        return export_response(projects, fmt, include_qualification=include_qualification)

    @admin.action(description="Export judgments of selected projects (JSON Lines)")
    def export_jsonl(self, request, queryset):
        return self._export(request, queryset, "jsonl")

    @admin.action(description="Export judgments of selected projects (CSV)")
    def export_csv(self, request, queryset):
        return self._export(request, queryset, "csv")

    # The judgments that count, plus the practice and qualification answers (`stage_kind` says
    # which is which; the file name says they are in).
    @admin.action(description="Export judgments incl. practice and qualification (JSON Lines)")
    def export_jsonl_with_qualification(self, request, queryset):
        return self._export(request, queryset, "jsonl", include_qualification=True)

    @admin.action(description="Export judgments incl. practice and qualification (CSV)")
    def export_csv_with_qualification(self, request, queryset):
        return self._export(request, queryset, "csv", include_qualification=True)

    def get_actions(self, request):
        actions = super().get_actions(request)
        # Only the owner may delete a project; the bulk action cannot tell owners apart.
        if not request.user.is_superuser:
            actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request, obj=None):
        if obj is not None and project_delete_refusal(obj):
            return False  # its published stages would go with it
        if request.user.is_superuser:
            return True
        return self._is_staff(request) and (obj is None or obj.owner_id == request.user.pk)

    def delete_queryset(self, request, queryset):
        """The bulk delete (superusers): projects with published stages are kept, named."""
        refused = [why for why in map(project_delete_refusal, queryset) if why]
        for why in refused:
            self.message_user(request, f"Not deleted: {why}", messages.ERROR)
        keep = [project.pk for project in queryset if project_delete_refusal(project)]
        super().delete_queryset(request, queryset.exclude(pk__in=keep))

    def save_model(self, request, obj, form, change):
        if not change and obj.owner_id is None:
            obj.owner = request.user
        super().save_model(request, obj, form, change)

    @admin.display(description="Project", ordering="title")
    def title_and_slug(self, obj):
        return format_html("{}<br><small>{} · {}</small>", obj.title, obj.slug,
                           obj.get_kind_display())

    @admin.display(description="Created", ordering="created_at")
    def created_on(self, obj):
        return obj.created_at.date().isoformat() if obj.created_at else "–"

    @admin.display(description="Reports")
    def dashboard_link(self, obj):
        from django.urls import reverse

        return format_html('<a href="{}">cockpit</a><br><a href="{}">dashboard</a>',
                           reverse("metrics:project-cockpit", args=[obj.slug]),
                           reverse("metrics:project-dashboard", args=[obj.slug]))

    @admin.display(description="Progress per stage")
    def progress_table(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        total = project_progress(projects=[obj])[obj.pk]
        rows = [("All collection stages (imported apart)", "", total.items, progress_cell(total),
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
            "<th>Counted / wanted</th><th>Assignments</th></tr></thead><tbody>{}</tbody>"
            "</table>",
            body,
        )


class ItemAdminForm(forms.ModelForm):
    class Meta:
        model = Item
        fields = (
            "project", "external_id", "dataset", "source", "split", "domain", "text_level",
            "group_key", "design_unit", "content", "gold", "is_gold_check", "is_practice",
            "excluded", "exclusion_reason", "metadata",
        )

    def clean(self):
        cleaned = super().clean()
        cleaned.update(item_columns_trimmed(cleaned))  # the rule of every item door
        if not cleaned.get("design_unit"):  # as the importers and the items API derive it
            cleaned["design_unit"] = design_unit_for(
                external_id=cleaned.get("external_id") or "", metadata=cleaned.get("metadata"))
        project = cleaned.get("project") or getattr(self.instance, "project", None)
        if project is None:
            return cleaned
        cleaned["group_key"] = group_key_for(kind=project.kind, content=cleaned.get("content"),
                                             group_key=cleaned.get("group_key") or "")
        cleaned["split"] = normalize_split(cleaned.get("split") or "")
        if "content" in cleaned:  # each answer's system in its one spelling, as the API stores it
            cleaned["content"] = item_content_to_store(
                kind=project.kind, content=cleaned["content"],
                stored=self.instance.content if self.instance.pk else None)
        for name, check in (("content", validate_item_content), ("gold", validate_gold)):
            if name in cleaned:
                try:
                    check(project.kind, cleaned[name])
                except ItemContentError as error:
                    self.add_error(name, str(error))
        try:
            validate_item_text({name: value for name, value in cleaned.items()
                                if name not in self.errors})
        except ItemContentError as error:
            self.add_error(error.field.split(".", 1)[0].split("[", 1)[0], str(error))
        for name, why in item_edit_errors(item=self.instance, changes=cleaned).items():
            if name not in self.errors:
                self.add_error(name, why)
        if not self.errors:  # MOCHA's send filter, as every door that writes an item applies it
            cleaned["excluded"], cleaned["exclusion_reason"] = item_exclusion(
                item=self.instance, kind=project.kind, content=cleaned.get("content"),
                dataset=cleaned.get("dataset"), excluded=bool(cleaned.get("excluded")),
                exclusion_reason=cleaned.get("exclusion_reason") or "",
                gold_check=bool(cleaned.get("is_gold_check", self.instance.is_gold_check)))
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
    search_fields = ("external_id", "dataset", "source", "group_key", "design_unit")
    autocomplete_fields = ("project",)
    readonly_fields = ("created_at",)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_judgments=count_of(Judgment, "item"))

    # Every judgment gathered, rejected and blocked work included: what counts is the
    # dashboard's and progress's number (the counting rule), so this column says so.
    @admin.display(description="Judgments collected", ordering="n_judgments")
    def n_judgments(self, obj):
        return obj.n_judgments

    def get_deleted_objects(self, objs, request):
        """The delete page and the bulk "delete selected" action refuse, naming why, an item
        with judgments or served by a collecting stage (`item_delete_error`)."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        if all(isinstance(obj, Item) for obj in objs):
            refused = [why for why in (item_delete_error(item=obj) for obj in objs) if why]
            if refused:  # shown instead of "no permission to delete judgments": refused anyway
                perms_needed, protected = set(), [*refused, *protected]
        return deleted, counts, perms_needed, protected


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
        # No `status`: it changes only through Publish / Close / Extend (the stage actions),
        # which run every check and log who and why; a new stage is a draft.
        fields = (
            "project", "kind", "name", "order", "provider",
            "judgments_per_item", "requires_stage", "agreement_threshold", "reward_per_hit",
            "settings",
        )

    def clean(self):
        cleaned = super().clean()
        project = cleaned.get("project") or getattr(self.instance, "project", None)
        if project is None:
            return cleaned
        stage_form_lock(self)  # before anything below reads the stage's status
        why = stage_requirement_error(project=project, required=cleaned.get("requires_stage"),
                                      stage_pk=self.instance.pk,
                                      provider=cleaned.get("provider") or self.instance.provider)
        if why:
            self.add_error("requires_stage", why)
        for name, why in stage_identity_errors(
                project=project, name=cleaned.get("name"),
                kind=cleaned.get("kind") or self.instance.kind, stage_pk=self.instance.pk).items():
            self.add_error(name if name in self.fields else None, why)
        if self.instance.pk is None:  # the API's rule for a stage made by hand
            for name, why in stage_by_hand_errors(kind=cleaned.get("kind"),
                                                  provider=cleaned.get("provider")).items():
                self.add_error(name, why)
        self.check_item_filter(cleaned, project)
        self.clean_stage_settings(cleaned)
        if not self.errors:
            stage_edit_errors_on_form(self, cleaned)
        return cleaned

    def check_item_filter(self, cleaned: dict, project: Project) -> None:
        """A filter that matches nothing is refused here, naming it, and nothing is saved:
        saved, the stage would list no items and take its items by kind when published —
        releasing (and using up) items nobody chose."""
        choice = cleaned.get("item_choice") or "keep"
        given = {field: cleaned.get(f"item_{field}") or "" for field in ITEM_FILTER_FIELDS}
        # A filter or count typed under a choice that does not read it was dropped without a
        # word: the stage saved "successfully" and released every item instead of the 5 asked.
        unread = [f"…{field}" for field, value in given.items() if value and choice != "filter"]
        if cleaned.get("item_count") and choice == "keep":
            unread.append("…how many")
        if unread:
            them = "them" if len(unread) > 1 else "it"
            label = dict(self.fields["item_choice"].choices)[choice]
            self.add_error("item_choice", f"{', '.join(unread)} given, but “{label}” does not "
                           f"read {them}: choose “Choose by the filter below” to use {them}, "
                           f"or clear {them}")
            return
        refusal = stage_items_fixed_refusal(self.instance)
        if choice != "keep" and refusal:
            self.add_error("item_choice", refusal)
            return
        if choice != "filter":
            return
        if not any(given.values()) and not cleaned.get("item_count"):
            self.add_error("item_choice", "give a dataset, split, source or number of items")
            return
        for field, messages_ in stage_item_filter_errors(project_id=project.pk,
                                                         **given).items():
            self.add_error(f"item_{field}", messages_)


@admin.register(Stage)
class StageAdmin(ProgressColumnsMixin, StageProviderMixin, ProjectScopedAdmin):
    form = StageAdminForm
    action_form = ProviderActionForm

    @property
    def actions(self):
        """Its own actions, then those other apps registered (annotation/hooks.py), read when
        the admin asks, so the registering app's `ready` may run before or after this class."""
        return (*STAGE_ACTIONS, *stage_admin_actions_registered())

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
    readonly_fields = ("status", "chosen_items", "release_preview", "provider_readiness",
                       "progress_summary", "cost_estimate", "agreement_report",
                       "settings_stored", "created_at", "updated_at")

    def has_delete_permission(self, request, obj=None):
        if obj is not None and stage_delete_refusal(obj):
            return False
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request, queryset):
        """The bulk delete: published stages are kept, each named with why."""
        refused = [stage for stage in queryset if stage_delete_refusal(stage)]
        for stage in refused:
            self.message_user(request, f"Not deleted: {stage_delete_refusal(stage)}",
                              messages.ERROR)
        super().delete_queryset(request, queryset.exclude(pk__in=[s.pk for s in refused]))

    def get_readonly_fields(self, request, obj=None):
        # The API's rule (`STAGE_FIXED_FIELDS`): a stage's project, kind and provider cannot be
        # changed after it is created (its items, settings, HITs and workers were made for them).
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is not None and obj.pk is not None:
            fields += tuple(f for f in STAGE_FIXED_FIELDS if f not in fields)
        return fields

    def _kind_and_provider(self, request, obj) -> tuple[str | None, str | None]:
        """What the settings fields are built for: the saved stage's project kind and provider;
        on the add page the project and provider the link names (?project=ID&provider=...),
        when the user may see that project (another's would show its kind)."""
        if obj is not None and obj.pk:
            return obj.project.kind, obj.provider
        project_id = row_id_of(request.GET.get("project"))
        project = projects_visible_to(request.user).filter(pk=project_id).first() \
            if project_id is not None else None
        return (project.kind if project else None), (request.GET.get("provider") or None)

    def get_changeform_initial_data(self, request):
        initial = super().get_changeform_initial_data(request)
        # The add link's ?project=: anything but an id failed in the project widget's lookup.
        if "project" in initial and row_id_of(initial["project"]) is None:
            del initial["project"]
        return initial

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
                                  "item_count", "chosen_items", "release_preview")}),
            *[(f"Settings: {group}", options | ({"description": note} if note and n == 0
                                                else {}))
              for n, (group, options) in enumerate(settings_fieldsets(specs))],
            ("Advanced settings", {"classes": ("collapse",),
                                   "fields": ("settings", "settings_stored")}),
            ("Progress and cost", {"fields": ("provider_readiness", "progress_summary",
                                              "cost_estimate", "agreement_report",
                                              "created_at", "updated_at")}),
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

    def save_model(self, request, obj, form, change):
        if not change:
            obj.status = StageStatus.DRAFT  # a new stage is a draft, whatever was posted
            obj.save()
            return
        # Never write `status` (or what the publish service keeps) from the form: a publish
        # that ran while the form was open would be undone by a save of every field.
        kept = {"id", "status", "publish_problem", "publish_problem_at", "reconciled_at",
                "created_at"}
        obj.save(update_fields=[f.name for f in obj._meta.concrete_fields
                                if f.name not in kept])

    def get_urls(self):
        from django.urls import path

        return [path("<int:stage_id>/release-preview.csv",
                     self.admin_site.admin_view(self.release_preview_csv),
                     name="annotation_stage_release_preview")] + super().get_urls()

    def release_preview_csv(self, request, stage_id: int):
        """Every item publishing the stage releases (CSV), for the stages the user may see."""
        from django.http import Http404, HttpResponse

        from annotation.domain.csv_safe import SafeWriter

        stage = self.get_queryset(request).filter(pk=stage_id).first()
        if stage is None:
            raise Http404("No such stage.")
        preview = stage_release_preview(stage=stage)
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = (f'attachment; filename="stage-{stage.pk}-'
                                           'release-preview.csv"')
        writer = SafeWriter(response)  # external ids and datasets come from imported files
        writer.writerow(["item_id", "external_id", "dataset", "split", "source", "role"])
        for role, items in (("item", preview.items), ("gold", preview.gold)):
            writer.writerows([item.pk, item.external_id, item.dataset, item.split, item.source,
                              role] for item in items)
        return response

    @admin.display(description="Items it will release")
    def release_preview(self, obj):
        from django.urls import reverse

        if obj is None or obj.pk is None:
            return "– (save the stage to see exactly which items it releases)"
        if obj.status != StageStatus.DRAFT:
            return "published: see Chosen items and Progress"
        preview = stage_release_preview(stage=obj)
        obj.release_plans = preview.plans or None  # the cost estimate below reuses the plan
        if preview.error:
            return format_html('<strong class="errornote">Nothing to release: {}</strong>',
                               preview.error)
        first = ", ".join(item.external_id for item in preview.items[:10])
        more = f" … and {len(preview.items) - 10} more" if len(preview.items) > 10 else ""
        return format_html('{}<br>First: {}{} · <a href="{}">all of them (CSV)</a>',
                           preview.as_text(), first, more,
                           reverse("admin:annotation_stage_release_preview", args=[obj.pk]))

    @admin.display(description="Provider readiness")
    def provider_readiness(self, obj):
        from annotation.readiness_selectors import stage_readiness

        if obj is None or obj.pk is None:
            return "–"
        lines = []
        if obj.publish_problem:
            lines.append(f"Last publish: {obj.publish_problem}")
        if obj.status == StageStatus.DRAFT and (gate := stage_open_gate_problem(obj)) \
                and gate not in obj.publish_problem:
            lines.append(f"Publishing will be refused: {gate}")
        if obj.status == StageStatus.DRAFT or obj.publish_problem:
            try:
                readiness = stage_readiness(stage=obj)
                lines.append(f"{obj.get_provider_display()}: {readiness.as_text()} (the "
                             "provider itself is asked when you publish, or with the action "
                             "“Check provider readiness”)")
            except Exception as exc:  # shown, never a 500 on the stage page
                lines.append(f"readiness unknown: {type(exc).__name__}: {exc}")
        return format_html_join("", "<div>{}</div>", ((line,) for line in lines)) or "–"

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
        is_open = obj.status in OPEN_STAGE_STATUSES
        reoffered = (f"; {progress.reoffered_text(stage_open=is_open)}"
                     if progress.reoffered else "")
        return (
            f"{progress.items} items wanted; {progress_cell(progress)}{reoffered}; "
            f"assignments: {progress.assignments_summary() or 'none'}"
        )


@admin.register(StageTransition)
class StageTransitionAdmin(ReadOnlyAdmin):
    project_path = "stage__project"
    list_display = ("stage", "from_status", "to_status", "user", "created_at", "reason")
    list_filter = ("to_status", "from_status", "stage__kind")
    list_select_related = ("stage__project", "user")
    search_fields = ("stage__name", "stage__project__slug", "reason")


@admin.register(StageSync)
class StageSyncAdmin(ReadOnlyAdmin):
    """Each stage's provider sync lease: whether a sync is running now and in which worker,
    when the last one ended, and a failed one's error. Written by the sync alone."""

    project_path = "stage__project"
    list_display = ("stage", "status", "lease", "started_at", "heartbeat_at", "finished_at",
                    "error")
    list_filter = ("status",)
    list_select_related = ("stage__project",)
    search_fields = ("stage__name", "stage__project__slug", "error")


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
