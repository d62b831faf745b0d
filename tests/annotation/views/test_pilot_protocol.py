"""STARC pilot (guess → read → answer) at every door: the answer needs the guess locked on page 1
(before the paragraph was served), a worker who takes an item again in a new assignment keeps
the guess they locked (no second guess after reading), and the guess page's time is kept apart.
"""
from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    ExperimentMode,
    Item,
    Judgment,
    Provider,
    TaskKind,
)
from annotation.services.access import inhouse_link_create
from annotation.services.assignments import assignment_release_abandoned
from testing.factories import make_hit, make_worker
from tests.support.tasks import api, make_task, page_config

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def mturk_url(stage, **params) -> str:
    return reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk}) + "?" + urlencode(params)


def inhouse_page(client):
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.PILOT, n_items=1)
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    return page_config(client.get(path)), items


@pytest.mark.parametrize("door", ["confirm", "submit"])
def test_a_pilot_answer_without_the_locked_guess_is_refused(client, door):
    """The page sends the final answer only after the guess page; a hand-made request that
    named its own guess next to the answer skipped the reading page and was stored as an
    answer 'after reading' with a guess 'before reading' nobody made first."""
    config, items = inhouse_page(client)
    answer = {"shown_choice": "a", "shown_guess": "b"}
    if door == "confirm":
        response = api(client, "task-confirm", config["token"],
                       {"item": items[0].pk, "answer": answer})
    else:
        response = api(client, "task-submit", config["token"],
                       {"answers": [{"item": items[0].pk, **answer}]})
    assert response.status_code == 400
    assert "Confirm your guess first" in response.json()["errors"][str(items[0].pk)][0]
    assert not Judgment.objects.exists()


def test_the_guess_page_time_is_kept_apart_in_the_judgment(client):
    config, items = inhouse_page(client)
    token, item = config["token"], items[0].pk
    guess = api(client, "task-confirm", token, {"item": item, "step": "guess",
                                                "answer": {"shown_guess": "c",
                                                           "time_spent_ms": 4321}})
    assert guess.status_code == 200
    final = api(client, "task-confirm", token, {"item": item, "answer": {
        "shown_choice": "a", "time_spent_ms": 9000}})
    assert final.status_code == 200
    judgment = Judgment.objects.get()
    timing = judgment.extra["guess_timing"]
    assert timing["client_ms"] == 4321 and timing["server_ms"] >= 0 and timing["locked_at"]
    assert judgment.time_spent_ms == 9000


def test_returning_the_hit_and_accepting_it_again_keeps_the_guess_made_before_reading(client):
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.PILOT, n_items=1,
                                      provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HIT1", max_assignments=3)
    first = page_config(client.get(mturk_url(stage, assignmentId="ASG1", hitId="HIT1",
                                             workerId="W1")))
    item = first["items"][0]
    locked = api(client, "task-confirm", first["token"],
                 {"item": item, "step": "guess", "answer": {"shown_guess": "a"}}).json()
    assert locked["paragraph"]  # the paragraph was served after this guess
    role = Assignment.objects.get(external_id="ASG1").assignmentitem_set.get() \
        .presented_order["abcd".index("a")]
    # The worker returns the HIT (the sync marks it), accepts it again and guesses otherwise.
    Assignment.objects.filter(external_id="ASG1").update(status=AssignmentStatus.RETURNED)
    again = page_config(client.get(mturk_url(stage, assignmentId="ASG2", hitId="HIT1",
                                             workerId="W1")))
    order = Assignment.objects.get(external_id="ASG2").assignmentitem_set.get().presented_order
    assert again["locked_guesses"] == {str(item): "abcd"[order.index(role)]}
    other = next(label for label in "abcd" if label != again["locked_guesses"][str(item)])
    retry = api(client, "task-confirm", again["token"],
                {"item": item, "step": "guess", "answer": {"shown_guess": other}}).json()
    assert retry["guess_shown"] == again["locked_guesses"][str(item)]
    api(client, "task-confirm", again["token"], {"item": item, "answer": {"shown_choice": "b"}})
    assert Judgment.objects.get().extra["guess_choice"] == role


def test_an_abandoned_inhouse_pilot_page_keeps_its_guess_in_the_next_assignment(client):
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.PILOT, n_items=1)
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    first = page_config(client.get(path))
    item = first["items"][0]
    api(client, "task-confirm", first["token"],
        {"item": item, "step": "guess", "answer": {"shown_guess": "b"}})
    # Left open past the timeout: released, and the item goes out again, to the same worker.
    Assignment.objects.update(last_seen_at=timezone.now() - timedelta(days=2))
    assert assignment_release_abandoned() == 1
    again = page_config(client.get(path))
    assert again["token"] != first["token"] and again["items"] == [item]
    assert list(again["locked_guesses"]) == [str(item)]


def test_accepting_a_returned_hit_again_before_the_sync_continues_where_the_worker_left(client):
    """MTurk gives the worker a new assignmentId; the page said 'You already have an assignment
    for this HIT' until the next sync marked the first one returned."""
    project, stage, items = make_task(TaskKind.AB, n_items=2, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HIT1", max_assignments=2)
    first = page_config(client.get(mturk_url(stage, assignmentId="ASG1", hitId="HIT1",
                                             workerId="W1")))
    draft = {"answers": {str(items[0].pk): {"shown_choice": "B", "justification": "half"}}}
    assert api(client, "task-autosave", first["token"], {"draft": draft}).status_code == 200
    response = client.get(mturk_url(stage, assignmentId="ASG2", hitId="HIT1", workerId="W1"))
    assert response.status_code == 200
    again = page_config(response)
    old, new = Assignment.objects.get(external_id="ASG1"), Assignment.objects.get(
        external_id="ASG2")
    assert old.status == AssignmentStatus.RETURNED and "ASG2" in old.review_note
    # The typed answers come back from the browser that typed them (its storage under the
    # first assignment's key), never from the server: the URL's ids are not secret, and MTurk
    # cannot confirm an accepted assignment, so a stranger with W1's id would read them.
    assert "answers" not in again["draft"]
    assert again["continues_storage_key"] == f"qaj-draft-{old.pk}" != again["storage_key"]
    assert "half" not in response.content.decode()
    orders = {row.item_id: row.presented_order for row in old.assignmentitem_set.all()}
    assert {row.item_id: row.presented_order for row in new.assignmentitem_set.all()} == orders
    # Another worker's new assignment of the HIT leaves the first worker's alone.
    client.get(mturk_url(stage, assignmentId="ASG3", hitId="HIT1", workerId="W2"))
    assert Assignment.objects.get(external_id="ASG2").status == AssignmentStatus.IN_PROGRESS


def test_the_page_of_the_returned_copy_no_longer_saves_or_submits(client):
    """Left open in another tab, the first page's late submit was stored under an assignment
    MTurk had taken back (never paid), and the new one could then not be submitted at all."""
    project, stage, items = make_task(TaskKind.LIKERT, n_items=2, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HIT1", max_assignments=2)
    first = page_config(client.get(mturk_url(stage, assignmentId="ASG1", hitId="HIT1",
                                             workerId="W1")))
    again = page_config(client.get(mturk_url(stage, assignmentId="ASG2", hitId="HIT1",
                                             workerId="W1")))
    answers = {"answers": [{"item": item, "score": 4} for item in first["items"]]}
    for name, body in (("task-autosave", {"draft": {}}), ("task-submit", answers)):
        stale = api(client, name, first["token"], body)
        assert stale.status_code == 403 and "accepted this HIT again" in stale.json()["message"]
    assert not Judgment.objects.exists()
    assert api(client, "task-submit", again["token"], answers).status_code == 200
    assert set(Judgment.objects.values_list("assignment__external_id", flat=True)) == {"ASG2"}


def test_a_guess_locked_in_the_old_tab_is_the_guess_of_the_newer_page_too(client):
    """The page of a timed-out assignment still takes a guess (and serves the paragraph after
    it) while the worker's newer page, made before that guess, holds the same item: the newer
    page's guess step gives back the one locked first (`assignment_record_guess` reads
    `earlier_guesses` again), so a second guess after reading is never stored. Before, the
    worker read the paragraph in the old tab and then locked the correct answer as their
    'guess before reading' in the new one."""
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.PILOT, n_items=1)
    Item.objects.filter(pk=items[0].pk).update(gold={"choice": "A"})
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    old = page_config(client.get(path))
    item = old["items"][0]
    Assignment.objects.update(last_seen_at=timezone.now() - timedelta(days=2))
    assert assignment_release_abandoned() == 1
    new = page_config(client.get(path))
    assert new["items"] == [item] and new["locked_guesses"] == {}

    old_order = AssignmentItem.objects.get(assignment__status=AssignmentStatus.RETURNED,
                                           item_id=item).presented_order
    new_order = AssignmentItem.objects.get(assignment__status=AssignmentStatus.IN_PROGRESS,
                                           item_id=item).presented_order
    wrong = next(role for role in old_order if role != "A")
    read = api(client, "task-confirm", old["token"], {
        "item": item, "step": "guess", "answer": {"shown_guess": "abcd"[old_order.index(wrong)]}})
    assert read.status_code == 200 and read.json()["paragraph"]  # the paragraph, read

    second = api(client, "task-confirm", new["token"], {
        "item": item, "step": "guess", "answer": {"shown_guess": "abcd"[new_order.index("A")]}})
    assert second.status_code == 200
    assert second.json()["guess_shown"] == "abcd"[new_order.index(wrong)]
    final = api(client, "task-confirm", new["token"], {
        "item": item, "answer": {"shown_choice": "abcd"[new_order.index("A")]}})
    assert final.status_code == 200
    judgment = Judgment.objects.get()
    assert judgment.choice == "A" and judgment.extra["guess_choice"] == wrong
