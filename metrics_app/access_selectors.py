"""Who may reach metrics_app's own objects, built on annotation/access_selectors.py (the rule
and the project doors): the same 404 for a missing object and for one the user may not see."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet
from django.http import Http404

from annotation.access_selectors import projects_visible_to
from annotation.models import Project

from .models import ItemScoringJob, JudgeJob, ModelVersion, ScoringJob

NO_SUCH_MODEL_VERSION = "No such model version."
NO_SUCH_SCORING_JOB = "No such scoring job."
NO_SUCH_JUDGE_JOB = "No such judge job."


@dataclass(frozen=True)
class ModelVersionAccess:
    version: ModelVersion
    # The version's projects the user may see by name (None: all of them, for a superuser);
    # the others are counted on the card, not named.
    visible_project_ids: set[int] | None


def model_versions_visible_to(user) -> QuerySet[ModelVersion]:
    """Every version for a superuser (a version trained on no project included); otherwise the
    versions trained on a project the user may see, as in the admin."""
    if user.is_superuser:
        return ModelVersion.objects.all()
    return ModelVersion.objects.filter(projects__in=projects_visible_to(user)).distinct()


def access_model_version(user, version_id: int) -> ModelVersionAccess:
    """A LERC model version `user` may see (its card page); Http404 otherwise."""
    version = model_versions_visible_to(user).filter(pk=version_id).first()
    if version is None:
        raise Http404(NO_SUCH_MODEL_VERSION)
    visible_ids = None if user.is_superuser else set(
        projects_visible_to(user).values_list("pk", flat=True))
    return ModelVersionAccess(version=version, visible_project_ids=visible_ids)


def item_scoring_jobs_visible_to(user) -> QuerySet[ItemScoringJob]:
    """Scoring jobs of posted items have no project: each researcher sees the jobs they
    requested, a superuser all (the API's job door and the admin list)."""
    jobs = ItemScoringJob.objects.all()
    return jobs if user.is_superuser else jobs.filter(requested_by=user)


def access_item_scoring_job(user, job_id: int) -> ItemScoringJob:
    """A scoring job of posted items `user` may see; Http404 otherwise. Its `items` column (the
    posted texts) is deferred."""
    job = item_scoring_jobs_visible_to(user).defer("items").filter(pk=job_id).first()
    if job is None:
        raise Http404(NO_SUCH_SCORING_JOB)
    return job


def access_project_job(project: Project, model: type[ScoringJob] | type[JudgeJob],
                       job_id: int) -> ScoringJob | JudgeJob:
    """A scoring job or judge job of a project an `access_project*` door opened (the API's and
    the metrics page's cancel); Http404 for a job of any other project."""
    job = model.objects.filter(project=project, pk=job_id).first()
    if job is None:
        raise Http404(NO_SUCH_JUDGE_JOB if model is JudgeJob else NO_SUCH_SCORING_JOB)
    return job
