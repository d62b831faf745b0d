"""Why an assignment action is refused: the refusals the task pages turn into messages."""
from __future__ import annotations

from annotation.models import (
    Assignment,
)

from .state import assignment_finished


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


class HitExpired(AssignmentRefused):
    """An MTurk HIT past its expiry (or expired by the researcher): nobody can accept it any
    more, so no new assignment is made for it. An assignment accepted before still opens."""

    code = "hit_expired"


class SessionNotVerified(AssignmentRefused):
    """The provider says this session does not exist for this participant in this study (a
    made-up Prolific SESSION_ID, or another participant's)."""

    code = "session_unknown"


class SessionUnconfirmed(AssignmentRefused):
    """A Prolific session the provider could not vouch for just now arrives for a participant
    who holds a task under another session: the task is not handed to it (its PROLIFIC_PID may
    be someone else's) until Prolific confirms the session."""

    code = "session_unconfirmed"


class ForeignAssignment(AssignmentRefused):
    code = "foreign_assignment"


class AssignmentClosed(AssignmentRefused):
    """Submitted (the page shows the completion again) or returned/expired (refused)."""

    code = "closed"

    @property
    def finished(self) -> bool:
        return self.assignment is not None and assignment_finished(self.assignment)


class ReturnRequested(AssignmentClosed):
    """A Prolific participant failed a comprehension check twice: nothing more is served and
    the page asks them to return the study (no completion code)."""

    code = "return_requested"


class SubmissionInvalid(ValueError):
    """Answers that cannot be stored: `errors` maps item id (or "__all__") to messages;
    `message` says it for the whole request (the page shows it above the items)."""

    def __init__(self, errors: dict[str, list[str]], *,
                 message: str = "Some answers need attention."):
        self.errors = errors
        self.message = message
        super().__init__(f"{len(errors)} item(s) need attention")
