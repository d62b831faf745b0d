"""The interface every crowd provider implements (MTurk, Prolific, in-house links).

Providers translate between local rows (Stage, Hit, Assignment, Worker) and one platform's API.
They do not decide anything: which items go out, who is approved or paid, is decided by the
services in `annotation/services/` (stages, review, qualification), which call these methods
through `provider_call_run` so every side effect is recorded and done at most once.
"""
from __future__ import annotations

import abc
import dataclasses
import datetime as dt
import time
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.urls import NoReverseMatch, reverse


class SubmissionStatus:
    SUBMITTED = "submitted"
    APPROVED = "approved"
    REJECTED = "rejected"
    RETURNED = "returned"
    ACTIVE = "active"


@dataclasses.dataclass(frozen=True)
class Submission:
    """One worker's assignment as the provider sees it."""

    external_id: str  # MTurk AssignmentId, Prolific submission id (= SESSION_ID)
    worker_external_id: str
    hit_external_id: str
    status: str  # a SubmissionStatus value
    submitted_at: dt.datetime | None = None
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)


@dataclasses.dataclass(frozen=True)
class HitUpdate:
    """What the provider did to one HIT. Providers do not write rows: the service that called
    them records this on the Hit (`annotation.services.hits.hit_update_record`) as it arrives."""

    hit_id: int
    status: str
    external_id: str | None = None  # None: unchanged
    hit_type_id: str | None = None
    expires_at: dt.datetime | None = None
    unique_request_token: str | None = None  # the token a create call used, when new
    created: bool = True  # publishing: False when the HIT existed already (a resumed publish)


@dataclasses.dataclass(frozen=True)
class HitFailure:
    """A HIT (or, with `hit_id` None, `count` HITs of a study) the provider could not create."""

    hit_id: int | None
    error: str
    count: int = 1


@dataclasses.dataclass
class PublishReport:
    created: int = 0
    already_created: int = 0
    failed: int = 0
    errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.failed == 0


@dataclasses.dataclass(frozen=True)
class ReadinessProblem:
    """Why a provider cannot act for a stage (`blocking`), or a note worth reading first."""

    check: str  # what was checked: "credentials", "endpoint", "public URL", "balance" ...
    message: str  # what is wrong and what to do
    blocking: bool = True

    def __str__(self) -> str:
        return f"{self.check}: {self.message}"


# The one currency of every amount QA Judge stores, shows and checks: rewards, bonuses,
# `QAJ_MIN_HOURLY_PAY`, budget caps, cost estimates and the total a researcher confirms. A
# provider account priced in another currency is refused at publish (`readiness_probe`).
AMOUNTS_CURRENCY = "USD"


@dataclasses.dataclass
class ProbeResult:
    """What a provider's read-only readiness call found."""

    balance: Decimal | None = None
    balance_error: str = ""
    problems: list[ReadinessProblem] = dataclasses.field(default_factory=list)


def balance_error_text(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    detail = (f"{error.get('Code')}: {error.get('Message', '')}" if error.get("Code")
              else f"{type(exc).__name__}: {exc}")
    return detail.strip()[:300]


def is_url(value: str, *, schemes=("http", "https")) -> bool:
    parsed = urlparse(value or "")
    return parsed.scheme in schemes and bool(parsed.netloc)


def is_local_host(url: str) -> bool:
    host = (urlparse(url or "").hostname or "").lower()
    return host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or host.endswith(".localhost")


def public_url_problems(*, who: str, must_be_public: bool) -> list[ReadinessProblem]:
    """QAJ_PUBLIC_BASE_URL, where the provider sends workers: a URL; https and not this machine
    when real workers on the internet are sent there (`must_be_public`)."""
    base = settings.QAJ_PUBLIC_BASE_URL or ""
    if not is_url(base):
        return [ReadinessProblem("public URL", f"QAJ_PUBLIC_BASE_URL={base!r} is not an http(s) "
                                               "URL: set it to the address workers open")]
    if must_be_public and (urlparse(base).scheme != "https" or is_local_host(base)):
        return [ReadinessProblem(
            "public URL", f"{who} sends workers to QAJ_PUBLIC_BASE_URL={base!r}; it must be an "
                          "https address reachable from the internet (set QAJ_PUBLIC_BASE_URL)")]
    return []


class CrowdProvider(abc.ABC):
    """One crowd platform. Methods take model instances; ids come back as strings."""

    name: str = ""
    # True where the provider keeps its own list of submissions (MTurk, Prolific): a local
    # assignment is approved, paid or counted for a qualification only once the sync found it
    # in that list (`Assignment.provider_confirmed_at`). The task pages cannot tell a real
    # assignment id from a made-up one; the provider's list can.
    confirms_submissions: bool = False
    # How long the provider deduplicates an idempotency token (MTurk: 24 hours); past this a
    # retry must look for what the first attempt did before calling again.
    token_dedup_window: dt.timedelta | None = None

    def environment(self) -> str:
        """Where publishing sends the work and the money, in the researcher's words ("MTurk
        sandbox (no real money)", "MTurk PRODUCTION (real money)"); "" where there is no
        platform (in-house, imports)."""
        return ""

    def spends_real_money(self) -> bool:
        """Whether publishing here pays real workers with real money (MTurk production,
        Prolific's own API): such a publish needs the researcher's confirmation of its cost
        (`annotation/cost_selectors.py:publish_confirmation_needed`)."""
        return False

    # --- money ------------------------------------------------------------------------------
    def fee_rate(self, *, max_assignments: int) -> Decimal:
        """Commission on rewards of a HIT with this many assignments."""
        return Decimal("0")

    def bonus_fee_rate(self) -> Decimal:
        return Decimal("0")

    def assignment_fee(self, *, reward: Decimal, max_assignments: int) -> Decimal:
        """Commission on one assignment of a HIT with this many assignments."""
        return reward * self.fee_rate(max_assignments=max_assignments)

    def bonus_fee(self, *, amount: Decimal) -> Decimal:
        """Commission on one bonus payment."""
        return amount * self.bonus_fee_rate()

    def balance(self, *, stage=None) -> Decimal | None:
        """Money available on the account, when the provider says (`stage`: the account
        or workspace that stage would be paid from, where the provider has several)."""
        return None

    # --- readiness (annotation/readiness_selectors.py) -------------------------------------
    def readiness_problems(self, *, stage) -> list[ReadinessProblem]:
        """What stops this provider from acting for the stage, found without the network:
        credentials, endpoint, settings. Empty when nothing does."""
        return []

    def readiness_probe(self, *, stage) -> ProbeResult:
        """One read-only call that proves the provider answers (and its balance, where it has
        one). The default asks for the balance and reports a failure as a note only."""
        try:
            return ProbeResult(balance=self.balance(stage=stage))
        except Exception as exc:  # shown to the researcher, never hidden
            return ProbeResult(balance_error=balance_error_text(exc))

    # --- publishing ---------------------------------------------------------------------------
    # HITs whose provider ids must be stored before the create call (MTurk's UniqueRequestToken).
    needs_request_tokens: bool = False

    @abc.abstractmethod
    def publish_stage(self, *, stage) -> Iterator[HitUpdate | HitFailure]:
        """Create the stage's pending HITs/study on the provider (idempotent, resumable),
        yielding what happened to each HIT as soon as it happened."""

    def expire_stage(self, *, stage) -> Iterator[HitUpdate]:
        """Stop new workers from starting (expire HITs / stop the study)."""
        return iter(())

    def extend_stage(self, *, stage, seconds: int) -> Iterator[HitUpdate]:
        """Keep the stage open `seconds` longer."""
        return iter(())

    def stage_recruiting(self, *, stage, recruiting: bool, occasion: str) -> dict:
        """Let the provider recruit new workers for the stage (`recruiting`: it collects) or
        stop showing it to them (it is reviewing), once per `occasion` (the stage transition
        it follows; `annotation/services/stages.py:stage_recruitment_follow`). Nothing by
        default: a reviewing MTurk stage has no assignment left to accept, and our pages
        refuse in-house links of a stage that does not collect."""
        return {}

    # --- participants' sessions ---------------------------------------------------------------
    def sessions_listable(self, *, stage) -> bool:
        """True where `list_submissions` lists every session of the stage, started or
        submitted (Prolific with a known study): a local session missing from it is made up."""
        return False

    def session_verify(self, *, stage, worker_external_id: str, session_id: str,
                       attempts: int | None = None, timeout: float | None = None) -> bool | None:
        """Whether the provider knows this session for this worker in this stage: True, False,
        or None when it cannot tell (the default: providers without sessions to verify)."""
        return None

    # --- submissions --------------------------------------------------------------------------
    @abc.abstractmethod
    def list_submissions(self, *, stage) -> Iterator[Submission]:
        """Every submission of the stage, paging through the provider's whole list."""

    @abc.abstractmethod
    def approve(self, *, assignment, feedback: str = "") -> dict:
        ...

    @abc.abstractmethod
    def reject(self, *, assignment, reason: str) -> dict:
        ...

    def rejection_reversal_refusal(self, *, assignment, now: dt.datetime) -> str:
        """Why this provider cannot approve `assignment`, which it rejected ("" when it can),
        saying what the researcher can do instead (`assignment_rejection_reverse`). By
        default it cannot."""
        return (f"{self.name} offers no way to approve work it rejected; nothing was sent "
                f"or changed")

    def approve_rejected(self, *, assignment, feedback: str) -> dict:
        """Approve (and pay) work this provider rejected, once; only where
        `rejection_reversal_refusal` is ""."""
        raise NotImplementedError(f"{self.name} cannot approve work it rejected")

    @abc.abstractmethod
    def bonus(self, *, assignment, amount: Decimal, reason: str, token: str) -> dict:
        """Pay `amount` once; `token` identifies this payment across retries."""

    def assignments_add(self, *, hit, count: int, token: str) -> dict:
        """Offer `count` more assignments on an existing HIT, once per `token` (a retry with the
        same token adds nothing more). Only providers whose HITs fix their number of
        assignments need it (MTurk); providers that pick items per worker refill a slot given
        back without a call (Prolific still needs a place for the new participant when it
        kept the old one's: `ProlificProvider.study_places_raise`)."""
        raise NotImplementedError(f"{self.name} has no assignments to add")

    # --- workers --------------------------------------------------------------------------------
    def block(self, *, worker, reason: str) -> dict:
        return {}

    def unblock(self, *, worker, reason: str) -> dict:
        return {}

    def notify(self, *, workers: Iterable, subject: str, message: str) -> dict:
        return {}

    def grant_qualification(self, *, stage, worker, value: int, passed: bool) -> dict:
        """Record a qualification result where the provider can enforce it."""
        return {}

    def withdraw_qualification(self, *, stage, worker, value: int) -> dict:
        """Take back a pass recorded with `grant_qualification` (its work was rejected):
        `value` is the failing value to record where the provider keeps one."""
        return {}

    # --- reconciliation ------------------------------------------------------------------------
    def confirmation_deadline(self, *, assignment) -> dt.datetime | None:
        """When a locally submitted assignment must have shown up in the provider's list; past
        it, an assignment the provider never listed is flagged (a forged or lost id). None: no
        deadline yet (or no confirmation needed)."""
        return None

    def accepts_no_more_submissions(self, *, stage, now: dt.datetime,
                                    active_listed: int) -> tuple[bool, str]:
        """Whether a closed stage can still receive submissions on the provider; the reason is
        shown while it can. `active_listed`: submissions the last sync saw still in progress."""
        return True, ""

    def bonus_payments(self, *, assignment) -> list[tuple[Decimal, str]] | None:
        """(amount, reason) of every bonus the provider has paid for the assignment, where the
        provider can list them (None: it cannot)."""
        return None

    def hit_state(self, *, hit) -> HitUpdate | None:
        """The HIT's status and expiry as the provider holds them now (a researcher may expire
        or extend a HIT on the provider's own site), where the provider keeps one per HIT
        (None: it does not). Raises when the provider cannot be asked now."""
        return None


class RemoteProvider(CrowdProvider):
    """A provider reached over the network (MTurk, Prolific): its API client is created on
    first use unless one is given (tests pass a stubbed one), and retries sleep through `sleep`
    (tests record the backoff instead of waiting); `retries_done` counts them."""

    def __init__(self, client=None, *, sleep=time.sleep):
        self._client = client
        self._sleep = sleep
        self.retries_done = 0


def task_url(route: str, *, stage, fallback: str) -> str:
    """Absolute URL of a task page under the public base URL (the task pages are another
    helper's; a fallback path keeps publishing possible before their routes exist)."""
    try:
        path = reverse(route, args=[stage.pk])
    except NoReverseMatch:
        path = fallback.format(stage_id=stage.pk)
    return settings.QAJ_PUBLIC_BASE_URL.rstrip("/") + path


def stage_title(stage) -> str:
    return stage.settings.get("title") or f"{stage.project.title}: {stage.name}"


def stage_description(stage) -> str:
    return stage.settings.get("description") or (
        stage.project.get_kind_display() + " — judge the quality of answers to questions."
    )


def call_token_is_stale(*, key: str, window: dt.timedelta | None,
                        margin: dt.timedelta = dt.timedelta(hours=1)) -> bool:
    """Whether the recorded, not yet successful call `key` was first made so long ago that the
    provider may have forgotten its idempotency token (MTurk keeps it 24 hours): a retry must
    then look for what the first attempt did instead of trusting the token."""
    if window is None:
        return False
    from django.utils import timezone

    from annotation.models import ProviderCall, ProviderCallStatus

    return ProviderCall.objects.filter(
        key=key, created_at__lt=timezone.now() - (window - margin)
    ).exclude(status=ProviderCallStatus.SUCCEEDED).exists()


def stage_setting_store(stage, key: str, value: str) -> None:
    """Store a provider id in `stage.settings` without overwriting concurrent edits of others."""
    from django.db import transaction

    from annotation.models import Stage

    with transaction.atomic():
        fresh = Stage.objects.select_for_update().get(pk=stage.pk)
        fresh.settings = {**(fresh.settings or {}), key: value}
        fresh.save(update_fields=["settings", "updated_at"])
    stage.settings = {**(stage.settings or {}), key: value}
