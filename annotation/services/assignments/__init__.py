"""Assignments: which items a worker gets, autosave, per-item confirmation and the final submit.

Every write the task pages make goes through here; the views only check who is asking. One module
per concern, each with a public surface for the others (no module reaches into another's private
names, scripts/check_private_imports.py):

- `lifecycle`: an assignment started (or reopened) for a worker, kept alive, released when its
  session is not the provider's;
- `timeouts`: when an assignment timed out (live, late), and the sweep releasing abandoned ones;
- `locking`: the locks writes take and the guard every write after the start passes;
- `picking`: which items a worker gets, and which answers of a late assignment are still needed;
- `design`: the Latin-square design of a stage;
- `comprehension`: Prolific comprehension checks (attempts, asking a participant to return);
- `drafts`: autosave and pilot guesses; `submission`: per-item confirmation, the final submit,
  feedback; `verification`: Prolific sessions checked against the provider;
- `state`: the vocabulary they share (open stages, finished assignments, the server-owned part
  of the draft, answer rules); `errors`: the refusals.

Dependencies point one way: state, errors < timeouts, comprehension < locking < picking <
lifecycle < drafts, submission, verification.
"""
from annotation.stage_plan_selectors import gold_items_for_stage, latin_square_on, stage_items

from .comprehension import ATTEMPTS_KEY, RETRY_MESSAGE, RETURN_KEY, RETURN_MESSAGE
from .design import participant_number
from .drafts import assignment_page_state, assignment_record_guess, assignment_save_draft
from .errors import (
    AssignmentClosed,
    AssignmentRefused,
    ForeignAssignment,
    HitExpired,
    NoItemsAvailable,
    QualificationRequired,
    ReturnRequested,
    SessionNotVerified,
    SessionUnconfirmed,
    StageNotOpen,
    SubmissionInvalid,
    WorkerBlocked,
)
from .lifecycle import (
    assignment_size,
    assignment_start,
    assignment_touch,
    assignment_verification_failed,
    more_work_for,
    qualification_check,
    stages_next_open_for,
)
from .picking import items_pick_next, practice_items_for_stage, stage_items_short
from .state import (
    CONFIRM_MODES,
    FINISHED_STATUSES,
    MAX_DRAFT_BYTES,
    OPEN_STAGE_STATUSES,
    REFUSED_KEY,
    SERVER_DRAFT_KEY,
    answer_rules,
    closed_stage_lets_finish,
    hit_is_expired,
)
from .submission import (
    SubmittedJudgments,
    assignment_confirm_item,
    assignment_submit,
    pilot_paragraph,
    submitted_from_page,
)
from .timeouts import (
    HIT_ASSIGNMENT_GRACE,
    LATE_KEY,
    TIMED_OUT_MESSAGE,
    assignment_release_abandoned,
    unverified_timeout,
)
from .verification import (
    VerifyReport,
    assignment_verify,
    prolific_session_check,
    stage_sessions_returned,
    stage_sessions_verify,
)

__all__ = [
    "ATTEMPTS_KEY",
    "AssignmentClosed",
    "AssignmentRefused",
    "CONFIRM_MODES",
    "FINISHED_STATUSES",
    "ForeignAssignment",
    "HitExpired",
    "HIT_ASSIGNMENT_GRACE",
    "LATE_KEY",
    "MAX_DRAFT_BYTES",
    "NoItemsAvailable",
    "OPEN_STAGE_STATUSES",
    "QualificationRequired",
    "REFUSED_KEY",
    "RETRY_MESSAGE",
    "RETURN_KEY",
    "RETURN_MESSAGE",
    "ReturnRequested",
    "SERVER_DRAFT_KEY",
    "SessionNotVerified",
    "SessionUnconfirmed",
    "StageNotOpen",
    "SubmissionInvalid",
    "SubmittedJudgments",
    "VerifyReport",
    "TIMED_OUT_MESSAGE",
    "WorkerBlocked",
    "answer_rules",
    "assignment_confirm_item",
    "assignment_page_state",
    "assignment_record_guess",
    "assignment_release_abandoned",
    "assignment_save_draft",
    "assignment_start",
    "assignment_submit",
    "submitted_from_page",
    "stage_items_short",
    "assignment_touch",
    "assignment_verification_failed",
    "assignment_verify",
    "closed_stage_lets_finish",
    "gold_items_for_stage",
    "hit_is_expired",
    "items_pick_next",
    "assignment_size",
    "more_work_for",
    "latin_square_on",
    "participant_number",
    "pilot_paragraph",
    "qualification_check",
    "practice_items_for_stage",
    "prolific_session_check",
    "stage_items",
    "stages_next_open_for",
    "stage_sessions_returned",
    "stage_sessions_verify",
    "unverified_timeout",
]
