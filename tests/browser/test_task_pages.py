"""The task pages in a real browser (Debian's chromium through Playwright), keyboard only.

Each test completes an assignment the way a worker would and checks what was stored. The pages
are also photographed at laptop and phone widths (test-artifacts/screenshots/).
"""
from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.urls import reverse

from annotation.models import Assignment, ExperimentMode, Item, Judgment, Provider, TaskKind
from annotation.services.access import inhouse_link_create
from testing.factories import make_hit, make_worker
from tests.support.browser import screenshot
from tests.support.tasks import make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GOLD_SENTINEL = "GOLD-SENTINEL-b41e"


def task_with_sentinel_gold(kind: str, **kwargs):
    project, stage, items = make_task(kind, **kwargs)
    for item in items:
        Item.objects.filter(pk=item.pk).update(gold={**item.gold, "note": GOLD_SENTINEL})
    return project, stage, items


def open_inhouse(page, live_server, project, **link_kwargs) -> str:
    worker = make_worker(display_name="Test annotator")
    _, path = inhouse_link_create(worker=worker, project=project, **link_kwargs)
    url = live_server.url + path
    page.goto(url)
    assert GOLD_SENTINEL not in page.content()
    return url


def tab_to(page, selector: str, limit: int = 40) -> None:
    """Press Tab until the focused element matches `selector` (keyboard-only navigation)."""
    for _ in range(limit):
        if page.evaluate("(s) => document.activeElement && document.activeElement.matches(s)",
                         selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def finish(page) -> None:
    page.wait_for_url("**/task/complete/**")
    assert "your answers are saved" in page.content()


def phone_shot(phone_page, url: str, name: str) -> None:
    phone_page.goto(url)
    screenshot(phone_page, f"{name}-360")


def test_likert_hit_with_the_keyboard_only(live_server, page, phone_page):
    project, stage, items = task_with_sentinel_gold(TaskKind.LIKERT, group="p1")
    url = open_inhouse(page, live_server, project)
    assert page.locator(".passage").count() == 1  # the shared passage is shown once
    page.keyboard.press("4")  # answers the first item and moves on
    page.keyboard.press("2")
    expect_text(page, "#progress", "2 of 3 answered")
    expect_text(page, "#submit-row .hint", "1 item left to answer")
    assert page.locator(".keys").is_visible()
    screenshot(page, "likert-1280", top=True)
    phone_shot(phone_page, url, "likert")
    # A phone has no keyboard to press 1–5 on: no keyboard hints there.
    assert phone_page.locator(".keys").count() and phone_page.locator(".keys").is_hidden()
    page.keyboard.press("5")
    expect_text(page, "#submit-row .hint", "Everything is answered")
    assert page.evaluate("document.activeElement.id") == "submit-button"
    page.keyboard.press("Enter")
    finish(page)
    judgments = Judgment.objects.order_by("item_id")
    assert [j.score for j in judgments] == [4.0, 2.0, 5.0]
    assert all(j.time_spent_ms is not None and j.client_started_at for j in judgments)


def expect_text(page, selector: str, text: str) -> None:
    page.wait_for_function(
        "([s, t]) => document.querySelector(s) && document.querySelector(s).textContent.includes(t)",
        arg=[selector, text],
    )


def test_ab_with_validation_messages_keyboard_only(live_server, page, phone_page):
    project, stage, items = task_with_sentinel_gold(TaskKind.AB, n_items=2,
                                                    justification_min_length=30)
    url = open_inhouse(page, live_server, project)
    assignment = Assignment.objects.get()
    for n, item in enumerate(items):
        page.keyboard.press("b")
        assert page.evaluate("document.activeElement.value") == "B"
        page.keyboard.press("Tab")  # → "difficult" yes/no
        page.keyboard.press("Space")
        page.keyboard.press("Tab")  # → justification
        page.keyboard.type("Too short." if n == 0 else
                           "Answer B names the physical cause; the other answer is wrong.")
        page.keyboard.press("Tab")  # → first aspect
        page.keyboard.press("Space")
        if n == 0:
            expect_text(page, f"#count-{item.pk}", "more needed")
            screenshot(page, "ab-1280", top=True)
            phone_shot(phone_page, url, "ab")
            tab_to(page, f'#item-{items[1].pk} input[type="radio"]')
    tab_to(page, "#submit-button")
    page.keyboard.press("Enter")
    # Inline message next to the item and a summary linking to it; nothing stored.
    expect_text(page, f"#err-{items[0].pk}", "at least 30 characters (10 so far)")
    assert page.locator("#form-errors").is_visible()
    assert Judgment.objects.count() == 0
    page.focus(f"#justification-{items[0].pk}")
    page.keyboard.type(" B is also easier to follow and cites an example.")
    tab_to(page, "#submit-button")
    page.keyboard.press("Enter")
    finish(page)
    for judgment in Judgment.objects.order_by("item_id"):
        row = assignment.assignmentitem_set.get(item=judgment.item)
        # Shown "B" is stored in item order through the randomized order shown.
        assert judgment.choice == row.presented_order[1]
        assert judgment.presented_order == row.presented_order
        assert judgment.difficult is True and judgment.aspects == ["factuality"]
    assert Judgment.objects.count() == 2


@pytest.mark.parametrize("mode", [ExperimentMode.QA, ExperimentMode.GUESSING,
                                  ExperimentMode.VALIDITY, ExperimentMode.PILOT])
def test_starc_modes_with_the_keyboard_only(live_server, page, phone_page, mode):
    project, stage, items = task_with_sentinel_gold(TaskKind.MC, mode=mode, n_items=2)
    url = open_inhouse(page, live_server, project)
    assignment = Assignment.objects.get()
    if mode in (ExperimentMode.GUESSING, ExperimentMode.PILOT):
        assert items[0].content["paragraph"] not in page.content()
    for n, item in enumerate(items):
        expect_text(page, "#progress", f"{n} of 2 answered")
        assert page.locator(f"#item-{item.pk}").is_visible()  # one question at a time
        box = f"#item-{item.pk}"
        if mode == ExperimentMode.VALIDITY:
            page.keyboard.press("1")  # one correct answer
            page.keyboard.press("c")
            if n == 0:
                screenshot(page, f"mc-{mode}-1280")
                phone_shot(phone_page, url, f"mc-{mode}")
            page.keyboard.press("Enter")  # next question / submit
            continue
        if mode == ExperimentMode.PILOT:
            page.keyboard.press("a")  # page 1: guess
            if n == 0:
                screenshot(page, f"mc-{mode}-1280")
                phone_shot(phone_page, url, f"mc-{mode}")
            page.keyboard.press("Enter")
            page.locator(f"{box} .paragraph").wait_for(state="visible")  # page 2: read
            assert item.content["paragraph"] in page.inner_text(f"{box} .paragraph")
            page.keyboard.press("Enter")
            page.locator(f"{box} .paragraph").wait_for(state="hidden")  # page 3: answer
        page.keyboard.press("c")
        page.keyboard.press("Enter")
        page.locator(f"{box} .feedback").wait_for(state="visible")
        if mode == ExperimentMode.GUESSING:
            assert item.content["paragraph"] in page.inner_text(f"{box} .paragraph")
        if n == 0 and mode != ExperimentMode.PILOT:
            screenshot(page, f"mc-{mode}-1280")
            phone_shot(phone_page, url, f"mc-{mode}")
        page.keyboard.press("Enter")  # next question (or submit on the last)
    finish(page)
    judgments = list(Judgment.objects.order_by("item_id"))
    assert len(judgments) == 2
    for judgment in judgments:
        order = assignment.assignmentitem_set.get(item=judgment.item).presented_order
        expected_role = order[2]  # shown "c"
        if mode == ExperimentMode.VALIDITY:
            assert judgment.choices == [expected_role] and judgment.extra["validity"] == "one"
        else:
            assert judgment.choice == expected_role
            assert judgment.extra["is_correct"] is (expected_role == "A")
        if mode == ExperimentMode.PILOT:
            assert judgment.extra["guess_choice"] == order[0]  # shown "a"
        assert judgment.time_spent_ms is not None


def test_reload_mid_hit_keeps_answers(live_server, page):
    project, stage, items = make_task(TaskKind.AB, n_items=2)
    url = open_inhouse(page, live_server, project)
    page.keyboard.press("a")
    page.focus(f"#justification-{items[0].pk}")
    page.keyboard.type("Half-written justification")
    expect_text(page, "#save-status", "All answers saved")
    # The server copy survives even when this browser's storage is gone.
    page.evaluate("localStorage.clear()")
    page.goto(url)
    assert page.input_value(f"#justification-{items[0].pk}") == "Half-written justification"
    assert page.is_checked(f'#item-{items[0].pk} input[value="A"]')
    assert Assignment.objects.count() == 1


def test_a_hit_accepted_again_brings_back_only_this_browsers_answers(live_server, browser):
    """MTurk gives a worker who returned a HIT and took it again a new assignmentId. The answers
    typed under the first come back in the browser that typed them; a stranger opening the
    worker's id with a made-up assignmentId gets an empty page, not the worker's answers."""
    project, stage, items = make_task(TaskKind.AB, n_items=1, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HITR1", max_assignments=3)
    base = live_server.url + reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk})

    def url(assignment_id: str) -> str:
        return base + "?" + urlencode({"assignmentId": assignment_id, "hitId": "HITR1",
                                       "workerId": "WR1"})

    justification = f"#justification-{items[0].pk}"
    worker = browser.new_context(viewport={"width": 1280, "height": 800})
    page = worker.new_page()
    page.goto(url("ASGR1"))
    page.keyboard.press("a")
    page.focus(justification)
    page.keyboard.type("The first answer names the cause")
    expect_text(page, "#save-status", "All answers saved")
    page.goto(url("ASGR2"))  # returned on MTurk, accepted again
    assert page.input_value(justification) == "The first answer names the cause"
    assert page.is_checked(f'#item-{items[0].pk} input[value="A"]')
    worker.close()

    stranger = browser.new_context(viewport={"width": 1280, "height": 800})
    page = stranger.new_page()
    page.goto(url("ASGR3"))
    assert page.input_value(justification) == ""
    assert "The first answer names the cause" not in page.content()
    stranger.close()


def test_mturk_preview_then_hit_then_second_visit_shows_completion(live_server, page,
                                                                   settings):
    settings.QAJ_MTURK_SUBMIT_HOSTS = [live_server.url]
    project, stage, items = task_with_sentinel_gold(TaskKind.LIKERT, group="p1",
                                                    provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HITB1")
    base = live_server.url + reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk})
    page.goto(base + "?" + urlencode({"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE",
                                      "hitId": "HITB1"}))
    assert "Accept the HIT to begin" in page.content()
    assert page.locator(".likert-item").count() == 1
    assert page.is_disabled(".likert-item input >> nth=0")
    screenshot(page, "mturk-preview-1280")
    assert not Assignment.objects.exists()

    posted: list[str] = []

    def external_submit(route):
        posted.append(route.request.post_data or "")
        route.fulfill(status=200, body="MTurk got it")

    page.route("**/mturk/externalSubmit", external_submit)
    url = base + "?" + urlencode({"assignmentId": "ASGB1", "hitId": "HITB1",
                                  "workerId": "WB1", "turkSubmitTo": live_server.url})
    page.goto(url)
    assert GOLD_SENTINEL not in page.content()
    for key in "345":
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_url("**/mturk/externalSubmit")
    assert "assignmentId=ASGB1" in posted[0]
    assert Judgment.objects.count() == 3

    page.goto(url)  # the worker comes back: completion again, nothing new stored
    page.wait_for_url("**/mturk/externalSubmit")
    assert len(posted) == 2 and Judgment.objects.count() == 3

    other = base + "?" + urlencode({"assignmentId": "ASGB1", "hitId": "HITB1",
                                    "workerId": "INTRUDER", "turkSubmitTo": live_server.url})
    response = page.goto(other)
    assert response.status == 403
    assert "belongs to another worker" in page.content()


A11Y_CHECK = """() => {
  const problems = [];
  for (const el of document.querySelectorAll('input, textarea, select')) {
    if (el.type === 'hidden') continue;
    if (!el.labels || el.labels.length === 0) problems.push('unlabelled ' + (el.id || el.name));
  }
  const ids = [...document.querySelectorAll('[id]')].map((e) => e.id);
  const dupes = ids.filter((id, i) => ids.indexOf(id) !== i);
  if (dupes.length) problems.push('duplicate ids ' + dupes.join(','));
  for (const el of document.querySelectorAll('[aria-describedby]')) {
    for (const id of el.getAttribute('aria-describedby').split(' ')) {
      if (!document.getElementById(id)) problems.push('dangling aria-describedby ' + id);
    }
  }
  // Named regions (landmarks) tell themselves apart: an "Answer A" region for every A/B
  // question made a screen reader's landmark list "Answer A, Answer B, Answer A, …".
  const regions = [...document.querySelectorAll('section[aria-labelledby], section[aria-label]')]
    .map((el) => el.getAttribute('aria-label') || el.getAttribute('aria-labelledby').split(' ')
      .map((id) => (document.getElementById(id) || {}).textContent || '').join(' ').trim());
  const sameName = regions.filter((name, i) => regions.indexOf(name) !== i);
  if (sameName.length) problems.push('regions named alike ' + sameName.join(','));
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    problems.push('horizontal overflow ' + document.documentElement.scrollWidth);
  }
  return problems;
}"""

CONTRAST_CHECK = """() => {
  // WCAG 2 contrast of every visible text against its nearest opaque background (AA: 4.5).
  const parse = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = parse(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) return c;
    }
    return [255, 255, 255];
  };
  const worst = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || el.closest('[hidden], [disabled], script')) continue;
    if (el.offsetParent === null && getComputedStyle(el).position !== 'fixed') continue;
    const fg = parse(getComputedStyle(el).color), bg = background(el);
    const [a, b] = [lum(fg) + 0.05, lum(bg) + 0.05];
    const ratio = Math.max(a, b) / Math.min(a, b);
    if (ratio < 4.5) worst.push(`${node.textContent.trim().slice(0, 30)}: ${ratio.toFixed(2)}`);
  }
  return worst;
}"""

FOCUS_OUTLINE = """() => {
  const el = document.activeElement;
  const target = el.closest('label') && el.matches('input') ? el : el;
  const style = getComputedStyle(target);
  return style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2;
}"""


@pytest.mark.parametrize("kind,mode", [(TaskKind.LIKERT, ""), (TaskKind.AB, ""),
                                       (TaskKind.MC, ExperimentMode.VALIDITY),
                                       (TaskKind.MC, ExperimentMode.PILOT)])
def test_labels_focus_and_phone_width(live_server, browser, kind, mode):
    project, stage, items = make_task(kind, mode=mode, aspect_preferences=["coherence"]
                                      if kind == TaskKind.AB else [])
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    for viewport in ({"width": 1280, "height": 800}, {"width": 360, "height": 740}):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        page.goto(live_server.url + path)
        assert page.evaluate(A11Y_CHECK) == []
        assert page.evaluate(CONTRAST_CHECK) == []
        page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        assert page.evaluate(FOCUS_OUTLINE), "keyboard focus must be visible"
        context.close()


@pytest.mark.reliability
def test_dropped_connection_keeps_answers_and_saves_when_back(live_server, browser):
    project, stage, items = make_task(TaskKind.LIKERT, group="p1")
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(live_server.url + path)
    context.set_offline(True)
    page.keyboard.press("3")
    expect_text(page, "#save-status", "Connection problem")
    context.set_offline(False)
    expect_text(page, "#save-status", "All answers saved")  # the retry went through
    assignment = Assignment.objects.get()
    assert assignment.draft["answers"][str(items[0].pk)]["score"] == 3
    page.goto(live_server.url + path)
    assert page.is_checked(f"#score-{items[0].pk}-3")
    context.close()


def test_pilot_reload_after_the_guess_resumes_on_the_reading_page(live_server, page):
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.PILOT, n_items=1)
    url = open_inhouse(page, live_server, project)
    page.keyboard.press("d")
    page.keyboard.press("Enter")
    box = f"#item-{items[0].pk}"
    page.locator(f"{box} .paragraph").wait_for(state="visible")
    page.goto(url)
    # The locked guess cannot be redone: the page opens on the reading page again.
    page.locator(f"{box} .paragraph").wait_for(state="visible")
    expect_text(page, f"{box} .paragraph", items[0].content["paragraph"])
    assert not page.locator(f"{box} .question-block").is_visible()
    page.focus(f"{box} .read-done")
    page.keyboard.press("Enter")
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    page.locator(f"{box} .feedback").wait_for(state="visible")
    page.keyboard.press("Enter")
    finish(page)
    judgment = Judgment.objects.get()
    order = Assignment.objects.get().assignmentitem_set.get().presented_order
    assert judgment.extra["guess_choice"] == order[3] and judgment.choice == order[1]


def test_prolific_participant_is_sent_back_with_the_completion_code(live_server, page,
                                                                     settings):
    settings.PROLIFIC_COMPLETION_URL = live_server.url + "/prolific-complete"
    project, stage, items = make_task(TaskKind.LIKERT, group="p1", provider=Provider.PROLIFIC)
    stage.settings = {"prolific_study_id": "STUDYB", "prolific_completion_code": "CODEB7"}
    stage.save(update_fields=["settings"])
    landed: list[str] = []
    page.route("**/prolific-complete*",
               lambda route: (landed.append(route.request.url),
                              route.fulfill(status=200, body="back on Prolific")))
    page.goto(live_server.url + reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
              + "?" + urlencode({"PROLIFIC_PID": "PB1", "STUDY_ID": "STUDYB",
                                 "SESSION_ID": "SB1"}))
    for key in "123":
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_url("**/prolific-complete*")
    assert landed and landed[0].endswith("?cc=CODEB7")
    assert Assignment.objects.get(external_id="SB1").completion_code == "CODEB7"
    assert [j.score for j in Judgment.objects.order_by("item_id")] == [1.0, 2.0, 3.0]


def test_visible_page_sends_a_heartbeat_without_any_input(live_server, page):
    """A worker reading a long passage changes no input; the page still keeps the assignment
    alive (page.clock fast-forwards the page's timers, not the server's clock)."""
    import time

    project, stage, items = make_task(TaskKind.LIKERT, group="p1")
    page.clock.install()
    open_inhouse(page, live_server, project)
    assignment = Assignment.objects.get()
    first_seen = assignment.last_seen_at
    assert assignment.draft == {}
    page.clock.fast_forward("02:30")
    for _ in range(100):
        assignment.refresh_from_db()
        if assignment.last_seen_at != first_seen:
            break
        time.sleep(0.1)
    assert assignment.last_seen_at > first_seen
    assert "answers" in assignment.draft  # the ping is an autosave of the (empty) draft


def test_prolific_comprehension_check_retry_then_return_message(live_server, page):
    """A wrong answer to a Prolific comprehension check: told it was not right (no correct
    answer shown) and asked again; wrong again: asked to return the study, no code."""
    from annotation.models import AssignmentItem
    from annotation.services.assignments import RETRY_MESSAGE
    from testing.factories import make_item

    project, stage, items = task_with_sentinel_gold(TaskKind.MC, mode=ExperimentMode.QA,
                                                    n_items=1, items_per_hit=2)
    practice = make_item(project, is_practice=True, gold={"choice": "A", "note": GOLD_SENTINEL},
                         content=dict(items[0].content))
    stage.provider = Provider.PROLIFIC
    stage.save(update_fields=["provider"])
    page.goto(live_server.url + reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
              + "?" + urlencode({"PROLIFIC_PID": "PC1", "STUDY_ID": "STUDYC",
                                 "SESSION_ID": "SC1"}))
    order = AssignmentItem.objects.get(item=practice).presented_order
    wrong = [label for label, role in zip("abcd", order, strict=True) if role != "A"]
    box = f"#item-{practice.pk}"
    page.keyboard.press(wrong[0])
    page.keyboard.press("Enter")
    expect_text(page, f"{box} .error", RETRY_MESSAGE)
    assert page.locator(f"{box} .feedback").is_hidden()
    assert page.locator(f"{box} .option.correct").count() == 0
    assert GOLD_SENTINEL not in page.content()
    # The same wrong answer chosen again after being told is the second attempt (the page says
    # it told them: `retry_seen`), not the first one resent.
    page.keyboard.press(wrong[0])
    page.keyboard.press("Enter")
    page.locator("#return-notice").wait_for(state="visible")
    assert "return the study on Prolific" in page.inner_text("#return-notice")
    assert page.locator("#task-form").is_hidden()
    screenshot(page, "prolific-return-1280")
    page.reload()
    assert "Please return this study on Prolific" in page.content()
    assert 'id="completion-code"' not in page.content()
    assert 'id="prolific-return"' not in page.content()
    assert list(Judgment.objects.values_list("item_id", flat=True)) == [practice.pk]


def test_late_confirm_refused_item_is_settled_and_submit_appears(live_server, page):
    """A late per-item confirm refused because others filled the item: shown as no longer
    needed, and Submit becomes available for the rest."""
    from datetime import timedelta

    from django.utils import timezone

    from annotation.services.assignments import assignment_confirm_item, assignment_start

    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2,
                                      redundancy={"default": 1}, assignment_timeout_minutes=30)
    open_inhouse(page, live_server, project)
    late = Assignment.objects.get()
    past = timezone.now() - timedelta(minutes=45)
    Assignment.objects.filter(pk=late.pk).update(last_seen_at=past, started_at=past)
    other = assignment_start(stage=stage, worker=make_worker())
    assignment_confirm_item(assignment=other, item=items[0], answer={"shown_choice": "a"})
    Assignment.objects.filter(pk=other.pk).update(last_seen_at=past)  # items[1] free again
    page.keyboard.press("c")
    page.keyboard.press("Enter")
    expect_text(page, f"#item-{items[0].pk} .feedback", "No longer needed")
    page.keyboard.press("Enter")  # next question
    page.keyboard.press("c")
    page.keyboard.press("Enter")
    page.locator(f"#item-{items[1].pk} .feedback").wait_for(state="visible")
    page.locator("#submit-row").wait_for(state="visible")
    page.keyboard.press("Enter")  # submit
    page.locator("#form-errors a.continue").wait_for(state="visible")
    late.refresh_from_db()
    assert late.status == "submitted"
    assert list(Judgment.objects.filter(assignment=late).values_list("item_id", flat=True)) \
        == [items[1].pk]


@pytest.mark.reliability
def test_six_starc_annotators_read_each_paragraph_once(live_server, browser):
    """#13, #32: six in-house annotators in a real browser on a STARC project with three
    paragraphs at three text levels; what each page showed and what was stored keep the design
    (one item per paragraph and participant, one at each level, conditions balanced)."""
    from annotation.domain.design import balance_violations, design_violations
    from testing.factories import make_item

    project, stage, _ = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=0,
                                  items_per_hit=3, redundancy={"default": 2})
    for paragraph in range(3):
        for level in ("Ele", "Int", "Adv"):
            make_item(project, text_level=level, gold={"choice": "A"}, content={
                "paragraph": f"Paragraph {paragraph} written at the {level} level.",
                "question": f"Question on paragraph {paragraph}?",
                "answers": ["right", "misread", "distractor", "unsupported"]},
                metadata={"article": 1, "paragraph": paragraph, "question": 1})
    shown = []
    for n in range(6):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.set_default_timeout(20_000)
        page = context.new_page()
        open_inhouse(page, live_server, project, stage=stage)
        assignment = Assignment.objects.filter(stage=stage).latest("pk")
        for row in assignment.assignmentitem_set.order_by("position"):
            box = f"#item-{row.item_id}"
            assert page.locator(box).is_visible()
            text = page.inner_text(box)
            paragraph = row.item.metadata["paragraph"]
            shown.append((n, paragraph, row.item.text_level))
            assert f"Question on paragraph {paragraph}?" in text
            page.keyboard.press("a")
            page.keyboard.press("Enter")
            page.locator(f"{box} .feedback").wait_for(state="visible")
            page.keyboard.press("Enter")
        finish(page)
        context.close()
    stored = list(Judgment.objects.filter(stage=stage).values_list(
        "worker_id", "item__metadata__paragraph", "item__text_level"))
    assert len(stored) == 18
    for exposures in (shown, stored):
        assert design_violations(exposures) == []
        assert balance_violations([(who, level) for who, _p, level in exposures], slack=0,
                                  values=["Ele", "Int", "Adv"]) == []


def test_one_annotator_invited_to_the_qa_and_guessing_projects_reads_each_paragraph_once(
        live_server, page):
    """A STARC study's modes are one project each. A lab annotator invited by name to the QA
    project and to the guessing project answered two paragraphs in the first, and the second
    then served her the same two (her place in both squares is the same): "guesses" on texts
    she had just read. Now the guessing page offers only the paragraph she has not read."""
    from annotation.services.access import inhouse_home_links
    from testing.factories import make_item

    def starc_project(mode, paragraphs):
        project, stage, _ = make_task(TaskKind.MC, mode=mode, n_items=0, items_per_hit=3)
        for paragraph in paragraphs:
            for level in ("Ele", "Int", "Adv"):
                make_item(project, dataset="onestopqa", text_level=level,
                          gold={"choice": "A"}, content={
                              "paragraph": f"Paragraph {paragraph} written at the {level} level.",
                              "question": f"Question on paragraph {paragraph}?",
                              "answers": ["right", "misread", "distractor", "unsupported"]},
                          metadata={"article": 1, "paragraph": paragraph, "question": 1})
        return project, stage

    qa, qa_stage = starc_project(ExperimentMode.QA, [0, 1])
    guessing, guess_stage = starc_project(ExperimentMode.GUESSING, [0, 1, 2])
    homes = {project: live_server.url + inhouse_home_links(project=project, names=["Ann"])[0][1]
             for project in (qa, guessing)}
    page.goto(homes[qa])
    page.locator("#home-stages tr").get_by_role("link", name="Start").click()
    page.wait_for_selector("text=0 of 2 answered")
    page.wait_for_load_state("networkidle")  # task.js (deferred) handles the keys
    for _ in range(2):
        page.keyboard.press("a")
        page.keyboard.press("Enter")
        page.locator("[id^=item-]:not([hidden]) .feedback").wait_for(state="visible")
        page.keyboard.press("Enter")
    finish(page)
    read = set(Judgment.objects.filter(stage=qa_stage).values_list(
        "item__metadata__paragraph", flat=True))
    assert len(read) == 2
    page.goto(homes[guessing])
    page.locator("#home-stages tr").get_by_role("link", name="Start").click()
    page.wait_for_selector("text=0 of 1 answered")
    unread = ({0, 1, 2} - read).pop()
    assert f"Question on paragraph {unread}?" in page.inner_text("#task-form")
    for paragraph in read:
        assert f"Question on paragraph {paragraph}?" not in page.content()
    assert Assignment.objects.get(stage=guess_stage).items.get().metadata["paragraph"] == unread
