"""Security at every door (audit of 2026-11-29): what the admin and the API refuse, the
researcher pages refuse too."""
from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys

import pytest

from annotation.models import Adjudication, TaskKind
from annotation.services.assignments import assignment_start, assignment_submit
from metrics_app.models import ScoringJob
from testing.factories import make_user, make_worker
from tests.support.paths import REPO_ROOT
from tests.support.tasks import make_task

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def test_a_researcher_whose_staff_flag_was_removed_reaches_no_project_page(client):
    """The admin and the API refuse a non-staff account; the session of a researcher demoted
    while signed in stays valid, and the pages that only asked for a login (dashboard, cockpit,
    metrics, judges, adjudication) still showed their projects and stored adjudications and
    scoring jobs for them."""
    demoted = make_user("demoted")
    project, _stage, items = make_task(TaskKind.LIKERT, owner=demoted)
    client.force_login(demoted)
    assert client.get(f"/metrics/{project.slug}/dashboard/").status_code == 200
    demoted.is_staff = False
    demoted.save(update_fields=["is_staff"])

    for page in ("dashboard", "cockpit", "metrics", "judges", "adjudicate"):
        assert client.get(f"/metrics/{project.slug}/{page}/").status_code == 404, page
    assert project.title not in client.get("/").content.decode()
    response = client.post(f"/metrics/{project.slug}/adjudicate/record/",
                           {"item": items[0].pk, "label": "3", "note": "mine"})
    assert response.status_code == 404
    response = client.post(f"/metrics/{project.slug}/metrics/compute/", {"metric": "f1"})
    assert response.status_code == 404
    assert not Adjudication.objects.exists()
    assert not ScoringJob.objects.exists()


def test_a_dollar_sign_in_a_label_is_drawn_as_text_not_a_formula(client):
    """Chart labels are data: a dataset named with "$...$" was read as mathtext, typeset as a
    formula or, when it did not parse, a ValueError and a 500 for the whole dashboard."""
    researcher = make_user("dollars")
    project, stage, items = make_task(TaskKind.LIKERT, owner=researcher, n_items=3)
    name = r"cost $\frac{$ and $x^2$"
    for item in items:
        item.dataset = name
        item.save(update_fields=["dataset"])
    for n in range(3):
        assignment = assignment_start(stage=stage, worker=make_worker(external_id=f"w{n}"))
        assignment_submit(assignment=assignment, answers=[
            {"item": item.pk, "score": 1 + (n + item.pk) % 5}
            for item in assignment.items.all()])
    client.force_login(researcher)
    response = client.get(f"/metrics/{project.slug}/dashboard/")
    assert response.status_code == 200
    charts = response.context["charts"]
    assert charts["likert"] and name in charts["likert"]


def test_a_model_version_names_only_the_projects_the_viewer_sees_at_every_door(client):
    """The card page named only the projects a researcher sees, but its log ("created:
    projects: a, b") and the Model versions admin (the card, the projects field, the data
    snapshot, the log inline, the search over project slugs) named every one."""
    from django.urls import reverse

    from metrics_app.services.lerc import model_version_create

    owner, colleague = make_user("owner"), make_user("colleague")
    hidden, _s, _i = make_task(TaskKind.LIKERT, owner=owner, slug="owners-secret-study",
                               title="Owner only")
    shared, _s, _i = make_task(TaskKind.LIKERT, owner=owner, slug="shared-study")
    shared.shared_with.add(colleague)
    version = model_version_create(projects=[hidden, shared], user=owner)
    version.data_snapshot = {**version.data_snapshot, "projects": {
        hidden.slug: {"id": hidden.pk, "judgments": 7}, shared.slug: {"id": shared.pk}}}
    version.save(update_fields=["data_snapshot"])

    client.force_login(colleague)
    pages = [reverse("metrics:model-card", args=[version.pk]),
             reverse("admin:metrics_app_modelversion_change", args=[version.pk]),
             reverse("admin:metrics_app_modelversion_changelist")]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert hidden.slug not in html and "Owner only" not in html, url
    found = client.get(pages[2], {"q": hidden.slug}).context["cl"].result_count
    assert found == 0  # the search does not confirm a slug the colleague cannot see
    assert client.get(pages[2], {"q": "shared-st"}).context["cl"].result_count == 1
    assert "shared-study" in client.get(pages[0]).content.decode()

    client.force_login(owner)
    for url in pages[:2]:
        assert hidden.slug in client.get(url).content.decode(), url


def _dev_settings(debug: str, *, secret: str | None, show: str = "settings.DEBUG",
                  **environ: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DJANGO_SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE",
                        "DJANGO_SECURE_COOKIES")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.dev", DJANGO_DEBUG=debug, **environ)
    if secret is not None:
        env["DJANGO_SECRET_KEY"] = secret
    return subprocess.run(
        [sys.executable, "-c", "import django; from django.conf import settings; "
                               f"django.setup(); print({show})"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("debug, secret, starts", [
    ("1", None, True),  # development: the embedded key is fine
    ("0", None, False),
    ("0", "dev-only-insecure-key-change-me", False),
    ("0", "short", False),
    ("0", secrets.token_urlsafe(60), True),
])
def test_the_development_settings_with_debug_off_need_a_strong_secret_key(debug, secret,
                                                                           starts):
    """manage.py, wsgi.py and the Celery worker default to config.settings.dev; with
    DJANGO_DEBUG=0 (a deployment) they ran on the development key, public in this repository,
    with which anyone signs in-house links and page tokens (`{"a": <assignment id>, "w": <worker
    id>}`, sequential ids) for any assignment."""
    result = _dev_settings(debug, secret=secret)
    assert (result.returncode == 0) is starts, result.stderr[-2000:]
    if not starts:
        assert "DJANGO_SECRET_KEY" in result.stderr and "DEBUG is off" in result.stderr
        assert "secrets.token_urlsafe" in result.stderr


COOKIES_AND_CSP = ("(settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE, "
                   "settings.SESSION_COOKIE_HTTPONLY, "
                   "'config.security.DefaultCSPMiddleware' in settings.MIDDLEWARE)")


@pytest.mark.parametrize("debug, environ, expected", [
    ("1", {}, "(False, False, True, False)"),  # development on http://127.0.0.1
    ("0", {}, "(True, True, True, True)"),  # a deployment: production's cookies and CSP
    ("0", {"DJANGO_SECURE_COOKIES": "0"}, "(False, False, True, True)"),  # said: plain HTTP
])
def test_the_development_settings_with_debug_off_send_cookies_over_https_only(debug, environ,
                                                                               expected):
    """With DEBUG off the development settings are a deployment: its session cookie (a
    researcher's sign-in) and CSRF cookie were sent over plain HTTP too, and its pages had no
    CSP, where production sets Secure cookies and the CSP."""
    result = _dev_settings(debug, secret=secrets.token_urlsafe(60), show=COOKIES_AND_CSP,
                           **environ)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == expected


INLINE_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.I)
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>",
                           re.I)


def test_no_template_carries_script_the_production_csp_would_refuse():
    """Production's CSP (script-src 'self') runs no inline handler (onclick=…) and no inline
    script: what one did silently does not happen there (the review page's "Block worker"
    asked nothing, tests/browser/test_production_csp.py)."""
    found = []
    for path in (REPO_ROOT / "templates").rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        for pattern in (INLINE_HANDLER, INLINE_SCRIPT):
            found += [f"{path.relative_to(REPO_ROOT)}: {m.group(0)[:80]}"
                      for m in pattern.finditer(text)]
    assert not found, "\n".join(found)
