"""A careless researcher staging a study through the admin, in a real browser (issue #32): no
status field to set a new stage live, an item filter that matches nothing refused with the
values that exist, a release preview before publishing, and a Prolific publish without a token
refused at once with what to do — the stage a draft, the cockpit saying why."""
from __future__ import annotations

import pytest

from annotation.models import ProviderCall, Stage, StageStatus, TaskKind
from testing.factories import make_item, make_project

pytestmark = [pytest.mark.browser, pytest.mark.reliability,
              pytest.mark.django_db(transaction=True)]

PASSWORD = "a long enough password 7"


def test_the_careless_doors_are_refused_with_a_message_that_says_what_to_do(
        live_server, page, settings):
    from django.contrib.auth import get_user_model

    settings.PROLIFIC_API_TOKEN = ""
    settings.PROLIFIC_API_URL = "http://127.0.0.1:9/api/v1/"
    get_user_model().objects.create_user("careless", password=PASSWORD, is_staff=True,
                                         is_superuser=True)
    project = make_project(TaskKind.LIKERT, slug="careless", title="Careless study")
    for n in range(6):
        make_item(project, dataset="nq" if n % 2 else "tq", group_key=f"p{n}")
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "careless")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")

    # Door 1: the add page has no status to set (a new stage is a draft).
    page.goto(f"{live_server.url}/admin/annotation/stage/add/?project={project.pk}"
              "&provider=prolific")
    assert page.locator("select[name=status]").count() == 0
    page.select_option("#id_kind", "pilot")
    page.fill("#id_name", "pilot")
    page.select_option("#id_provider", "prolific")
    # Door 2: a filter that matches nothing.
    page.select_option("#id_item_choice", "filter")
    page.fill("#id_item_dataset", "squad")
    page.click("input[name=_continue]")
    page.wait_for_selector("text=nothing would be released")
    body = page.inner_text("body")
    assert "no data items of the project match dataset='squad'" in body
    assert "This project's dataset values: nq, tq." in body
    assert not Stage.objects.filter(project=project).exists()
    page.fill("#id_item_dataset", "nq")
    page.click("input[name=_continue]")
    page.wait_for_selector("text=was added successfully")
    body = page.inner_text("body")
    assert "3 items (nq: 3)" in body
    stage = Stage.objects.get(project=project, name="pilot")
    assert stage.status == StageStatus.DRAFT

    # Door 3: publishing a Prolific stage without a token.
    page.goto(f"{live_server.url}/admin/annotation/stage/")
    page.check(f"input[name=_selected_action][value='{stage.pk}']")
    page.select_option("select[name=action]", "publish_stages")
    page.click("button[name=index]")
    page.wait_for_selector(".messagelist >> text=not published")
    message = page.inner_text(".messagelist")
    assert "not published" in message and "PROLIFIC_API_TOKEN is not set" in message
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT
    assert not ProviderCall.objects.filter(stage=stage).exists()
    page.goto(f"{live_server.url}/metrics/{project.slug}/cockpit/")
    row = page.inner_text(f"#stage-{stage.pk}")
    assert "PROLIFIC_API_TOKEN is not set" in row
    assert "fix what the problem says, then publish again" in row
    assert "releases 3 items" in row
