"""No real money is spent on one click: publishing a stage on MTurk production (or Prolific's own
API) opens a confirmation page first — where the money goes, how many HITs and assignments (or
places), the total with fees — as Django's delete action does; nothing is created, queued or
sent until the researcher confirms that very cost. The service refuses a publish without it
(`confirmation_guard`), whichever door calls. Sandbox, rehearsal and in-house stay one click.
Local MTurk-protocol server (treated as production) and Prolific fake, real clients."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.models import ProviderCall, StageKind, StageStatus, TaskKind
from annotation.stage_errors import PublishNeedsConfirmation
from testing.factories import make_item, make_project, make_stage, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

CONFIRM = "publish_confirmed"


@pytest.fixture
def admin_client_(client):
    client.force_login(make_user(superuser=True))
    return client


@pytest.fixture
def celery_app():
    from worker.celery import app

    saved = (app.conf.broker_url, app.conf.task_always_eager)
    yield app
    app.conf.broker_url, app.conf.task_always_eager = saved


@pytest.fixture
def production(monkeypatch, mturk_server):
    """The local MTurk server stands in for MTurk production (real money)."""
    from annotation.providers import mturk, mturk_protocol

    monkeypatch.setattr(mturk_protocol, "mturk_is_production", lambda: True)
    monkeypatch.setattr(mturk, "mturk_is_production", lambda: True)
    return mturk_server


def _stage(provider: str = "mturk"):
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 3},
                           reward_per_hit=Decimal("0.50"))
    for _ in range(4):
        make_item(project)
    return make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                      provider=provider, settings={"locales": []})


def _post(client, action: str, stage, **fields):
    return client.post(reverse("admin:annotation_stage_changelist"), {
        "action": action, "_selected_action": [str(stage.pk)], "index": "0", **fields},
        follow=True)


def _nothing_sent(stage, server=None) -> None:
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.hits.exists()
    assert not ProviderCall.objects.filter(stage=stage).exists()
    if server is not None:
        assert not server.state.hits


@pytest.mark.mturk
def test_publishing_on_mturk_production_asks_first_with_the_cost(admin_client_, production):
    stage = _stage()
    page = _post(admin_client_, "publish_stages", stage)
    text = page.content.decode()
    assert page.templates[0].name == "admin/annotation/stage/publish_confirm.html"
    # 2 HITs × 3 assignments × $0.50 = $3.00 + MTurk's 20% = $3.60
    assert "MTurk PRODUCTION (real money)" in text
    assert "2 HITs, 6 assignments" in text and "$3.60" in text
    assert "Yes, publish and spend $3.60" in text
    _nothing_sent(stage, production)

    # A total other than the stage's (it changed since the page, or a forged form) is refused.
    shown = [str(m) for m in _post(admin_client_, "publish_stages", stage, **{
        CONFIRM: "yes", f"confirmed_total_{stage.pk}": "1.00"}).context["messages"]]
    assert any("costs $3.60 now, not the $1.00 you confirmed" in m for m in shown), shown
    _nothing_sent(stage, production)

    shown = [str(m) for m in _post(admin_client_, "publish_stages", stage, **{
        CONFIRM: "yes", f"confirmed_total_{stage.pk}": "3.60"}).context["messages"]]
    assert any("2 HITs created" in m for m in shown), shown
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING and len(production.state.hits) == 2


@pytest.mark.mturk
def test_publishing_in_the_background_on_production_asks_first(admin_client_, production,
                                                               celery_app):
    celery_app.conf.task_always_eager = True
    stage = _stage()
    page = _post(admin_client_, "publish_stages_background", stage)
    assert "Yes, publish in the background and spend $3.60" in page.content.decode()
    _nothing_sent(stage, production)
    shown = [str(m) for m in _post(admin_client_, "publish_stages_background", stage, **{
        CONFIRM: "yes", f"confirmed_total_{stage.pk}": "3.60"}).context["messages"]]
    assert any(m.startswith("Queued 1 stage(s)") for m in shown), shown
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING


@pytest.mark.mturk
def test_every_caller_of_the_service_needs_the_confirmed_cost(production, researcher):
    """The Celery task and any other caller of `stage_publish` are refused without the cost
    confirmed, naming it; nothing is sent."""
    from annotation.services.stages import stage_publish, stage_publish_enqueue
    from worker.tasks.providers import stage_publish as publish_task

    stage = _stage()
    with pytest.raises(PublishNeedsConfirmation, match=r"spends real money .*\$3\.60"):
        stage_publish(stage=stage, user=researcher)
    with pytest.raises(PublishNeedsConfirmation, match=r"\$3\.60"):
        publish_task.run(stage.pk)
    with pytest.raises(PublishNeedsConfirmation, match=r"\$3\.60"):
        stage_publish_enqueue(stage=stage, by=researcher)
    _nothing_sent(stage, production)
    assert not stage.publish_problem  # a question, not a problem
    result = stage_publish(stage=stage, user=researcher, confirmed_total=Decimal("3.60"))
    assert result.report.created == 2


@pytest.mark.mturk
def test_sandbox_and_inhouse_publish_in_one_click(admin_client_, mturk_server):
    sandboxed, inhouse = _stage(), _stage("inhouse")
    for stage in (sandboxed, inhouse):
        shown = [str(m) for m in _post(admin_client_, "publish_stages", stage)
                 .context["messages"]]
        assert any("HITs created" in m for m in shown), shown
        stage.refresh_from_db()
        assert stage.status == StageStatus.COLLECTING


@pytest.mark.mturk
def test_a_stage_publishing_would_refuse_is_refused_instead_of_asked(admin_client_,
                                                                    production):
    stage = _stage()
    stage.project.budget_cap = Decimal("1.00")
    stage.project.save()
    page = _post(admin_client_, "publish_stages", stage)
    shown = [str(m) for m in page.context["messages"]]
    assert "Yes, publish" not in page.content.decode()
    assert any("not published" in m and "budget cap" in m for m in shown), shown
    _nothing_sent(stage, production)


@pytest.mark.prolific
def test_publishing_on_prolific_itself_asks_first_with_the_places(admin_client_,
                                                                 prolific_server,
                                                                 monkeypatch):
    from annotation.providers import prolific

    monkeypatch.setattr(prolific, "prolific_is_real", lambda: True)
    stage = _stage("prolific")
    text = _post(admin_client_, "publish_stages", stage).content.decode()
    assert "Prolific (real money)" in text and "6 places" in text
    _nothing_sent(stage)
    assert not prolific_server.state.studies
