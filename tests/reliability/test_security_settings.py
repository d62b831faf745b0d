"""Deployment security: `check --deploy` clean for the production settings, HSTS and secure,
HttpOnly cookies there, a CSP on every page (task pages: framing by MTurk only; elsewhere no
framing at all), and secrets only from the environment."""
from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from annotation.models import Provider, TaskKind
from annotation.services.access import inhouse_link_create
from testing.factories import make_hit, make_stage, make_worker
from tests.support.paths import REPO_ROOT
from tests.support.tasks import make_task

pytestmark = pytest.mark.reliability

PRODUCTION_SETTINGS = [
    "DEBUG", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE", "SESSION_COOKIE_HTTPONLY", "CSRF_COOKIE_SECURE",
    "SECURE_CONTENT_TYPE_NOSNIFF", "SECURE_REFERRER_POLICY", "X_FRAME_OPTIONS", "MIDDLEWARE",
]


def _clean_env() -> dict[str, str]:
    # Browser tests set DJANGO_ALLOW_ASYNC_UNSAFE in this process; a deployment never does.
    return {k: v for k, v in os.environ.items()
            if k not in ("DJANGO_SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")}


def _production(code: str, *, secret: str | None) -> subprocess.CompletedProcess:
    env = _clean_env()
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.production"
    if secret is not None:
        env["DJANGO_SECRET_KEY"] = secret
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_check_deploy_is_clean_for_production_settings():
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        env={**_clean_env(), "DJANGO_SETTINGS_MODULE": "config.settings.production",
             "DJANGO_SECRET_KEY": secrets.token_urlsafe(60)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_settings_are_strict():
    result = _production(
        "import json, django; from django.conf import settings; django.setup(); "
        f"print(json.dumps({{n: getattr(settings, n) for n in {PRODUCTION_SETTINGS!r}}}))",
        secret=secrets.token_urlsafe(60))
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values["DEBUG"] is False
    assert values["SECURE_HSTS_SECONDS"] >= 31536000 and values["SECURE_HSTS_INCLUDE_SUBDOMAINS"]
    assert values["SECURE_SSL_REDIRECT"]
    assert values["SESSION_COOKIE_SECURE"] and values["CSRF_COOKIE_SECURE"]
    assert values["SESSION_COOKIE_HTTPONLY"] and values["SECURE_CONTENT_TYPE_NOSNIFF"]
    assert values["SECURE_REFERRER_POLICY"] == "same-origin"
    assert values["X_FRAME_OPTIONS"] == "DENY"
    assert "config.security.DefaultCSPMiddleware" in values["MIDDLEWARE"]


@pytest.mark.parametrize("secret, problem", [
    (None, "is not set or empty"),
    ("", "is not set or empty"),
    ("   ", "is not set or empty"),
    ("dev-only-insecure-key-change-me", "is the development key"),
    ("django-insecure-" + "x7" * 30, "is the development key"),
    ("s3cr3t-but-short", "is 16 characters long; at least 50 are needed"),
    ("ab" * 40, "uses fewer than 5 different characters"),
])
def test_production_refuses_to_start_without_a_strong_secret_key(secret, problem):
    result = _production("import django; django.setup()", secret=secret)
    assert result.returncode != 0
    assert f"DJANGO_SECRET_KEY {problem}" in result.stderr
    assert "secrets.token_urlsafe" in result.stderr  # says how to make one


# Literal secrets in code: AWS keys, private keys, or a secret-looking name assigned a string.
SECRET_PATTERNS = [
    re.compile(r"AKIA[0-9A-Z]{16}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    # (a value that is itself an upper-case name, such as a header name, is not a secret)
    re.compile(r"""(?i)\b\w*(secret|password|passwd|api_key|token|access_key)\w*\s*=\s*"""
               r"""["'](?!(?-i:[A-Z0-9_]+)["'])[^"']{6,}["']"""),
]
# The one allowed literal: base.py's development key, which production.py replaces with the
# environment's (and `check --deploy` would flag, see above).
ALLOWED = {'DEV_SECRET_KEY = "dev-only-insecure-key-change-me"  # development and tests only'}


def test_no_literal_secrets_in_settings_or_application_code():
    found = []
    for folder in ("config", "annotation", "metrics_app", "worker"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if line.strip() in ALLOWED or "os.environ" in line:
                    continue
                if any(pattern.search(line) for pattern in SECRET_PATTERNS):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert not found, "literal secrets (read them from the environment):\n" + "\n".join(found)


def _production_headers():
    return override_settings(
        MIDDLEWARE=[*settings.MIDDLEWARE, "config.security.DefaultCSPMiddleware"],
        X_FRAME_OPTIONS="DENY",
    )


@pytest.mark.django_db
def test_every_page_has_a_csp_and_only_task_pages_may_be_framed_by_mturk(client, researcher):
    project, stage, items = make_task(TaskKind.LIKERT, owner=researcher)
    _link, task_path = inhouse_link_create(worker=make_worker(), project=project)
    with _production_headers():
        for path in ("/admin/login/", "/api/schema/"):
            response = client.get(path)
            assert response["X-Frame-Options"] == "DENY", path
            assert "frame-ancestors 'none'" in response["Content-Security-Policy"], path
            assert "script-src 'self'" in response["Content-Security-Policy"], path
        client.force_login(researcher)
        dashboard = client.get(f"/metrics/{project.slug}/dashboard/")
        assert dashboard.status_code == 200
        assert "frame-ancestors 'none'" in dashboard["Content-Security-Policy"]
        client.logout()
        task = client.get(task_path)
        assert task.status_code == 200
        # In-house task pages are never framed; MTurk's are, by its worker sites only.
        assert task["X-Frame-Options"] == "DENY"
        csp = task["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in csp, csp
        mturk_stage = make_stage(project, provider=Provider.MTURK, status=stage.status)
        make_hit(mturk_stage, items=items, external_id="HITSEC")
        mturk = client.get(reverse("annotation:task-mturk", kwargs={"stage_id": mturk_stage.pk})
                           + "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=HITSEC")
        assert mturk.status_code == 200
        assert "X-Frame-Options" not in mturk
        assert re.search(r"frame-ancestors https://worker\.mturk\.com "
                         r"https://workersandbox\.mturk\.com(;|$)", mturk["Content-Security-Policy"])
        assert "'unsafe-inline'" not in csp
