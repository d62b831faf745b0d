"""The message actions open a compose page first: subject and message as fields, who receives
it (the selected workers, or the active workers who passed a stage's qualification), bad input
refused with what is wrong; nothing is sent until "Send the message"."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Provider, StageKind, TaskKind, WorkerQualification, WorkerStatus
from testing.factories import make_project, make_stage, make_user, make_worker

pytestmark = [pytest.mark.django_db, pytest.mark.prolific]


@pytest.fixture
def admin_client_(client):
    client.force_login(make_user(superuser=True))
    return client


def act(client, model: str, action: str, ids, **fields):
    url = reverse(f"admin:annotation_{model}_changelist")
    data = {"action": action, "_selected_action": [str(i) for i in ids], "index": "0", **fields}
    return client.post(url, data, follow=True)


def test_worker_message_is_composed_previewed_then_sent(admin_client_, prolific_server):
    workers = [make_worker(provider=Provider.PROLIFIC, external_id=f"P{n}") for n in range(2)]
    ids = [w.pk for w in workers]
    page = act(admin_client_, "worker", "notify_workers", ids, reason="Draft text")
    html = page.content.decode()
    assert page.templates[0].name == "admin/annotation/worker_message.html"
    assert 'id="recipient-count">2<' in html and "2 on prolific" in html
    assert "<td>P0</td>" in html and "<td>P1</td>" in html
    assert 'value="Message from the researchers"' in html and "\nDraft text</textarea>" in html
    assert prolific_server.state.messages == []  # nothing sent by opening the page

    refused = [
        ({"message_subject": "", "message_body": "Hi"}, "Type a subject."),
        ({"message_subject": "S", "message_body": "  "}, "Type the message."),
        ({"message_subject": "S" * 201, "message_body": "Hi"},
         "Ensure this value has at most 200 characters (it has 201)."),
        ({"message_subject": "S", "message_body": "a\x07b"},
         "The message holds control characters (U+0007)"),
    ]
    for fields, error in refused:
        response = act(admin_client_, "worker", "notify_workers", ids, confirm_send="yes",
                       **fields)
        assert error in response.content.decode(), fields
        assert 'id="recipient-count">2<' in response.content.decode()
    assert prolific_server.state.messages == []

    done = act(admin_client_, "worker", "notify_workers", ids, confirm_send="yes",
               message_subject="Bonus paid", message_body="Thanks for the careful work.")
    assert any("Messaged 2 worker(s)" in str(m) for m in done.context["messages"])
    sent = prolific_server.state.messages
    assert sorted(m["recipient_id"] for m in sent) == ["P0", "P1"]
    assert all(m["body"] == "Bonus paid\n\nThanks for the careful work." for m in sent)


def test_qualified_workers_message_previews_who_passed(admin_client_, prolific_server):
    project = make_project(TaskKind.LIKERT, title="Judging answers")
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, provider="prolific")
    trial = make_stage(project, kind=StageKind.TRIAL, provider="prolific",
                       requires_stage=qualification)
    for pid, passed, status in [("PASS1", True, WorkerStatus.ACTIVE),
                                ("FAIL1", False, WorkerStatus.ACTIVE),
                                ("BLOCK1", True, WorkerStatus.BLOCKED)]:
        WorkerQualification.objects.create(
            worker=make_worker(provider="prolific", external_id=pid, status=status),
            stage=qualification, passed=passed, score=1.0 if passed else 0.1)
    html = act(admin_client_, "stage", "notify_qualified_workers",
               [trial.pk, qualification.pk]).content.decode()
    assert 'id="recipient-count">1<' in html and "<td>PASS1</td>" in html
    assert "FAIL1" not in html and "BLOCK1" not in html
    assert 'value="New work: Judging answers"' in html
    assert "requires no qualification: nobody is messaged for it" in html
    assert prolific_server.state.messages == []

    act(admin_client_, "stage", "notify_qualified_workers", [trial.pk], confirm_send="yes",
        message_subject="The trial is open", message_body="200 answers to judge.")
    (sent,) = prolific_server.state.messages
    assert sent["recipient_id"] == "PASS1"
    assert sent["body"] == "The trial is open\n\n200 answers to judge."
