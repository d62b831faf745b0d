"""Who may reach which object: the one owner of visibility for researchers' pages, the REST
API and the admin's own views.

A researcher (a staff account) sees the projects they own or that are shared with them; a
superuser sees every project; anonymous, inactive and non-staff users see none
(`projects_visible_to`), as at the admin's and the API's doors. Everything else a
researcher opens hangs off a project, so its door first opens the project.

Every `access_*` door answers the same `Http404` for an object that does not exist and for one
in a project the user may not see: a 403 would tell a stranger the slug exists. A page or an API
that looks something up for a researcher calls the door; it never filters by owner, sharing or
superuser itself. metrics_app's objects have their doors in metrics_app/access_selectors.py,
built on these.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.http import Http404

from .domain.numbers import row_id_of
from .models import Assignment, InhouseLink, Item, Judgment, Project, Stage, Worker

NO_SUCH_PROJECT = "No such project."
NO_SUCH_STAGE = "No such stage."
NO_SUCH_ITEM = "No such item."
NO_SUCH_WORKER = "No such worker in this project."
NO_SUCH_JUDGMENT = "No such judgment in this project."


# --- The rule -----------------------------------------------------------------------------------


def projects_visible_to(user) -> QuerySet[Project]:
    """Projects `user` may see: all for a superuser, otherwise the ones they own or that are
    shared with them; none for anonymous, inactive or non-staff users. Staff is what the admin
    and the API (`annotation.permissions.IsResearcher`) require; a researcher whose staff flag
    was removed keeps their session cookie, and without this the pages that only ask for a
    login (dashboards, adjudication, metrics) still showed and changed their projects."""
    if user is None or not user.is_authenticated or not user.is_active:
        return Project.objects.none()
    if user.is_superuser:
        return Project.objects.all()
    if not user.is_staff:
        return Project.objects.none()
    # A subquery on the through table rather than a join, so no row is duplicated and callers
    # can annotate and aggregate without distinct().
    shared = Project.shared_with.through.objects.filter(user_id=user.pk).values("project_id")
    return Project.objects.filter(Q(owner_id=user.pk) | Q(pk__in=shared))


def workers_visible_to(user) -> QuerySet[Worker]:
    """Workers who have worked on (or hold a link to) a project visible to `user`, and the
    user's own in-house annotators (one added by hand before any link is theirs to find)."""
    if user is not None and user.is_authenticated and user.is_active and user.is_superuser:
        return Worker.objects.all()
    projects = projects_visible_to(user).values("pk")
    visible = (
        Q(pk__in=Assignment.objects.filter(stage__project__in=projects).values("worker_id"))
        | Q(pk__in=Judgment.objects.filter(item__project__in=projects).values("worker_id"))
        | Q(pk__in=InhouseLink.objects.filter(project__in=projects).values("worker_id"))
    )
    if user is not None and user.is_authenticated and user.is_active and user.is_staff:
        visible |= Q(researcher_id=user.pk)
    return Worker.objects.filter(visible)


def researchers_beside(user) -> QuerySet:
    """The accounts whose doings about a shared thing (a worker) `user` may read: themselves
    and the owners of and researchers shared on the projects `user` may see; every account
    for a superuser. Another study's researcher is none of them: that they blocked, renamed
    or wrote about a worker is their study's, not `user`'s to know. The admin's "Unblock
    selected workers" names only these researchers' blocks, and a worker's history page
    shows only their entries."""
    accounts = get_user_model().objects.all()
    if user is not None and user.is_authenticated and user.is_active and user.is_superuser:
        return accounts
    visible = projects_visible_to(user)
    return accounts.filter(
        Q(pk=getattr(user, "pk", None))
        | Q(pk__in=visible.values("owner_id"))
        | Q(pk__in=Project.shared_with.through.objects.filter(
            project__in=visible).values("user_id")))


def worker_shared_beyond(user, worker: Worker) -> bool:
    """Whether `worker` worked on (or holds a link to) a project `user` may not see: their
    name and email are then another study's too, and only a superuser changes them."""
    if user is not None and user.is_authenticated and user.is_active and user.is_superuser:
        return False
    hidden = Project.objects.exclude(pk__in=projects_visible_to(user).values("pk")).values("pk")
    return (Assignment.objects.filter(worker=worker, stage__project__in=hidden).exists()
            or Judgment.objects.filter(worker=worker, item__project__in=hidden).exists()
            or InhouseLink.objects.filter(worker=worker, project__in=hidden).exists())


class QueuedAccessLost(PermissionError):
    """Raised when queued work runs for a researcher who no longer sees its project
    (`queued_access_refusal`'s message): the job fails saying so, nothing is stored or paid."""


def queued_access_check(*, user, project: Project) -> None:
    """`queued_access_refusal` for the jobs' runs: QueuedAccessLost when it refuses."""
    refusal = queued_access_refusal(user=user, project=project)
    if refusal:
        raise QueuedAccessLost(refusal)


def queued_access_refusal(*, user, project: Project) -> str:
    """Why work `user` queued for `project` (a background publish, a scoring or judge job) may
    not run now: "" while they still see the project, or when no account queued it (a command,
    the beat). Asked when the work runs, so a share revoked or a staff flag removed after the
    click stops what was queued, as their next page would. The background publish passes an
    account deleted since the click as an anonymous user (it keeps the id and looks it up):
    refused, as nobody who may spend the project's money asks for it any more. A scoring or
    judge job keeps no trace of a deleted requester (its `requested_by` is cleared), so it
    runs as a command's would."""
    if user is None or projects_visible_to(user).filter(pk=project.pk).exists():
        return ""
    if not user.is_authenticated:
        return "not run: the account that queued it has been deleted since"
    return (f"not run: {user.get_username()}, who queued it, no longer has access to this "
            "project")


# --- The doors ----------------------------------------------------------------------------------


def access_project(user, slug: str) -> Project:
    """The project with this slug when `user` may see it; Http404 otherwise (missing and not
    visible answer alike)."""
    project = projects_visible_to(user).filter(slug=slug).first()
    if project is None:
        raise Http404(NO_SUCH_PROJECT)
    return project


def access_project_by_pk(user, pk) -> Project:
    """`access_project` for URLs that carry the project's id (the admin's own views)."""
    pk = row_id_of(pk)
    project = projects_visible_to(user).filter(pk=pk).first() if pk is not None else None
    if project is None:
        raise Http404(NO_SUCH_PROJECT)
    return project


def project_stage_by_ref(*, project: Project, ref: str) -> Stage | None:
    """The one rule for naming a stage on the command line, in pages and in report URLs: by its
    id (ASCII digits) or else by its name; None when the project has no such stage."""
    ref = (ref or "").strip()
    if "\x00" in ref:
        # PostgreSQL can neither store nor compare text with NUL (a 500 where SQLite answered
        # "no such stage"), so no stage is named so.
        return None
    stage_id = row_id_of(ref)
    if stage_id is not None:
        stage = Stage.objects.filter(project=project, pk=stage_id).first()
        if stage is not None:
            return stage
    return Stage.objects.filter(project=project, name=ref).first()


def access_stage(project: Project, ref: str | int, *,
                 stages: QuerySet[Stage] | None = None) -> Stage:
    """A stage of a project an `access_project*` door opened: by id when `ref` is an int (URL
    paths), else by `project_stage_by_ref`'s rule (id or name: query strings, report URLs).
    `stages` is the (annotated) rows to take it from, the project's stages by default. Http404
    when the project has no such stage."""
    if isinstance(ref, int):
        rows = stages if stages is not None else Stage.objects.filter(project=project)
        stage = rows.filter(project=project, pk=ref).first()
    else:
        stage = project_stage_by_ref(project=project, ref=ref)
        if stage is not None and stages is not None:
            stage = stages.filter(pk=stage.pk).first()
    if stage is None:
        raise Http404(NO_SUCH_STAGE)
    return stage


def access_item(project: Project, item_id: int) -> Item:
    """An item of a project an `access_project*` door opened; Http404 when it has none such."""
    item = Item.objects.filter(project=project, pk=item_id).first()
    if item is None:
        raise Http404(NO_SUCH_ITEM)
    return item


def access_judgment(project: Project, judgment_id: int) -> Judgment:
    """A judgment of a project an `access_project*` door opened (the spot-check page);
    Http404 when it has none such."""
    judgment = Judgment.objects.filter(item__project=project, pk=judgment_id).first()
    if judgment is None:
        raise Http404(NO_SUCH_JUDGMENT)
    return judgment


def access_project_worker(project: Project, worker_id: int) -> Worker:
    """A worker who judged items of a project an `access_project*` door opened (the
    dashboard's block and unblock); Http404 for any other worker id."""
    worker = Worker.objects.filter(
        pk=worker_id,
        pk__in=Judgment.objects.filter(item__project=project).values("worker_id")).first()
    if worker is None:
        raise Http404(NO_SUCH_WORKER)
    return worker
