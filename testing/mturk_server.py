"""A local server speaking MTurk's requester protocol (JSON 1.1 over HTTP, 2017-01-17).

    with MTurkServer(throttle_rate=0.1) as server:
        client = boto3.client("mturk", endpoint_url=server.url, region_name="us-east-1")

It implements the operations QA Judge uses, keeps the state a requester can observe (HITs,
assignments, bonuses, blocks, qualification types and scores, notifications), honours
UniqueRequestToken like MTurk (a repeated token gets an error naming the existing HIT; a repeated
bonus token pays nothing), and injects faults: random or scheduled throttling ("Rate exceeded")
and lost responses (the operation is done, then the connection is closed without an answer).

Workers are simulated through Python methods (`worker_accept`, `worker_submit`) that enforce the
HIT type's QualificationRequirements and worker blocks the way MTurk does, or in a browser
through the same rules on the worker pages the server also serves (`/worker/?workerId=W`,
accept, the ExternalQuestion page, `/mturk/externalSubmit`; `testing/mturk_worker_site.py`).

Run standalone for the publishing benchmark: `python testing/mturk_server.py --port 8443`; for a
rehearsal of a study with the worker pages: `python manage.py mturk_rehearsal`.
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import string
import threading
import time
from collections import defaultdict
from decimal import Decimal
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from testing import mturk_worker_site as site
from testing.http_fake import FakeApiHandler

TARGET_PREFIX = "MTurkRequesterServiceV20170117."
APPROVAL_RATE = "000000000000000000L0"
LOCALE = "00000000000000000071"


COMPARATORS = {
    "GreaterThanOrEqualTo": lambda v, wanted: v >= wanted[0],
    "GreaterThan": lambda v, wanted: v > wanted[0],
    "LessThan": lambda v, wanted: v < wanted[0],
    "LessThanOrEqualTo": lambda v, wanted: v <= wanted[0],
    "EqualTo": lambda v, wanted: v == wanted[0],
    "NotEqualTo": lambda v, wanted: v != wanted[0],
    "In": lambda v, wanted: v in wanted,
}


OVERRIDE_REJECTION_SECONDS = 30 * 24 * 3600  # ApproveAssignment's OverrideRejection window


class MTurkError(Exception):
    def __init__(self, message: str, code: str = "RequestError", status: int = 400):
        super().__init__(message)
        self.code = code
        self.status = status


def _new_id(rng: random.Random, n: int = 30) -> str:
    return "".join(rng.choices(string.ascii_uppercase + string.digits, k=n))


class MTurkState:
    def __init__(self, *, seed: int = 0, balance: str = "10000.00"):
        self.lock = threading.RLock()
        self.rng = random.Random(seed)
        self.balance = Decimal(balance)
        self.hit_types: dict[str, dict] = {}
        self.hits: dict[str, dict] = {}
        self.hit_tokens: dict[str, str] = {}
        self.extend_tokens: dict[str, str] = {}  # CreateAdditionalAssignmentsForHIT's
        self.assignments: dict[str, dict] = {}
        self.bonuses: list[dict] = []
        self.bonus_tokens: set[str] = set()
        self.blocks: dict[str, str] = {}
        self.qualification_types: dict[str, dict] = {}
        self.scores: dict[tuple[str, str], int] = {}
        self.notifications: list[dict] = []
        self.worker_locale: dict[str, str] = defaultdict(lambda: "US")
        self.worker_approval_rate: dict[str, int] = defaultdict(lambda: 100)
        self.calls: list[str] = []
        self.overridden: list[str] = []  # ApproveAssignment calls with OverrideRejection
        self.page_limit = 100  # lower it to force paging (MTurk pages at most 100)
        self.site_url = ""  # where the worker pages are served: the HIT's turkSubmitTo

    # --- operations (names as in the API) ---------------------------------------------------
    def CreateHITType(self, p: dict) -> dict:
        key = json.dumps(p, sort_keys=True)
        for type_id, stored in self.hit_types.items():
            if stored["_key"] == key:
                return {"HITTypeId": type_id}
        type_id = _new_id(self.rng)
        self.hit_types[type_id] = {**p, "_key": key}
        return {"HITTypeId": type_id}

    def CreateHITWithHITType(self, p: dict) -> dict:
        token = p.get("UniqueRequestToken")
        if token and token in self.hit_tokens:
            raise MTurkError(
                f'The HIT with ID "{self.hit_tokens[token]}" already exists. '
                "(AWS.MechanicalTurk.HitAlreadyExists: UniqueRequestToken was already used)"
            )
        if p["HITTypeId"] not in self.hit_types:
            raise MTurkError(f"HIT type {p['HITTypeId']} does not exist")
        hit_type = self.hit_types[p["HITTypeId"]]
        hit_id = _new_id(self.rng)
        now = time.time()
        hit = {
            "HITId": hit_id, "HITTypeId": p["HITTypeId"], "HITGroupId": p["HITTypeId"],
            "CreationTime": now, "Title": hit_type["Title"],
            "Description": hit_type["Description"], "Question": p["Question"],
            "Keywords": hit_type.get("Keywords", ""), "HITStatus": "Assignable",
            "MaxAssignments": p["MaxAssignments"], "Reward": hit_type["Reward"],
            "AutoApprovalDelayInSeconds": hit_type["AutoApprovalDelayInSeconds"],
            "Expiration": now + p["LifetimeInSeconds"],
            "AssignmentDurationInSeconds": hit_type["AssignmentDurationInSeconds"],
            "RequesterAnnotation": p.get("RequesterAnnotation", ""),
            "QualificationRequirements": hit_type.get("QualificationRequirements", []),
        }
        self.hits[hit_id] = hit
        if token:
            self.hit_tokens[token] = hit_id
        return {"HIT": self._hit_view(hit)}

    def CreateAdditionalAssignmentsForHIT(self, p: dict) -> dict:
        """More assignments on a HIT, as MTurk does it: a HIT made with fewer than 10 cannot
        reach 10 or more; a repeated UniqueRequestToken is an error naming the request, and
        adds nothing."""
        hit = self.hits.get(p.get("HITId", ""))
        if hit is None:
            raise MTurkError(f"Hit {p.get('HITId')} does not exist.")
        extra = p.get("NumberOfAdditionalAssignments")
        if not isinstance(extra, int) or extra < 1:
            raise MTurkError("NumberOfAdditionalAssignments must be a positive integer.")
        token = p.get("UniqueRequestToken")
        if token and token in self.extend_tokens:
            raise MTurkError(
                f"The extend HIT request with ID {self.extend_tokens[token]} already exists. "
                "(AWS.MechanicalTurk.ExtendHITAlreadyExists: UniqueRequestToken was already "
                "used)")
        if hit["MaxAssignments"] < 10 <= hit["MaxAssignments"] + extra:
            raise MTurkError(
                "HITs created with fewer than 10 assignments cannot be extended to have 10 or "
                "more assignments. (AWS.MechanicalTurk.InvalidMaximumAssignmentsIncrease)")
        hit["MaxAssignments"] += extra
        if token:
            self.extend_tokens[token] = _new_id(self.rng)
        return {}

    def _hit_view(self, hit: dict) -> dict:
        counts = self._counts(hit["HITId"])
        return {**hit, "NumberOfAssignmentsPending": counts["pending"],
                "NumberOfAssignmentsAvailable": hit["MaxAssignments"] - counts["taken"],
                "NumberOfAssignmentsCompleted": counts["completed"]}

    def _counts(self, hit_id: str) -> dict:
        mine = [a for a in self.assignments.values() if a["HITId"] == hit_id]
        return {
            "taken": sum(a["AssignmentStatus"] != "Returned" for a in mine),
            # Accepted, not yet submitted, returned or abandoned (botocore's documentation of
            # NumberOfAssignmentsPending); a submitted one is neither pending nor completed.
            "pending": sum(a["AssignmentStatus"] == "Accepted" for a in mine),
            "completed": sum(a["AssignmentStatus"] in ("Approved", "Rejected") for a in mine),
        }

    def GetHIT(self, p: dict) -> dict:
        if p["HITId"] not in self.hits:
            raise MTurkError(f"Hit {p['HITId']} does not exist. (AWS.MechanicalTurk.HitDoesNotExist)")
        return {"HIT": self._hit_view(self.hits[p["HITId"]])}

    def ListHITs(self, p: dict) -> dict:
        return self._page([self._hit_view(h) for h in self.hits.values()], p, "HITs")

    def _page(self, rows: list, p: dict, name: str) -> dict:
        start = int(p.get("NextToken") or 0)
        size = min(int(p.get("MaxResults") or 10), self.page_limit)
        page = rows[start:start + size]
        out: dict[str, Any] = {name: page, "NumResults": len(page)}
        if start + size < len(rows):
            out["NextToken"] = str(start + size)
        return out

    def UpdateExpirationForHIT(self, p: dict) -> dict:
        hit = self.GetHIT(p)["HIT"]
        self.hits[hit["HITId"]]["Expiration"] = float(p["ExpireAt"])
        return {}

    def ListAssignmentsForHIT(self, p: dict) -> dict:
        self.GetHIT(p)
        statuses = set(p.get("AssignmentStatuses") or ["Submitted", "Approved", "Rejected"])
        rows = [a for a in self.assignments.values()
                if a["HITId"] == p["HITId"] and a["AssignmentStatus"] in statuses]
        return self._page(rows, p, "Assignments")

    def _assignment(self, p: dict) -> dict:
        assignment = self.assignments.get(p["AssignmentId"])
        if assignment is None:
            raise MTurkError(f"Assignment {p['AssignmentId']} does not exist.")
        return assignment

    def GetAssignment(self, p: dict) -> dict:
        """As MTurk: only a submitted, approved or rejected assignment is described (the
        AssignmentStatus enum of botocore's service model has no other value). One accepted
        and not yet submitted, or returned, is refused with a RequestError, so a requester
        cannot tell from it whether, or by whom, an unsubmitted assignment is still held."""
        assignment = self._assignment(p)
        if assignment["AssignmentStatus"] not in ("Submitted", "Approved", "Rejected"):
            raise MTurkError("This operation can be called with a status of: "
                             "Reviewable,Approved,Rejected")
        return {"Assignment": assignment, "HIT": self._hit_view(self.hits[assignment["HITId"]])}

    def _decide(self, p: dict, status: str) -> dict:
        assignment = self._assignment(p)
        if status == "Approved" and p.get("OverrideRejection") \
                and assignment["AssignmentStatus"] == "Rejected":
            # As MTurk: a rejected assignment is approved when the rejection is overridden,
            # only within 30 days of its submission.
            if time.time() - assignment.get("SubmitTime", 0) > OVERRIDE_REJECTION_SECONDS:
                raise MTurkError("This assignment was submitted more than 30 days ago; its "
                                 "rejection can no longer be overridden.")
            self.overridden.append(p["AssignmentId"])
        elif assignment["AssignmentStatus"] != "Submitted":
            raise MTurkError(
                f"This operation can be called with a status of: Submitted "
                f"(assignment is {assignment['AssignmentStatus']})"
            )
        assignment["AssignmentStatus"] = status
        assignment[f"{'Approval' if status == 'Approved' else 'Rejection'}Time"] = time.time()
        if p.get("RequesterFeedback"):
            assignment["RequesterFeedback"] = p["RequesterFeedback"]
        if status == "Approved":
            self.balance -= Decimal(self.hits[assignment["HITId"]]["Reward"])
        return {}

    def ApproveAssignment(self, p: dict) -> dict:
        return self._decide(p, "Approved")

    def RejectAssignment(self, p: dict) -> dict:
        return self._decide(p, "Rejected")

    def SendBonus(self, p: dict) -> dict:
        token = p.get("UniqueRequestToken")
        if token and token in self.bonus_tokens:
            raise MTurkError(f"The UniqueRequestToken {token} has already been used; "
                             "the bonus was already sent (request ID 1)")
        assignment = self._assignment(p)
        if assignment["WorkerId"] != p["WorkerId"]:
            raise MTurkError("The worker did not work on this assignment.")
        if assignment["AssignmentStatus"] not in ("Approved", "Submitted"):
            raise MTurkError("Bonuses can only be paid for approved or submitted assignments.")
        if token:
            self.bonus_tokens.add(token)
        self.bonuses.append({"WorkerId": p["WorkerId"], "AssignmentId": p["AssignmentId"],
                             "BonusAmount": p["BonusAmount"], "Reason": p["Reason"],
                             "GrantTime": time.time()})
        self.balance -= Decimal(p["BonusAmount"])
        return {}

    def ListBonusPayments(self, p: dict) -> dict:
        rows = [b for b in self.bonuses if b["AssignmentId"] == p.get("AssignmentId")]
        return self._page(rows, p, "BonusPayments")

    def CreateWorkerBlock(self, p: dict) -> dict:
        self.blocks[p["WorkerId"]] = p["Reason"]
        return {}

    def DeleteWorkerBlock(self, p: dict) -> dict:
        self.blocks.pop(p["WorkerId"], None)
        return {}

    def NotifyWorkers(self, p: dict) -> dict:
        self.notifications.append(p)
        return {"NotifyWorkersFailureStatuses": []}

    def GetAccountBalance(self, p: dict) -> dict:
        return {"AvailableBalance": f"{self.balance:.2f}", "OnHoldBalance": "0.00"}

    def CreateQualificationType(self, p: dict) -> dict:
        if any(q["Name"] == p["Name"] for q in self.qualification_types.values()):
            raise MTurkError("A QualificationType with this name already exists.")
        type_id = _new_id(self.rng)
        self.qualification_types[type_id] = {
            "QualificationTypeId": type_id, "Name": p["Name"],
            "Description": p["Description"], "QualificationTypeStatus":
            p["QualificationTypeStatus"], "IsRequestable": False, "CreationTime": time.time(),
        }
        return {"QualificationType": self.qualification_types[type_id]}

    def ListQualificationTypes(self, p: dict) -> dict:
        query = (p.get("Query") or "").lower()
        rows = [q for q in self.qualification_types.values() if query in q["Name"].lower()]
        return self._page(rows, p, "QualificationTypes")

    def AssociateQualificationWithWorker(self, p: dict) -> dict:
        if p["QualificationTypeId"] not in self.qualification_types:
            raise MTurkError("QualificationType does not exist.")
        self.scores[(p["QualificationTypeId"], p["WorkerId"])] = int(p.get("IntegerValue", 1))
        return {}

    # --- simulated workers ----------------------------------------------------------------------
    def requirements_met(self, worker_id: str, hit_id: str) -> bool:
        if worker_id in self.blocks:
            return False
        for req in self.hits[hit_id]["QualificationRequirements"]:
            type_id, comparator = req["QualificationTypeId"], req["Comparator"]
            if type_id == APPROVAL_RATE:
                value = self.worker_approval_rate[worker_id]
            elif type_id == LOCALE:
                countries = {v["Country"] for v in req.get("LocaleValues", [])}
                if (self.worker_locale[worker_id] in countries) != (comparator != "NotIn"):
                    return False
                continue
            else:
                value = self.scores.get((type_id, worker_id))
            if comparator == "Exists" and value is None:
                return False
            if comparator == "DoesNotExist":
                if value is not None:
                    return False
                continue
            if comparator in COMPARATORS and (
                value is None or not COMPARATORS[comparator](value, req.get("IntegerValues") or [0])
            ):
                return False
        return True

    def worker_accept(self, hit_id: str, worker_id: str) -> str:
        with self.lock:
            if not worker_id:
                raise MTurkError("A worker id is needed to accept a HIT.")
            hit = self.hits.get(hit_id)
            if hit is None:
                raise MTurkError(f"Hit {hit_id} does not exist.", status=404)
            if hit["Expiration"] < time.time():
                raise MTurkError("This HIT has expired.")
            if not self.requirements_met(worker_id, hit_id):
                raise MTurkError(f"Worker {worker_id} does not meet the qualification requirements",
                                 status=403)
            mine = [a for a in self.assignments.values()
                    if a["HITId"] == hit_id and a["AssignmentStatus"] != "Returned"]
            if any(a["WorkerId"] == worker_id for a in mine):
                raise MTurkError("A worker can take a HIT only once.")
            if len(mine) >= hit["MaxAssignments"]:
                raise MTurkError("No assignments are available for this HIT.")
            assignment_id = _new_id(self.rng)
            self.assignments[assignment_id] = {
                "AssignmentId": assignment_id, "WorkerId": worker_id, "HITId": hit_id,
                "AssignmentStatus": "Accepted", "AcceptTime": time.time(),
                "Answer": "",
            }
            return assignment_id

    def worker_return(self, assignment_id: str, worker_id: str) -> dict:
        """The worker gives an accepted assignment back (MTurk's "Return"): its slot opens
        again and the worker may accept the HIT again, under a new assignment id."""
        with self.lock:
            assignment = self.assignments.get(assignment_id)
            if assignment is None or assignment["WorkerId"] != worker_id:
                raise MTurkError(f"Assignment {assignment_id!r} is not {worker_id}'s.", status=404)
            if assignment["AssignmentStatus"] != "Accepted":
                raise MTurkError(f"Assignment {assignment_id} is already "
                                 f"{assignment['AssignmentStatus']}; only an accepted one can "
                                 "be returned.", status=409)
            assignment["AssignmentStatus"] = "Returned"
            return assignment

    def worker_submit(self, assignment_id: str, answer: str = "<QuestionFormAnswers/>") -> dict:
        with self.lock:
            assignment = self.assignments.get(assignment_id)
            if assignment is None:
                raise MTurkError(f"Assignment {assignment_id!r} does not exist on this server "
                                 "(accept the HIT first).", status=404)
            if assignment["AssignmentStatus"] != "Accepted":
                raise MTurkError(f"Assignment {assignment_id} is already "
                                 f"{assignment['AssignmentStatus']}; it can be submitted once.",
                                 status=409)
            assignment["AssignmentStatus"] = "Submitted"
            assignment["SubmitTime"] = time.time()
            assignment["Answer"] = answer
            return assignment


class MTurkServer:
    """The HTTP front of `MTurkState` with fault injection. Use as a context manager.

    throttle_rate / throttle_next[op]: answer "Rate exceeded" instead of doing the operation;
    lose_response_next[op]: do the operation, then drop the connection without an answer;
    stall_after[op] = Event(): do the operation, set `stalled`, answer only once the event is
    set (so a test can kill the calling process while it waits).
    """

    def __init__(self, *, port: int = 0, throttle_rate: float = 0.0, seed: int = 0,
                 host: str = "127.0.0.1"):
        self.state = MTurkState(seed=seed)
        self.throttle_rate = throttle_rate
        self.throttle_next: dict[str, int] = defaultdict(int)
        self.lose_response_next: dict[str, int] = defaultdict(int)
        self.stats: dict[str, int] = defaultdict(int)
        self.stall_after: dict[str, threading.Event] = {}
        self.stalled = threading.Event()
        self._fault_rng = random.Random(seed + 1)
        self._ids = itertools.count(1)
        handler = self._handler_class()
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        self.state.site_url = self.url

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> MTurkServer:
        # A short poll interval: stop() waits for the next poll.
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> MTurkServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _handler_class(self):
        server = self

        class Handler(FakeApiHandler):
            # --- the worker site (browser) ------------------------------------------------
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = site.form_fields(url.query.encode())
                worker_id = query.get("workerId", "").strip()
                if url.path in ("/", "/worker", "/worker/"):
                    if not worker_id:
                        return self._html(200, site.ask_worker_page())
                    return self._html(200, site.hit_list_page(server.state, worker_id))
                if url.path == "/worker/preview":
                    hit = server.state.hits.get(query.get("hitId", ""))
                    if hit is None:
                        return self._html(404, site.error_page(
                            f"Hit {query.get('hitId', '')!r} does not exist."))
                    return self._redirect(site.task_url(
                        hit, assignment_id=site.PREVIEW_ASSIGNMENT_ID))
                return self._html(404, site.error_page(f"Nothing at {url.path}."))

            def _worker_post(self, path: str, fields: dict[str, str]) -> None:
                state = server.state
                if path == "/worker/accept":
                    worker_id = fields.get("workerId", "").strip()
                    hit_id = fields.get("hitId", "")
                    try:
                        assignment_id = state.worker_accept(hit_id, worker_id)
                        url = site.task_url(state.hits[hit_id], assignment_id=assignment_id,
                                            worker_id=worker_id, turk_submit_to=state.site_url)
                    except (MTurkError, site.WorkerSiteError) as exc:
                        status = exc.status if exc.status != 400 else 409
                        return self._html(status, site.error_page(str(exc),
                                                                  worker_id=worker_id))
                    server.stats["worker:accept"] += 1
                    return self._redirect(url)
                if path == "/worker/return":
                    worker_id = fields.get("workerId", "").strip()
                    try:
                        state.worker_return(fields.get("assignmentId", ""), worker_id)
                    except MTurkError as exc:
                        return self._html(exc.status, site.error_page(str(exc),
                                                                      worker_id=worker_id))
                    server.stats["worker:return"] += 1
                    return self._redirect("/worker/?" + site.urlencode({"workerId": worker_id}))
                # /mturk/externalSubmit
                assignment_id = fields.get("assignmentId", "")
                if not assignment_id:
                    return self._html(400, site.error_page(
                        "The form has no assignmentId: nothing to submit."))
                try:
                    assignment = state.worker_submit(assignment_id, site.answer_xml(fields))
                except MTurkError as exc:
                    return self._html(exc.status, site.error_page(str(exc)))
                server.stats["worker:submit"] += 1
                return self._html(200, site.submitted_page(assignment))

            def _html(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _redirect(self, location: str) -> None:
                self.send_response(303)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            # --- the requester API (boto3) ------------------------------------------------
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                path = urlsplit(self.path).path
                if path in ("/worker/accept", "/worker/return", "/mturk/externalSubmit"):
                    return self._worker_post(path, site.form_fields(raw))
                body = json.loads(raw or b"{}")
                target = self.headers.get("X-Amz-Target", "")
                if not target.startswith(TARGET_PREFIX):
                    return self._reply(400, {"__type": "UnknownOperationException",
                                             "Message": f"bad target {target!r}"})
                if "AWS4-HMAC-SHA256" not in self.headers.get("Authorization", ""):
                    return self._reply(403, {"__type": "MissingAuthenticationTokenException",
                                             "Message": "requests must be signed"})
                operation = target[len(TARGET_PREFIX):]
                server.stats[f"requests:{operation}"] += 1
                with server.state.lock:
                    if server.throttle_next[operation] > 0 or (
                        server.throttle_rate and server._fault_rng.random() < server.throttle_rate
                    ):
                        server.throttle_next[operation] = max(0, server.throttle_next[operation] - 1)
                        server.stats["throttled"] += 1
                        return self._reply(400, {"__type": "ThrottlingException",
                                                 "Message": "Rate exceeded"})
                    method = getattr(server.state, operation, None)
                    if method is None:
                        return self._reply(400, {"__type": "UnknownOperationException",
                                                 "Message": operation})
                    try:
                        result = method(body)
                        server.state.calls.append(operation)
                    except MTurkError as exc:
                        return self._reply(exc.status, {"__type": exc.code, "Message": str(exc)})
                    if self.lose_response_if_asked(server, operation):
                        return None
                stall = server.stall_after.pop(operation, None)
                if stall is not None:
                    # Done, but the answer waits: the caller can be killed in the meantime.
                    server.stalled.set()
                    stall.wait(60)
                try:
                    return self._reply(200, result)
                except OSError:  # the caller is gone
                    return None

            def _reply(self, status: int, payload: dict) -> None:
                data = json.dumps(payload, default=str).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("x-amzn-RequestId", f"req-{next(server._ids)}")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8443)
    parser.add_argument("--throttle-rate", type=float, default=0.0)
    args = parser.parse_args()
    server = MTurkServer(port=args.port, throttle_rate=args.throttle_rate)
    print(f"MTurk-protocol server on {server.url}", flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
