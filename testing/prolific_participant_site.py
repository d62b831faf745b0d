"""The participant side of the local Prolific fake: what a participant does on Prolific, over
HTTP, so a researcher can rehearse a study in a browser (`manage.py prolific_rehearsal`).

    GET  /participant/?pid=P       the active studies (name, reward, places left, whether P is
                                   eligible) and P's own submissions with their status
    POST /participant/take-part    study_id, pid: start a submission (Prolific's rules,
                                   `ProlificState.participant_start`) and go to the study's
                                   external URL with PROLIFIC_PID, STUDY_ID and SESSION_ID filled
                                   in; remembers P in a cookie, as a logged-in participant
    GET  /participant/continue     study_id, pid: back to the study's external URL for P's
                                   submission in progress (and P in the cookie again)
    GET  /submissions/complete?cc= the completion redirect (QA Judge's PROLIFIC_COMPLETION_URL):
                                   the code is recorded on P's active submission of the study
                                   whose completion code it is, which is now AWAITING REVIEW

The pages are plain HTML without script or style. Refusals answer 4xx with the reason in
`<p id="error">`.
"""
from __future__ import annotations

import html
from urllib.parse import quote, urlencode

PID_COOKIE = "prolific_rehearsal_pid"


class ParticipantSiteError(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def entry_url(study: dict, *, pid: str, submission_id: str) -> str:
    """The study's external URL with Prolific's placeholders replaced, as Prolific opens it."""
    url = study["external_study_url"]
    for placeholder, value in (("{{%PROLIFIC_PID%}}", pid), ("{{%STUDY_ID%}}", study["id"]),
                               ("{{%SESSION_ID%}}", submission_id)):
        url = url.replace(placeholder, quote(value, safe=""))
    return url


def completion_codes(study: dict) -> list[str]:
    return [str(c.get("code", "")) for c in study.get("completion_codes") or []]


def _page(title: str, body: str) -> str:
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title></head><body>"
            f"<h1>{html.escape(title)}</h1>{body}</body></html>")


def _back(pid: str) -> str:
    query = f"?{urlencode({'pid': pid})}" if pid else ""
    return f'<p><a id="back" href="/participant/{query}">Back to the studies</a></p>'


def error_page(message: str, *, pid: str = "") -> str:
    return _page("Not possible", f'<p id="error">{html.escape(message)}</p>{_back(pid)}')


def ask_participant_page() -> str:
    return _page("Local Prolific participant site", (
        "<p>A rehearsal of Prolific's participant side. Take part as any participant id you "
        "make up.</p>"
        '<form method="get" action="/participant/"><label>Participant id '
        '<input name="pid" required></label> <button type="submit">Show studies</button></form>'
    ))


def studies_page(state, pid: str) -> str:
    """The active studies and the participant's own submissions."""
    with state.lock:
        mine = {s["study_id"]: s for s in state.submissions.values()
                if s["participant_id"] == pid}
        rows = []
        for study in state.studies.values():
            if study["status"] != "ACTIVE" and study["id"] not in mine:
                continue
            taken = state.places_taken(study["id"])
            left = max(0, int(study["total_available_places"]) - taken)
            rows.append((study, left, state.eligible(study, pid), mine.get(study["id"])))
        names = {s["id"]: s["name"] for s in state.studies.values()}
    study_rows = []
    for study, left, eligible, submission in rows:
        sid = html.escape(study["id"])
        if submission is not None and submission["status"] == "ACTIVE":
            # Through the server, which remembers the participant again (another one may have
            # taken part in this browser since).
            url = "/participant/continue?" + urlencode({"study_id": study["id"], "pid": pid})
            action = f'<a class="continue" href="{html.escape(url)}">Continue</a>'
        elif submission is not None:
            action = html.escape(submission["status"])
        elif study["status"] != "ACTIVE":
            action = html.escape(study["status"])
        else:
            disabled = "" if eligible and left else " disabled"
            action = (f'<form method="post" action="/participant/take-part">'
                      f'<input type="hidden" name="study_id" value="{sid}">'
                      f'<input type="hidden" name="pid" value="{html.escape(pid)}">'
                      f'<button type="submit"{disabled}>Take part</button></form>')
        reward = f"${int(study['reward']) / 100:.2f}"
        study_rows.append(
            f'<tr data-study="{sid}"><td class="name">{html.escape(study["name"])}</td>'
            f'<td>{sid}</td><td class="reward">{reward}</td>'
            f'<td class="places">{left}</td>'
            f'<td class="eligible">{"yes" if eligible else "no"}</td><td>{action}</td></tr>')
    own_rows = [
        f'<tr data-submission="{html.escape(s["id"])}"><td>{html.escape(s["id"])}</td>'
        f'<td>{html.escape(names.get(s["study_id"], s["study_id"]))}</td>'
        f'<td class="status">{html.escape(s["status"])}</td>'
        f'<td class="code">{html.escape(s["study_code"] or "")}</td></tr>'
        for s in mine.values()
    ]
    body = (
        f'<p>Participant <strong id="participant">{html.escape(pid)}</strong> · '
        '<a href="/participant/">switch participant</a></p>'
        '<h2>Studies</h2><table id="studies"><thead><tr><th>Study</th><th>Id</th>'
        "<th>Reward</th><th>Places left</th><th>Eligible</th><th></th></tr></thead>"
        f"<tbody>{''.join(study_rows)}</tbody></table>"
        + ("" if study_rows else '<p id="no-studies">No studies are active.</p>')
        + '<h2>Your submissions</h2><table id="submissions"><thead><tr><th>Submission</th>'
        "<th>Study</th><th>Status</th><th>Completion code</th></tr></thead>"
        f"<tbody>{''.join(own_rows)}</tbody></table>"
    )
    return _page("Studies", body)


def active_submission(state, *, study_id: str, pid: str) -> tuple[dict, dict]:
    """(study, submission) of the participant's submission in progress in the study."""
    with state.lock:
        study = state.studies.get(study_id)
        mine = [s for s in state.submissions.values() if s["study_id"] == study_id
                and s["participant_id"] == pid and s["status"] == "ACTIVE"]
        if study is None or not mine:
            raise ParticipantSiteError(
                f"Participant {pid} has no submission in progress in study {study_id!r}.",
                status=404)
        return study, mine[0]


def complete(state, *, pid: str, code: str) -> dict:
    """Record `code` on the participant's active submission of the study it completes."""
    if not pid:
        raise ParticipantSiteError(
            "Which participant? Open the study from /participant/?pid=... first (the "
            "completion link identifies you by that page's cookie).", status=400)
    if not code:
        raise ParticipantSiteError("The completion link has no code (cc).", status=400)
    with state.lock:
        active = [s for s in state.submissions.values()
                  if s["participant_id"] == pid and s["status"] == "ACTIVE"]
        if not active:
            raise ParticipantSiteError(
                f"Participant {pid} has no study in progress to complete.", status=409)
        matching = [s for s in active if code in completion_codes(state.studies[s["study_id"]])]
        if not matching:
            raise ParticipantSiteError(
                f"The code {code!r} is not the completion code of a study participant {pid} "
                "is taking part in.", status=409)
        submission = matching[0]
        state.participant_complete(submission["id"], code)
        return submission


def completed_page(submission: dict, pid: str) -> str:
    return _page("Submission completed", (
        f'<p id="completed">Submission <strong>{html.escape(submission["id"])}</strong> is '
        f'completed with code <strong id="code">{html.escape(submission["study_code"])}</strong>'
        ". The researcher reviews it next.</p>" + _back(pid)
    ))
