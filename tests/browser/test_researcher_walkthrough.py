"""A researcher's first look at a running study, in a real browser: the landing page lists
their project, the cockpit shows the stage and what waits for review, the dashboard shows
which system is better with its forest plot, and the review page approves an assignment."""
from __future__ import annotations

import numpy as np
import pytest

from annotation.models import AssignmentStatus, StageKind, TaskKind
from metrics_app.models import MetricScore
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long enough password 3"


def _study(owner):
    """Two systems' answers, LERC scores for all, two workers' submitted assignments over the
    first 30 items of each system."""
    project = make_project(TaskKind.LIKERT, owner=owner, slug="walk", title="Walkthrough study")
    stage = make_stage(project, kind=StageKind.TRIAL, name="trial")
    rng = np.random.default_rng(3)
    items = []
    for system, accuracy in (("strong", 0.9), ("weak", 0.5)):
        for n in range(120):
            item = make_item(project, source=system, external_id=f"{system}-{n}")
            correct = bool(rng.random() < accuracy)
            MetricScore.objects.create(item=item, metric="lerc_prob", version="1",
                                       value=0.85 if correct else 0.2)
            if n < 30:
                items.append((item, correct))
    for name in ("w-one", "w-two"):
        worker = make_worker(external_id=name)
        assignment = make_assignment(stage, worker=worker, items=[i for i, _ in items],
                                     status=AssignmentStatus.SUBMITTED)
        for item, correct in items:
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                          score=5 if correct else 1, time_spent_ms=4000)
    return project


def test_landing_cockpit_dashboard_and_review(live_server, page):
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user("walker", password=PASSWORD, is_staff=True,
                                                 is_superuser=True)
    project = _study(owner)
    page.goto(f"{live_server.url}/admin/login/?next=/")
    page.fill("#id_username", "walker")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    assert "Walkthrough study" in page.inner_text("body")

    page.click("text=study cockpit")
    page.wait_for_selector("text=2 to review")
    assert "trial" in page.inner_text("body")

    page.click("text=agreement dashboard")
    section = page.locator("#estimates")
    section.wait_for()
    text = section.inner_text()
    assert "strong − weak" in text and "told apart" in text
    assert section.locator("svg").count() == 2  # the forest plots
    assert "30 / 120" in text

    page.goto(f"{live_server.url}/metrics/{project.slug}/cockpit/")
    page.click("text=2 to review")
    page.locator("#result_list tbody tr a").first.click()
    page.wait_for_selector("text=this worker's answers beside gold")
    page.get_by_role("button", name="Approve").click()
    page.wait_for_load_state()
    assert "approved" in page.inner_text("body").lower()
    assert project.stages.get().assignments.filter(
        status=AssignmentStatus.APPROVED).count() == 1
    assert not page.js_errors


WIDEST_ELEMENTS = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    const box = el.getBoundingClientRect();
    if (box.right > width + 1 && getComputedStyle(el).position !== 'fixed') {
      let scrolled = false;  // inside a box that scrolls sideways on its own: fine
      for (let p = el.parentElement; p; p = p.parentElement) {
        const overflow = getComputedStyle(p).overflowX;
        if ((overflow === 'auto' || overflow === 'scroll') && p.clientWidth <= width) {
          scrolled = true; break;
        }
      }
      if (!scrolled) wide.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
                               + (el.className && typeof el.className === 'string'
                                  ? '.' + el.className.split(' ')[0] : ''));
    }
  }
  return {scrollWidth: document.documentElement.scrollWidth, width, wide: wide.slice(0, 8)};
}"""


def test_researcher_pages_fit_a_phone_and_the_admin_list_fits_a_laptop(live_server, browser):
    """At 360 px the cockpit was 858 px wide and the dashboard 950 px (the page scrolled
    sideways); at 1,280 px the admin project list cut its columns."""
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user("narrow", password=PASSWORD, is_staff=True,
                                                 is_superuser=True)
    project = _study(owner)
    make_project(TaskKind.AB, owner=owner, slug="demo-lfqa-experts-with-a-long-slug",
                 title="Real data: long-form QA expert preferences")
    for viewport, paths in (({"width": 360, "height": 740}, [f"/metrics/{project.slug}/cockpit/",
                                     f"/metrics/{project.slug}/dashboard/",
                                     f"/metrics/{project.slug}/metrics/"]),
                            ({"width": 1280, "height": 800}, ["/admin/annotation/project/"])):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        page.goto(f"{live_server.url}/admin/login/?next=/")
        page.fill("#id_username", "narrow")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        for path in paths:
            page.goto(live_server.url + path)
            page.wait_for_load_state("networkidle")
            found = page.evaluate(WIDEST_ELEMENTS)
            assert found["scrollWidth"] <= found["width"] + 1, (path, viewport, found)
            if path.startswith("/admin/"):  # every column visible, none behind a scrollbar
                table, box = page.evaluate("""() => [
                    document.querySelector('#result_list').scrollWidth,
                    document.querySelector('#changelist .results').clientWidth]""")
                widths = page.evaluate("""() => [...document.querySelectorAll(
                    '#result_list thead th')].map(th => th.innerText + ':' + th.offsetWidth)""")
                assert table <= box + 1, (table, box, ' '.join(widths))
        context.close()


def test_the_dashboard_stages_table_fits_a_laptop_when_alpha_is_undefined(live_server, page):
    """A first import (one judgment per item) beside draft trial and full stages: the α cells
    read "undefined: no item has two judgments that count yet (…)", a sentence that did not
    wrap, and the dashboard was 1,432 px wide at 1,280 px."""
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user("firstweek", password=PASSWORD,
                                                 is_staff=True)
    project = make_project(TaskKind.LIKERT, owner=owner, slug="first-import")
    imported = make_stage(project, kind=StageKind.IMPORTED, name="imported")
    worker = make_worker(external_id="mocha-crowd")
    for n in range(9):
        make_judgment(item=make_item(project, source=f"sys{n % 3}"), stage=imported,
                      worker=worker, score=1 + n % 5)
    make_stage(project, kind=StageKind.TRIAL, name="Trial", order=2)
    make_stage(project, kind=StageKind.FULL, name="Full", order=3)
    page.goto(f"{live_server.url}/admin/login/?next=/metrics/first-import/dashboard/")
    page.fill("#id_username", "firstweek")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#stages")
    assert "no item has two judgments that count yet" in page.inner_text("#stages")
    found = page.evaluate(WIDEST_ELEMENTS)
    assert found["scrollWidth"] <= found["width"] + 1, found
    assert not page.js_errors
