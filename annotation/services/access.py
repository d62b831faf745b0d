"""Who may open a task page: signed in-house links, MTurk and Prolific URL parameters, and the
signed assignment token the page carries in its JSON calls.

Annotator pages never rely on the session cookie: inside MTurk's third-party iframe browsers
may drop it. The page instead carries a token signed with the site's secret that names the
assignment and its worker; the JSON endpoints require it in a custom header, which a foreign
site cannot set on a cross-origin request (so it also stands in for the CSRF cookie).
"""
from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from annotation.assignment_draft import SUPERSEDED_KEY, server_state
from annotation.models import (
    Assignment,
    Hit,
    InhouseLink,
    ParticipantVerification,
    Project,
    Provider,
    Stage,
    Worker,
)
from annotation.selectors import (
    qualification_results_awaiting_provider,
    qualification_results_that_count,
    worker_is_blocked_for,
)
from annotation.task_selectors import inhouse_link_live, inhouse_page_link

from .assignments import (
    OPEN_STAGE_STATUSES,
    AssignmentClosed,
    AssignmentRefused,
    HitExpired,
    QualificationRequired,
    SessionNotVerified,
    StageNotOpen,
    WorkerBlocked,
    closed_stage_lets_finish,
    hit_is_expired,
    qualification_check,
)
from .assignments.state import assignment_finished, stage_not_open_message

LINK_SALT = "qaj.inhouse-link"
ASSIGNMENT_SALT = "qaj.assignment"
MTURK_PREVIEW_ID = "ASSIGNMENT_ID_NOT_AVAILABLE"
_EXTERNAL_ID = re.compile(r"^[A-Za-z0-9_\-]{1,128}$")


class AccessDenied(AssignmentRefused):
    """A link or URL that does not grant access; `message` is shown on the refusal page."""

    code = "access_denied"


class LinkInvalid(AccessDenied):
    code = "link_invalid"


class LinkRevoked(AccessDenied):
    code = "link_revoked"


class LinkExpired(AccessDenied):
    code = "link_expired"


# --- In-house links -----------------------------------------------------------------------------


@transaction.atomic
def stage_link_problem(*, stage: Stage, worker: Worker | None = None) -> str:
    """Why a link to `stage` (for `worker`) would not let its holder work now, for the
    researcher who issues it ("" when it would): a draft, reviewing or closed stage (and how
    to collect more), a blocked worker, a qualification the worker failed or has not taken, a
    qualification the worker already took."""
    from annotation.models import StageKind, StageStatus, WorkerQualification

    if stage.status == StageStatus.DRAFT:
        return f"{stage} is a draft: the link works once the stage is published"
    if stage.status == StageStatus.REVIEWING:
        # Not "raise its takers or redundancy": every edit door refuses those once the stage
        # is published (`stage_edit_errors`), and a project has one qualification stage.
        more = ("its number of takers is fixed once it is published, and a project has one "
                "qualification stage" if stage.kind == StageKind.QUALIFICATION else
                "its judgments per item are fixed once it is published: to collect more, "
                "close it and publish another stage")
        # Completion is by items where the pages pick them, by assignments on MTurk
        # (`stage_collection_complete`): the sentence is true of both.
        return (f"{stage} closed itself: it collected all it asked for"
                + (" (its max takers took it)" if stage.kind == StageKind.QUALIFICATION else
                   " (every item its judgments, or every HIT its assignments)")
                + f"; the link shows the annotator that the task is paused. {more[0].upper()}"
                  f"{more[1:]}")
    if stage.status == StageStatus.CLOSED:
        return f"{stage} is closed: the link shows the annotator that the task has ended"
    if worker is None:
        return ""
    if worker_is_blocked_for(worker=worker, project=stage.project):
        return f"{worker} is blocked for this project"
    if stage.requires_stage_id:
        result = WorkerQualification.objects.filter(
            worker=worker, stage_id=stage.requires_stage_id).order_by("-pk").first()
        if result is None:
            return (f"{worker} has not passed the qualification {stage.requires_stage} yet: the "
                    f"link refuses them until they do")
        mine = WorkerQualification.objects.filter(pk=result.pk)
        if result.passed and qualification_results_awaiting_provider(mine).exists():
            return (f"{worker}'s pass of the qualification {stage.requires_stage} waits for "
                    "the provider to confirm its work: the link refuses them until it does")
        if not qualification_results_that_count(mine).exists():
            return (f"{worker}'s work on the qualification {stage.requires_stage} was "
                    "rejected: the link will refuse them")
        if not result.passed:
            return (f"{worker} failed the qualification {stage.requires_stage} (score "
                    f"{result.score:.0%}): the link will refuse them")
    if stage.kind == StageKind.QUALIFICATION and WorkerQualification.objects.filter(
            worker=worker, stage=stage).exists():
        return f"{worker} has already taken this qualification (it cannot be retaken)"
    return ""


LINK_STAGE_OF_ANOTHER_PROJECT = "The stage belongs to another project."


def link_worker_problem(*, worker: Worker, project: Project) -> str:
    """Why `worker` cannot be given a personal link to `project` ("" when they can): another
    researcher's in-house annotator is another researcher's "Ann", not this project's."""
    if worker.researcher_id is not None and worker.researcher_id != project.owner_id:
        return (f"{worker} is another researcher's in-house annotator. Invite this project's "
                "annotator by name (the Invite action), which makes the project owner's own.")
    return ""


def inhouse_link_create(*, worker: Worker, project: Project, stage: Stage | None = None,
                        expires_at: datetime | None = None) -> tuple[InhouseLink, str]:
    """A personal, revocable link (no password) for an in-house annotator; returns the link and
    its URL path (prefix `settings.QAJ_PUBLIC_BASE_URL` to send it)."""
    if stage is not None and stage.project_id != project.pk:
        raise ValueError(LINK_STAGE_OF_ANOTHER_PROJECT)
    if problem := link_worker_problem(worker=worker, project=project):
        raise ValueError(problem)
    link = InhouseLink.objects.create(
        worker=worker, project=project, stage=stage, expires_at=expires_at,
        nonce=secrets.token_urlsafe(24),
    )
    return link, inhouse_link_path(link=link)


def inhouse_annotator(*, project: Project, name: str, external_id: str = "") -> Worker:
    """The in-house annotator a researcher calls `name` (created once, keyed by the slug of the
    name, or by `external_id` when given): the project owner's own, so another researcher's
    "Ann" is another worker, with her own reading history (a STARC paragraph one Ann read is
    not kept from the other), qualifications and contact details. An annotator from before
    names were scoped, unscoped because several researchers worked with her, is still reached
    by each of them while she has worked (or holds a link) in their projects."""
    from django.utils.text import slugify

    external_id = external_id or slugify(name)[:200] or name[:200]
    owner = project.owner
    if owner is not None:
        legacy = Worker.objects.filter(
            provider=Provider.INHOUSE, external_id=external_id, researcher=None).filter(
            Q(links__project__owner=owner) | Q(assignments__stage__project__owner=owner)
        ).first()
        if legacy is not None:
            return legacy
    worker, _ = Worker.objects.get_or_create(
        provider=Provider.INHOUSE, external_id=external_id, researcher=owner,
        defaults={"display_name": name})
    return worker


@transaction.atomic
def inhouse_annotators_invite(*, stage: Stage, names: list[str]) -> list[tuple[str, str, str]]:
    """In-house annotators by name (created once, keyed by the slug of the name) with a personal
    link to `stage` each: (name, URL path, problem) per name, to be sent to the annotators;
    `problem` says why the link would not work now (`stage_link_problem`, "" when it would)."""
    invited = []
    for name in names:
        worker = inhouse_annotator(project=stage.project, name=name)
        _link, path = inhouse_link_create(worker=worker, project=stage.project, stage=stage)
        invited.append((name, path, stage_link_problem(stage=stage, worker=worker)))
    return invited


def inhouse_link_path(*, link: InhouseLink) -> str:
    token = signing.Signer(salt=LINK_SALT).sign(link.nonce)
    return reverse("annotation:task-link", kwargs={"token": token})


def inhouse_link_resolve(*, token: str) -> InhouseLink:
    """The link a token names; LinkInvalid (tampered/unknown), LinkRevoked or LinkExpired."""
    try:
        nonce = signing.Signer(salt=LINK_SALT).unsign(token)
    except signing.BadSignature:
        raise LinkInvalid("This link is not valid. Check that you copied all of it.") from None
    # `nonce` is unique: a plain lookup, no ORDER BY/LIMIT for the ORM to compile.
    try:
        link = InhouseLink.objects.select_related("worker", "project", "stage__project").get(
            nonce=nonce)
    except InhouseLink.DoesNotExist:
        raise LinkInvalid("This link is not valid.") from None
    if link.revoked:
        raise LinkRevoked("This link has been revoked by the researcher.")
    if link.expires_at is not None and link.expires_at <= timezone.now():
        raise LinkExpired("This link has expired. Ask the researcher for a new one.")
    return link


@transaction.atomic
def inhouse_link_revoke(*, link: InhouseLink) -> InhouseLink:
    link.revoked = True
    link.save(update_fields=["revoked"])
    return link


@transaction.atomic
def inhouse_link_reissue(*, link: InhouseLink) -> tuple[InhouseLink, str]:
    """Revoke a link (lost, forwarded, leaked) and give its annotator a new one to the same
    project and stage with the same expiry: (new link, its URL path). The annotator's work so
    far stays theirs: it belongs to the worker, not to the link."""
    link = InhouseLink.objects.select_for_update().get(pk=link.pk)
    inhouse_link_revoke(link=link)
    return inhouse_link_create(worker=link.worker, project=link.project, stage=link.stage,
                               expires_at=link.expires_at)


def _open_inhouse_stages(project: Project):
    return (Stage.objects.filter(project=project, provider=Provider.INHOUSE,
                                 status__in=OPEN_STAGE_STATUSES)
            .order_by("-order", "-pk"))


def inhouse_link_goes_home(*, link: InhouseLink) -> bool:
    """A project-wide link opened at its task address (the address `inhouse_link_create`
    returns, or one typed by hand) while the project has more than one open in-house stage:
    the annotator chooses on their home page. Opening the latest stage instead sent a worker
    with a qualification still to take into the full stage, which refused them."""
    return link.stage_id is None and _open_inhouse_stages(link.project)[:2].count() > 1


def inhouse_link_stage(*, link: InhouseLink) -> Stage:
    """The stage a link opens: its own, or the project's one open in-house stage (with several,
    `inhouse_link_goes_home`). A link is an in-house entry point: a stage published on MTurk or
    Prolific is never opened through it."""
    if link.stage is not None:
        if link.stage.provider != Provider.INHOUSE:
            raise AccessDenied("This link does not open a task.")
        return link.stage
    stage = _open_inhouse_stages(link.project).first()
    if stage is None:
        raise AccessDenied("There is no open task for this link at the moment.")
    return stage


def inhouse_entry_path(*, link: InhouseLink) -> str:
    """The path to send an annotator: the home page for a project-wide link (every stage from
    one link), the task page for a link to one stage."""
    return inhouse_home_path(link=link) if link.stage_id is None else inhouse_link_path(link=link)


@transaction.atomic
def inhouse_home_links(*, project: Project, names: list[str]) -> list[tuple[str, str]]:
    """One personal home-page link per in-house annotator for the whole project (created once:
    an annotator's valid project-wide link is handed out again): (name, URL path) per name."""
    now = timezone.now()
    invited = []
    for name in names:
        worker = inhouse_annotator(project=project, name=name)
        link = (InhouseLink.objects.filter(worker=worker, project=project, stage=None,
                                           revoked=False)
                .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now)).order_by("pk")
                .first())
        if link is None:
            link, _path = inhouse_link_create(worker=worker, project=project)
        invited.append((name, inhouse_home_path(link=link)))
    return invited


def inhouse_home_path(*, link: InhouseLink) -> str:
    """The annotator's home page for a link: their stages, progress and history."""
    token = signing.Signer(salt=LINK_SALT).sign(link.nonce)
    return reverse("annotation:task-home", kwargs={"token": token})


def inhouse_home_stage_path(*, link: InhouseLink, stage: Stage) -> str:
    """Where the home page starts (or continues) `stage` for the link's annotator."""
    token = signing.Signer(salt=LINK_SALT).sign(link.nonce)
    return reverse("annotation:task-home-stage", kwargs={"token": token, "stage_id": stage.pk})


def inhouse_link_stage_choose(*, link: InhouseLink, stage_id: int) -> Stage:
    """A stage started from the annotator's home page: an in-house stage of the link's project
    (the link's own stage when it names one). Whether it is open is the assignment's check."""
    stage = Stage.objects.select_related("project").filter(
        pk=stage_id, project_id=link.project_id, provider=Provider.INHOUSE).first()
    if stage is None or (link.stage_id is not None and stage.pk != link.stage_id):
        raise AccessDenied("This link does not open that task.")
    return stage


# --- Crowd providers ----------------------------------------------------------------------------


def _external_id(value: str, what: str) -> str:
    value = (value or "").strip()
    if not _EXTERNAL_ID.match(value):
        raise AccessDenied(f"The task link is incomplete: {what} is missing or malformed.")
    return value


def worker_for(*, provider: str, external_id: str) -> Worker:
    """The worker with this provider id, created on first sight."""
    worker = Worker.objects.filter(provider=provider, external_id=external_id).first()
    if worker is not None:
        return worker
    try:
        with transaction.atomic():
            return Worker.objects.create(provider=provider, external_id=external_id)
    except IntegrityError:  # created concurrently by a double-loaded page
        return Worker.objects.get(provider=provider, external_id=external_id)


def _refuse_if_not_open(stage: Stage, *,
                        existing: Callable[[], Assignment | None] | None = None) -> None:
    """StageNotOpen for a draft, reviewing or closed stage, with the message assignment_start
    gives, unless `existing()` (the assignment the URL names, already matched to its worker;
    looked up only for a stage that is not open) is one a closed crowd stage still lets its
    worker finish (`closed_stage_lets_finish`)."""
    if stage.status in OPEN_STAGE_STATUSES:
        return
    named = existing() if existing is not None else None
    if named is not None:
        named.stage = stage
        if closed_stage_lets_finish(named):
            return
    raise StageNotOpen(stage_not_open_message(stage))


def _named_assignment(*, stage: Stage, external_id: str, worker_provider: str,
                      worker_external_id: str, hit: Hit | None = None) -> Assignment | None:
    """The stage's assignment with this provider id, when it is this worker's (well-formed ids
    only): what a closed stage may still let its worker finish."""
    if not (_EXTERNAL_ID.match(external_id or "") and _EXTERNAL_ID.match(
            worker_external_id or "")):
        return None
    found = Assignment.objects.filter(
        stage=stage, external_id=external_id, worker__provider=worker_provider,
        worker__external_id=worker_external_id)
    if hit is not None:
        found = found.filter(hit=hit)
    return found.order_by("pk").first()


@dataclass
class MturkAccess:
    hit: Hit
    assignment_id: str
    worker: Worker | None  # None in preview mode
    preview: bool


# What a crowd entry URL (/task/mturk/<id>/, /task/prolific/<id>/) answers when it names no stage
# of that provider (`stage` None: no such id, or another provider's stage) and when the provider
# id that only a real worker holds does not match: one answer for both, given before anything
# that describes the stage (its status, its study), so counting stage ids tells an outsider
# nothing. The checks of the parameters' format, which need no stage, come first.
NOT_THIS_HIT = "This HIT is not part of this task."
NOT_THIS_STUDY = "This link belongs to another Prolific study."


def mturk_access_check(*, stage: Stage | None, assignment_id: str, hit_id: str,
                       worker_id: str) -> MturkAccess:
    """Check ExternalQuestion parameters against the stored HIT (and assignment, when known);
    a HIT past its expiry opens only the assignments accepted before (HitExpired). `stage` None
    (the URL names no MTurk stage) is refused as a HIT of another task is (NOT_THIS_HIT)."""
    hit_id = _external_id(hit_id, "hitId")
    hit = (Hit.objects.filter(stage=stage, external_id=hit_id).first()
           if stage is not None else None)
    if hit is None:
        raise AccessDenied(NOT_THIS_HIT)
    expired = HitExpired("This HIT has expired, so it can no longer be accepted. Please return "
                         "it; other HITs of this task may still be available.")
    # A draft or closed stage opens nothing new (assignment_start refuses it too): refused
    # here, before a worker row is created for whatever workerId the URL carries, and a preview
    # must not show more than accepting would give. On a closed stage an assignment accepted
    # (and opened) before the close goes on within its duration, as MTurk lets it.
    preview = (assignment_id or "").strip() == MTURK_PREVIEW_ID
    _refuse_if_not_open(stage, existing=None if preview else lambda: _named_assignment(
        stage=stage, external_id=(assignment_id or "").strip(), hit=hit,
        worker_provider=Provider.MTURK, worker_external_id=(worker_id or "").strip()))
    if preview:
        if hit_is_expired(hit):
            raise expired
        return MturkAccess(hit=hit, assignment_id="", worker=None, preview=True)
    assignment_id = _external_id(assignment_id, "assignmentId")
    worker_ext = _external_id(worker_id, "workerId")
    existing = Assignment.objects.filter(external_id=assignment_id).select_related(
        "worker", "hit"
    ).first()
    if existing is not None and (
        existing.hit_id != hit.pk or existing.worker.provider != Provider.MTURK
        or existing.worker.external_id != worker_ext
    ):
        raise AccessDenied("This assignment belongs to another worker or HIT.")
    if existing is None and hit_is_expired(hit):
        # Accepted before the expiry: still opens (MTurk lets it be submitted until its
        # duration ends). New after it: made up, or a stale page; nothing is created.
        raise expired
    worker = worker_for(provider=Provider.MTURK, external_id=worker_ext)
    return MturkAccess(hit=hit, assignment_id=assignment_id, worker=worker, preview=False)


@dataclass
class ProlificAccess:
    worker: Worker
    session_id: str


def prolific_access_check(*, stage: Stage | None, pid: str, study_id: str,
                          session_id: str) -> ProlificAccess:
    """Check PROLIFIC_PID / STUDY_ID / SESSION_ID; the study must be this stage's study when the
    stage names one, and a known session must belong to the same participant. `stage` None (the
    URL names no Prolific stage) is refused as another study's link is (NOT_THIS_STUDY), and so
    is any study at a stage that is not open and names none (never published on Prolific, so no
    participant holds a link to it): only a link with the right STUDY_ID learns the status."""
    pid = _external_id(pid, "PROLIFIC_PID")
    study_id = _external_id(study_id, "STUDY_ID")
    session_id = _external_id(session_id, "SESSION_ID")
    if stage is None:
        raise AccessDenied(NOT_THIS_STUDY)
    expected = (stage.settings or {}).get("prolific_study_id") or ""

    def session_here() -> Assignment | None:
        return _named_assignment(stage=stage, external_id=session_id,
                                 worker_provider=Provider.PROLIFIC, worker_external_id=pid)

    # A stage that names no study and is no longer open refuses a link it never handed out,
    # but not a participant's own session on it (a simulated study closed while they work):
    # whoever holds one already knew the stage.
    if expected != study_id and (expected or (stage.status not in OPEN_STAGE_STATUSES
                                              and session_here() is None)):
        raise AccessDenied(NOT_THIS_STUDY)
    # Before the participant's worker row is created and Prolific is asked about the session;
    # on a stopped study, a session that was active before goes on within its duration.
    _refuse_if_not_open(stage, existing=session_here)
    existing = Assignment.objects.filter(stage=stage, external_id=session_id).select_related(
        "worker"
    ).first()
    if existing is not None and (
        existing.worker.provider != Provider.PROLIFIC or existing.worker.external_id != pid
    ):
        raise AccessDenied("This session belongs to another participant.")
    return ProlificAccess(worker=worker_for(provider=Provider.PROLIFIC, external_id=pid),
                          session_id=session_id)


# --- Assignment tokens --------------------------------------------------------------------------


class TokenExpired(AccessDenied):
    code = "token_expired"


def assignment_token_max_age() -> int:
    """Seconds a page's token stays valid (QAJ_TASK_TOKEN_MAX_AGE_SECONDS, default 24 hours):
    longer than any assignment is worked on; a page left open longer is reloaded, which issues a
    new token after the live checks of assignment_start, and restores the saved draft."""
    return int(getattr(settings, "QAJ_TASK_TOKEN_MAX_AGE_SECONDS", 24 * 3600))


def assignment_token_make(*, assignment: Assignment, link_id: int | None = None) -> str:
    """The signed token of a page of `assignment`; `link_id`: the in-house link it was opened
    through, which must stay live for the page to save (`assignment_access_recheck`)."""
    data: dict[str, int] = {"a": assignment.pk, "w": assignment.worker_id}
    if link_id is not None:
        data["l"] = link_id
    return signing.dumps(data, salt=ASSIGNMENT_SALT)


@dataclass(frozen=True)
class PageToken:
    assignment: Assignment
    # The in-house link the page was opened through; None for a crowd page (and for a token
    # made before tokens named their link).
    link_id: int | None


def page_token_resolve(*, token: str) -> PageToken:
    """The assignment a page token names, and the in-house link the page was opened through;
    AccessDenied when tampered or not matching, TokenExpired when older than
    `assignment_token_max_age()`."""
    try:
        data = signing.loads(token or "", salt=ASSIGNMENT_SALT,
                             max_age=assignment_token_max_age())
    except signing.SignatureExpired:
        raise TokenExpired("This page has been open too long. Reload it to go on: your saved "
                           "answers come back.") from None
    except signing.BadSignature:
        raise AccessDenied("This page's access token is not valid. Reload the task.") from None
    assignment = Assignment.objects.select_related("stage__project", "worker", "hit").filter(
        pk=data.get("a"), worker_id=data.get("w")
    ).first()
    if assignment is None:
        raise AccessDenied("This assignment does not exist.")
    link_id = data.get("l")
    return PageToken(assignment=assignment,
                     link_id=link_id if isinstance(link_id, int) else None)


def assignment_token_resolve(*, token: str) -> Assignment:
    """The assignment a page token names (`page_token_resolve`)."""
    return page_token_resolve(token=token).assignment


def assignment_access_recheck(*, assignment: Assignment,
                              link_id: int | None = None) -> None:
    """The permission a page was opened with must still hold when it saves, confirms or
    submits: the provider has not said the session is unknown (Prolific), the stage is still
    open, the worker is not blocked for this project, still holds a pass that counts of the
    qualification the stage requires (`qualification_check`), and an in-house page's link
    (`link_id`, named by its token) still opens it (`inhouse_page_link`). Raises the refusal the
    page shows; nothing is stored. A finished assignment is left to the caller (a repeated
    submit answers with the completion again, idempotently)."""
    if assignment_finished(assignment):
        return
    if server_state(assignment).get(SUPERSEDED_KEY):
        raise AssignmentClosed("You accepted this HIT again, so this copy of the page no longer "
                               "saves. Go on in the page of the HIT you accepted last: your "
                               "answers are there.", assignment=assignment)
    if assignment.verification == ParticipantVerification.FAILED:
        # Made up, or replaced by the participant's verified session: nothing more is stored,
        # late submit included (it would take redundancy slots from real work).
        raise SessionNotVerified("Prolific does not know this session for this participant, so "
                                 "these answers cannot be saved.")
    stage = assignment.stage
    if stage.status not in OPEN_STAGE_STATUSES and not closed_stage_lets_finish(assignment):
        # A closed MTurk/Prolific stage still takes the work of an assignment accepted before
        # the close, within its duration (the provider's own contract); nothing else.
        raise StageNotOpen("The researcher has closed this task, so these answers can no "
                           "longer be saved. Thank you for your work.")
    if worker_is_blocked_for(worker=assignment.worker, project=stage.project):
        raise WorkerBlocked("Your account can no longer take part in this study, so these "
                            "answers cannot be saved.")
    try:
        # The gate the page was opened through: a pass taken back since (its work rejected)
        # lets the page store nothing more, as its entry now refuses the worker.
        qualification_check(stage=stage, worker=assignment.worker)
    except QualificationRequired as exc:
        raise QualificationRequired(f"{exc.message} These answers cannot be saved.") from None
    if assignment.worker.provider == Provider.INHOUSE:
        if link_id is not None:
            # The link the page was opened through must still open it: a leaked link the
            # researcher revoked or reissued stops its open pages, even though the annotator
            # holds the new link (with which they reopen the same assignment).
            if inhouse_page_link(assignment=assignment, link_id=link_id) is None:
                raise LinkRevoked(PAGE_LINK_GONE)
            return
        # A token naming no link (made before tokens named theirs): once every link they held
        # for this stage is revoked or expired, their open pages stop saving too.
        links = list(InhouseLink.objects.filter(
            Q(stage__isnull=True) | Q(stage=stage), worker=assignment.worker,
            project=stage.project))
        if links and not any(inhouse_link_live(link) for link in links):
            raise LinkRevoked(PAGE_LINK_GONE)


PAGE_LINK_GONE = ("The link this page was opened with has been revoked or has expired, so these "
                  "answers cannot be saved. Open the task again from your current link (your "
                  "saved answers come back), or ask the researcher for a new one.")


# --- Rate-limit keys ----------------------------------------------------------------------------


def request_client_address(*, meta: Mapping[str, Any]) -> str:
    """The client's address for rate limiting. REMOTE_ADDR, unless
    `settings.QAJ_TRUSTED_PROXY_HEADER` names the header our own reverse proxy sets (e.g.
    "X-Forwarded-For" or "X-Real-IP"; off by default, because without such a proxy any client
    can send the header). Then the rightmost entry: the one our proxy appended; entries before
    it are whatever the client claimed."""
    header = (getattr(settings, "QAJ_TRUSTED_PROXY_HEADER", "") or "").strip()
    if header:
        key = header.upper().replace("-", "_")
        if not key.startswith("HTTP_"):
            key = f"HTTP_{key}"
        entries = [e.strip() for e in str(meta.get(key, "")).split(",") if e.strip()]
        if entries:
            return entries[-1][:64]
    return str(meta.get("REMOTE_ADDR", ""))


def request_worker_identity(*, query: Mapping[str, str], token: str = "") -> str:
    """Who a task request says it is, without a database query: the in-house link nonce or the
    assignment a signed token names, else an MTurk workerId or Prolific PROLIFIC_PID. For rate
    limiting only (the URL parameters are unverified; access is checked by the views). Empty
    when the request names nobody (an MTurk preview, a malformed link)."""
    if token:
        try:
            return "link:" + signing.Signer(salt=LINK_SALT).unsign(token)
        except signing.BadSignature:
            pass
        try:
            data = signing.loads(token, salt=ASSIGNMENT_SALT)
        except signing.BadSignature:
            return ""
        return f"assignment:{data.get('a')}" if isinstance(data, dict) else ""
    for name, prefix in (("workerId", "mturk"), ("PROLIFIC_PID", "prolific")):
        value = (query.get(name) or "").strip()
        if _EXTERNAL_ID.match(value):
            return f"{prefix}:{value}"
    return ""
