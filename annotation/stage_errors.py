"""Why a stage action cannot be done: one exception family for planning, guards and publishing."""


class StageError(Exception):
    """A stage action that cannot be done; the message says why."""


class IllegalTransition(StageError):
    pass


class StageAlreadyClosed(IllegalTransition):
    """Close asked of a stage that is closed already (a second tab, a double click): nothing
    was logged; the stage is as the researcher asked. `expired`: HITs the first close left
    open on the provider (its second expire refused) that this one expired; 0: nothing sent."""

    def __init__(self, message: str, *, expired: int = 0) -> None:
        super().__init__(message)
        self.expired = expired

    @property
    def outcome(self) -> str:
        """What the close asked again did, in the researcher's words."""
        if self.expired:
            return f"already closed; expired {self.expired} HIT(s) left open"
        return "already closed"


class GuardFailed(StageError):
    pass


class BudgetExceeded(StageError):
    pass


class PublishNeedsConfirmation(StageError):
    """Publishing would spend real money and the researcher has not confirmed this cost (or
    confirmed another one: the stage changed since). Nothing was stored or sent; `estimate` is
    the cost to confirm."""

    def __init__(self, message: str, *, estimate) -> None:
        super().__init__(message)
        self.estimate = estimate
