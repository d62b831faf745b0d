"""Turning answers into judgments: per-item confirmation (STARC QA, guessing and pilot pages),
the final submit (all or nothing, idempotent) and the feedback and pilot paragraph shown after
an answer."""
from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from annotation.assignment_draft import server_state
from annotation.domain.answers import (
    SUBMITS_TOGETHER_MESSAGE,
    AnswerError,
    ab_answer_texts,
    clean_answer,
    confirms_per_item,
    item_id_of,
)
from annotation.domain.control_characters import control_character_message, find_control_character
from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    Item,
    Judgment,
    Stage,
    TaskKind,
)

from .comprehension import (
    RETRY_MESSAGE,
    RETURN_MESSAGE,
    comprehension_attempt,
    comprehension_outcome,
    refuse_if_return_requested,
    return_request,
)
from .errors import AssignmentClosed, SubmissionInvalid
from .locking import assignment_item_row, assignment_lock, assignment_open_locked
from .picking import items_filled_since_timeout
from .state import (
    GUESS_TIMING_KEY,
    REFUSED_KEY,
    answer_rules,
    assignment_finished,
    server_state_save,
)
from .timeouts import is_late, late_refusal_message, newer_page_refusal_message


def _is_correct(item: Item, fields: dict) -> bool | None:
    if not item.gold or item.project.kind != TaskKind.MC:
        return None
    return fields.get("choice") == item.gold.get("choice")


def _judgment(assignment: Assignment, row: AssignmentItem, fields: dict,
              client_meta: dict | None) -> Judgment:
    extra = dict(fields.pop("extra", {}) or {})
    if "guess_choice" in extra:
        # Pilot: the guess page's time apart from the reading and answering pages'.
        timing = (server_state(assignment).get(GUESS_TIMING_KEY) or {}).get(str(row.item_id))
        if timing:
            extra["guess_timing"] = timing
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


# PositiveIntegerField's ceiling, about 24 days: a page left open longer measures no more.
MAX_SERVER_TIME_MS = 2_000_000_000


def _server_time_ms(assignment: Assignment, rows: list[AssignmentItem], *, n: int,
                    answered_before: bool = True, now: datetime | None = None) -> int | None:
    """Milliseconds per item the server saw pass for `n` answers arriving now: from the first
    time the page showed these items (else the assignment's start), or from the assignment's
    last stored answer when that is later (one-by-one confirmation), shared evenly by the `n`.
    The browser's own `time_spent_ms` is kept beside it; review rules read this one, which a
    client cannot make up."""
    if n <= 0:
        return None
    now = now or timezone.now()
    shown = [row.first_shown_at for row in rows if row.first_shown_at is not None]
    start = min(shown) if shown else assignment.started_at
    last = Judgment.objects.filter(assignment=assignment).aggregate(last=Max("created_at"))[
        "last"] if answered_before else None
    if last is not None and last > start:
        start = last
    elapsed = max(0, int((now - start).total_seconds() * 1000))
    return min(MAX_SERVER_TIME_MS, elapsed // n)


def _clean_client_meta(client_meta: Any) -> dict:
    if not isinstance(client_meta, dict):
        return {}
    cleaned = {str(k)[:40]: (v if isinstance(v, (int, float, bool)) else str(v)[:300])
               for k, v in list(client_meta.items())[:20]}
    if (hit := find_control_character(cleaned, "client_meta")) is not None:
        # Stored with the judgment: NUL would be a 500 on PostgreSQL and stored on SQLite.
        raise SubmissionInvalid({"__all__": [
            f"The field {hit[0]} {control_character_message(hit[1])}."]})
    return cleaned


@transaction.atomic
def assignment_confirm_item(*, assignment: Assignment, item: Item | int, answer: dict,
                            client_meta: dict | None = None) -> Judgment | None:
    """Store one item's judgment before the rest of the assignment (STARC QA, guessing and
    pilot modes show feedback or the next page after it). Idempotent: a second confirmation of
    the same item returns the first judgment unchanged.

    Returns None, storing no judgment, when (a) a late assignment's item was filled by others
    meanwhile, or its worker holds it in a newer assignment (recorded as refused: settled for
    the page and the submit), or (b) a Prolific
    comprehension check was answered wrong the first time (the attempt is recorded; the next
    answer is the judgment). A second wrong answer is stored and the participant is asked to
    return the study (`ReturnRequested` from then on). `assignment_feedback` says which.

    Only pages that confirm one item at a time take it (`confirms_per_item`: STARC QA, guessing
    and pilot); any other task (Likert, A/B, STARC validity) is refused with SubmissionInvalid,
    storing nothing: its answers go through `assignment_submit` together, with its checks."""
    assignment = assignment_open_locked(assignment, allow_late=True)
    project = assignment.stage.project
    if not confirms_per_item(project.kind, project.experiment_mode):
        raise SubmissionInvalid({"__all__": [SUBMITS_TOGETHER_MESSAGE]},
                                message=SUBMITS_TOGETHER_MESSAGE)
    row = assignment_item_row(assignment, getattr(item, "pk", item))
    existing = Judgment.objects.filter(assignment=assignment, item_id=row.item_id).first()
    if existing is not None:
        return existing
    state = server_state(assignment)
    key = str(row.item_id)
    if key in (state.get(REFUSED_KEY) or {}):
        return None
    if is_late(assignment):
        newer, filled = _late_settled(assignment, [row])
        if newer or filled:
            # Recorded rather than raised: the page shows the item as no longer needed, so the
            # worker can still submit the rest, and the submit does not ask for it again.
            message = newer_page_refusal_message([row]) if newer else late_refusal_message([row])
            state[REFUSED_KEY] = {**(state.get(REFUSED_KEY) or {}), key: message}
            server_state_save(assignment, state)
            return None
    locked_guess = (state.get("guesses") or {}).get(key)
    try:
        fields = clean_answer(rules=answer_rules(assignment.stage.project, assignment.stage),
                              answer=answer, presented_order=row.presented_order,
                              locked_guess=locked_guess,
                              answer_texts=ab_answer_texts(row.item.content))
    except AnswerError as exc:
        raise SubmissionInvalid({key: exc.messages}) from None
    record = comprehension_attempt(assignment, row.item, fields, answer)
    judgment = _judgment(assignment, row, fields, _clean_client_meta(client_meta))
    judgment.server_time_ms = _server_time_ms(assignment, [row], n=1)
    outcome = comprehension_outcome(assignment, state, row, judgment, record)
    if outcome == "retry":
        server_state_save(assignment, state)
        return None
    try:
        with transaction.atomic():
            judgment.save(force_insert=True)
    except IntegrityError:
        if not _judged_in_stage(assignment, [row.item_id]):
            raise  # not the clash below: a real failure, not the worker's doing
        # The same worker judged this item in this stage through another assignment.
        raise SubmissionInvalid(
            {key: ["You have already judged this item."]}
        ) from None
    if outcome == "failed":
        return_request(assignment, state, [row])
    else:
        Assignment.objects.filter(pk=assignment.pk).update(last_seen_at=timezone.now())
    return judgment


class SubmittedJudgments(list):
    """`assignment_submit`'s result: the assignment's judgments; after a late submit also
    `refused` (item id -> message) for the answers that could not be stored because other
    workers filled those items after the timeout, or because the worker holds them in a newer
    assignment, and `message` saying so."""

    def __init__(self, judgments, *, refused: dict[str, list[str]] | None = None,
                 message: str = "", retry: dict[str, list[str]] | None = None,
                 return_requested: str = "", already_submitted: bool = False):
        super().__init__(judgments)
        # A repeat of a submit that was stored (another tab, a retry whose answer was lost):
        # nothing was stored now; the judgments are the first submission's.
        self.already_submitted = already_submitted
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
    (AssignmentClosed) naming the items. Items the worker holds in a newer assignment of the
    stage (the task opened again after the timeout) are refused the same way, so that newer
    page can still be submitted. Items whose late confirm was refused that way
    (`assignment_confirm_item`) are settled and need no answer.

    On Prolific, a comprehension check answered wrong for the first time stores nothing and
    returns `retry`; answered wrong again, only the comprehension checks are stored and the
    participant is asked to return the study (`return_requested`; not submitted, no code).
    """
    locked = assignment_lock(assignment.pk)
    if assignment_finished(locked):
        return SubmittedJudgments(locked.judgments.order_by("pk"), already_submitted=True)
    late = _submittable(locked)
    assignment = locked
    rows = list(AssignmentItem.objects.select_related("item__project")
                .filter(assignment=assignment).order_by("position"))
    done = set(Judgment.objects.filter(assignment=assignment).values_list("item_id", flat=True))
    given, errors = _answers_by_item(answers, {row.item_id for row in rows})
    state = server_state(assignment)
    newer, filled = _settled_elsewhere(assignment, state, rows, done=done, late=late)
    judgments, checks = _judgments_of(assignment, rows, given, errors, state=state,
                                      skip=done | newer | filled, client_meta=client_meta)
    answered = {judgment.item_id for judgment in judgments}
    per_item = _server_time_ms(assignment, [row for row in rows if row.item_id in answered],
                               n=len(judgments), answered_before=bool(done))
    for judgment in judgments:
        judgment.server_time_ms = per_item
    answered_checks = _comprehension_checks_settle(assignment, state, checks)
    if answered_checks is not None:
        return answered_checks
    filled_rows = [row for row in rows if row.item_id in filled]
    newer_rows = [row for row in rows if row.item_id in newer]
    refused = {row.item_id: late_refusal_message(filled_rows) for row in filled_rows}
    refused |= {row.item_id: newer_page_refusal_message(newer_rows) for row in newer_rows}
    message = " ".join(dict.fromkeys(refused.values()))
    if refused and not judgments and not done:
        raise AssignmentClosed(message + " Nothing was stored; thank you for your time.",
                               assignment=assignment)
    if not _judgments_store(assignment, judgments, n_items=len(rows)):
        # A concurrent submit of the same assignment won: its judgments are the answer.
        return SubmittedJudgments(Judgment.objects.filter(assignment=assignment).order_by("pk"),
                                  already_submitted=True)
    _mark_submitted(assignment, late=late, message=message)
    # Adaptive redundancy: these items' targets follow their judgments (no-op otherwise).
    from annotation.services.redundancy import adaptive_targets_update

    adaptive_targets_update(stage=assignment.stage, item_ids=[row.item_id for row in rows])
    # Qualification stages are graded at once (annotation/services/qualification.py).
    from annotation.services.qualification import qualification_grade_on_submit

    qualification_grade_on_submit(assignment=assignment)
    return SubmittedJudgments(
        Judgment.objects.filter(assignment=assignment).order_by("pk"),
        refused={str(item_id): [why] for item_id, why in refused.items()}, message=message,
    )


def submitted_from_page(*, assignment: Assignment, answers: Any, client_meta: Any) -> bool:
    """Whether a submit that found `assignment` already submitted repeats this page's own
    earlier submit (its answer lost on the way back): every item it answers is stored with the
    `page_id` it carries in `client_meta` (one per page load, kept with each judgment). False
    for another tab or window, an earlier page load, or a page that sends no id: those answers
    were not stored."""
    page_id = client_meta.get("page_id") if isinstance(client_meta, dict) else None
    if not page_id or not isinstance(page_id, str) or not isinstance(answers, list):
        return False
    # No answers at all: a page whose items were all confirmed one by one (stored then).
    item_ids = {item_id_of(a.get("item")) for a in answers if isinstance(a, dict)}
    stored = {j.item_id: str(((j.extra or {}).get("client_meta") or {}).get("page_id"))
              for j in Judgment.objects.filter(assignment=assignment, item_id__in=item_ids)}
    return all(stored.get(item_id) == page_id[:300] for item_id in item_ids)


def _submittable(assignment: Assignment) -> bool:
    """Refuse a submit to an assignment that was returned, expired or whose participant was
    asked to return the study; True when the submit comes after the timeout (late)."""
    refuse_if_return_requested(assignment)
    late = is_late(assignment)
    if assignment.status != AssignmentStatus.IN_PROGRESS and not late:
        raise AssignmentClosed(
            "This assignment was returned or has expired; reload the page for new items.",
            assignment=assignment,
        )
    return late


def _answers_by_item(answers: Any, item_ids: set[int]
                     ) -> tuple[dict[int, dict], dict[str, list[str]]]:
    """The answers keyed by item id, and the errors of answers that name no item of the
    assignment or answer one twice."""
    if not isinstance(answers, list):
        raise SubmissionInvalid({"__all__": ["Answers must be a list."]})
    given: dict[int, dict] = {}
    errors: dict[str, list[str]] = {}
    for answer in answers:
        item_id = item_id_of(answer.get("item")) if isinstance(answer, dict) else None
        if item_id is None:
            errors.setdefault("__all__", []).append("An answer names no item.")
            continue
        if item_id not in item_ids:
            errors.setdefault("__all__", []).append(
                f"Item {item_id} is not part of this assignment."
            )
            continue
        if item_id in given:
            errors.setdefault(str(item_id), []).append("This item was answered twice.")
            continue
        given[item_id] = answer
    return given, errors


def _settled_elsewhere(assignment: Assignment, state: dict, rows: list[AssignmentItem], *,
                       done: set[int], late: bool) -> tuple[set[int], set[int]]:
    """Items that need no answer any more, as (held in the worker's newer assignment, filled
    by others): refused at a late confirm, or found so by a late submit (`_late_settled`)."""
    # Refused at a late confirm: settled, whatever the count says now.
    refused = {int(key) for key in (state.get(REFUSED_KEY) or {})} - done
    if not late:
        return set(), refused
    newer, filled = _late_settled(assignment, [row for row in rows if row.item_id not in done],
                                  refused=refused)
    return newer, filled | (refused - newer)


def _late_settled(assignment: Assignment, rows: list[AssignmentItem], *,
                  refused: set[int] = frozenset()) -> tuple[set[int], set[int]]:
    """Items of a late assignment that take no answer any more, as (held in the worker's newer
    assignment, filled by others since the timeout), the rule the late confirm and the late
    submit share. `refused`: items already refused at a confirm, not counted again."""
    newer = _held_in_newer_assignment(assignment, rows)
    filled = items_filled_since_timeout(
        assignment=assignment, rows=[row for row in rows if row.item_id not in newer | refused])
    return newer, filled


def _held_in_newer_assignment(assignment: Assignment, rows: list[AssignmentItem]) -> set[int]:
    """Items of a late assignment its worker holds in a newer assignment of the stage: they
    opened the task again after this one timed out and were given these items again (two
    tabs). Stored from here, they made that newer page's submit fail for good ("already judged
    by you in this stage") while it kept holding the items, so they are answered there; a
    newer assignment that was returned too holds nothing."""
    ids = [row.item_id for row in rows]
    if not ids:
        return set()
    return set(AssignmentItem.objects.filter(
        item_id__in=ids, assignment__stage_id=assignment.stage_id,
        assignment__worker_id=assignment.worker_id, assignment_id__gt=assignment.pk,
    ).exclude(assignment__status=AssignmentStatus.RETURNED).values_list("item_id", flat=True))


def _judgments_of(assignment: Assignment, rows: list[AssignmentItem], given: dict[int, dict],
                  errors: dict[str, list[str]], *, state: dict, skip: set[int],
                  client_meta: dict | None
                  ) -> tuple[list[Judgment], list[tuple[AssignmentItem, Judgment, dict]]]:
    """The unsaved judgments of every item still to answer, and the comprehension checks among
    them; SubmissionInvalid naming every item that needs attention."""
    rules = answer_rules(assignment.stage.project, assignment.stage)
    guesses = state.get("guesses") or {}
    judgments: list[Judgment] = []
    checks: list[tuple[AssignmentItem, Judgment, dict]] = []
    meta = _clean_client_meta(client_meta)
    for row in rows:
        if row.item_id in skip:
            continue
        if row.item_id not in given:
            errors.setdefault(str(row.item_id), []).append("Answer this item.")
            continue
        try:
            fields = clean_answer(rules=rules, answer=given[row.item_id],
                                  presented_order=row.presented_order,
                                  locked_guess=guesses.get(str(row.item_id)),
                                  answer_texts=ab_answer_texts(row.item.content))
        except AnswerError as exc:
            errors.setdefault(str(row.item_id), []).extend(exc.messages)
            continue
        record = comprehension_attempt(assignment, row.item, fields, given[row.item_id])
        judgments.append(_judgment(assignment, row, fields, meta))
        if record:
            checks.append((row, judgments[-1], record))
    if errors:
        raise SubmissionInvalid(errors)
    return judgments, checks


def _comprehension_checks_settle(assignment: Assignment, state: dict,
                                 checks: list[tuple[AssignmentItem, Judgment, dict]]
                                 ) -> SubmittedJudgments | None:
    """Prolific comprehension checks: a second wrong answer stores only the checks and asks the
    participant to return the study; a first wrong one stores nothing and asks again. None when
    every check passed (the submit goes on)."""
    outcomes = {row.item_id: comprehension_outcome(assignment, state, row, judgment, record)
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
            if not _judged_in_stage(assignment, [judgment.item_id for judgment in kept]):
                raise
            raise SubmissionInvalid(
                {"__all__": ["Some of these items were already judged by you in this stage."]}
            ) from None
        return_request(assignment, state, failed_rows)
        return SubmittedJudgments(Judgment.objects.filter(assignment=assignment).order_by("pk"),
                                  return_requested=RETURN_MESSAGE)
    retry = {str(item_id): [RETRY_MESSAGE] for item_id, outcome in outcomes.items()
             if outcome == "retry"}
    if retry:
        # Nothing is stored: the page keeps every answer and the participant submits again.
        server_state_save(assignment, state)
        return SubmittedJudgments([], retry=retry, message=RETRY_MESSAGE)
    return None


def _judged_in_stage(assignment: Assignment, item_ids: list[int]) -> bool:
    """Whether the assignment's worker already has a judgment of one of these items in its
    stage: the clash `one_judgment_per_worker_item_stage` refuses. An IntegrityError without it
    is some other failure (a CHECK constraint, say) and must not be reported as one."""
    return Judgment.objects.filter(worker_id=assignment.worker_id, stage_id=assignment.stage_id,
                                   item_id__in=item_ids).exists()


def _judgments_store(assignment: Assignment, judgments: list[Judgment], *, n_items: int) -> bool:
    """Insert the judgments in one statement. False when a concurrent submit of the same
    assignment won (SQLite has no row lock to wait on); a judgment the worker already gave in
    this stage is refused; any other IntegrityError is raised as it is."""
    try:
        with transaction.atomic():
            # One INSERT for the page (Judgment.save adds nothing to a plain insert).
            Judgment.objects.bulk_create(judgments)
    except IntegrityError:
        fresh = Assignment.objects.get(pk=assignment.pk)
        if assignment_finished(fresh) or Judgment.objects.filter(
            assignment=assignment
        ).count() == n_items:
            return False
        if not _judged_in_stage(assignment, [judgment.item_id for judgment in judgments]):
            raise
        raise SubmissionInvalid(
            {"__all__": ["Some of these items were already judged by you in this stage."]}
        ) from None
    return True


def _mark_submitted(assignment: Assignment, *, late: bool, message: str) -> None:
    """Status submitted, with its completion code; a late submit says so in the review note."""
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


def _completion_code(stage: Stage) -> str:
    # Prolific checks the study's own completion code; elsewhere a per-assignment code lets a
    # worker prove the submission.
    code = (stage.settings or {}).get("prolific_completion_code")
    return str(code) if code else secrets.token_hex(4).upper()


def pilot_paragraph(*, assignment: Assignment, item_id: int) -> str | None:
    """Pilot page 2: the paragraph, only once the guess is locked and before the answer."""
    state = server_state(Assignment.objects.get(pk=assignment.pk))
    if str(item_id) not in (state.get("guesses") or {}):
        return None
    row = AssignmentItem.objects.select_related("item").get(assignment=assignment,
                                                            item_id=item_id)
    return row.item.content.get("paragraph", "")
