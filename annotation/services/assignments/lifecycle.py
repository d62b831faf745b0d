"""An assignment's life: started (or reopened) for a worker, kept alive by the page, timed out,
released when abandoned; and the guard every later write passes (`_locked_open`)."""
from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import (
    F,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.domain.answers import item_id_of
from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    Hit,
    Item,
    Judgment,
    ParticipantVerification,
    Provider,
    Stage,
    Worker,
    WorkerQualification,
)
from annotation.selectors import worker_is_blocked_for
from annotation.task_selectors import answer_roles

from .comprehension import RETURN_KEY, RETURN_MESSAGE, _refuse_if_return_requested
from .errors import (
    AssignmentClosed,
    AssignmentRefused,
    ForeignAssignment,
    HitExpired,
    NoItemsAvailable,
    QualificationRequired,
    ReturnRequested,
    StageNotOpen,
    SubmissionInvalid,
    WorkerBlocked,
)
from .picking import (
    _annotate_deficit,
    _mixes_in_extras,
    _refuse_hit_seen_before,
    _take_sqlite_write_lock,
    items_pick_next,
)
from .state import (
    FINISHED_STATUSES,
    OPEN_STAGE_STATUSES,
    SERVER_DRAFT_KEY,
    _idle_past_timeout,
    _live_assignments,
    _server_state,
    _unverified_cutoff,
    hit_is_expired,
    stage_not_open_message,
)


def _check_worker(*, stage: Stage, worker: Worker) -> None:
    if worker_is_blocked_for(worker=worker, project=stage.project):
        raise WorkerBlocked("Your account can no longer take tasks in this study.")
    if stage.requires_stage_id and not WorkerQualification.objects.filter(
        worker=worker, stage_id=stage.requires_stage_id, passed=True
    ).exists():
        if WorkerQualification.objects.filter(worker=worker, stage_id=stage.requires_stage_id,
                                              passed=False).exists():
            raise QualificationRequired(
                "This task is open to those who passed its qualification, and your "
                "qualification result was below the pass mark, so there is nothing more for "
                "you to do here. Thank you for taking part.")
        raise QualificationRequired(
            "This task needs a qualification you have not passed yet."
        )


def more_work_for(*, stage: Stage, worker: Worker) -> bool:
    """Whether `worker` would get items if they started another assignment in `stage` now
    (reads only; the rows it locks are released with its transaction)."""
    if stage.status not in OPEN_STAGE_STATUSES:
        return False
    try:
        _check_worker(stage=stage, worker=worker)
    except AssignmentRefused:
        return False
    if _live_assignments(stage).filter(worker=worker, hit__isnull=True).exists():
        return True  # an unfinished one is waiting for them
    with transaction.atomic():
        return bool(items_pick_next(stage=stage, worker=worker, limit=1))


def _presented_order(kind: str) -> list[str]:
    letters = answer_roles(kind)
    random.SystemRandom().shuffle(letters)
    return letters


def _create(*, stage: Stage, worker: Worker, items: list[Item], hit: Hit | None,
            external_id: str, shown: bool = False, verification: str = "") -> Assignment:
    now = timezone.now()
    assignment = Assignment.objects.create(
        stage=stage, worker=worker, hit=hit, external_id=external_id, last_seen_at=now,
        verification=verification,
    )
    AssignmentItem.objects.bulk_create([
        AssignmentItem(assignment=assignment, item=item, position=position,
                       presented_order=_presented_order(stage.project.kind),
                       first_shown_at=now if shown else None)
        for position, item in enumerate(items)
    ])
    return assignment


def _reopen(assignment: Assignment, worker: Worker) -> Assignment:
    if assignment.worker_id != worker.pk:
        raise ForeignAssignment("This assignment belongs to another worker.")
    if assignment.status != AssignmentStatus.IN_PROGRESS:
        message = (
            "You have already submitted this assignment."
            if assignment.status in FINISHED_STATUSES
            else "This assignment was returned or has expired; it can no longer be worked on."
        )
        raise AssignmentClosed(message, assignment=assignment)
    return assignment


@transaction.atomic
def assignment_start(*, stage: Stage, worker: Worker, hit: Hit | None = None,
                     external_id: str = "", shown: bool = False,
                     verification: str = "") -> Assignment:
    """The worker's assignment in `stage`: the existing one for `external_id` (an MTurk
    assignmentId or a Prolific session), the worker's unfinished in-house one, or a new one with
    the HIT's items (`hit`) or the next items picked for them. `shown`: the caller is the task
    page, which shows a new assignment's items at once (their `first_shown_at` is set here
    instead of by an UPDATE right after).

    Prolific: one live assignment per participant and stage, whatever SESSION_ID they come
    with (a second session gets the first one's assignment back, a participant who finished gets
    the completion again); `verification` is what the provider said about this session at the
    door (`ParticipantVerification`; PENDING when it could not tell)."""
    if stage.status not in OPEN_STAGE_STATUSES:
        raise StageNotOpen(stage_not_open_message(stage))
    if hit is not None and hit.stage_id != stage.pk:
        raise ForeignAssignment("This HIT belongs to another task.")
    prolific = stage.provider == Provider.PROLIFIC
    if prolific:
        verification = verification or ParticipantVerification.PENDING
    # Locks before any read: SQLite cannot upgrade a transaction that has read to a writer
    # while another writer waits ("database is locked"), so the write lock comes first.
    if hit is not None:
        # One allocation per HIT at a time, so a double-loaded page creates one assignment.
        Hit.objects.select_for_update().filter(pk=hit.pk).first()
    _take_sqlite_write_lock(stage)
    if prolific:
        # One participant's sessions start one at a time (PostgreSQL; SQLite holds its lock).
        Worker.objects.select_for_update().filter(pk=worker.pk).first()
    _check_worker(stage=stage, worker=worker)
    if prolific and Assignment.objects.filter(
        stage=stage, worker=worker, **{f"draft__{SERVER_DRAFT_KEY}__has_key": RETURN_KEY}
    ).exists():
        raise ReturnRequested(RETURN_MESSAGE)

    if external_id:
        existing = Assignment.objects.filter(stage=stage, external_id=external_id)
        if hit is not None:
            existing = existing.filter(hit=hit)
        found = existing.order_by("pk").first()
        if found is not None:
            found.stage = stage
            reopened = _reopen(found, worker)
            _verification_upgrade(reopened, verification)
            if _is_late(reopened):
                # Reopening brings it back to life; remember that its items were free meanwhile.
                _flag_late(reopened)
            return reopened
        if prolific:
            held = _participant_held(stage=stage, worker=worker, verification=verification)
            if held is not None:
                return held
    elif hit is None:
        unfinished = _live_assignments(stage).filter(worker=worker, hit__isnull=True)\
            .order_by("-pk").first()
        if unfinished is not None:
            # The page reads stage and project next; reuse the objects we already hold.
            unfinished.stage = stage
            unfinished.worker = worker
            return unfinished

    if hit is not None:
        items = _hit_items_for(stage=stage, worker=worker, hit=hit)
    else:
        limit = int(stage.settings.get("items_per_assignment") or stage.project.items_per_hit)
        items = items_pick_next(stage=stage, worker=worker, limit=limit)
    if not items:
        raise NoItemsAvailable("There are no more items for you in this task. Thank you!")
    return _create(stage=stage, worker=worker, items=items, hit=hit, external_id=external_id,
                   shown=shown, verification=verification if prolific else "")


def _verification_upgrade(assignment: Assignment, verification: str) -> None:
    """The provider has just verified the session of this (pending) assignment."""
    if (verification == ParticipantVerification.VERIFIED
            and assignment.verification == ParticipantVerification.PENDING):
        Assignment.objects.filter(pk=assignment.pk).update(verification=verification)
        assignment.verification = verification


REPLACED_NOTE = ("Released: the participant came back with a session Prolific verified, and this "
                 "one ({session}) was never verified.")


def _participant_held(*, stage: Stage, worker: Worker, verification: str) -> Assignment | None:
    """A Prolific participant arriving with a session id the stage has not seen: their live
    assignment of the stage (a participant holds one at a time, `Assignment`'s constraint), or
    AssignmentClosed with the finished one (the page shows its completion). None: they hold
    nothing here, or only work under a session never verified while this one is verified
    (someone else made up a session with their PROLIFIC_PID: released, never counted)."""
    mine = Assignment.objects.filter(stage=stage, worker=worker).select_related("stage__project")
    held = mine.filter(status=AssignmentStatus.IN_PROGRESS).order_by("pk").first()
    finished = None if held is not None else \
        mine.filter(status__in=FINISHED_STATUSES).order_by("pk").first()
    previous = held or finished
    if previous is None:
        return None
    if (verification == ParticipantVerification.VERIFIED
            and previous.verification == ParticipantVerification.PENDING):
        assignment_verification_failed(assignment=previous, note=REPLACED_NOTE.format(
            session=previous.external_id or previous.pk))
        return None
    if held is None:
        raise AssignmentClosed("You have already completed this study.", assignment=finished)
    held.stage, held.worker = stage, worker
    if _is_late(held):
        _flag_late(held)
    return held


def assignment_verification_failed(*, assignment: Assignment, note: str) -> Assignment:
    """The provider does not know this session (or it was replaced by a verified one): its work
    never counts nor is paid. In progress: released (RETURNED) so its items go to others;
    submitted: FLAGGED for the researcher; the note says why."""
    fields = ["verification", "review_note"]
    assignment.verification = ParticipantVerification.FAILED
    if assignment.status == AssignmentStatus.IN_PROGRESS:
        assignment.status = AssignmentStatus.RETURNED
        fields.append("status")
    elif assignment.status == AssignmentStatus.SUBMITTED:
        assignment.status = AssignmentStatus.FLAGGED
        fields.append("status")
    assignment.review_note = "\n".join(p for p in (assignment.review_note, note) if p)
    assignment.save(update_fields=fields)
    return assignment


def _hit_items_for(*, stage: Stage, worker: Worker, hit: Hit) -> list[Item]:
    """The items of the HIT the worker accepted, unless the worker judged or saw them before,
    already holds an assignment of it, or the HIT has no assignment left."""
    if hit_is_expired(hit):
        raise HitExpired("This HIT has expired, so it can no longer be accepted. Please return "
                         "it; other HITs of this task may still be available.")
    items = list(hit.items.order_by("hititem__position"))
    if Judgment.objects.filter(stage=stage, worker=worker, item__in=items).exists():
        raise AssignmentClosed("You have already judged the items of this HIT.")
    _refuse_hit_seen_before(stage=stage, worker=worker, items=items)
    if Assignment.objects.filter(hit=hit, worker=worker).exclude(
        status=AssignmentStatus.RETURNED
    ).exists():
        raise AssignmentClosed("You already have an assignment for this HIT.")
    # Never more local assignments than the HIT has on MTurk (counted under the HIT's row
    # lock taken above): made-up assignmentId/workerId pairs cannot multiply its items.
    # Returned ones free their slot, and so do flagged ones the provider never listed; an
    # unconfirmed one is released by the sweep once MTurk's own duration is over.
    taken = Assignment.objects.filter(hit=hit).exclude(
        status__in=(AssignmentStatus.RETURNED, AssignmentStatus.FLAGGED)).count()
    if taken >= hit.max_assignments:
        raise NoItemsAvailable("This HIT has no assignments left. Please return it; "
                               "other HITs of this task may still be available.")
    return items


@transaction.atomic
def assignment_release_abandoned(*, now: datetime | None = None) -> int:
    """Mark in-progress assignments idle for longer than their project's timeout RETURNED, which
    frees their items for other workers; sessions the provider has not verified (Prolific) after
    `unverified_timeout()` of idleness, whatever the project's timeout. Assignments tied to a provider HIT follow MTurk's own
    assignment duration instead (`_release_expired_hit_assignments`)."""
    now = now or timezone.now()
    from annotation.models import Project

    released = 0
    timeouts = Project.objects.filter(
        stages__assignments__status=AssignmentStatus.IN_PROGRESS
    ).values_list("assignment_timeout_minutes", flat=True).distinct()
    for minutes in set(timeouts):
        released += Assignment.objects.annotate(seen=Coalesce("last_seen_at", "started_at")).filter(
            status=AssignmentStatus.IN_PROGRESS,
            hit__isnull=True,
            stage__project__assignment_timeout_minutes=minutes,
            seen__lt=now - timedelta(minutes=minutes),
        ).update(status=AssignmentStatus.RETURNED)
    # Sessions the provider has not verified hold their items for a short while only.
    released += Assignment.objects.annotate(seen=Coalesce("last_seen_at", "started_at")).filter(
        status=AssignmentStatus.IN_PROGRESS, hit__isnull=True,
        verification=ParticipantVerification.PENDING, seen__lt=_unverified_cutoff(now),
    ).update(status=AssignmentStatus.RETURNED)
    released += _release_expired_hit_assignments(now=now)
    return released


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
        released += Assignment.objects.filter(
            stage=stage, status=AssignmentStatus.IN_PROGRESS, hit__isnull=False,
            provider_confirmed_at__isnull=True, started_at__lt=cutoff,
        ).update(status=AssignmentStatus.RETURNED)
    return released


def _lock_assignment(pk: int) -> Assignment:
    """The assignment row, locked for this transaction. SQLite has no row locks and would let two
    transactions read and then dead-lock on the write: a no-op write takes its lock first."""
    if connection.vendor == "sqlite":
        Assignment.objects.filter(pk=pk).update(last_seen_at=F("last_seen_at"))
    return Assignment.objects.select_for_update().select_related("stage__project").get(pk=pk)


# Server state key: when the assignment was first seen timed out. Kept so that an autosave that
# brings it back to life does not hide that its items may have gone to other workers meanwhile.
LATE_KEY = "timed_out_at"


TIMED_OUT_MESSAGE = ("This assignment timed out and its items may have gone to other workers. "
                     "Submit your answers now: those still needed will be kept.")


def _is_late(assignment: Assignment, now: datetime | None = None) -> bool:
    """Timed out (released by the beat task, flagged earlier, or idle past the project's
    timeout) while its items were free for others. Assignments of a provider HIT follow the
    provider's own duration and are never late here."""
    if assignment.hit_id is not None:
        return False
    if assignment.status == AssignmentStatus.RETURNED or _server_state(assignment).get(LATE_KEY):
        return True
    return (assignment.status == AssignmentStatus.IN_PROGRESS
            and _idle_past_timeout(assignment, now))


def _flag_late(assignment: Assignment) -> None:
    state = _server_state(assignment)
    if state.get(LATE_KEY):
        return
    state[LATE_KEY] = timezone.now().isoformat()
    assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
    Assignment.objects.filter(pk=assignment.pk).update(draft=assignment.draft)


def _locked_open(assignment: Assignment, *, allow_late: bool = False) -> Assignment:
    """The assignment, locked, if it can still be worked on. `allow_late`: a timed-out
    assignment (not a HIT's) may still save its draft and give answers; the answers are checked
    against the redundancy when they are stored (`_filled_since_timeout`)."""
    fresh = _lock_assignment(assignment.pk)
    _refuse_if_return_requested(fresh)
    if fresh.status in FINISHED_STATUSES:
        raise AssignmentClosed("This assignment was already submitted.", assignment=fresh)
    if fresh.status != AssignmentStatus.IN_PROGRESS and not (allow_late and _is_late(fresh)):
        raise AssignmentClosed(
            TIMED_OUT_MESSAGE if fresh.status == AssignmentStatus.RETURNED and fresh.hit_id is None
            else "This assignment was returned or has expired; reload the page for new items.",
            assignment=fresh,
        )
    if fresh.status == AssignmentStatus.IN_PROGRESS and _is_late(fresh):
        _flag_late(fresh)
    return fresh


def _filled_since_timeout(*, assignment: Assignment, rows: list[AssignmentItem]) -> set[int]:
    """Items of a late assignment that no longer need a judgment in the stage: other workers
    were given (or judged) them after the timeout and reached the target. Practice and gold
    items, and qualification/practice stages, have no cap. The item rows are locked (waiting,
    not skipping: the answer is already given) and the deficit counted after the lock, as
    `items_pick_next` does, so a late submit and an allocator never both take the last slot."""
    stage = assignment.stage
    if not _mixes_in_extras(stage):
        return set()
    ids = [row.item_id for row in rows if not (row.item.is_practice or row.item.is_gold_check)]
    if not ids:
        return set()
    _take_sqlite_write_lock(stage)
    if connection.features.has_select_for_update:
        list(Item.objects.select_for_update().filter(pk__in=ids).order_by("pk")
             .values_list("pk", flat=True))
    counted = _annotate_deficit(Item.objects.filter(pk__in=ids), stage,
                                exclude_assignment_id=assignment.pk)
    return {item.pk for item in counted if item.deficit <= 0}


def _filled_message(rows: list[AssignmentItem]) -> str:
    numbers = ", ".join(str(row.position + 1) for row in rows)
    which = f"item {numbers}" if len(rows) == 1 else f"items {numbers}"
    return (f"Your assignment timed out, and {which} has since been judged by enough other "
            f"workers, so your answer to it could not be stored." if len(rows) == 1 else
            f"Your assignment timed out, and {which} have since been judged by enough other "
            f"workers, so your answers to them could not be stored.")


# A page re-opened within this interval of the last sign of life does not write it again (a
# reload loop would otherwise UPDATE the row on every view). Capped at a tenth of the
# project's timeout, so an assignment never looks idle for more than that before it is.
TOUCH_INTERVAL = timedelta(seconds=60)


def _touch_interval(project) -> timedelta:
    return min(TOUCH_INTERVAL, timedelta(minutes=project.assignment_timeout_minutes) / 10)


def assignment_touch(*, assignment: Assignment, unshown: bool = True) -> None:
    """The page was (re)opened: keep the assignment alive and note when items were first shown.
    `assignment.last_seen_at` is as loaded by the page: a sign of life younger than
    `_touch_interval` is not written again. `unshown=False`: the caller read the assignment's
    items and none lacks `first_shown_at`, so there is nothing to note."""
    now = timezone.now()
    seen = assignment.last_seen_at
    if seen is None or now - seen >= _touch_interval(assignment.stage.project):
        Assignment.objects.filter(pk=assignment.pk).update(last_seen_at=now)
        assignment.last_seen_at = now
    if unshown:
        AssignmentItem.objects.filter(assignment=assignment, first_shown_at__isnull=True).update(
            first_shown_at=now
        )


def _assignment_item(assignment: Assignment, item_id: Any) -> AssignmentItem:
    item_id = item_id_of(item_id)
    if item_id is None:
        raise SubmissionInvalid({"__all__": ["Unknown item."]})
    row = AssignmentItem.objects.select_related("item").filter(
        assignment=assignment, item_id=item_id
    ).first()
    if row is None:
        raise SubmissionInvalid({"__all__": ["This item is not part of your assignment."]})
    return row
