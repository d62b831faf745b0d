"""MTurk's side of the wire, without our rows: endpoints (sandbox unless production is switched
on), the boto3 client with adaptive retries, how its errors are classified (throttling, transient,
duplicate token), the ExternalQuestion XML, MTurk's system qualifications and its fee rules."""
from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from django.conf import settings
from django.utils import timezone

from .base import (
    ReadinessProblem,
    SubmissionStatus,
)

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


TOKEN_DEDUP_WINDOW = dt.timedelta(hours=24)  # how long MTurk remembers a UniqueRequestToken


DEFAULT_LIFETIME_SECONDS = 7 * 86400


MIN_COMMISSION = Decimal("0.01")  # MTurk's minimum fee per assignment and per bonus payment


STATUS_MAP = {
    "Submitted": SubmissionStatus.SUBMITTED,
    "Approved": SubmissionStatus.APPROVED,
    "Rejected": SubmissionStatus.REJECTED,
}


def mturk_endpoint() -> str:
    if settings.MTURK_ENDPOINT_URL:
        return settings.MTURK_ENDPOINT_URL
    return PRODUCTION_ENDPOINT if settings.MTURK_PRODUCTION else SANDBOX_ENDPOINT


def _endpoint_host(url: str) -> str:
    return (urlsplit(url or "").hostname or "").lower()


def mturk_is_production() -> bool:
    """Whether calls reach MTurk's production requester API (real money), however its address
    is written: `MTURK_ENDPOINT_URL=https://mturk-requester.us-east-1.amazonaws.com/` (a
    trailing slash, capitals) is production as much as `MTURK_PRODUCTION=true`. Compared as
    strings, it read as "not production": no red banner, no https check of the task URL."""
    return _endpoint_host(mturk_endpoint()) == _endpoint_host(PRODUCTION_ENDPOINT)


def mturk_environment() -> str:
    """Which MTurk the calls reach, as every publish door says it before money is spent (the
    estimate, the publish message and its logged transition, the readiness check, the
    cockpit)."""
    if mturk_is_production():
        return "MTurk PRODUCTION (real money)"
    endpoint = mturk_endpoint()
    if _endpoint_host(endpoint) == _endpoint_host(SANDBOX_ENDPOINT):
        return "MTurk sandbox (no real money)"
    return f"the MTurk endpoint {endpoint} (MTURK_ENDPOINT_URL; neither the sandbox nor production)"


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


def assignment_duration_seconds(stage) -> int:
    """How long a worker has for an assignment once accepted (the HIT type's duration)."""
    return int((stage.settings or {}).get("assignment_duration_seconds",
                                          stage.project.assignment_timeout_minutes * 60))


# CreateHITType's limits (botocore's service model: CurrencyAmount, AssignmentDurationInSeconds).
MIN_REWARD = Decimal("0.01")
MIN_ASSIGNMENT_DURATION_SECONDS = 30
MAX_ASSIGNMENT_DURATION_SECONDS = 31_536_000


def hit_type_problems(stage) -> list[ReadinessProblem]:
    """What MTurk would refuse in the stage's HIT type, found before anything is created (a
    refused CreateHITType after CreateQualificationType left a half-published stage): a
    reward under $0.01, an assignment duration outside 30 s to 365 days (the project's
    timeout in minutes, or the stage's `assignment_duration_seconds`)."""
    problems = []
    reward = Decimal(str(stage.reward))
    if reward < MIN_REWARD:
        problems.append(ReadinessProblem(
            "reward", f"the reward per HIT is ${reward}; MTurk pays at least ${MIN_REWARD}"))
    duration = assignment_duration_seconds(stage)
    if not MIN_ASSIGNMENT_DURATION_SECONDS <= duration <= MAX_ASSIGNMENT_DURATION_SECONDS:
        problems.append(ReadinessProblem(
            "assignment duration",
            f"an assignment lasts {duration} s (the project's assignment timeout, or the "
            f"stage's assignment_duration_seconds); MTurk takes "
            f"{MIN_ASSIGNMENT_DURATION_SECONDS} s to {MAX_ASSIGNMENT_DURATION_SECONDS} s"))
    return problems


def lifetime_seconds(stage) -> int:
    return int((stage.settings or {}).get("lifetime_seconds", DEFAULT_LIFETIME_SECONDS))


def external_question_xml(url: str, frame_height: int) -> str:
    return (
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_SCHEMA}">'
        f"<ExternalURL>{escape(url)}</ExternalURL>"
        f"<FrameHeight>{int(frame_height)}</FrameHeight>"
        "</ExternalQuestion>"
    )


def parse_response_time(value) -> dt.datetime | None:
    """A time in an MTurk response (boto3 gives datetimes; one stored in a ProviderCall's
    response is an ISO string) as an aware datetime; None when absent or unreadable."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if timezone.is_aware(value) else timezone.make_aware(value, dt.UTC)
    if isinstance(value, int | float):
        return dt.datetime.fromtimestamp(value, tz=dt.UTC)
    if isinstance(value, str):  # a datetime stored in a ProviderCall response
        try:
            return parse_response_time(dt.datetime.fromisoformat(value))
        except ValueError:
            return None
    return None
