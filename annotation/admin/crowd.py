"""Admin of the crowd side: HITs, assignments, workers, qualifications, in-house links and
judgments (read-only: append-only)."""
from __future__ import annotations

from decimal import Decimal

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.db.models import Exists, OuterRef
from django.utils.html import format_html

from annotation.access_selectors import (
    projects_visible_to,
    researchers_beside,
    worker_shared_beyond,
    workers_visible_to,
)
from annotation.domain.answers import same_justification_count
from annotation.domain.numbers import row_id_of
from annotation.models import (
    Adjudication,
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    Hit,
    HitItem,
    InhouseLink,
    Judgment,
    Provider,
    ProviderCall,
    SpotCheck,
    Worker,
    WorkerBlock,
    WorkerQualification,
    WorkerStatus,
)
from annotation.selectors import (
    judgments_that_count,
    provider_block_stands_warning,
    qualification_results_counting_annotate,
    worker_history,
)
from annotation.services.access import LINK_STAGE_OF_ANOTHER_PROJECT, link_worker_problem
from annotation.services.stage_plans import hit_item_refusal, stage_items_fixed_refusal
from annotation.services.stages import hit_delete_refusal
from annotation.services.workers import (
    worker_block,
    worker_unblock,
    workers_block,
    workers_blocked_by_others,
    workers_unblock,
)

from .actions import ASSIGNMENT_ACTIONS, LINK_ACTIONS, WORKER_ACTIONS, ProviderActionForm
from .base import ProjectScopedAdmin, ProviderBannerMixin, ReadOnlyAdmin, StageFilter, count_of


@admin.register(ProviderCall)
class ProviderCallAdmin(ReadOnlyAdmin):
    """Every outbound provider call (read-only): what was sent, its token, and its outcome —
    a PENDING row is a call whose answer never came; the next sync or retry settles it. A
    researcher sees the calls of their projects' stages and the calls on no stage they queued
    (a worker's block or unblock on the provider: `annotation/services/review/
    provider_blocks.py`, whose admin message links here)."""

    project_path = "stage__project"
    list_display = ("created_at", "provider", "operation", "status", "stage", "assignment",
                    "worker", "amount", "attempts", "error")
    list_filter = ("provider", "operation", "status")
    search_fields = ("key", "token", "assignment__external_id", "worker__external_id")
    list_select_related = ("stage__project", "assignment", "worker")

    def get_queryset(self, request):
        scoped = super().get_queryset(request)
        if request.user.is_superuser:
            return scoped
        return scoped | ProviderCall.objects.filter(stage__isnull=True,
                                                    request__queued_by=request.user.pk)


class WorkerHistoryMixin:
    """A worker's history and statistics on their admin page, counted over the projects the
    viewing researcher may see (as the list's columns are)."""

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            obj._history_viewer = request.user  # read by `provider_history` (no request there)
        return obj

    @admin.display(description="History and statistics")
    def provider_history(self, obj):
        viewer = getattr(obj, "_history_viewer", None) if obj is not None else None
        if obj is None or obj.pk is None or viewer is None:
            return "–"
        history = worker_history(worker=obj, user=viewer)
        quals = ", ".join(
            f"{q.stage.name}: {'passed' if q.passed else 'failed'} ({q.score:.0%})"
            + ("" if q.counts else "; work rejected: does not qualify")
            for q in history.qualifications)
        statuses = ", ".join(f"{AssignmentStatus(k).label}: {v}" for k, v in
                             sorted(history.assignments_by_status.items())) or "none"
        ms = history.mean_time_ms
        seconds = f"{ms / 1000:.1f} s" if ms else "–"
        # Collected and counted, as the list's column ("Judgments collected") and the
        # dashboard's workers table (the judgments that count) name them.
        return format_html(
            "Assignments — {}<br>Judgments collected: {}, of which {} count (the dashboard's "
            "number; rejected, returned or flagged work, practice and qualification answers "
            "and a blocked worker's work do not) (mean time per item {})<br>Bonuses paid: ${}"
            "<br>Qualifications: {}",
            statuses, history.judgments, history.judgments_counted, seconds,
            history.bonus_paid or Decimal("0.00"), quals or "none",
        )


class HitItemForm(forms.ModelForm):
    """One item row of a HIT: an item of the HIT's project (`hit_item_refusal`)."""

    class Meta:
        model = HitItem
        fields = ("item", "position")

    def clean(self):
        cleaned = super().clean()
        hit = self.instance.hit if self.instance.hit_id is not None else None
        why = hit_item_refusal(hit=hit, item=cleaned.get("item"))
        if why:
            self.add_error("item", why)
        return cleaned


class HitItemInline(admin.TabularInline):
    """A HIT's items: fixed once its stage is published (`stage_items_fixed_refusal`), as
    the stage's are; the page served its workers these. Only the HIT's project's items."""

    model = HitItem
    form = HitItemForm
    extra = 0
    autocomplete_fields = ("item",)

    def _fixed(self, obj) -> bool:
        return obj is not None and bool(stage_items_fixed_refusal(obj.stage))

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return (*fields, "item", "position") if self._fixed(obj) else fields

    def has_add_permission(self, request, obj=None):
        return not self._fixed(obj) and super().has_add_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not self._fixed(obj) and super().has_delete_permission(request, obj)


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

    def has_add_permission(self, request):
        # Publishing (or a draft's stored plan) builds HITs from the stage's items; the fields
        # a HIT needs are read-only above, so an add page could only fail (a 500 on save).
        return False

    def has_delete_permission(self, request, obj=None):
        if obj is not None and hit_delete_refusal(obj):
            return False
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request, queryset):
        """The bulk delete: a published stage's HITs are kept, each named with why."""
        refused = [hit for hit in queryset.select_related("stage") if hit_delete_refusal(hit)]
        for hit in refused:
            self.message_user(request, f"Not deleted: {hit_delete_refusal(hit)}",
                              messages.ERROR)
        super().delete_queryset(request, queryset.exclude(pk__in=[h.pk for h in refused]))

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
        "submitted_at", "provider_confirmed", "verification", "bonus_paid",
    )
    list_filter = (
        "status", StageFilter, "stage__kind", "stage__provider", "verification",
        ("provider_confirmed_at", admin.EmptyFieldListFilter),
    )
    list_select_related = ("worker", "stage__project")
    search_fields = ("external_id", "worker__external_id", "worker__display_name")
    # Money and provider state change only through the actions, which call the provider:
    # an edited "Approved" or bonus would say "changed successfully" while MTurk still shows
    # Submitted and no bonus, and no sync would repair it. Only the researcher's note is typed.
    readonly_fields = ("stage", "hit", "worker", "external_id", "status", "draft", "bonus_paid",
                       "completion_code", "started_at", "last_seen_at", "submitted_at",
                       "reviewed_at", "provider_confirmed_at", "verification")
    inlines = (AssignmentItemInline,)

    def has_add_permission(self, request, obj=None):
        return False  # assignments start when a worker opens a task page

    def has_delete_permission(self, request, obj=None):
        # The record of who held which items, what the provider confirmed and what was paid:
        # deleting one without judgments (a page in progress, a returned HIT) lost its draft,
        # its provider state and the paragraphs it showed (which the STARC design reads).
        # Work is released or rejected with the actions.
        return False

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

    def get_urls(self):
        from django.urls import path

        decide = path("<path:object_id>/decide/", self.admin_site.admin_view(self.decide_view),
                      name="annotation_assignment_decide")
        return [decide, *super().get_urls()]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        from annotation.review_selectors import assignment_review

        # The URL's id as text: anything but an id is left to the admin's "does not exist".
        pk = row_id_of(object_id)
        assignment = self.get_queryset(request).filter(pk=pk).first() if pk is not None else None
        extra_context = dict(extra_context or {})
        if assignment is not None:
            rows = assignment_review(assignment=assignment)
            extra_context["review_rows"] = rows
            extra_context["review_summary"] = _review_summary(rows)
        return super().change_view(request, object_id, form_url, extra_context)

    def decide_view(self, request, object_id):
        """Approve, reject, reverse a rejection, pay a bonus or block the worker from the
        assignment's own page, through the same actions as the list (the same services, the
        same messages)."""
        from django.core.exceptions import PermissionDenied
        from django.http import Http404
        from django.shortcuts import redirect

        from .actions import (
            approve_assignments,
            block_on_provider,
            bonus_assignments,
            reject_assignments,
            reverse_rejections,
        )

        pk = row_id_of(object_id)
        if pk is None:
            raise Http404("No such assignment.")
        queryset = self.get_queryset(request).filter(pk=pk)
        assignment = queryset.first()
        if assignment is None:
            raise Http404("No such assignment.")
        if request.method != "POST" or not self.has_change_permission(request, assignment):
            raise PermissionDenied
        decision = request.POST.get("decision", "")
        if decision == "block":
            block_on_provider(self, request, Worker.objects.filter(pk=assignment.worker_id))
        elif decision in ("approve", "reject", "reverse", "bonus"):
            {"approve": approve_assignments, "reject": reject_assignments,
             "reverse": reverse_rejections,
             "bonus": bonus_assignments}[decision](self, request, queryset)
        else:
            self.message_user(request, f"Unknown decision {decision!r}.", messages.ERROR)
        return redirect("admin:annotation_assignment_change", assignment.pk)

    @admin.display(description="Items", ordering="n_items")
    def n_items(self, obj):
        return obj.n_items

    @admin.display(description="Judgments", ordering="n_judgments")
    def n_judgments(self, obj):
        return obj.n_judgments


def _review_summary(rows) -> str:
    answered = [r for r in rows if r.answer]
    gold = [r for r in answered if r.matches_gold is not None and not r.is_practice]
    practice = [r for r in answered if r.matches_gold is not None and r.is_practice]
    compared = [r for r in answered if r.agrees_with_others is not None]
    parts = [f"{len(answered)} of {len(rows)} items answered"]
    if gold:  # the dashboard's gold accuracy counts the same items the same way
        parts.append(f"{sum(r.matches_gold for r in gold)} of {len(gold)} gold items right")
    if practice:
        parts.append(f"{sum(r.matches_gold for r in practice)} of {len(practice)} practice "
                     f"items right")
    if compared:
        parts.append(f"agrees with the others' most given answer on "
                     f"{sum(r.agrees_with_others for r in compared)} of {len(compared)}")
    # The review rule's comparison (`max_same_justification_share` reads the same count).
    same = same_justification_count(r.justification for r in answered)
    if same:
        parts.append(f"the same justification on {same} of {len(answered)} items")
    return "; ".join(parts) + "."


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


# Fields of a worker that reach every project: only a superuser types them.
WORKER_GLOBAL_FIELDS = ("status", "blocked_reason")
WORKER_IDENTITY_FIELDS = ("provider", "external_id")
# Who the worker is called and how to reach them: one researcher's to type while the worker
# works only in that researcher's projects; shared with another study, a superuser's.
WORKER_CONTACT_FIELDS = ("display_name", "email")


class WorkerAdminForm(forms.ModelForm):
    """A worker's form: a researcher adds only their own in-house annotators by hand (a crowd
    worker comes from their provider when they take a task: one added here had no researcher,
    so the list that added it never showed it again, and an id another study's worker holds
    was a 500 where a new one was saved, which told the researcher that worker exists); the
    id is checked as the database will (`worker_identity_refusal`). `viewer` is set by
    `WorkerAdmin.get_form`."""

    viewer = None

    class Meta:
        model = Worker
        fields = ("provider", "external_id", "display_name", "email", "status", "blocked_reason")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        provider = self.fields.get("provider")
        if provider is not None and self.instance.pk is None and not getattr(
                self.viewer, "is_superuser", False):
            provider.choices = [(Provider.INHOUSE, Provider.INHOUSE.label)]
            provider.initial = Provider.INHOUSE

    def clean(self):
        from annotation.services.workers import (
            worker_added_by_hand_researcher,
            worker_identity_refusal,
        )

        cleaned = super().clean()
        provider = cleaned.get("provider", self.instance.provider)
        external_id = cleaned.get("external_id", self.instance.external_id)
        if provider and external_id:
            researcher = (self.instance.researcher if self.instance.pk is not None else
                          worker_added_by_hand_researcher(provider=provider, user=self.viewer))
            why = worker_identity_refusal(provider=provider, external_id=external_id,
                                          researcher=researcher, exclude_pk=self.instance.pk)
            if why:
                self.add_error("external_id" if "external_id" in self.fields else None, why)
        return cleaned


@admin.register(Worker)
class WorkerAdmin(WorkerHistoryMixin, ProjectScopedAdmin):
    form = WorkerAdminForm
    list_display = (
        "__str__", "provider", "external_id", "status", "n_assignments", "n_judgments",
        "created_at",
    )
    list_filter = ("provider", "status")
    search_fields = ("external_id", "display_name", "email")
    # Whose in-house annotator a worker is follows from the invitation, never from a form.
    readonly_fields = ("researcher", "created_at", "provider_history")
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

    def history_view(self, request, object_id, extra_context=None):
        """The worker's history as Django writes it, but only the entries of the researchers
        whose doings on this worker the viewer may read (`researchers_beside`): a worker is
        shared by studies, and the page listed another study's researcher by name with what
        they changed."""
        from django.contrib.admin.models import LogEntry
        from django.contrib.admin.views.main import PAGE_VAR

        response = super().history_view(request, object_id, extra_context)
        context = getattr(response, "context_data", None)
        if request.user.is_superuser or not context or "action_list" not in context:
            return response
        entries = (LogEntry.objects.filter(
            content_type__app_label=self.opts.app_label,
            content_type__model=self.opts.model_name, object_id=str(context["object"].pk),
            user__in=researchers_beside(request.user).values("pk"))
            .select_related().order_by("action_time"))
        paginator = self.get_paginator(request, entries, 100)
        page = paginator.get_page(request.GET.get(PAGE_VAR, 1))
        context.update(action_list=page, pagination_required=paginator.count > 100,
                       page_range=paginator.get_elided_page_range(page.number))
        return response

    def get_readonly_fields(self, request, obj=None):
        """A worker is shared by every project they worked in: a researcher's form never sets
        the global block (`status`, `blocked_reason`: a superuser's, see `WorkerBlock`; a
        researcher blocks for their own projects with the Block action) nor renames who the
        worker is on their provider (`provider`, `external_id`, once the worker exists), and
        changes their name or email (`WORKER_CONTACT_FIELDS`) only while no project the
        researcher cannot see has them: otherwise one study would rename another's worker."""
        fields = tuple(super().get_readonly_fields(request, obj))
        if request.user.is_superuser:
            return fields
        fields += tuple(f for f in WORKER_GLOBAL_FIELDS if f not in fields)
        if obj is not None:
            fields += tuple(f for f in WORKER_IDENTITY_FIELDS if f not in fields)
            if worker_shared_beyond(request.user, obj):
                fields += tuple(f for f in WORKER_CONTACT_FIELDS if f not in fields)
        return fields

    @admin.display(description="Assignments", ordering="n_assignments")
    def n_assignments(self, obj):
        return obj.n_assignments

    # Every judgment gathered, rejected and blocked work included: what counts is the
    # dashboard's and progress's number (the counting rule), so this column says so.
    @admin.display(description="Judgments collected", ordering="n_judgments")
    def n_judgments(self, obj):
        return obj.n_judgments

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.viewer = request.user  # a class made for this request (modelform_factory)
        return form

    def save_model(self, request, obj, form, change):
        """A superuser's change of `status` on the form is a global block or unblock through
        `worker_block` / `worker_unblock`, as the actions are (what counts is refreshed there),
        not a bare write of the column; an unblock says, as every door lifting a block here
        only does, when the provider still blocks the worker (`provider_block_stands_warning`)."""
        from annotation.services.workers import worker_added_by_hand_researcher

        if not change:  # a researcher's "Ann" is theirs, as an invite's is
            obj.researcher = worker_added_by_hand_researcher(provider=obj.provider,
                                                             user=request.user)
        if not (change and "status" in form.changed_data):
            return super().save_model(request, obj, form, change)
        status, reason = obj.status, obj.blocked_reason
        stored = Worker.objects.get(pk=obj.pk)
        obj.status, obj.blocked_reason = stored.status, stored.blocked_reason
        super().save_model(request, obj, form, change)
        if status == WorkerStatus.BLOCKED:
            worker_block(worker=obj, reason=reason or f"Blocked by {request.user} in the admin",
                         by=None)
        else:
            worker_unblock(worker=obj, by=None)
            # The block lifted here only: say so while the provider still blocks the worker.
            if stands := provider_block_stands_warning([obj.pk]):
                self.message_user(request, stands, messages.WARNING)
        obj.refresh_from_db()

    @admin.action(description="Block selected workers")
    def block_workers(self, request, queryset):
        reason = request.POST.get("reason", "").strip() or f"Blocked by {request.user} in the admin"
        # One bulk write whatever the selection ("select all" of a whole fleet included).
        blocked = workers_block(workers=queryset.values_list("pk", flat=True), reason=reason,
                                by=request.user)
        scope = ("in every project" if request.user.is_superuser
                 else "in your projects (owned or shared with you)")
        self.message_user(request, f"Blocked {len(blocked)} worker(s) {scope}.",
                          messages.SUCCESS)

    @admin.action(description="Unblock selected workers")
    def unblock_workers(self, request, queryset):
        """Lifts the viewer's block (a superuser's: the global one) and says what it did: how
        many blocks it lifted, how many selected workers had none to lift, and each worker
        another block still keeps out (`workers_blocked_by_others`, the rule the provider-side
        unblock refuses on). It said "Lifted your block on 5 worker(s)" of 5 selected, two of
        them never blocked by the researcher and one still blocked by a superuser."""
        asked = list(queryset.values_list("pk", flat=True))
        lifted = workers_unblock(workers=asked, by=request.user)
        mine = ("the block in every project" if request.user.is_superuser
                else "your block")
        line = f"Lifted {mine} on {len(lifted)} of {len(asked)} selected worker(s)"
        if len(lifted) < len(asked):
            line += f"; {len(asked) - len(lifted)} had no such block to lift"
        self.message_user(request, line + ".", messages.SUCCESS if lifted else messages.WARNING)
        still = workers_blocked_by_others(workers=asked, by=request.user,
                                          in_visible_projects=True)
        if still:
            names = dict(Worker.objects.filter(pk__in=still).values_list("pk", "external_id"))
            listed = "; ".join(f"{names[pk]} ({why})" for pk, why in sorted(
                still.items(), key=lambda pair: names[pair[0]])[:20])
            more = f" and {len(still) - 20} more" if len(still) > 20 else ""
            self.message_user(request, f"Still blocked by another block: {listed}{more}.",
                              messages.WARNING)
        if stands := provider_block_stands_warning(lifted):
            self.message_user(request, stands, messages.WARNING)


@admin.register(WorkerQualification)
class WorkerQualificationAdmin(ReadOnlyAdmin):
    """Who passed which qualification, as graded (`qualification_grade`): the record of graded
    work, stored once (a failing worker cannot retake) and granted on the provider from it, so
    never added, changed or deleted here (a pass ticked here let a failed worker into the
    stages it gates while MTurk kept their failing value; a deleted result, a retake). A
    rejection of the work it was graded from takes it back (`qualification_withdraw_rejected`);
    a worker is kept out with Block."""

    project_path = "stage__project"
    list_display = ("worker", "stage", "passed", "qualifies", "score", "n_items",
                    "granted_externally", "created_at")
    list_filter = ("passed", "granted_externally", "stage__kind")
    list_select_related = ("worker", "stage__project")
    search_fields = ("worker__external_id", "worker__display_name", "stage__name")
    autocomplete_fields = ("worker", "stage")

    def get_queryset(self, request):
        return qualification_results_counting_annotate(super().get_queryset(request))

    @admin.display(boolean=True, description="Qualifies")
    def qualifies(self, obj) -> bool:
        """Passed, and not graded from rejected work (`qualification_results_that_count`):
        the result the gates, the provider grant and progress read."""
        return bool(obj.passed and getattr(obj, "counts", True))


INHOUSE_LINK_IDENTITY_FIELDS = ("worker", "project", "stage")


@admin.register(InhouseLink)
class InhouseLinkAdmin(ProjectScopedAdmin):
    """Personal annotator links: download them as CSV, or revoke and re-issue a lost one."""

    list_display = ("worker", "project", "stage", "revoked", "expires_at", "created_at")
    list_filter = ("revoked", ("project", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("worker", "project", "stage__project")
    search_fields = ("worker__external_id", "worker__display_name", "project__slug")
    autocomplete_fields = ("worker", "project", "stage")
    readonly_fields = ("link", "created_at")
    exclude = ("nonce",)
    actions = LINK_ACTIONS

    def get_readonly_fields(self, request, obj=None):
        """Whom an issued link lets in, and where, never changes: re-pointing it would hand the
        URL already sent to one annotator another's work. Revoke it and issue a new one."""
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields + INHOUSE_LINK_IDENTITY_FIELDS if obj is not None else fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)

        class LinkForm(form):
            def clean(self):
                # The rule of `inhouse_link_create`, the actions' door.
                cleaned = super().clean()
                stage, project = cleaned.get("stage"), cleaned.get("project")
                if stage is not None and project is not None and stage.project_id != project.pk:
                    self.add_error("stage", LINK_STAGE_OF_ANOTHER_PROJECT)
                worker = cleaned.get("worker")
                if worker is not None and project is not None and (
                        problem := link_worker_problem(worker=worker, project=project)):
                    self.add_error("worker", problem)
                return cleaned

        return LinkForm

    def save_model(self, request, obj, form, change):
        if not change:  # a link added by hand gets its secret like one made by the action
            import secrets

            obj.nonce = secrets.token_urlsafe(24)
        super().save_model(request, obj, form, change)

    @admin.display(description="link to send")
    def link(self, obj):
        from django.conf import settings

        from annotation.services.access import inhouse_entry_path

        if obj.pk is None or obj.revoked:
            return "—"
        # A project-wide link opens the annotator's home page (all their stages).
        return f"{settings.QAJ_PUBLIC_BASE_URL.rstrip('/')}{inhouse_entry_path(link=obj)}"


class CountsFilter(admin.SimpleListFilter):
    """The judgments that count, or those that do not (`judgments_that_count`: the number the
    dashboard, progress and the exports read; their `counts` column), so the list of a stage
    can be read against its "counted / wanted"."""

    title = "counts (dashboard, progress, exports)"
    parameter_name = "counts"

    def lookups(self, request, model_admin):
        return [("yes", "counts"), ("no", "does not count")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return judgments_that_count(queryset)
        if self.value() == "no":
            return queryset.exclude(pk__in=judgments_that_count(queryset).values("pk"))
        return queryset


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyAdmin):
    """Every judgment stored, each with whether it counts (`counts`, the exports' column): the
    list of a stage showed 30 rows beside a dashboard and a progress of 20 with nothing to
    tell which 10 were left out."""

    project_path = "item__project"
    list_display = (
        "id", "item", "worker", "stage", "score", "choice", "counts", "difficult",
        "server_time_ms", "time_spent_ms", "created_at",
    )
    list_filter = (
        ("item__project", admin.RelatedOnlyFieldListFilter),
        StageFilter, CountsFilter, "stage__kind", "stage__status",
        "worker__provider", "item__dataset", "item__split", "item__source", "difficult",
    )
    list_select_related = ("item__project", "worker", "stage__project")
    search_fields = ("item__external_id", "worker__external_id", "justification")
    readonly_fields = [f.name for f in Judgment._meta.fields]
    show_full_result_count = False

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(counts=Exists(judgments_that_count(
            Judgment.objects.filter(pk=OuterRef("pk")))))

    @admin.display(boolean=True, description="Counts")
    def counts(self, obj) -> bool:
        """Whether the study counts it (`judgments_that_count`), as the exports' `counts`."""
        return bool(getattr(obj, "counts", False))


@admin.register(Adjudication)
class AdjudicationAdmin(ReadOnlyAdmin):
    """Decisions recorded on the adjudication page (/metrics/<slug>/adjudicate/); append-only,
    so read-only here: a new decision is recorded on that page."""

    project_path = "item__project"
    list_display = ("id", "item", "label", "note", "decided_by", "created_at")
    list_filter = (("item__project", admin.RelatedOnlyFieldListFilter),)
    list_select_related = ("item__project", "decided_by")
    search_fields = ("item__external_id", "note")
    readonly_fields = [f.name for f in Adjudication._meta.fields]


@admin.register(SpotCheck)
class SpotCheckAdmin(ReadOnlyAdmin):
    """Spot checks recorded on the spot-check page (/metrics/<slug>/spot-check/): one per
    judgment, append-only, so read-only here; "Export selected spot checks as CSV" downloads
    them (cells a spreadsheet would run as formulas escaped)."""

    project_path = "judgment__item__project"
    list_display = ("id", "judgment", "worker", "verdict", "note", "checked_by", "created_at")
    list_filter = ("verdict", ("judgment__item__project", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("judgment__item__project", "judgment__worker", "checked_by")
    search_fields = ("judgment__item__external_id", "judgment__worker__external_id", "note")
    readonly_fields = [f.name for f in SpotCheck._meta.fields]
    actions = ("export_csv",)

    @admin.display(description="worker", ordering="judgment__worker__external_id")
    def worker(self, obj):
        return obj.judgment.worker.external_id

    @admin.action(description="Export selected spot checks as CSV")
    def export_csv(self, request, queryset):
        from django.http import HttpResponse

        from annotation.services.exports import spot_checks_write

        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="spot-checks.csv"'
        # The rows of `export_data --spot-checks --format csv`: one writer for both.
        spot_checks_write(checks=queryset, out=response, fmt="csv")
        return response
