"""Qualification → trial → review on a local fake of Prolific's API, with rate limiting and
lost responses: one study per stage, an allow-list for qualified participants, paging through
every submission, approve/reject, a bonus paid once."""
from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.models import (
    Assignment,
    AssignmentStatus,
    StageStatus,
    WorkerQualification,
)
from annotation.services.review import assignment_bonus_pay, stage_sync_and_review
from annotation.services.stages import stage_publish

from .conftest import make_stages
from .prolific_server import ApiError
from .workers_sim import gold_score, prolific_participant_submits, scores_cycle, wrong_score

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
