"""When an assignment has timed out: the project's timeout, the shorter one of a session the
provider has not verified, and MTurk's own assignment duration for HIT assignments. Which
assignments are still live (their items held), which are late (timed out while their items
were free for others), and the sweep that releases abandoned ones."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.assignment_draft import server_state
from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    Judgment,
    ParticipantVerification,
    Stage,
)
from annotation.services.redundancy import adaptive_targets_refresh

from .state import SERVER_DRAFT_KEY


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


def live_assignments(stage: Stage, now: datetime | None = None) -> QuerySet[Assignment]:
    """In-progress assignments of the stage that have not timed out (an unverified session
    times out sooner, `unverified_timeout`)."""
    return Assignment.objects.annotate(
        seen=Coalesce("last_seen_at", "started_at")
    ).filter(stage=stage, status=AssignmentStatus.IN_PROGRESS, seen__gte=_cutoff(stage.project, now)
             ).exclude(verification=ParticipantVerification.PENDING,
                       seen__lt=_unverified_cutoff(now))


# Server state key: when the assignment was first seen timed out. Kept so that an autosave that
# brings it back to life does not hide that its items may have gone to other workers meanwhile.
LATE_KEY = "timed_out_at"


TIMED_OUT_MESSAGE = ("This assignment timed out and its items may have gone to other workers. "
                     "Submit your answers now: those still needed will be kept.")


def is_late(assignment: Assignment, now: datetime | None = None) -> bool:
    """Timed out (released by the beat task, flagged earlier, or idle past the project's
    timeout) while its items were free for others. Assignments of a provider HIT follow the
    provider's own duration and are never late here."""
    if assignment.hit_id is not None:
        return False
    if assignment.status == AssignmentStatus.RETURNED or server_state(assignment).get(LATE_KEY):
        return True
    return (assignment.status == AssignmentStatus.IN_PROGRESS
            and _idle_past_timeout(assignment, now))


def mark_late(assignment: Assignment) -> None:
    """Remember (once) that the assignment was seen timed out, in its server state."""
    state = server_state(assignment)
    if state.get(LATE_KEY):
        return
    state[LATE_KEY] = timezone.now().isoformat()
    assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
    Assignment.objects.filter(pk=assignment.pk).update(draft=assignment.draft)


def late_refusal_message(rows: list[AssignmentItem]) -> str:
    """Why the answers to these items of a late assignment could not be stored (others filled
    them after the timeout, `items_filled_since_timeout`)."""
    numbers = ", ".join(str(row.position + 1) for row in rows)
    which = f"item {numbers}" if len(rows) == 1 else f"items {numbers}"
    return (f"Your assignment timed out, and {which} has since been judged by enough other "
            f"workers, so your answer to it could not be stored." if len(rows) == 1 else
            f"Your assignment timed out, and {which} have since been judged by enough other "
            f"workers, so your answers to them could not be stored.")


def newer_page_refusal_message(rows: list[AssignmentItem]) -> str:
    """Why the answers to these items of a late assignment were not stored: its worker opened
    the task again after the timeout and holds them in the newer page."""
    numbers = ", ".join(str(row.position + 1) for row in rows)
    if len(rows) == 1:
        return (f"Your assignment timed out and you opened this task again since: item {numbers} "
                f"is in your newer page, so your answer to it was not stored here. Answer it "
                f"there.")
    return (f"Your assignment timed out and you opened this task again since: items {numbers} "
            f"are in your newer page, so your answers to them were not stored here. Answer them "
            f"there.")


@transaction.atomic
def assignment_release_abandoned(*, now: datetime | None = None) -> int:
    """Mark in-progress assignments idle for longer than their project's timeout RETURNED, which
    frees their items for other workers; sessions the provider has not verified (Prolific) after
    `unverified_timeout()` of idleness, whatever the project's timeout. Assignments tied to a
    provider HIT follow MTurk's own assignment duration instead
    (`_release_expired_hit_assignments`). The items an assignment confirmed one by one
    (STARC) are judgments that stop counting once it is returned: their adaptive targets are
    recomputed, as after a rejection."""
    now = now or timezone.now()
    from annotation.models import Project

    released = 0
    timeouts = Project.objects.filter(
        stages__assignments__status=AssignmentStatus.IN_PROGRESS
    ).values_list("assignment_timeout_minutes", flat=True).distinct()
    for minutes in set(timeouts):
        released += _return(Assignment.objects.annotate(
            seen=Coalesce("last_seen_at", "started_at")).filter(
            status=AssignmentStatus.IN_PROGRESS,
            hit__isnull=True,
            stage__project__assignment_timeout_minutes=minutes,
            seen__lt=now - timedelta(minutes=minutes),
        ))
    # Sessions the provider has not verified hold their items for a short while only.
    released += _return(Assignment.objects.annotate(
        seen=Coalesce("last_seen_at", "started_at")).filter(
        status=AssignmentStatus.IN_PROGRESS, hit__isnull=True,
        verification=ParticipantVerification.PENDING, seen__lt=_unverified_cutoff(now),
    ))
    released += _release_expired_hit_assignments(now=now)
    return released


def _return(abandoned: QuerySet[Assignment]) -> int:
    """Mark these in-progress assignments RETURNED (how many were), and recompute the adaptive
    targets of the judgments they stored before (confirmed items), which stop counting."""
    ids = list(abandoned.values_list("pk", flat=True))
    if not ids:
        return 0
    returned = Assignment.objects.filter(pk__in=ids, status=AssignmentStatus.IN_PROGRESS) \
        .update(status=AssignmentStatus.RETURNED)
    adaptive_targets_refresh(judgments=Judgment.objects.filter(assignment_id__in=ids))
    return returned


# After MTurk's assignment duration nobody can submit the assignment there any more; the margin
# covers a submit on its way when the duration ends.
HIT_ASSIGNMENT_GRACE = timedelta(minutes=10)


def _release_expired_hit_assignments(*, now: datetime) -> int:
    """HIT assignments still in progress after the HIT type's assignment duration (+ grace) that
    the provider never confirmed: MTurk has returned or abandoned them (or they never existed
    there: a made-up assignmentId). Releasing them frees their slot of the HIT."""
    from annotation.providers.mturk_protocol import assignment_duration_seconds

    released = 0
    stages = Stage.objects.filter(
        assignments__status=AssignmentStatus.IN_PROGRESS, assignments__hit__isnull=False,
    ).select_related("project").distinct()
    for stage in stages:
        cutoff = now - timedelta(seconds=assignment_duration_seconds(stage)) - HIT_ASSIGNMENT_GRACE
        released += _return(Assignment.objects.filter(
            stage=stage, status=AssignmentStatus.IN_PROGRESS, hit__isnull=False,
            provider_confirmed_at__isnull=True, started_at__lt=cutoff,
        ))
    return released
