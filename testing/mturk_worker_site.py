"""The worker side of the local MTurk-protocol server: what a worker does on MTurk's worker site,
over HTTP, so a researcher can rehearse a study in a browser (`manage.py mturk_rehearsal`).

    GET  /worker/?workerId=W     the open HITs W can see (title, reward, assignments available,
                                 whether W meets the qualification requirements) and W's
                                 assignments with their status
    POST /worker/accept          hitId, workerId: accept (MTurk's rules, `MTurkState.worker_accept`)
                                 and go to the HIT's ExternalQuestion URL with assignmentId,
                                 hitId, turkSubmitTo and workerId, as MTurk opens it
    GET  /worker/preview?hitId=H the ExternalQuestion URL with assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE
    POST /worker/return          assignmentId, workerId: give an accepted assignment back (MTurk's
                                 Return); the worker may accept the HIT again, under a new id
    POST /mturk/externalSubmit   the task page hands the HIT back: the assignment is Submitted,
                                 its Answer the posted fields as QuestionFormAnswers XML

The pages are plain HTML without script or style. Refusals answer 4xx with the reason in
`<p id="error">`.
"""
from __future__ import annotations

import html
import re
import time
from urllib.parse import parse_qs, urlencode, urlsplit

PREVIEW_ASSIGNMENT_ID = "ASSIGNMENT_ID_NOT_AVAILABLE"
ANSWER_SCHEMA = ("http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/"
                 "2005-10-01/QuestionFormAnswers.xsd")


class WorkerSiteError(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def external_url(hit: dict) -> str:
    """The ExternalURL of the HIT's ExternalQuestion (HTML-unescaped)."""
    match = re.search(r"<ExternalURL>(.*?)</ExternalURL>", hit.get("Question") or "", re.S)
    if not match:
        raise WorkerSiteError(f"HIT {hit['HITId']} has no ExternalQuestion URL", status=409)
    return html.unescape(match.group(1).strip())


def task_url(hit: dict, *, assignment_id: str, worker_id: str = "",
             turk_submit_to: str = "") -> str:
    """The URL MTurk opens in its frame: the ExternalURL plus assignmentId, hitId,
    turkSubmitTo and workerId (the last two only once the HIT is accepted)."""
    url = external_url(hit)
    params = {"assignmentId": assignment_id, "hitId": hit["HITId"]}
    if assignment_id != PREVIEW_ASSIGNMENT_ID:
        params.update({"turkSubmitTo": turk_submit_to, "workerId": worker_id})
    return url + ("&" if urlsplit(url).query else "?") + urlencode(params)


def answer_xml(fields: dict[str, str]) -> str:
    """What MTurk stores as an ExternalQuestion assignment's Answer: every posted field but
    assignmentId as free text."""
    answers = "".join(
        f"<Answer><QuestionIdentifier>{html.escape(name)}</QuestionIdentifier>"
        f"<FreeText>{html.escape(value)}</FreeText></Answer>"
        for name, value in fields.items() if name != "assignmentId"
    )
    return (f'<?xml version="1.0" encoding="UTF-8"?><QuestionFormAnswers xmlns="{ANSWER_SCHEMA}">'
            f"{answers}</QuestionFormAnswers>")


def form_fields(body: bytes) -> dict[str, str]:
    """An application/x-www-form-urlencoded body, one value per field (the last one)."""
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[-1] for name, values in parsed.items()}


def _page(title: str, body: str) -> str:
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title></head><body>"
            f"<h1>{html.escape(title)}</h1>{body}</body></html>")


def _back(worker_id: str) -> str:
    if not worker_id:
        return '<p><a id="back" href="/worker/">Back to the HIT list</a></p>'
    query = urlencode({"workerId": worker_id})
    return f'<p><a id="back" href="/worker/?{query}">Back to the HIT list</a></p>'


def error_page(message: str, *, worker_id: str = "") -> str:
    return _page("Not possible", f'<p id="error">{html.escape(message)}</p>{_back(worker_id)}')


def ask_worker_page() -> str:
    return _page("Local MTurk worker site", (
        "<p>A rehearsal of MTurk's worker site. Work as any worker id you make up.</p>"
        '<form method="get" action="/worker/"><label>Worker id '
        '<input name="workerId" required></label> <button type="submit">Show HITs</button>'
        "</form>"
    ))


def hit_list_page(state, worker_id: str) -> str:
    """The HITs open now (not expired, assignments left or one of them the worker's) and the
    worker's own assignments."""
    now = time.time()
    with state.lock:
        mine = {a["HITId"]: a for a in state.assignments.values()
                if a["WorkerId"] == worker_id and a["AssignmentStatus"] != "Returned"}
        rows = []
        for hit in state.hits.values():
            view = state._hit_view(hit)
            available = view["NumberOfAssignmentsAvailable"]
            if hit["Expiration"] < now or (available <= 0 and hit["HITId"] not in mine):
                continue
            rows.append((view, state.requirements_met(worker_id, hit["HITId"]),
                         mine.get(hit["HITId"])))
        own = sorted(mine.values(), key=lambda a: a["AcceptTime"])
        titles = {h["HITId"]: h["Title"] for h in state.hits.values()}
    hit_rows = []
    for view, met, assignment in rows:
        hit_id = html.escape(view["HITId"])
        preview = f'<a href="/worker/preview?{urlencode({"hitId": view["HITId"]})}">Preview</a>'
        if assignment is not None and assignment["AssignmentStatus"] == "Accepted":
            url = task_url(view, assignment_id=assignment["AssignmentId"], worker_id=worker_id,
                           turk_submit_to=state.site_url)
            action = (f'<a class="continue" href="{html.escape(url)}">Continue</a> '
                      f'<form method="post" action="/worker/return" class="return">'
                      f'<input type="hidden" name="assignmentId" '
                      f'value="{html.escape(assignment["AssignmentId"])}">'
                      f'<input type="hidden" name="workerId" value="{html.escape(worker_id)}">'
                      f'<button type="submit">Return</button></form>')
        elif assignment is not None:
            action = html.escape(assignment["AssignmentStatus"])
        else:
            disabled = "" if met else " disabled"
            action = (f'<form method="post" action="/worker/accept">'
                      f'<input type="hidden" name="hitId" value="{hit_id}">'
                      f'<input type="hidden" name="workerId" value="{html.escape(worker_id)}">'
                      f'<button type="submit"{disabled}>Accept</button></form>')
        hit_rows.append(
            f'<tr data-hit="{hit_id}"><td class="title">{html.escape(view["Title"])}</td>'
            f'<td>{hit_id}</td><td class="reward">${html.escape(str(view["Reward"]))}</td>'
            f'<td class="available">{view["NumberOfAssignmentsAvailable"]}</td>'
            f'<td class="qualified">{"yes" if met else "no"}</td>'
            f"<td>{preview}</td><td>{action}</td></tr>")
    own_rows = [
        f'<tr data-assignment="{html.escape(a["AssignmentId"])}"><td>{html.escape(a["AssignmentId"])}</td>'
        f'<td>{html.escape(titles.get(a["HITId"], a["HITId"]))}</td>'
        f'<td class="status">{html.escape(a["AssignmentStatus"])}</td></tr>'
        for a in own
    ]
    body = (
        f'<p>Worker <strong id="worker">{html.escape(worker_id)}</strong> · '
        '<a href="/worker/">switch worker</a></p>'
        '<h2>Open HITs</h2><table id="hits"><thead><tr><th>Title</th><th>HIT</th><th>Reward</th>'
        "<th>Assignments available</th><th>Requirements met</th><th></th><th></th></tr></thead>"
        f"<tbody>{''.join(hit_rows)}</tbody></table>"
        + ("" if hit_rows else '<p id="no-hits">No HITs are open.</p>')
        + '<h2>Your assignments</h2><table id="assignments"><thead><tr><th>Assignment</th>'
        f"<th>HIT</th><th>Status</th></tr></thead><tbody>{''.join(own_rows)}</tbody></table>"
    )
    return _page("HITs", body)


def submitted_page(assignment: dict) -> str:
    return _page("HIT submitted", (
        f'<p id="submitted">Assignment <strong>{html.escape(assignment["AssignmentId"])}</strong> '
        "is submitted. The requester reviews it next.</p>" + _back(assignment["WorkerId"])
    ))
