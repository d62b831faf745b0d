"""A participant who returns a Prolific study, or lets it time out, gives their place back to
the study (Prolific reopens it for another participant); the sync gives their items back with
it, once, so the participant who takes the reopened place has work (local Prolific fake)."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotation.models import AssignmentStatus
from annotation.selectors import judgments_that_count
from annotation.services.review import assignment_approve, stage_sync_and_review
from annotation.services.review.decisions import ReviewError
from annotation.services.stages import stage_close
from testing.workers_sim import (
    page_config,
    prolific_participant_submits,
    scores_cycle,
    spend_time,
)
from tests.annotation.providers.test_prolific_places import _study, _take_part, _trial

pytestmark = [pytest.mark.prolific, pytest.mark.django_db]


def _open(client, stage, study_id, pid, session):
    url = reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk}) + (
        f"?PROLIFIC_PID={pid}&STUDY_ID={study_id}&SESSION_ID={session}")
    return client.get(url)


@pytest.mark.reliability
def test_a_session_returned_or_timed_out_on_prolific_gives_its_items_back_once(
        prolific_server, likert_study, researcher, client):
    """P1 submits our page but times out on Prolific before entering the code; P2 opens the page,
    then returns the study. Prolific reopens both places; the sync gives both batches back (P1's
    submitted work flagged for the researcher, not counted; P2's released), once, and the
    participants who take the reopened places get the items. Was: the sync ignored returned and
    timed-out sessions: P1's five judgments counted, P2 held the items until the project's
    timeout, and P3, in a place Prolific reopened, read "Nothing more to do"."""
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher)  # 5 items x 2 judgments: 2 places
    study_id = _study(server, trial)["id"]
    s1 = server.state.participant_start(study_id, "P1")
    timed_out = prolific_participant_submits(
        client, stage=trial, pid="P1", study_id=study_id, session_id=s1,
        answer_for=scores_cycle([1, 2, 3]))
    server.state.submissions[s1]["status"] = "TIMED-OUT"
    s2 = server.state.participant_start(study_id, "P2")
    p2_page = page_config(_open(client, trial, study_id, "P2", s2))
    server.state.submissions[s2]["status"] = "RETURNED"

    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.given_back == 2
    timed_out.refresh_from_db()
    assert timed_out.status == AssignmentStatus.FLAGGED
    assert "timed out on Prolific" in timed_out.review_note
    returned = trial.assignments.get(external_id=s2)
    assert returned.status == AssignmentStatus.RETURNED
    assert not judgments_that_count(project=project).filter(stage=trial).exists()
    with pytest.raises(ReviewError):  # Prolific lists no completed submission to approve
        assignment_approve(assignment=timed_out, allow_flagged=True)

    again, _review = stage_sync_and_review(stage=trial)  # a repeated sync frees nothing twice
    assert again.given_back == 0
    notes = trial.assignments.get(external_id=s2).review_note
    assert notes.count("Returned or timed out on Prolific") == 1

    # The places Prolific reopened are taken, and their participants get the items.
    p3, p4 = (_take_part(server, client, trial, pid) for pid in ("P3", "P4"))
    assert {p3.items.count(), p4.items.count()} == {5}
    stage_sync_and_review(stage=trial)
    assert judgments_that_count(project=project).filter(stage=trial).count() == 10

    # P2's page, left open, may still submit late (as after our own timeout; Prolific lets a
    # timed-out participant complete), but the answers it brings are no longer needed and
    # the sync keeps a submission Prolific lists as returned out of the data.
    answers = [{"item": item, "time_spent_ms": 6000, "score": 3} for item in p2_page["items"]]
    client.post(reverse("annotation:task-submit"), data=json.dumps({"answers": answers}),
                content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=p2_page["token"])
    stage_sync_and_review(stage=trial)
    assert trial.assignments.get(external_id=s2).status in (AssignmentStatus.RETURNED,
                                                             AssignmentStatus.FLAGGED)
    assert judgments_that_count(project=project).filter(stage=trial).count() == 10


@pytest.mark.reliability
def test_a_screened_out_session_gives_its_place_back_and_lets_a_closed_study_reconcile(
        prolific_server, likert_study, researcher, client):
    """Prolific lists a participant screened out (paid the fixed screen-out reward) as
    "SCREENED OUT", and reopens the place: the sync releases their batch like a returned one's,
    and a closed stage whose last participant was screened out is reconciled. Was: the status
    was read as still active, so the batch stayed held and the closed stage read "1
    participant(s) still active on Prolific" at every sync, for ever."""
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher)
    study_id = _study(server, trial)["id"]
    session = server.state.participant_start(study_id, "P1")
    page_config(_open(client, trial, study_id, "P1", session))
    server.state.submissions[session]["status"] = "SCREENED OUT"
    stage_close(stage=trial, user=researcher)
    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.given_back == 1 and sync.active == 0
    assert trial.assignments.get(external_id=session).status == AssignmentStatus.RETURNED
    assert sync.reconciled, sync.open_reason


@pytest.mark.reliability
def test_a_participant_back_after_the_give_back_continues_their_batch(
        prolific_server, likert_study, researcher, client):
    """A participant whose returned session's batch the sync gave back, and who starts the
    study again under a session Prolific verifies for them, continues that batch under the new
    session (as one back before the sync does), and it is confirmed and counted. Was (with the
    give-back alone): a fresh batch, the answers confirmed under the returned session left
    uncounted."""
    server = prolific_server
    project, _gold, items = likert_study
    trial = _trial(project, items, researcher)
    study_id = _study(server, trial)["id"]
    first = server.state.participant_start(study_id, "P1")
    before = page_config(_open(client, trial, study_id, "P1", first))
    server.state.submissions[first]["status"] = "RETURNED"
    assert stage_sync_and_review(stage=trial)[0].given_back == 1
    # Prolific lets them start again: a new session (the fake refuses a second start).
    again = server.state.new_id("s")
    server.state.submissions[again] = {**server.state.submissions[first], "id": again,
                                       "status": "ACTIVE"}
    after = page_config(_open(client, trial, study_id, "P1", again))
    assert after["items"] == before["items"]
    batch = trial.assignments.get()
    assert (batch.external_id, batch.status) == (again, AssignmentStatus.IN_PROGRESS)
    spend_time(after, 6.0)
    answers = [{"item": item, "time_spent_ms": 6000, "score": 1 + n % 5}
               for n, item in enumerate(after["items"])]
    done = client.post(reverse("annotation:task-submit"), data=json.dumps({"answers": answers}),
                       content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=after["token"])
    assert done.status_code == 200 and done.json()["n_judgments"] == 5
    server.state.participant_complete(again, trial.settings["prolific_completion_code"])
    stage_sync_and_review(stage=trial)
    batch.refresh_from_db()
    assert batch.provider_confirmed_at is not None, batch.review_note
    assert batch.status == AssignmentStatus.APPROVED, batch.review_note
    assert judgments_that_count(project=project).filter(stage=trial).count() == 5
