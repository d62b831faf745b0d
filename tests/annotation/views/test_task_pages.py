"""Task pages and their JSON calls through the Django test client: who may open what, framing
headers, validation messages, idempotent submit, and that no gold answer ever reaches a page."""
from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentStatus,
    ExperimentMode,
    Item,
    Judgment,
    Provider,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.services.access import (
    assignment_token_make,
    inhouse_link_create,
    inhouse_link_revoke,
)
from testing.factories import make_hit, make_judgment, make_stage, make_worker
from tests.support.tasks import api, make_task, page_config

pytestmark = pytest.mark.django_db

GOLD_SENTINEL = "GOLD-SENTINEL-7f3a"
OTHER_SENTINEL = "OTHER-WORKER-SENTINEL-91c2"
TASK_KINDS = [(TaskKind.LIKERT, ""), (TaskKind.AB, ""), (TaskKind.MC, ExperimentMode.QA),
              (TaskKind.MC, ExperimentMode.GUESSING), (TaskKind.MC, ExperimentMode.VALIDITY),
              (TaskKind.MC, ExperimentMode.PILOT)]


def open_link(client, project, **link_kwargs):
    worker = make_worker()
    link, path = inhouse_link_create(worker=worker, project=project, **link_kwargs)
    return client.get(path), worker, link


# --- In-house links -----------------------------------------------------------------------------


def test_inhouse_link_opens_the_task_and_reload_continues_the_same_assignment(client):
    project, stage, items = make_task(TaskKind.LIKERT)
    response, worker, link = open_link(client, project)
    assert response.status_code == 200
    html = response.content.decode()
    assert "0 of 3 answered" in html and html.count("Completely wrong") >= 3
    assert html.count("I got all of the ingredients") == 1 + 1  # passage once + worked example
    again = client.get(reverse("annotation:task-link", kwargs={"token": response.wsgi_request
                                                               .resolver_match.kwargs["token"]}))
    assert page_config(again)["storage_key"] == page_config(response)["storage_key"]
    assert Assignment.objects.filter(worker=worker).count() == 1


@pytest.mark.reliability
def test_tampered_revoked_and_expired_links_are_refused(client):
    project, _, _ = make_task(TaskKind.LIKERT)
    worker = make_worker()
    link, path = inhouse_link_create(worker=worker, project=project)
    tampered = path.rstrip("/")[:-3] + "xyz/"
    response = client.get(tampered)
    assert response.status_code == 403 and b"not valid" in response.content
    inhouse_link_revoke(link=link)
    response = client.get(path)
    assert response.status_code == 403 and b"revoked" in response.content
    _, expired_path = inhouse_link_create(worker=worker, project=project,
                                          expires_at=timezone.now() - timedelta(minutes=1))
    response = client.get(expired_path)
    assert response.status_code == 403 and b"expired" in response.content
    assert not Assignment.objects.exists()


def test_blocked_worker_and_closed_stage_get_a_clear_refusal(client):
    project, stage, _ = make_task(TaskKind.AB)
    worker = make_worker(status="blocked")
    _, path = inhouse_link_create(worker=worker, project=project, stage=stage)
    response = client.get(path)
    assert response.status_code == 403 and b"can no longer take tasks" in response.content
    stage.status = StageStatus.CLOSED
    stage.save(update_fields=["status"])
    response, _, _ = open_link(client, project, stage=stage)
    assert response.status_code == 403 and b"This task has ended" in response.content


# --- Headers ------------------------------------------------------------------------------------


MTURK_WORKER_FRAMING = "frame-ancestors https://worker.mturk.com https://workersandbox.mturk.com"


def frame_ancestors(response) -> str:
    return re.search(r"frame-ancestors [^;]*", response["Content-Security-Policy"]).group(0)


def assert_not_frameable(response):
    assert frame_ancestors(response) == "frame-ancestors 'none'"
    assert response["X-Frame-Options"] == "DENY"


def assert_mturk_frameable(response):
    # Exactly MTurk's worker sites: not *.mturk.com (requester sites), not 'self'.
    assert frame_ancestors(response) == MTURK_WORKER_FRAMING
    assert "X-Frame-Options" not in response


@pytest.mark.reliability
def test_task_pages_may_be_framed_by_mturk_only_and_other_pages_not_at_all(client):
    project, stage, items = make_task(TaskKind.LIKERT)
    response, _, _ = open_link(client, project)
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert_not_frameable(response)
    token = page_config(response)["token"]
    assert_not_frameable(api(client, "task-autosave", token, {"draft": {}}))
    done = api(client, "task-submit", token,
               {"answers": [{"item": i, "score": 3} for i in page_config(response)["items"]]})
    assert_not_frameable(client.get(done.json()["complete_url"]))  # in-house completion
    prolific_stage = make_stage(project, provider=Provider.PROLIFIC,
                                status=StageStatus.PUBLISHED)
    prolific = client.get(reverse("annotation:task-prolific",
                                  kwargs={"stage_id": prolific_stage.pk})
                          + "?PROLIFIC_PID=P1&STUDY_ID=S&SESSION_ID=S1")
    assert prolific.status_code == 200
    assert_not_frameable(prolific)

    stage = make_stage(project, provider=Provider.MTURK, status=StageStatus.PUBLISHED)
    make_hit(stage, items=items, external_id="HITF", max_assignments=3)
    preview = client.get(mturk_url(stage, assignmentId="ASSIGNMENT_ID_NOT_AVAILABLE",
                                   hitId="HITF"))
    assert_mturk_frameable(preview)
    assert_mturk_frameable(client.get(mturk_url(stage, assignmentId="X", hitId="NOPE",
                                                workerId="W1")))  # refusal inside MTurk
    accepted = client.get(mturk_url(stage, assignmentId="ASGF", hitId="HITF", workerId="WF",
                                    turkSubmitTo="https://workersandbox.mturk.com"))
    assert accepted.status_code == 200
    assert_mturk_frameable(accepted)
    config = page_config(accepted)
    done = api(client, "task-submit", config["token"],
               {"answers": [{"item": i, "score": 3} for i in config["items"]]})
    assert_not_frameable(done)
    assert_mturk_frameable(client.get(done.json()["complete_url"]))  # MTurk completion
    assert client.get("/")["X-Frame-Options"] == "DENY"


# --- MTurk --------------------------------------------------------------------------------------


def mturk_url(stage, **params):
    from urllib.parse import urlencode

    return reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk}) + "?" + urlencode(params)


def test_mturk_preview_shows_the_first_item_read_only_without_an_assignment(client):
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HITP")
    response = client.get(mturk_url(stage, assignmentId="ASSIGNMENT_ID_NOT_AVAILABLE",
                                    hitId="HITP"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Accept the HIT to begin" in html
    assert items[0].content["question"] in html
    assert 'class="sub options" disabled' in html
    assert page_config(response)["preview"] is True and page_config(response)["token"] == ""
    assert not Assignment.objects.exists()


def shown_texts(response, css_class: str) -> list[str]:
    """The answer texts of the first item, in the order the page shows them."""
    import html as html_lib

    pattern = {"option-text": r'<span class="option-text">(.*?)</span>',
               "answer-text": r'<div class="answer-text"><p>(.*?)</p></div>'}[css_class]
    return [html_lib.unescape(t) for t in re.findall(pattern, response.content.decode(), re.S)]


@pytest.mark.reliability
@pytest.mark.parametrize("kind", [TaskKind.MC, TaskKind.AB])
def test_mturk_preview_shuffles_the_answers_stably_and_never_marks_the_correct_one(client, kind):
    # STARC role A is the correct answer: an identity-order preview would show it as (a) on
    # every HIT, qualification HITs included.
    project, stage, items = make_task(kind, mode=ExperimentMode.QA if kind == TaskKind.MC else "", provider=Provider.MTURK)
    content = items[0].content
    if kind == TaskKind.MC:
        roles, css = content["answers"], "option-text"
    else:
        roles, css = [content["answer_a"]["text"], content["answer_b"]["text"]], "answer-text"
    positions = set()
    for n in range(12):
        make_hit(stage, items=items, external_id=f"HITS{n}")
        url = mturk_url(stage, assignmentId="ASSIGNMENT_ID_NOT_AVAILABLE", hitId=f"HITS{n}")
        response = client.get(url)
        assert response.status_code == 200
        shown = shown_texts(response, css)
        assert sorted(shown) == sorted(roles)
        assert shown_texts(client.get(url), css) == shown, "stable across reloads"
        positions.add(shown.index(roles[0]))
        html = response.content.decode()
        for forbidden in ("data-role", "presented_order", "is_correct", "correct_shown",
                          '"gold"', '"kind": "human"'):
            assert forbidden not in html, forbidden
    assert positions != {0}, "role A is not always shown first"
    assert not Assignment.objects.exists()


@pytest.mark.reliability
@pytest.mark.parametrize("status", [StageStatus.DRAFT, StageStatus.CLOSED])
def test_mturk_preview_of_a_stage_that_is_not_open_is_refused(client, status):
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HITC")
    stage.status = status
    stage.save(update_fields=["status"])
    response = client.get(mturk_url(stage, assignmentId="ASSIGNMENT_ID_NOT_AVAILABLE",
                                    hitId="HITC"))
    assert response.status_code == 403
    html = response.content.decode()
    assert ("has not started yet" if status == StageStatus.DRAFT else "has ended") in html
    assert "This page is not available" in html
    assert items[0].content["question"] not in html


@pytest.mark.reliability
def test_mturk_parameters_must_match_the_stored_hit_and_assignment(client):
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HIT1")
    ok = client.get(mturk_url(stage, assignmentId="ASG1", hitId="HIT1", workerId="W1",
                              turkSubmitTo="https://workersandbox.mturk.com"))
    assert ok.status_code == 200
    assignment = Assignment.objects.get(external_id="ASG1")
    assert assignment.worker.provider == Provider.MTURK and assignment.hit.external_id == "HIT1"
    foreign = client.get(mturk_url(stage, assignmentId="ASG1", hitId="HIT1", workerId="W2"))
    assert foreign.status_code == 403 and b"another worker" in foreign.content
    unknown = client.get(mturk_url(stage, assignmentId="ASG2", hitId="NOPE", workerId="W1"))
    assert unknown.status_code == 403
    missing = client.get(mturk_url(stage, assignmentId="ASG3", hitId="HIT1"))
    assert missing.status_code == 403 and b"workerId" in missing.content
    evil = client.get(mturk_url(stage, assignmentId="ASG4", hitId="HIT1", workerId="W3",
                                turkSubmitTo="https://evil.example"))
    assert evil.status_code == 403


def test_mturk_completion_posts_back_to_turk_submit_to_and_reopening_shows_it_again(client):
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HIT1")
    url = mturk_url(stage, assignmentId="ASG1", hitId="HIT1", workerId="W1",
                    turkSubmitTo="https://workersandbox.mturk.com")
    config = page_config(client.get(url))
    response = api(client, "task-submit", config["token"],
                   {"answers": [{"item": i, "score": 4} for i in config["items"]]})
    assert response.status_code == 200
    assert response.json()["complete_url"].startswith("/task/complete/")
    done = client.get(config["complete_url"])
    html = done.content.decode()
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in html
    assert 'name="assignmentId" value="ASG1"' in html
    assert "form-action 'self' https://www.mturk.com https://workersandbox.mturk.com" in \
        done["Content-Security-Policy"]
    reopened = client.get(url)
    assert reopened.status_code == 200 and b"mturk/externalSubmit" in reopened.content
    assert Judgment.objects.count() == 3


# --- Prolific -----------------------------------------------------------------------------------


@override_settings(PROLIFIC_COMPLETION_URL="https://prolific.test/complete")
def test_prolific_session_checks_and_completion_redirect(client):
    project, stage, items = make_task(TaskKind.AB, provider=Provider.PROLIFIC)
    stage.settings = {"prolific_study_id": "STUDY1", "prolific_completion_code": "C0DE42"}
    stage.save(update_fields=["settings"])
    base = reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
    wrong = client.get(f"{base}?PROLIFIC_PID=P1&STUDY_ID=OTHER&SESSION_ID=S1")
    assert wrong.status_code == 403 and b"another Prolific study" in wrong.content
    response = client.get(f"{base}?PROLIFIC_PID=P1&STUDY_ID=STUDY1&SESSION_ID=S1")
    config = page_config(response)
    stolen = client.get(f"{base}?PROLIFIC_PID=P2&STUDY_ID=STUDY1&SESSION_ID=S1")
    assert stolen.status_code == 403
    assignment = Assignment.objects.get(external_id="S1")
    answers = []
    for row in assignment.assignmentitem_set.all():
        answers.append({"item": row.item_id, "shown_choice": "A", "difficult": True,
                        "justification": "A is more complete and more accurate."})
    done = api(client, "task-submit", config["token"], {"answers": answers})
    page = client.get(done.json()["complete_url"]).content.decode()
    assert 'href="https://prolific.test/complete?cc=C0DE42"' in page
    assignment.refresh_from_db()
    assert assignment.completion_code == "C0DE42"


# --- JSON calls ---------------------------------------------------------------------------------


@pytest.mark.reliability
def test_json_calls_need_the_signed_token_and_our_origin(client):
    project, stage, items = make_task(TaskKind.LIKERT)
    response, _, _ = open_link(client, project)
    token = page_config(response)["token"]
    assert api(client, "task-autosave", "", {"draft": {}}).status_code == 403
    assert api(client, "task-autosave", token[:-2] + "xx", {"draft": {}}).status_code == 403
    cross = api(client, "task-autosave", token, {"draft": {}}, HTTP_ORIGIN="https://evil.example")
    assert cross.status_code == 403
    ok = api(client, "task-autosave", token, {"draft": {"answers": {"1": {"score": 2}}}},
             HTTP_ORIGIN="http://testserver")
    assert ok.status_code == 200 and ok.json()["ok"]
    assert client.get(reverse("annotation:task-autosave")).status_code == 405
    bad_json = client.post(reverse("annotation:task-submit"), data="{nope",
                           content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=token)
    assert bad_json.status_code == 400


def test_autosaved_draft_comes_back_on_reload(client):
    project, _, items = make_task(TaskKind.AB)
    response, worker, link = open_link(client, project)
    token = page_config(response)["token"]
    draft = {"answers": {str(items[0].pk): {"shown_choice": "B", "justification": "half"}},
             "saved_at": "2026-01-01T00:00:00Z"}
    assert api(client, "task-autosave", token, {"draft": draft}).status_code == 200
    reloaded = client.get(response.wsgi_request.path)
    assert page_config(reloaded)["draft"] == draft


@pytest.mark.reliability
def test_submit_validation_messages_then_success_then_idempotent_resubmit(client):
    project, stage, items = make_task(TaskKind.AB, justification_min_length=25)
    response, _, _ = open_link(client, project)
    config = page_config(response)
    token = config["token"]
    answers = [{"item": i, "shown_choice": "A", "difficult": False, "justification": "short"}
               for i in config["items"]]
    bad = api(client, "task-submit", token, {"answers": answers[:2]})
    assert bad.status_code == 400
    errors = bad.json()["errors"]
    assert errors[str(config["items"][0])] == [
        "Write a justification of at least 25 characters (5 so far)."]
    assert errors[str(config["items"][2])] == ["Answer this item."]
    assert Judgment.objects.count() == 0
    for answer in answers:
        answer["justification"] = "<script>alert(1)</script> A names the actual mechanism."
    good = api(client, "task-submit", token, {"answers": answers})
    assert good.status_code == 200 and good.json()["n_judgments"] == 3
    assert good.json()["already_submitted"] is False
    # Another tab submitting other answers: nothing stored, and told so (it read "saved").
    stored = list(Judgment.objects.order_by("pk").values_list("pk", "choice"))
    other = [{**answer, "shown_choice": "B"} for answer in answers]
    again = api(client, "task-submit", token, {"answers": other})
    assert again.status_code == 200 and again.json()["n_judgments"] == 3
    assert again.json()["already_submitted"] is True
    assert list(Judgment.objects.order_by("pk").values_list("pk", "choice")) == stored
    assert Judgment.objects.count() == 3
    assert Judgment.objects.first().justification.startswith("<script>")  # stored verbatim
    complete = client.get(good.json()["complete_url"])
    assert b"your answers are saved" in complete.content
    # In-house: nothing more for this annotator, so no code to hand in and no "Continue".
    assert b"You have answered everything this task has for you" in complete.content
    assert b"completion code" not in complete.content
    late = api(client, "task-autosave", token, {"draft": {}})
    assert late.status_code == 200 and late.json()["already_submitted"]


@pytest.mark.reliability
def test_a_repeated_submit_says_whether_the_stored_one_came_from_the_same_page(client):
    """A submit whose answer was lost, sent again by the same page load (its `page_id`), is told
    the stored submission is its own, so the page goes on; another page's (a second tab, a
    reload, a page sending no id or a malformed body) is not, and its answers were not stored."""
    project, stage, items = make_task(TaskKind.LIKERT, n_items=2)
    response, _, _ = open_link(client, project)
    config = page_config(response)
    answers = [{"item": i, "score": 3} for i in config["items"]]
    first = api(client, "task-submit", config["token"],
                {"answers": answers, "client_meta": {"page_id": "page-1"}})
    assert first.json()["already_submitted"] is False
    assert first.json()["submitted_by_this_page"] is False
    for body, same in (({"answers": answers, "client_meta": {"page_id": "page-1"}}, True),
                       ({"answers": answers, "client_meta": {"page_id": "page-2"}}, False),
                       ({"answers": answers}, False),
                       ({"answers": "nonsense", "client_meta": {"page_id": ["page-1"]}}, False)):
        again = api(client, "task-submit", config["token"], body)
        assert again.status_code == 200 and again.json()["already_submitted"] is True
        assert again.json()["submitted_by_this_page"] is same, body
    assert Judgment.objects.count() == 2


@pytest.mark.reliability
def test_item_text_is_escaped_on_the_page(client):
    project, stage, items = make_task(TaskKind.LIKERT, n_items=1)
    Item.objects.filter(pk=items[0].pk).update(content={
        **items[0].content, "question": "<script>alert('x')</script>?"})
    response, _, _ = open_link(client, project)
    assert b"<script>alert" not in response.content
    assert b"&lt;script&gt;alert" in response.content


@pytest.mark.reliability
def test_another_assignments_items_are_refused(client):
    project, stage, items = make_task(TaskKind.LIKERT, redundancy={"default": 1}, n_items=4,
                                      items_per_hit=2, group="")
    first, _, _ = open_link(client, project)
    second, _, _ = open_link(client, project)
    mine, theirs = page_config(first), page_config(second)
    assert not set(mine["items"]) & set(theirs["items"])
    response = api(client, "task-submit", mine["token"], {"answers": [
        {"item": i, "score": 3} for i in mine["items"] + theirs["items"][:1]]})
    assert response.status_code == 400
    assert "not part of this assignment" in response.json()["errors"]["__all__"][0]
    confirm = api(client, "task-confirm", mine["token"],
                  {"item": theirs["items"][0], "answer": {"score": 2}})
    assert confirm.status_code == 400


# --- No gold before answering -------------------------------------------------------------------


@pytest.mark.reliability
@pytest.mark.parametrize("kind,mode", TASK_KINDS)
def test_no_gold_or_scoring_in_any_page_or_json_before_answering(client, kind, mode):
    project, stage, items = make_task(kind, mode=mode)
    for item in items:
        Item.objects.filter(pk=item.pk).update(gold={**item.gold, "note": GOLD_SENTINEL})
    # Another worker's judgment must not show up either.
    make_judgment(item=items[0], stage=stage, justification=OTHER_SENTINEL,
                  extra={"note": OTHER_SENTINEL})
    response, worker, _ = open_link(client, project)
    html = response.content.decode()
    config = page_config(response)
    for forbidden in (GOLD_SENTINEL, OTHER_SENTINEL, "is_correct", "correct_shown", '"gold"', "data-role",
                      '"kind": "human"', '"kind": "model"'):
        assert forbidden not in html, forbidden
    if kind == TaskKind.MC and mode in (ExperimentMode.GUESSING, ExperimentMode.PILOT):
        # The paragraph is part of the experiment: only shown after the guess.
        assert items[0].content["paragraph"] not in html
    token = config["token"]
    saved = api(client, "task-autosave", token, {"draft": {"answers": {}}})
    assert GOLD_SENTINEL not in saved.content.decode()
    if kind == TaskKind.MC and mode != ExperimentMode.VALIDITY:
        first = config["items"][0]
        if mode == ExperimentMode.PILOT:
            guess = api(client, "task-confirm", token,
                        {"item": first, "step": "guess", "answer": {"shown_guess": "a"}})
            body = guess.json()
            assert set(body) == {"ok", "guess_shown", "paragraph"}
        confirmed = api(client, "task-confirm", token,
                        {"item": first, "answer": {"shown_choice": "b"}}).json()
        assert GOLD_SENTINEL not in json.dumps(confirmed)
        if mode in (ExperimentMode.QA, ExperimentMode.GUESSING):
            # After answering the worker is told which shown option was right and which of
            # theirs was kept (their own answer, as shown); nothing more.
            assert set(confirmed["feedback"]) <= {"confirmed", "paragraph", "correct_shown",
                                                  "is_correct", "chosen_shown"}
            assert confirmed["feedback"]["chosen_shown"] == "b"
        # Reloading shows the feedback for the confirmed item only.
        reloaded = page_config(client.get(response.wsgi_request.path))
        assert list(reloaded["confirmed"]) == [str(first)]


@pytest.mark.reliability
def test_qualification_page_never_reveals_scoring_even_after_answering(client):
    project, _, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2)
    qual = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.PUBLISHED)
    response, _, _ = open_link(client, project, stage=qual)
    config = page_config(response)
    confirmed = api(client, "task-confirm", config["token"],
                    {"item": config["items"][0], "answer": {"shown_choice": "a"}}).json()
    assert confirmed["ok"] and "correct_shown" not in confirmed["feedback"]
    assert "is_correct" not in confirmed["feedback"]


def test_completion_page_needs_a_submitted_assignment(client):
    project, stage, items = make_task(TaskKind.LIKERT)
    response, _, _ = open_link(client, project)
    assignment = Assignment.objects.get()
    token = assignment_token_make(assignment=assignment)
    page = client.get(reverse("annotation:task-complete", kwargs={"token": token}))
    assert page.status_code == 403
    assert assignment.status == AssignmentStatus.IN_PROGRESS


@pytest.mark.reliability
@override_settings(QAJ_TASK_RATE_LIMITS={"page": (3, 60), "api": (2, 60)})
def test_task_pages_and_json_calls_are_rate_limited(client):
    from django.core.cache import cache

    cache.clear()
    project, _, _ = make_task(TaskKind.LIKERT)
    worker = make_worker()
    _, path = inhouse_link_create(worker=worker, project=project)
    statuses = [client.get(path).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    token = assignment_token_make(assignment=Assignment.objects.get())
    calls = [api(client, "task-autosave", token, {"draft": {}}).status_code for _ in range(3)]
    assert calls == [200, 200, 429]
    cache.clear()


def test_a_fractional_item_id_is_refused_not_rounded_to_another_item(client):
    project, _stage, _items = make_task(TaskKind.LIKERT)
    page, _worker, _link = open_link(client, project)
    config = page_config(page)
    answers = [{"item": i, "score": 4} for i in config["items"]]
    answers[0]["item"] = config["items"][0] + 0.5  # a float id must not become item N
    response = api(client, "task-submit", config["token"], {"answers": answers})
    assert response.status_code == 400
    assert "An answer names no item." in json.dumps(response.json())
    assert Judgment.objects.count() == 0


@pytest.mark.django_db
def test_likert_scale_is_rendered_once_and_carries_each_items_id(client):
    """The scale is rendered once per page and copied per item (annotation/templatetags/
    task_scale.py): every item gets its own ids, and a label that spells the placeholder is
    escaped like any other text, never replaced."""
    from annotation.templatetags.task_scale import ITEM_PLACEHOLDER

    project, stage, _items = make_task(TaskKind.LIKERT, n_items=3, group="g-1")
    project.scale_labels = ["No", f"A {ITEM_PLACEHOLDER} label", "Yes"]
    project.save(update_fields=["scale_labels"])
    _, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
    html = client.get(path).content.decode()
    config = json.loads(re.search(
        r'<script id="task-config" type="application/json">(.*?)</script>', html, re.S).group(1))
    assert len(config["items"]) == 3
    for item_id in config["items"]:
        for n in (1, 2, 3):
            assert f'id="score-{item_id}-{n}" name="score-{item_id}" value="{n}"' in html
    assert str(ITEM_PLACEHOLDER) not in html
    assert html.count("A &lt;qaj-item-id&gt; label") == 3 + 1  # three scales, the instructions


def _lfqa_page(client, answer_a: str, **project_fields):
    """An in-house A/B page of one item whose answer A is `answer_a` (the LFQA files' text)."""
    project, stage, items = make_task(TaskKind.AB, n_items=1, **project_fields)
    content = dict(items[0].content)
    content["answer_a"] = {**content["answer_a"], "text": answer_a}
    items[0].content = content
    items[0].save(update_fields=["content"])
    response, _, _ = open_link(client, project, stage=stage)
    return response, items


def test_lfqa_newline_tokens_show_as_line_breaks_and_stay_in_the_stored_answer(client):
    """Walking an A/B study on the long-form QA experts' files: answers carry a literal
    "<newline>" token for each line break, and the task page showed it to the annotators
    ("…five year old:<newline>https://…"). The page breaks the line; the item keeps the file's
    text, so exports and re-imports are unchanged."""
    response, items = _lfqa_page(client, "There are forces between atoms.<newline>Here is "
                                 "Feynman:<newline><newline>https://example.org/feynman")
    page = response.content.decode()
    assert "&lt;newline&gt;" not in page and "<newline>" not in page
    assert "There are forces between atoms.<br>Here is Feynman:</p>" in page
    items[0].refresh_from_db()
    assert "<newline>" in items[0].content["answer_a"]["text"]


@pytest.mark.reliability
def test_a_justification_copied_from_an_answer_as_shown_across_its_line_break_is_refused(client):
    """The copy rule reads the answers as the page shows them: an LFQA answer's "<newline>"
    tokens are line breaks on the page, so a justification selected across one and pasted
    ("…atoms.\\nHere is…") is the answer's text, and is refused like any other copy. Was: the
    rule compared it with the stored text ("atoms.<newline>Here"), found no copy, and stored it
    as the worker's own words."""
    response, items = _lfqa_page(client, "There are forces between atoms.<newline>Here is "
                                 "Feynman explaining them:<newline><newline>https://example.org/f",
                                 justification_min_length=20)
    config = page_config(response)
    pasted = "forces between atoms.\nHere is Feynman explaining them"
    assert pasted.replace("\n", "<br>") in response.content.decode()  # as the worker reads it
    answer = {"item": items[0].pk, "shown_choice": "A", "difficult": False,
              "justification": pasted}
    refused = api(client, "task-submit", config["token"], {"answers": [answer]})
    assert refused.status_code == 400, refused.content
    assert "copy of one of the answers" in refused.json()["errors"][str(items[0].pk)][0]
    assert not Judgment.objects.exists()
    # In their own words, the same page submits.
    answer["justification"] = "A quotes Feynman on forces between atoms; B only guesses."
    assert api(client, "task-submit", config["token"], {"answers": [answer]}).status_code == 200
    assert Judgment.objects.count() == 1


@pytest.mark.reliability
def test_an_older_autosave_arriving_late_never_overwrites_a_newer_one_of_the_same_page(client):
    """Two autosaves of one page on a slow connection can arrive in the wrong order: the first
    (one item answered) held up, the second (two answered) through at once. The page numbers
    its autosaves; the one that arrives late is older than the draft stored and is not stored
    over it. Was: the late one replaced the draft and the second answer was gone from the server
    (in MTurk's iframe, where the browser may keep no copy, gone after a reload). Another page
    load (a reload, another tab) numbers its own and is stored as before."""
    project, _, items = make_task(TaskKind.AB)
    response, worker, link = open_link(client, project)
    token = page_config(response)["token"]

    def answered(n):
        return {"answers": {str(item.pk): {"shown_choice": "B"} for item in items[:n]},
                "saved_at": f"2026-01-01T00:00:0{n}Z"}

    def autosave(draft, series, n):
        return api(client, "task-autosave", token,
                   {"draft": draft, "sequence": {"series": series, "n": n}})

    assert autosave(answered(2), "page-1", 2).status_code == 200
    late = autosave(answered(1), "page-1", 1)
    assert late.status_code == 200 and late.json()["ok"]
    assert page_config(client.get(response.wsgi_request.path))["draft"] == answered(2)
    assert autosave(answered(3), "page-1", 3).status_code == 200
    assert page_config(client.get(response.wsgi_request.path))["draft"] == answered(3)
    # A reload's page starts its own numbers.
    assert autosave(answered(1), "page-2", 1).status_code == 200
    assert page_config(client.get(response.wsgi_request.path))["draft"] == answered(1)
    # A page that sends no numbers (or malformed ones) is stored as it always was.
    for sequence in (None, {"series": ["x"], "n": "2"}, {"series": "page-2", "n": True}):
        body = {"draft": answered(2)} | ({"sequence": sequence} if sequence else {})
        assert api(client, "task-autosave", token, body).status_code == 200
    assert page_config(client.get(response.wsgi_request.path))["draft"] == answered(2)
    # From the review: a late autosave of one page load is old whatever another page load
    # saved in between (page-1 sent 3, then page-2 saved; page-1's 2 arrives late).
    assert autosave(answered(3), "page-2", 5).status_code == 200
    assert autosave(answered(2), "page-1", 2).status_code == 200
    assert page_config(client.get(response.wsgi_request.path))["draft"] == answered(3)


def test_the_page_loads_an_autosave_forgets_are_those_that_saved_longest_ago():
    """From the review: the newest numbers of the last 8 page loads were kept as a JSON object,
    whose keys PostgreSQL's jsonb sorts: the page load forgotten was the one whose name sorts
    first, not the one that saved longest ago, so a page still open lost its number and its
    late autosave overwrote a newer draft."""
    from annotation.models import Assignment
    from annotation.services.assignments.drafts import assignment_save_draft
    from testing.factories import make_assignment, make_item, make_project, make_stage

    project = make_project(TaskKind.LIKERT)
    assignment = make_assignment(make_stage(project), items=[make_item(project)])

    def save(text, series, n):
        assignment_save_draft(assignment=Assignment.objects.get(pk=assignment.pk),
                              draft={"x": text}, sequence={"series": series, "n": n})

    for k in range(1, 8):
        save(f"z{k}", f"z{k}", 1)
    save("open-5", "a0", 5)  # the open page load, whose name sorts first
    save("z8", "z8", 1)  # a ninth page load: z1, which saved longest ago, is forgotten
    save("open-late-4", "a0", 4)  # the open page's late autosave is old
    assert Assignment.objects.get(pk=assignment.pk).draft["x"] == "z8"


def test_an_autosave_record_written_as_an_object_is_still_read():
    """From the review: records written as {"newest": {series: n}} for a while before the
    list were read as empty, so a late autosave of such a page load was stored over a newer
    one."""
    from annotation.services.assignments.drafts import autosave_is_stale, autosave_record

    stored = {"newest": {"page-1": 5, "page-2": 1}}
    assert autosave_is_stale(stored, {"series": "page-1", "n": 3})
    assert not autosave_is_stale(stored, {"series": "page-1", "n": 6})
    assert autosave_record(stored, {"series": "page-3", "n": 1}) == {
        "newest": [["page-1", 5], ["page-2", 1], ["page-3", 1]]}
