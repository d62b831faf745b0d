"""Fixtures for provider tests: stubbed boto3 clients, the local MTurk-protocol server and the
local Prolific fake, each installed as the provider the services get from `get_provider`."""
from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.models import Provider, TaskKind
from annotation.providers import override_provider
from testing.factories import make_item, make_project


@pytest.fixture(autouse=True)
def fast_retries(settings):
    settings.MTURK_RETRY_BASE_SECONDS = 0.001
    settings.PROLIFIC_RETRY_BASE_SECONDS = 0.001
    settings.QAJ_PUBLIC_BASE_URL = "https://qaj.example.org"


@pytest.fixture
def aws_env(monkeypatch):
    """Dummy credentials for the standard AWS chain (never real ones)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTTESTTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture
def stubbed():
    """(provider, stubber): an MTurkProvider on a boto3 client under botocore's Stubber, so
    every call's parameters are checked against the real MTurk service model; registered as
    the MTurk provider; retry sleeps recorded in `provider.sleeps` instead of slept."""
    import boto3
    from botocore.stub import Stubber

    from annotation.providers.mturk import MTurkProvider
    from annotation.providers.mturk_protocol import SANDBOX_ENDPOINT

    client = boto3.client("mturk", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="y", endpoint_url=SANDBOX_ENDPOINT)
    stubber = Stubber(client)
    stubber.activate()
    sleeps: list[float] = []
    provider = MTurkProvider(client=client, sleep=sleeps.append)
    provider.sleeps = sleeps
    with override_provider(Provider.MTURK, provider):
        yield provider, stubber
    stubber.assert_no_pending_responses()
    stubber.deactivate()


@pytest.fixture
def mturk_server(settings, aws_env):
    from annotation.providers.mturk import MTurkProvider
    from testing.mturk_server import MTurkServer

    with MTurkServer() as server:
        settings.MTURK_ENDPOINT_URL = server.url
        settings.MTURK_READ_TIMEOUT = 5
        provider = MTurkProvider()  # a real boto3 client, pointed at the server by settings
        with override_provider(Provider.MTURK, provider):
            server.provider = provider
            yield server


@pytest.fixture
def likert_study(db):
    """A Likert project with 12 gold items (qualification) and 30 passage-grouped items."""
    project = make_project(TaskKind.LIKERT, reward_per_hit=Decimal("0.40"), items_per_hit=5,
                           redundancy={"dev": 2, "train": 1, "default": 1})
    gold = [make_item(project, gold={"score": 1 + i % 5}, is_gold_check=True, split="dev",
                      group_key="gold") for i in range(12)]
    items = [make_item(project, split="dev" if i < 20 else "train", group_key=f"p{i // 5}")
             for i in range(30)]
    return project, gold, items


@pytest.fixture
def prolific_server(settings):
    from annotation.providers.prolific import ProlificProvider
    from testing.prolific_server import ProlificServer

    with ProlificServer(token="prolific-test-token") as server:
        settings.PROLIFIC_API_URL = server.url
        settings.PROLIFIC_API_TOKEN = "prolific-test-token"
        with override_provider(Provider.PROLIFIC, ProlificProvider()) as provider:
            server.provider = provider
            yield server


@pytest.fixture
def celery_app():
    """The Celery app, its broker URL and eager mode restored after the test (a test sets
    `task_always_eager` to run a queued task here, or points the broker nowhere)."""
    from worker.celery import app

    saved = (app.conf.broker_url, app.conf.task_always_eager)
    yield app
    app.conf.broker_url, app.conf.task_always_eager = saved
