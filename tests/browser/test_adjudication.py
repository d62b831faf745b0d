"""A researcher logs in, opens the adjudication queue from the dashboard, records a label with
a note, and the aggregated export carries it as the item's label."""
from __future__ import annotations

import io
import json

import pytest
from playwright.sync_api import expect

from annotation.models import TaskKind
from annotation.services.exports import export_write
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long enough password 2"


def test_researcher_adjudicates_a_disputed_item_and_the_export_carries_it(live_server, page):
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user("adjudicator", password=PASSWORD,
                                                 is_staff=True)
    project = make_project(TaskKind.AB, owner=owner, slug="adj-browser", title="LFQA check")
    stage = make_stage(project)
    disputed = make_item(project, external_id="q-split")
    agreed = make_item(project, external_id="q-agreed")
    for choice in ("A", "B"):
        make_judgment(item=disputed, stage=stage, worker=make_worker(), choice=choice)
    for _ in range(2):
        make_judgment(item=agreed, stage=stage, worker=make_worker(), choice="A")

    page.goto(f"{live_server.url}/admin/login/?next=/metrics/{project.slug}/dashboard/")
    page.fill("#id_username", "adjudicator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.click("text=items to adjudicate")
    # The click returns once navigation starts; counting must wait for the queue to render.
    expect(page.locator("section.adjudication")).to_have_count(1)     # only the split item
    section = page.locator(f"#item-{disputed.pk}")
    assert "q-split" in section.inner_text() and "disagreement 1.00" in section.inner_text()
    section.get_by_label("B", exact=True).check()
    section.locator("textarea[name=note]").fill("B cites the source; A does not")
    section.get_by_role("button", name="Record label").click()
    page.wait_for_selector("text=q-split is now labelled B")
    expect(page.locator("section.adjudication")).to_have_count(0)
    assert not page.js_errors

    out = io.StringIO()
    export_write(project=project, out=out, fmt="jsonl", aggregate=True)
    rows = {row["external_id"]: row for row in map(json.loads, out.getvalue().splitlines())}
    assert rows["q-split"]["label"] == "B" and rows["q-split"]["majority_tie"] is True
    assert rows["q-split"]["adjudication_note"] == "B cites the source; A does not"
    assert rows["q-agreed"]["label"] == "A" and rows["q-agreed"]["adjudicated"] is None
