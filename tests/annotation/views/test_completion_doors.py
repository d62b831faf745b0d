"""The completion code is shown only after a submission that can be paid: a Prolific session
Prolific says it does not know gets no study completion code, at any door that shows it."""
from __future__ import annotations

import pytest
from django.test import override_settings
from django.urls import reverse

from annotation.models import (
    Assignment,
    AssignmentStatus,
    ParticipantVerification,
    Provider,
    TaskKind,
)
from annotation.providers.prolific import ProlificProvider
from tests.support.tasks import api, make_task, page_config

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@override_settings(PROLIFIC_COMPLETION_URL="https://prolific.test/complete")
def test_a_session_prolific_does_not_know_gets_no_completion_code(client, monkeypatch):
    # Prolific cannot tell at the door (PENDING), then says after the submit: no such session.
    answers = iter([None])
    monkeypatch.setattr(ProlificProvider, "session_verify",
                        lambda self, **kw: next(answers, False))
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.PROLIFIC)
    stage.settings = {"prolific_study_id": "STUDY1", "prolific_completion_code": "C0DE42"}
    stage.save(update_fields=["settings"])
    url = (reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
           + "?PROLIFIC_PID=P1&STUDY_ID=STUDY1&SESSION_ID=S1")
    config = page_config(client.get(url))
    done = api(client, "task-submit", config["token"],
               {"answers": [{"item": item, "score": 3} for item in config["items"]]})
    assert done.status_code == 200
    assignment = Assignment.objects.get()
    assert (assignment.status, assignment.verification) == (
        AssignmentStatus.FLAGGED, ParticipantVerification.FAILED)
    for response in (client.get(done.json()["complete_url"]), client.get(url)):
        html = response.content.decode()
        assert response.status_code == 403
        assert "C0DE42" not in html and "prolific.test/complete" not in html
    assert "no completion code" in client.get(done.json()["complete_url"]).content.decode()


def _prolific(client, stage, session):
    url = (reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
           + f"?PROLIFIC_PID=P1&STUDY_ID=STUDY1&SESSION_ID={session}")
    return client.get(url)


@pytest.mark.parametrize("prolific_says", [True, None])
def test_a_participant_back_with_a_new_session_continues_under_it_when_prolific_vouches(
        client, monkeypatch, prolific_says):
    """Returned (or timed out) on Prolific and started again: Prolific lists the work under the
    new session only. The assignment stayed under the old one, so the sync found the new
    session with 'no local assignment' (flagged) and the work, under a returned session, was
    never confirmed, counted or paid."""
    monkeypatch.setattr(ProlificProvider, "session_verify", lambda self, **kw: True)
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.PROLIFIC)
    stage.settings = {"prolific_study_id": "STUDY1", "prolific_completion_code": "C0DE42"}
    stage.save(update_fields=["settings"])
    first = page_config(_prolific(client, stage, "S1"))
    monkeypatch.setattr(ProlificProvider, "session_verify", lambda self, **kw: prolific_says)
    if prolific_says is None:
        # A session Prolific cannot vouch for (None: unreachable) is not handed the task held
        # under S1: a PROLIFIC_PID is all a stranger needs. It may try again once Prolific
        # answers.
        refused = _prolific(client, stage, "S2")
        assert refused.status_code == 409 and b"could not confirm this session" in refused.content
        assert b"task-config" not in refused.content
        assert Assignment.objects.get().external_id == "S1"
        assert page_config(_prolific(client, stage, "S1"))["items"] == first["items"]
        return
    again = page_config(_prolific(client, stage, "S2"))
    assert again["items"] == first["items"]
    assignment = Assignment.objects.get()
    # A session Prolific cannot vouch for (None: unreachable) never takes the work over.
    assert assignment.external_id == ("S2" if prolific_says else "S1")
    # The old session's page reloaded (Prolific still knows it, as returned) does not take
    # the work back.
    monkeypatch.setattr(ProlificProvider, "session_verify", lambda self, **kw: True)
    assert page_config(_prolific(client, stage, "S1"))["items"] == first["items"]
    assert Assignment.objects.get().external_id == ("S2" if prolific_says else "S1")
    done = api(client, "task-submit", again["token"],
               {"answers": [{"item": item, "score": 3} for item in again["items"]]})
    assert done.status_code == 200
