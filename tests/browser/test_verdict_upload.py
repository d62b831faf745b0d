"""A researcher uploads a judge's verdicts on the judges page in a real browser: a broken file
is refused with its lines named and nothing stored; the fixed file is imported and the judge
appears against the humans (photographed, test-artifacts/screenshots/)."""
from __future__ import annotations

import json

import pytest

from annotation.models import TaskKind
from metrics_app.models import JudgeVerdict
from testing.factories import make_item, make_judgment, make_project, make_stage
from tests.support.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long enough password 4"


def test_upload_verdicts_and_see_the_judge_against_the_humans(live_server, page, tmp_path):
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user("judging", password=PASSWORD, is_staff=True)
    project = make_project(TaskKind.LIKERT, owner=owner, slug="verdicts", title="Verdict study")
    stage = make_stage(project)
    for n in range(6):
        make_judgment(item=make_item(project, external_id=f"q{n}"), stage=stage,
                      score=5 if n % 2 == 0 else 1)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"item_id": "q0", "verdict": "maybe"}) + "\n"
                      + json.dumps({"item_id": "q9", "verdict": "correct"}) + "\n",
                      encoding="utf-8")
    good = tmp_path / "gpt4.jsonl"
    good.write_text("".join(json.dumps({"item_id": f"q{n}", "probability": 0.9 if n % 2 == 0
                                        else 0.2, "reasoning": f"because {n}"}) + "\n"
                            for n in range(6)), encoding="utf-8")

    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "judging")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.goto(f"{live_server.url}/metrics/{project.slug}/judges/")
    page.click("text=Import a judge's verdicts from a file")
    page.set_input_files("#id_file", str(broken))
    page.fill("#id_judge", "gpt4-paper")
    page.fill("#id_version", "1")
    page.click("text=Import verdicts")
    error = page.locator("#verdict-import-error")
    error.wait_for()
    assert "line 1: verdict 'maybe' is not one of correct, incorrect" in error.inner_text()
    assert "line 2: item_id 'q9' is not an item of verdicts" in error.inner_text()
    assert JudgeVerdict.objects.count() == 0
    assert page.input_value("#id_judge") == "gpt4-paper"  # what was typed stays
    screenshot(page, "judges-verdict-refused-1280", top=True)

    page.set_input_files("#id_file", str(good))
    page.click("text=Import verdicts")
    page.wait_for_selector("text=gpt4-paper@1: 6 verdicts imported on verdicts")
    row = page.locator("table.jt tbody tr", has_text="gpt4-paper@1")
    assert row.count() == 1 and "imported" in row.inner_text()
    assert JudgeVerdict.objects.count() == 6
    # Its reliability plot (it gives probabilities) is drawn: the live server answers it
    # before the test ends.
    plot = page.locator("img[alt='reliability plot of gpt4-paper@1']")
    plot.wait_for()
    page.wait_for_load_state("networkidle")
    assert plot.evaluate("img => img.complete && img.naturalWidth > 0")
    screenshot(page, "judges-verdict-upload-1280", top=True)
    assert not page.js_errors
