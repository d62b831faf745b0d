"""An assignment's life: started (or reopened) for a worker, kept alive by the page, and released
when the provider does not know its session. Time-outs and the sweep are in `timeouts`, the
guard every later write passes in `locking`."""
from __future__ import annotations

import random
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from annotation.assignment_draft import CONTINUES_KEY, SUPERSEDED_KEY, server_state
from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    ExperimentMode,
    Hit,
    Item,
    Judgment,
    ParticipantVerification,
    Provider,
    Stage,
    StageKind,
    TaskKind,
    Worker,
    WorkerQualification,
)
from annotation.selectors import (
    qualification_results_awaiting_provider,
    qualification_results_that_count,
    worker_is_blocked_for,
)
from annotation.services.redundancy import adaptive_targets_refresh
from annotation.stage_plan_selectors import assignment_size
from annotation.task_selectors import answer_roles

from .comprehension import RETURN_KEY, RETURN_MESSAGE
from .errors import (
    AssignmentClosed,
    AssignmentRefused,
    ForeignAssignment,
    HitExpired,
    NoItemsAvailable,
    QualificationRequired,
    ReturnRequested,
    SessionUnconfirmed,
    StageNotOpen,
    WorkerBlocked,
)
from .locking import stage_write_lock
from .picking import items_pick_next, refuse_hit_seen_before
from .state import (
    GUESS_TIMING_KEY,
    OPEN_STAGE_STATUSES,
    SERVER_DRAFT_KEY,
    assignment_finished,
    closed_stage_lets_finish,
    finished_filter,
    hit_is_expired,
    stage_not_open_message,
)
from .timeouts import is_late, live_assignments, mark_late


def _check_worker(*, stage: Stage, worker: Worker) -> None:
    if worker_is_blocked_for(worker=worker, project=stage.project):
        raise WorkerBlocked("Your account can no longer take tasks in this study.")
    qualification_check(stage=stage, worker=worker)


def qualification_check(*, stage: Stage, worker: Worker) -> None:
    """QualificationRequired, saying why, unless `worker` holds a pass of the qualification
    `stage` requires that counts (`qualification_results_that_count`: not graded from rejected
    work, nor from work the provider has not vouched for). The one gate rule of every door: a
    page's entry (`assignment_start`, `more_work_for`) and every write an open page makes
    (`annotation/services/access.py:assignment_access_recheck`), so a pass taken back while the
    page is open (its work rejected) stores nothing more."""
    if not stage.requires_stage_id:
        return
    results = WorkerQualification.objects.filter(worker=worker,
                                                 stage_id=stage.requires_stage_id)
    if not qualification_results_that_count(results.filter(passed=True)).exists():
        if qualification_results_awaiting_provider(results.filter(passed=True)).exists():
            raise QualificationRequired(
                "This task is open to those who passed its qualification, and your "
                "qualification work is still waiting for the platform to confirm it. Please "
                "try again later.")
        if results.exists() and not qualification_results_that_count(results).exists():
            # Its answers may have scored a pass: rejected work qualifies no one.
            raise QualificationRequired(
                "This task is open to those who passed its qualification, and your "
                "qualification work was rejected, so there is nothing more for you to do "
                "here.")
        if results.filter(passed=False).exists():
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
    if live_assignments(stage).filter(worker=worker, hit__isnull=True).exists() or \
            _timed_out_qualifications(stage=stage, worker=worker):
        return True  # an unfinished one is waiting for them
    with transaction.atomic():
        return bool(items_pick_next(stage=stage, worker=worker, limit=1))


def stages_next_open_for(*, qualification: Stage, worker: Worker) -> list[Stage]:
    """The in-house stages that require `qualification` and would give `worker` items now
    (`more_work_for`), in pipeline order: what a passed annotator can start at once."""
    following = Stage.objects.filter(requires_stage=qualification, provider=Provider.INHOUSE,
                                     status__in=OPEN_STAGE_STATUSES).order_by("order", "pk")
    return [stage for stage in following if more_work_for(stage=stage, worker=worker)]


def _presented_order(kind: str) -> list[str]:
    letters = answer_roles(kind)
    random.SystemRandom().shuffle(letters)
    return letters


def earlier_guesses(*, stage: Stage, worker: Worker, items: list[Item]) -> dict:
    """STARC pilot: the guesses `worker` locked on these items in earlier assignments of the
    project (returned, expired, superseded), in the server-state shape (`guesses`: item id ->
    role, and their `guess_timing`). A locked guess was followed by the paragraph, so a new
    assignment of the same item starts from it: returning the HIT (or leaving the page until
    it times out) and taking the item again must not give a second guess after reading."""
    project = stage.project
    if project.kind != TaskKind.MC or project.experiment_mode != ExperimentMode.PILOT:
        return {}
    wanted = {str(item.pk) for item in items}
    guesses: dict[str, str] = {}
    timing: dict[str, dict] = {}
    earlier = Assignment.objects.filter(
        worker=worker, stage__project_id=project.pk,
        **{f"draft__{SERVER_DRAFT_KEY}__has_key": "guesses"}).order_by("pk")
    for draft in earlier.values_list("draft", flat=True):
        state = (draft or {}).get(SERVER_DRAFT_KEY) or {}
        for key, role in (state.get("guesses") or {}).items():
            if key in wanted and key not in guesses:
                guesses[key] = role
                if key in (state.get(GUESS_TIMING_KEY) or {}):
                    timing[key] = state[GUESS_TIMING_KEY][key]
    if not guesses:
        return {}
    return {"guesses": guesses, **({GUESS_TIMING_KEY: timing} if timing else {})}


def _create(*, stage: Stage, worker: Worker, items: list[Item], hit: Hit | None,
            external_id: str, shown: bool = False, verification: str = "",
            previous: Assignment | None = None, review_note: str = "") -> Assignment:
    """A new assignment of `items`. `previous`: the same worker's assignment of the same items
    that this one replaces (`_superseded_on_mturk`): its answer orders carry over, and the page
    is told which assignment it continues (`CONTINUES_KEY`), so the browser that typed the
    answers shows them again under the same labels; the server never copies them across."""
    now = timezone.now()
    carried = earlier_guesses(stage=stage, worker=worker, items=items)
    if previous is not None:
        carried[CONTINUES_KEY] = previous.pk
    draft = {SERVER_DRAFT_KEY: carried} if carried else {}
    orders = dict(AssignmentItem.objects.filter(assignment=previous).values_list(
        "item_id", "presented_order")) if previous is not None else {}
    assignment = Assignment.objects.create(
        stage=stage, worker=worker, hit=hit, external_id=external_id, last_seen_at=now,
        verification=verification, draft=draft, review_note=review_note,
    )
    AssignmentItem.objects.bulk_create([
        AssignmentItem(assignment=assignment, item=item, position=position,
                       presented_order=orders.get(item.pk) or _presented_order(
                           stage.project.kind),
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
            if assignment_finished(assignment)
            else "This assignment was returned or has expired; it can no longer be worked on."
        )
        raise AssignmentClosed(message, assignment=assignment)
    return assignment


def _finishing_after_close(*, stage: Stage, worker: Worker, hit: Hit | None,
                           external_id: str) -> bool:
    """The worker comes back to an assignment of a closed stage that they may still finish."""
    if not external_id:
        return False
    found = Assignment.objects.filter(stage=stage, external_id=external_id, worker=worker)
    if hit is not None:
        found = found.filter(hit=hit)
    assignment = found.order_by("pk").first()
    if assignment is None:
        return False
    assignment.stage = stage
    return closed_stage_lets_finish(assignment)


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
    with (a second session Prolific verified gets the first one's assignment back, one it could
    not vouch for is refused (`SessionUnconfirmed`), a participant who finished gets
    the completion again); `verification` is what the provider said about this session at the
    door (`ParticipantVerification`; PENDING when it could not tell).

    A closed MTurk or Prolific stage only reopens the worker's assignment for `external_id`
    that `closed_stage_lets_finish` still lets them finish (accepted before the close, within
    its duration); it never creates one."""
    if stage.status not in OPEN_STAGE_STATUSES and not _finishing_after_close(
            stage=stage, worker=worker, hit=hit, external_id=external_id):
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
    stage_write_lock(stage)
    # One start per worker at a time (PostgreSQL; SQLite holds its lock), before the worker's
    # unfinished page is looked for: a Prolific participant's sessions, and two tabs opening
    # one link at once, which each found no page and made one (the same practice and gold
    # items in both: the second page could never be submitted).
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
            if is_late(reopened):
                # Reopening brings it back to life; remember that its items were free meanwhile.
                mark_late(reopened)
            return reopened
        if stage.status not in OPEN_STAGE_STATUSES:
            # Nothing new on a closed stage, whatever the worker comes back with.
            raise StageNotOpen(stage_not_open_message(stage))
        if prolific:
            held = _participant_held(stage=stage, worker=worker, verification=verification,
                                     session_id=external_id)
            if held is not None:
                return held
    elif hit is None:
        unfinished = live_assignments(stage).filter(worker=worker, hit__isnull=True)\
            .order_by("-pk").first()
        if unfinished is None:
            unfinished = _timed_out_qualification(stage=stage, worker=worker)
        if unfinished is not None:
            # The page reads stage and project next; reuse the objects we already hold.
            unfinished.stage = stage
            unfinished.worker = worker
            return unfinished

    previous, over_note = None, ""
    if hit is not None:
        previous = _superseded_on_mturk(hit=hit, worker=worker, external_id=external_id)
        items, over_note = _hit_items_for(stage=stage, worker=worker, hit=hit)
    else:
        items = items_pick_next(stage=stage, worker=worker, limit=assignment_size(stage))
    if not items:
        raise NoItemsAvailable("There are no more items for you in this task. Thank you!")
    if over_note:  # counted only once MTurk lists it (`_over_admission`)
        verification = ParticipantVerification.PENDING
    return _create(stage=stage, worker=worker, items=items, hit=hit, external_id=external_id,
                   shown=shown, verification=verification if prolific or over_note else "",
                   previous=previous, review_note=over_note)


def _timed_out_qualifications(*, stage: Stage, worker: Worker) -> list[Assignment]:
    """The worker's pages of in-house qualification `stage` that the sweep released
    unsubmitted (an in-house page has no other way to be RETURNED), newest first. Only
    in-house: a Prolific page is one session, which Prolific timed out too (its participant
    comes back with a new session and a new assignment), and an MTurk one is MTurk's."""
    if stage.kind != StageKind.QUALIFICATION or stage.provider != Provider.INHOUSE \
            or WorkerQualification.objects.filter(worker=worker, stage=stage).exists():
        return []  # graded once: nothing is reopened after it
    released = (Assignment.objects.filter(stage=stage, worker=worker, hit__isnull=True,
                                          status=AssignmentStatus.RETURNED,
                                          submitted_at__isnull=True)
                .exclude(verification=ParticipantVerification.FAILED).order_by("-pk"))
    # Read in Python: a JSON key test under exclude() drops rows without the key on PostgreSQL.
    return [assignment for assignment in released
            if not server_state(assignment).get(RETURN_KEY)]


def _timed_out_qualification(*, stage: Stage, worker: Worker) -> Assignment | None:
    """A qualification is one assignment of all its items (`assignment_size`), graded once:
    the worker's qualification page that timed out (released by the sweep, never submitted)
    opens again, late, where they left it, rather than a new page of whatever is left. A new
    page could not hold the same items: a STARC qualification's paragraphs were shown, so they
    count as read (`units_read`) and the worker got "Nothing more to do", with no result and
    no way into the stages it gates."""
    released = _timed_out_qualifications(stage=stage, worker=worker)
    if not released:
        return None
    timed_out = released[0]
    mark_late(timed_out)
    timed_out.status = AssignmentStatus.IN_PROGRESS
    timed_out.last_seen_at = timezone.now()
    timed_out.save(update_fields=["status", "last_seen_at"])
    return timed_out


SUPERSEDED_NOTE = ("Returned on MTurk: the worker accepted this HIT again as assignment {new} "
                   "(MTurk gives a worker one assignment of a HIT at a time).")


def _superseded_on_mturk(*, hit: Hit, worker: Worker, external_id: str) -> Assignment | None:
    """A worker who returned a HIT on MTurk and accepted it again arrives with a new
    assignmentId while our row of the first one is still in progress (the sync marks it
    returned minutes later): MTurk lets a worker hold one assignment of a HIT at a time, so
    the first one is over. It is marked RETURNED (its answers stay on its page's late submit,
    as any returned one's) and the new one starts where it left off (`_create`'s `previous`:
    the answer orders, and the answers the worker's own browser kept), instead of 'You already
    have an assignment for this HIT' until the next sync."""
    if not external_id:
        return None
    previous = (Assignment.objects.filter(hit=hit, worker=worker,
                                          status=AssignmentStatus.IN_PROGRESS)
                .exclude(external_id=external_id).order_by("-pk").first())
    if previous is None or Judgment.objects.filter(assignment=previous).exists():
        return None  # confirmed answers: 'already judged' below says so
    previous.status = AssignmentStatus.RETURNED
    previous.review_note = "\n".join(
        p for p in (previous.review_note, SUPERSEDED_NOTE.format(new=external_id)) if p)
    # Its page, still open in another tab, may not submit late: MTurk pays the new one only.
    previous.draft = {**(previous.draft or {}), SERVER_DRAFT_KEY: {
        **((previous.draft or {}).get(SERVER_DRAFT_KEY) or {}), SUPERSEDED_KEY: external_id}}
    previous.save(update_fields=["status", "review_note", "draft"])
    return previous


def _verification_upgrade(assignment: Assignment, verification: str) -> None:
    """The provider has just verified the session of this (pending) assignment."""
    if (verification == ParticipantVerification.VERIFIED
            and assignment.verification == ParticipantVerification.PENDING):
        Assignment.objects.filter(pk=assignment.pk).update(verification=verification)
        assignment.verification = verification


REPLACED_NOTE = ("Released: the participant came back with a session Prolific verified, and this "
                 "one ({session}) was never verified.")


# Server draft state: the Prolific sessions this assignment was moved away from.
SESSIONS_LEFT_KEY = "sessions_left"
# Server draft state: the session Prolific listed as returned or timed out when the sync gave
# this (in-progress) assignment's items back (`stage_sessions_returned`).
RETURNED_ON_PROVIDER_KEY = "returned_on_provider"
CONTINUED_NOTE = ("Continued under session {new}, which Prolific verified for this participant "
                  "(session {old} was returned or timed out on Prolific).")


SESSION_UNCONFIRMED_MESSAGE = (
    "Prolific could not confirm this session just now, and your participant ID already has a "
    "task open under another session. Continue in the tab where you started, or open the study "
    "from your Prolific account again in a few minutes.")


def _participant_held(*, stage: Stage, worker: Worker, verification: str,
                      session_id: str = "") -> Assignment | None:
    """A Prolific participant arriving with a session id the stage has not seen: their live
    assignment of the stage (a participant holds one at a time, `Assignment`'s constraint), or
    AssignmentClosed with the finished one (the page shows its completion). None: they hold
    nothing here, or only work under a session never verified while this one is verified
    (someone else made up a session with their PROLIFIC_PID: released, never counted)."""
    mine = Assignment.objects.filter(stage=stage, worker=worker).select_related("stage__project")
    held = mine.filter(status=AssignmentStatus.IN_PROGRESS).order_by("pk").first()
    finished = None if held is not None else \
        mine.filter(finished_filter()).order_by("pk").first()
    if held is None and finished is None and verification == ParticipantVerification.VERIFIED:
        held = _returned_on_provider_reopen(mine, session_id=session_id)
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
    state = dict((held.draft or {}).get(SERVER_DRAFT_KEY) or {})
    left = list(state.get(SESSIONS_LEFT_KEY) or [])
    new_session = session_id and held.external_id != session_id and session_id not in left
    if new_session and verification != ParticipantVerification.VERIFIED:
        # Prolific could not tell (unreachable, or asking at the door is off) whether this
        # session is the participant's: a PROLIFIC_PID is all a stranger needs to type, so the
        # task under the other session (its answers, its right to submit) waits until Prolific
        # confirms this one. The participant's own session still opens it.
        raise SessionUnconfirmed(SESSION_UNCONFIRMED_MESSAGE)
    if new_session:
        # Prolific holds one live session per participant and study: a new one it verified
        # for them means the old one was returned or timed out there, and Prolific will list
        # (and pay) the work under the new one only. The work in progress follows it; a
        # session Prolific could not vouch for never takes it over, and an old session's
        # page reloaded never takes it back.
        held.review_note = "\n".join(p for p in (held.review_note, CONTINUED_NOTE.format(
            new=session_id, old=held.external_id)) if p)
        state[SESSIONS_LEFT_KEY] = [*left, held.external_id]
        held.draft = {**(held.draft or {}), SERVER_DRAFT_KEY: state}
        held.external_id = session_id
        held.verification = verification
        held.save(update_fields=["external_id", "review_note", "verification", "draft"])
    held.stage, held.worker = stage, worker
    if is_late(held):
        mark_late(held)
    return held


def _returned_on_provider_reopen(mine, *, session_id: str) -> Assignment | None:
    """The participant's batch the sync gave back when Prolific listed its session as
    returned or timed out, reopened for the new session Prolific verified for them (the one
    Prolific will list and pay): the work goes on where it stopped, as late work (answers to
    items others filled meanwhile are refused by item at the submit). None when there is
    none."""
    returned = (mine.filter(status=AssignmentStatus.RETURNED).exclude(external_id=session_id)
                .order_by("-pk").first())
    if returned is None or not server_state(returned).get(RETURNED_ON_PROVIDER_KEY):
        return None
    returned.status = AssignmentStatus.IN_PROGRESS
    returned.save(update_fields=["status"])
    return returned


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
    adaptive_targets_refresh(judgments=Judgment.objects.filter(assignment=assignment))
    return assignment


def _hit_items_for(*, stage: Stage, worker: Worker, hit: Hit) -> tuple[list[Item], str]:
    """The items of the HIT the worker accepted, unless the worker judged or saw them before,
    already holds an assignment of it, or the HIT has no assignment left; and "" or, for a
    newcomer admitted over the HIT's local count (`_over_admission`), why."""
    if hit_is_expired(hit):
        raise HitExpired("This HIT has expired, so it can no longer be accepted. Please return "
                         "it; other HITs of this task may still be available.")
    items = list(hit.items.order_by("hititem__position"))
    if Judgment.objects.filter(stage=stage, worker=worker, item__in=items).exists():
        raise AssignmentClosed("You have already judged the items of this HIT.")
    refuse_hit_seen_before(stage=stage, worker=worker, items=items, hit=hit)
    if Assignment.objects.filter(hit=hit, worker=worker).exclude(
        status=AssignmentStatus.RETURNED
    ).exists():
        raise AssignmentClosed("You already have an assignment for this HIT.")
    # No more local assignments than the HIT has on MTurk (counted under the HIT's row lock
    # taken above), except those admitted on trust for a slot returned on MTurk, at most one
    # per holder (`_over_admission`): made-up assignmentId/workerId pairs cannot multiply its
    # items. Returned ones free their slot, and so do flagged ones the provider never listed;
    # an unconfirmed one is released by the sweep once MTurk's own duration is over.
    taken = Assignment.objects.filter(hit=hit).exclude(status__in=_SLOT_FREED)
    if taken.count() >= hit.max_assignments:
        return items, _over_admission(stage=stage, worker=worker, hit=hit, taken=taken)
    return items, ""


# A HIT's local assignments that no longer take one of its slots.
_SLOT_FREED = (AssignmentStatus.RETURNED, AssignmentStatus.FLAGGED)
# An MTurk assignment admitted over its HIT's local count carries a verification state (MTurk
# assignments otherwise carry none): PENDING until MTurk lists it as submitted (the sync then
# makes it VERIFIED), so it is told apart for good from those admitted within the count.
_OVER_ADMITTED = (ParticipantVerification.PENDING, ParticipantVerification.VERIFIED)

OVER_ADMITTED_NOTE = (
    "Admitted over the HIT's local count: MTurk offered this worker a slot of HIT {hit} while "
    "all {slots} of its slots were taken here, {holders} of them by work MTurk had not listed "
    "as submitted (one of those workers may have returned the HIT on MTurk, and MTurk's API "
    "cannot tell a worker given the returned slot from a made-up assignment id). Its judgments "
    "count only once MTurk lists this assignment as submitted; if MTurk never lists it, it is "
    "flagged and never counts.")

NO_SLOT_LEFT_MESSAGE = ("This HIT has no assignments left. Please return it; other HITs of this "
                        "task may still be available.")


def _over_admission(*, stage: Stage, worker: Worker, hit: Hit, taken) -> str:
    """A newcomer to an MTurk HIT whose local slots are all taken: MTurk lets a worker return
    a HIT (the accepted assignment stays in progress here until MTurk's duration is over) and
    gives the slot to the next worker at once, and its requester API cannot tell that worker
    from a made-up assignment id. So the newcomer is admitted on trust, bounded: at most one
    assignment over the count per holder that may have been returned on MTurk (admitted within
    the count, not listed by MTurk as submitted: in progress here, or submitted here but not
    listed), never counted until MTurk lists it (`_OVER_ADMITTED`, the counting rule's
    PENDING: `annotation.selectors.judgments_that_count`). A made-up id flood thus adds at most
    as many pages as there are such holders. Returns the new assignment's review note (why it
    was admitted), or raises NoItemsAvailable. Called under the HIT's row lock."""
    if stage.provider != Provider.MTURK:
        raise NoItemsAvailable(NO_SLOT_LEFT_MESSAGE)
    over = taken.filter(verification__in=_OVER_ADMITTED).count()
    holders = taken.filter(
        status__in=(AssignmentStatus.IN_PROGRESS, AssignmentStatus.SUBMITTED),
        provider_confirmed_at__isnull=True,
    ).exclude(verification__in=_OVER_ADMITTED).count()
    if over >= holders:
        raise NoItemsAvailable(NO_SLOT_LEFT_MESSAGE)
    # One live assignment with a verification state per worker and stage (`Assignment`'s
    # constraint): their other HIT of this task admitted over the count comes first. The
    # worker's row is locked (after the HIT's, as a Prolific participant's is) so that two
    # HITs of the stage taken at once cannot both pass this check.
    Worker.objects.select_for_update().filter(pk=worker.pk).first()
    if Assignment.objects.filter(stage=stage, worker=worker, status=AssignmentStatus.IN_PROGRESS,
                                 verification__in=_OVER_ADMITTED).exists():
        raise NoItemsAvailable("This HIT has no assignments left for now. Please submit or "
                               "return your other HIT of this task first.")
    return OVER_ADMITTED_NOTE.format(hit=hit.external_id or hit.pk, slots=hit.max_assignments,
                                     holders=holders)


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
