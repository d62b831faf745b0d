"""A Prolific publish the workspace cannot pay for is refused, as an MTurk one the account cannot.

Prolific checks the workspace's balance when a study is published and locks the study's cost
there; "Get the balance of a workspace" states `available_balance`, what is left after the
funds active studies hold, in the currency's hundredths. The readiness probe every publish door
makes reads it (with the currency) and returns it in dollars as MTurk's GetAccountBalance is,
and the same budget guard refuses a stage whose estimated total with fees it does not cover:
"the Prolific balance $X does not cover $Y", before any study is created, the stage left a
draft with the reason kept. The admin's readiness check and cost estimate show the balance."""
from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.cost_selectors import stage_cost_estimate
from annotation.models import StageStatus
from annotation.stage_errors import BudgetExceeded
from testing.prolific_server import DEFAULT_WORKSPACE_ID
from tests.support.providers import (
    prolific_draft_stage,
    refused_and_nothing_created,
    stage_admin_action,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _workspace(server) -> dict:
    return server.state.workspaces[DEFAULT_WORKSPACE_ID]


def _short_by_a_cent(server, stage) -> tuple[Decimal, Decimal]:
    """Leave the workspace one cent short of the stage's total: (balance, total) in dollars."""
    total = stage_cost_estimate(stage=stage).total
    _workspace(server)["available_balance"] = int(total * 100) - 1
    return total - Decimal("0.01"), total


def test_the_admin_publish_is_refused_when_the_workspace_cannot_pay(client, prolific_server):
    stage = prolific_draft_stage()
    balance, total = _short_by_a_cent(prolific_server, stage)
    shown = stage_admin_action(client, stage, "publish_stages")
    refusal = f"the Prolific balance ${balance} does not cover ${total}"
    assert any("not published" in m and refusal in m for m in shown), shown
    refused_and_nothing_created(stage, prolific_server)
    assert refusal in stage.publish_problem

    # Enough for it: published, its reward and fee locked in the workspace, the balance logged.
    _workspace(prolific_server)["available_balance"] += 1
    stage_admin_action(client, stage, "publish_stages")
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING and stage.publish_problem == ""
    assert len(prolific_server.state.studies) == 1
    assert f"balance ${total}" in stage.transitions.get(to_status="published").reason
    assert _workspace(prolific_server)["available_balance"] < int(total * 100)


def test_the_background_publish_and_the_confirmation_are_refused_too(
        prolific_server, monkeypatch):
    from annotation.services.stages import stage_publish_confirmation
    from worker.tasks.providers import stage_publish as publish_task

    stage = prolific_draft_stage()
    balance, total = _short_by_a_cent(prolific_server, stage)
    refusal = rf"Prolific balance \${balance} does not cover \${total}"
    with pytest.raises(BudgetExceeded, match=refusal):
        publish_task(stage.pk)
    refused_and_nothing_created(stage, prolific_server)
    # Real money: no total is put to the researcher for a workspace that cannot pay it.
    monkeypatch.setattr(prolific_server.provider, "spends_real_money", lambda: True)
    with pytest.raises(BudgetExceeded, match=refusal):
        stage_publish_confirmation(stage=stage)
    refused_and_nothing_created(stage, prolific_server)


def test_the_readiness_check_and_the_estimate_show_the_workspace_balance(
        client, prolific_server):
    stage = prolific_draft_stage()
    _workspace(prolific_server)["available_balance"] = 123456  # cents
    shown = stage_admin_action(client, stage, "check_readiness")
    assert any("Prolific ready" in m and "balance $1234.56" in m for m in shown), shown
    shown = stage_admin_action(client, stage, "estimate_cost")
    assert any("balance $1234.56" in m for m in shown), shown
    refused_and_nothing_created(stage, prolific_server)


def test_a_balance_prolific_does_not_state_is_said_and_publishing_goes_on(
        client, prolific_server, monkeypatch):
    """As MTurk's throttled balance: unknown, said (a warning and the logged transition), and
    the publish is not held up by it (Prolific itself refuses a study it cannot fund)."""
    state = prolific_server.state
    original = state.get_workspace_balance

    def without_available(**kwargs):
        return {**original(**kwargs), "available_balance": None}

    monkeypatch.setattr(state, "get_workspace_balance", without_available)
    stage = prolific_draft_stage()
    shown = stage_admin_action(client, stage, "publish_stages")
    assert any("Prolific balance unknown" in m and "named no available_balance" in m
               and "NOT checked" in m for m in shown), shown
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING
    assert "balance unknown" in stage.transitions.get(to_status="published").reason


def test_the_estimate_reads_the_balance_of_the_workspace_the_stage_is_paid_from(
        settings, prolific_server):
    """The account has two workspaces and the stage names a Prolific project of the second:
    the publish checks (and pays from) that workspace, so the cost estimate's balance is that
    workspace's too, not "unknown: several workspaces" nor another workspace's funds."""
    settings.PROLIFIC_WORKSPACE_ID = ""
    _workspace(prolific_server)["available_balance"] = 500  # $5.00, the other workspace
    second = prolific_server.state.workspace_add(workspace_id=f"w{3:022x}")
    second["available_balance"] = 123456
    prolific_server.state.project_add(project_id=f"p{3:022x}", workspace_id=second["id"])
    stage = prolific_draft_stage()
    stage.settings = {**(stage.settings or {}), "prolific_project_id": f"p{3:022x}"}
    stage.save(update_fields=["settings"])
    estimate = stage_cost_estimate(stage=stage, with_balance=True)
    assert (estimate.balance, estimate.balance_error) == (Decimal("1234.56"), "")
    refused_and_nothing_created(stage, prolific_server)
