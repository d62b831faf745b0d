"""Work in progress: the page's autosaved draft, the server-owned state shown back to the page,
and pilot guesses locked before the paragraph is shown."""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.assignment_draft import AUTOSAVE_KEY, server_state
from annotation.domain.answers import AnswerError, clean_guess, client_time_spent_ms
from annotation.domain.control_characters import control_character_message, find_control_character
from annotation.models import (
    Assignment,
    ExperimentMode,
    Item,
    Judgment,
    TaskKind,
)

from .comprehension import ATTEMPTS_KEY, RETRY_MESSAGE
from .errors import SubmissionInvalid
from .lifecycle import earlier_guesses
from .locking import assignment_item_row, assignment_open_locked
from .state import GUESS_TIMING_KEY, MAX_DRAFT_BYTES, REFUSED_KEY, SERVER_DRAFT_KEY

# The largest count a page's autosave sequence may carry (JavaScript's safe integers).
MAX_AUTOSAVE_N = 2**53 - 1


def autosave_sequence(value: Any) -> dict | None:
    """The page's number for an autosave, `{"series": str, "n": int}` (one series per page
    load, counting up), or None when it sent none that can be read (a page from before, a
    hand-made request): such a draft is stored as it arrives."""
    if not isinstance(value, dict):
        return None
    series, n = value.get("series"), value.get("n")
    if not isinstance(series, str) or not 0 < len(series) <= 64:
        return None
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_AUTOSAVE_N:
        return None
    return {"series": series, "n": n}


# How many page loads' newest autosave numbers are kept (a worker's tabs and reloads).
AUTOSAVE_SERIES_KEPT = 8


def _autosave_newest(stored: Any) -> dict[str, int]:
    """The newest number stored of each recent page load, {series: n} in the order they last
    saved (oldest first); read from the record of one series too (`{"series", "n"}`, as
    drafts were written before). Stored as a list of pairs: PostgreSQL's jsonb sorts an
    object's keys, so a dict's order would say which page load to forget by its name."""
    if not isinstance(stored, dict):
        return {}
    if isinstance(stored.get("series"), str) and isinstance(stored.get("n"), int):
        return {stored["series"]: stored["n"]}
    newest = stored.get("newest")
    if isinstance(newest, dict):  # as written for a while before the list
        newest = [[series, n] for series, n in newest.items()]
    if not isinstance(newest, list):
        return {}
    return {pair[0]: pair[1] for pair in newest
            if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
            and isinstance(pair[1], int) and not isinstance(pair[1], bool)}


def autosave_is_stale(stored: Any, incoming: dict | None) -> bool:
    """Whether an autosave is older than one stored: its page load (series) sent a higher
    number already, so this one was held up on the way and arrives late, whatever another
    tab or page load saved in between (A4 stored, then B1, then A3 arriving is still old)."""
    if incoming is None:
        return False
    newest = _autosave_newest(stored).get(incoming["series"])
    return newest is not None and newest >= incoming["n"]


def autosave_record(stored: Any, incoming: dict) -> dict:
    """The record of newest numbers with `incoming` stored (the `AUTOSAVE_SERIES_KEPT` page
    loads that saved last)."""
    newest = _autosave_newest(stored)
    newest.pop(incoming["series"], None)
    newest[incoming["series"]] = incoming["n"]
    return {"newest": [[series, n] for series, n in newest.items()][-AUTOSAVE_SERIES_KEPT:]}


@transaction.atomic
def assignment_save_draft(*, assignment: Assignment, draft: dict,
                          sequence: Any = None) -> Assignment:
    """Autosave the page's partial answers (and keep the assignment alive). `sequence`: the
    page's number for this autosave (`autosave_sequence`); one older than the stored draft's
    of the same page load is not stored over it (requests can arrive out of order)."""
    import json

    if not isinstance(draft, dict):
        raise SubmissionInvalid({"__all__": ["The draft must be an object."]})
    if len(json.dumps(draft)) > MAX_DRAFT_BYTES:
        raise SubmissionInvalid({"__all__": ["The draft is too large."]})
    if (hit := find_control_character(draft, "draft")) is not None:
        # NUL was a 500 on PostgreSQL (jsonb cannot hold it) and stored on SQLite.
        raise SubmissionInvalid({"__all__": [
            f"The draft field {hit[0]} {control_character_message(hit[1])}."]})
    assignment = assignment_open_locked(assignment, allow_late=True)
    assignment.last_seen_at = timezone.now()
    sequence = autosave_sequence(sequence)
    state = server_state(assignment)
    if autosave_is_stale(state.get(AUTOSAVE_KEY), sequence):
        # A sign of life all the same; the newer draft stays.
        assignment.save(update_fields=["last_seen_at"])
        return assignment
    own = {key: value for key, value in draft.items() if key != SERVER_DRAFT_KEY}
    if sequence is not None:
        state[AUTOSAVE_KEY] = autosave_record(state.get(AUTOSAVE_KEY), sequence)
    if state:
        own[SERVER_DRAFT_KEY] = state
    assignment.draft = own
    assignment.save(update_fields=["draft", "last_seen_at"])
    return assignment


def assignment_page_state(*, assignment: Assignment) -> dict[str, dict]:
    """What a reloaded page needs beyond its judgments: `settled` (item id -> feedback) for
    late confirms refused because others filled the item, and `retry` (item id -> message) for
    comprehension checks answered wrong once. Never the gold answer."""
    # `assignment` as just loaded by the page view (no extra query on the hot path).
    state = server_state(assignment)
    judged = {str(pk) for pk in Judgment.objects.filter(assignment=assignment)
              .values_list("item_id", flat=True)} if state.get(ATTEMPTS_KEY) else set()
    return {
        "settled": {key: {"refused": message, "settled": True}
                    for key, message in (state.get(REFUSED_KEY) or {}).items()},
        "retry": {key: RETRY_MESSAGE for key in (state.get(ATTEMPTS_KEY) or {})
                  if key not in judged},
    }


@transaction.atomic
def assignment_record_guess(*, assignment: Assignment, item: Item | int, answer: dict) -> str:
    """Pilot page 1: lock the guess made before reading (returns it as a role letter). The
    paragraph is only revealed after this, and the guess cannot be changed afterwards: one
    guess per worker and item in the project (`earlier_guesses`, read when an assignment is
    made and again here), whichever of their assignments locked it first."""
    assignment = assignment_open_locked(assignment, allow_late=True)
    row = assignment_item_row(assignment, getattr(item, "pk", item))
    key = str(row.item_id)
    project = assignment.stage.project
    if project.kind != TaskKind.MC or project.experiment_mode != ExperimentMode.PILOT:
        raise SubmissionInvalid({key: [
            "This task has no guess step (only multiple-choice pilot tasks do)."]})
    state = server_state(assignment)
    guesses = dict(state.get("guesses") or {})
    if key not in guesses:
        # A guess the worker locked on this item in another assignment since this one was
        # made (the old tab of a page that timed out, whose item came back in this one) was
        # followed by the paragraph there: it is their guess here too, never a second one.
        locked = earlier_guesses(stage=assignment.stage, worker=assignment.worker,
                                 items=[row.item])
        if locked:
            guesses[key] = locked["guesses"][key]
            timing = (locked.get(GUESS_TIMING_KEY) or {}).get(key)
        else:
            try:
                guesses[key] = clean_guess(answer=answer, presented_order=row.presented_order)
            except AnswerError as exc:
                raise SubmissionInvalid({key: exc.messages}) from None
            timing = _guess_timing(assignment, row, answer)
        state["guesses"] = guesses
        if timing:
            state[GUESS_TIMING_KEY] = {**(state.get(GUESS_TIMING_KEY) or {}), key: timing}
        assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
        assignment.last_seen_at = timezone.now()
        assignment.save(update_fields=["draft", "last_seen_at"])
    return guesses[key]


def _guess_timing(assignment: Assignment, row, answer: dict) -> dict:
    """Pilot page 1's own time: when the guess was locked, the page's time on it and the
    server's (from the item's first showing, or the assignment's last answer when later)."""
    now = timezone.now()
    start = row.first_shown_at or assignment.started_at
    last = (Judgment.objects.filter(assignment=assignment).order_by("-created_at")
            .values_list("created_at", flat=True).first())
    if last is not None and (start is None or last > start):
        start = last
    server_ms = max(0, int((now - start).total_seconds() * 1000)) if start else None
    return {"locked_at": now.isoformat(), "client_ms": client_time_spent_ms(answer),
            "server_ms": server_ms}
