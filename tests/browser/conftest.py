"""Playwright (sync API) driving Debian's chromium against pytest-django's live server.

One browser per test session; each test gets a fresh context (no shared storage). A missing
chromium fails the run under CI=true and skips with a reason elsewhere. The live server needs a
file-based test database on SQLite (QAJ_TEST_DB_NAME, set by scripts/test.sh).
"""
from __future__ import annotations

import os
import shutil

import pytest

from tests.support.paths import IN_CI

# Playwright's sync API runs an event loop in this thread; Django would otherwise refuse ORM
# calls made by the test itself (fixtures, assertions) while it is running.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run",
]
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 360, "height": 740}


@pytest.fixture(scope="session")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        message = "Debian's chromium is not installed (apt-get install chromium)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
    except Exception:
        playwright.stop()
        raise
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=LAPTOP)
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def phone_page(browser):
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    context.set_default_timeout(20_000)
    page = context.new_page()
    yield page
    context.close()


