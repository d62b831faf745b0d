"""Provider readiness before any remote call (issue #32): publishing a stage whose provider lacks
a credential, an endpoint or a required setting is refused at once, naming the problem; the
stage stays a draft, nothing is sent, and the cockpit says what to fix (it used to retry for
45–90 s, end "Published; 0 created, 1 failed: Name or service not known" and tell the
researcher to wait for submissions)."""
from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.models import ProviderCall, StageKind, StageStatus, TaskKind
from testing.factories import make_item, make_project, make_stage, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.fixture
def admin_client_(client):
    client.force_login(make_user(superuser=True))
    return client


def _publish(client, stage, **fields):
    response = client.post(reverse("admin:annotation_stage_changelist"), {
        "action": "publish_stages", "_selected_action": [str(stage.pk)], "index": "0",
        **fields}, follow=True)
    return [str(m) for m in response.context["messages"]]


def _stage(provider: str, **fields):
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 1},
                           reward_per_hit=Decimal("0.50"))
    for _ in range(4):
        make_item(project)
    return make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                      provider=provider, **fields)


def _still_draft_and_nothing_sent(stage) -> None:
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT
    assert not stage.hits.exists() and not stage.transitions.exists()
    assert not ProviderCall.objects.filter(stage=stage).exists()


def test_prolific_without_a_token_is_refused_at_once_and_the_cockpit_says_why(
        admin_client_, settings):
    settings.PROLIFIC_API_TOKEN = ""
    settings.PROLIFIC_API_URL = "http://127.0.0.1:9/api/v1/"  # nothing listens: no retries
    stage = _stage("prolific")
    started = time.monotonic()
    shown = _publish(admin_client_, stage)
    assert time.monotonic() - started < 5
    assert any("not published" in m and "PROLIFIC_API_TOKEN is not set" in m for m in shown), \
        shown
    _still_draft_and_nothing_sent(stage)
    assert "PROLIFIC_API_TOKEN is not set" in stage.publish_problem
    page = admin_client_.get(reverse("metrics:project-cockpit",
                                     args=[stage.project.slug])).content.decode()
    assert "PROLIFIC_API_TOKEN is not set" in page
    assert "fix what the problem says, then publish again" in page
    assert "wait for the first submissions" not in page
    stage_page = admin_client_.get(reverse("admin:annotation_stage_change", args=[stage.pk]))
    assert "PROLIFIC_API_TOKEN is not set" in stage_page.content.decode()


def test_prolific_unreachable_or_refusing_the_token_is_named_and_nothing_is_created(
        admin_client_, settings, prolific_server):
    stage = _stage("prolific")
    settings.PROLIFIC_API_URL = "http://127.0.0.1:9/api/v1/"  # a closed port: one try
    from annotation.providers import override_provider
    from annotation.providers.prolific import ProlificProvider

    with override_provider("prolific", ProlificProvider()):
        started = time.monotonic()
        shown = _publish(admin_client_, stage)
    assert time.monotonic() - started < 5
    assert any("could not be reached" in m and "nothing was created" in m for m in shown), shown
    _still_draft_and_nothing_sent(stage)
    settings.PROLIFIC_API_URL = prolific_server.url
    settings.PROLIFIC_API_TOKEN = "wrong-token"
    with override_provider("prolific", ProlificProvider()):
        shown = _publish(admin_client_, stage)
    assert any("Prolific refused PROLIFIC_API_TOKEN (401)" in m for m in shown), shown
    _still_draft_and_nothing_sent(stage)
    assert not prolific_server.state.studies
    # With the right token it publishes, and the problem is cleared.
    settings.PROLIFIC_API_TOKEN = "prolific-test-token"
    with override_provider("prolific", ProlificProvider()):
        shown = _publish(admin_client_, stage)
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING and stage.publish_problem == "", shown
    assert len(prolific_server.state.studies) == 1


def test_prolific_needs_a_reward_and_a_public_https_url_for_the_real_api(settings):
    settings.PROLIFIC_API_TOKEN = "t"
    settings.PROLIFIC_API_URL = "https://api.prolific.com/api/v1/"
    settings.QAJ_PUBLIC_BASE_URL = "http://127.0.0.1:8000"
    from annotation.readiness_selectors import stage_readiness

    stage = _stage("prolific", reward_per_hit=Decimal("0.00"))
    readiness = stage_readiness(stage=stage)  # local checks only: nothing is called
    assert not readiness.ready
    text = readiness.as_text()
    assert "public URL" in text and "https" in text and "reward" in text


@pytest.mark.mturk
def test_mturk_without_credentials_or_with_an_unreachable_endpoint_stays_a_draft(
        admin_client_, settings, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    settings.MTURK_ENDPOINT_URL = "http://127.0.0.1:9"
    stage = _stage("mturk", settings={"locales": []})
    shown = _publish(admin_client_, stage)
    assert any("no AWS credentials found" in m for m in shown), shown
    _still_draft_and_nothing_sent(stage)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTTESTTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    settings.MTURK_MAX_ATTEMPTS = 2
    started = time.monotonic()
    shown = _publish(admin_client_, stage)
    assert time.monotonic() - started < 10
    assert any("GetAccountBalance at http://127.0.0.1:9 failed" in m for m in shown), shown
    _still_draft_and_nothing_sent(stage)


def test_mturk_production_needs_an_https_public_url(admin_client_, settings, aws_env):
    settings.MTURK_ENDPOINT_URL = ""
    settings.MTURK_PRODUCTION = True
    settings.QAJ_PUBLIC_BASE_URL = "http://qaj.example.org"
    stage = _stage("mturk", settings={"locales": []})
    shown = _publish(admin_client_, stage)  # refused before any call to Amazon
    assert any("MTurk production sends workers to QAJ_PUBLIC_BASE_URL" in m and "https" in m
               for m in shown), shown
    _still_draft_and_nothing_sent(stage)


@pytest.mark.mturk
def test_mturk_balance_is_asked_once_before_any_hit_and_gates_publishing(
        admin_client_, mturk_server):
    stage = _stage("mturk", settings={"locales": []})
    mturk_server.state.balance = Decimal("0.50")
    shown = _publish(admin_client_, stage)
    assert any("does not cover" in m for m in shown), shown
    _still_draft_and_nothing_sent(stage)
    assert not mturk_server.state.hits
    mturk_server.state.balance = Decimal("100.00")
    _publish(admin_client_, stage)
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING


def test_readiness_action_names_each_problem_and_creates_nothing(admin_client_, settings):
    settings.PROLIFIC_API_TOKEN = ""
    stage = _stage("prolific")
    inhouse = _stage("inhouse")
    response = admin_client_.post(reverse("admin:annotation_stage_changelist"), {
        "action": "check_readiness", "_selected_action": [str(stage.pk), str(inhouse.pk)],
        "index": "0"}, follow=True)
    shown = [str(m) for m in response.context["messages"]]
    assert any("Prolific not ready: credentials: PROLIFIC_API_TOKEN is not set" in m
               for m in shown), shown
    assert any(str(inhouse) in m and "ready" in m and "not ready" not in m for m in shown)
    _still_draft_and_nothing_sent(stage)


def test_an_imported_stage_is_never_published(admin_client_):
    stage = _stage("import", name="imported")
    shown = _publish(admin_client_, stage)
    assert any("an imported stage holds judgments collected elsewhere" in m for m in shown)
    _still_draft_and_nothing_sent(stage)


def test_publishing_a_closed_stage_is_refused_without_marking_it(admin_client_):
    stage = _stage("inhouse")
    stage.status = StageStatus.CLOSED
    stage.save()
    shown = _publish(admin_client_, stage)
    assert any("only a draft can be published" in m for m in shown), shown
    stage.refresh_from_db()
    assert stage.publish_problem == "" and stage.status == StageStatus.CLOSED


@pytest.mark.mturk
def test_mturk_refuses_a_hit_type_it_would_reject_before_any_call(admin_client_, mturk_server):
    """A reward under $0.01 or an assignment duration outside 30 s to 365 days would be
    refused by CreateHITType after CreateQualificationType was made: named, nothing sent."""
    stage = _stage("mturk", settings={"locales": []})
    stage.reward_per_hit = Decimal("0.00")
    stage.save()
    stage.project.assignment_timeout_minutes = 0
    stage.project.save()
    shown = _publish(admin_client_, stage)
    assert any("MTurk pays at least $0.01" in m and "an assignment lasts 0 s" in m
               for m in shown), shown
    _still_draft_and_nothing_sent(stage)
    assert not mturk_server.state.hits


@pytest.mark.mturk
def test_a_failed_hit_type_leaves_the_stage_saying_so_and_publishing_again_retries(
        admin_client_, mturk_server, settings):
    stage = _stage("mturk", settings={"locales": []})
    settings.MTURK_MAX_ATTEMPTS = 2
    mturk_server.throttle_next["CreateHITType"] = 5  # more than the attempts
    _publish(admin_client_, stage)
    stage.refresh_from_db()
    assert stage.status == StageStatus.PUBLISHED
    assert "CreateHITType" in stage.publish_problem and "publish again" in stage.publish_problem
    assert not mturk_server.state.hits
    mturk_server.throttle_next["CreateHITType"] = 0
    _publish(admin_client_, stage)
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING and not stage.publish_problem
    assert len(mturk_server.state.hits) == stage.hits.count() == 2


def test_every_publish_door_says_sandbox_or_production_before_money_is_spent(
        admin_client_, settings, aws_env):
    """Sandbox and production cannot be confused: the estimate (its action and the stage
    page), the readiness check, the background publish's message and the cockpit name where
    the money goes; production is recognised however its address is written."""
    from annotation.cost_selectors import stage_cost_estimate

    stage = _stage("mturk", settings={"locales": []})
    settings.MTURK_ENDPOINT_URL = ""
    settings.MTURK_PRODUCTION = False
    assert stage_cost_estimate(stage=stage).as_text().startswith(
        "on MTurk sandbox (no real money): ")
    shown = _action(admin_client_, "estimate_cost", stage)
    assert any("on MTurk sandbox (no real money): " in m for m in shown), shown
    settings.MTURK_PRODUCTION = True
    for action in ("estimate_cost", "check_readiness"):
        shown = _action(admin_client_, action, stage)
        assert any("MTurk PRODUCTION (real money)" in m for m in shown), (action, shown)
    cockpit = admin_client_.get(reverse("metrics:project-cockpit", args=[stage.project.slug]))
    assert "on MTurk PRODUCTION (real money)" in cockpit.content.decode()
    page = admin_client_.get(reverse("admin:annotation_stage_change", args=[stage.pk]))
    assert "on MTurk PRODUCTION (real money): " in page.content.decode()

    # Production's address written by hand (a trailing slash, capitals) is production: the red
    # banner, the https check of the task URL and the estimate all say so.
    settings.MTURK_PRODUCTION = False
    settings.MTURK_ENDPOINT_URL = "https://MTurk-Requester.us-east-1.amazonaws.com/"
    settings.QAJ_PUBLIC_BASE_URL = "http://qaj.example.org"
    assert "on MTurk PRODUCTION (real money): " in stage_cost_estimate(stage=stage).as_text()
    changelist = admin_client_.get(reverse("admin:annotation_stage_changelist"))
    assert b"MTurk PRODUCTION is ON" in changelist.content
    shown = _publish(admin_client_, stage)
    assert any("MTurk production sends workers to QAJ_PUBLIC_BASE_URL" in m for m in shown), \
        shown
    _still_draft_and_nothing_sent(stage)


def test_production_asked_for_but_the_endpoint_elsewhere_is_refused(admin_client_, settings,
                                                                    aws_env):
    settings.MTURK_PRODUCTION = True
    settings.MTURK_ENDPOINT_URL = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
    stage = _stage("mturk", settings={"locales": []})
    shown = _publish(admin_client_, stage)
    assert any("MTURK_PRODUCTION=true, but MTURK_ENDPOINT_URL=" in m
               and "MTurk sandbox (no real money)" in m for m in shown), shown
    _still_draft_and_nothing_sent(stage)


@pytest.mark.mturk
def test_the_publish_message_and_its_logged_transition_name_the_endpoint(admin_client_,
                                                                         mturk_server):
    stage = _stage("mturk", settings={"locales": []})
    shown = _publish(admin_client_, stage)
    where = f"on the MTurk endpoint {mturk_server.url} (MTURK_ENDPOINT_URL"
    assert any(where in m for m in shown), shown
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING
    assert where in stage.transitions.get(to_status=StageStatus.PUBLISHED).reason


def _action(client, action, stage):
    response = client.post(reverse("admin:annotation_stage_changelist"), {
        "action": action, "_selected_action": [str(stage.pk)], "index": "0"}, follow=True)
    return [str(m) for m in response.context["messages"]]
