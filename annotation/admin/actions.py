"""Admin actions for crowd providers: cost, publish, sync, close (stages); approve, reject,
reverse a rejection, bonus (assignments); block, unblock, notify through the provider (workers); and the loud banner
when MTurk production is on. Each action calls one service; wired in `annotation/admin.py`.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.helpers import ActionForm
from django.template.response import TemplateResponse
from django.urls import reverse

from annotation.admin.worker_message import message_compose_response, message_confirmed
from annotation.models import (
    AssignmentStatus,
    ParticipantVerification,
    Provider,
    StageStatus,
)


class ProviderActionForm(ActionForm):
    reason = forms.CharField(
        required=False, label="Reason / message",
        widget=forms.TextInput(attrs={"size": 40}),
        help_text="Rejection reason, bonus reason, block reason, or agreement-guard override.",
    )
    amount = forms.CharField(required=False, label="Bonus $",
                             widget=forms.TextInput(attrs={"size": 6}))


def _reason(request) -> str:
    return request.POST.get("reason", "").strip()


def _outcome(verb: str, done: int, already: int, already_text: str) -> list[str]:
    """"Approved 3 assignment(s); 4 already approved." — what was done and what was found
    already done, so a repeated action never claims work it did not do."""
    parts = [f"{verb} {done} assignment(s)"] if done else [f"{verb} no assignment"]
    if already:
        parts.append(f"{already} {already_text}")
    return ["; ".join(parts) + "."]


def _report(modeladmin, request, done: list[str], failed: list[str]) -> None:
    # With failures the summary is not a success (a refused bonus read, with a green tick,
    # "Paid a $-1 bonus on no assignment.").
    level = messages.WARNING if failed else messages.SUCCESS
    for line in done:
        modeladmin.message_user(request, line, level)
    for line in failed:
        modeladmin.message_user(request, line, messages.ERROR)


# --- stages ------------------------------------------------------------------------------------


@admin.action(description="Estimate cost (and provider balance)")
def estimate_cost(modeladmin, request, queryset):
    from annotation.cost_selectors import stage_cost_estimate

    done, failed = [], []
    for stage in queryset:
        try:
            estimate = stage_cost_estimate(stage=stage, with_balance=True)
        except Exception as exc:
            failed.append(f"{stage}: {exc}")
            continue
        cap = stage.project.budget_cap
        done.append(f"{stage}: {estimate.as_text()}"
                    + (f" (project budget cap ${cap})" if cap is not None else ""))
        _warn_balance_unknown(modeladmin, request, stage, estimate)
    _report(modeladmin, request, done, failed)


def _warn_balance_unknown(modeladmin, request, stage, estimate) -> None:
    if estimate.balance is None and estimate.balance_error:
        modeladmin.message_user(
            request, f"{stage}: {stage.get_provider_display()} balance unknown: "
                     f"{estimate.balance_error} — the balance was NOT checked; make sure the "
                     f"account can pay ${estimate.total}.", messages.WARNING)


PUBLISH_CONFIRM_FIELD = "publish_confirmed"
CONFIRMED_TOTAL_PREFIX = "confirmed_total_"


def _publish_confirm_page(modeladmin, request, queryset, *, verb: str):
    """The page a publish opens first when a selected stage spends real money (MTurk
    production, Prolific's own API; `publish_needs_confirmation`), as Django's delete action
    asks before deleting: where, how much work and the total with fees, per stage, after the
    checks publishing makes (`stage_publish_confirmation`). Nothing is published or queued
    until it is confirmed. Returns (the page or None, the selected stages publishing refused
    with their messages): None when nothing needs confirming (sandbox, rehearsal, in-house:
    one click) or this is the confirmation."""
    from annotation.cost_selectors import publish_needs_confirmation
    from annotation.services.stages import stage_publish_confirmation

    if request.POST.get(PUBLISH_CONFIRM_FIELD) == "yes":
        return None, {}
    costs, others, refused = [], [], {}
    for stage in queryset:
        if not publish_needs_confirmation(stage=stage):
            others.append(stage)
            continue
        try:
            estimate = stage_publish_confirmation(stage=stage,
                                                  override_reason=_reason(request) or None)
        except Exception as exc:
            refused[stage.pk] = (stage, exc)
            continue
        costs.append((stage, estimate))
    if not costs:
        return None, refused
    for line in _refusals(refused, "not published"):
        modeladmin.message_user(request, line, messages.ERROR)
    return TemplateResponse(request, "admin/annotation/stage/publish_confirm.html", {
        **modeladmin.admin_site.each_context(request),
        "title": f"{verb.capitalize()} with real money?", "opts": modeladmin.model._meta,
        "costs": costs, "others": [str(stage) for stage in others], "verb": verb,
        "grand_total": sum((estimate.total for _stage, estimate in costs), Decimal("0")),
        "action": request.POST.get("action", ""), "reason": _reason(request),
        "selected": [stage.pk for stage, _estimate in costs] + [stage.pk for stage in others],
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "confirm_field": PUBLISH_CONFIRM_FIELD,
        "total_field_prefix": CONFIRMED_TOTAL_PREFIX}), refused


def _refusals(refused: dict, what: str) -> list[str]:
    return [f"{stage}: {what} — {exc}" for stage, exc in refused.values()]


def _confirmed_total(request, stage) -> Decimal | None:
    """The total the researcher confirmed for this stage on the confirmation page, or None."""
    typed = request.POST.get(f"{CONFIRMED_TOTAL_PREFIX}{stage.pk}", "")
    try:
        return Decimal(typed) if typed else None
    except InvalidOperation:
        return None


@admin.action(description="Publish (guards: agreement, budget, balance; reason overrides "
                          "the agreement guard; real money is confirmed first)")
def publish_stages(modeladmin, request, queryset):
    from annotation.selectors import stage_awaits_qualified_workers
    from annotation.services.stages import stage_publish

    page, refused = _publish_confirm_page(modeladmin, request, queryset, verb="publish")
    if page is not None:
        return page
    done, failed = [], _refusals(refused, "not published")
    for stage in queryset.exclude(pk__in=refused):
        try:
            result = stage_publish(stage=stage, user=request.user,
                                   override_reason=_reason(request) or None,
                                   confirmed_total=_confirmed_total(request, stage))
        except Exception as exc:
            failed.append(f"{stage}: not published — {exc}")
            continue
        # HITs published earlier are not visited again, so count them from the plan.
        already = max(result.report.already_created,
                      result.n_hits - result.report.created - result.report.failed)
        _warn_balance_unknown(modeladmin, request, stage, result.estimate)
        if result.report.failed:
            failed.append(f"{stage}: NOT live — {result.stage.publish_problem} "
                          f"({result.report.created} created now, {already} already there)")
            continue
        # In-house work has no platform: no fees and no HIT rewards paid through one; what it
        # costs is the project's reward, as the cockpit's estimate says.
        cost = (f"served through the annotators' links ({result.estimate.n_judgments} "
                f"judgments); estimated ${result.estimate.total} at the project's reward, no "
                "platform fees" if stage.provider == Provider.INHOUSE
                else result.estimate.as_text())
        waiting = stage_awaits_qualified_workers(result.stage)
        done.append(f"{stage}: {result.stage.get_status_display()}; {result.report.created} "
                    f"HITs created, {already} already there; {cost}"
                    + (f"; {waiting}" if waiting else ""))
    _report(modeladmin, request, done, failed)


@admin.action(description="Check provider readiness (credentials, endpoint, settings; asks "
                          "the provider once, creates nothing)")
def check_readiness(modeladmin, request, queryset):
    from annotation.providers import get_provider
    from annotation.readiness_selectors import stage_readiness

    done, failed = [], []
    for stage in queryset:
        readiness = stage_readiness(stage=stage, probe=True)
        balance = f"; balance ${readiness.balance}" if readiness.balance is not None else ""
        where = get_provider(stage.provider).environment()
        line = (f"{stage}: {stage.get_provider_display()} {readiness.as_text()}{balance}"
                + (f" (publishing goes to {where})" if where else ""))
        (done if readiness.ready else failed).append(line)
    _report(modeladmin, request, done, failed)


@admin.action(description="Publish in the background (Celery; real money is confirmed first)")
def publish_stages_background(modeladmin, request, queryset):
    from annotation.providers import get_provider
    from annotation.services.stages import stage_publish_enqueue
    from annotation.stage_errors import GuardFailed, PublishNeedsConfirmation
    from core.background import BrokerUnreachable

    page, refused = _publish_confirm_page(modeladmin, request, queryset,
                                          verb="publish in the background")
    if page is not None:
        return page
    queued, failed = [], _refusals(refused, "not queued")
    for stage in queryset.exclude(pk__in=refused):
        try:
            stage_publish_enqueue(stage=stage, by=request.user, reason=_reason(request) or None,
                                  confirmed_total=_confirmed_total(request, stage))
        except PublishNeedsConfirmation as exc:
            failed.append(f"{stage}: not queued — {exc}; run the action again to confirm")
            continue
        except GuardFailed as exc:
            failed.append(f"{stage}: not queued — {exc}")
            continue
        except BrokerUnreachable as exc:
            failed.append(
                f"{stage}: not queued — the task broker is unreachable ({exc}). Nothing was "
                f"published; use \"Publish\" to publish now, or try again once the Celery "
                f"broker is back.")
            continue
        where = get_provider(stage.provider).environment()
        queued.append(f"{stage} (on {where})" if where else str(stage))
    done = [f"Queued {len(queued)} stage(s) for publishing: {', '.join(queued)}."] if queued \
        else []
    _report(modeladmin, request, done, failed)


@admin.action(description="Sync with provider and review now")
def sync_stages(modeladmin, request, queryset):
    from annotation.providers import get_provider
    from annotation.services.review import SyncAlreadyRunning, stage_sync_and_review

    done, failed = [], []
    for stage in queryset:
        try:
            sync, review = stage_sync_and_review(stage=stage)
        except SyncAlreadyRunning as busy:
            done.append(f"{stage}: not synced now, {busy}; its result shows on the next one.")
            continue
        except Exception as exc:
            failed.append(f"{stage}: sync failed — {exc}")
            continue
        if not get_provider(stage.provider).confirms_submissions:
            # In-house (and imports) keep no list on a platform: there is nothing to sync, and
            # "0 submissions … approved 4" read as a contradiction.
            decided = review.approved + review.rejected + review.held
            line = (f"{stage}: {stage.get_provider_display()} has no platform to sync with. "
                    f"The stage's review rules decided {decided} submitted assignment(s): "
                    f"approved {review.approved}, rejected {review.rejected}, held for you "
                    f"{review.held}")
            if review.graded:
                line += f"; qualifications graded {review.graded}"
            if review.blocked:
                line += f"; workers blocked {review.blocked}"
            line += (". Review the rest yourself from the cockpit's “to review” link "
                     "(each assignment's page shows the answers beside gold and the others).")
            if sync.reconciled:
                line += " Closed stage fully reconciled (no longer synced)."
            done.append(line)
            failed.extend(f"{stage}: {error}" for error in review.errors[:5])
            continue
        line = (
            f"{stage}: {sync.listed} submissions ({sync.flagged} flagged, {sync.mirrored} "
            f"decided on the provider); approved {review.approved}, rejected {review.rejected}, "
            f"held {review.held}, bonuses {review.bonuses}, qualifications graded now "
            f"{review.graded} (the rest were graded at submit), granted on the provider "
            f"{review.granted}, blocked {review.blocked}")
        if sync.held_paid or sync.kept_rejected:
            line += (f"; {sync.held_paid + sync.kept_rejected} paid by the provider itself (its "
                     f"auto-approval or a decision on its site) but kept out of the data here: "
                     f"{sync.held_paid} held for your decision, {sync.kept_rejected} rejected "
                     f"here before the provider approved them (see each assignment's note)")
        if sync.overruled:
            line += (f"; {sync.overruled} rejected here but approved on the provider's site "
                     f"since: approved here too and counted again — check them")
        if review.unconfirmed or review.never_listed:
            line += (f"; {review.unconfirmed} submitted here but not listed by the provider yet "
                     f"(not approved or paid), {review.never_listed} flagged as never listed")
        if sync.verified or sync.not_found:
            line += (f"; participants' sessions verified {sync.verified}, not found at the "
                     f"provider {sync.not_found} (their work never counts)")
        if sync.given_back:
            line += (f"; {sync.given_back} session(s) returned or timed out on Prolific gave "
                     f"their items back (submitted work among them flagged, not counted)")
        if sync.reoffered and stage.provider == Provider.PROLIFIC:
            line += (f"; {sync.reoffered} place(s) added to the Prolific study for approved "
                     f"work of blocked workers")
        elif sync.reoffered:
            line += (f"; {sync.reoffered} slot(s) of rejected or blocked work re-offered as new "
                     f"assignments")
        if sync.reoffer_waiting:
            line += f"; not re-offered yet: {'; '.join(sync.reoffer_waiting[:3])}"
        if sync.recruiting_problem:
            failed.append(f"{stage}: {sync.recruiting_problem} (the next sync tries again)")
        if sync.reconciled:
            line += "; closed stage fully reconciled (no longer synced)"
        elif sync.open_reason and stage.status == StageStatus.CLOSED:
            line += f"; closed, still synced: {sync.open_reason}"
        done.append(line)
        failed.extend(f"{stage}: {error}" for error in review.errors[:5])
    _report(modeladmin, request, done, failed)


@admin.action(description="Close (expire HITs / stop the study)")
def close_stages(modeladmin, request, queryset):
    from annotation.services.stages import stage_close
    from annotation.stage_errors import StageAlreadyClosed

    done, failed = [], []
    for stage in queryset:
        try:
            stage_close(stage=stage, user=request.user, reason=_reason(request))
            done.append(f"{stage}: closed")
        except StageAlreadyClosed as closed:  # a second tab or click, or a retry of the
            done.append(f"{stage}: {closed.outcome}")  # expire the first one left undone
        except Exception as exc:
            failed.append(f"{stage}: {exc}")
    _report(modeladmin, request, done, failed)


@admin.action(description="Extend by one day")
def extend_stages(modeladmin, request, queryset):
    from annotation.services.stages import stage_extend

    done, failed = [], []
    for stage in queryset:
        try:
            stage_extend(stage=stage, seconds=86400, user=request.user)
            done.append(str(stage))
        except Exception as exc:
            failed.append(f"{stage}: not extended — {exc}")
    _report(modeladmin, request,
            [f"Extended {len(done)} stage(s) by one day: {', '.join(done)}."] if done else [],
            failed)


@admin.action(description="In-house: create annotators (names, comma-separated, in the "
                          "reason field) and their personal links")
def create_inhouse_links(modeladmin, request, queryset):
    from django.conf import settings

    from annotation.services.access import inhouse_annotators_invite

    names = [name.strip() for name in _reason(request).split(",") if name.strip()]
    if not names:
        modeladmin.message_user(request, "Type the annotators' names, comma-separated.",
                                messages.ERROR)
        return
    base = settings.QAJ_PUBLIC_BASE_URL.rstrip("/")
    rows = []
    for stage in queryset.select_related("project"):
        for name, path, problem in inhouse_annotators_invite(stage=stage, names=names):
            rows.append((stage.project.slug, stage.name, name, f"{base}{path}", problem))
            if problem:  # shown on the next admin page; the file carries it too
                modeladmin.message_user(request, f"Link for {name}: {problem}.",
                                        messages.WARNING)
    # A file to keep and mail-merge from; the links stay listed (and re-issuable) under
    # In-house links.
    return links_csv_response(rows, filename="inhouse-links.csv")


def links_csv_response(rows, *, filename: str):
    """CSV download of (project, stage, annotator, link) rows; cells a spreadsheet would run as
    formulas (an annotator named "=cmd|...") are escaped (`csv_safe`)."""
    from django.http import HttpResponse

    from annotation.domain.csv_safe import SafeWriter

    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = SafeWriter(response)
    writer.writerow(["project", "stage", "annotator", "link", "warning"][:len(rows[0])]
                    if rows else ["project", "stage", "annotator", "link"])
    writer.writerows(rows)
    return response


def _link_row(link, path: str) -> tuple[str, str, str, str]:
    from django.conf import settings

    return (link.project.slug, link.stage.name if link.stage else "",
            link.worker.display_name or link.worker.external_id,
            f"{settings.QAJ_PUBLIC_BASE_URL.rstrip('/')}{path}")


@admin.action(description="Download the selected links (CSV; revoked ones left out)")
def download_links(modeladmin, request, queryset):
    from annotation.services.access import inhouse_entry_path

    links = (queryset.filter(revoked=False).select_related("worker", "project", "stage")
             .order_by("pk"))
    return links_csv_response([_link_row(link, inhouse_entry_path(link=link)) for link in links],
                              filename="inhouse-links.csv")


@admin.action(description="Revoke and re-issue the selected links (CSV of the new links)")
def reissue_links(modeladmin, request, queryset):
    from annotation.services.access import inhouse_entry_path, inhouse_link_reissue

    rows = []
    for link in (queryset.filter(revoked=False).select_related("worker", "project", "stage")
                 .order_by("pk")):
        new_link, _path = inhouse_link_reissue(link=link)
        rows.append(_link_row(new_link, inhouse_entry_path(link=new_link)))
    return links_csv_response(rows, filename="inhouse-links-reissued.csv")


@admin.action(description="Message the workers who passed the required qualification "
                          "(subject and message on the next page)")
def notify_qualified_workers(modeladmin, request, queryset):
    from annotation.services.review import stage_qualified_workers, stage_qualified_workers_notify

    stages = list(queryset.select_related("project"))
    notes = [f"{stage} requires no qualification: nobody is messaged for it."
             for stage in stages if stage.requires_stage_id is None]
    gated = [stage for stage in stages if stage.requires_stage_id is not None]
    form = message_confirmed(request)
    if form is None or not form.is_valid():
        recipients = {w.pk: w for stage in gated for w in stage_qualified_workers(stage=stage)}
        subject = (f"New work: {gated[0].project.title}"
                   if len({s.project_id for s in gated}) == 1 else "New work")
        return message_compose_response(
            modeladmin, request, queryset, form=form, recipients=list(recipients.values()),
            subject=subject, title="Message the qualified workers", notes=notes)
    for note in notes:
        modeladmin.message_user(request, note, messages.ERROR)
    for stage in gated:
        n_workers, sent = stage_qualified_workers_notify(
            stage=stage, message=form.cleaned_data["message_body"],
            subject=form.cleaned_data["message_subject"])
        modeladmin.message_user(request, f"{stage}: messaged {n_workers} qualified "
                                         f"worker(s){_already_sent(sent)}.", messages.SUCCESS)
    return None


LINK_ACTIONS = (download_links, reissue_links)
STAGE_ACTIONS = (estimate_cost, check_readiness, publish_stages, publish_stages_background, sync_stages,
                 close_stages, extend_stages, create_inhouse_links, notify_qualified_workers)


# --- assignments ---------------------------------------------------------------------------------


@admin.action(description="Approve (pays the reward)")
def approve_assignments(modeladmin, request, queryset):
    from annotation.services.review import assignment_approve

    done, already, failed = 0, 0, []
    for assignment in queryset.select_related("stage", "worker"):
        if assignment.status == AssignmentStatus.APPROVED:
            already += 1  # nothing to send
            continue
        try:
            assignment_approve(assignment=assignment, feedback=_reason(request),
                               allow_flagged=True)
            done += 1
        except Exception as exc:
            failed.append(f"{assignment}: {exc}")
    _report(modeladmin, request, _outcome("Approved", done, already, "already approved"),
            failed)


@admin.action(description="Reject (the reason is sent to the worker)")
def reject_assignments(modeladmin, request, queryset):
    from annotation.services.review import assignment_reject

    reason = _reason(request)
    if not reason:
        modeladmin.message_user(request, "Type a reason the worker can read, then reject.",
                                messages.ERROR)
        return
    done, already, failed = 0, 0, []
    for assignment in queryset.select_related("stage", "worker"):
        if assignment.status == AssignmentStatus.REJECTED:
            already += 1
            continue
        try:
            assignment_reject(assignment=assignment, reason=reason, allow_flagged=True)
            done += 1
        except Exception as exc:
            failed.append(f"{assignment}: {exc}")
    _report(modeladmin, request, _outcome("Rejected", done, already, "already rejected"),
            failed)


@admin.action(description="Reverse rejection (approve; the reason is sent to the worker)")
def reverse_rejections(modeladmin, request, queryset):
    from annotation.services.review import assignment_rejection_reverse

    reason = _reason(request)
    if not reason:
        modeladmin.message_user(request, "Type why the rejection is reversed (the worker reads "
                                "it), then reverse it.", messages.ERROR)
        return
    done, already, failed, warned = 0, 0, [], []
    for assignment in queryset.select_related("stage", "stage__project", "worker"):
        try:
            reversal = assignment_rejection_reverse(assignment=assignment, reason=reason,
                                                    by=request.user)
        except Exception as exc:  # our refusal, the provider's, or an unanswered call
            text = str(exc)
            failed.append(text if text.startswith(str(assignment)) else f"{assignment}: {text}")
            continue
        already += bool(reversal.already)
        done += not reversal.already
        warned += [f"{assignment}: {warning}." for warning in reversal.warnings]
    _report(modeladmin, request,
            _outcome("Reversed the rejection of (approved)", done, already,
                     "reversed already (nothing sent again)"), failed)
    for line in warned:
        modeladmin.message_user(request, line, messages.WARNING)


@admin.action(description="Pay a bonus (amount and reason above; paid once)")
def bonus_assignments(modeladmin, request, queryset):
    from annotation.services.review import ReviewError, assignments_bonus_pay, bonus_amount

    typed = request.POST.get("amount", "").strip()
    reason = _reason(request) or "Bonus"
    selection = list(queryset.select_related("stage", "stage__project", "worker").order_by("pk"))
    try:
        # One rule for the whole selection: the amount is checked once, and the bonuses
        # together against the budget cap, before anything is paid (`assignments_bonus_pay`).
        batch = assignments_bonus_pay(bonuses=[(a, typed) for a in selection], reason=reason)
    except ReviewError as exc:
        modeladmin.message_user(request, f"No bonus was paid: {exc}.", messages.ERROR)
        return
    if batch.over_cap:
        again = (f" The {len(batch.paid)} bonus(es) of the selection already in flight (an "
                 "earlier answer lost) were sent again." if batch.paid else "")
        lead = "No new bonus was paid" if batch.paid else "No bonus was paid"
        modeladmin.message_user(request, f"{lead}: {batch.over_cap}.{again}", messages.ERROR)
        for assignment, exc in batch.refused:
            modeladmin.message_user(request, f"{assignment}: {exc}", messages.ERROR)
        return
    _report(modeladmin, request,
            _outcome(f"Paid a ${bonus_amount(typed)} bonus on", len(batch.paid),
                     len(batch.already), "had this bonus already (not paid again)"),
            [f"{assignment}: {exc}" for assignment, exc in batch.refused])


@admin.action(description="Verify the participants' sessions with Prolific now")
def verify_sessions(modeladmin, request, queryset):
    from annotation.services.assignments import assignment_verify

    counts: dict[str, int] = {}
    pending = queryset.filter(verification=ParticipantVerification.PENDING)\
        .select_related("stage", "worker")
    for assignment in pending:
        state = assignment_verify(assignment=assignment) or "pending"
        counts[state] = counts.get(state, 0) + 1
    skipped = queryset.count() - sum(counts.values())
    line = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "nothing asked"
    _report(modeladmin, request, [f"Sessions verified with Prolific: {line}; {skipped} not "
                                  f"pending (not asked). Pending ones that Prolific could not "
                                  f"answer stay pending; the sync asks again."], [])


ASSIGNMENT_ACTIONS = (approve_assignments, reject_assignments, reverse_rejections,
                      bonus_assignments, verify_sessions)


# --- workers -------------------------------------------------------------------------------------


@admin.action(description="Block on the provider too (MTurk CreateWorkerBlock; the provider's "
                          "blocks run in the background)")
def block_on_provider(modeladmin, request, queryset):
    from annotation.services.review.provider_blocks import workers_block_on_provider_enqueue

    reason = _reason(request) or f"Blocked by {request.user}"
    queued = workers_block_on_provider_enqueue(workers=list(queryset), reason=reason,
                                               by=request.user)
    n = queryset.count()
    done = [f"Blocked {n} worker(s) here."] if n else []
    _report(modeladmin, request, done + _provider_calls_queued_lines(queued, "blocks"),
            _provider_calls_refused_lines(queued, "blocked here; block them on the provider "
                                                  "again once the broker is back"))


@admin.action(description="Unblock on the provider too (in the background; each worker is "
                          "unblocked here once the provider has)")
def unblock_on_provider(modeladmin, request, queryset):
    from annotation.services.review.provider_blocks import workers_unblock_on_provider_enqueue

    queued = workers_unblock_on_provider_enqueue(workers=list(queryset), reason=_reason(request),
                                                 by=request.user)
    _report(modeladmin, request, _provider_calls_queued_lines(queued, "unblocks"),
            queued.refused + _provider_calls_refused_lines(
                queued, "still blocked here and on the provider"))


def _provider_calls_queued_lines(queued, what: str) -> list[str]:
    """Where a queued batch of provider calls reports each worker's outcome."""
    if not queued.queued:
        return []
    where = reverse("admin:annotation_providercall_changelist") + f"?q={queued.batch}"
    follow = (" Each worker is unblocked here once the provider has unblocked them."
              if what == "unblocks" else "")
    return [f"Queued the provider's {what} of {queued.queued} worker(s) (batch {queued.batch})."
            f"{follow} Each worker's outcome is under Provider calls ({where}): succeeded, or "
            f"failed with the provider's error."]


def _provider_calls_refused_lines(queued, state: str) -> list[str]:
    if not queued.not_queued:
        return []
    return [f"The provider calls were NOT queued: {queued.not_queued}. The workers are {state}."]


@admin.action(description="Send a message through the provider (subject and message on the "
                          "next page)")
def notify_workers(modeladmin, request, queryset):
    from annotation.services.review import workers_notify

    form = message_confirmed(request)
    workers = list(queryset.order_by("provider", "external_id"))
    if form is None or not form.is_valid():
        return message_compose_response(
            modeladmin, request, queryset, form=form, recipients=workers,
            subject="Message from the researchers", title="Message the selected workers")
    sent = workers_notify(workers=workers, subject=form.cleaned_data["message_subject"],
                          message=form.cleaned_data["message_body"])
    modeladmin.message_user(request, f"Messaged {len(workers)} worker(s){_already_sent(sent)}.")
    return None


def _already_sent(results: dict) -> str:
    """A notify is recorded per message and recipients and sent at most once: say what was
    not sent again, or is in doubt, or failed."""
    total = {name: sum(int((r or {}).get(name, 0)) for r in results.values())
             for name in ("already_sent", "in_doubt")}
    errors = [e for r in results.values() for e in (r or {}).get("errors", [])]
    notes = []
    if total["already_sent"]:
        notes.append(f"{total['already_sent']} had this exact message already and were not "
                     f"sent it again")
    if total["in_doubt"]:
        notes.append(f"{total['in_doubt']} may have it already (an earlier answer was lost); "
                     f"not sent again")
    if errors:
        notes.append(f"failed or unconfirmed for some (never sent twice): "
                     f"{'; '.join(errors[:3])}")
    return f" ({'; '.join(notes)})" if notes else ""


WORKER_ACTIONS = (block_on_provider, unblock_on_provider, notify_workers)


