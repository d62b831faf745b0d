"""Prolific comprehension checks (a Prolific stage's practice items): a wrong answer gets one
more attempt, kept on the assignment; after a second wrong answer the participant is asked to
return the study, nothing more is served, and review never rejects them for it. Other
providers keep a single attempt."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.domain.answers import MC_SHOWN
from annotation.models import (
    AssignmentItem,
    AssignmentStatus,
    ExperimentMode,
    Judgment,
    Provider,
    StageStatus,
    TaskKind,
)
from annotation.services.access import assignment_token_make
from annotation.services.assignments import (
    ReturnRequested,
    SubmissionInvalid,
    assignment_confirm_item,
    assignment_page_state,
    assignment_save_draft,
    assignment_start,
    assignment_submit,
)
from annotation.services.review import ASKED_TO_RETURN, assignment_review_rules
from annotation.task_selectors import assignment_feedback
from testing.factories import make_item, make_stage, make_worker
from tests.support.tasks import make_task

pytestmark = pytest.mark.django_db


def _task(kind=TaskKind.MC, *, provider=Provider.PROLIFIC, **fields):
    """A stage of `provider` whose assignments start with one practice item (gold: role A for
    MC, score 4 for Likert) followed by one regular item."""
    if kind == TaskKind.MC:
        fields.setdefault("mode", ExperimentMode.QA)
    project, _, items = make_task(kind, n_items=1, items_per_hit=2, group="", **fields)
    practice = make_item(project, is_practice=True, gold=items[0].gold,
                         content=dict(items[0].content))
    stage = make_stage(project, status=StageStatus.PUBLISHED, provider=provider)
    worker = make_worker(provider=provider)
    assignment = assignment_start(stage=stage, worker=worker, external_id="SESSION-1")
    assert [row.item_id for row in AssignmentItem.objects.filter(assignment=assignment)
            .order_by("position")] == [practice.pk, items[0].pk]
    return stage, worker, assignment, practice, items[0]


def _shown(assignment, item, role: str) -> str:
    order = AssignmentItem.objects.get(assignment=assignment, item=item).presented_order
    return MC_SHOWN[order.index(role)]


def _confirm(assignment, item, role):
    return assignment_confirm_item(assignment=assignment, item=item,
                                   answer={"shown_choice": _shown(assignment, item, role)})


def test_a_wrong_comprehension_answer_gets_a_second_attempt_kept_with_the_judgment():
    stage, worker, assignment, practice, regular = _task()
    assert _confirm(assignment, practice, "B") is None
    assert not Judgment.objects.exists()
    feedback = assignment_feedback(assignment=assignment, item_id=practice.pk)
    # Right or wrong only: the correct answer is not revealed before the last attempt.
    assert feedback == {"retry": True, "is_correct": False, "message": feedback["message"]}
    # The attempt survives a reload and the page's autosave.
    assignment_save_draft(assignment=assignment, draft={"answers": {}})
    assignment.refresh_from_db()
    assert list(assignment_page_state(assignment=assignment)["retry"]) == [str(practice.pk)]
    assert assignment_start(stage=stage, worker=worker, external_id="SESSION-1") == assignment

    judgment = _confirm(assignment, practice, "A")
    assert judgment.extra["is_correct"] is True
    assert [attempt["choice"] for attempt in judgment.extra["attempts"]] == ["B"]
    assignment.refresh_from_db()
    assert assignment_page_state(assignment=assignment)["retry"] == {}
    _confirm(assignment, regular, "C")
    assert len(assignment_submit(assignment=assignment, answers=[])) == 2
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED


def test_failing_twice_asks_the_participant_to_return_and_serves_nothing_more():
    stage, worker, assignment, practice, regular = _task()
    assert _confirm(assignment, practice, "B") is None
    judgment = _confirm(assignment, practice, "C")  # the second answer is the judgment
    assert judgment.choice == "C" and judgment.extra["is_correct"] is False
    assert [attempt["choice"] for attempt in judgment.extra["attempts"]] == ["B"]
    assert assignment_feedback(assignment=assignment, item_id=practice.pk)["return_study"]
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.RETURNED and not assignment.completion_code
    assert "Asked to return" in assignment.review_note
    with pytest.raises(ReturnRequested):
        _confirm(assignment, regular, "A")
    with pytest.raises(ReturnRequested):
        assignment_submit(assignment=assignment, answers=[])
    with pytest.raises(ReturnRequested):
        assignment_save_draft(assignment=assignment, draft={})
    for session in ("SESSION-1", "SESSION-2"):  # a reload, or a new session
        with pytest.raises(ReturnRequested):
            assignment_start(stage=stage, worker=worker, external_id=session)
    assert Judgment.objects.count() == 1


def test_other_providers_keep_a_single_attempt():
    stage, worker, assignment, practice, regular = _task(provider=Provider.INHOUSE)
    judgment = _confirm(assignment, practice, "B")
    assert judgment.extra["is_correct"] is False and "attempts" not in judgment.extra
    _confirm(assignment, regular, "A")
    assert len(assignment_submit(assignment=assignment, answers=[])) == 2


def test_submit_without_per_item_confirm_gives_a_second_attempt_then_asks_to_return():
    stage, worker, assignment, practice, regular = _task(TaskKind.LIKERT)
    answers = [{"item": practice.pk, "score": 1}, {"item": regular.pk, "score": 3}]
    first = assignment_submit(assignment=assignment, answers=answers)
    assert list(first) == [] and list(first.retry) == [str(practice.pk)]
    assert not Judgment.objects.exists()
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.IN_PROGRESS and not assignment.completion_code

    answers[0]["score"] = 2
    second = assignment_submit(assignment=assignment, answers=answers)
    assert second.return_requested and not second.retry
    # Only the comprehension check is stored; the regular item is freed for others.
    [judgment] = Judgment.objects.all()
    assert judgment.item == practice and judgment.score == 2
    assert [attempt["score"] for attempt in judgment.extra["attempts"]] == [1]
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.RETURNED and not assignment.completion_code


@pytest.mark.reliability
def test_a_database_error_storing_the_checks_is_not_reported_as_already_judged():
    """Only the unique judgment per worker, item and stage means "already judged"; NaN in
    client_meta (which the task API refuses) fails SQLite's JSON check instead."""
    from django.db import DatabaseError

    stage, worker, assignment, practice, regular = _task(TaskKind.LIKERT)
    answers = [{"item": practice.pk, "score": 1}, {"item": regular.pk, "score": 3}]
    assert assignment_submit(assignment=assignment, answers=answers).retry
    answers[0]["score"] = 2  # the second attempt, wrong again: the checks are stored
    with pytest.raises(DatabaseError):
        assignment_submit(assignment=assignment, answers=answers,
                          client_meta={"width": float("nan")})
    assert not Judgment.objects.exists()


def test_a_right_second_answer_at_submit_completes_the_assignment():
    stage, worker, assignment, practice, regular = _task(TaskKind.LIKERT)
    answers = [{"item": practice.pk, "score": 5}, {"item": regular.pk, "score": 3}]
    assert assignment_submit(assignment=assignment, answers=answers).retry
    answers[0]["score"] = 4
    judgments = assignment_submit(assignment=assignment, answers=answers)
    assert len(judgments) == 2 and not judgments.retry
    assert judgments[0].extra["attempts"][0]["score"] == 5


def test_review_never_rejects_a_prolific_submission_for_failed_comprehension_checks():
    # Submitted on an in-house stage (one attempt), then reviewed as in-house and as Prolific.
    stage, worker, assignment, practice, regular = _task(provider=Provider.INHOUSE)
    for item in (practice, regular):
        item.is_gold_check = True
        item.save(update_fields=["is_gold_check"])
    _confirm(assignment, practice, "B")
    _confirm(assignment, regular, "B")
    assignment_submit(assignment=assignment, answers=[])
    stage.settings = {"review": {"auto_reject": True}}
    stage.save(update_fields=["settings"])
    assignment.refresh_from_db()
    assert assignment_review_rules(assignment=assignment).action == "reject"
    stage.provider = Provider.PROLIFIC
    stage.save(update_fields=["provider"])
    assignment.refresh_from_db()
    decision = assignment_review_rules(assignment=assignment)
    assert decision.action == "hold" and decision.reasons == [ASKED_TO_RETURN]


def test_confirm_and_submit_endpoints_retry_then_ask_to_return(client):
    stage, worker, assignment, practice, regular = _task()
    headers = {"HTTP_X_ASSIGNMENT_TOKEN": assignment_token_make(assignment=assignment)}

    def confirm(role):
        return client.post(reverse("annotation:task-confirm"), content_type="application/json",
                           data={"item": practice.pk,
                                 "answer": {"shown_choice": _shown(assignment, practice, role)}},
                           **headers)

    first = confirm("B").json()
    assert first["ok"] and first["feedback"]["retry"] and "correct_shown" not in first["feedback"]
    second = confirm("D").json()
    assert second["ok"] and "return the study on Prolific" in second["feedback"]["return_study"]
    submit = client.post(reverse("annotation:task-submit"), content_type="application/json",
                         data={"answers": []}, **headers)
    assert submit.status_code == 409 and submit.json()["return_study"]
    page = client.get(reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk}),
                      {"PROLIFIC_PID": worker.external_id, "STUDY_ID": "S1",
                       "SESSION_ID": "SESSION-1"})
    body = page.content.decode()
    assert page.status_code == 200 and "Please return this study on Prolific" in body
    assert "completion code is" not in body and 'id="task-config"' not in body


def test_invalid_answers_are_not_counted_as_attempts():
    stage, worker, assignment, practice, regular = _task()
    with pytest.raises(SubmissionInvalid):
        assignment_confirm_item(assignment=assignment, item=practice, answer={})
    assignment.refresh_from_db()
    assert assignment_page_state(assignment=assignment)["retry"] == {}


@pytest.mark.reliability
def test_a_first_wrong_answer_sent_again_is_not_the_second_attempt(client):
    """A confirm whose answer was lost on the way back: the page says "Confirm again in a
    moment" with the wrong option still checked, and the participant presses again. That is the
    first attempt sent again, not a second one: the participant is told it was wrong (they never
    were) and keeps their second attempt. Was: the repeat was read as the second wrong answer and
    the participant, never told to try again, was asked to return the study. The same at the
    submit door (a Submit pressed again with the answers unchanged)."""
    stage, worker, assignment, practice, regular = _task()
    headers = {"HTTP_X_ASSIGNMENT_TOKEN": assignment_token_make(assignment=assignment)}

    def confirm(role, spent):
        return client.post(reverse("annotation:task-confirm"), content_type="application/json",
                           data={"item": practice.pk, "answer": {
                               "shown_choice": _shown(assignment, practice, role),
                               "time_spent_ms": spent, "retry_seen": False}}, **headers).json()

    first = confirm("B", 4000)
    assert first["ok"] and first["feedback"]["retry"], first
    again = confirm("B", 9000)  # the same answer, sent again later by a page never told
    assert again["ok"] and again["feedback"]["retry"], again
    assert "return_study" not in again["feedback"] and not Judgment.objects.exists()
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.IN_PROGRESS
    second = confirm("C", 12000)  # the second attempt, wrong again
    assert "return the study on Prolific" in second["feedback"]["return_study"]
    [judgment] = Judgment.objects.all()
    assert [attempt["choice"] for attempt in judgment.extra["attempts"]] == ["B"]

    # The submit door: the same wrong Likert check submitted twice is one attempt.
    stage, worker, assignment, practice, regular = _task(TaskKind.LIKERT)
    headers = {"HTTP_X_ASSIGNMENT_TOKEN": assignment_token_make(assignment=assignment)}
    answers = [{"item": practice.pk, "score": 1, "retry_seen": False},
               {"item": regular.pk, "score": 3}]
    for _ in range(2):
        submit = client.post(reverse("annotation:task-submit"), content_type="application/json",
                             data={"answers": answers}, **headers)
        assert submit.status_code == 400 and submit.json()["retry"], submit.content
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.IN_PROGRESS
    assert not Judgment.objects.filter(assignment=assignment).exists()
    answers[0]["score"] = 4  # right at the second attempt
    done = client.post(reverse("annotation:task-submit"), content_type="application/json",
                       data={"answers": answers}, **headers)
    assert done.status_code == 200 and done.json()["n_judgments"] == 2, done.content


@pytest.mark.parametrize("seen", [True, None])
@pytest.mark.parametrize("door", ["confirm", "submit"])
def test_the_same_wrong_answer_chosen_again_after_being_told_is_the_second_attempt(
        client, door, seen):
    """"That answer was not right": the page clears the options and the participant picks the
    same wrong one again. That is the second attempt (the page says it told them:
    `retry_seen`), so they are asked to return the study; was: read as the first attempt
    resent, "try again" for ever, the participant stuck until the study timed out. A request
    that does not say whether it was told is held to the rule too."""
    stage, worker, assignment, practice, regular = _task(
        TaskKind.MC if door == "confirm" else TaskKind.LIKERT)
    headers = {"HTTP_X_ASSIGNMENT_TOKEN": assignment_token_make(assignment=assignment)}

    def send(told):
        flag = {} if told is None else {"retry_seen": told}
        if door == "confirm":
            return client.post(reverse("annotation:task-confirm"),
                               content_type="application/json", data={
                                   "item": practice.pk, "answer": {
                                       "shown_choice": _shown(assignment, practice, "B"),
                                       **flag}}, **headers).json()
        return client.post(reverse("annotation:task-submit"),
                           content_type="application/json", data={"answers": [
                               {"item": practice.pk, "score": 1, **flag},
                               {"item": regular.pk, "score": 3}]}, **headers).json()

    first = send(False)
    assert (first["feedback"]["retry"] if door == "confirm" else first["retry"]), first
    second = send(seen)
    said = second["feedback"] if door == "confirm" else second
    assert "return the study on Prolific" in said["return_study"], (seen, second)
