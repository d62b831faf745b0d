"""What the metrics commands share: projects named on the command line."""
from __future__ import annotations

from collections.abc import Iterable

from django.core.management.base import CommandError

from annotation.models import Project


def projects_by_slug(slugs: Iterable[str]) -> list[Project]:
    """The projects with these slugs, in order; CommandError naming the first unknown slug."""
    projects = []
    for slug in slugs:
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"no project with slug {slug!r}")
        projects.append(project)
    return projects
