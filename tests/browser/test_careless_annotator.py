"""A careless or hostile annotator in a real browser: what the page counts and refuses is what
the server counts and refuses, and the page tells them before anything is lost."""
from __future__ import annotations

import pytest

from annotation.models import Assignment, ExperimentMode, Item, Judgment, TaskKind
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
    85 "B"s read "enough" and were stored; answer A pasted as the justification was stored."""
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
    page.fill(box, "\U0001f44d\U0001f600" * 6)
    expect_text(page, f"#count-{item.pk}", "12 / 20 characters — 8 more needed")
    # Padding: a run of one character counts once, as the server counts it.
    page.fill(box, "B" * 85)
    expect_text(page, f"#count-{item.pk}", "1 / 20 characters — 19 more needed")
    page.click("#submit-button")
    expect_text(page, f"#err-{item.pk}", "(1 so far; a character repeated 3 or more times in a "
                                          "row counts once)")
    assert Judgment.objects.count() == 0
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


def test_a_repeated_digit_on_the_submit_button_leaves_the_last_score_alone(live_server, page):
    project, stage, items = make_task(TaskKind.LIKERT, group="p1")
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    page.goto(live_server.url + path)
    for key in "425":
        page.keyboard.press(key)
    assert page.evaluate("document.activeElement.id") == "submit-button"
    page.keyboard.press("1")  # a key pressed twice: it changed the last item to 1, unseen
    last = f'input[name="score-{items[2].pk}"]:checked'
    assert page.eval_on_selector(last, "el => el.value") == "5"
    page.keyboard.press("Enter")
    page.wait_for_url("**/task/complete/**")
    assert [j.score for j in Judgment.objects.order_by("item_id")] == [4.0, 2.0, 5.0]


def test_pilot_page_three_holds_no_copy_of_the_paragraph(live_server, page):
    """'Answer again with the paragraph hidden': the paragraph stayed in the page, only hidden,
    until a reload (which never fetched it again)."""
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.PILOT, n_items=1)
    paragraph = items[0].content["paragraph"]
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    page.goto(live_server.url + path)
    assert paragraph not in page.content()  # page 1: never sent
    page.keyboard.press("a")
    page.click(".confirm")
    page.wait_for_selector(".read-done", state="visible")
    assert paragraph in page.inner_text(".paragraph")  # page 2
    page.click(".read-done")
    expect_text(page, "[data-step-label]", "Page 3 of 3")
    assert paragraph not in page.content()
    page.reload()
    expect_text(page, "[data-step-label]", "Page 3 of 3")
    assert paragraph not in page.content()
    page.keyboard.press("b")
    page.click(".confirm")
    expect_text(page, "[data-step-label]", "Answer saved")
    assert paragraph not in page.content()
    judgment = Judgment.objects.get()
    assert judgment.extra["guess_choice"] and judgment.extra["guess_timing"]["locked_at"]


def test_a_second_tab_submitting_other_answers_is_told_they_were_not_stored(live_server, page):
    """Two tabs of one assignment: the first submit is stored; the second tab's other answers
    were answered as if saved (the completion page said "your answers are saved")."""
    project, stage, items = make_task(TaskKind.LIKERT, group="p1")
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    page.goto(live_server.url + path)
    other = page.context.new_page()
    other.goto(live_server.url + path)
    for key in "425":
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_url("**/task/complete/**")
    for key in "111":
        other.keyboard.press(key)
    other.keyboard.press("Enter")
    expect_text(other, "#form-errors", "already submitted")
    expect_text(other, "#form-errors", "the answers on this page were not stored")
    assert "/task/complete/" not in other.url
    assert [j.score for j in Judgment.objects.order_by("item_id")] == [4.0, 2.0, 5.0]


def test_a_second_tab_shows_the_answer_kept_not_the_one_it_had_selected(live_server, browser):
    """STARC QA open in two tabs: the first confirms the correct answer; the second, still
    showing the item open, selects another option and confirms. The server keeps the first
    answer (one judgment), but the second tab read "Correct!" beside the option it had
    selected, a wrong one. It now shows the kept option checked and says why."""
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=1)
    item = items[0]
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    first, second = context.new_page(), context.new_page()
    for tab in (first, second):
        tab.goto(live_server.url + path)
        tab.wait_for_load_state("networkidle")
    order = item.assignmentitem_set.get().presented_order
    right, wrong = "abcd"[order.index("A")], "abcd"[order.index("B")]
    first.check(f"#opt-{item.pk}-{right}")
    first.click(f"#item-{item.pk} .confirm")
    expect_text(first, f"#item-{item.pk} .feedback", "Correct!")
    second.check(f"#opt-{item.pk}-{wrong}")
    second.click(f"#item-{item.pk} .confirm")
    expect_text(second, f"#item-{item.pk} .feedback", "already answered in another tab")
    assert f"({right}), is the one kept" in second.inner_text(f"#item-{item.pk} .feedback")
    assert second.is_checked(f"#opt-{item.pk}-{right}")
    assert not second.is_checked(f"#opt-{item.pk}-{wrong}")
    # A reload shows the kept answer checked, without the note (nothing else was selected).
    second.reload()
    second.wait_for_load_state("networkidle")
    assert second.is_checked(f"#opt-{item.pk}-{right}")
    assert "another tab" not in second.inner_text(f"#item-{item.pk} .feedback")
    assert Judgment.objects.get().choice == "A"
    context.close()


def test_answers_given_in_two_tabs_of_one_batch_are_all_kept_in_the_draft(live_server, page):
    """One Likert batch open in two tabs, an item answered in each, both closed unsubmitted.
    Each autosave sent its whole page, so the second tab's save carried the first tab's item as
    unanswered: reopened, the batch had lost the first tab's answer."""
    project, stage, items = make_task(TaskKind.LIKERT, group="p1")
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    page.goto(live_server.url + path)
    other = page.context.new_page()
    other.goto(live_server.url + path)
    page.keyboard.press("4")  # the first item, in the first tab
    expect_text(page, "#save-status", "All answers saved")
    other.wait_for_function(f"() => document.querySelector('#score-{items[0].pk}-4').checked")
    other.click(f"label[for=score-{items[1].pk}-2]")  # the second item, in the other tab
    expect_text(other, "#save-status", "All answers saved")
    # An item answered in a tab is never overwritten by the other tab's copy.
    page.click(f"label[for=score-{items[1].pk}-5]")
    expect_text(page, "#save-status", "All answers saved")
    assert other.is_checked(f"#score-{items[1].pk}-2")
    other.click(f"label[for=score-{items[2].pk}-1]")
    expect_text(other, "#save-status", "All answers saved")
    draft = Assignment.objects.get().draft["answers"]
    assert draft[str(items[0].pk)]["score"] == 4 and draft[str(items[2].pk)]["score"] == 1
    page.close()
    other.close()
    reopened = page.context.new_page()
    reopened.goto(live_server.url + path)
    reopened.wait_for_load_state("networkidle")
    assert reopened.is_checked(f"#score-{items[0].pk}-4")
    assert reopened.is_checked(f"#score-{items[2].pk}-1")
