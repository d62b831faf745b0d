"""Rate limits on task pages and JSON calls: one bucket per worker and client address, so the
workers of a stage behind one proxy address do not throttle each other; the client address
comes from a proxy header only when a setting says the proxy is ours; production counts in
Redis when a cache URL is configured."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from unittest import mock
from urllib.parse import urlencode

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.urls import reverse

from annotation.models import Provider, TaskKind
from testing.factories import make_hit
from tests.support.paths import REPO_ROOT
from tests.support.tasks import make_task

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

LIMITS = {"page": (3, 60), "api": (2, 60)}
PROXY = "10.0.0.1"  # every request reaches the app from the reverse proxy


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def mturk_get(client, stage, worker_id: str, **extra):
    params = {"assignmentId": f"ASG-{worker_id}", "hitId": f"HIT-{worker_id}",
              "workerId": worker_id}
    url = reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk})
    return client.get(f"{url}?{urlencode(params)}", REMOTE_ADDR=PROXY, **extra)


def prolific_get(client, stage, pid: str):
    url = reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
    query = urlencode({"PROLIFIC_PID": pid, "STUDY_ID": "STUDY", "SESSION_ID": f"S-{pid}"})
    return client.get(f"{url}?{query}", REMOTE_ADDR=PROXY)


def token_of(response) -> str:
    import re

    match = re.search(rb'<script id="task-config" type="application/json">(.*?)</script>',
                      response.content, re.S)
    return json.loads(match.group(1))["token"]


def autosave(client, token: str, **extra):
    return client.post(reverse("annotation:task-autosave"), data=json.dumps({"draft": {}}),
                       content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=token,
                       REMOTE_ADDR=PROXY, **extra)


@override_settings(QAJ_TASK_RATE_LIMITS=LIMITS)
def test_two_mturk_workers_on_one_address_and_path_have_their_own_page_buckets(client):
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    for worker_id in ("W1", "W2"):
        make_hit(stage, items=items, external_id=f"HIT-{worker_id}")
    first = [mturk_get(client, stage, "W1").status_code for _ in range(4)]
    assert first == [200, 200, 200, 429]
    over = mturk_get(client, stage, "W1")
    assert over.status_code == 429 and over["Retry-After"] == "60"
    # Same proxy address, same path (/task/mturk/<stage>/): a separate bucket.
    assert mturk_get(client, stage, "W2").status_code == 200


@override_settings(QAJ_TASK_RATE_LIMITS=LIMITS)
def test_two_prolific_participants_on_one_address_have_their_own_page_buckets(client):
    project, stage, items = make_task(TaskKind.AB, provider=Provider.PROLIFIC)
    assert [prolific_get(client, stage, "P1").status_code for _ in range(4)] == \
        [200, 200, 200, 429]
    assert prolific_get(client, stage, "P2").status_code == 200


@override_settings(QAJ_TASK_RATE_LIMITS=LIMITS)
def test_json_calls_are_limited_per_assignment_not_per_proxy_address(client):
    project, stage, items = make_task(TaskKind.LIKERT, n_items=4, items_per_hit=2, provider=Provider.PROLIFIC)
    tokens = [token_of(prolific_get(client, stage, pid)) for pid in ("P1", "P2")]
    assert [autosave(client, tokens[0]).status_code for _ in range(3)] == [200, 200, 429]
    assert autosave(client, tokens[1]).status_code == 200


@override_settings(QAJ_TASK_RATE_LIMITS=LIMITS)
def test_forwarded_for_is_ignored_unless_the_proxy_header_is_trusted(client):
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HIT-W1")
    statuses = [mturk_get(client, stage, "W1", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}").status_code
                for n in range(4)]
    assert statuses == [200, 200, 200, 429], "a client cannot pick its own bucket by default"


@override_settings(QAJ_TASK_RATE_LIMITS=LIMITS, QAJ_TRUSTED_PROXY_HEADER="X-Forwarded-For")
def test_trusted_proxy_header_gives_each_client_address_its_own_bucket(client):
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HIT-W1")
    # The proxy appends the address it saw; what the client put before it is ignored.
    statuses = [mturk_get(client, stage, "W1",
                          HTTP_X_FORWARDED_FOR=f"198.51.100.{n}, 203.0.113.7").status_code
                for n in range(4)]
    assert statuses == [200, 200, 200, 429]
    other = mturk_get(client, stage, "W1", HTTP_X_FORWARDED_FOR="203.0.113.8")
    assert other.status_code == 200


LOCAL_CACHE = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                           "LOCATION": "rate-window-test"}}
REDIS_CACHE = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                           "LOCATION": "redis://127.0.0.1:6379/5",
                           "KEY_PREFIX": f"rate-window-{secrets.token_hex(4)}"}}


@pytest.mark.parametrize("caches", [LOCAL_CACHE, REDIS_CACHE], ids=["locmem", "redis"])
def test_a_window_opens_at_its_first_request_and_closes_after_its_length(rf, caches):
    """The counter's expiry is the window: counting does not push it forward (else a worker
    reloading steadily would stay refused), and a burst is refused whenever it starts (with
    clock-aligned minutes, one straddling the minute got twice the budget)."""
    from annotation.views.task_pages import rate_limited

    request = rf.get("/task/")
    with override_settings(CACHES=caches, QAJ_TASK_RATE_LIMITS={"page": (2, 1)}):
        cache.clear()
        key = f"window-{secrets.token_hex(4)}"
        assert [rate_limited(request, scope="page", key=key) for _ in range(4)] == \
            [False, False, True, True]
        time.sleep(1.3)
        assert rate_limited(request, scope="page", key=key) is False
        cache.clear()

    # A burst that starts 0.1 s before a minute turns: still three allowed, then refused.
    import datetime as dt
    minute = dt.datetime(2026, 11, 29, 4, 59, 59, 900_000, tzinfo=dt.UTC)
    clock = iter(minute + dt.timedelta(seconds=0.1 * n) for n in range(100))
    with override_settings(CACHES=caches, QAJ_TASK_RATE_LIMITS={"page": (3, 60)}), \
            mock.patch("django.utils.timezone.now", side_effect=lambda: next(clock)):
        cache.clear()
        key = f"burst-{secrets.token_hex(4)}"
        assert [rate_limited(request, scope="page", key=key) for _ in range(5)] == \
            [False, False, False, True, True]
        cache.clear()


def test_an_unavailable_cache_does_not_take_the_task_pages_down(client):
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HIT-W1")
    with mock.patch.object(cache, "add", side_effect=ConnectionError("cache down")):
        response = mturk_get(client, stage, "W1")
        assert response.status_code == 200
        assert autosave(client, token_of(response)).status_code == 200


def _production_caches(**env) -> dict:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("QAJ_CACHE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    clean.update(env, DJANGO_SETTINGS_MODULE="config.settings.production",
                 DJANGO_SECRET_KEY=secrets.token_urlsafe(60))
    code = ("import json, django; from django.conf import settings; django.setup(); "
            "print(json.dumps(settings.CACHES))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=clean,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_production_counts_rate_limits_in_redis_when_a_cache_url_is_set():
    url = "redis://127.0.0.1:6379/5"
    for env in ({"QAJ_CACHE_URL": url}, {"REDIS_URL": url}):
        default = _production_caches(**env)["default"]
        assert default["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
        assert default["LOCATION"] == url
    assert "redis" not in _production_caches()["default"]["BACKEND"].lower()
