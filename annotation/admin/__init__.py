"""Admin for the annotation models.

Researchers (staff, not superuser) see only projects they own or that are shared with them, and
only those projects' items, stages, HITs, assignments, judgments and workers: every admin here
filters `get_queryset` through `projects_visible_to` (annotation/access_selectors.py) and restricts foreign-key choices the same
way. Judgments and stage transitions are append-only and therefore read-only. Progress columns
come from `annotation.selectors` in a fixed number of grouped queries per page.

Modules: `base` (scoping and shared pieces), `projects` (projects, items, stages), `crowd`
(HITs, assignments, workers, judgments), `actions` (the admin actions, each calling one service).
"""
from . import crowd, projects  # noqa: F401  (importing them registers their admins)
from .base import ProjectScopedAdmin, ReadOnlyAdmin

__all__ = [
    "ProjectScopedAdmin",
    "ReadOnlyAdmin",
]
