"""Which LERC version serves a project (selectors): the one rule the promotion service, the
scorers and the reports read (the estimates' and the routing's default judge is "the promoted
LERC"), so a report never reads the scores of a version that does not serve."""
from __future__ import annotations

from annotation.models import Project
from core import vocabulary
from metrics_app.models import ModelStatus, ModelVersion

# The versions a lookup means when it names no model: the regression (the stored name "lerc").
REGRESSION_MODEL_NAME = vocabulary.ModelKind.REGRESSION.model_name


def version_project_set(version: ModelVersion) -> frozenset[int]:
    """The ids of the projects a version trains on: its promotion scope."""
    return frozenset(version.projects.values_list("id", flat=True))


def promoted_model_version(*, name: str = REGRESSION_MODEL_NAME, project: Project | None = None,
                           projects=None) -> ModelVersion | None:
    """The served version: for exactly the project set `projects` (ids or projects; the
    promotion scope); else for `project` the most recently promoted one trained on it, or,
    when none was (a new project scored out of domain, as LERC is meant to be used), the most
    recently promoted one of the name."""
    promoted = (ModelVersion.objects.filter(name=name, status=ModelStatus.PROMOTED)
                .order_by("-promoted_at", "-id"))
    if projects is not None:
        wanted = frozenset(getattr(p, "id", p) for p in projects)
        return next((v for v in promoted if version_project_set(v) == wanted), None)
    if project is not None:
        own = promoted.filter(projects=project).first()
        if own is not None:
            return own
    return promoted.first()
