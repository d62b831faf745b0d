"""Researcher dashboard of a project: agreement, workers, score distributions, long-form A/B
and STARC analytics, with server-rendered charts. Login required; only projects the user owns
or that are shared with them (all for superusers) — others answer 404."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods, require_POST

from annotation.access_selectors import (
    access_project,
    access_project_worker,
    access_stage,
    projects_visible_to,
)
from annotation.domain.control_characters import CONTROL_CHARACTER, control_character_message
from annotation.judgment_selectors import GROUP_FIELDS, human_score_name
from annotation.models import Project, TaskKind
from metrics_app.reports.project import dashboard_data
from metrics_app.reports.workers import flags_with_reasons, workers_table_note

WORKER_SORTS = {
    "contribution": ("alpha_contribution", False),
    "agreement": ("agreement_with_others", False),
    "gold": ("gold_accuracy", False),
    "speed": ("median_time_s", False),
    "straight": ("modal_answer_share", True),
    "justification": ("same_justification_share", True),
    "judgments": ("n_judgments", True),
}
# The confirmation form's maxlength: the reason is stored with the block.
MAX_BLOCK_REASON_CHARS = 500


@login_required
def project_dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    project = access_project(request.user, slug)
    stage = None
    if request.GET.get("stage"):
        stage = access_stage(project, request.GET["stage"])
    group_by = request.GET.get("group_by") or None
    if group_by not in (None, *GROUP_FIELDS):
        raise Http404("unknown group")
    # Worker status and spot checks are not part of the judgment watermark: the report reads
    # them now (`with_current_worker_columns`), as the report API does, so a block shows at
    # once even when the report itself comes from the cache.
    report, charts = dashboard_data(project=project, stage=stage, group_by=group_by)
    sort = request.GET.get("sort")
    if sort not in WORKER_SORTS:
        # The page says which order it shows: an unknown ?sort= is the default one.
        sort = "contribution"
    key, descending = WORKER_SORTS[sort]
    workers = sorted(
        report["workers"],
        key=lambda w: (w[key] is None, -(w[key] or 0) if descending else (w[key] or 0)),
    )
    alpha_note, workers = workers_table_note(workers, (report.get("agreement") or {}).get("all"))
    workers = [{**w, "flags_shown": flags_with_reasons(w)} for w in workers]
    return render(request, "metrics_app/dashboard.html", {
        "project": project,
        "stage": stage,
        "downloads": _downloads(project, stage, group_by),
        "stages": project.stages.all(),
        "group_by": group_by,
        "group_fields": GROUP_FIELDS,
        "report": report,
        "workers": workers,
        "alpha_note": alpha_note,
        "human_score_name": human_score_name(project),
        "sort": sort,
        # A same-justification share only where workers write justifications (A/B).
        "sorts": [name for name in WORKER_SORTS
                  if name != "justification" or project.kind == TaskKind.AB],
        # matplotlib escapes every text it writes into the SVG.
        "charts": {name: mark_safe(svg) if svg else None for name, svg in charts.items()},
    })


def _downloads(project: Project, stage, group_by: str | None) -> dict[str, str]:
    """The page's JSON and CSV links, reading what the page shows: its stage (and agreement
    grouping). They read the whole project's board beside a stage's page."""
    query = {"stage": stage.pk} if stage is not None else {}

    def url(name: str, **extra) -> str:
        params = {**query, **{k: v for k, v in extra.items() if v}}
        base = reverse(f"metrics-api:{name}", args=[project.slug])
        return f"{base}?{urlencode(params)}" if params else base

    return {"report_json": url("project-report", group_by=group_by),
            "leaderboard_json": url("project-leaderboard"),
            "leaderboard_csv": url("project-leaderboard", output="csv")}


def _block_scope(user) -> tuple[str, list[Project]]:
    """Whom a block by `user` stops, in words, and the projects it reaches (annotation.services
    .workers: a superuser's block is global, a researcher's covers their own and shared
    projects)."""
    if user.is_superuser:
        return ("in every project of every researcher on this platform (you are a superuser: "
                "your block is global)", [])
    projects = list(projects_visible_to(user).order_by("title"))
    return (f"in all {len(projects)} project{'s' if len(projects) != 1 else ''} you own or that "
            f"are shared with you", projects)


@login_required
@require_http_methods(["GET", "POST"])
def worker_block_view(request: HttpRequest, slug: str, worker_id: int) -> HttpResponse:
    """Block a worker who judged items of this project (annotation.services.workers), after a
    confirmation page that says the block's scope: GET shows it, POST with confirm=1 blocks."""
    from annotation.services.workers import worker_block

    project = access_project(request.user, slug)
    if not request.user.is_staff:
        raise Http404("researchers only")
    worker = access_project_worker(project, worker_id)
    scope, projects = _block_scope(request.user)
    reason = (request.POST.get("reason") or request.GET.get("reason") or "").strip()
    # Checked here, not only by the form: NUL cannot be stored by PostgreSQL (a 500).
    control = CONTROL_CHARACTER.search(reason)
    error = (f"The reason {control_character_message(control.group())}." if control
             else f"The reason is longer than {MAX_BLOCK_REASON_CHARS} characters."
             if len(reason) > MAX_BLOCK_REASON_CHARS else None)
    if request.method == "GET" or request.POST.get("confirm") != "1" or error:
        return render(request, "metrics_app/worker_block_confirm.html", {
            "project": project, "worker": worker, "scope": scope, "projects": projects,
            "reason": reason or f"blocked from the {slug} dashboard", "error": error},
            status=400 if error and request.method == "POST" else 200)
    worker_block(worker=worker, reason=reason or f"blocked from the {slug} dashboard",
                 by=request.user)
    messages.success(request, f"Blocked {worker} {scope}. The worker stays listed on the "
                              f"dashboard with an Unblock button.")
    return redirect(reverse("metrics:project-dashboard", args=[slug]) + "#workers")


@login_required
@require_POST
def worker_unblock_view(request: HttpRequest, slug: str, worker_id: int) -> HttpResponse:
    """Lift the block this researcher set (a superuser: the global one), from the dashboard."""
    from annotation.selectors import provider_block_stands_warning, worker_is_blocked_for
    from annotation.services.workers import worker_unblock

    project = access_project(request.user, slug)
    if not request.user.is_staff:
        raise Http404("researchers only")
    worker = access_project_worker(project, worker_id)
    worker_unblock(worker=worker, by=request.user)
    if stands := provider_block_stands_warning([worker.pk]):
        messages.warning(request, stands)
    if worker_is_blocked_for(worker=worker, project=project):
        worker.refresh_from_db()
        who = ("a superuser blocked them for every project" if worker.status == "blocked"
               else "another researcher of this project blocked them")
        messages.warning(request, f"{worker} is still blocked here: {who}; only they can lift "
                                  f"that block.")
    else:
        messages.success(request, f"Unblocked {worker}.")
    return redirect(reverse("metrics:project-dashboard", args=[slug]) + "#workers")
