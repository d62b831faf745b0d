"""Annotator task pages (in-house link, MTurk ExternalQuestion, Prolific) and the JSON calls
their script makes. Views check who is asking and call the services; nothing else.

Framing: MTurk task pages (the ExternalQuestion page, its refusals and an MTurk assignment's
completion page) may be framed by MTurk's worker sites only (CSP frame-ancestors, with
X-Frame-Options lifted for these responses alone); in-house and Prolific task pages, the JSON
calls and every other page refuse framing (frame-ancestors 'none', X-Frame-Options DENY).
"""
from __future__ import annotations

import logging
from functools import wraps
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from annotation.domain.answers import MAX_JUSTIFICATION_LENGTH, item_id_of
from annotation.models import (
    Assignment,
    ParticipantVerification,
    Provider,
    Stage,
    TaskKind,
)
from annotation.services import access
from annotation.services.assignments import (
    AssignmentClosed,
    AssignmentRefused,
    HitExpired,
    NoItemsAvailable,
    ReturnRequested,
    SessionNotVerified,
    SessionUnconfirmed,
    SubmissionInvalid,
    assignment_confirm_item,
    assignment_page_state,
    assignment_record_guess,
    assignment_save_draft,
    assignment_start,
    assignment_submit,
    assignment_touch,
    assignment_verify,
    more_work_for,
    pilot_paragraph,
    prolific_session_check,
    stages_next_open_for,
    submitted_from_page,
)
from annotation.task_selectors import (
    assignment_feedback,
    completion_withheld,
    guess_label_shown,
    hit_preview,
    inhouse_completion,
    passage_blocks,
    provider_task_stage,
    task_item_rows,
    task_items,
    task_page_config,
)
from core.json_limits import JsonNotStandard, JsonTooDeep, json_loads_limited

# The worker sites that show an ExternalQuestion in their iframe (production and sandbox).
# Not "https://*.mturk.com": that includes the requester sites; not www.mturk.com either, which
# only receives the externalSubmit form post (see DEFAULT_MTURK_SUBMIT_HOSTS).
MTURK_FRAME_ANCESTORS = "https://worker.mturk.com https://workersandbox.mturk.com"
DEFAULT_MTURK_SUBMIT_HOSTS = ("https://www.mturk.com", "https://workersandbox.mturk.com")
TOKEN_HEADER = "HTTP_X_ASSIGNMENT_TOKEN"
MAX_BODY_BYTES = 1_000_000
# What a page whose answers are too large to send is told (its own field checks, such as the
# justification's length, cannot answer a body that is not read).
BODY_TOO_LARGE_MESSAGE = (
    f"Your answers are too large to save (at most {MAX_BODY_BYTES:,} bytes at once): shorten "
    f"the longest text; a justification holds at most {MAX_JUSTIFICATION_LENGTH:,} characters.")

logger = logging.getLogger(__name__)


def _submit_hosts() -> list[str]:
    hosts = getattr(settings, "QAJ_MTURK_SUBMIT_HOSTS", None) or DEFAULT_MTURK_SUBMIT_HOSTS
    return [h.rstrip("/") for h in hosts]


def _csp(*, mturk_frame: bool) -> str:
    form_action = " ".join(["'self'", *_submit_hosts()])
    frame_ancestors = MTURK_FRAME_ANCESTORS if mturk_frame else "'none'"
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; "
        f"form-action {form_action}; frame-ancestors {frame_ancestors}"
    )


# (requests, seconds) per bucket. "page"/"api": one worker (or assignment) at one address;
# "page_address"/"api_address": everything from one client address, whatever worker ids the
# requests carry (a new workerId or PROLIFIC_PID on every request shares this bucket). The
# address budgets are higher than a worker's so that a lab or classroom behind one NAT works:
# 1,200 pages a minute is 60 annotators each loading a page every 3 s; 4,800 JSON calls a
# minute is 60 annotators each autosaving or confirming once a second.
DEFAULT_RATE_LIMITS = {"page": (600, 60), "api": (240, 60),
                       "page_address": (1200, 60), "api_address": (4800, 60)}


def rate_limited(request: HttpRequest, *, scope: str, key: str) -> bool:
    """Request counter in the Django cache whose window opens at the bucket's first request
    (per process with the default local memory cache; production uses Redis when
    QAJ_CACHE_URL/REDIS_URL is set, which makes it global). The window is the counter's expiry,
    not a clock-aligned minute: with clock-aligned windows a burst straddling the minute got
    twice the budget, and whether a burst was refused depended on when it started. Limits per
    scope come from `QAJ_TASK_RATE_LIMITS` = {"page": (requests, seconds), "api": (...),
    "page_address": (...), "api_address": (...)} over DEFAULT_RATE_LIMITS. `key` names the
    bucket: the worker and the client address (`_rate_key`), or the address alone
    (`_address_key`)."""
    from django.core.cache import cache

    limits = {**DEFAULT_RATE_LIMITS, **(getattr(settings, "QAJ_TASK_RATE_LIMITS", None) or {})}
    allowed, window = limits[scope]
    cache_key = f"qaj-rate:{scope}:{key}"
    try:
        # incr keeps the expiry `add` set (local memory and Redis alike), so the window
        # does not slide forward with every request.
        if cache.add(cache_key, 1, timeout=window):
            return False
        return cache.incr(cache_key) > allowed
    except ValueError:  # expired between add and incr
        return False
    except Exception:  # noqa: BLE001 - the cache server is down
        # Fail open: a worker's answers matter more than the limit while the cache is away.
        logger.warning("rate limit cache unavailable", exc_info=True)
        return False


def _rate_key(request: HttpRequest, *, identity: str) -> str:
    """The bucket of a request: the worker it names plus the client address. Behind a proxy
    every worker has the proxy's address, so the address alone would put a whole stage's
    workers into one bucket; requests naming nobody fall back to address + path."""
    address = access.request_client_address(meta=request.META)
    return f"{identity or request.path}:{address}"


def _address_key(request: HttpRequest) -> str:
    """The bucket of everything one client address sends (the trusted proxy header's address
    when `QAJ_TRUSTED_PROXY_HEADER` is set, else REMOTE_ADDR)."""
    return "address:" + access.request_client_address(meta=request.META)


def _over_limits(request: HttpRequest, *, scope: str, identity: str) -> bool:
    """Over the worker's budget at this address, or over the address's own (higher) budget.
    Both buckets count every request, so rotating the worker id moves nothing but the first."""
    over_worker = rate_limited(request, scope=scope, key=_rate_key(request, identity=identity))
    over_address = rate_limited(request, scope=f"{scope}_address", key=_address_key(request))
    return over_worker or over_address


def _too_many(request: HttpRequest) -> HttpResponse:
    response = render(request, "annotation/task/refused.html", {
        "title": "Slow down", "code": "rate_limited",
        "message": "Too many requests in a short time. Wait a minute and reload the page.",
    }, status=429)
    response["Retry-After"] = "60"
    return response


MTURK_FRAME_ATTR = "qaj_mturk_frame"


def _mturk_frameable(response: HttpResponse) -> HttpResponse:
    """Mark a response as shown inside MTurk's iframe (see `task_page`)."""
    setattr(response, MTURK_FRAME_ATTR, True)
    return response


def task_page(view=None, *, mturk: bool = False):
    """Task page headers: strict CSP, never cached; rate-limited per worker and client address.
    Only MTurk pages (`mturk=True`, or a response marked by `_mturk_frameable`) may be framed,
    and only by MTurk's worker sites; everything else gets frame-ancestors 'none' + DENY."""
    if view is None:
        return lambda v: task_page(v, mturk=mturk)

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        identity = access.request_worker_identity(query=request.GET,
                                                  token=str(kwargs.get("token") or ""))
        if request.method == "GET" and _over_limits(request, scope="page", identity=identity):
            response = _too_many(request)
        else:
            response = view(request, *args, **kwargs)
        mturk_frame = mturk or getattr(response, MTURK_FRAME_ATTR, False)
        response["Content-Security-Policy"] = _csp(mturk_frame=mturk_frame)
        if mturk_frame:
            response.xframe_options_exempt = True
        else:
            response["X-Frame-Options"] = "DENY"
        response["Referrer-Policy"] = "same-origin"
        response["X-Content-Type-Options"] = "nosniff"
        return response

    return never_cache(wrapped)


def task_refused(request: HttpRequest, exc: AssignmentRefused, *,
                 status: int = 403) -> HttpResponse:
    """The page an annotator sees when a task does not open (also the home page's)."""
    title = "This page is not available"
    if isinstance(exc, NoItemsAvailable):
        status, title = 200, "Nothing more to do"
    elif isinstance(exc, HitExpired):
        status, title = 410, "This HIT has expired"
    elif isinstance(exc, SessionNotVerified):
        title = "This Prolific session could not be found"
    elif isinstance(exc, SessionUnconfirmed):
        status, title = 409, "This Prolific session is not confirmed yet"
    elif isinstance(exc, ReturnRequested):
        status, title = 200, "Please return this study on Prolific"
    return render(request, "annotation/task/refused.html",
                  {"message": exc.message, "code": exc.code, "title": title}, status=status)


# The query flag an in-house page carries when it follows a submitted one.
SAVED_PARAM = "saved"


def _complete_url(assignment: Assignment, *, turk_submit_to: str = "", token: str = "",
                  link_id: int | None = None) -> str:
    # The completion page of an in-house page names the link it was opened through: it goes on
    # with that link only (`inhouse_completion`), never with one that replaced it.
    token = token or access.assignment_token_make(assignment=assignment, link_id=link_id)
    url = reverse("annotation:task-complete", kwargs={"token": token})
    if turk_submit_to:
        url += "?" + urlencode({"turkSubmitTo": turk_submit_to})
    return url


def _render_task(request: HttpRequest, *, stage: Stage, assignment: Assignment | None,
                 items: list[dict] | None = None, preview: bool = False,
                 turk_submit_to: str = "", total: int | None = None,
                 link_id: int | None = None) -> HttpResponse:
    project = stage.project
    token = ""
    complete_url = ""
    judged = None
    if assignment is not None:
        rows = task_item_rows(assignment=assignment)
        assignment_touch(assignment=assignment,
                         unshown=any(row.first_shown_at is None for row in rows))
        items = task_items(assignment=assignment, rows=rows)
        judged = [row.item_id for row in rows if row.judged]
        token = access.assignment_token_make(assignment=assignment, link_id=link_id)
        complete_url = _complete_url(assignment, turk_submit_to=turk_submit_to, token=token)
    items = items or []
    config = task_page_config(assignment=assignment, stage=stage, items=items, token=token,
                              preview=preview, complete_url=complete_url, judged=judged)
    if assignment is not None:
        # Refused late confirms count as settled; comprehension checks awaiting a 2nd attempt.
        page_state = assignment_page_state(assignment=assignment)
        config["confirmed"].update(page_state["settled"])
        config["retry"] = page_state["retry"]
    for number, item in enumerate(items, start=1):
        item.setdefault("number", number)
    context = {
        "project": project,
        "stage": stage,
        "kind": project.kind,
        "mode": config["mode"],
        "items": items,
        "blocks": passage_blocks(items) if project.kind == TaskKind.LIKERT else [],
        "total": total or len(items),
        "labels": project.scale_labels,
        "aspects": project.aspects,
        "aspect_preferences": project.aspect_preferences,
        "min_length": project.justification_min_length,
        "ab_ties": project.kind == TaskKind.AB and bool((stage.settings or {}).get("ab_ties")),
        "preview": preview,
        "config": config,
        "is_practice_stage": stage.kind == "practice",
        # In-house pages follow each other without a stop: the next one says the last was kept.
        "saved_before": assignment is not None and request.GET.get(SAVED_PARAM) == "1",
    }
    return render(request, "annotation/task/page.html", context)


def task_start(request: HttpRequest, *, stage: Stage, turk_submit_to: str = "",
               link_id: int | None = None, **start_kwargs) -> HttpResponse:
    """Start (or continue) the worker's assignment of `stage` and show it: the task page, the
    completion page when it is finished, or the refusal (also the home page's entry).
    `link_id`: the in-house link the page is opened through, which its token names."""
    try:
        assignment = assignment_start(stage=stage, shown=True, **start_kwargs)
    except AssignmentClosed as exc:
        if exc.finished:
            return _completion(request, exc.assignment, turk_submit_to=turk_submit_to,
                               link_id=link_id)
        return task_refused(request, exc)
    except AssignmentRefused as exc:
        return task_refused(request, exc)
    return _render_task(request, stage=stage, assignment=assignment,
                        turk_submit_to=turk_submit_to, link_id=link_id)


# --- Pages --------------------------------------------------------------------------------------


@require_GET
@task_page
def task_link(request: HttpRequest, token: str) -> HttpResponse:
    """In-house annotator: a signed personal link; each visit continues the unfinished
    assignment or starts the next one."""
    try:
        link = access.inhouse_link_resolve(token=token)
        if access.inhouse_link_goes_home(link=link):
            return redirect(access.inhouse_home_path(link=link))
        stage = access.inhouse_link_stage(link=link)
    except AssignmentRefused as exc:
        return task_refused(request, exc)
    return task_start(request, stage=stage, worker=link.worker, link_id=link.pk)


def _turk_submit_to(value: str) -> str:
    value = (value or "").strip().rstrip("/")
    return value if value in _submit_hosts() else ""


@require_GET
@task_page(mturk=True)
def task_mturk(request: HttpRequest, stage_id: int) -> HttpResponse:
    # Each entry point serves only its own provider's stages: an in-house or Prolific stage is
    # not reachable through a made-up MTurk URL (ids are small integers), and nothing is created.
    # No such stage is refused as a HIT of another task is (access.NOT_THIS_HIT), not with a 404
    # that would tell which ids exist.
    stage = provider_task_stage(stage_id=stage_id, provider=Provider.MTURK)
    params = request.GET
    turk_submit_to = _turk_submit_to(params.get("turkSubmitTo", ""))
    try:
        checked = access.mturk_access_check(
            stage=stage, assignment_id=params.get("assignmentId", ""),
            hit_id=params.get("hitId", ""), worker_id=params.get("workerId", ""),
        )
    except AssignmentRefused as exc:
        return task_refused(request, exc)
    if checked.preview:
        preview = hit_preview(hit=checked.hit, stage=stage)
        if not preview.items:
            raise Http404("empty HIT")
        return _render_task(request, stage=stage, assignment=None, items=preview.items,
                            preview=True, total=preview.total)
    if params.get("turkSubmitTo") and not turk_submit_to:
        return task_refused(request, access.AccessDenied(
            "The turkSubmitTo address is not an MTurk address."))
    return task_start(request, stage=stage, worker=checked.worker, hit=checked.hit,
                  external_id=checked.assignment_id, turk_submit_to=turk_submit_to)


@require_GET
@task_page
def task_prolific(request: HttpRequest, stage_id: int) -> HttpResponse:
    # No such stage is refused as another study's link is (access.NOT_THIS_STUDY).
    stage = provider_task_stage(stage_id=stage_id, provider=Provider.PROLIFIC)
    try:
        checked = access.prolific_access_check(
            stage=stage, pid=request.GET.get("PROLIFIC_PID", ""),
            study_id=request.GET.get("STUDY_ID", ""),
            session_id=request.GET.get("SESSION_ID", ""),
        )
    except AssignmentRefused as exc:
        return task_refused(request, exc)
    # Asked of Prolific before anything is created (a network call, outside any transaction).
    verification = prolific_session_check(stage=stage, worker=checked.worker,
                                          session_id=checked.session_id)
    if verification == ParticipantVerification.FAILED:
        return task_refused(request, SessionNotVerified(
            "Prolific does not know this session for your participant ID in this study. Open "
            "the study from your Prolific account; if you did, message the researcher there."))
    return task_start(request, stage=stage, worker=checked.worker, external_id=checked.session_id,
                  verification=verification)


def prolific_completion_url(stage: Stage) -> str:
    base = getattr(settings, "PROLIFIC_COMPLETION_URL",
                   "https://app.prolific.com/submissions/complete")
    code = (stage.settings or {}).get("prolific_completion_code", "")
    return f"{base}?{urlencode({'cc': code})}"


def _completion(request: HttpRequest, assignment: Assignment, *,
                turk_submit_to: str = "", link_id: int | None = None) -> HttpResponse:
    provider = assignment.worker.provider
    withheld = completion_withheld(assignment=assignment)
    if withheld:
        return task_refused(request, SessionNotVerified(withheld))
    context = {"assignment": assignment, "project": assignment.stage.project,
               "provider": provider, "code": assignment.completion_code}
    if provider == Provider.MTURK and assignment.hit_id:
        context["mturk_action"] = (
            f"{turk_submit_to}/mturk/externalSubmit" if turk_submit_to else ""
        )
    elif provider == Provider.PROLIFIC:
        context["redirect_url"] = prolific_completion_url(assignment.stage)
    else:
        # In-house: no completion code (nobody to hand it to) and no stop between pages: while
        # the stage has more for this annotator, the next items open at once.
        completion = inhouse_completion(assignment=assignment, link_id=link_id)
        link = completion.link
        if link is not None:
            if link.stage_id is None:
                # A project-wide link: more of this stage opens at once (as the home page starts
                # it); when it has no more, the annotator goes back to their home page.
                if more_work_for(stage=assignment.stage, worker=assignment.worker):
                    return redirect(access.inhouse_home_stage_path(
                        link=link, stage=assignment.stage) + f"?{SAVED_PARAM}=1")
                context["home_url"] = access.inhouse_home_path(link=link)
                if completion.qualification is not None and completion.qualification.passed:
                    # Already open: "appears when the researcher opens it" sent them away.
                    context["next_open"] = stages_next_open_for(
                        qualification=assignment.stage, worker=assignment.worker)
            else:
                try:
                    stage = access.inhouse_link_stage(link=link)
                except AssignmentRefused:
                    stage = None
                if stage is not None and more_work_for(stage=stage, worker=assignment.worker):
                    return redirect(access.inhouse_link_path(link=link) + f"?{SAVED_PARAM}=1")
        context["finished_stage"] = assignment.stage
        context["qualification"] = completion.qualification
    response = render(request, "annotation/task/complete.html", context)
    if provider == Provider.MTURK:
        # Shown inside MTurk's iframe after the submit (it posts the form to externalSubmit).
        _mturk_frameable(response)
    return response


@require_GET
@task_page
def task_complete(request: HttpRequest, token: str) -> HttpResponse:
    try:
        page = access.page_token_resolve(token=token)
    except AssignmentRefused as exc:
        return task_refused(request, exc)
    if page.assignment.submitted_at is None:
        return task_refused(request, access.AccessDenied("This assignment has not been submitted."))
    return _completion(request, page.assignment, link_id=page.link_id,
                       turk_submit_to=_turk_submit_to(request.GET.get("turkSubmitTo", "")))


# --- JSON calls ---------------------------------------------------------------------------------


def _json_error(message: str, *, status: int, errors: dict | None = None,
                **extra) -> JsonResponse:
    return JsonResponse({"ok": False, "message": message, "errors": errors or {}, **extra},
                        status=status)


def _json_too_many() -> JsonResponse:
    response = _json_error("Too many requests; wait a minute and try again.", status=429)
    response["Retry-After"] = "60"
    return response


def task_api(view):
    """JSON endpoints: POST only, a JSON body, the signed page token (`access.PageToken`: the
    assignment, and an in-house page's link; the view gets it) in the
    X-Assignment-Token header (a custom header a foreign origin cannot send without CORS, so it
    replaces the CSRF cookie that MTurk's third-party iframe may not carry) and, when the browser
    says where the request comes from, our own origin."""

    @csrf_exempt
    @require_POST
    @task_page
    @wraps(view)
    def wrapped(request: HttpRequest) -> HttpResponse:
        origin = request.headers.get("Origin")
        if origin and origin != "null":
            if urlsplit(origin).netloc != request.get_host():
                return _json_error("Cross-origin request refused.", status=403)
        try:
            page = access.page_token_resolve(token=request.META.get(TOKEN_HEADER, ""))
            assignment = page.assignment
            access.assignment_access_recheck(assignment=assignment, link_id=page.link_id)
        except AssignmentRefused as exc:
            # Calls with made-up or mangled tokens (probing for a valid one) are held to the
            # address's budget in a bucket of their own: counted with the valid calls, one
            # client behind a lab's NAT could spend the whole address's budget on fakes and
            # lock every annotator there out of their own pages.
            if rate_limited(request, scope="api_address",
                            key=_address_key(request) + ":refused"):
                return _json_too_many()
            return _json_error(exc.message, status=403, code=exc.code)
        if _over_limits(request, scope="api", identity=f"assignment:{assignment.pk}"):
            return _json_too_many()
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        try:
            # Asked before the body is read: past Django's upload limit reading it raises.
            too_large = declared > MAX_BODY_BYTES or len(request.body) > MAX_BODY_BYTES
        except RequestDataTooBig:
            too_large = True
        if too_large:
            return _json_error(BODY_TOO_LARGE_MESSAGE, status=413)
        try:
            body = json_loads_limited(request.body or b"{}")
        except JsonTooDeep as exc:
            return _json_error(f"The request body is {exc}.", status=400)
        except JsonNotStandard as exc:
            return _json_error(f"The request body is not valid JSON: {exc}.", status=400)
        except (ValueError, UnicodeDecodeError):
            return _json_error("The request body is not valid JSON.", status=400)
        if not isinstance(body, dict):
            return _json_error("The request body must be a JSON object.", status=400)
        try:
            return view(request, page, body)
        except SubmissionInvalid as exc:
            return _json_error(exc.message, status=400, errors=exc.errors)
        except AssignmentClosed as exc:
            if exc.finished:
                return JsonResponse({"ok": True, "already_submitted": True,
                                     "complete_url": _complete_url(exc.assignment,
                                                                   link_id=page.link_id)})
            if isinstance(exc, ReturnRequested):
                return _json_error(exc.message, status=409, return_study=exc.message)
            return _json_error(exc.message, status=409)
        except AssignmentRefused as exc:
            return _json_error(exc.message, status=403)

    return wrapped


@task_api
def task_autosave(request: HttpRequest, page: access.PageToken, body: dict) -> HttpResponse:
    assignment = assignment_save_draft(assignment=page.assignment, draft=body.get("draft"),
                                       sequence=body.get("sequence"))
    return JsonResponse({"ok": True, "saved_at": assignment.last_seen_at.isoformat()})


@task_api
def task_confirm(request: HttpRequest, page: access.PageToken, body: dict) -> HttpResponse:
    assignment = page.assignment
    # Read once by the rule every door uses; None (not an item id) is refused by the service.
    item_id = item_id_of(body.get("item"))
    answer = body.get("answer") if isinstance(body.get("answer"), dict) else {}
    if body.get("step") == "guess":
        role = assignment_record_guess(assignment=assignment, item=item_id, answer=answer)
        return JsonResponse({
            "ok": True,
            "guess_shown": guess_label_shown(assignment=assignment, item_id=item_id, role=role),
            "paragraph": pilot_paragraph(assignment=assignment, item_id=item_id),
        })
    # None: a late item others filled, or a comprehension check to answer again (feedback).
    assignment_confirm_item(assignment=assignment, item=item_id, answer=answer,
                            client_meta=body.get("client_meta"))
    return JsonResponse({"ok": True, "feedback": assignment_feedback(
        assignment=assignment, item_id=item_id)})


@task_api
def task_submit(request: HttpRequest, page: access.PageToken, body: dict) -> HttpResponse:
    assignment = page.assignment
    turk_submit_to = _turk_submit_to(str(body.get("turkSubmitTo") or ""))
    judgments = assignment_submit(assignment=assignment, answers=body.get("answers") or [],
                                  client_meta=body.get("client_meta"))
    if judgments.retry:  # Prolific comprehension check wrong once: nothing submitted
        return _json_error(judgments.message, status=400, errors=judgments.retry, retry=True)
    if judgments.return_requested:
        return _json_error(judgments.return_requested, status=409,
                           return_study=judgments.return_requested)
    assignment.refresh_from_db(fields=["status", "completion_code", "submitted_at",
                                       "verification"])
    if assignment.verification == ParticipantVerification.PENDING:
        # One more short question to Prolific now the work is in; the sync asks otherwise.
        assignment_verify(assignment=assignment)
    return JsonResponse({
        "ok": True,
        "n_judgments": len(judgments),
        "refused": getattr(judgments, "refused", {}),  # late submit: answers not stored
        # Submitted before (another tab or window, a retry): this page's answers were not
        # stored; the page says so instead of "saved".
        "already_submitted": judgments.already_submitted,
        # ...unless they were: this page's own earlier submit, whose answer was lost.
        "submitted_by_this_page": judgments.already_submitted and submitted_from_page(
            assignment=assignment, answers=body.get("answers"),
            client_meta=body.get("client_meta")),
        "complete_url": _complete_url(assignment, turk_submit_to=turk_submit_to,
                                      link_id=page.link_id),
    })
