"""The budget cap's lock: every door that spends beyond what publishing committed — a bonus
(by hand or per correct answer), a replacement assignment, a Prolific place — and publishing
itself check the cap (`annotation.cost_selectors.spend_over_budget`, `budget_guard`) and write
what they spend (the provider call's row, the published stage) under one lock on the project's
row, so two spends at once take turns and the second counts the first: a bonus in flight, a
replacement asked for, a stage just published (`annotation.cost_selectors.committed_after`)."""
from __future__ import annotations

from core.leases import scope_lock


def budget_lock(project) -> None:
    """Lock `project`'s row until the transaction ends (PostgreSQL; SQLite's IMMEDIATE
    transactions take turns anyway). Call it inside `transaction.atomic`."""
    scope_lock(project)
