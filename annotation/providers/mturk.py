"""Amazon Mechanical Turk through boto3 (API 2017-01-17).

The sandbox is the default endpoint; production needs `MTURK_PRODUCTION=true`;
`MTURK_ENDPOINT_URL` points the client anywhere else (the local MTurk-protocol test server).
Credentials come from the standard AWS chain (environment, ~/.aws, instance role).

Retries are ours rather than botocore's (botocore's are switched off) so there is exactly one
place that decides what is safe to repeat: throttling ("Rate exceeded"), 5xx faults and lost
connections are retried with exponential backoff and the SAME parameters — including the
UniqueRequestToken, which MTurk deduplicates — so a retried CreateHIT or SendBonus never creates a
second HIT or pays twice. MTurk remembers a token for 24 hours only: a call first made longer
ago than that (23 hours, to be safe) looks for its result (ListHITs / ListBonusPayments) before
it is repeated.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import logging
import random
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils import timezone

from annotation.domain.qualification_scores import percent_threshold
from annotation.domain.stage_settings import mturk_auto_approval_delay
from annotation.models import (
    Hit,
    HitStatus,
    Provider,
    ProviderCall,
    ProviderCallStatus,
    StageKind,
)
from annotation.providers.calls import (
    ApprovedOnProvider,
    ProviderCallRefused,
    new_token,
    provider_call_run,
)

from .base import (
    HitFailure,
    HitUpdate,
    ProbeResult,
    ReadinessProblem,
    RemoteProvider,
    Submission,
    SubmissionStatus,
    call_token_is_stale,
    is_url,
    public_url_problems,
    stage_description,
    stage_setting_store,
    stage_title,
    task_url,
)
from .mturk_protocol import (
    APPROVAL_RATE_QUALIFICATION,
    HIT_ID_RE,
    LOCALE_QUALIFICATION,
    MAX_NOTIFY_RECIPIENTS,
    MIN_COMMISSION,
    STATUS_MAP,
    TOKEN_DEDUP_WINDOW,
    assignment_duration_seconds,
    error_message,
    external_question_xml,
    hit_type_problems,
    is_duplicate_token,
    is_throttling,
    is_transient,
    lifetime_seconds,
    mturk_client,
    mturk_endpoint,
    mturk_environment,
    mturk_is_production,
    parse_response_time,
)

logger = logging.getLogger(__name__)


def _digest(*parts: str) -> str:
    """A short stable key for a notification batch (its idempotency key)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:20]


# A submit on its way when the assignment duration ends (as the sweep of abandoned assignments,
# `annotation/services/assignments/timeouts.py:HIT_ASSIGNMENT_GRACE`).
SUBMIT_GRACE = dt.timedelta(minutes=10)
# How long after its submission MTurk still approves a rejected assignment (OverrideRejection).
OVERRIDE_REJECTION_WINDOW = dt.timedelta(days=30)


class MTurkProvider(RemoteProvider):
    name = Provider.MTURK
    confirms_submissions = True
    token_dedup_window = TOKEN_DEDUP_WINDOW

    @property
    def client(self):
        if self._client is None:
            self._client = mturk_client()
        return self._client

    # --- the one retry loop ------------------------------------------------------------------
    def call(self, operation: str, *, attempts: int | None = None,
             retry_transient: bool = True, **params) -> dict[str, Any]:
        """`retry_transient=False`: retry throttling only (never processed), for calls without
        an idempotency token whose repetition would show (NotifyWorkers)."""
        attempts = attempts or int(getattr(settings, "MTURK_MAX_ATTEMPTS", 8))
        base = float(getattr(settings, "MTURK_RETRY_BASE_SECONDS", 0.5))
        for attempt in range(attempts):
            try:
                return getattr(self.client, operation)(**params)
            except Exception as exc:
                retryable = is_throttling(exc) or (retry_transient and is_transient(exc))
                if attempt + 1 >= attempts or not retryable:
                    raise
                self.retries_done += 1
                delay = min(20.0, base * (2**attempt)) * (0.5 + random.random() / 2)
                logger.info("MTurk %s: %s; retry %d in %.2fs", operation,
                            error_message(exc), attempt + 1, delay)
                self._sleep(delay)
        raise AssertionError("unreachable")

    def environment(self) -> str:
        return mturk_environment()

    def spends_real_money(self) -> bool:
        return mturk_is_production()

    # --- money ---------------------------------------------------------------------------------
    def fee_rate(self, *, max_assignments: int) -> Decimal:
        # MTurk: 20% commission, 40% for HITs with 10 or more assignments.
        return Decimal("0.40") if max_assignments >= 10 else Decimal("0.20")

    def bonus_fee_rate(self) -> Decimal:
        return Decimal("0.20")

    def assignment_fee(self, *, reward: Decimal, max_assignments: int) -> Decimal:
        # MTurk charges at least $0.01 per assignment (and per bonus payment).
        if reward <= 0:
            return Decimal("0")
        return max(MIN_COMMISSION, reward * self.fee_rate(max_assignments=max_assignments))

    def bonus_fee(self, *, amount: Decimal) -> Decimal:
        if amount <= 0:
            return Decimal("0")
        return max(MIN_COMMISSION, amount * self.bonus_fee_rate())

    def balance(self, *, stage=None) -> Decimal | None:
        # Informational: a short try, so an unreachable endpoint does not hold up the admin.
        response = self.call("get_account_balance", attempts=2)
        return Decimal(response["AvailableBalance"])

    # --- readiness (annotation/readiness_selectors.py) -------------------------------------
    def readiness_problems(self, *, stage) -> list[ReadinessProblem]:
        problems = []
        custom = settings.MTURK_ENDPOINT_URL
        if custom and not is_url(custom):
            problems.append(ReadinessProblem(
                "endpoint", f"MTURK_ENDPOINT_URL={custom!r} is not an http(s) URL: unset it for "
                            "the sandbox (MTURK_PRODUCTION=true for production)"))
        if settings.MTURK_PRODUCTION and custom and not mturk_is_production():
            problems.append(ReadinessProblem(
                "endpoint", f"MTURK_PRODUCTION=true, but MTURK_ENDPOINT_URL={custom!r} sends "
                            f"every call to {mturk_environment()}: unset one of the two, so "
                            "that you publish where you meant to"))
        if self._client is None and not aws_credentials_found():
            problems.append(ReadinessProblem(
                "credentials", "no AWS credentials found: set AWS_ACCESS_KEY_ID and "
                               "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for the web and worker "
                               "processes"))
        problems += public_url_problems(who="MTurk production",
                                        must_be_public=mturk_is_production())
        problems += hit_type_problems(stage)
        return problems

    def readiness_probe(self, *, stage) -> ProbeResult:
        """GetAccountBalance: proves the credentials and the endpoint, and gives the balance.
        Throttling only leaves the balance unknown (MTurk answered); any other failure means
        no HIT could be created either."""
        try:
            return ProbeResult(balance=self.balance())
        except Exception as exc:
            text = error_message(exc)
            if is_throttling(exc):
                return ProbeResult(balance_error=text)
            return ProbeResult(balance_error=text, problems=[ReadinessProblem(
                "MTurk answer", f"GetAccountBalance at {mturk_endpoint()} failed ({text}): check "
                                "the AWS credentials and MTURK_PRODUCTION / MTURK_ENDPOINT_URL; "
                                "nothing was created")])

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
            threshold = percent_threshold(required.project.qualification_threshold)
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

        def create(_token: str) -> dict:
            try:
                response = self.call(
                    "create_qualification_type",
                    Name=name,
                    Keywords="qa judge, qualification",
                    Description=f"Result of the qualification for {stage.project.title}"[:2000],
                    QualificationTypeStatus="Active",
                )
                return {"QualificationTypeId":
                        response["QualificationType"]["QualificationTypeId"]}
            except Exception as exc:
                if not is_duplicate_token(exc):
                    raise
                # Made by an earlier attempt whose answer was lost: the name is ours.
                return {"QualificationTypeId": self._find_qualification_type(name),
                        "found_by": "ListQualificationTypes"}

        type_id = provider_call_run(
            provider=Provider.MTURK, operation="CreateQualificationType",
            key=f"mturk:qualification-type:{stage.pk}", call_fn=create, stage=stage,
            request={"Name": name},
        )["QualificationTypeId"]
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
            "AutoApprovalDelayInSeconds": mturk_auto_approval_delay(options),
            "AssignmentDurationInSeconds": assignment_duration_seconds(stage),
            "Reward": f"{Decimal(str(stage.reward)):.2f}",
            "Title": stage_title(stage)[:128],
            "Keywords": options.get("keywords", "question answering, reading, evaluation, judgment"),
            "Description": stage_description(stage)[:2000],
            "QualificationRequirements": self.qualification_requirements(stage),
        }
        # CreateHITType is idempotent on MTurk's side: the same parameters give the same id, so
        # a retry of a lost answer is harmless; the row records what was asked for.
        type_id = provider_call_run(
            provider=Provider.MTURK, operation="CreateHITType",
            key=f"mturk:hit-type:{stage.pk}",
            call_fn=lambda _token: {"HITTypeId": self.call("create_hit_type", **params)[
                "HITTypeId"]},
            stage=stage, request={"Reward": params["Reward"], "Title": params["Title"]},
        )["HITTypeId"]
        stage_setting_store(stage, "mturk_hit_type_id", type_id)
        return type_id

    needs_request_tokens = True

    def publish_stage(self, *, stage) -> Iterator[HitUpdate | HitFailure]:
        pending = stage.hits.filter(status=HitStatus.PENDING).order_by("id")
        try:
            hit_type_id = self.ensure_hit_type(stage)
        except Exception as exc:
            # No HIT can be made without its type (or the qualification type it requires):
            # each pending HIT failed, so the stage says so and publishing again retries.
            error = f"CreateHITType: {error_message(exc)}"
            logger.warning("stage %s: %s", stage.pk, error)
            for hit in pending:
                yield HitFailure(hit_id=hit.pk, error=f"HIT {hit.pk}: {error}")
            return
        url = task_url("annotation:task-mturk", stage=stage, fallback="/task/mturk/{stage_id}/")
        question = external_question_xml(url, int(stage.settings.get("frame_height", 0)))
        for hit in pending:
            try:
                yield self.create_hit(hit=hit, hit_type_id=hit_type_id, question=question)
            except Exception as exc:
                logger.warning("CreateHIT for local HIT %s failed: %s", hit.pk, error_message(exc))
                yield HitFailure(hit_id=hit.pk, error=f"HIT {hit.pk}: {error_message(exc)}")

    def create_hit(self, *, hit: Hit, hit_type_id: str, question: str) -> HitUpdate:
        """Create one HIT (`created` False when it already existed). Its UniqueRequestToken is
        the Hit's, which the publishing service stores before the call; a HIT without one gets
        a new token, recorded with the call (and returned to be stored)."""
        token = hit.unique_request_token or new_token(f"qaj-hit-{hit.pk}")
        lifetime = lifetime_seconds(hit.stage)
        duplicate = {"seen": False}
        key = f"mturk:hit-create:{hit.pk}"
        # MTurk forgets a token after 24 hours: a first attempt older than that may have made
        # the HIT without MTurk recognising the token any more, so look before creating.
        stale = call_token_is_stale(key=key, window=self.token_dedup_window)

        def create(token: str) -> dict:
            if stale:
                found = self._find_hit_by_annotation(token)
                if found is not None:
                    duplicate["seen"] = True
                    return {"HITId": found["HITId"], "Expiration": found.get("Expiration"),
                            "duplicate": True, "found_by": "ListHITs"}
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
            key=key,
            token=token,
            call_fn=create,
            stage=hit.stage,
            hit=hit,
            request={"HITTypeId": hit_type_id, "MaxAssignments": hit.max_assignments},
        )
        return HitUpdate(
            hit_id=hit.pk, status=HitStatus.OPEN, external_id=response["HITId"],
            hit_type_id=hit_type_id,
            expires_at=parse_response_time(response.get("Expiration")) or (
                timezone.now() + dt.timedelta(seconds=lifetime)),
            unique_request_token=None if hit.unique_request_token else token,
            created=not duplicate["seen"] and not response.get("duplicate"),
        )

    def _find_hit_by_token(self, token: str, exc: Exception) -> str:
        """A retried CreateHIT whose first attempt reached MTurk: find the HIT it made."""
        for candidate in HIT_ID_RE.findall(error_message(exc)):
            try:
                found = self.call("get_hit", HITId=candidate)["HIT"]
            except Exception:  # not a HIT id after all
                continue
            if found.get("RequesterAnnotation") in (token, None, ""):
                return found["HITId"]
        found = self._find_hit_by_annotation(token)
        if found is None:
            raise ProviderCallRefused(f"MTurk reports token {token} used but no HIT has it")
        return found["HITId"]

    def _find_hit_by_annotation(self, token: str) -> dict | None:
        """The HIT whose RequesterAnnotation is `token` (every HIT we create carries its
        token there), paging through ListHITs; None when there is none."""
        params: dict[str, Any] = {"MaxResults": 100}
        while True:
            page = self.call("list_hits", **params)
            for found in page.get("HITs", []):
                if found.get("RequesterAnnotation") == token:
                    return found
            if not page.get("NextToken"):
                return None
            params["NextToken"] = page["NextToken"]

    def _update_expiration(self, hit: Hit, when: dt.datetime, why: str) -> None:
        # Recorded like every side effect; each expire/extend is its own call (a new key), and
        # repeating one is harmless (it sets the same time again).
        def update(_token: str) -> dict:
            self.call("update_expiration_for_hit", HITId=hit.external_id, ExpireAt=when)
            return {"ExpireAt": when.isoformat()}

        provider_call_run(
            provider=Provider.MTURK, operation="UpdateExpirationForHIT",
            key=f"mturk:expiration:{hit.pk}:{why}:{new_token('x')}", call_fn=update,
            stage=hit.stage, hit=hit, request={"ExpireAt": when.isoformat(), "why": why},
        )

    def expire_stage(self, *, stage) -> Iterator[HitUpdate]:
        past = timezone.now() - dt.timedelta(minutes=1)  # a time in the past expires at once
        for hit in stage.hits.filter(status=HitStatus.OPEN).exclude(external_id=""):
            self._update_expiration(hit, past, "expire")
            yield HitUpdate(hit_id=hit.pk, status=HitStatus.EXPIRED, expires_at=past)

    def extend_stage(self, *, stage, seconds: int) -> Iterator[HitUpdate]:
        """Each HIT `seconds` longer than it would have lasted: from its own expiry while it is
        open, from now once it has expired. "Extend by one day" set every HIT to expire a day
        from now, which cut a HIT with six days left to one."""
        now = timezone.now()
        for hit in stage.hits.filter(status__in=[HitStatus.OPEN, HitStatus.EXPIRED]).exclude(
            external_id=""
        ):
            until = max(hit.expires_at or now, now) + dt.timedelta(seconds=seconds)
            self._update_expiration(hit, until, "extend")
            yield HitUpdate(hit_id=hit.pk, status=HitStatus.OPEN, expires_at=until)

    def hit_state(self, *, hit) -> HitUpdate | None:
        """GetHIT: the HIT's expiry on MTurk, which the requester site can change (Expire early,
        Extend); expired once that time has passed."""
        if not hit.external_id:
            return None
        found = self.call("get_hit", HITId=hit.external_id)["HIT"]
        expires = parse_response_time(found.get("Expiration"))
        if expires is None:
            return None
        status = HitStatus.EXPIRED if expires <= timezone.now() else HitStatus.OPEN
        return HitUpdate(hit_id=hit.pk, status=status, expires_at=expires)

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
                    submitted_at=parse_response_time(raw.get("SubmitTime")),
                    raw={"Answer": raw.get("Answer", "")},
                )
            if not page.get("NextToken"):
                return
            params["NextToken"] = page["NextToken"]

    # --- reconciliation ------------------------------------------------------------------------
    def confirmation_deadline(self, *, assignment) -> dt.datetime | None:
        """A real submission is listed by MTurk as soon as the worker submits, and MTurk takes
        it only within the assignment duration of its accept, which came before our page
        first opened it (`started_at`): after that (+ `SUBMIT_GRACE`) an unlisted one was
        returned (the late submit of a page left open), abandoned or made up. It was the HIT's
        expiry plus the duration (a week by default), while the stale submission held the
        HIT's local slot, so the worker who took the slot on MTurk read "no assignments left",
        and its answers counted. Never later than the last moment the HIT takes a submission."""
        stage = assignment.stage
        duration = dt.timedelta(seconds=assignment_duration_seconds(stage))
        deadlines = []
        if assignment.started_at is not None:
            deadlines.append(assignment.started_at + duration + SUBMIT_GRACE)
        hit = assignment.hit
        if hit is not None and hit.expires_at is not None:
            deadlines.append(hit.expires_at + duration)
        elif assignment.submitted_at is not None:
            deadlines.append(assignment.submitted_at + dt.timedelta(
                seconds=lifetime_seconds(stage)) + duration)
        return min(deadlines) if deadlines else None

    def accepts_no_more_submissions(self, *, stage, now: dt.datetime,
                                    active_listed: int) -> tuple[bool, str]:
        """No HIT can take a new submission once it has expired and the assignment duration
        has run out for the workers who accepted just before (a HIT whose every assignment is
        decided has no room left whatever its expiry)."""
        hits = list(stage.hits.exclude(external_id="").exclude(status=HitStatus.DONE)
                    .values_list("external_id", "expires_at"))
        unknown = [external_id for external_id, expires in hits if expires is None]
        if unknown:
            return False, f"expiry of HIT {unknown[0]} unknown"
        if not hits:
            return True, ""
        last = max(expires for _id, expires in hits) + dt.timedelta(
            seconds=assignment_duration_seconds(stage))
        if now < last:
            return False, (f"workers who accepted before the HITs expired can submit until "
                           f"{last:%Y-%m-%d %H:%M} UTC")
        return True, ""

    def bonus_payments(self, *, assignment) -> list[tuple[Decimal, str]]:
        params: dict[str, Any] = {"AssignmentId": assignment.external_id, "MaxResults": 100}
        payments: list[tuple[Decimal, str]] = []
        while True:
            page = self.call("list_bonus_payments", **params)
            payments += [(Decimal(str(row["BonusAmount"])), row.get("Reason", ""))
                         for row in page.get("BonusPayments", [])
                         if row.get("WorkerId") in (None, assignment.worker.external_id)]
            if not page.get("NextToken"):
                return payments
            params["NextToken"] = page["NextToken"]

    def _assignment_status(self, assignment_id: str) -> str:
        return self.call("get_assignment", AssignmentId=assignment_id)["Assignment"][
            "AssignmentStatus"
        ]

    def approve(self, *, assignment, feedback: str = "") -> dict:
        return self._approve(assignment, feedback, {})

    def _approve(self, assignment, feedback: str, extra: dict[str, Any]) -> dict:
        params: dict[str, Any] = {"AssignmentId": assignment.external_id, **extra}
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

    def rejection_reversal_refusal(self, *, assignment, now: dt.datetime) -> str:
        """MTurk approves a rejected assignment (ApproveAssignment with OverrideRejection) only
        within 30 days of its submission, and only while its HIT exists: past the window it
        refuses, so nothing is sent. Without a stored submission time MTurk itself decides."""
        submitted = assignment.submitted_at
        if submitted is None or now <= submitted + OVERRIDE_REJECTION_WINDOW:
            return ""
        return (f"MTurk approves a rejected assignment only within "
                f"{OVERRIDE_REJECTION_WINDOW.days} days of its submission, and this one was "
                f"submitted on {submitted:%Y-%m-%d} ({(now - submitted).days} days ago): "
                f"nothing was sent or changed. To make it right with the worker, pay them a "
                f"bonus on one of their approved assignments, or message them; this work stays "
                f"out of the study")

    def approve_rejected(self, *, assignment, feedback: str) -> dict:
        """ApproveAssignment with OverrideRejection=True: MTurk pays the reward and its fee now
        and the worker's record shows the work approved. A retry after a lost answer finds
        it approved (approving twice is an error there, not a second payment)."""
        return {**self._approve(assignment, feedback, {"OverrideRejection": True}),
                "override_rejection": True}

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
            status = self._assignment_status(assignment.external_id)
            if status == "Rejected":
                return {"already": True}
            if status == "Approved":
                raise ApprovedOnProvider(
                    "MTurk approved and paid this assignment already (its auto-approval delay "
                    "ran out, or it was approved on MTurk's site) and no longer allows "
                    "rejecting it") from exc
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

    def assignments_add(self, *, hit, count: int, token: str) -> dict:
        """CreateAdditionalAssignmentsForHIT. MTurk does not give back the slot of an assignment
        rejected after submission: a replacement is a new assignment, added with a token so a
        retry after a lost answer adds nothing twice."""
        try:
            self.call("create_additional_assignments_for_hit", HITId=hit.external_id,
                      NumberOfAdditionalAssignments=count, UniqueRequestToken=token)
        except Exception as exc:
            if is_duplicate_token(exc):
                return {"added": count, "duplicate": True}  # the first attempt added them
            if is_throttling(exc) or is_transient(exc):
                raise
            raise ProviderCallRefused(error_message(exc)) from exc
        return {"added": count}

    # --- workers -----------------------------------------------------------------------------------
    def block(self, *, worker, reason: str) -> dict:
        self.call("create_worker_block", WorkerId=worker.external_id, Reason=reason[:1024] or "-")
        return {"blocked": worker.external_id}

    def unblock(self, *, worker, reason: str) -> dict:
        self.call("delete_worker_block", WorkerId=worker.external_id, Reason=reason[:1024] or "-")
        return {"unblocked": worker.external_id}

    def notify(self, *, workers: Iterable, subject: str, message: str) -> dict:
        """NotifyWorkers in batches of 100, each a recorded call whose key is the message and
        its recipients, sent at most once: a retried or double-clicked notify sends nothing
        twice (the same text to the same workers is sent once; change the text to send
        again), and a batch whose answer was lost is not sent again either ("in_doubt":
        NotifyWorkers has no idempotency token, and a message twice is worse than a lost one).
        """
        ids = sorted({w.external_id for w in workers})
        subject, message = subject[:200], message[:4096]
        out: dict[str, Any] = {"sent": 0, "failures": [], "already_sent": 0, "in_doubt": 0,
                               "errors": []}
        for start in range(0, len(ids), MAX_NOTIFY_RECIPIENTS):
            batch = ids[start:start + MAX_NOTIFY_RECIPIENTS]
            key = f"mturk:notify:{_digest(subject, message, *batch)}"
            previous = ProviderCall.objects.filter(key=key).first()
            if previous is not None and previous.status == ProviderCallStatus.SUCCEEDED:
                out["already_sent"] += len(batch)
                continue
            if previous is not None and previous.status == ProviderCallStatus.PENDING \
                    and previous.attempts:
                out["in_doubt"] += len(batch)
                continue

            def send(_token: str, batch=batch) -> dict:
                try:
                    response = self.call("notify_workers", retry_transient=False,
                                         Subject=subject, MessageText=message, WorkerIds=batch)
                except Exception as exc:
                    if is_throttling(exc) or not is_transient(exc):
                        # Refused or never processed: not sent, may be sent again later.
                        raise ProviderCallRefused(error_message(exc)) from exc
                    raise  # lost on the way back: in doubt, never repeated
                return {"failures": response.get("NotifyWorkersFailureStatuses", [])}

            try:
                response = provider_call_run(
                    provider=Provider.MTURK, operation="NotifyWorkers", key=key, call_fn=send,
                    request={"Subject": subject, "WorkerIds": batch,
                             "message_sha256": _digest(message)},
                )
            except Exception as exc:  # reported; the other batches still go out
                out["errors"].append(f"{len(batch)} worker(s) from {batch[0]}: "
                                     f"{error_message(exc)}")
                continue
            out["failures"].extend(response.get("failures", []))
            out["sent"] += len(batch) - len(response.get("failures", []))
        return out

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

    def withdraw_qualification(self, *, stage, worker, value: int) -> dict:
        # Associating again replaces the worker's value: below the pass mark, MTurk's own
        # requirement keeps them out of the trial's HITs.
        return self.grant_qualification(stage=stage, worker=worker, value=value, passed=False)


def aws_credentials_found() -> bool:
    """Whether boto3's standard chain finds credentials (environment, ~/.aws, instance role)."""
    import boto3

    return boto3.session.Session().get_credentials() is not None
