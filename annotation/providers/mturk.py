"""Amazon Mechanical Turk through boto3 (API 2017-01-17).

The sandbox is the default endpoint; production needs `MTURK_PRODUCTION=true`;
`MTURK_ENDPOINT_URL` points the client anywhere else (the local MTurk-protocol test server).
Credentials come from the standard AWS chain (environment, ~/.aws, instance role).

Retries are ours rather than botocore's (botocore's are switched off) so there is exactly one
place that decides what is safe to repeat: throttling ("Rate exceeded"), 5xx faults and lost
connections are retried with exponential backoff and the SAME parameters — including the
UniqueRequestToken, which MTurk deduplicates — so a retried CreateHIT or SendBonus never creates a
second HIT or pays twice.
"""
from __future__ import annotations

import datetime as dt
import logging
import random
import re
import time
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape

from django.conf import settings
from django.utils import timezone

from annotation.models import Hit, HitStatus, Provider, StageKind
from annotation.services.provider_calls import (
    ProviderCallRefused,
    new_token,
    provider_call_run,
)

from .base import (
    CrowdProvider,
    PublishReport,
    Submission,
    SubmissionStatus,
    stage_description,
    stage_setting_store,
    stage_title,
    task_url,
)

logger = logging.getLogger(__name__)

SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
# System qualification types (the same ids in the sandbox and in production).
APPROVAL_RATE_QUALIFICATION = "000000000000000000L0"
LOCALE_QUALIFICATION = "00000000000000000071"
EXTERNAL_QUESTION_SCHEMA = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
    "ExternalQuestion.xsd"
)
HIT_ID_RE = re.compile(r"\b([A-Z0-9]{20,40})\b")
THROTTLE_CODES = {"ThrottlingException", "Throttling", "TooManyRequestsException"}
MAX_NOTIFY_RECIPIENTS = 100  # NotifyWorkers accepts at most 100 worker ids per call

STATUS_MAP = {
    "Submitted": SubmissionStatus.SUBMITTED,
    "Approved": SubmissionStatus.APPROVED,
    "Rejected": SubmissionStatus.REJECTED,
}


def mturk_endpoint() -> str:
    if settings.MTURK_ENDPOINT_URL:
        return settings.MTURK_ENDPOINT_URL
    return PRODUCTION_ENDPOINT if settings.MTURK_PRODUCTION else SANDBOX_ENDPOINT


def mturk_is_production() -> bool:
    return mturk_endpoint() == PRODUCTION_ENDPOINT


def mturk_client():
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"total_max_attempts": 1},  # our own retry loop, see the module docstring
        connect_timeout=float(getattr(settings, "MTURK_CONNECT_TIMEOUT", 10)),
        read_timeout=float(getattr(settings, "MTURK_READ_TIMEOUT", 30)),
    )
    return boto3.client(
        "mturk", region_name="us-east-1", endpoint_url=mturk_endpoint(), config=config
    )


def is_throttling(exc: Exception) -> bool:
    from botocore.exceptions import ClientError

    if not isinstance(exc, ClientError):
        return False
    error = exc.response.get("Error", {})
    return error.get("Code") in THROTTLE_CODES or "rate exceeded" in str(
        error.get("Message", "")
    ).lower()


def is_transient(exc: Exception) -> bool:
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    if isinstance(exc, ConnectionError | HTTPClientError):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return status >= 500 or exc.response.get("Error", {}).get("Code") == "ServiceFault"
    return False


def error_message(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    error = response.get("Error", {})
    return f"{error.get('Code', type(exc).__name__)}: {error.get('Message', exc)}"


def is_duplicate_token(exc: Exception) -> bool:
    message = error_message(exc).lower()
    return "already exists" in message or "uniquerequesttoken" in message or (
        "already" in message and "token" in message
    )


def external_question_xml(url: str, frame_height: int) -> str:
    return (
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_SCHEMA}">'
        f"<ExternalURL>{escape(url)}</ExternalURL>"
        f"<FrameHeight>{int(frame_height)}</FrameHeight>"
        "</ExternalQuestion>"
    )


class MTurkProvider(CrowdProvider):
    name = Provider.MTURK

    def __init__(self, client=None, *, sleep=time.sleep):
        self._client = client
        self._sleep = sleep
        self.retries_done = 0

    @property
    def client(self):
        if self._client is None:
            self._client = mturk_client()
        return self._client

    # --- the one retry loop ------------------------------------------------------------------
    def call(self, operation: str, *, attempts: int | None = None, **params) -> dict[str, Any]:
        attempts = attempts or int(getattr(settings, "MTURK_MAX_ATTEMPTS", 8))
        base = float(getattr(settings, "MTURK_RETRY_BASE_SECONDS", 0.5))
        for attempt in range(attempts):
            try:
                return getattr(self.client, operation)(**params)
            except Exception as exc:
                if attempt + 1 >= attempts or not (is_throttling(exc) or is_transient(exc)):
                    raise
                self.retries_done += 1
                delay = min(20.0, base * (2**attempt)) * (0.5 + random.random() / 2)
                logger.info("MTurk %s: %s; retry %d in %.2fs", operation,
                            error_message(exc), attempt + 1, delay)
                self._sleep(delay)
        raise AssertionError("unreachable")

    # --- money ---------------------------------------------------------------------------------
    def fee_rate(self, *, max_assignments: int) -> Decimal:
        # MTurk: 20% commission, 40% for HITs with 10 or more assignments.
        return Decimal("0.40") if max_assignments >= 10 else Decimal("0.20")

    def bonus_fee_rate(self) -> Decimal:
        return Decimal("0.20")

    def balance(self) -> Decimal | None:
        # Informational: a short try, so an unreachable endpoint does not hold up the admin.
        response = self.call("get_account_balance", attempts=2)
        return Decimal(response["AvailableBalance"])

    # --- HIT type, qualification type, HITs -----------------------------------------------------
    def qualification_requirements(self, stage) -> list[dict[str, Any]]:
        options = stage.settings or {}
        requirements: list[dict[str, Any]] = []
        rate = options.get("min_approval_rate", 95)
        if rate:
            requirements.append({
                "QualificationTypeId": APPROVAL_RATE_QUALIFICATION,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [int(rate)],
                "ActionsGuarded": "Accept",
            })
        locales = options.get("locales", ["US"])
        if locales:
            requirements.append({
                "QualificationTypeId": LOCALE_QUALIFICATION,
                "Comparator": "In",
                "LocaleValues": [{"Country": country} for country in locales],
                "ActionsGuarded": "Accept",
            })
        if stage.kind == StageKind.QUALIFICATION:
            # Everyone who took the qualification holds its type (value = score), so this guard
            # is what stops a failing worker from retaking it.
            requirements.append({
                "QualificationTypeId": self.ensure_qualification_type(stage),
                "Comparator": "DoesNotExist",
                "ActionsGuarded": "DiscoverPreviewAndAccept",
            })
        required = stage.requires_stage
        if required is not None and required.kind == StageKind.QUALIFICATION:
            threshold = round(required.project.qualification_threshold * 100)
            requirements.append({
                "QualificationTypeId": self.ensure_qualification_type(required),
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [threshold],
                "ActionsGuarded": "DiscoverPreviewAndAccept",
            })
        return requirements

    def ensure_qualification_type(self, stage) -> str:
        type_id = (stage.settings or {}).get("mturk_qualification_type_id")
        if type_id:
            return type_id
        name = f"QA Judge {stage.project.slug} {stage.name} #{stage.pk}"[:120]
        try:
            response = self.call(
                "create_qualification_type",
                Name=name,
                Keywords="qa judge, qualification",
                Description=f"Result of the qualification for {stage.project.title}"[:2000],
                QualificationTypeStatus="Active",
            )
            type_id = response["QualificationType"]["QualificationTypeId"]
        except Exception as exc:
            if not is_duplicate_token(exc):
                raise
            type_id = self._find_qualification_type(name)
        stage_setting_store(stage, "mturk_qualification_type_id", type_id)
        return type_id

    def _find_qualification_type(self, name: str) -> str:
        params: dict[str, Any] = {
            "Query": name, "MustBeRequestable": False, "MustBeOwnedByCaller": True,
            "MaxResults": 100,
        }
        while True:
            page = self.call("list_qualification_types", **params)
            for qtype in page.get("QualificationTypes", []):
                if qtype["Name"] == name:
                    return qtype["QualificationTypeId"]
            if not page.get("NextToken"):
                raise ProviderCallRefused(f"qualification type {name!r} exists but was not found")
            params["NextToken"] = page["NextToken"]

    def ensure_hit_type(self, stage) -> str:
        type_id = (stage.settings or {}).get("mturk_hit_type_id")
        if type_id:
            return type_id
        options = stage.settings or {}
        params = {
            "AutoApprovalDelayInSeconds": int(options.get("auto_approval_delay_seconds", 3 * 86400)),
            "AssignmentDurationInSeconds": int(
                options.get("assignment_duration_seconds",
                            stage.project.assignment_timeout_minutes * 60)
            ),
            "Reward": f"{Decimal(str(stage.reward)):.2f}",
            "Title": stage_title(stage)[:128],
            "Keywords": options.get("keywords", "question answering, reading, evaluation, judgment"),
            "Description": stage_description(stage)[:2000],
            "QualificationRequirements": self.qualification_requirements(stage),
        }
        # CreateHITType is idempotent on MTurk's side: the same parameters give the same id.
        type_id = self.call("create_hit_type", **params)["HITTypeId"]
        stage_setting_store(stage, "mturk_hit_type_id", type_id)
        return type_id

    def publish_stage(self, *, stage) -> PublishReport:
        report = PublishReport()
        hit_type_id = self.ensure_hit_type(stage)
        url = task_url("annotation:task-mturk", stage=stage, fallback="/task/mturk/{stage_id}/")
        question = external_question_xml(url, int(stage.settings.get("frame_height", 0)))
        for hit in stage.hits.filter(status=HitStatus.PENDING).order_by("id"):
            try:
                created = self.create_hit(hit=hit, hit_type_id=hit_type_id, question=question)
            except Exception as exc:
                report.failed += 1
                report.errors.append(f"HIT {hit.pk}: {error_message(exc)}")
                logger.warning("CreateHIT for local HIT %s failed: %s", hit.pk, error_message(exc))
                continue
            if created:
                report.created += 1
            else:
                report.already_created += 1
        return report

    def create_hit(self, *, hit: Hit, hit_type_id: str, question: str) -> bool:
        """Create one HIT; True when this call created it, False when it already existed."""
        if not hit.unique_request_token:
            # Stored (and committed, outside a transaction) BEFORE the call.
            hit.unique_request_token = new_token(f"qaj-hit-{hit.pk}")
            hit.save(update_fields=["unique_request_token"])
        lifetime = int(hit.stage.settings.get("lifetime_seconds", 7 * 86400))
        duplicate = {"seen": False}

        def create(token: str) -> dict:
            try:
                response = self.call(
                    "create_hit_with_hit_type",
                    HITTypeId=hit_type_id,
                    MaxAssignments=hit.max_assignments,
                    LifetimeInSeconds=lifetime,
                    Question=question,
                    RequesterAnnotation=token,
                    UniqueRequestToken=token,
                )
                return {"HITId": response["HIT"]["HITId"],
                        "Expiration": response["HIT"].get("Expiration")}
            except Exception as exc:
                if is_duplicate_token(exc):
                    duplicate["seen"] = True
                    return {"HITId": self._find_hit_by_token(token, exc), "duplicate": True}
                if is_throttling(exc) or is_transient(exc):
                    raise
                raise ProviderCallRefused(error_message(exc)) from exc

        response = provider_call_run(
            provider=Provider.MTURK,
            operation="CreateHITWithHITType",
            key=f"mturk:hit-create:{hit.pk}",
            token=hit.unique_request_token,
            call_fn=create,
            stage=hit.stage,
            hit=hit,
            request={"HITTypeId": hit_type_id, "MaxAssignments": hit.max_assignments},
        )
        hit.external_id = response["HITId"]
        hit.hit_type_id = hit_type_id
        hit.status = HitStatus.OPEN
        hit.expires_at = _parse_time(response.get("Expiration")) or (
            timezone.now() + dt.timedelta(seconds=lifetime)
        )
        hit.save(update_fields=["external_id", "hit_type_id", "status", "expires_at"])
        return not duplicate["seen"] and not response.get("duplicate")

    def _find_hit_by_token(self, token: str, exc: Exception) -> str:
        """A retried CreateHIT whose first attempt reached MTurk: find the HIT it made."""
        for candidate in HIT_ID_RE.findall(error_message(exc)):
            try:
                found = self.call("get_hit", HITId=candidate)["HIT"]
            except Exception:  # not a HIT id after all
                continue
            if found.get("RequesterAnnotation") in (token, None, ""):
                return found["HITId"]
        params: dict[str, Any] = {"MaxResults": 100}
        while True:
            page = self.call("list_hits", **params)
            for found in page.get("HITs", []):
                if found.get("RequesterAnnotation") == token:
                    return found["HITId"]
            if not page.get("NextToken"):
                raise ProviderCallRefused(f"MTurk reports token {token} used but no HIT has it")
            params["NextToken"] = page["NextToken"]

    def expire_stage(self, *, stage) -> None:
        past = timezone.now() - dt.timedelta(minutes=1)  # a time in the past expires at once
        for hit in stage.hits.filter(status=HitStatus.OPEN).exclude(external_id=""):
            self.call("update_expiration_for_hit", HITId=hit.external_id, ExpireAt=past)
            hit.status = HitStatus.EXPIRED
            hit.expires_at = past
            hit.save(update_fields=["status", "expires_at"])

    def extend_stage(self, *, stage, seconds: int) -> None:
        until = timezone.now() + dt.timedelta(seconds=seconds)
        for hit in stage.hits.filter(status__in=[HitStatus.OPEN, HitStatus.EXPIRED]).exclude(
            external_id=""
        ):
            self.call("update_expiration_for_hit", HITId=hit.external_id, ExpireAt=until)
            hit.status = HitStatus.OPEN
            hit.expires_at = until
            hit.save(update_fields=["status", "expires_at"])

    # --- submissions -----------------------------------------------------------------------------
    def list_submissions(self, *, stage) -> Iterator[Submission]:
        for hit in stage.hits.exclude(external_id="").order_by("id"):
            yield from self.list_hit_assignments(hit_external_id=hit.external_id)

    def list_hit_assignments(self, *, hit_external_id: str) -> Iterator[Submission]:
        params: dict[str, Any] = {
            "HITId": hit_external_id,
            "MaxResults": 100,
            "AssignmentStatuses": ["Submitted", "Approved", "Rejected"],
        }
        while True:
            page = self.call("list_assignments_for_hit", **params)
            for raw in page.get("Assignments", []):
                yield Submission(
                    external_id=raw["AssignmentId"],
                    worker_external_id=raw["WorkerId"],
                    hit_external_id=raw["HITId"],
                    status=STATUS_MAP.get(raw["AssignmentStatus"], SubmissionStatus.ACTIVE),
                    submitted_at=_parse_time(raw.get("SubmitTime")),
                    raw={"Answer": raw.get("Answer", "")},
                )
            if not page.get("NextToken"):
                return
            params["NextToken"] = page["NextToken"]

    def _assignment_status(self, assignment_id: str) -> str:
        return self.call("get_assignment", AssignmentId=assignment_id)["Assignment"][
            "AssignmentStatus"
        ]

    def approve(self, *, assignment, feedback: str = "") -> dict:
        params: dict[str, Any] = {"AssignmentId": assignment.external_id}
        if feedback:
            params["RequesterFeedback"] = feedback[:1024]
        try:
            self.call("approve_assignment", **params)
        except Exception as exc:
            if is_throttling(exc) or is_transient(exc):
                raise
            # A retry after a lost response: approving twice is an error, not a second payment.
            if self._assignment_status(assignment.external_id) == "Approved":
                return {"already": True}
            raise ProviderCallRefused(error_message(exc)) from exc
        return {"approved": assignment.external_id}

    def reject(self, *, assignment, reason: str) -> dict:
        try:
            self.call(
                "reject_assignment",
                AssignmentId=assignment.external_id,
                RequesterFeedback=reason[:1024],
            )
        except Exception as exc:
            if is_throttling(exc) or is_transient(exc):
                raise
            if self._assignment_status(assignment.external_id) == "Rejected":
                return {"already": True}
            raise ProviderCallRefused(error_message(exc)) from exc
        return {"rejected": assignment.external_id}

    def bonus(self, *, assignment, amount: Decimal, reason: str, token: str) -> dict:
        try:
            self.call(
                "send_bonus",
                WorkerId=assignment.worker.external_id,
                BonusAmount=f"{amount:.2f}",
                AssignmentId=assignment.external_id,
                Reason=reason[:1024],
                UniqueRequestToken=token,
            )
        except Exception as exc:
            if is_duplicate_token(exc):
                return {"duplicate": True}  # the first attempt paid; do not pay again
            if is_throttling(exc) or is_transient(exc):
                raise
            raise ProviderCallRefused(error_message(exc)) from exc
        return {"paid": f"{amount:.2f}"}

    # --- workers -----------------------------------------------------------------------------------
    def block(self, *, worker, reason: str) -> dict:
        self.call("create_worker_block", WorkerId=worker.external_id, Reason=reason[:1024] or "-")
        return {"blocked": worker.external_id}

    def unblock(self, *, worker, reason: str) -> dict:
        self.call("delete_worker_block", WorkerId=worker.external_id, Reason=reason[:1024] or "-")
        return {"unblocked": worker.external_id}

    def notify(self, *, workers: Iterable, subject: str, message: str) -> dict:
        ids = [w.external_id for w in workers]
        failures: list[dict] = []
        for start in range(0, len(ids), MAX_NOTIFY_RECIPIENTS):
            response = self.call(
                "notify_workers",
                Subject=subject[:200],
                MessageText=message[:4096],
                WorkerIds=ids[start:start + MAX_NOTIFY_RECIPIENTS],
            )
            failures.extend(response.get("NotifyWorkersFailureStatuses", []))
        return {"sent": len(ids) - len(failures), "failures": failures}

    def grant_qualification(self, *, stage, worker, value: int, passed: bool) -> dict:
        type_id = self.ensure_qualification_type(stage)
        self.call(
            "associate_qualification_with_worker",
            QualificationTypeId=type_id,
            WorkerId=worker.external_id,
            IntegerValue=int(value),
            SendNotification=False,
        )
        return {"QualificationTypeId": type_id, "IntegerValue": int(value)}


def _parse_time(value) -> dt.datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if timezone.is_aware(value) else timezone.make_aware(value, dt.UTC)
    if isinstance(value, int | float):
        return dt.datetime.fromtimestamp(value, tz=dt.UTC)
    return None
