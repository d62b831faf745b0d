"""A local Prolific rehearsal (docs/PROVIDERS.md, "Rehearse a study locally"), end to end in
process: QA Judge configured by exactly what `manage.py prolific_rehearsal` prints publishes a
qualification and a trial on the local Prolific fake; made-up participants open the fake's
participant page, take part (the fake sends them to our entry URL with PROLIFIC_PID, STUDY_ID and
SESSION_ID, and our page verifies the session with the fake), answer, and follow the completion
redirect back to the fake, which records the code; the sync verifies and approves. Also the
participant pages' refusals, and the command serving them until stopped."""
from __future__ import annotations

import html
import os
import re
import signal
import subprocess
import sys
from decimal import Decimal
from urllib.parse import urlsplit

import httpx
import pytest

from annotation.management.commands.prolific_rehearsal import rehearsal_env
from annotation.models import (
    Assignment,
    AssignmentStatus,
    StageKind,
    StageStatus,
    TaskKind,
    WorkerQualification,
)
from annotation.services.review import stage_sync_and_review
from annotation.services.stages import stage_publish
from testing.factories import make_item, make_project, make_stage
from testing.workers_sim import _submit, gold_score, scores_cycle, wrong_score
from tests.support.paths import REPO_ROOT

pytestmark = [pytest.mark.prolific, pytest.mark.django_db]


@pytest.fixture
def rehearsal(prolific_server, settings):
    """The fake, with QA Judge configured by the settings the command prints."""
    env = rehearsal_env(site_url=prolific_server.site_url,
                        public_base_url="https://qaj.example.org", token=prolific_server.token)
    for name, value in env.items():
        setattr(settings, name, value)
    return prolific_server


def participant(server) -> httpx.Client:
    """A participant's browser on the fake's pages (keeps the fake's cookie)."""
    return httpx.Client(base_url=server.site_url, follow_redirects=False, timeout=5)


def study_row(page: str, study_id: str) -> str:
    return page.split(f'data-study="{study_id}"')[1].split("</tr>")[0]


def take_part_and_answer(client, browser, *, stage, pid: str, study_id: str, answer_for) -> str:
    """Take part on the fake's page, do our task page, follow the completion link back to the
    fake; the fake's completion page."""
    page = browser.get("/participant/", params={"pid": pid}).text
    assert "Take part" in study_row(page, study_id)
    taken = browser.post("/participant/take-part", data={"study_id": study_id, "pid": pid})
    assert taken.status_code == 303, taken.text
    entry = urlsplit(taken.headers["location"])
    assert (entry.scheme, entry.netloc, entry.path) == (
        "https", "qaj.example.org", f"/task/prolific/{stage.pk}/")
    response = client.get(f"{entry.path}?{entry.query}")
    assert response.status_code == 200, response.content[:500]
    _submit(client, response, answer_for, 6.0)
    done = client.get(f"{entry.path}?{entry.query}").content.decode()  # the completion page
    link = html.unescape(re.search(r'id="prolific-return"[^>]*href="([^"]+)"', done).group(1))
    back = urlsplit(link)
    assert f"{back.scheme}://{back.netloc}" == browser.base_url.__str__().rstrip("/")
    completed = browser.get(f"{back.path}?{back.query}")
    assert completed.status_code == 200, completed.text
    return completed.text


def test_rehearse_a_qualification_and_trial_on_the_fake(rehearsal, researcher, client):
    state = rehearsal.state
    project = make_project(TaskKind.LIKERT, items_per_hit=5, reward_per_hit=Decimal("0.40"),
                           redundancy={"default": 2})
    for score in (2, 4, 5):
        make_item(project, gold={"score": score}, group_key="gold")
    for _ in range(5):
        make_item(project, group_key="p0")
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                               provider="prolific", order=1,
                               settings={"max_workers": 3, "n_items": 3})
    trial = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="prolific", order=2, requires_stage=qualification,
                       judgments_per_item=1,
                       settings={"n_items": 5, "review": {"min_seconds_per_item": 0}})

    result = stage_publish(stage=qualification, user=researcher)
    assert result.report.failed == 0, result.report.errors
    qualification.refresh_from_db()
    study_id = qualification.settings["prolific_study_id"]
    code = qualification.settings["prolific_completion_code"]

    browsers = {pid: participant(rehearsal) for pid in ("P1", "P2")}
    for pid, answer_for in (("P1", gold_score), ("P2", wrong_score)):
        page = take_part_and_answer(client, browsers[pid], stage=qualification, pid=pid,
                                    study_id=study_id, answer_for=answer_for)
        assert f'<strong id="code">{code}</strong>' in page
    submissions = {s["participant_id"]: s for s in state.submissions.values()}
    assert {pid: (s["status"], s["study_code"]) for pid, s in submissions.items()} == {
        "P1": ("AWAITING REVIEW", code), "P2": ("AWAITING REVIEW", code)}
    # Our entry page verified each session with the fake before creating the assignment.
    assert rehearsal.stats["GET submissions/<id>/"] == 2

    sync, review = stage_sync_and_review(stage=qualification)
    assert sync.listed == 2 and review.approved == 2
    assert {s["status"] for s in state.submissions.values()} == {"APPROVED"}
    assert set(Assignment.objects.filter(stage=qualification).values_list("status", flat=True)) \
        == {AssignmentStatus.APPROVED}
    passed = set(WorkerQualification.objects.filter(stage=qualification, passed=True)
                 .values_list("worker__external_id", flat=True))
    assert passed == {"P1"}
    page = browsers["P1"].get("/participant/", params={"pid": "P1"}).text
    assert '<td class="status">APPROVED</td>' in page

    # The trial is open to who passed only: the page says so and refuses the other.
    stage_publish(stage=trial, user=researcher)
    trial.refresh_from_db()
    trial_id = trial.settings["prolific_study_id"]
    row = study_row(browsers["P2"].get("/participant/", params={"pid": "P2"}).text, trial_id)
    assert '<td class="eligible">no</td>' in row and "disabled" in row
    refused = browsers["P2"].post("/participant/take-part", data={"study_id": trial_id,
                                                                  "pid": "P2"})
    assert refused.status_code == 403 and "not eligible" in refused.text
    take_part_and_answer(client, browsers["P1"], stage=trial, pid="P1", study_id=trial_id,
                         answer_for=scores_cycle([1, 3, 5, 2, 4]))
    sync, review = stage_sync_and_review(stage=trial)
    assert review.approved == 1
    (only,) = [s for s in state.submissions.values() if s["study_id"] == trial_id]
    assert (only["participant_id"], only["status"]) == ("P1", "APPROVED")


def test_participant_pages_refuse_clearly(rehearsal):
    state = rehearsal.state
    study = state.create_study(query={}, body={
        "name": "S", "description": "d", "prolific_id_option": "url_parameters",
        "external_study_url": "https://qaj.example.org/task/prolific/1/?PROLIFIC_PID="
                              "{{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID="
                              "{{%SESSION_ID%}}",
        "completion_codes": [{"code": "C0DE", "code_type": "COMPLETED"}],
        "total_available_places": 1, "estimated_completion_time": 5, "reward": 40})
    browser = participant(rehearsal)
    unpublished = browser.post("/participant/take-part", data={"study_id": study["id"],
                                                               "pid": "P1"})
    assert unpublished.status_code == 409 and "not active" in unpublished.text
    state.transition_study(query={}, body={"action": "PUBLISH"}, sid=study["id"])
    no_cookie = participant(rehearsal).get("/submissions/complete", params={"cc": "C0DE"})
    assert no_cookie.status_code == 400 and "Which participant?" in no_cookie.text
    assert browser.post("/participant/take-part",
                        data={"study_id": study["id"], "pid": "P1"}).status_code == 303
    again = browser.post("/participant/take-part", data={"study_id": study["id"], "pid": "P1"})
    assert again.status_code == 409 and "already took part" in again.text
    full = browser.post("/participant/take-part", data={"study_id": study["id"], "pid": "P2"})
    assert full.status_code == 409 and "study is full" in full.text
    wrong = browser.get("/submissions/complete", params={"cc": "NOPE"})
    assert wrong.status_code == 409 and "is not the completion code" in wrong.text
    (submission,) = state.submissions.values()
    assert submission["status"] == "ACTIVE"
    missing = browser.post("/participant/take-part", data={"study_id": "st404", "pid": "P3"})
    assert missing.status_code == 404 and "does not exist" in missing.text
    assert browser.get("/participant/").status_code == 200  # asks for a participant id
    assert browser.get("/api/v1/users/me/").status_code == 401  # the API still wants the token


def test_one_browser_switching_participants_completes_as_the_one_who_continues(rehearsal):
    state = rehearsal.state
    body = {"name": "S", "description": "d", "prolific_id_option": "url_parameters",
            "external_study_url": "https://qaj.example.org/t/?PROLIFIC_PID={{%PROLIFIC_PID%}}"
                                  "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}",
            "completion_codes": [{"code": "C0DE", "code_type": "COMPLETED"}],
            "total_available_places": 5, "estimated_completion_time": 5, "reward": 40}
    study = state.create_study(query={}, body=body)
    state.transition_study(query={}, body={"action": "PUBLISH"}, sid=study["id"])
    browser = participant(rehearsal)
    hostile = "<b>P1</b>"
    entries = {}
    for pid in (hostile, "P2"):
        taken = browser.post("/participant/take-part", data={"study_id": study["id"],
                                                             "pid": pid})
        assert taken.status_code == 303
        entries[pid] = taken.headers["location"]
    assert "?PROLIFIC_PID=%3Cb%3EP1%3C%2Fb%3E&STUDY_ID=" in entries[hostile]
    page = browser.get("/participant/", params={"pid": hostile}).text
    assert "<b>P1</b>" not in page and "&lt;b&gt;P1&lt;/b&gt;" in page
    link = html.unescape(re.search(r'class="continue" href="([^"]+)"', page).group(1))
    back = browser.get(link)  # P1 continues: the server remembers P1 again
    assert back.status_code == 303 and "%3Cb%3EP1" in back.headers["location"]
    assert browser.get("/submissions/complete", params={"cc": "C0DE"}).status_code == 200
    status = {s["participant_id"]: s["status"] for s in state.submissions.values()}
    assert status == {hostile: "AWAITING REVIEW", "P2": "ACTIVE"}
    gone = browser.get("/participant/continue", params={"study_id": study["id"],
                                                        "pid": hostile})
    assert gone.status_code == 404 and "no submission in progress" in gone.text


def test_rehearsal_command_serves_the_participant_pages_until_stopped(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path}/unused.sqlite3",
           "PROLIFIC_API_URL": "https://api.prolific.com/api/v1/", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "prolific_rehearsal", "--port", "0"], cwd=REPO_ROOT,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        while not any(line.startswith("Studies, submissions") for line in lines):
            line = process.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        output = "".join(lines)
        api = output.split("Local Prolific server (API): ")[1].split()[0]
        site = api.removesuffix("/api/v1/")
        assert f"export PROLIFIC_API_URL={api}\n" in output
        # A new random token each run, printed with the other settings.
        token = output.split("export PROLIFIC_API_TOKEN=")[1].split()[0]
        assert len(token) >= 20
        assert f"export PROLIFIC_COMPLETION_URL={site}/submissions/complete\n" in output
        assert "do not point at the rehearsal yet: PROLIFIC_API_URL" in output
        me = httpx.get(f"{api}users/me/", headers={"Authorization": f"Token {token}"})
        assert me.status_code == 200
        page = httpx.get(f"{site}/participant/", params={"pid": "P1"})
        assert page.status_code == 200 and 'id="participant">P1<' in page.text
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, rest
    assert "Stopped: 0 studies, 0 submissions" in rest


def test_rehearsal_command_refuses_an_empty_token_and_a_busy_port(rehearsal):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--token must not be empty"):
        call_command("prolific_rehearsal", "--port", "0", "--token", " ")
    busy = int(urlsplit(rehearsal.site_url).port)
    with pytest.raises(CommandError, match=f"Cannot listen on 127.0.0.1:{busy}"):
        call_command("prolific_rehearsal", "--port", str(busy))
