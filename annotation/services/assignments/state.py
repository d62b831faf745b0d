"""What the assignment modules share: which stages are open, which assignments are finished or
still live, the server-owned part of the draft, and the answer rules of a project."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import (
    QuerySet,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.domain.answers import AnswerRules
from annotation.models import (
    Assignment,
    AssignmentStatus,
    ExperimentMode,
    Stage,
    StageStatus,
    TaskKind,
)

OPEN_STAGE_STATUSES = (StageStatus.PUBLISHED, StageStatus.COLLECTING)


FINISHED_STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED,
                     AssignmentStatus.REJECTED)


MAX_DRAFT_BYTES = 200_000


# Server-owned part of the draft (pilot guesses locked before the paragraph is shown); the
# page's autosave can never overwrite it.
SERVER_DRAFT_KEY = "_server"


# MC modes in which each item is confirmed on its own before the next one is shown.
CONFIRM_MODES = (ExperimentMode.QA, ExperimentMode.GUESSING, ExperimentMode.PILOT)


# Late confirms refused because others filled the item meanwhile (item id -> message): the page
# counts them as settled and the submit no longer asks for them.
REFUSED_KEY = "refused"


def answer_rules(project, stage=None) -> AnswerRules:
    """What an answer is checked against: the project's settings, and the stage's `ab_ties`."""
    return AnswerRules(
        kind=project.kind,
        mode=project.experiment_mode if project.kind == TaskKind.MC else "",
        justification_min_length=project.justification_min_length,
        aspects=list(project.aspects or []),
        aspect_preferences=list(project.aspect_preferences or []),
        scale_size=len(project.scale_labels or []) or 5,
        ties=project.kind == TaskKind.AB and stage is not None
        and bool((stage.settings or {}).get("ab_ties")),
    )


def _cutoff(project, now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(minutes=project.assignment_timeout_minutes)


def _live_assignments(stage: Stage, now: datetime | None = None) -> QuerySet[Assignment]:
    """In-progress assignments of the stage that have not timed out."""
    return Assignment.objects.annotate(
        seen=Coalesce("last_seen_at", "started_at")
    ).filter(stage=stage, status=AssignmentStatus.IN_PROGRESS, seen__gte=_cutoff(stage.project, now))


def _server_state(assignment: Assignment) -> dict:
    return dict((assignment.draft or {}).get(SERVER_DRAFT_KEY) or {})


def _save_server_state(assignment: Assignment, state: dict) -> None:
    assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
    assignment.last_seen_at = timezone.now()
    assignment.save(update_fields=["draft", "last_seen_at"])
