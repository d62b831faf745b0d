"""A careless or hostile annotator in a real browser: what the page counts and refuses is what
the server counts and refuses, and the page tells them before anything is lost."""
from __future__ import annotations

import pytest

from annotation.models import Item, Judgment, TaskKind
from annotation.services.access import inhouse_link_create
from testing.factories import make_worker
from tests.support.tasks import make_task

pytestmark = [pytest.mark.browser, pytest.mark.reliability, pytest.mark.django_db(transaction=True)]


def expect_text(page, selector: str, text: str) -> None:
    page.wait_for_function(
        "([s, t]) => document.querySelector(s) && document.querySelector(s).textContent.includes(t)",
        arg=[selector, text],
    )


def test_ab_justification_counter_counts_what_the_server_counts(live_server, page):
    """Twelve emoji read "24 / 20 — enough" (UTF-16 units) and the submit was refused with
    "12 so far"; twenty-five zero-width spaces read "enough" and were stored as a justification;
    answer A pasted as the justification was stored."""
    project, stage, items = make_task(TaskKind.AB, n_items=1, justification_min_length=20)
    item = items[0]
    content = {**item.content,
               "answer_a": {"text": "Sunlight is scattered by the air, blue light the most.",
                            "kind": "human"},
               "answer_b": {"text": "The sky is blue because it reflects the sea.",
                            "kind": "model"}}
    Item.objects.filter(pk=item.pk).update(content=content)
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    page.goto(live_server.url + path)
    box = f"#justification-{item.pk}"
    page.check(f"#choice-{item.pk}-A")
    page.check(f"#difficult-{item.pk}-no")
    page.fill(box, "\U0001f44d" * 12)
    expect_text(page, f"#count-{item.pk}", "12 / 20 characters — 8 more needed")
    page.fill(box, "\u200b" * 25)
    expect_text(page, f"#count-{item.pk}", "0 / 20 characters")
    expect_text(page, "#progress", "0 of 1 answered")
    page.click("#submit-button")
    expect_text(page, f"#err-{item.pk}", "at least 20 characters (0 so far)")
    # A/B labels are shuffled: paste whichever answer the page shows first.
    pasted = page.locator(".answer-text").first.inner_text().strip()
    page.fill(box, pasted)
    page.click("#submit-button")
    expect_text(page, f"#err-{item.pk}", "copy of one of the answers")
    assert Judgment.objects.count() == 0
    page.fill(box, "A names the physical cause \U0001f44d; B is simply wrong.")
    page.click("#submit-button")
    page.wait_for_url("**/task/complete/**")
    assert Judgment.objects.get().justification.endswith("B is simply wrong.")
