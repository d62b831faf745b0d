"""Writes on projects (creation and settings changes from the API and the admin)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from annotation.models import Project, TaskKind

from .stages import project_edit_errors


class ProjectShareError(PermissionError):
    """Only a project's owner (or a superuser) may change who it is shared with."""


class ProjectOwnershipError(ValueError):
    """An import named an owner or collaborator that cannot be given the project."""


def users_by_username(usernames: Iterable[str]) -> dict[str, Any]:
    """{username: user} for every name, or ProjectOwnershipError naming the unknown ones."""
    usernames = set(usernames)
    users = {u.username: u for u in get_user_model().objects.filter(username__in=usernames)}
    missing = sorted(usernames - set(users))
    if missing:
        raise ProjectOwnershipError(f"unknown users: {', '.join(missing)}")
    return users


def project_owner_and_share(*, project: Project, owner=None, share: Iterable = ()) -> None:
    """Give an imported project its owner and add collaborators (never removes one).

    An owner is only given to a project that has none or already has that owner: taking a
    researcher's project away is done deliberately in the admin, not as a side effect of
    importing more data into it."""
    if owner is not None and project.owner_id not in (None, owner.pk):
        raise ProjectOwnershipError(
            f"project {project.slug!r} belongs to {project.owner.get_username()!r}; change its "
            "owner in the admin (Projects → owner), not with an import")
    if owner is not None and project.owner_id is None:
        project.owner = owner
        project.save(update_fields=["owner", "updated_at"])
    share = [user for user in share if user.pk != project.owner_id]
    # The sharing rule of every door (the owner aside: an import keeps a project's owner).
    refusals = share_refusals(owner=None, users=share,
                              kept=project.shared_with.values_list("pk", flat=True))
    if refusals:
        raise ProjectOwnershipError("; ".join(refusals))
    if share:
        project.shared_with.add(*share)


KIND_PHRASES = {TaskKind.LIKERT: "answer correctness", TaskKind.AB: "which answer is better",
                TaskKind.MC: "reading comprehension"}


def readable_title(slug: str, kind: str) -> str:
    """A title annotators can read when none was given: "starc" (multiple choice) becomes
    "Starc: reading comprehension", "rita_mocha-v2" "Rita mocha v2: answer correctness"."""
    words = " ".join(slug.replace("-", " ").replace("_", " ").split()) or "Study"
    words = words[0].upper() + words[1:]
    phrase = KIND_PHRASES.get(kind)
    return f"{words}: {phrase}" if phrase else words


@transaction.atomic
def project_create(
    *, owner, slug: str, title: str, kind: str, shared_with: Iterable[str] = (), **settings: Any
) -> Project:
    """Create a project owned by `owner`; `shared_with` lists usernames of collaborators."""
    project = Project(owner=owner, slug=slug, title=title, kind=kind, **settings)
    project.full_clean()
    project.save()
    _set_shared_with(project=project, usernames=shared_with)
    return project


def project_share_check(*, project: Project, user) -> None:
    """Refuse (`ProjectShareError`) a change of who `project` is shared with by anyone but its
    owner or a superuser: a collaborator may not add others or remove the owner's choice. The
    API's update and the admin's project form both ask here."""
    if not (user.is_superuser or project.owner_id == user.pk):
        raise ProjectShareError("only the project's owner may change who it is shared with")


def project_owner_named(*, project: Project, user, username: str):
    """The account `username` names as `project`'s new owner, for `user`: the current owner
    (naming them is no change); else ProjectShareError for anyone but a superuser, asked
    before the name is looked up, so a researcher cannot tell an account that exists from
    one that does not by the answer (it was 403 for one, "unknown user" for the other: any
    researcher could list the platform's accounts); for a superuser ValidationError on
    `owner` when no account has the name."""
    if project.owner_id is not None and username == project.owner.get_username():
        return project.owner
    if not user.is_superuser:
        raise ProjectShareError("only a superuser may change a project's owner")
    owner = get_user_model().objects.filter(username=username).first()
    if owner is None:
        raise ValidationError({"owner": [f"unknown user: {username}"]})
    return owner


# Fixed once a project exists: its items were validated against the kind, and the slug is in
# every link, export file name and API path handed out.
PROJECT_FIXED_FIELDS = ("slug", "kind")


@transaction.atomic
def project_update(*, project: Project, user, data: dict[str, Any]) -> Project:
    """Change a project's title, instructions, settings or (superusers only) owner, named by
    username (`project_owner_named`). The kind
    never changes: items were validated against it. Sharing changes are reserved to the
    owner. What live stages still read is refused while they are live, and the budget is held
    to what they commit (`annotation.services.stages.project_edit_errors`)."""
    data = dict(data)
    fixed = {name: "cannot be changed after the project is created"
             for name in PROJECT_FIXED_FIELDS
             if name in data and data[name] != getattr(project, name)}
    if fixed:
        raise ValidationError(fixed)
    if "owner" in data:
        data["owner"] = project_owner_named(project=project, user=user, username=data["owner"])
    refused = project_edit_errors(project=project, changes=data)
    if refused:
        raise ValidationError(refused)
    usernames = data.pop("shared_with", None)
    if usernames is not None:
        project_share_check(project=project, user=user)
    for name, value in data.items():
        setattr(project, name, value)
    if data:
        project.full_clean()
        project.save(update_fields=[*data, "updated_at"])
    if usernames is not None:
        _set_shared_with(project=project, usernames=usernames)
    return project


def shareable_users(project: Project | None = None):
    """The accounts `project` can be shared with, as `share_refusals` allows them: active
    researcher (staff) accounts and superusers, and those it is shared with already (a
    collaborator deactivated since keeps the share, which opens nothing until they are
    active again: the owner's next save must not drop it unseen). The admin's picker lists
    only these, so an annotator's name, or a deactivated account's the project is not shared
    with, is never shown to other researchers."""
    keep = Q(pk__in=project.shared_with.values("pk")) if project is not None and project.pk \
        else Q(pk__in=[])
    return get_user_model().objects.filter(
        (Q(is_staff=True) | Q(is_superuser=True)) & Q(is_active=True) | keep
    ).order_by("username")


def share_refusals(*, owner, users, kept: Iterable[int] = ()) -> list[str]:
    """Why `users` cannot be the project's collaborators, one line each: the owner already has
    the project, and only an active researcher (staff) account can open one
    (`projects_visible_to`), so sharing with anyone else gives them nothing. `kept`: the ids
    the project is shared with already, whose share stays whatever their account is now (a
    form or request that lists them again keeps them). The API, the admin's project form and
    `import_data --share` all ask here."""
    refusals = []
    kept = set(kept)
    for user in users:
        name = user.get_username()
        if owner is not None and user.pk == owner.pk:
            refusals.append(f"{name} owns the project: sharing it with them adds nothing")
        elif user.pk in kept:
            continue
        elif not (user.is_active and (user.is_staff or user.is_superuser)):
            refusals.append(_not_a_researcher(name))
    return refusals


def _not_a_researcher(name: str) -> str:
    return f"{name} is not an active researcher (staff) account: they could not open the project"


def _set_shared_with(*, project: Project, usernames: Iterable[str]) -> None:
    """Share `project` with the accounts these usernames name (the API's door). A name no
    account `shareable_users` offers has is refused as a name no account has: the admin's
    picker never lists those accounts, and the answer "unknown users" for one name and "not
    an active researcher" for another told a researcher which accounts exist on the
    platform (annotators', deactivated researchers')."""
    usernames = set(usernames)
    offered = Q(pk__in=shareable_users(project).values("pk")) | Q(pk=project.owner_id)
    users = list(get_user_model().objects.filter(offered, username__in=usernames))
    missing = usernames - {u.username for u in users}
    refusals = [_not_a_researcher(name) for name in sorted(missing)]
    refusals += share_refusals(owner=project.owner, users=users,
                               kept=project.shared_with.values_list("pk", flat=True))
    if refusals:
        raise ValidationError({"shared_with": refusals})
    project.shared_with.set(users)
