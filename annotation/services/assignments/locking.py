"""The locks assignment writes take, and the guard every write after an assignment's start
passes: the assignment row locked and still open to work (`assignment_open_locked`), and the
item asked about part of it (`assignment_item_row`)."""
from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import F

from annotation.domain.answers import item_id_of
from annotation.models import Assignment, AssignmentItem, AssignmentStatus, Stage

from .comprehension import refuse_if_return_requested
from .errors import AssignmentClosed, SubmissionInvalid
from .state import assignment_finished
from .timeouts import TIMED_OUT_MESSAGE, is_late, mark_late


def stage_write_lock(stage: Stage) -> None:
    """SQLite allows one writer; take the lock before reading counts so two allocators queue up
    instead of both reading the same counts (or dead-locking on the upgrade). No-op elsewhere:
    PostgreSQL allocators lock the item rows they take."""
    if connection.vendor == "sqlite":
        Stage.objects.filter(pk=stage.pk).update(updated_at=F("updated_at"))


def assignment_lock(pk: int) -> Assignment:
    """The assignment row, locked for this transaction. SQLite has no row locks and would let two
    transactions read and then dead-lock on the write: a no-op write takes its lock first."""
    if connection.vendor == "sqlite":
        Assignment.objects.filter(pk=pk).update(last_seen_at=F("last_seen_at"))
    return Assignment.objects.select_for_update().select_related("stage__project").get(pk=pk)


def assignment_open_locked(assignment: Assignment, *, allow_late: bool = False) -> Assignment:
    """The assignment, locked, if it can still be worked on. `allow_late`: a timed-out
    assignment (not a HIT's) may still save its draft and give answers; the answers are checked
    against the redundancy when they are stored (`items_filled_since_timeout`)."""
    fresh = assignment_lock(assignment.pk)
    refuse_if_return_requested(fresh)
    if assignment_finished(fresh):
        raise AssignmentClosed("This assignment was already submitted.", assignment=fresh)
    if fresh.status != AssignmentStatus.IN_PROGRESS and not (allow_late and is_late(fresh)):
        raise AssignmentClosed(
            TIMED_OUT_MESSAGE if fresh.status == AssignmentStatus.RETURNED and fresh.hit_id is None
            else "This assignment was returned or has expired; reload the page for new items.",
            assignment=fresh,
        )
    if fresh.status == AssignmentStatus.IN_PROGRESS and is_late(fresh):
        mark_late(fresh)
    return fresh


def assignment_item_row(assignment: Assignment, item_id: Any) -> AssignmentItem:
    """The assignment's row for the item a request names; SubmissionInvalid when it names none
    of the assignment's items."""
    item_id = item_id_of(item_id)
    if item_id is None:
        raise SubmissionInvalid({"__all__": ["Unknown item."]})
    row = AssignmentItem.objects.select_related("item").filter(
        assignment=assignment, item_id=item_id
    ).first()
    if row is None:
        raise SubmissionInvalid({"__all__": ["This item is not part of your assignment."]})
    return row
