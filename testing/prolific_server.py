"""A local fake of Prolific's REST API (the endpoints QA Judge uses), over HTTP on 127.0.0.1.

    with ProlificServer(token="t") as server:
        settings.PROLIFIC_API_URL = server.url   # ends in /api/v1/

Lists are paged with `_links.next.href` (small pages, so paging is exercised). Faults: scheduled
429 "rate limited" answers and lost responses (the action is done, the connection is closed
without an answer). Participants are simulated by `participant_start` / `participant_complete`,
which enforce the study's allow-list filter, places and one submission per participant, or in
a browser through the same rules on the participant pages the server also serves
(`/participant/?pid=P`, take part, `/submissions/complete?cc=CODE`;
`testing/prolific_participant_site.py`, for `manage.py prolific_rehearsal`); a
session id (submission id) that `participant_start` never made is a 404 on "Retrieve a
submission", which is how the task pages tell a real SESSION_ID from a made-up one.
"""
from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from http.cookies import SimpleCookie
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from testing import prolific_participant_site as site
from testing.http_fake import FakeApiHandler

PAGE_SIZE = 2
MIN_REJECTION_MESSAGE = 100
# Submissions that give their place back to the study: the participant returned it, timed out
# or was screened out, or the researcher rejected it (Prolific reopens a rejected submission's
# place for a new participant). An approved submission keeps its place whatever the researcher
# learns later.
PLACE_FREEING_STATUSES = ("RETURNED", "TIMED-OUT", "SCREENED OUT", "REJECTED")
# What a published study's update may change (Prolific: only its places, and only up).
PUBLISHED_STUDY_UPDATABLE = {"total_available_places", "internal_name"}
DEFAULT_WORKSPACE_ID = f"w{1:022x}"
# Prolific's service fee on rewards and bonuses (the estimate's `PROLIFIC_FEE_RATE` default).
SERVICE_FEE_RATE = Decimal("0.333")


class ApiError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status


class ProlificState:
    def __init__(self, *, first_id: int = 1):
        self.lock = threading.RLock()
        # first_id: where this server's ids start (the rehearsal starts each run elsewhere, so
        # a restarted server never hands out a study or session id an earlier run gave).
        self.ids = itertools.count(first_id)
        self.studies: dict[str, dict] = {}
        self.submissions: dict[str, dict] = {}
        self.bonuses: dict[str, dict] = {}
        self.payments: list[dict] = []
        self.groups: dict[str, set[str]] = {}
        self.messages: list[dict] = []
        # The researcher's workspaces, as "Get all a user's workspaces" lists them; each one's
        # money (`currency_code`, balances in its hundredths) as "Get the balance of a
        # workspace" shows it. One USD workspace of $100,000 unless a test says otherwise
        # (`workspace_add`, or `workspaces[...]["currency_code"] = "GBP"` /
        # `["available_balance"] = 480`). A study is funded from the workspace of its
        # `project` ("Get project" names it: `workspace`), one created without a project from
        # `DEFAULT_WORKSPACE_ID` (the account's first, "My workspace").
        self.workspaces: dict[str, dict] = {}
        self.projects: dict[str, dict] = {}
        self.workspace_add(workspace_id=DEFAULT_WORKSPACE_ID)

    def workspace_add(self, *, workspace_id: str, currency_code: str = "USD",
                      available_balance: int = 10_000_000) -> dict:
        """`total_balance`: the workspace's funds; `available_balance`: what is left of them
        after the funds publishing locked for active studies (and bonuses paid)."""
        self.workspaces[workspace_id] = {
            "id": workspace_id, "title": f"Workspace {workspace_id[-4:]}",
            "currency_code": currency_code, "total_balance": available_balance,
            "available_balance": available_balance}
        return self.workspaces[workspace_id]

    def project_add(self, *, project_id: str, workspace_id: str) -> dict:
        """A project of `workspace_id`, as "Get project" shows it."""
        self.projects[project_id] = {"id": project_id, "title": f"Project {project_id[-4:]}",
                                     "workspace": workspace_id}
        return self.projects[project_id]

    def study_workspace(self, study: dict) -> str:
        """The workspace a study's money comes from: its project's, else the default one."""
        project = self.projects.get(study.get("project") or "")
        return project["workspace"] if project else DEFAULT_WORKSPACE_ID

    def funds_take(self, cents: int, *, what: str, lock: bool,
                   workspace_id: str = DEFAULT_WORKSPACE_ID) -> None:
        """Publishing a study (or raising its places, or paying a bonus) needs the funds: as on
        Prolific, which checks the balance and locks the amount when a study is published, a
        workspace whose available balance does not cover the cost with Prolific's fee refuses
        it (400) and nothing changes. Locked funds leave the available balance only; paid ones
        leave the total too."""
        workspace = self.workspaces.get(workspace_id)
        if workspace is None:
            return
        cost = cents + int((Decimal(cents) * SERVICE_FEE_RATE).to_integral_value(ROUND_HALF_UP))
        if cost > workspace["available_balance"]:
            raise ApiError(400, f"insufficient balance: {what} needs {cost} "
                                f"({workspace['currency_code']} hundredths, fee included); "
                                f"the workspace has {workspace['available_balance']} available")
        workspace["available_balance"] -= cost
        if not lock:
            workspace["total_balance"] -= cost

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self.ids):022x}"

    # --- participants -------------------------------------------------------------------------
    def places_taken(self, study_id: str) -> int:
        """The study's places held: every submission but those that gave theirs back."""
        return sum(1 for s in self.submissions.values()
                   if s["study_id"] == study_id and s["status"] not in PLACE_FREEING_STATUSES)

    def eligible(self, study: dict, pid: str) -> bool:
        """Whether the study's allow-list filters (if any) include the participant."""
        return all(
            any(pid in self.groups.get(g, set()) for g in flt["selected_values"])
            for flt in study.get("filters", [])
            if flt["filter_id"] == "participant_group_allowlist"
        )

    def participant_start(self, study_id: str, pid: str) -> str:
        with self.lock:
            if study_id not in self.studies:
                raise ApiError(404, f"study {study_id!r} does not exist")
            study = self.studies[study_id]
            if study["status"] != "ACTIVE":
                raise ApiError(400, "study is not active")
            if not pid:
                raise ApiError(400, "a participant id is required")
            if not self.eligible(study, pid):
                raise ApiError(403, f"participant {pid} is not eligible")
            mine = [s for s in self.submissions.values() if s["study_id"] == study_id]
            if any(s["participant_id"] == pid for s in mine):
                raise ApiError(400, "participant already took part")
            if self.places_taken(study_id) >= study["total_available_places"]:
                raise ApiError(400, "study is full")
            submission_id = self.new_id("s")
            self.submissions[submission_id] = {
                "id": submission_id, "study_id": study_id, "participant_id": pid,
                "status": "ACTIVE", "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "completed_at": None, "study_code": "",
            }
            return submission_id

    def participant_complete(self, submission_id: str, code: str) -> None:
        with self.lock:
            submission = self.submissions[submission_id]
            submission["status"] = "AWAITING REVIEW"
            submission["study_code"] = code
            submission["completed_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ")

    # --- API ------------------------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict, body: dict) -> dict | list:
        routes = [
            ("GET", r"users/me/", self.get_me),
            ("GET", r"workspaces/", self.list_workspaces),
            ("GET", r"workspaces/(?P<wid>\w+)/balance/", self.get_workspace_balance),
            ("GET", r"projects/(?P<pid>\w+)/", self.get_project),
            ("GET", r"studies/", self.list_studies),
            ("POST", r"studies/", self.create_study),
            ("GET", r"studies/(?P<sid>\w+)/", self.get_study),
            ("PATCH", r"studies/(?P<sid>\w+)/", self.update_study),
            ("POST", r"studies/(?P<sid>\w+)/transition/", self.transition_study),
            ("GET", r"studies/(?P<sid>\w+)/submissions/", self.list_submissions),
            ("GET", r"submissions/(?P<sub>\w+)/", self.get_submission),
            ("POST", r"submissions/(?P<sub>\w+)/transition/", self.transition_submission),
            ("POST", r"submissions/bonus-payments/", self.set_up_bonus),
            ("POST", r"bulk-bonus-payments/(?P<bid>\w+)/pay/", self.pay_bonus),
            ("POST", r"participant-groups/", self.create_group),
            ("POST", r"participant-groups/(?P<gid>\w+)/participants/", self.add_to_group),
            ("DELETE", r"participant-groups/(?P<gid>\w+)/participants/", self.remove_from_group),
            ("POST", r"messages/", self.send_message),
        ]
        for verb, pattern, fn in routes:
            match = re.fullmatch(pattern, path)
            if verb == method and match:
                return fn(query=query, body=body, **match.groupdict())
        raise ApiError(404, f"no route {method} {path}")

    def _page(self, rows: list, query: dict, base: str) -> dict:
        offset = int(query.get("offset", ["0"])[0])
        page = rows[offset:offset + PAGE_SIZE]
        next_href = f"{base}?offset={offset + PAGE_SIZE}" if offset + PAGE_SIZE < len(rows) \
            else None
        return {"results": page, "_links": {"next": {"href": next_href}},
                "meta": {"count": len(rows)}}

    def get_me(self, *, query, body):
        return {"id": "researcher0000000000000001", "name": "Fake researcher"}

    def list_workspaces(self, *, query, body):
        """Listed without their money: the currency is on the balance (as on Prolific)."""
        rows = [{"id": w["id"], "title": w["title"], "owner": "researcher0000000000000001"}
                for w in self.workspaces.values()]
        return self._page(rows, query, self.base_url + "workspaces/")

    def get_workspace_balance(self, *, query, body, wid):
        workspace = self.workspaces.get(wid)
        if workspace is None:
            raise ApiError(404, "workspace not found")
        total, available = workspace["total_balance"], workspace["available_balance"]
        return {"currency_code": workspace["currency_code"], "total_balance": total,
                "balance_breakdown": {"rewards": total, "fees": 0, "vat": 0},
                "available_balance": available,
                "available_balance_breakdown": {"rewards": available, "fees": 0, "vat": 0}}

    def get_project(self, *, query, body, pid):
        if pid not in self.projects:
            raise ApiError(404, "project not found")
        return self.projects[pid]

    def list_studies(self, *, query, body):
        return self._page(list(self.studies.values()), query, self.base_url + "studies/")

    def create_study(self, *, query, body):
        required = ["name", "description", "external_study_url", "prolific_id_option",
                    "completion_codes", "total_available_places", "estimated_completion_time",
                    "reward"]
        missing = [k for k in required if k not in body]
        if missing:
            raise ApiError(400, f"missing fields: {missing}")
        for placeholder in ("{{%PROLIFIC_PID%}}", "{{%STUDY_ID%}}", "{{%SESSION_ID%}}"):
            if placeholder not in body["external_study_url"]:
                raise ApiError(400, f"external_study_url lacks {placeholder}")
        if not isinstance(body["reward"], int) or body["reward"] <= 0:
            raise ApiError(400, "reward must be a positive number of cents")
        if body.get("project") and body["project"] not in self.projects:
            raise ApiError(400, f"project {body['project']} not found")
        study_id = self.new_id("st")
        self.studies[study_id] = {**body, "id": study_id, "status": "UNPUBLISHED"}
        return self.studies[study_id]

    def get_study(self, *, query, body, sid):
        if sid not in self.studies:
            raise ApiError(404, "study not found")
        return self.studies[sid]

    def update_study(self, *, query, body, sid):
        """"Update a study" (PATCH studies/<id>/): a draft takes any field; once published only
        `total_available_places` (and the internal name) may change, and the places only up,
        never below the places already taken; a completed (stopped) study takes no more."""
        study = self.get_study(query=query, body=body, sid=sid)
        if study["status"] != "UNPUBLISHED":
            refused = sorted(set(body) - PUBLISHED_STUDY_UPDATABLE)
            if refused:
                raise ApiError(400, f"a published study cannot change {refused}")
            if study["status"] == "COMPLETED":
                raise ApiError(400, "a completed study cannot be updated")
        if "total_available_places" in body:
            places = body["total_available_places"]
            if not isinstance(places, int) or places < 1:
                raise ApiError(400, "total_available_places must be a positive integer")
            if study["status"] != "UNPUBLISHED" and places < study["total_available_places"]:
                raise ApiError(400, "total_available_places can only be increased once the "
                                    "study is published")
            if study["status"] != "UNPUBLISHED":
                self.funds_take(study["reward"] * (places - study["total_available_places"]),
                                what=f"study {sid}'s new places", lock=True,
                                workspace_id=self.study_workspace(study))
        study.update(body)
        return study

    def transition_study(self, *, query, body, sid):
        study = self.get_study(query=query, body=body, sid=sid)
        action = body.get("action")
        target = {"PUBLISH": "ACTIVE", "START": "ACTIVE", "PAUSE": "PAUSED",
                  "STOP": "COMPLETED"}.get(action)
        if target is None:
            raise ApiError(400, f"unknown action {action}")
        if action == "PUBLISH" and study["status"] != "UNPUBLISHED":
            raise ApiError(400, "study already published")
        # Prolific pauses an active study (it is then shown to no new participant:
        # `participant_start` refuses it; those in it can still complete) and starts a paused
        # one again; neither applies to a draft or to a study in another state.
        if action == "PAUSE" and study["status"] != "ACTIVE":
            raise ApiError(400, f"only an active study can be paused (it is {study['status']})")
        if action == "START" and study["status"] in ("UNPUBLISHED", "ACTIVE"):
            raise ApiError(400, f"a study {study['status']} cannot be started")
        if action == "PUBLISH":
            self.funds_take(study["reward"] * study["total_available_places"],
                            what=f"study {sid}", lock=True,
                            workspace_id=self.study_workspace(study))
        study["status"] = target
        return study

    def list_submissions(self, *, query, body, sid):
        rows = [s for s in self.submissions.values() if s["study_id"] == sid]
        return self._page(rows, query, self.base_url + f"studies/{sid}/submissions/")

    def _submission(self, sub: str) -> dict:
        if sub not in self.submissions:
            raise ApiError(404, "submission not found")
        return self.submissions[sub]

    def get_submission(self, *, query, body, sub):
        """"Retrieve a submission": as Prolific shows it, the participant under `participant`
        (the study's list says `participant_id`) and the study under `study_id`."""
        row = self._submission(sub)
        shown = {k: v for k, v in row.items() if k != "participant_id"}
        return {**shown, "participant": row["participant_id"], "entered_code": row["study_code"]}

    def transition_submission(self, *, query, body, sub):
        submission = self._submission(sub)
        if submission["status"] != "AWAITING REVIEW":
            raise ApiError(400, f"submission is {submission['status']}")
        if body.get("action") == "APPROVE":
            submission["status"] = "APPROVED"
        elif body.get("action") == "REJECT":
            if len(body.get("message", "")) < MIN_REJECTION_MESSAGE:
                raise ApiError(400, "message must be at least 100 characters")
            if not body.get("rejection_category"):
                raise ApiError(400, "rejection_category is required")
            submission["status"] = "REJECTED"
            submission["rejection_message"] = body["message"]
        else:
            raise ApiError(400, "unknown action")
        return submission

    def set_up_bonus(self, *, query, body):
        rows = [line.split(",") for line in body["csv_bonuses"].strip().splitlines()]
        bonus_id = self.new_id("b")
        self.bonuses[bonus_id] = {"id": bonus_id, "study": body["study_id"], "paid": False,
                                  "rows": [(pid, Decimal(amount)) for pid, amount in rows]}
        return {"id": bonus_id, "amount": str(sum(a for _p, a in self.bonuses[bonus_id]["rows"]))}

    def pay_bonus(self, *, query, body, bid):
        bonus = self.bonuses.get(bid)
        if bonus is None:
            raise ApiError(404, "bonus not found")
        if bonus["paid"]:
            raise ApiError(400, "this bonus has already been paid")
        self.funds_take(int(sum(a for _p, a in bonus["rows"]) * 100), what=f"bonus {bid}",
                        lock=False, workspace_id=self.study_workspace(
                            self.studies.get(bonus["study"]) or {}))
        bonus["paid"] = True
        for pid, amount in bonus["rows"]:
            self.payments.append({"participant_id": pid, "amount": amount, "bonus": bid})
        return {}

    def create_group(self, *, query, body):
        group_id = self.new_id("g")
        self.groups[group_id] = set()
        return {"id": group_id, "name": body.get("name", "")}

    def add_to_group(self, *, query, body, gid):
        self.groups.setdefault(gid, set()).update(body["participant_ids"])
        return {"results": sorted(self.groups[gid])}

    def remove_from_group(self, *, query, body, gid):
        self.groups.setdefault(gid, set()).difference_update(body["participant_ids"])
        return {"results": sorted(self.groups[gid])}

    def send_message(self, *, query, body):
        self.messages.append(body)
        return {}


class ProlificServer:
    """The API under /api/v1/ (token required) and the participant pages
    (`testing/prolific_participant_site.py`) at `site_url`."""

    def __init__(self, *, token: str = "test-token", port: int = 0, host: str = "127.0.0.1",
                 first_id: int = 1):
        self.token = token
        self.state = ProlificState(first_id=first_id)
        self.rate_limit_next: dict[str, int] = defaultdict(int)
        self.lose_response_next: dict[str, int] = defaultdict(int)
        self.stats: dict[str, int] = defaultdict(int)
        self.httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self.httpd.daemon_threads = True
        self.state.base_url = self.url

    @property
    def site_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.site_url}/api/v1/"

    def __enter__(self) -> ProlificServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler_class(self):
        server = self

        class Handler(FakeApiHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if not self.path.startswith("/api/"):
                    return self._participant(method, raw)
                if self.headers.get("Authorization") != f"Token {server.token}":
                    return self._reply(401, {"error": "invalid token"})
                parsed = urlparse(self.path)
                path = parsed.path.removeprefix("/api/v1/")
                key = f"{method} {re.sub(r'/[a-z]+[0-9a-f]{22}/', '/<id>/', '/' + path)[1:]}"
                server.stats[key] += 1
                with server.state.lock:
                    if server.rate_limit_next[key] > 0:
                        server.rate_limit_next[key] -= 1
                        server.stats["rate_limited"] += 1
                        return self._reply(429, {"error": "Request was throttled."},
                                           headers={"Retry-After": "0"})
                    try:
                        result = server.state.handle(method, path, parse_qs(parsed.query),
                                                     json.loads(raw or b"{}"))
                    except ApiError as exc:
                        return self._reply(exc.status, {"error": {"detail": str(exc)}})
                    if self.lose_response_if_asked(server, key):
                        return None
                return self._reply(200 if method != "POST" else 201, result)

            # --- the participant side (browser) -----------------------------------------
            def _participant(self, method: str, raw: bytes) -> None:
                parsed = urlparse(self.path)
                query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
                cookie = SimpleCookie(self.headers.get("Cookie") or "")
                known = cookie[site.PID_COOKIE].value if site.PID_COOKIE in cookie else ""
                state = server.state
                if method == "GET" and parsed.path in ("/", "/participant", "/participant/"):
                    pid = query.get("pid", "").strip()
                    if not pid:
                        return self._html(200, site.ask_participant_page())
                    return self._html(200, site.studies_page(state, pid))
                if method == "POST" and parsed.path == "/participant/take-part":
                    fields = {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace"))
                              .items()}
                    pid = fields.get("pid", "").strip()
                    try:
                        with state.lock:
                            session = state.participant_start(fields.get("study_id", ""), pid)
                            study = state.studies[fields["study_id"]]
                    except ApiError as exc:
                        status = exc.status if exc.status != 400 else 409
                        return self._html(status, site.error_page(str(exc), pid=pid))
                    server.stats["participant:take-part"] += 1
                    return self._to_study(study, pid, session)
                if method == "GET" and parsed.path == "/participant/continue":
                    pid = query.get("pid", "").strip()
                    try:
                        study, submission = site.active_submission(
                            state, study_id=query.get("study_id", ""), pid=pid)
                    except site.ParticipantSiteError as exc:
                        return self._html(exc.status, site.error_page(str(exc), pid=pid))
                    return self._to_study(study, pid, submission["id"])
                if method == "GET" and parsed.path == "/submissions/complete":
                    pid = query.get("pid", "").strip() or known
                    try:
                        submission = site.complete(state, pid=pid, code=query.get("cc", ""))
                    except site.ParticipantSiteError as exc:
                        return self._html(exc.status, site.error_page(str(exc), pid=pid))
                    server.stats["participant:complete"] += 1
                    return self._html(200, site.completed_page(submission, pid))
                return self._html(404, site.error_page(f"Nothing at {method} {parsed.path}."))

            def _to_study(self, study: dict, pid: str, session: str) -> None:
                """To the study's page as the participant, remembered in the cookie."""
                cookie = SimpleCookie()
                cookie[site.PID_COOKIE] = pid
                cookie[site.PID_COOKIE]["path"] = "/"
                return self._redirect(site.entry_url(study, pid=pid, submission_id=session),
                                      cookie=cookie[site.PID_COOKIE].OutputString())

            def _html(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _redirect(self, location: str, *, cookie: str = "") -> None:
                self.send_response(303)
                self.send_header("Location", location)
                if cookie:
                    self.send_header("Set-Cookie", cookie)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def _reply(self, status: int, payload, headers=None) -> None:
                data = json.dumps(payload, default=str).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
