"""What the assignment modules share: which stages are open, which assignments are finished or
still live, the server-owned part of the draft, and the answer rules of a project."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

# Re-exported for the assignment modules (`X as X`); defined below the services, where the
# selectors read them too.
from annotation.assignment_draft import REFUSED_KEY as REFUSED_KEY
from annotation.assignment_draft import SERVER_DRAFT_KEY as SERVER_DRAFT_KEY
from annotation.assignment_draft import server_state
from annotation.domain.answers import AnswerRules
from annotation.models import OPEN_STAGE_STATUSES as OPEN_STAGE_STATUSES
from annotation.models import (
    Assignment,
    AssignmentStatus,
    ExperimentMode,
    Hit,
    HitStatus,
    Item,
    ParticipantVerification,
    Stage,
    StageStatus,
    TaskKind,
)


def stage_not_open_message(stage: Stage) -> str:
    """What an annotator reads when a stage takes no work now, by why (it said "not open at
    the moment" whether the stage was a draft, paused with every HIT taken, or over)."""
    if stage.status == StageStatus.DRAFT:
        return ("This task has not started yet. Your link will work once the researcher "
                "opens it.")
    if stage.status == StageStatus.REVIEWING:
        return ("This task has collected all the answers it asked for and is paused while "
                "the researcher reviews them. Your link will work again if the researcher "
                "reopens the task; there is nothing to do until then.")
    return "This task has ended. Thank you \u2014 there is nothing more to do here."


FINISHED_STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED,
                     AssignmentStatus.REJECTED)


MAX_DRAFT_BYTES = 200_000


# MC modes in which each item is confirmed on its own before the next one is shown.
CONFIRM_MODES = (ExperimentMode.QA, ExperimentMode.GUESSING, ExperimentMode.PILOT)


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


def unverified_timeout() -> timedelta:
    """How long a session the provider has not verified (Prolific: SESSION_ID not found yet in
    the study's submissions) holds its items without activity:
    `QAJ_PROLIFIC_UNVERIFIED_TIMEOUT_MINUTES` (default 45), whatever the project's timeout."""
    return timedelta(minutes=float(getattr(settings, "QAJ_PROLIFIC_UNVERIFIED_TIMEOUT_MINUTES",
                                           45)))


def _unverified_cutoff(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - unverified_timeout()


def _idle_past_timeout(assignment: Assignment, now: datetime | None = None) -> bool:
    """Idle past the project's timeout, or past the shorter one of an unverified session."""
    seen = assignment.last_seen_at or assignment.started_at
    if seen < _cutoff(assignment.stage.project, now):
        return True
    return (assignment.verification == ParticipantVerification.PENDING
            and seen < _unverified_cutoff(now))


def _live_assignments(stage: Stage, now: datetime | None = None) -> QuerySet[Assignment]:
    """In-progress assignments of the stage that have not timed out (an unverified session
    times out sooner, `unverified_timeout`)."""
    return Assignment.objects.annotate(
        seen=Coalesce("last_seen_at", "started_at")
    ).filter(stage=stage, status=AssignmentStatus.IN_PROGRESS, seen__gte=_cutoff(stage.project, now)
             ).exclude(verification=ParticipantVerification.PENDING,
                       seen__lt=_unverified_cutoff(now))


def hit_is_expired(hit: Hit, now: datetime | None = None) -> bool:
    """The HIT takes no new workers: expired on the provider (by us, or its lifetime ran out)."""
    if hit.status == HitStatus.EXPIRED:
        return True
    return hit.expires_at is not None and hit.expires_at <= (now or timezone.now())


def _server_state(assignment: Assignment) -> dict:
    return server_state(assignment)


def _save_server_state(assignment: Assignment, state: dict) -> None:
    assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
    assignment.last_seen_at = timezone.now()
    assignment.save(update_fields=["draft", "last_seen_at"])


def stage_items(stage: Stage) -> QuerySet[Item]:
    """Items released in the stage: its own list, or every non-excluded project item."""
    if stage.items.exists():
        qs = stage.items.all()
    else:
        qs = Item.objects.filter(project_id=stage.project_id)
    return qs.filter(excluded=False)
