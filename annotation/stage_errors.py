"""Why a stage action cannot be done: one exception family for planning, guards and publishing."""


class StageError(Exception):
    """A stage action that cannot be done; the message says why."""


class IllegalTransition(StageError):
    pass


class GuardFailed(StageError):
    pass


class BudgetExceeded(StageError):
    pass
