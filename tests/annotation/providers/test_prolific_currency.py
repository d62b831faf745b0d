"""A Prolific workspace priced in another currency than QA Judge's amounts is refused at publish.

Prolific prices a study's `reward` (and its bonuses) in its workspace's currency, in hundredths
("Get the balance of a workspace" names it: `currency_code`, USD or GBP). Every amount QA Judge
stores, shows and checks is in US dollars, so a stage published from a GBP workspace would pay
0.40 GBP where every page said $0.40, and compare pounds with the hourly-pay floor and the
budget cap in dollars. The readiness probe, which every publish door makes before anything is
created, learns the currency and refuses a workspace not priced in USD, naming both currencies
and what to do; nothing is created on Prolific and the stage stays a draft."""
from __future__ import annotations

import pytest

from annotation.models import StageStatus
from annotation.services.readiness import ProviderNotReady
from testing.prolific_server import DEFAULT_WORKSPACE_ID
from tests.support.providers import (
    prolific_draft_stage,
    refused_and_nothing_created,
    stage_admin_action,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

GBP_WORKSPACE = f"w{2:022x}"
GBP_PROJECT, USD_PROJECT = f"p{1:022x}", f"p{2:022x}"


def test_a_gbp_workspace_is_refused_at_the_admin_publish_naming_both_currencies(
        client, prolific_server):
    prolific_server.state.workspaces[DEFAULT_WORKSPACE_ID]["currency_code"] = "GBP"
    stage = prolific_draft_stage()
    shown = stage_admin_action(client, stage, "publish_stages")
    refusal = [m for m in shown if "not published" in m]
    assert refusal and "GBP" in refusal[0] and "USD" in refusal[0], shown
    assert "PROLIFIC_WORKSPACE_ID" in refusal[0]
    refused_and_nothing_created(stage, prolific_server)
    assert f"workspace {DEFAULT_WORKSPACE_ID} prices studies in GBP" in stage.publish_problem
    assert prolific_server.stats["GET workspaces/<id>/balance/"] == 1  # read once, no retries

    # The same stage from a USD workspace publishes, its reward in cents.
    prolific_server.state.workspaces[DEFAULT_WORKSPACE_ID]["currency_code"] = "USD"
    stage_admin_action(client, stage, "publish_stages")
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING and stage.publish_problem == ""
    (study,) = prolific_server.state.studies.values()
    assert study["reward"] == 40


def test_the_background_publish_and_the_confirmation_are_refused_too(
        prolific_server, monkeypatch):
    from annotation.services.stages import stage_publish_confirmation
    from worker.tasks.providers import stage_publish as publish_task

    prolific_server.state.workspaces[DEFAULT_WORKSPACE_ID]["currency_code"] = "GBP"
    stage = prolific_draft_stage()
    with pytest.raises(ProviderNotReady, match="prices studies in GBP"):
        publish_task(stage.pk)
    refused_and_nothing_created(stage, prolific_server)
    # Real money: no total in dollars is put to the researcher for a GBP workspace.
    monkeypatch.setattr(prolific_server.provider, "spends_real_money", lambda: True)
    with pytest.raises(ProviderNotReady, match="prices studies in GBP"):
        stage_publish_confirmation(stage=stage)
    refused_and_nothing_created(stage, prolific_server)


def test_the_workspace_is_prolific_workspace_id_and_several_need_it_named(
        settings, prolific_server):
    from annotation.services.stages import stage_publish

    prolific_server.state.workspace_add(workspace_id=GBP_WORKSPACE, currency_code="GBP")
    stage = prolific_draft_stage()
    # Two workspaces and none named: the currency is unknown, nothing is published.
    with pytest.raises(ProviderNotReady, match="2 workspaces.*PROLIFIC_WORKSPACE_ID"):
        stage_publish(stage=stage)
    refused_and_nothing_created(stage, prolific_server)
    settings.PROLIFIC_WORKSPACE_ID = GBP_WORKSPACE
    prolific_server.state.project_add(project_id=GBP_PROJECT, workspace_id=GBP_WORKSPACE)
    stage.settings = {**(stage.settings or {}), "prolific_project_id": GBP_PROJECT}
    stage.save(update_fields=["settings"])
    with pytest.raises(ProviderNotReady, match="prices studies in GBP"):
        stage_publish(stage=stage)
    refused_and_nothing_created(stage, prolific_server)
    stage.settings = {key: value for key, value in stage.settings.items()
                      if key != "prolific_project_id"}
    stage.save(update_fields=["settings"])
    # Named, but the stage names no project: with two workspaces its study would go to the
    # project Prolific chooses, maybe in the GBP one, so the USD check says nothing.
    settings.PROLIFIC_WORKSPACE_ID = DEFAULT_WORKSPACE_ID
    with pytest.raises(ProviderNotReady, match="names no Prolific project.*more than one"):
        stage_publish(stage=stage)
    refused_and_nothing_created(stage, prolific_server)
    prolific_server.state.project_add(project_id=USD_PROJECT, workspace_id=DEFAULT_WORKSPACE_ID)
    stage.settings = {**(stage.settings or {}), "prolific_project_id": USD_PROJECT}
    stage.save(update_fields=["settings"])
    assert stage_publish(stage=stage).stage.status == StageStatus.COLLECTING
    assert len(prolific_server.state.studies) == 1


def test_the_workspace_checked_is_the_one_the_stages_project_is_in(settings, prolific_server):
    """Following the refusal's advice literally (a USD workspace in PROLIFIC_WORKSPACE_ID)
    while the stage's project is in the GBP one checked the USD workspace and paid pence: the
    workspace checked is the project's, and it must be PROLIFIC_WORKSPACE_ID."""
    from annotation.services.stages import stage_publish

    usd = prolific_server.state.workspace_add(workspace_id=GBP_WORKSPACE.replace("2", "3"))
    prolific_server.state.workspaces[DEFAULT_WORKSPACE_ID]["currency_code"] = "GBP"
    prolific_server.state.project_add(project_id=GBP_PROJECT, workspace_id=DEFAULT_WORKSPACE_ID)
    prolific_server.state.project_add(project_id=USD_PROJECT, workspace_id=usd["id"])
    settings.PROLIFIC_WORKSPACE_ID = usd["id"]
    stage = prolific_draft_stage()
    stage.settings = {**(stage.settings or {}), "prolific_project_id": GBP_PROJECT}
    stage.save(update_fields=["settings"])
    with pytest.raises(ProviderNotReady, match=f"project {GBP_PROJECT} is in workspace "
                                               f"{DEFAULT_WORKSPACE_ID}, not in "
                                               "PROLIFIC_WORKSPACE_ID"):
        stage_publish(stage=stage)
    refused_and_nothing_created(stage, prolific_server)
    # Without PROLIFIC_WORKSPACE_ID the project's own (GBP) workspace is the one checked.
    settings.PROLIFIC_WORKSPACE_ID = ""
    with pytest.raises(ProviderNotReady, match="prices studies in GBP"):
        stage_publish(stage=stage)
    refused_and_nothing_created(stage, prolific_server)
    # A project of the USD workspace publishes, and its study is paid from that workspace.
    stage.settings = {**stage.settings, "prolific_project_id": USD_PROJECT}
    stage.save(update_fields=["settings"])
    before = usd["available_balance"]
    assert stage_publish(stage=stage).stage.status == StageStatus.COLLECTING
    assert usd["available_balance"] < before


def test_a_rate_limited_currency_check_publishes_nothing(prolific_server):
    from annotation.services.stages import stage_publish

    prolific_server.rate_limit_next["GET workspaces/"] = 1
    stage = prolific_draft_stage()
    with pytest.raises(ProviderNotReady, match="currency is unknown.*429"):
        stage_publish(stage=stage)
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not prolific_server.state.studies
