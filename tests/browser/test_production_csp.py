"""Pages under the production CSP (`config/security.py:DEFAULT_CSP`: scripts from our origin
only, no inline script or handler), added here to every response the browser receives, as
production's middleware adds it."""
from __future__ import annotations

import pytest

from annotation.models import TaskKind, WorkerBlock
from annotation.services.assignments import assignment_start, assignment_submit
from config.security import DEFAULT_CSP
from testing.factories import make_worker
from tests.support.tasks import make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long enough password 3"


def _with_production_csp(page) -> list[str]:
    """Every response gets the production CSP; returns the CSP violations the page reports."""
    from playwright.sync_api import Error

    def add_csp(route):
        try:
            response = route.fetch()
            route.fulfill(response=response,
                          headers={**response.headers, "content-security-policy": DEFAULT_CSP})
        except Error:  # the page went on (or closed) while this response was in flight
            pass

    violations: list[str] = []
    page.route("**/*", add_csp)
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)
    return violations


def test_blocking_from_the_review_page_asks_first_under_the_production_csp(live_server, page):
    """The review page's "Block worker" asked "Block this worker in all the projects…?" with an
    inline onclick, which the production CSP refuses to run: the block went through without
    the question."""
    from django.contrib.auth import get_user_model

    researcher = get_user_model().objects.create_user("reviewer", password=PASSWORD,
                                                      is_staff=True)
    project, stage, _items = make_task(TaskKind.LIKERT, owner=researcher)
    worker = make_worker(external_id="w-csp")
    assignment = assignment_start(stage=stage, worker=worker)
    assignment_submit(assignment=assignment, answers=[
        {"item": item.pk, "score": 3} for item in assignment.items.all()])

    violations = _with_production_csp(page)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/annotation/assignment/"
              f"{assignment.pk}/change/")
    page.fill("#id_username", "reviewer")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    block = page.locator("button[name=decision][value=block]")
    block.wait_for()

    asked: list[str] = []

    def dismiss(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    # The question comes from the page's own script: on a loaded machine it may not have run
    # yet when the button appears, so wait for the page to load, then for the question.
    page.wait_for_load_state("load")
    block.click()
    for _ in range(50):
        if asked:
            break
        page.wait_for_timeout(100)
    assert asked and "Block this worker in all the projects" in asked[0], violations
    assert not WorkerBlock.objects.filter(worker=worker).exists()  # dismissed: nothing blocked

    page.once("dialog", lambda dialog: dialog.accept())
    block.click()
    page.wait_for_selector("text=Blocked 1 worker(s)")
    assert WorkerBlock.objects.filter(worker=worker, researcher=researcher).exists()
    assert not [v for v in violations if "script" in v.lower()], violations
    page.unroute_all(behavior="ignoreErrors")
