"""What an annotator is told when a request of the task page does not get through: the server
busy (a 503 from the busy database, a proxy's 502), asking for a pause (429), the connection
gone, a submit whose answer is lost on the way back, and the STARC pilot's reading page reloaded
while offline. Each time the page must say what happened, that nothing is lost and where the
answers are kept, and what to do; and the work must go through once the server answers again.
Also the MTurk page inside a cross-site iframe with third-party cookies blocked, as MTurk shows
it: the page needs no cookie (the signed page token replaces CSRF and sessions).
"""
from __future__ import annotations

import json
import shutil
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from annotation.models import Assignment, ExperimentMode, Judgment, Provider, TaskKind
from annotation.services.access import inhouse_link_create
from core.db_busy import BUSY_MESSAGE
from testing.factories import make_hit, make_worker
from tests.browser.conftest import CHROMIUM_ARGS
from tests.browser.test_task_pages import expect_text
from tests.support.tasks import make_task

pytestmark = [pytest.mark.browser, pytest.mark.reliability,
              pytest.mark.django_db(transaction=True)]

# What config/middleware.py answers when SQLite stays locked: JSON without the page's
# "message" (and advice meant for the researcher, not the annotator).
BUSY = json.dumps({"detail": BUSY_MESSAGE, "code": "database_busy"})
TOO_MANY = json.dumps({"ok": False, "message": "Too many requests; wait a minute and try again.",
                       "errors": {}})
# A browser that refuses storage to the page (a third-party iframe under strict settings).
NO_STORAGE = """Object.defineProperty(window, 'localStorage', {get() {
  throw new DOMException('The access is denied for this document.', 'SecurityError'); }});"""


def open_task(live_server, page, kind, **kwargs):
    project, stage, items = make_task(kind, **kwargs)
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    page.goto(live_server.url + path)
    page.wait_for_load_state("networkidle")
    return items, live_server.url + path


def answer(page, selector: str, status: int, body: str, retry_after: str = "") -> None:
    page.unroute(selector)
    headers = {"Retry-After": retry_after} if retry_after else {}
    page.route(selector, lambda route: route.fulfill(status=status, body=body, headers=headers,
                                                     content_type="application/json"))


def test_a_busy_server_is_said_at_autosave_and_submit_and_the_answers_go_through_after(
        live_server, page):
    items, url = open_task(live_server, page, TaskKind.LIKERT, group="p1")
    answer(page, "**/autosave/", 503, BUSY, retry_after="2")
    page.keyboard.press("3")
    expect_text(page, "#save-status", "The server is busy or unavailable just now (error 503)")
    status = page.inner_text("#save-status")
    # Before: "Connection problem — … retrying…", although the connection was fine.
    assert "Nothing is lost: your answers are kept on this page and in this browser" in status
    assert "saving again in 2 s" in status and "PostgreSQL" not in status
    answer(page, "**/autosave/", 429, TOO_MANY, retry_after="1")
    expect_text(page, "#save-status", "The server asked for a pause")
    page.keyboard.press("2")
    page.keyboard.press("5")
    answer(page, "**/submit/", 503, BUSY)
    page.keyboard.press("Enter")
    expect_text(page, "#form-errors", "The server is busy or unavailable just now (error 503)")
    summary = page.inner_text("#form-errors")
    # Before: "Server error (503)." and nothing about the answers or what to do.
    assert "Nothing is lost" in summary and "Press Submit again in a moment" in summary
    page.unroute("**/submit/")
    page.route("**/submit/", lambda route: route.fulfill(status=502, body="<h1>Bad gateway</h1>",
                                                         content_type="text/html"))
    page.click("#submit-button")
    expect_text(page, "#form-errors", "(error 502)")
    assert not Judgment.objects.exists()
    page.unroute("**/autosave/")
    expect_text(page, "#save-status", "All answers saved")  # the retry went through
    assert Assignment.objects.get().draft["answers"][str(items[2].pk)]["score"] == 5
    page.unroute("**/submit/")
    page.click("#submit-button")
    page.wait_for_url("**/task/complete/**")
    assert [j.score for j in Judgment.objects.order_by("item_id")] == [3.0, 2.0, 5.0]


def test_a_submit_whose_answer_was_lost_goes_on_when_pressed_again(live_server, page):
    """The submit reached the server and was stored, but its answer never came back. Before,
    the second press read "already submitted … the answers on this page were not stored",
    about the very answers stored, and kept the worker on the page."""
    items, url = open_task(live_server, page, TaskKind.AB, n_items=2)
    for item, text in zip(items, ("Answer A explains the cause and B does not.",
                                  "B نعم هذا أفضل 🙂 שלום — B names the mechanism, A does not."),
                          strict=True):
        page.check(f"#choice-{item.pk}-B")
        page.check(f"#difficult-{item.pk}-no")
        page.fill(f"#justification-{item.pk}", text)

    def lost(route):
        route.fetch()  # the server stores the submission...
        route.abort()  # ...and the answer is lost on the way back

    page.route("**/submit/", lost)
    page.click("#submit-button")
    expect_text(page, "#form-errors", "Connection problem")
    assert "pressing it again never stores anything twice" in page.inner_text("#form-errors")
    assert Judgment.objects.count() == 2
    page.unroute("**/submit/")
    page.click("#submit-button")
    page.wait_for_url("**/task/complete/**")
    texts = [j.justification for j in Judgment.objects.order_by("item_id")]
    assert texts[1] == "B نعم هذا أفضل 🙂 שלום — B names the mechanism, A does not."


def test_a_submit_left_unanswered_is_given_up_and_can_be_sent_again(live_server, page):
    """A stalled connection: the submit gets no answer at all. Before, the button read
    "Submitting…" for good; after 45 s the page now says so and Submit works again."""
    page.clock.install()
    items, url = open_task(live_server, page, TaskKind.LIKERT, group="p1")
    stalled: list = []
    page.route("**/submit/", lambda route: stalled.append(route))  # never answered
    for key in "425":
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#submit-button').disabled")
    assert stalled
    page.clock.fast_forward("00:46")
    expect_text(page, "#form-errors", "Connection problem: the server did not answer in time")
    assert "Nothing is lost" in page.inner_text("#form-errors")
    assert page.inner_text("#submit-button") == "Submit"
    page.unroute("**/submit/")
    page.click("#submit-button")
    page.wait_for_url("**/task/complete/**")
    assert [j.score for j in Judgment.objects.order_by("item_id")] == [4.0, 2.0, 5.0]


def test_a_confirm_without_storage_says_the_answer_is_kept_on_this_page(live_server, page):
    """STARC QA: the confirm hits a busy server, in a browser that refuses the page storage
    (where "kept in this browser" would be untrue); confirming again goes through."""
    page.add_init_script(NO_STORAGE)
    items, url = open_task(live_server, page, TaskKind.MC, mode=ExperimentMode.QA, n_items=2)
    box = f"#item-{items[0].pk}"
    answer(page, "**/confirm/", 503, BUSY)
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    expect_text(page, f"#err-{items[0].pk}", "The server is busy or unavailable just now")
    message = page.inner_text(f"#err-{items[0].pk}")
    # Before: "Could not save (503)."
    assert "your answer is kept on this page (keep it open)" in message
    assert "in this browser" not in message
    assert page.is_checked(f"#opt-{items[0].pk}-b")
    page.unroute("**/confirm/")
    page.keyboard.press("Enter")
    page.locator(f"{box} .feedback").wait_for(state="visible")
    assert Judgment.objects.get().item_id == items[0].pk


def test_the_pilot_reading_page_reloaded_offline_says_why_and_loads_the_paragraph_when_back(
        live_server, page):
    """Page 2 of the pilot after a reload fetches the paragraph again. Before, one failed
    request left "Loading the paragraph…" for good (and an uncaught 'Failed to fetch')."""
    items, url = open_task(live_server, page, TaskKind.MC, mode=ExperimentMode.PILOT,
                           n_items=1)
    box = f"#item-{items[0].pk}"
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    page.locator(f"{box} .read-done").wait_for(state="visible")
    page.route("**/confirm/", lambda route: route.abort())
    page.reload()
    expect_text(page, f"{box} .paragraph", "the paragraph could not be loaded")
    assert "Your guess is saved" in page.inner_text(f"{box} .paragraph")
    page.unroute("**/confirm/")
    expect_text(page, f"{box} .paragraph", items[0].content["paragraph"][:40])


def test_an_mturk_page_framed_cross_site_without_third_party_cookies_saves_and_submits(
        live_server, browser, settings, monkeypatch):
    # A browser of its own, with flags the shared one lacks (from the shared one's Playwright).
    """MTurk shows the page in an iframe of another site. Here the framing site is another
    origin (its page served by the browser's router) allowed by the page's frame-ancestors, and
    the browser blocks third-party cookies: the page loads, autosaves, submits and posts the
    HIT to MTurk's externalSubmit with no cookie at all."""
    parent = "http://127.0.0.1:9"
    monkeypatch.setattr("annotation.views.task_pages.MTURK_FRAME_ANCESTORS", parent)
    settings.QAJ_MTURK_SUBMIT_HOSTS = [live_server.url]
    project, stage, items = make_task(TaskKind.AB, n_items=2, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HITF1")
    url = (live_server.url + reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk})
           + "?" + urlencode({"assignmentId": "ASGF1", "hitId": "HITF1", "workerId": "WF1",
                              "turkSubmitTo": live_server.url}))
    framed_browser = browser.browser_type.launch(
        executable_path=shutil.which("chromium"),
        headless=True,
        # Third-party cookies blocked; the framing page's address is made up (served by the
        # router), so Chromium's local-network check would refuse the frame to localhost.
        args=[*CHROMIUM_ARGS, "--test-third-party-cookie-phaseout",
              "--disable-features=LocalNetworkAccessChecks"])
    try:
        context = framed_browser.new_context()
        context.set_default_timeout(20_000)
        posted: list[str] = []
        context.route("**/mturk/externalSubmit", lambda route: (
            posted.append(route.request.post_data or ""),
            route.fulfill(status=200, body="MTurk got it")))
        context.route(parent + "/**", lambda route: route.fulfill(
            status=200, content_type="text/html",
            body=f'<!doctype html><title>HIT</title><iframe id="hit" src="{url}" '
                 'style="width:1000px;height:700px"></iframe>'))
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(parent + "/projects/p/tasks/t")
        frame = page.frame_locator("#hit")
        for item, letter in zip(items, "AB", strict=True):
            frame.locator(f"#choice-{item.pk}-{letter}").check()
            frame.locator(f"#difficult-{item.pk}-no").check()
            frame.locator(f"#justification-{item.pk}").fill(
                f"Answer {letter} explains the cause; the other one does not.")
        frame.locator("#save-status").filter(has_text="All answers saved").wait_for()
        assert Assignment.objects.get().draft["answers"]
        frame.locator("#submit-button").click()
        for _ in range(100):
            if posted:
                break
            page.wait_for_timeout(100)
        assert posted and "assignmentId=ASGF1" in posted[0]
        assert Judgment.objects.count() == 2
        assert context.cookies() == []
        assert not errors
    finally:
        framed_browser.close()
