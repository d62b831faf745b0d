"""Assignments: which items a worker gets, autosave, per-item confirmation and the final submit.

Every write the task pages make goes through here; the views only check who is asking.

Redundancy: an item in a stage wants `stage.judgments_per_item` judgments, or the project's
per-split redundancy. What it already has is its judgments in the stage plus the in-progress,
not-yet-timed-out assignments holding it without a judgment. Two allocators racing for the last
slot are kept apart by row locks on the items (`SELECT ... FOR UPDATE SKIP LOCKED` on
PostgreSQL; SQLite serialises writers, and we take its write lock first), and the deficit is
recomputed *after* the lock so a slot taken by a transaction that committed in between is seen.
"""
from __future__ import annotations

import random
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import IntegrityError, connection, transaction
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.domain.answers import AnswerError, AnswerRules, clean_answer, clean_guess
from annotation.domain.design import level_for, ordered_levels, question_key
from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    ExperimentMode,
    Hit,
    Item,
    Judgment,
    Provider,
    Stage,
    StageKind,
    StageStatus,
    TaskKind,
    Worker,
    WorkerQualification,
)
from annotation.selectors import worker_is_blocked_for

OPEN_STAGE_STATUSES = (StageStatus.PUBLISHED, StageStatus.COLLECTING)
FINISHED_STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED,
                     AssignmentStatus.REJECTED)
MAX_DRAFT_BYTES = 200_000
# Server-owned part of the draft (pilot guesses locked before the paragraph is shown); the
# page's autosave can never overwrite it.
SERVER_DRAFT_KEY = "_server"
# MC modes in which each item is confirmed on its own before the next one is shown.
CONFIRM_MODES = (ExperimentMode.QA, ExperimentMode.GUESSING, ExperimentMode.PILOT)
# Prolific comprehension checks (the practice items with a gold answer of a Prolific stage):
# Prolific requires a second attempt after a wrong answer, and a participant who fails twice is
# asked to return the study and must not be rejected for it. Server draft state keys:
ATTEMPTS_KEY = "attempts"  # item id -> [the first, wrong, attempt]
RETURN_KEY = "return_requested"  # when the participant was asked to return the study
# Late confirms refused because others filled the item meanwhile (item id -> message): the page
# counts them as settled and the submit no longer asks for them.
REFUSED_KEY = "refused"
RETRY_MESSAGE = ("That answer was not right. Read the question again and answer it once more: "
                 "you have one more attempt.")
RETURN_MESSAGE = ("Your answer to the comprehension question was not right again, so you cannot "
                  "continue with this study. Please return the study on Prolific (\"Stop without "
                  "completing\" / return your submission): you will not be rejected for this. "
                  "There is no completion code.")


# --- Refusals -----------------------------------------------------------------------------------


class AssignmentRefused(Exception):
    """The worker may not have (or continue) this assignment; `message` is shown to them."""

    code = "refused"

    def __init__(self, message: str, *, assignment: Assignment | None = None):
        self.message = message
        self.assignment = assignment
        super().__init__(message)


class WorkerBlocked(AssignmentRefused):
    code = "blocked"


class QualificationRequired(AssignmentRefused):
    code = "qualification_required"


class StageNotOpen(AssignmentRefused):
    code = "stage_not_open"


class NoItemsAvailable(AssignmentRefused):
    code = "no_items"


class ForeignAssignment(AssignmentRefused):
    code = "foreign_assignment"


class AssignmentClosed(AssignmentRefused):
    """Submitted (the page shows the completion again) or returned/expired (refused)."""

    code = "closed"

    @property
    def finished(self) -> bool:
        return self.assignment is not None and self.assignment.status in FINISHED_STATUSES


class ReturnRequested(AssignmentClosed):
    """A Prolific participant failed a comprehension check twice: nothing more is served and
    the page asks them to return the study (no completion code)."""

    code = "return_requested"


class SubmissionInvalid(ValueError):
    """Answers that cannot be stored: `errors` maps item id (or "__all__") to messages."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__(f"{len(errors)} item(s) need attention")


# --- Helpers ------------------------------------------------------------------------------------


def answer_rules(project) -> AnswerRules:
    return AnswerRules(
        kind=project.kind,
        mode=project.experiment_mode if project.kind == TaskKind.MC else "",
        justification_min_length=project.justification_min_length,
        aspects=list(project.aspects or []),
        aspect_preferences=list(project.aspect_preferences or []),
        scale_size=len(project.scale_labels or []) or 5,
    )


def _cutoff(project, now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(minutes=project.assignment_timeout_minutes)


def _live_assignments(stage: Stage, now: datetime | None = None) -> QuerySet[Assignment]:
    """In-progress assignments of the stage that have not timed out."""
    return Assignment.objects.annotate(
        seen=Coalesce("last_seen_at", "started_at")
    ).filter(stage=stage, status=AssignmentStatus.IN_PROGRESS, seen__gte=_cutoff(stage.project, now))


def stage_items(stage: Stage) -> QuerySet[Item]:
    """Items released in the stage: its own list, or every non-excluded project item."""
    if stage.items.exists():
        qs = stage.items.all()
    else:
        qs = Item.objects.filter(project_id=stage.project_id)
    return qs.filter(excluded=False)


def _mixes_in_extras(stage: Stage) -> bool:
    # Practice and qualification stages serve exactly their own item list; data stages
    # (trial, full, pilot, imported) get the project's practice and gold items on top of it,
    # because publishing stores only the regular items on `stage.items`.
    return stage.kind not in (StageKind.PRACTICE, StageKind.QUALIFICATION)


def gold_items_for_stage(*, stage: Stage) -> QuerySet[Item]:
    """The gold/attention-check items mixed into the stage's assignments at
    `project.gold_rate`: the project's (not `stage.items`, which publishing fills with the
    regular items only). MTurk HIT plans can draw from the same pool."""
    if not _mixes_in_extras(stage):
        return stage_items(stage).filter(is_gold_check=True, is_practice=False)
    qs = Item.objects.filter(project_id=stage.project_id, excluded=False,
                             is_gold_check=True, is_practice=False)
    if not (stage.settings or {}).get("reuse_earlier_items"):
        # Not the ones a qualification released: the admitted workers answered them already.
        qs = qs.exclude(pk__in=Item.objects.filter(
            stages__project_id=stage.project_id, stages__kind=StageKind.QUALIFICATION)
            .values("pk"))
    return qs


def practice_items_for_stage(*, stage: Stage, worker: Worker | None = None) -> QuerySet[Item]:
    """The practice items every worker does first. In a data stage these are the project's
    practice items, minus those `worker` already did in another stage of the project (a
    practice stage before the trial): practice trains the worker once."""
    if not _mixes_in_extras(stage):
        return stage_items(stage).filter(is_practice=True)
    qs = Item.objects.filter(project_id=stage.project_id, excluded=False, is_practice=True)
    if worker is not None:
        qs = qs.exclude(pk__in=Judgment.objects.filter(
            worker=worker, stage__project_id=stage.project_id).exclude(stage=stage)
            .values("item_id"))
    return qs


def _target(stage: Stage):
    """The redundancy target of an item as an expression: the stage's fixed number, or the
    project's per-split redundancy."""
    if stage.judgments_per_item:
        return Value(int(stage.judgments_per_item), output_field=IntegerField())
    redundancy = stage.project.redundancy or {}
    default = stage.project.redundancy_for("")
    whens = [When(split=split, then=Value(int(n))) for split, n in redundancy.items()
             if split != "default"]
    return Case(*whens, default=Value(default), output_field=IntegerField()) if whens \
        else Value(default, output_field=IntegerField())


def _held(stage: Stage, exclude_assignment_id: int | None = None) -> QuerySet[AssignmentItem]:
    """Items held by live assignments without a judgment yet (one row per hold)."""
    live = _live_assignments(stage)
    if exclude_assignment_id is not None:
        live = live.exclude(pk=exclude_assignment_id)
    return AssignmentItem.objects.filter(assignment_id__in=live.values("pk")).filter(
        ~Exists(Judgment.objects.filter(
            assignment_id=OuterRef("assignment_id"), item_id=OuterRef("item_id"))))


def _annotate_deficit(qs: QuerySet[Item], stage: Stage,
                      exclude_assignment_id: int | None = None) -> QuerySet[Item]:
    judged = (
        Judgment.objects.filter(stage=stage, item=OuterRef("pk"))
        .order_by().values("item").annotate(n=Count("pk")).values("n")
    )
    held = (
        _held(stage, exclude_assignment_id).filter(item=OuterRef("pk"))
        .order_by().values("item").annotate(n=Count("pk")).values("n")
    )
    return qs.annotate(
        n_judged=Coalesce(Subquery(judged, output_field=IntegerField()), 0),
        n_held=Coalesce(Subquery(held, output_field=IntegerField()), 0),
        target=_target(stage),
    ).annotate(deficit=F("target") - F("n_judged") - F("n_held"))


def _not_seen_by(qs: QuerySet[Item], stage: Stage, worker: Worker) -> QuerySet[Item]:
    judged = Judgment.objects.filter(stage=stage, worker=worker).values("item_id")
    held = AssignmentItem.objects.filter(
        assignment__stage=stage, assignment__worker=worker,
        assignment__status=AssignmentStatus.IN_PROGRESS,
    ).values("item_id")
    return qs.exclude(pk__in=judged).exclude(pk__in=held)


def _refuse_hit_seen_before(*, stage: Stage, worker: Worker, items: list[Item]) -> None:
    """A HIT's items are fixed, so the design is kept at accept: a worker who answered one of
    its items in an earlier stage, or (Latin square) saw one of its questions at any level, is
    asked to return it; nothing is created."""
    earlier = _not_seen_earlier(Item.objects.filter(pk__in=[i.pk for i in items]), stage, worker)
    if earlier.count() < len(items):
        raise NoItemsAvailable("You have already answered part of this HIT earlier in this "
                               "study. Please return it; other HITs may be open to you.")
    if latin_square_on(stage):
        seen = _questions_seen(project_id=stage.project_id, worker=worker)
        if any(key in seen for _pk, _level, key in _condition_rows(
                Item.objects.filter(pk__in=[i.pk for i in items]))):
            raise NoItemsAvailable("This HIT shows a question you have already read in another "
                                   "version. Please return it; other HITs may be open to you.")


def _not_seen_earlier(qs: QuerySet[Item], stage: Stage, worker: Worker) -> QuerySet[Item]:
    """Without the items the worker answered in another stage of the project (the
    qualification they were graded on against gold, the trial): never served to them again,
    unless the stage says `"reuse_earlier_items": true`."""
    if (stage.settings or {}).get("reuse_earlier_items"):
        return qs
    return qs.exclude(pk__in=Judgment.objects.filter(
        worker=worker, item__project_id=stage.project_id).exclude(stage=stage).values("item_id"))


def _lock(ids: list[int]) -> list[int]:
    """Lock item rows, skipping rows another allocator holds (PostgreSQL); no-op elsewhere."""
    if not ids:
        return []
    qs = Item.objects.filter(pk__in=ids).order_by("pk")
    if connection.features.has_select_for_update_skip_locked:
        qs = qs.select_for_update(skip_locked=True)
    return list(qs.values_list("pk", flat=True))


def _take_sqlite_write_lock(stage: Stage) -> None:
    """SQLite allows one writer; take the lock before reading counts so two allocators queue up
    instead of both reading the same counts (or dead-locking on the upgrade)."""
    if connection.vendor == "sqlite":
        Stage.objects.filter(pk=stage.pk).update(updated_at=F("updated_at"))


# --- Picking items ------------------------------------------------------------------------------


@transaction.atomic
def items_pick_next(*, stage: Stage, worker: Worker, limit: int) -> list[Item]:
    """The next `limit` items for `worker` in `stage`: practice items first, then the items
    furthest from their redundancy target (Likert: one passage group), with gold/attention items
    mixed in at `project.gold_rate`. Must run inside the transaction that stores the choice (it
    does when called from `assignment_start`) so the row locks cover the write."""
    _take_sqlite_write_lock(stage)
    project = stage.project
    available = _not_seen_earlier(_not_seen_by(stage_items(stage), stage, worker), stage, worker)
    picked: list[Item] = []

    # Practice items: every worker does them, first, whatever the redundancy.
    practice_qs = _not_seen_by(practice_items_for_stage(stage=stage, worker=worker), stage, worker)
    practice = list(practice_qs.order_by("pk")[:limit])
    picked += practice
    room = limit - len(picked)
    if room <= 0:
        return picked

    if stage.kind in (StageKind.PRACTICE, StageKind.QUALIFICATION):
        # Qualification and practice stages test workers on the same items: no redundancy cap.
        return picked + list(available.filter(is_practice=False).order_by("pk")[:room])

    n_gold = 0
    if project.gold_rate > 0 and room > 1:
        # Randomised rounding keeps the long-run share at gold_rate even for small HITs.
        expected = room * project.gold_rate
        n_gold = min(room - 1, int(expected) + (random.random() < expected - int(expected)))
    regular_qs = available.filter(is_practice=False, is_gold_check=False)
    if latin_square_on(stage):
        regular_qs = _latin_square(stage=stage, worker=worker, available=regular_qs)
    regular = _pick_regular(stage=stage, available=regular_qs, room=room - n_gold)
    gold: list[Item] = []
    if n_gold and regular:
        gold_qs = _not_seen_earlier(
            _not_seen_by(gold_items_for_stage(stage=stage), stage, worker), stage, worker)
        groups = {item.group_key for item in regular if item.group_key}
        # Likert gold items from the same passage keep the page indistinguishable.
        same_group = list(gold_qs.filter(group_key__in=groups)) if groups else []
        pool = same_group or ([] if project.kind == TaskKind.LIKERT and groups
                              else list(gold_qs))
        gold = random.sample(pool, min(n_gold, len(pool)))
    mixed = list(regular)
    for item in gold:
        mixed.insert(random.randint(0, len(mixed)), item)
    return picked + mixed


def latin_square_on(stage: Stage) -> bool:
    """Whether the stage serves STARC conditions in a Latin square: the default for every
    multiple-choice project whose items come in more than one text level; a stage setting
    `"latin_square": false` turns it off (then a participant may see one question at several
    levels, which the STARC design forbids)."""
    setting = (stage.settings or {}).get("latin_square")
    if setting is not None:
        return bool(setting)
    if stage.project.kind != TaskKind.MC:
        return False
    levels = stage_items(stage).exclude(text_level="").values("text_level").distinct()
    return levels.count() > 1


def _condition_rows(qs: QuerySet[Item]) -> list[tuple[int, str, tuple]]:
    """(pk, text level, question key) of each item (annotation.domain.design)."""
    rows = qs.order_by().values_list(
        "pk", "text_level", "metadata__article", "metadata__paragraph", "metadata__question"
    )
    return [(pk, level, question_key(item_id=pk, article=a, paragraph=p, question=q))
            for pk, level, a, p, q in rows]


def _questions_seen(*, project_id: int, worker: Worker) -> set[tuple]:
    """The STARC questions (at any level) this worker judged or holds in the project, in any
    stage: a question seen once is never served again at another level."""
    mine = Judgment.objects.filter(item__project_id=project_id, worker=worker).values("item_id")
    held = AssignmentItem.objects.filter(
        assignment__stage__project_id=project_id, assignment__worker=worker,
        assignment__status=AssignmentStatus.IN_PROGRESS).values("item_id")
    return {key for _pk, _level, key in _condition_rows(
        Item.objects.filter(Q(pk__in=mine) | Q(pk__in=held)))}


def participant_list(*, stage: Stage, worker: Worker, n_levels: int) -> int:
    """The worker's Latin-square list: participants are dealt lists round-robin in the order
    they first started an assignment in the stage (the first three get lists 0, 1, 2, the
    fourth list 0 …), which keeps the levels balanced however few participants there are; worker
    ids modulo n would not (four ids can all be even)."""
    first = (Assignment.objects.filter(stage=stage).values("worker_id")
             .annotate(first=Min("pk")))
    mine = next((row["first"] for row in first if row["worker_id"] == worker.pk), None)
    before = sum(1 for row in first if mine is None or row["first"] < mine)
    return before % n_levels


def _latin_square(*, stage: Stage, worker: Worker, available: QuerySet[Item]) -> QuerySet[Item]:
    """STARC conditions (question x text level) in a Latin square (annotation.domain.design):
    the worker's list L sees question i at level (i + L) mod n, and never a question already
    seen at another level in any stage of the project."""
    everything = _condition_rows(stage_items(stage))
    levels = ordered_levels(level for _, level, _ in everything)
    if len(levels) < 2:
        return available
    index = {key: i for i, key in enumerate(sorted({key for _, _, key in everything}, key=str))}
    seen = _questions_seen(project_id=stage.project_id, worker=worker)
    if connection.features.has_select_for_update:
        # Arrivals take their list one at a time (SQLite already has its write lock).
        Stage.objects.select_for_update().filter(pk=stage.pk).first()
    shift = participant_list(stage=stage, worker=worker, n_levels=len(levels))
    allowed = [pk for pk, level, key in _condition_rows(available)
               if key not in seen and key in index and level in levels
               and levels.index(level) == level_for(question_index=index[key],
                                                    list_index=shift, n_levels=len(levels))]
    return available.filter(pk__in=allowed)


def _sql(qs: QuerySet) -> tuple[str, tuple]:
    return qs.query.get_compiler(using=qs.db).as_sql()


def _ranked(stage: Stage, available: QuerySet[Item], *, limit: int) -> list[tuple[int, str]]:
    """(pk, group_key) of the `limit` available items furthest from their target (deficit > 0),
    furthest first, ranked in the database: one row per available item carrying its target,
    one row (-1) per judgment in the stage and per live hold, summed per item, ORDER BY the sum
    with a LIMIT. A UNION + GROUP BY rather than joins or correlated count subqueries: its cost
    does not depend on the planner's row estimates (a fresh stage without statistics got nested
    loops re-aggregating per item, seconds at 4,000 items). Items judged or held but not
    available sum below zero and are dropped here."""
    try:
        avail_sql, avail_params = _sql(
            available.order_by().annotate(qaj_target=_target(stage))
            .values_list("id", "group_key", "qaj_target"))
    except EmptyResultSet:  # nothing can be available (e.g. every question already seen)
        return []
    judged_sql, judged_params = _sql(
        Judgment.objects.filter(stage=stage).order_by().values_list("item_id"))
    held_sql, held_params = _sql(_held(stage).order_by().values_list("item_id"))
    sql = f"""
        SELECT item_id, MAX(group_key), SUM(w) AS deficit FROM (
            SELECT a.id AS item_id, a.group_key AS group_key, a.qaj_target AS w
              FROM ({avail_sql}) a
            UNION ALL SELECT j.item_id, NULL, -1 FROM ({judged_sql}) j
            UNION ALL SELECT h.item_id, NULL, -1 FROM ({held_sql}) h
        ) counts
        GROUP BY item_id
        ORDER BY deficit DESC, item_id
        LIMIT %s"""
    with connection.cursor() as cursor:
        cursor.execute(sql, (*avail_params, *judged_params, *held_params, int(limit)))
        return [(pk, group_key) for pk, group_key, deficit in cursor.fetchall() if deficit > 0]


def _pick_regular(*, stage: Stage, available: QuerySet[Item], room: int) -> list[Item]:
    likert_groups = stage.project.kind == TaskKind.LIKERT
    tried: set[int] = set()
    tried_groups: set[str] = set()
    for _attempt in range(5):
        # Each attempt reads only a few ranked rows; items locked by another allocator or
        # filled meanwhile are excluded from the next, wider, read.
        pool = available.exclude(pk__in=tried) if tried else available
        if tried_groups:
            pool = pool.exclude(group_key__in=tried_groups)
        ranked = _ranked(stage, pool, limit=1 if likert_groups else room * 3)
        if not ranked:
            return []
        first_group = ranked[0][1]
        if likert_groups and first_group:
            # One passage per assignment: all its available items (a passage has a handful);
            # the recount below keeps the `room` furthest from their target.
            candidates = list(pool.filter(group_key=first_group).order_by("pk")
                              .values_list("pk", flat=True))
            tried_groups.add(first_group)
        elif likert_groups:
            candidates = [pk for pk, _ in _ranked(stage, pool.filter(group_key=""),
                                                  limit=room * 3)]
        else:
            candidates = [pk for pk, _ in ranked]
        tried.update(candidates)
        locked = _lock(candidates)
        # Recount after locking: a slot taken by a transaction that committed since our first
        # read is visible to this new statement.
        # Filtered and ordered here, not in SQL: a WHERE/ORDER BY on `deficit` makes the
        # database evaluate both count subqueries twice per row.
        counted = _annotate_deficit(Item.objects.filter(pk__in=locked), stage)
        fresh = sorted((item for item in counted if item.deficit > 0),
                       key=lambda item: (-item.deficit, item.pk))[:room]
        if fresh:
            return fresh
    return []


# --- Starting -----------------------------------------------------------------------------------


def _check_worker(*, stage: Stage, worker: Worker) -> None:
    if worker_is_blocked_for(worker=worker, project=stage.project):
        raise WorkerBlocked("Your account can no longer take tasks in this study.")
    if stage.requires_stage_id and not WorkerQualification.objects.filter(
        worker=worker, stage_id=stage.requires_stage_id, passed=True
    ).exists():
        raise QualificationRequired(
            "This task needs a qualification you have not passed yet."
        )


def _presented_order(kind: str) -> list[str]:
    if kind == TaskKind.AB:
        letters = ["A", "B"]
    elif kind == TaskKind.MC:
        letters = ["A", "B", "C", "D"]
    else:
        return []
    random.SystemRandom().shuffle(letters)
    return letters


def _create(*, stage: Stage, worker: Worker, items: list[Item], hit: Hit | None,
            external_id: str) -> Assignment:
    assignment = Assignment.objects.create(
        stage=stage, worker=worker, hit=hit, external_id=external_id,
        last_seen_at=timezone.now(),
    )
    AssignmentItem.objects.bulk_create([
        AssignmentItem(assignment=assignment, item=item, position=position,
                       presented_order=_presented_order(stage.project.kind))
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
                     external_id: str = "") -> Assignment:
    """The worker's assignment in `stage`: the existing one for `external_id` (an MTurk
    assignmentId or a Prolific session), the worker's unfinished in-house one, or a new one with
    the HIT's items (`hit`) or the next items picked for them."""
    if stage.status not in OPEN_STAGE_STATUSES:
        raise StageNotOpen("This task is not open at the moment.")
    if hit is not None and hit.stage_id != stage.pk:
        raise ForeignAssignment("This HIT belongs to another task.")
    # Locks before any read: SQLite cannot upgrade a transaction that has read to a writer
    # while another writer waits ("database is locked"), so the write lock comes first.
    if hit is not None:
        # One allocation per HIT at a time, so a double-loaded page creates one assignment.
        Hit.objects.select_for_update().filter(pk=hit.pk).first()
    _take_sqlite_write_lock(stage)
    _check_worker(stage=stage, worker=worker)
    if stage.provider == Provider.PROLIFIC and Assignment.objects.filter(
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
            if _is_late(reopened):
                # Reopening brings it back to life; remember that its items were free meanwhile.
                _flag_late(reopened)
            return reopened
    elif hit is None:
        unfinished = _live_assignments(stage).filter(worker=worker, hit__isnull=True)\
            .order_by("-pk").first()
        if unfinished is not None:
            # The page reads stage and project next; reuse the objects we already hold.
            unfinished.stage = stage
            unfinished.worker = worker
            return unfinished

    if hit is not None:
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
    else:
        limit = int(stage.settings.get("items_per_assignment") or stage.project.items_per_hit)
        items = items_pick_next(stage=stage, worker=worker, limit=limit)
    if not items:
        raise NoItemsAvailable("There are no more items for you in this task. Thank you!")
    return _create(stage=stage, worker=worker, items=items, hit=hit, external_id=external_id)


@transaction.atomic
def assignment_release_abandoned(*, now: datetime | None = None) -> int:
    """Mark in-progress assignments idle for longer than their project's timeout RETURNED, which
    frees their items for other workers. Assignments tied to a provider HIT follow MTurk's own
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
    released += _release_expired_hit_assignments(now=now)
    return released


# After MTurk's assignment duration nobody can submit the assignment there any more; the margin
# covers a submit on its way when the duration ends.
HIT_ASSIGNMENT_GRACE = timedelta(minutes=10)


def _release_expired_hit_assignments(*, now: datetime) -> int:
    """HIT assignments still in progress after the HIT type's assignment duration (+ grace) that
    the provider never confirmed: MTurk has returned or abandoned them (or they never existed
    there: a made-up assignmentId). Releasing them frees their slot of the HIT."""
    from annotation.providers.mturk import assignment_duration_seconds

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


# --- Working on it ------------------------------------------------------------------------------


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
    seen = assignment.last_seen_at or assignment.started_at
    return (assignment.status == AssignmentStatus.IN_PROGRESS
            and seen < _cutoff(assignment.stage.project, now))


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


@transaction.atomic
def assignment_save_draft(*, assignment: Assignment, draft: dict) -> Assignment:
    """Autosave the page's partial answers (and keep the assignment alive)."""
    import json

    if not isinstance(draft, dict):
        raise SubmissionInvalid({"__all__": ["The draft must be an object."]})
    if len(json.dumps(draft)) > MAX_DRAFT_BYTES:
        raise SubmissionInvalid({"__all__": ["The draft is too large."]})
    assignment = _locked_open(assignment, allow_late=True)
    own = {key: value for key, value in draft.items() if key != SERVER_DRAFT_KEY}
    if SERVER_DRAFT_KEY in (assignment.draft or {}):
        own[SERVER_DRAFT_KEY] = assignment.draft[SERVER_DRAFT_KEY]
    assignment.draft = own
    assignment.last_seen_at = timezone.now()
    assignment.save(update_fields=["draft", "last_seen_at"])
    return assignment


def assignment_touch(*, assignment: Assignment) -> None:
    """The page was (re)opened: keep the assignment alive and note when items were first shown."""
    now = timezone.now()
    Assignment.objects.filter(pk=assignment.pk).update(last_seen_at=now)
    AssignmentItem.objects.filter(assignment=assignment, first_shown_at__isnull=True).update(
        first_shown_at=now
    )


def _assignment_item(assignment: Assignment, item_id: Any) -> AssignmentItem:
    try:
        item_id = int(item_id)
    except (TypeError, ValueError):
        raise SubmissionInvalid({"__all__": ["Unknown item."]}) from None
    row = AssignmentItem.objects.select_related("item").filter(
        assignment=assignment, item_id=item_id
    ).first()
    if row is None:
        raise SubmissionInvalid({"__all__": ["This item is not part of your assignment."]})
    return row


def _server_state(assignment: Assignment) -> dict:
    return dict((assignment.draft or {}).get(SERVER_DRAFT_KEY) or {})


def _save_server_state(assignment: Assignment, state: dict) -> None:
    assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
    assignment.last_seen_at = timezone.now()
    assignment.save(update_fields=["draft", "last_seen_at"])


def _refuse_if_return_requested(assignment: Assignment) -> None:
    # Checked before anything else: the assignment is RETURNED, which would otherwise pass as
    # a late one that may still be worked on.
    if _server_state(assignment).get(RETURN_KEY):
        raise ReturnRequested(RETURN_MESSAGE, assignment=assignment)


def _is_comprehension_check(assignment: Assignment, item: Item) -> bool:
    # Qualification stages never reveal their scoring, so they keep a single attempt.
    stage = assignment.stage
    return (stage.provider == Provider.PROLIFIC and stage.kind != StageKind.QUALIFICATION
            and item.is_practice and bool(item.gold))


def _attempt_record(fields: dict) -> dict:
    """A JSON copy of a cleaned answer, kept with the judgment as `extra["attempts"]`."""
    import json

    from django.core.serializers.json import DjangoJSONEncoder

    record = json.loads(json.dumps(fields, cls=DjangoJSONEncoder))
    record["answered_at"] = timezone.now().isoformat()
    return record


def _comprehension_outcome(assignment: Assignment, state: dict, row: AssignmentItem,
                           judgment: Judgment, record: dict) -> str:
    """"ok", "retry" (a first wrong answer: recorded in `state`, not stored as a judgment) or
    "failed" (wrong twice) for an answer to a Prolific comprehension check; "ok" for any other
    item. The first attempt is attached to the judgment of the second."""
    if not _is_comprehension_check(assignment, row.item):
        return "ok"
    from .qualification import answer_is_correct

    key = str(row.item_id)
    attempts = dict(state.get(ATTEMPTS_KEY) or {})
    earlier = list(attempts.get(key) or [])
    if earlier:
        judgment.extra = {**(judgment.extra or {}), "attempts": earlier}
    tolerance = assignment.stage.project.qualification_tolerance
    if answer_is_correct(item=row.item, judgment=judgment, tolerance=tolerance) is not False:
        return "ok"
    if earlier:
        return "failed"
    attempts[key] = [record]
    state[ATTEMPTS_KEY] = attempts
    return "retry"


def _return_request(assignment: Assignment, state: dict, rows: list[AssignmentItem]) -> None:
    """Failed twice: the participant is asked to return the study. RETURNED frees the items
    they still held at once; review never rejects them (see `assignment_review_rules`)."""
    state[RETURN_KEY] = timezone.now().isoformat()
    numbers = ", ".join(str(row.position + 1) for row in rows)
    note = (f"Asked to return the study: failed the comprehension check twice (item {numbers}). "
            "Not to be rejected for it; excluded from analysis.")
    assignment.review_note = "\n".join(p for p in (assignment.review_note, note) if p)
    assignment.status = AssignmentStatus.RETURNED
    assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
    assignment.last_seen_at = timezone.now()
    assignment.save(update_fields=["draft", "review_note", "status", "last_seen_at"])


def assignment_page_state(*, assignment: Assignment) -> dict[str, dict]:
    """What a reloaded page needs beyond its judgments: `settled` (item id -> feedback) for
    late confirms refused because others filled the item, and `retry` (item id -> message) for
    comprehension checks answered wrong once. Never the gold answer."""
    # `assignment` as just loaded by the page view (no extra query on the hot path).
    state = _server_state(assignment)
    judged = {str(pk) for pk in Judgment.objects.filter(assignment=assignment)
              .values_list("item_id", flat=True)} if state.get(ATTEMPTS_KEY) else set()
    return {
        "settled": {key: {"refused": message, "settled": True}
                    for key, message in (state.get(REFUSED_KEY) or {}).items()},
        "retry": {key: RETRY_MESSAGE for key in (state.get(ATTEMPTS_KEY) or {})
                  if key not in judged},
    }


def _is_correct(item: Item, fields: dict) -> bool | None:
    if not item.gold or item.project.kind != TaskKind.MC:
        return None
    return fields.get("choice") == item.gold.get("choice")


def _judgment(assignment: Assignment, row: AssignmentItem, fields: dict,
              client_meta: dict | None) -> Judgment:
    extra = dict(fields.pop("extra", {}) or {})
    correct = _is_correct(row.item, fields)
    if correct is not None:
        extra["is_correct"] = correct
    if client_meta:
        extra["client_meta"] = client_meta
    return Judgment(
        item=row.item, worker_id=assignment.worker_id, stage_id=assignment.stage_id,
        assignment=assignment, presented_order=list(row.presented_order or []),
        extra=extra, **fields,
    )


def _clean_client_meta(client_meta: Any) -> dict:
    if not isinstance(client_meta, dict):
        return {}
    return {str(k)[:40]: (v if isinstance(v, (int, float, bool)) else str(v)[:300])
            for k, v in list(client_meta.items())[:20]}


@transaction.atomic
def assignment_record_guess(*, assignment: Assignment, item: Item | int, answer: dict) -> str:
    """Pilot page 1: lock the guess made before reading (returns it as a role letter). The
    paragraph is only revealed after this, and the guess cannot be changed afterwards."""
    assignment = _locked_open(assignment, allow_late=True)
    row = _assignment_item(assignment, getattr(item, "pk", item))
    state = _server_state(assignment)
    guesses = dict(state.get("guesses") or {})
    key = str(row.item_id)
    if key not in guesses:
        try:
            guesses[key] = clean_guess(answer=answer, presented_order=row.presented_order)
        except AnswerError as exc:
            raise SubmissionInvalid({key: exc.messages}) from None
        state["guesses"] = guesses
        assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
        assignment.last_seen_at = timezone.now()
        assignment.save(update_fields=["draft", "last_seen_at"])
    return guesses[key]


@transaction.atomic
def assignment_confirm_item(*, assignment: Assignment, item: Item | int, answer: dict,
                            client_meta: dict | None = None) -> Judgment | None:
    """Store one item's judgment before the rest of the assignment (STARC QA, guessing and
    pilot modes show feedback or the next page after it). Idempotent: a second confirmation of
    the same item returns the first judgment unchanged.

    Returns None, storing no judgment, when (a) a late assignment's item was filled by others
    meanwhile (recorded as refused: settled for the page and the submit), or (b) a Prolific
    comprehension check was answered wrong the first time (the attempt is recorded; the next
    answer is the judgment). A second wrong answer is stored and the participant is asked to
    return the study (`ReturnRequested` from then on). `assignment_feedback` says which."""
    assignment = _locked_open(assignment, allow_late=True)
    row = _assignment_item(assignment, getattr(item, "pk", item))
    existing = Judgment.objects.filter(assignment=assignment, item_id=row.item_id).first()
    if existing is not None:
        return existing
    state = _server_state(assignment)
    key = str(row.item_id)
    if key in (state.get(REFUSED_KEY) or {}):
        return None
    if _is_late(assignment) and _filled_since_timeout(assignment=assignment, rows=[row]):
        # Recorded rather than raised: the page shows the item as no longer needed, so the
        # worker can still submit the rest, and the submit does not ask for it again.
        state[REFUSED_KEY] = {**(state.get(REFUSED_KEY) or {}), key: _filled_message([row])}
        _save_server_state(assignment, state)
        return None
    locked_guess = (state.get("guesses") or {}).get(key)
    try:
        fields = clean_answer(rules=answer_rules(assignment.stage.project), answer=answer,
                              presented_order=row.presented_order, locked_guess=locked_guess)
    except AnswerError as exc:
        raise SubmissionInvalid({key: exc.messages}) from None
    record = _attempt_record(fields)
    judgment = _judgment(assignment, row, fields, _clean_client_meta(client_meta))
    outcome = _comprehension_outcome(assignment, state, row, judgment, record)
    if outcome == "retry":
        _save_server_state(assignment, state)
        return None
    try:
        with transaction.atomic():
            judgment.save(force_insert=True)
    except IntegrityError:
        # The same worker judged this item in this stage through another assignment.
        raise SubmissionInvalid(
            {key: ["You have already judged this item."]}
        ) from None
    if outcome == "failed":
        _return_request(assignment, state, [row])
    else:
        Assignment.objects.filter(pk=assignment.pk).update(last_seen_at=timezone.now())
    return judgment


class SubmittedJudgments(list):
    """`assignment_submit`'s result: the assignment's judgments; after a late submit also
    `refused` (item id -> message) for the answers that could not be stored because other
    workers filled those items after the timeout, and `message` saying so."""

    def __init__(self, judgments, *, refused: dict[str, list[str]] | None = None,
                 message: str = "", retry: dict[str, list[str]] | None = None,
                 return_requested: str = ""):
        super().__init__(judgments)
        self.refused = refused or {}
        self.message = message
        # Prolific comprehension checks: not submitted. `retry` (item id -> message): answered
        # wrong once, answer again; `return_requested`: wrong twice, the message asking the
        # participant to return the study.
        self.retry = retry or {}
        self.return_requested = return_requested


@transaction.atomic
def assignment_submit(*, assignment: Assignment, answers: list[dict],
                      client_meta: dict | None = None) -> SubmittedJudgments:
    """Store the judgments of every item of the assignment at once and mark it submitted.

    `answers` holds one dict per item (`{"item": id, ...}`, shown labels, see
    `annotation.domain.answers`); items already confirmed one by one may be left out. Either
    every remaining item is valid and all are stored, or nothing is (SubmissionInvalid names
    each item that needs attention). A second submit stores nothing and returns the judgments
    of the first.

    A late submit (the assignment timed out, so its items were free for others) stores the
    answers to the items that still need judgments and refuses, by item, those others have
    filled meanwhile (`SubmittedJudgments.refused`); if none can be stored it is refused
    (AssignmentClosed) naming the items. Items whose late confirm was refused that way
    (`assignment_confirm_item`) are settled and need no answer.

    On Prolific, a comprehension check answered wrong for the first time stores nothing and
    returns `retry`; answered wrong again, only the comprehension checks are stored and the
    participant is asked to return the study (`return_requested`; not submitted, no code).
    """
    locked = _lock_assignment(assignment.pk)
    if locked.status in FINISHED_STATUSES:
        return SubmittedJudgments(locked.judgments.order_by("pk"))
    _refuse_if_return_requested(locked)
    late = _is_late(locked)
    if locked.status != AssignmentStatus.IN_PROGRESS and not late:
        raise AssignmentClosed(
            "This assignment was returned or has expired; reload the page for new items.",
            assignment=locked,
        )
    assignment = locked
    project = assignment.stage.project
    rules = answer_rules(project)
    rows = list(AssignmentItem.objects.select_related("item__project")
                .filter(assignment=assignment).order_by("position"))
    by_id = {row.item_id: row for row in rows}
    done = set(Judgment.objects.filter(assignment=assignment).values_list("item_id", flat=True))

    if not isinstance(answers, list):
        raise SubmissionInvalid({"__all__": ["Answers must be a list."]})
    given: dict[int, dict] = {}
    errors: dict[str, list[str]] = {}
    for answer in answers:
        item_id = answer.get("item") if isinstance(answer, dict) else None
        try:
            item_id = int(item_id)
        except (TypeError, ValueError):
            errors.setdefault("__all__", []).append("An answer names no item.")
            continue
        if item_id not in by_id:
            errors.setdefault("__all__", []).append(
                f"Item {item_id} is not part of this assignment."
            )
            continue
        if item_id in given:
            errors.setdefault(str(item_id), []).append("This item was answered twice.")
            continue
        given[item_id] = answer

    state = _server_state(assignment)
    # Refused at a late confirm: settled, whatever the count says now.
    filled = {int(key) for key in (state.get(REFUSED_KEY) or {})} - done
    filled |= _filled_since_timeout(
        assignment=assignment, rows=[row for row in rows if row.item_id not in done | filled]
    ) if late else set()
    filled_rows = [row for row in rows if row.item_id in filled]
    guesses = state.get("guesses") or {}
    judgments: list[Judgment] = []
    checks: list[tuple[AssignmentItem, Judgment, dict]] = []
    meta = _clean_client_meta(client_meta)
    for row in rows:
        if row.item_id in done or row.item_id in filled:
            continue
        if row.item_id not in given:
            errors.setdefault(str(row.item_id), []).append("Answer this item.")
            continue
        try:
            fields = clean_answer(rules=rules, answer=given[row.item_id],
                                  presented_order=row.presented_order,
                                  locked_guess=guesses.get(str(row.item_id)))
        except AnswerError as exc:
            errors.setdefault(str(row.item_id), []).extend(exc.messages)
            continue
        record = _attempt_record(fields) if _is_comprehension_check(assignment, row.item) \
            else {}
        judgments.append(_judgment(assignment, row, fields, meta))
        if record:
            checks.append((row, judgments[-1], record))
    if errors:
        raise SubmissionInvalid(errors)
    outcomes = {row.item_id: _comprehension_outcome(assignment, state, row, judgment, record)
                for row, judgment, record in checks}
    failed_rows = [row for row, _, _ in checks if outcomes[row.item_id] == "failed"]
    if failed_rows:
        # Only the comprehension checks are kept: the rest of the work of a participant asked
        # to return is never used and must not take redundancy slots from others.
        kept = [judgment for _, judgment, _ in checks]
        try:
            with transaction.atomic():
                Judgment.objects.bulk_create(kept)
        except IntegrityError:
            raise SubmissionInvalid(
                {"__all__": ["Some of these items were already judged by you in this stage."]}
            ) from None
        _return_request(assignment, state, failed_rows)
        return SubmittedJudgments(Judgment.objects.filter(assignment=assignment).order_by("pk"),
                                  return_requested=RETURN_MESSAGE)
    retry = {str(item_id): [RETRY_MESSAGE] for item_id, outcome in outcomes.items()
             if outcome == "retry"}
    if retry:
        # Nothing is stored: the page keeps every answer and the participant submits again.
        _save_server_state(assignment, state)
        return SubmittedJudgments([], retry=retry, message=RETRY_MESSAGE)
    message = _filled_message(filled_rows) if filled_rows else ""
    if filled_rows and not judgments and not done:
        raise AssignmentClosed(message + " Nothing was stored; thank you for your time.",
                               assignment=assignment)
    try:
        with transaction.atomic():
            # One INSERT for the page (Judgment.save adds nothing to a plain insert).
            Judgment.objects.bulk_create(judgments)
    except IntegrityError:
        # A concurrent submit of the same assignment won (SQLite has no row lock to wait on).
        fresh = Assignment.objects.get(pk=assignment.pk)
        if fresh.status in FINISHED_STATUSES or Judgment.objects.filter(
            assignment=assignment
        ).count() == len(rows):
            return SubmittedJudgments(Judgment.objects.filter(assignment=assignment)
                                      .order_by("pk"))
        raise SubmissionInvalid(
            {"__all__": ["Some of these items were already judged by you in this stage."]}
        ) from None

    assignment.status = AssignmentStatus.SUBMITTED
    assignment.submitted_at = timezone.now()
    assignment.last_seen_at = assignment.submitted_at
    assignment.completion_code = _completion_code(assignment.stage)
    fields = ["status", "submitted_at", "last_seen_at", "completion_code"]
    if late:
        # The researcher sees in review why the assignment has fewer judgments than items.
        note = "Submitted after the timeout. " + message if message else \
            "Submitted after the timeout; every answer was still needed."
        assignment.review_note = "\n".join(p for p in (assignment.review_note, note) if p)
        fields.append("review_note")
    assignment.save(update_fields=fields)
    # Qualification stages are graded at once (annotation/services/qualification.py).
    from .qualification import qualification_grade_on_submit

    qualification_grade_on_submit(assignment=assignment)
    return SubmittedJudgments(
        Judgment.objects.filter(assignment=assignment).order_by("pk"),
        refused={str(row.item_id): [message] for row in filled_rows}, message=message,
    )


def _completion_code(stage: Stage) -> str:
    # Prolific checks the study's own completion code; elsewhere a per-assignment code lets a
    # worker prove the submission.
    code = (stage.settings or {}).get("prolific_completion_code")
    return str(code) if code else secrets.token_hex(4).upper()


def assignment_feedback(*, assignment: Assignment, item_id: int) -> dict[str, Any]:
    """What the page may show after an item was confirmed (never before): for STARC QA and
    guessing, whether the answer was right and which shown option is correct, plus the
    paragraph; nothing for qualification stages, whose scoring is never revealed."""
    row = AssignmentItem.objects.select_related("item__project", "assignment__stage").get(
        assignment=assignment, item_id=item_id
    )
    judgment = Judgment.objects.filter(assignment=assignment, item_id=item_id).first()
    state = _server_state(row.assignment)
    if judgment is None:
        refused = (state.get(REFUSED_KEY) or {}).get(str(item_id))
        if refused:
            return {"refused": refused, "settled": True}
        if str(item_id) in (state.get(ATTEMPTS_KEY) or {}):
            # Right or wrong only: the correct answer is not shown before the last attempt.
            return {"retry": True, "is_correct": False, "message": RETRY_MESSAGE}
        return {}
    item = row.item
    project = item.project
    feedback: dict[str, Any] = {"confirmed": True}
    if state.get(RETURN_KEY):
        feedback["return_study"] = RETURN_MESSAGE
    if project.kind != TaskKind.MC:
        return feedback
    mode = project.experiment_mode
    if mode in (ExperimentMode.GUESSING, ExperimentMode.QA):
        feedback["paragraph"] = item.content.get("paragraph", "")
    reveal = (mode in (ExperimentMode.QA, ExperimentMode.GUESSING)
              and row.assignment.stage.kind != StageKind.QUALIFICATION and item.gold)
    if reveal:
        order = row.presented_order or ["A", "B", "C", "D"]
        correct_role = item.gold.get("choice")
        if correct_role in order:
            feedback["correct_shown"] = "abcd"[order.index(correct_role)]
            feedback["is_correct"] = judgment.choice == correct_role
    return feedback


def pilot_paragraph(*, assignment: Assignment, item_id: int) -> str | None:
    """Pilot page 2: the paragraph, only once the guess is locked and before the answer."""
    state = _server_state(Assignment.objects.get(pk=assignment.pk))
    if str(item_id) not in (state.get("guesses") or {}):
        return None
    row = AssignmentItem.objects.select_related("item").get(assignment=assignment,
                                                            item_id=item_id)
    return row.item.content.get("paragraph", "")


__all__ = [
    "AssignmentClosed",
    "AssignmentRefused",
    "ForeignAssignment",
    "NoItemsAvailable",
    "QualificationRequired",
    "ReturnRequested",
    "StageNotOpen",
    "SubmissionInvalid",
    "SubmittedJudgments",
    "WorkerBlocked",
    "assignment_confirm_item",
    "assignment_feedback",
    "assignment_page_state",
    "assignment_record_guess",
    "assignment_release_abandoned",
    "assignment_save_draft",
    "assignment_start",
    "assignment_submit",
    "assignment_touch",
    "gold_items_for_stage",
    "items_pick_next",
    "practice_items_for_stage",
    "pilot_paragraph",
]
