"""A researcher imports a file from the admin in a real browser: upload, read the preview,
confirm; photographed at laptop and phone widths (test-artifacts/screenshots/)."""
from __future__ import annotations

import copy
import json

import pytest

from annotation.models import Item, Judgment, TaskKind
from testing.factories import make_project
from tests.support.browser import screenshot
from tests.support.imports import LIKERT_ROW

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long enough password 4"


def _login(page, live_server, username):
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def test_upload_preview_and_confirm(live_server, page, phone_page, tmp_path, settings):
    from django.contrib.auth import get_user_model

    settings.VAR_DIR = tmp_path
    owner = get_user_model().objects.create_user("importer", password=PASSWORD, is_staff=True)
    project = make_project(TaskKind.LIKERT, owner=owner, slug="upload", title="Upload study")
    rows = []
    for n in range(4):
        row = copy.deepcopy(LIKERT_ROW)
        row["external_id"] = f"q{n}"
        rows.append(row)
    source = tmp_path / "dev.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    _login(page, live_server, "importer")
    page.goto(f"{live_server.url}/admin/annotation/project/{project.pk}/change/")
    page.click("text=Import items")
    page.select_option("#id_format", "jsonl")
    page.set_input_files("#id_file", str(source))
    page.click("input[name=preview]")
    preview = page.locator("#import-preview")
    preview.wait_for()
    assert "items: 4 created" in preview.inner_text()
    assert Item.objects.count() == 0
    screenshot(page, "import-preview-1280", top=True)

    _login(phone_page, live_server, "importer")
    phone_page.goto(f"{live_server.url}/admin/annotation/project/{project.pk}/import/")
    phone_page.set_input_files("#id_file", str(source))
    phone_page.click("input[name=preview]")
    phone_page.locator("#import-preview").wait_for()
    screenshot(phone_page, "import-preview-360", top=True)
    # The page fits the phone: nothing wider than the viewport but the scrollable preview.
    assert phone_page.evaluate("document.documentElement.scrollWidth") <= 360 + 1

    page.click("input[name=confirm]")
    page.wait_for_selector("text=Imported into 'upload'")
    assert Item.objects.filter(project=project).count() == 4
    assert Judgment.objects.count() == 8
    assert not page.js_errors
