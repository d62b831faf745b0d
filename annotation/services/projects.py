"""Writes on projects (creation and settings changes from the API and the admin)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.models import Project


class ProjectShareError(PermissionError):
    """Only a project's owner (or a superuser) may change who it is shared with."""


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


@transaction.atomic
def project_update(*, project: Project, user, data: dict[str, Any]) -> Project:
    """Change a project's title, instructions or settings. The kind never changes: items were
    validated against it. Sharing changes are reserved to the owner."""
    data = dict(data)
    usernames = data.pop("shared_with", None)
    if usernames is not None and not (user.is_superuser or project.owner_id == user.pk):
        raise ProjectShareError("only the project's owner may change who it is shared with")
    for name, value in data.items():
        setattr(project, name, value)
    if data:
        project.full_clean()
        project.save(update_fields=[*data, "updated_at"])
    if usernames is not None:
        _set_shared_with(project=project, usernames=usernames)
    return project


def _set_shared_with(*, project: Project, usernames: Iterable[str]) -> None:
    usernames = set(usernames)
    users = list(get_user_model().objects.filter(username__in=usernames))
    missing = usernames - {u.username for u in users}
    if missing:
        raise ValueError(f"unknown users: {', '.join(sorted(missing))}")
    project.shared_with.set(users)
