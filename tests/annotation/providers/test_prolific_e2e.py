"""Qualification → trial → review on a local fake of Prolific's API, with rate limiting and
lost responses: one study per stage, an allow-list for qualified participants, paging through
every submission, approve/reject, a bonus paid once."""
from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Judgment,
    StageKind,
    StageStatus,
    WorkerQualification,
)
from annotation.services.review import assignment_bonus_pay, stage_sync_and_review
from annotation.services.stages import stage_publish
from testing.factories import make_item, make_stage
from testing.prolific_server import ApiError
from testing.workers_sim import (
    gold_score,
    page_config,
    prolific_participant_submits,
    scores_cycle,
    spend_time,
    wrong_score,
)
from tests.support.providers import make_stages

pytestmark = [pytest.mark.prolific, pytest.mark.django_db]


def test_qualification_trial_review_on_prolific(prolific_server, likert_study, researcher,
                                                client):
    server, state = prolific_server, prolific_server.state
    project, gold, _items = likert_study
    qualification, trial, _full = make_stages(project, "prolific")
    trial.settings.update({"review": {"auto_reject": True}})
    trial.save()

    server.rate_limit_next["POST studies/"] = 2
    server.lose_response_next["POST studies/"] = 1  # the study is made; the answer is lost
    result = stage_publish(stage=qualification, user=researcher)
    assert result.report.failed == 0, result.report.errors
    assert result.stage.status == StageStatus.COLLECTING
    assert len(state.studies) == 1  # the retry found the study instead of making a second
    qualification.refresh_from_db()
    study = state.studies[qualification.settings["prolific_study_id"]]
    assert study["status"] == "ACTIVE" and study["total_available_places"] == 6
    assert study["reward"] == 40
    assert study["external_study_url"].startswith(
        f"https://qaj.example.org/task/prolific/{qualification.pk}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}")
    code = qualification.settings["prolific_completion_code"]
    assert study["completion_codes"][0]["code"] == code

    for pid, answer_for in [("P1", gold_score), ("P2", gold_score), ("P3", wrong_score)]:
        session = state.participant_start(study["id"], pid)  # Prolific sends them to our page
        assignment = prolific_participant_submits(
            client, stage=qualification, pid=pid, study_id=study["id"], session_id=session,
            answer_for=answer_for)
        assert assignment.items.count() == 10  # the whole qualification on one page
        assert assignment.completion_code == code
        state.participant_complete(session, code)
    lost = state.participant_start(study["id"], "P4")  # completed on Prolific only
    state.participant_complete(lost, code)
    still_working = state.participant_start(study["id"], "P5")

    sync, review = stage_sync_and_review(stage=qualification)
    assert sync.listed == 5 and sync.flagged == 1 and sync.ignored == 1  # 3 pages of 2
    assert (review.graded, review.granted, review.approved) == (0, 3, 3)
    passed = set(WorkerQualification.objects.filter(stage=qualification, passed=True)
                 .values_list("worker__external_id", flat=True))
    assert passed == {"P1", "P2"}
    qualification.refresh_from_db()
    group = qualification.settings["prolific_participant_group_id"]
    assert state.groups[group] == {"P1", "P2"}
    assert Assignment.objects.get(external_id=lost).status == AssignmentStatus.FLAGGED
    assert state.submissions[lost]["status"] == "AWAITING REVIEW"  # never silently approved
    assert state.submissions[still_working]["status"] == "ACTIVE"

    # --- trial: only the allow-listed participants -----------------------------------------
    stage_publish(stage=trial, user=researcher)
    trial.refresh_from_db()
    trial_study = state.studies[trial.settings["prolific_study_id"]]
    assert trial_study["filters"] == [{"filter_id": "participant_group_allowlist",
                                       "selected_values": [group]}]
    with pytest.raises(ApiError, match="not eligible"):
        state.participant_start(trial_study["id"], "P3")
    trial_code = trial.settings["prolific_completion_code"]
    done = {}
    for pid, answer_for, seconds in [("P1", scores_cycle([1, 3, 5, 2, 4]), 7.0),
                                     ("P2", scores_cycle([3]), 0.4)]:
        session = state.participant_start(trial_study["id"], pid)
        done[pid] = prolific_participant_submits(
            client, stage=trial, pid=pid, study_id=trial_study["id"], session_id=session,
            answer_for=answer_for, seconds=seconds)
        state.participant_complete(session, trial_code)
    server.rate_limit_next["POST submissions/<id>/transition/"] = 1
    sync, review = stage_sync_and_review(stage=trial)
    assert (review.approved, review.rejected) == (1, 1)
    assert state.submissions[done["P1"].external_id]["status"] == "APPROVED"
    rejected = state.submissions[done["P2"].external_id]
    assert rejected["status"] == "REJECTED" and len(rejected["rejection_message"]) >= 100

    good = done["P1"]
    good.refresh_from_db()
    server.lose_response_next["POST bulk-bonus-payments/<id>/pay/"] = 1
    assignment_bonus_pay(assignment=good, amount=Decimal("0.50"), reason="thanks", key="x")
    assignment_bonus_pay(assignment=good, amount=Decimal("0.50"), reason="thanks", key="x")
    assert [(p["participant_id"], p["amount"]) for p in state.payments] == [
        ("P1", Decimal("0.50"))]
    good.refresh_from_db()
    assert good.bonus_paid == Decimal("0.50")


def test_comprehension_check_second_attempt_and_return_on_prolific(prolific_server,
                                                                   likert_study, researcher,
                                                                   client):
    """A practice item is the study's comprehension check: one participant fails it once and
    passes on the second attempt; another fails twice, is asked to return the study (no
    completion code), returns it on Prolific, and is never rejected."""
    state = prolific_server.state
    project, _gold, _items = likert_study
    practice = make_item(project, gold={"score": 3}, is_practice=True, group_key="practice")
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="prolific", judgments_per_item=1,
                       settings={"n_items": 5, "review": {"auto_reject": True}})
    stage_publish(stage=stage, user=researcher)
    stage.refresh_from_db()
    study = state.studies[stage.settings["prolific_study_id"]]
    code = stage.settings["prolific_completion_code"]

    def open_page(pid, session):
        return client.get(reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk}),
                          {"PROLIFIC_PID": pid, "STUDY_ID": study["id"], "SESSION_ID": session})

    def submit(config, practice_score):
        spend_time(config, 6)  # the server measures time on task from the page's first view
        answers = [{"item": item_id, "time_spent_ms": 6000,
                    "score": practice_score if item_id == practice.pk else 1 + item_id % 5}
                   for item_id in config["items"]]
        return client.post(reverse("annotation:task-submit"), data=json.dumps({"answers": answers}),
                           content_type="application/json",
                           HTTP_X_ASSIGNMENT_TOKEN=config["token"])

    sessions = {}
    for pid, second_score in [("P1", 3), ("P2", 5)]:
        sessions[pid] = session = state.participant_start(study["id"], pid)
        config = page_config(open_page(pid, session))
        assert config["items"][0] == practice.pk
        first = submit(config, 1)
        assert first.status_code == 400 and list(first.json()["errors"]) == [str(practice.pk)]
        # A reload keeps the attempt: the page says a second attempt is under way.
        assert list(page_config(open_page(pid, session))["retry"]) == [str(practice.pk)]
        second = submit(config, second_score)
        if pid == "P1":
            assert second.status_code == 200
            state.participant_complete(session, code)
        else:
            assert second.status_code == 409 and second.json()["return_study"]
            page = open_page(pid, session).content.decode()
            assert "return this study on Prolific" in page and code not in page
            state.submissions[session]["status"] = "RETURNED"  # the participant returns it

    sync, review = stage_sync_and_review(stage=stage)
    assert (review.approved, review.rejected) == (1, 0)
    assert state.submissions[sessions["P1"]]["status"] == "APPROVED"
    assert state.submissions[sessions["P2"]]["status"] == "RETURNED"
    returned = Assignment.objects.get(external_id=sessions["P2"])
    assert returned.status == AssignmentStatus.RETURNED and not returned.completion_code
    assert list(Judgment.objects.filter(assignment=returned).values_list("item_id", flat=True)) \
        == [practice.pk]
