"""Prolific comprehension checks: the practice items with a gold answer of a Prolific stage.

Prolific requires a second attempt after a wrong answer, and a participant who fails twice is
asked to return the study and must not be rejected for it."""
from __future__ import annotations

from django.utils import timezone

# Re-exported for the assignment modules (`X as X`); defined below the services, where the
# task selectors read them too.
from annotation.assignment_draft import ATTEMPTS_KEY as ATTEMPTS_KEY
from annotation.assignment_draft import RETRY_MESSAGE as RETRY_MESSAGE
from annotation.assignment_draft import RETURN_KEY as RETURN_KEY
from annotation.assignment_draft import RETURN_MESSAGE as RETURN_MESSAGE
from annotation.assignment_draft import server_state
from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    Item,
    Judgment,
    Provider,
    StageKind,
)

from .errors import ReturnRequested
from .state import SERVER_DRAFT_KEY


def refuse_if_return_requested(assignment: Assignment) -> None:
    """ReturnRequested once the participant was asked to return the study."""
    # Checked before anything else: the assignment is RETURNED, which would otherwise pass as
    # a late one that may still be worked on.
    if server_state(assignment).get(RETURN_KEY):
        raise ReturnRequested(RETURN_MESSAGE, assignment=assignment)


def _is_comprehension_check(assignment: Assignment, item: Item) -> bool:
    # Qualification stages never reveal their scoring, so they keep a single attempt.
    stage = assignment.stage
    return (stage.provider == Provider.PROLIFIC and stage.kind != StageKind.QUALIFICATION
            and item.is_practice and bool(item.gold))


# The answer's flag by which the page says whether it has shown "That answer was not right"
# for this item (after a confirm, a submit, or on reloading a page the server told so).
RETRY_SEEN_FIELD = "retry_seen"


def comprehension_attempt(assignment: Assignment, item: Item, fields: dict,
                          answer: dict | None = None) -> dict:
    """For a comprehension check: a JSON copy of the cleaned answer `fields`, as
    `comprehension_outcome` records an attempt (taken before the judgment is built from
    `fields`), with whether the page had told the participant their first answer was wrong
    (`retry_seen` of the raw `answer`: told unless the page says `false`, so a request that
    does not say is held to "wrong twice"); {} for any other item."""
    if not _is_comprehension_check(assignment, item):
        return {}
    import json

    from django.core.serializers.json import DjangoJSONEncoder

    record = json.loads(json.dumps(fields, cls=DjangoJSONEncoder))
    record["answered_at"] = timezone.now().isoformat()
    record[RETRY_SEEN_FIELD] = (answer or {}).get(RETRY_SEEN_FIELD) is not False
    return record


# What an attempt record holds beside the answer itself: when and how long, which differ
# between two sendings of one answer.
ATTEMPT_TIMING_KEYS = ("answered_at", "time_spent_ms", "client_started_at")


def same_attempt(record: dict, earlier: dict) -> bool:
    """Whether two comprehension attempt records (`comprehension_attempt`) give the same answer,
    whatever their timing."""
    def answer(attempt: dict) -> dict:
        return {k: v for k, v in attempt.items() if k not in ATTEMPT_TIMING_KEYS}

    return answer(record) == answer(earlier)


def comprehension_outcome(assignment: Assignment, state: dict, row: AssignmentItem,
                          judgment: Judgment, record: dict) -> str:
    """"ok", "retry" (a first wrong answer: recorded in `state`, not stored as a judgment) or
    "failed" (wrong twice) for an answer to a Prolific comprehension check; "ok" for any other
    item. The first attempt is attached to the judgment of the second. The first wrong answer
    sent again (`same_attempt`) by a page that has not yet told the participant it was wrong
    (`retry_seen` false: its answer was lost on the way back) is "retry" again, never the
    second attempt; the same wrong answer chosen again after the page told them is the second
    (else a participant repeating it was never asked to return the study). The one rule of the
    confirm and the submit door."""
    if not _is_comprehension_check(assignment, row.item):
        return "ok"
    from annotation.services.qualification import answer_is_correct

    retry_seen = record.pop(RETRY_SEEN_FIELD, True)  # the page's word, not part of the answer
    key = str(row.item_id)
    attempts = dict(state.get(ATTEMPTS_KEY) or {})
    earlier = list(attempts.get(key) or [])
    if earlier:
        judgment.extra = {**(judgment.extra or {}), "attempts": earlier}
    tolerance = assignment.stage.project.qualification_tolerance
    if answer_is_correct(item=row.item, judgment=judgment, tolerance=tolerance) is not False:
        return "ok"
    if earlier and not retry_seen and same_attempt(record, earlier[-1]):
        # The recorded first attempt again: a request sent again after its answer was lost on
        # the way back ("Confirm again in a moment"), a second tab, a Submit pressed again with
        # the answers unchanged. Not a second attempt: the participant has not yet been told it
        # was wrong, so they are told now, as a replayed submit gets the first one's result.
        return "retry"
    if earlier:
        return "failed"
    attempts[key] = [record]
    state[ATTEMPTS_KEY] = attempts
    return "retry"


def return_request(assignment: Assignment, state: dict, rows: list[AssignmentItem]) -> None:
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
