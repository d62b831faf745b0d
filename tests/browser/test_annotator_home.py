"""An in-house annotator's one link for the whole project, in a real browser: the home page
lists their stages, Start opens the task, and the page fits a phone (screenshots at 1,280 and
360 px in test-artifacts/screenshots/)."""
from __future__ import annotations

import pytest

from annotation.models import StageStatus, TaskKind
from annotation.services.access import inhouse_home_path, inhouse_link_create
from testing.factories import make_stage, make_worker
from tests.support.browser import screenshot
from tests.support.tasks import make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_home_page_lists_stages_and_starts_one(live_server, page, phone_page):
    project, trial, _ = make_task(TaskKind.LIKERT, title="Home study")
    trial.name = "trial"
    trial.save(update_fields=["name"])
    make_stage(project, name="full collection", status=StageStatus.COLLECTING, order=2)
    link, _ = inhouse_link_create(worker=make_worker(display_name="Dana"), project=project)
    url = f"{live_server.url}{inhouse_home_path(link=link)}"

    page.goto(url)
    stages = page.locator("#home-stages")
    stages.wait_for()
    assert "trial" in stages.inner_text() and "full collection" in stages.inner_text()
    screenshot(page, "annotator-home-1280", top=True)

    phone_page.goto(url)
    phone_page.locator("#home-stages").wait_for()
    screenshot(phone_page, "annotator-home-360", top=True)
    assert phone_page.evaluate("document.documentElement.scrollWidth") <= 360 + 1

    page.locator("#home-stages tr", has_text="trial").get_by_role("link", name="Start").click()
    page.wait_for_selector("text=0 of 3 answered")
    page.go_back()
    page.reload()
    assert page.locator("#home-stages tr", has_text="trial").get_by_role(
        "link", name="Continue").count() == 1
    assert "In progress" in page.inner_text("#home-history")
    phone_page.reload()
    phone_page.locator("#home-history").wait_for()
    assert phone_page.evaluate("document.documentElement.scrollWidth") <= 360 + 1
