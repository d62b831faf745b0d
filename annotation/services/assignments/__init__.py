"""Assignments: which items a worker gets, autosave, per-item confirmation and the final submit.

Every write the task pages make goes through here; the views only check who is asking. One module
per job: `picking` (which items a worker gets), `lifecycle` (start, time-outs, release),
`drafts` (autosave and pilot guesses), `comprehension` (Prolific comprehension checks),
`submission` (per-item confirmation, the final submit, feedback), `verification` (Prolific
sessions checked against the provider); `state` holds what they share and `errors` the
refusals.
"""
from .comprehension import ATTEMPTS_KEY, RETRY_MESSAGE, RETURN_KEY, RETURN_MESSAGE
from .design import latin_square_on, participant_number
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
    StageNotOpen,
    SubmissionInvalid,
    WorkerBlocked,
)
from .lifecycle import (
    HIT_ASSIGNMENT_GRACE,
    LATE_KEY,
    TIMED_OUT_MESSAGE,
    assignment_release_abandoned,
    assignment_start,
    assignment_touch,
    assignment_verification_failed,
    more_work_for,
)
from .picking import (
    gold_items_for_stage,
    items_pick_next,
    practice_items_for_stage,
    stage_items,
)
from .state import (
    CONFIRM_MODES,
    FINISHED_STATUSES,
    MAX_DRAFT_BYTES,
    OPEN_STAGE_STATUSES,
    REFUSED_KEY,
    SERVER_DRAFT_KEY,
    answer_rules,
    hit_is_expired,
    unverified_timeout,
)
from .submission import (
    SubmittedJudgments,
    assignment_confirm_item,
    assignment_submit,
    pilot_paragraph,
)
from .verification import (
    VerifyReport,
    assignment_verify,
    prolific_session_check,
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
    "assignment_touch",
    "assignment_verification_failed",
    "assignment_verify",
    "gold_items_for_stage",
    "hit_is_expired",
    "items_pick_next",
    "more_work_for",
    "latin_square_on",
    "participant_number",
    "pilot_paragraph",
    "practice_items_for_stage",
    "prolific_session_check",
    "stage_items",
    "stage_sessions_verify",
    "unverified_timeout",
]
