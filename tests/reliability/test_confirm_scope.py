"""The confirm door (one item's judgment stored before the rest of the page) takes only the
pages that confirm one item at a time: STARC QA, guessing and pilot
(`annotation.domain.answers.confirms_per_item`, the rule the page config reads too). Likert,
A/B and STARC validity pages submit their answers together, through the submit door and its
checks; a hand-made confirm of one of their items is refused and stores nothing."""
from __future__ import annotations

import pytest

from annotation.models import Assignment, ExperimentMode, Judgment, TaskKind
from annotation.services.access import inhouse_link_create
from annotation.services.assignments import SubmissionInvalid, assignment_confirm_item
from testing.factories import make_worker
from tests.support.tasks import ab_answer, api, make_task, page_config

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _page(client, kind: str, mode: str = ""):
    project, stage, items = make_task(kind, mode=mode, n_items=2)
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    return page_config(client.get(path)), items


def _answer(kind: str, mode: str, item) -> dict:
    """A valid answer of the page (its labels as shown), without the item id."""
    if kind == TaskKind.LIKERT:
        return {"score": 4, "time_spent_ms": 5000}
    if kind == TaskKind.AB:
        answer = ab_answer(Assignment.objects.get(), item)
        answer.pop("item")
        return answer
    return {"validity": "one", "shown_choices": ["a"], "time_spent_ms": 5000}


@pytest.mark.parametrize(("kind", "mode"), [(TaskKind.LIKERT, ""), (TaskKind.AB, ""),
                                            (TaskKind.MC, ExperimentMode.VALIDITY)])
def test_a_page_that_submits_together_cannot_store_its_items_one_by_one(client, kind, mode):
    """Before: a scripted worker stored a Likert score or an A/B preference per call, never
    submitting the page (an in-progress assignment's judgments count): no "Answer this item"
    for the rest, nothing the submit checks for the page as a whole."""
    config, items = _page(client, kind, mode)
    assert config["confirm_per_item"] is False
    response = api(client, "task-confirm", config["token"],
                   {"item": items[0].pk, "answer": _answer(kind, mode, items[0])})
    assert response.status_code == 400, response.content
    assert "submits its answers together" in response.json()["message"]
    assert not Judgment.objects.exists()
    # The service refuses the same way (the rule is kept below the view).
    with pytest.raises(SubmissionInvalid, match="need attention") as exc:
        assignment_confirm_item(assignment=Assignment.objects.get(), item=items[0],
                                answer=_answer(kind, mode, items[0]))
    assert "submits its answers together" in exc.value.message
    assert not Judgment.objects.exists()
    # The page's own way still works: every answer at once.
    submitted = api(client, "task-submit", config["token"], {"answers": [
        {"item": item.pk, **_answer(kind, mode, item)} for item in items]})
    assert submitted.status_code == 200, submitted.content
    assert Judgment.objects.count() == 2


@pytest.mark.parametrize("mode", [ExperimentMode.QA, ExperimentMode.GUESSING])
def test_starc_qa_and_guessing_pages_still_confirm_each_item(client, mode):
    config, items = _page(client, TaskKind.MC, mode)
    assert config["confirm_per_item"] is True
    for item in items:
        response = api(client, "task-confirm", config["token"],
                       {"item": item.pk, "answer": {"shown_choice": "a"}})
        assert response.status_code == 200, response.content
        assert response.json()["feedback"]["confirmed"] is True
    assert Judgment.objects.count() == 2
    done = api(client, "task-submit", config["token"], {"answers": []})
    assert done.status_code == 200 and done.json()["ok"]


def test_the_starc_pilot_still_confirms_its_guess_then_its_answer(client):
    config, items = _page(client, TaskKind.MC, ExperimentMode.PILOT)
    assert config["confirm_per_item"] is True
    token, item = config["token"], items[0].pk
    guess = api(client, "task-confirm", token,
                {"item": item, "step": "guess", "answer": {"shown_guess": "c"}})
    assert guess.status_code == 200 and guess.json()["paragraph"]
    final = api(client, "task-confirm", token, {"item": item, "answer": {"shown_choice": "a"}})
    assert final.status_code == 200, final.content
    assert Judgment.objects.get().item_id == item
