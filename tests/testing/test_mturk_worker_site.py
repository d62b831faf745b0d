"""The worker side of the local MTurk-protocol server over HTTP (testing/mturk_worker_site.py):
the HIT list, accept under MTurk's rules, the redirect to the ExternalQuestion page, and
/mturk/externalSubmit; and `manage.py mturk_rehearsal` serving it until stopped."""
from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from testing.mturk_server import MTurkServer
from tests.support.paths import REPO_ROOT

TASK_URL = "https://qaj.example.org/task/mturk/7/?from=mturk&amp;v=1"
QUAL_TYPE_REQUIREMENT = "Q" * 20


@pytest.fixture
def server():
    with MTurkServer() as srv:
        yield srv


def make_hit(state, *, title="Judge answers", max_assignments=2, requirements=()) -> str:
    hit_type = state.CreateHITType({
        "Title": title, "Description": "d", "Reward": "0.40",
        "AssignmentDurationInSeconds": 600, "AutoApprovalDelayInSeconds": 3600,
        "QualificationRequirements": list(requirements),
    })["HITTypeId"]
    question = ('<ExternalQuestion xmlns="x"><ExternalURL>' + TASK_URL
                + "</ExternalURL><FrameHeight>0</FrameHeight></ExternalQuestion>")
    return state.CreateHITWithHITType({
        "HITTypeId": hit_type, "Question": question, "MaxAssignments": max_assignments,
        "LifetimeInSeconds": 3600,
    })["HIT"]["HITId"]


def request(server, method: str, path: str, fields: dict | None = None):
    """(status, headers, body) without following redirects, as a browser's first hop."""
    host, port = urlsplit(server.url).netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    body = urlencode(fields) if fields is not None else None
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    result = response.status, dict(response.getheaders()), response.read().decode()
    conn.close()
    return result


def accept(server, hit_id: str, worker_id: str):
    return request(server, "POST", "/worker/accept", {"hitId": hit_id, "workerId": worker_id})


def test_hit_list_shows_open_hits_and_whether_the_worker_qualifies(server):
    state = server.state
    state.CreateQualificationType({"Name": "passed", "Description": "d",
                                   "QualificationTypeStatus": "Active"})
    type_id = next(iter(state.qualification_types))
    open_hit = make_hit(state, title="Qualification HIT")
    guarded = make_hit(state, title="Trial HIT", requirements=[{
        "QualificationTypeId": type_id, "Comparator": "GreaterThanOrEqualTo",
        "IntegerValues": [80], "ActionsGuarded": "DiscoverPreviewAndAccept"}])
    state.AssociateQualificationWithWorker({"QualificationTypeId": type_id, "WorkerId": "WOK",
                                            "IntegerValue": 90})

    status, _, page = request(server, "GET", "/worker/?workerId=WNEW")
    assert status == 200
    assert "Qualification HIT" in page and "Trial HIT" in page and "$0.40" in page
    row = page.split(f'data-hit="{guarded}"')[1].split("</tr>")[0]
    assert '<td class="qualified">no</td>' in row and "disabled" in row
    row = page.split(f'data-hit="{open_hit}"')[1].split("</tr>")[0]
    assert '<td class="qualified">yes</td>' in row and "disabled" not in row
    assert '<td class="available">2</td>' in row

    _, _, page = request(server, "GET", "/worker/?workerId=WOK")
    row = page.split(f'data-hit="{guarded}"')[1].split("</tr>")[0]
    assert '<td class="qualified">yes</td>' in row

    status, _, page = request(server, "GET", "/worker/")
    assert status == 200 and 'name="workerId"' in page


def test_accept_redirects_to_the_external_question_as_mturk_opens_it(server):
    state = server.state
    hit_id = make_hit(state)
    status, headers, _ = accept(server, hit_id, "W1")
    assert status == 303
    location = urlsplit(headers["Location"])
    assert (location.scheme, location.netloc, location.path) == (
        "https", "qaj.example.org", "/task/mturk/7/")
    query = {k: v[0] for k, v in parse_qs(location.query).items()}
    (assignment_id,) = state.assignments
    assert query == {"from": "mturk", "v": "1", "assignmentId": assignment_id, "hitId": hit_id,
                     "turkSubmitTo": server.url, "workerId": "W1"}
    assert state.assignments[assignment_id]["AssignmentStatus"] == "Accepted"
    _, _, page = request(server, "GET", "/worker/?workerId=W1")
    assert f'data-assignment="{assignment_id}"' in page and "Continue" in page
    assert '<td class="available">1</td>' in page

    status, headers, _ = request(server, "GET", f"/worker/preview?hitId={hit_id}")
    assert status == 303
    preview = {k: v[0] for k, v in parse_qs(urlsplit(headers["Location"]).query).items()}
    assert preview["assignmentId"] == "ASSIGNMENT_ID_NOT_AVAILABLE"
    assert "workerId" not in preview and "turkSubmitTo" not in preview


def test_accept_is_refused_without_the_qualification(server):
    state = server.state
    state.CreateQualificationType({"Name": "passed", "Description": "d",
                                   "QualificationTypeStatus": "Active"})
    type_id = next(iter(state.qualification_types))
    hit_id = make_hit(state, requirements=[{
        "QualificationTypeId": type_id, "Comparator": "GreaterThanOrEqualTo",
        "IntegerValues": [80], "ActionsGuarded": "DiscoverPreviewAndAccept"}])
    state.AssociateQualificationWithWorker({"QualificationTypeId": type_id, "WorkerId": "WLOW",
                                            "IntegerValue": 50})
    for worker_id in ("WNEW", "WLOW"):
        status, _, page = accept(server, hit_id, worker_id)
        assert status == 403
        assert f"Worker {worker_id} does not meet the qualification requirements" in page
    assert state.assignments == {}


def test_a_second_accept_and_accepts_beyond_max_assignments_are_refused(server):
    state = server.state
    hit_id = make_hit(state, max_assignments=2)
    assert accept(server, hit_id, "W1")[0] == 303
    status, _, page = accept(server, hit_id, "W1")
    assert status == 409 and "A worker can take a HIT only once." in page
    assert accept(server, hit_id, "W2")[0] == 303
    status, _, page = accept(server, hit_id, "W3")
    assert status == 409 and "No assignments are available" in page
    status, _, page = accept(server, "NOSUCHHIT", "W1")
    assert status == 404 and "does not exist" in page
    assert sorted(a["WorkerId"] for a in state.assignments.values()) == ["W1", "W2"]


def test_external_submit_records_the_form_as_question_form_answers(server):
    state = server.state
    hit_id = make_hit(state)
    accept(server, hit_id, "W1")
    (assignment_id,) = state.assignments
    status, _, page = request(server, "POST", "/mturk/externalSubmit", {
        "assignmentId": assignment_id, "completionCode": "ABC<1>"})
    assert status == 200 and 'id="submitted"' in page
    assert 'href="/worker/?workerId=W1"' in page  # back to the HIT list
    row = state.assignments[assignment_id]
    assert row["AssignmentStatus"] == "Submitted" and row["SubmitTime"] <= time.time()
    assert row["Answer"].startswith('<?xml version="1.0" encoding="UTF-8"?><QuestionFormAnswers')
    assert ("<Answer><QuestionIdentifier>completionCode</QuestionIdentifier>"
            "<FreeText>ABC&lt;1&gt;</FreeText></Answer>") in row["Answer"]
    assert "assignmentId" not in row["Answer"]
    # The requester API sees it like any submission.
    listed = state.ListAssignmentsForHIT({"HITId": hit_id})["Assignments"]
    assert [a["AssignmentId"] for a in listed] == [assignment_id]

    status, _, page = request(server, "POST", "/mturk/externalSubmit",
                              {"assignmentId": assignment_id, "completionCode": "again"})
    assert status == 409 and "already Submitted; it can be submitted once" in page
    assert "ABC" in state.assignments[assignment_id]["Answer"]


def test_external_submit_of_an_unknown_assignment_is_a_clear_4xx(server):
    status, _, page = request(server, "POST", "/mturk/externalSubmit",
                              {"assignmentId": "MADEUP", "completionCode": "x"})
    assert status == 404
    assert "Assignment &#x27;MADEUP&#x27; does not exist on this server" in page
    status, _, page = request(server, "POST", "/mturk/externalSubmit", {"completionCode": "x"})
    assert status == 400 and "no assignmentId" in page
    assert server.state.assignments == {}


def test_rehearsal_command_serves_the_worker_pages_until_stopped(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path}/unused.sqlite3",
           "MTURK_ENDPOINT_URL": "", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mturk_rehearsal", "--port", "0"], cwd=REPO_ROOT,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        while not any(line.startswith("HITs, assignments") for line in lines):
            line = process.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        output = "".join(lines)
        url = output.split("Local MTurk server (requester API): ")[1].split()[0]
        assert f"export MTURK_ENDPOINT_URL={url}\n" in output
        assert f"export QAJ_MTURK_SUBMIT_HOSTS={url}\n" in output
        assert "do not point at the rehearsal yet: MTURK_ENDPOINT_URL" in output
        host, port = urlsplit(url).netloc.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("GET", "/worker/?workerId=W1")
        response = conn.getresponse()
        assert response.status == 200 and 'id="worker">W1<' in response.read().decode()
        conn.close()
        process.send_signal(signal.SIGTERM)  # handled like Ctrl-C (SIGINT may be ignored
        # in a background job)
        rest, _ = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, rest
    assert "Stopped: 0 HITs, 0 assignments" in rest


def test_return_gives_the_assignment_back_and_the_worker_may_accept_again(server):
    """The rehearsal could not rehearse MTurk's Return (and accepting again, or the late submit
    of the page left open): the list now offers Return beside Continue."""
    state = server.state
    hit_id = make_hit(state, max_assignments=1)
    accept(server, hit_id, "W1")
    (first,) = state.assignments
    _, _, page = request(server, "GET", "/worker/?workerId=W1")
    assert 'action="/worker/return"' in page and f'value="{first}"' in page
    status, _, page = request(server, "POST", "/worker/return",
                              {"assignmentId": first, "workerId": "W2"})
    assert status == 404 and "is not W2&#x27;s" in page  # nobody returns another's
    status, headers, _ = request(server, "POST", "/worker/return",
                                 {"assignmentId": first, "workerId": "W1"})
    assert status == 303 and headers["Location"] == "/worker/?workerId=W1"
    assert state.assignments[first]["AssignmentStatus"] == "Returned"
    assert state.ListAssignmentsForHIT({"HITId": hit_id})["Assignments"] == []
    assert accept(server, hit_id, "W1")[0] == 303  # the slot is free again
    (second,) = set(state.assignments) - {first}
    status, _, page = request(server, "POST", "/mturk/externalSubmit",
                              {"assignmentId": first, "completionCode": "late"})
    assert status == 409 and "already Returned" in page
    status, _, page = request(server, "POST", "/worker/return",
                              {"assignmentId": first, "workerId": "W1"})
    assert status == 409 and "only an accepted one can be returned" in page
    assert state.assignments[second]["AssignmentStatus"] == "Accepted"


def test_what_a_requester_sees_of_unsubmitted_assignments_is_what_mturk_shows(server):
    """Through the real boto3 client, checked against botocore's service model: GetAssignment
    describes a submitted, approved or rejected assignment only (its AssignmentStatus enum has
    no other value), and NumberOfAssignmentsPending counts the accepted, unsubmitted ones. The
    fake answered GetAssignment for an accepted or returned assignment (with statuses MTurk
    never returns) and counted submitted ones as pending, so a fix that asks MTurk whether a
    worker returned the HIT would have passed here and failed on MTurk."""
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.client("mturk", endpoint_url=server.url, region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x")
    statuses = client.meta.service_model.shape_for("AssignmentStatus").enum
    state = server.state
    hit_id = make_hit(state, max_assignments=2)

    def counts() -> tuple[int, int, int]:
        hit = client.get_hit(HITId=hit_id)["HIT"]
        return (hit["NumberOfAssignmentsAvailable"], hit["NumberOfAssignmentsPending"],
                hit["NumberOfAssignmentsCompleted"])

    def refused(assignment_id: str) -> bool:
        try:
            client.get_assignment(AssignmentId=assignment_id)
        except ClientError as exc:
            return exc.response["Error"]["Code"] == "RequestError"
        return False

    working = state.worker_accept(hit_id, "W1")
    returned = state.worker_accept(hit_id, "W2")
    assert counts() == (0, 2, 0)
    state.worker_return(returned, "W2")
    assert counts() == (1, 1, 0)
    taker = state.worker_accept(hit_id, "W3")  # the returned slot, taken by another worker
    assert counts() == (0, 2, 0)  # as before the return: nothing tells who holds the slots
    assert all(refused(a) for a in (working, returned, taker))
    assert client.list_assignments_for_hit(HITId=hit_id)["Assignments"] == []

    state.worker_submit(working)
    assert counts() == (0, 1, 0)  # submitted: no longer pending, not yet completed
    seen = client.get_assignment(AssignmentId=working)["Assignment"]
    assert (seen["AssignmentStatus"], seen["WorkerId"]) == ("Submitted", "W1")
    client.approve_assignment(AssignmentId=working)
    assert counts() == (0, 1, 1)
    listed = client.list_assignments_for_hit(HITId=hit_id)["Assignments"]
    assert [a["AssignmentId"] for a in listed] == [working]
    assert {a["AssignmentStatus"] for a in listed} <= set(statuses)
    assert client.get_assignment(AssignmentId=working)["Assignment"][
        "AssignmentStatus"] in statuses
