"""Prolific through its REST API (`PROLIFIC_API_URL`, `Authorization: Token PROLIFIC_API_TOKEN`).

One stage = one study. Participants arrive on the task page with PROLIFIC_PID, STUDY_ID and
SESSION_ID (the submission id) in the URL and are sent back with the stage's completion code.
Passing a qualification adds the participant to a participant group; later studies allow only
that group. Prolific has no idempotency tokens, so every call that spends money or creates
something is recorded in `ProviderCall` first, and a retried create first looks for what the
lost attempt may have made (a study with our internal name, a bonus already set up).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import logging
import random
import secrets
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.utils.dateparse import parse_datetime

from annotation.models import HitStatus, Provider, ProviderCall, ProviderCallStatus, StageKind
from annotation.providers.calls import (
    ApprovedOnProvider,
    ProviderCallRefused,
    new_token,
    provider_call_run,
)
from annotation.selectors import prolific_study_places

from .base import (
    AMOUNTS_CURRENCY,
    HitFailure,
    HitUpdate,
    ProbeResult,
    ReadinessProblem,
    RemoteProvider,
    Submission,
    SubmissionStatus,
    is_url,
    public_url_problems,
    stage_description,
    stage_setting_store,
    stage_title,
    task_url,
)

logger = logging.getLogger(__name__)

# Prolific's submission statuses ("Submission object"). RETURNED, TIMED-OUT and SCREENED OUT
# (paid Prolific's fixed screen-out reward) give the place back to the study and hold no work to
# review: their local batch is given back too (`stage_sessions_returned`). RESERVED holds a
# place for a participant who has not started yet.
STATUS_MAP = {
    "AWAITING REVIEW": SubmissionStatus.SUBMITTED,
    "APPROVED": SubmissionStatus.APPROVED,
    "REJECTED": SubmissionStatus.REJECTED,
    "RETURNED": SubmissionStatus.RETURNED,
    "TIMED-OUT": SubmissionStatus.RETURNED,
    "SCREENED OUT": SubmissionStatus.RETURNED,
    "ACTIVE": SubmissionStatus.ACTIVE,
    "RESERVED": SubmissionStatus.ACTIVE,
}
# Prolific asks for a rejection message of at least 100 characters.
MIN_REJECTION_MESSAGE = 100
REJECTION_SUFFIX = (
    " Your submission did not meet the quality requirements stated in the study instructions"
    " (answers checked against known items and time spent per item)."
)


class ProlificError(Exception):
    pass


class ProlificNotFound(ProviderCallRefused):
    """Prolific answered 404: the thing asked for does not exist (for this account)."""


class ProlificProvider(RemoteProvider):
    name = Provider.PROLIFIC
    confirms_submissions = True

    @property
    def client(self):
        if self._client is None:
            import httpx

            self._client = httpx.Client(
                base_url=settings.PROLIFIC_API_URL,
                headers={"Authorization": f"Token {settings.PROLIFIC_API_TOKEN}"},
                timeout=float(getattr(settings, "PROLIFIC_TIMEOUT", 30)),
            )
        return self._client

    def request(self, method: str, path: str, *, retry_lost: bool = True,
                attempts: int | None = None, **kwargs) -> dict[str, Any]:
        """One API call with retries on 429 and 5xx (never processed or safe to repeat) and on
        transport errors unless `retry_lost` is False: a lost response to a create may mean the
        thing exists, and the caller must look for it before trying again. `attempts` overrides
        `PROLIFIC_MAX_ATTEMPTS` (a task page asks once, with a short timeout)."""
        import httpx

        attempts = attempts or int(getattr(settings, "PROLIFIC_MAX_ATTEMPTS", 8))
        base = float(getattr(settings, "PROLIFIC_RETRY_BASE_SECONDS", 0.5))
        for attempt in range(attempts):
            retry_after = None
            try:
                response = self.client.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                if not retry_lost:
                    raise
                error: Exception = exc
            else:
                if response.status_code < 400:
                    return response.json() if response.content else {}
                if response.status_code == 404:
                    raise ProlificNotFound(
                        f"Prolific {method} {path}: 404 {response.text[:500]}")
                if response.status_code != 429 and response.status_code < 500:
                    raise ProviderCallRefused(
                        f"Prolific {method} {path}: {response.status_code} {response.text[:500]}"
                    )
                error = ProlificError(f"{response.status_code} {response.text[:200]}")
                retry_after = response.headers.get("Retry-After")
            if attempt + 1 >= attempts:
                raise error
            self.retries_done += 1
            delay = min(20.0, base * (2**attempt)) * (0.5 + random.random() / 2)
            if retry_after and retry_after.replace(".", "", 1).isdigit():
                delay = max(delay, min(float(retry_after), 60.0))
            logger.info("Prolific %s %s: %s; retry in %.2fs", method, path, error, delay)
            self._sleep(delay)
        raise AssertionError("unreachable")

    def pages(self, path: str, **params) -> Iterator[dict[str, Any]]:
        """Every result of a paged list (follows `_links.next.href`)."""
        url: str | None = path
        query: dict[str, Any] | None = params or None
        while url:
            page = self.request("GET", url, params=query)
            yield from page.get("results", [])
            url = ((page.get("_links") or {}).get("next") or {}).get("href")
            query = None  # the next link carries its own query string

    # --- money ---------------------------------------------------------------------------------
    def fee_rate(self, *, max_assignments: int) -> Decimal:
        return Decimal(str(getattr(settings, "PROLIFIC_FEE_RATE", "0.333")))

    def bonus_fee_rate(self) -> Decimal:
        return self.fee_rate(max_assignments=1)

    # --- readiness (annotation/readiness_selectors.py) -------------------------------------
    def spends_real_money(self) -> bool:
        return prolific_is_real()

    def environment(self) -> str:
        if prolific_is_real():
            return "Prolific (real money)"
        return (f"the Prolific API at {settings.PROLIFIC_API_URL} (PROLIFIC_API_URL; not "
                "Prolific's own)")

    def readiness_problems(self, *, stage) -> list[ReadinessProblem]:
        problems = []
        if self._client is None and not settings.PROLIFIC_API_TOKEN:
            problems.append(ReadinessProblem(
                "credentials", "PROLIFIC_API_TOKEN is not set: create an API token in Prolific "
                               "(Settings › API token) and set it for the web and worker "
                               "processes"))
        url = settings.PROLIFIC_API_URL
        if not is_url(url):
            problems.append(ReadinessProblem(
                "endpoint", f"PROLIFIC_API_URL={url!r} is not an http(s) URL (Prolific's is "
                            "https://api.prolific.com/api/v1/)"))
        problems += public_url_problems(who="Prolific", must_be_public=prolific_is_real())
        if stage.reward is None or stage.reward <= 0:
            problems.append(ReadinessProblem(
                "reward", "Prolific pays every participant: set a reward per HIT above $0"))
        return problems

    def readiness_probe(self, *, stage) -> ProbeResult:
        """Read-only calls, each tried once with a short timeout (the publish path's retries
        would spend a minute on a wrong host): GET users/me/ (the token is accepted and the API
        answers), then "Get the balance of a workspace" (GET workspaces/<id>/balance/; the
        workspace is `PROLIFIC_WORKSPACE_ID`, or the account's only one from GET workspaces/):
        its `currency_code` and its `available_balance`. Prolific prices a study's `reward`
        (and its bonuses) in the workspace's currency, in its hundredths: a workspace not
        priced in `AMOUNTS_CURRENCY` is a blocking problem, as is a currency that cannot be
        learned. The available balance (what is left after the funds active studies hold) is
        the probe's balance, in dollars, as MTurk's GetAccountBalance is: the publish's budget
        guard refuses a stage it does not cover (`budget_guard`); a balance Prolific does not
        state is unknown, said, and does not hold the publish up."""
        response, problem = self._probe_get("users/me/")
        if problem is not None:
            return ProbeResult(problems=[problem])
        notes = []
        if response.status_code == 429:  # the token is not known bad: the currency decides
            notes.append(ReadinessProblem(
                "Prolific answer", "rate limited (429); publishing retries", blocking=False))
        balance, balance_error, problem = self._available_balance(stage=stage)
        return ProbeResult(balance=balance, balance_error=balance_error,
                           problems=notes + ([problem] if problem is not None else []))

    def balance(self, *, stage=None) -> Decimal | None:
        """The workspace's available balance in dollars (the cost estimate's "balance"), read
        as the readiness probe reads it: for `stage`, the workspace its study is created in
        and paid from (`_stage_workspace`), the one the publish's budget guard reads; why it
        is unknown is raised."""
        balance, balance_error, problem = self._available_balance(stage=stage)
        if problem is not None:
            raise ProlificError(problem.message)
        if balance is None:
            raise ProlificError(balance_error)
        return balance

    def _available_balance(self, *, stage=None
                           ) -> tuple[Decimal | None, str, ReadinessProblem | None]:
        """(the workspace's available balance in dollars, or None and why it is unknown; the
        blocking problem: a currency other than `AMOUNTS_CURRENCY`, or unknown). `stage`: the
        workspace is the one its studies will be created in (`_stage_workspace`)."""
        workspace_id, body, problem = self._workspace_balance(stage=stage)
        if problem is not None:
            return None, problem.message, problem
        currency = str(body.get("currency_code") or "").upper()
        where = f"GET workspaces/{workspace_id}/balance/"
        if not currency:
            problem = _currency_unknown(f"{where} named no currency_code")
            return None, problem.message, problem
        if currency != AMOUNTS_CURRENCY:
            problem = ReadinessProblem("currency", _currency_mismatch(workspace_id, currency))
            return None, problem.message, problem
        available = body.get("available_balance")
        if isinstance(available, bool) or not isinstance(available, int):
            return None, f"{where} named no available_balance ({available!r})", None
        # In the currency's hundredths (cents): dollars to the cent, as every amount here.
        return (Decimal(available) / 100).quantize(Decimal("0.01")), "", None

    def _probe_get(self, path: str):
        """(response, None), or (None, the blocking problem) when the API could not be reached
        or refused: one GET with the readiness timeout, no retries. A 429 is a response."""
        import httpx

        where = settings.PROLIFIC_API_URL
        try:
            response = self.client.get(path, timeout=float(
                getattr(settings, "PROLIFIC_READINESS_TIMEOUT", 10)))
        except httpx.HTTPError as exc:
            return None, ReadinessProblem(
                "Prolific answer", f"the Prolific API at {where} could not be reached "
                                   f"({type(exc).__name__}: {exc}): check PROLIFIC_API_URL and "
                                   "the network; nothing was created")
        if response.status_code in (401, 403):
            return None, ReadinessProblem(
                "credentials", f"Prolific refused PROLIFIC_API_TOKEN ({response.status_code}): "
                               "set a valid API token; nothing was created")
        if response.status_code >= 400 and response.status_code != 429:
            return None, ReadinessProblem(
                "Prolific answer", f"GET {path} at {where} answered {response.status_code} "
                                   f"{response.text[:200]}; nothing was created")
        return response, None

    def _stage_workspace(self, stage) -> tuple[str, ReadinessProblem | None]:
        """The workspace `stage`'s study is created in, whose currency and funds pay it: the
        workspace of its `prolific_project_id` ("Get project" names it), which must be
        `PROLIFIC_WORKSPACE_ID` when that is set (its participant groups are there). A stage
        without a project is created in the project Prolific chooses, so only an account with
        one workspace may leave it out: with several, checking `PROLIFIC_WORKSPACE_ID` said
        nothing of the workspace that would pay (a GBP "My workspace", say). ("", None): no
        project and no stage, the single-workspace rule of `_workspace_balance`."""
        configured = getattr(settings, "PROLIFIC_WORKSPACE_ID", "")
        project_id = str(((stage.settings or {}) if stage is not None else {}).get(
            "prolific_project_id") or "")
        if not project_id:
            if stage is None or not configured:
                return "", None  # the account's only workspace, or refused as several
            ids, more, problem = self._workspace_ids()
            if problem is not None:
                return "", problem
            if ids == [configured] and not more:
                return configured, None
            why = ("the token's account has more than one workspace" if more or len(ids) > 1
                   else "the token's account has no workspace PROLIFIC_WORKSPACE_ID")
            return "", ReadinessProblem("Prolific project", (
                f"the stage names no Prolific project, and {why}: "
                "a study created without a project goes to the project Prolific chooses, "
                f"whose workspace's currency and funds were not checked. Set the stage's "
                f"Prolific project id (settings key prolific_project_id) to a project of "
                f"workspace {configured}; nothing was created"))
        response, problem = self._probe_get(f"projects/{project_id}/")
        if problem is not None:
            return "", problem
        if response.status_code == 429:
            return "", _currency_unknown(f"GET projects/{project_id}/ was rate limited (429)")
        workspace_id = str((response.json() or {}).get("workspace") or "")
        if not workspace_id:
            return "", _currency_unknown(f"GET projects/{project_id}/ named no workspace")
        if configured and workspace_id != configured:
            return "", ReadinessProblem("Prolific project", (
                f"the stage's Prolific project {project_id} is in workspace {workspace_id}, "
                f"not in PROLIFIC_WORKSPACE_ID {configured} (where its participant groups "
                "are made): name a project of that workspace, or set PROLIFIC_WORKSPACE_ID to "
                f"{workspace_id}; nothing was created"))
        return workspace_id, None

    def _workspace_ids(self) -> tuple[list[str], bool, ReadinessProblem | None]:
        """The ids on the first page of the token's workspaces ("Get all a user's
        workspaces"), whether more pages follow, or why they are unknown (unreachable,
        refused, rate limited): the one read of the account's workspaces."""
        response, problem = self._probe_get("workspaces/")
        if problem is not None:
            return [], False, problem
        if response.status_code == 429:
            return [], False, _currency_unknown("GET workspaces/ was rate limited (429)")
        page = response.json() or {}
        more = bool(((page.get("_links") or {}).get("next") or {}).get("href"))
        return [w.get("id") for w in page.get("results", [])], more, None

    def _workspace_balance(self, *, stage=None) -> tuple[str, dict, ReadinessProblem | None]:
        """(workspace id, its "Get the balance of a workspace" answer, None), or why it could
        not be read. The workspace: `stage`'s (`_stage_workspace`), else
        `PROLIFIC_WORKSPACE_ID`, else the account's only one."""
        workspace_id, problem = self._stage_workspace(stage)
        if problem is not None:
            return "", {}, problem
        workspace_id = workspace_id or getattr(settings, "PROLIFIC_WORKSPACE_ID", "")
        if not workspace_id:
            ids, more, problem = self._workspace_ids()
            if problem is not None:
                return "", {}, problem
            if len(ids) != 1 or more:
                return "", {}, _currency_unknown(
                    f"the token's account has {'more than ' if more else ''}{len(ids)} "
                    "workspaces: set PROLIFIC_WORKSPACE_ID to the one the studies are "
                    "published in")
            workspace_id = ids[0]
        response, problem = self._probe_get(f"workspaces/{workspace_id}/balance/")
        if problem is not None:
            return "", {}, problem
        if response.status_code == 429:
            return "", {}, _currency_unknown(
                f"GET workspaces/{workspace_id}/balance/ was rate limited (429)")
        return workspace_id, response.json() or {}, None

    # --- publishing ---------------------------------------------------------------------------
    def study_payload(self, *, stage, places: int, internal_name: str) -> dict[str, Any]:
        options = stage.settings or {}
        url = task_url("annotation:task-prolific", stage=stage,
                       fallback="/task/prolific/{stage_id}/")
        url += "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
        payload: dict[str, Any] = {
            "name": stage_title(stage)[:120],
            "internal_name": internal_name,
            "description": stage_description(stage),
            "external_study_url": url,
            "prolific_id_option": "url_parameters",
            "completion_codes": [{
                "code": options["prolific_completion_code"],
                "code_type": "COMPLETED",
                "actions": [{"action": "MANUALLY_REVIEW"}],
            }],
            "total_available_places": places,
            "estimated_completion_time": int(options.get("estimated_minutes", 10)),
            "reward": int((stage.reward * 100).to_integral_value()),  # cents
            "device_compatibility": options.get("devices", ["desktop", "tablet", "mobile"]),
        }
        filters = list(options.get("prolific_filters", []))
        required = stage.requires_stage
        if required is not None and required.kind == StageKind.QUALIFICATION:
            filters.append({
                "filter_id": "participant_group_allowlist",
                "selected_values": [self.ensure_participant_group(required)],
            })
        if filters:
            payload["filters"] = filters
        if options.get("prolific_project_id"):
            payload["project"] = options["prolific_project_id"]
        return payload

    def publish_stage(self, *, stage) -> Iterator[HitUpdate | HitFailure]:
        hits = list(stage.hits.all())
        places = prolific_study_places(stage=stage) or 1
        if not stage.settings.get("prolific_completion_code"):
            stage_setting_store(stage, "prolific_completion_code",
                                 secrets.token_hex(4).upper())
        call = _ensure_token(stage, "prolific_study_token")

        def create(token: str) -> dict:
            import httpx

            attempts = int(getattr(settings, "PROLIFIC_MAX_ATTEMPTS", 8))
            for attempt in range(attempts):
                # A lost response may have created the study: look for our internal name first.
                for study in self.pages("studies/"):
                    if study.get("internal_name") == token:
                        return {"id": study["id"], "duplicate": True}
                try:
                    study = self.request("POST", "studies/", retry_lost=False, json=(
                        self.study_payload(stage=stage, places=places, internal_name=token)))
                    return {"id": study["id"]}
                except httpx.TransportError:
                    if attempt + 1 >= attempts:
                        raise
                    self.retries_done += 1
            raise AssertionError("unreachable")

        try:
            created = provider_call_run(
                provider=Provider.PROLIFIC, operation="CreateStudy",
                key=f"prolific:study-create:{stage.pk}", token=call, call_fn=create,
                stage=stage, request={"places": places},
            )
            study_id = created["id"]
            stage_setting_store(stage, "prolific_study_id", study_id)
            provider_call_run(
                provider=Provider.PROLIFIC, operation="PublishStudy",
                key=f"prolific:study-publish:{stage.pk}",
                call_fn=lambda token: self._publish(study_id), stage=stage,
            )
        except Exception as exc:
            yield HitFailure(hit_id=None, error=str(exc), count=len(hits) or 1)
            return
        # One study holds every HIT's places: they open together, under the study's id.
        for hit in hits:
            if hit.status == HitStatus.PENDING:
                yield HitUpdate(hit_id=hit.pk, status=HitStatus.OPEN, hit_type_id=study_id)
            else:
                yield HitUpdate(hit_id=hit.pk, status=hit.status, created=False)

    def _publish(self, study_id: str) -> dict:
        study = self.request("GET", f"studies/{study_id}/")
        if study.get("status") not in (None, "UNPUBLISHED"):
            return {"status": study["status"]}  # published by a lost earlier attempt
        try:
            return self.request("POST", f"studies/{study_id}/transition/",
                                json={"action": "PUBLISH"})
        except ProviderCallRefused:
            # Our own retry after a lost response finds the study published already.
            if self.request("GET", f"studies/{study_id}/").get("status") == "ACTIVE":
                return {"status": "ACTIVE"}
            raise

    def _study_transition(self, stage, study_id: str, action: str, *, occasion: str = "",
                          only_from: str = "") -> dict:
        """POST studies/<id>/transition/ `action`, recorded like every side effect: one call
        per `occasion` (what it follows, e.g. the stage's transition; none: a new key each
        time, as an explicit stop or extend is). `only_from`: send it only while the study is
        in that status (Prolific pauses an ACTIVE study and starts a PAUSED one), read first,
        so a retry after a lost answer, or a study Prolific moved by itself, is left alone: done
        when the study is already where the action leads, or over (COMPLETED, AWAITING
        REVIEW); any other status (PUBLISHING, SCHEDULED, one Prolific passes through) raises,
        so the call stays not done and the next sync tries again."""
        settled = {STUDY_ACTION_TARGETS.get(action), "COMPLETED", "AWAITING REVIEW"}

        def transition(_token: str) -> dict:
            if only_from:
                status = self.request("GET", f"studies/{study_id}/").get("status")
                if status in settled:
                    return {"status": status, "sent": False}
                if status != only_from:
                    raise ProlificError(f"study {study_id} is {status}: {action} is sent once "
                                        f"it is {only_from} (the next sync tries again)")
            return self.request("POST", f"studies/{study_id}/transition/",
                                json={"action": action})

        return provider_call_run(
            provider=Provider.PROLIFIC, operation=f"StudyTransition{action.title()}",
            key=f"prolific:study-{action.lower()}:{stage.pk}:{occasion or new_token('t')}",
            call_fn=transition, stage=stage, request={"study_id": study_id, "action": action},
        )

    def expire_stage(self, *, stage) -> Iterator[HitUpdate]:
        study_id = stage.settings.get("prolific_study_id")
        if study_id:
            self._study_transition(stage, study_id, "STOP")
            for hit_id in stage.hits.filter(status=HitStatus.OPEN).values_list("pk", flat=True):
                yield HitUpdate(hit_id=hit_id, status=HitStatus.EXPIRED)

    def extend_stage(self, *, stage, seconds: int) -> Iterator[HitUpdate]:
        # Prolific studies have no expiry; "extend" reopens a paused (or stopped) study.
        study_id = stage.settings.get("prolific_study_id")
        if study_id and self.request("GET", f"studies/{study_id}/").get("status") != "ACTIVE":
            self._study_transition(stage, study_id, "START")
        return iter(())

    def stage_recruiting(self, *, stage, recruiting: bool, occasion: str) -> dict:
        """PAUSE the study while the stage does not collect (Prolific then shows it to no new
        participant; those in it can still complete), START it again when it collects: each
        once per `occasion`, and only from ACTIVE (PAUSE) or PAUSED (START). A study stopped
        (COMPLETED) or full (AWAITING REVIEW) recruits nobody and is left as it is."""
        study_id = (stage.settings or {}).get("prolific_study_id")
        if not study_id:
            return {}
        action, only_from = ("START", "PAUSED") if recruiting else ("PAUSE", "ACTIVE")
        return self._study_transition(stage, study_id, action, occasion=occasion,
                                      only_from=only_from)

    def study_places_raise(self, *, stage, at_least: int) -> dict:
        """Raise the study's places to at least `at_least` ("Update a study": PATCH
        studies/<id>/ with `total_available_places`; a published study's places may only grow).
        An absolute target, never "one more": repeating it after a lost answer, or after a later
        call raised the places further, adds nothing (Prolific has no idempotency tokens). A
        study Prolific refuses to grow (stopped, or gone) is a `ProviderCallRefused`."""
        study_id = (stage.settings or {}).get("prolific_study_id")
        if not study_id:
            raise ProviderCallRefused(f"{stage} has no Prolific study (prolific_study_id)")
        study = self.request("GET", f"studies/{study_id}/")
        current = int(study.get("total_available_places") or 0)
        if current >= at_least:
            return {"total_available_places": current, "already": True}
        updated = self.request("PATCH", f"studies/{study_id}/",
                               json={"total_available_places": at_least})
        return {"total_available_places": int(updated.get("total_available_places")
                                              or at_least)}

    # --- submissions ---------------------------------------------------------------------------
    def list_submissions(self, *, stage) -> Iterator[Submission]:
        study_id = stage.settings.get("prolific_study_id")
        if not study_id:
            return
        for raw in self.pages(f"studies/{study_id}/submissions/"):
            yield Submission(
                external_id=raw["id"],
                worker_external_id=raw["participant_id"],
                hit_external_id=study_id,
                status=STATUS_MAP.get(raw.get("status", ""), SubmissionStatus.ACTIVE),
                submitted_at=parse_datetime(raw["completed_at"]) if raw.get("completed_at")
                else None,
                raw={"study_code": raw.get("study_code", "")},
            )

    # --- participants' sessions --------------------------------------------------------------
    def sessions_listable(self, *, stage) -> bool:
        """Whether `list_submissions` lists every session of the stage (its study is known)."""
        return bool((stage.settings or {}).get("prolific_study_id")) and bool(
            getattr(settings, "PROLIFIC_API_TOKEN", ""))

    def session_verify(self, *, stage, worker_external_id: str, session_id: str,
                       attempts: int | None = None, timeout: float | None = None) -> bool | None:
        """Whether Prolific knows `session_id` as a submission of this stage's study by this
        participant (GET submissions/<id>/): True, False (no such submission, or another
        study's or participant's), or None when it cannot tell (no study id or token, Prolific
        unreachable or failing). Never raises."""
        if not self.sessions_listable(stage=stage):
            return None
        study_id = stage.settings["prolific_study_id"]
        kwargs: dict[str, Any] = {"timeout": timeout} if timeout else {}
        try:
            raw = self.request("GET", f"submissions/{session_id}/", attempts=attempts, **kwargs)
        except ProlificNotFound:
            return False
        except Exception as exc:  # noqa: BLE001 - unknown, not refused: the sync tries again
            logger.info("Prolific session %s not verified now: %s", session_id, exc)
            return None
        # "Retrieve a submission" names the participant `participant`; the study's submission
        # list names it `participant_id`.
        participant = raw.get("participant") or raw.get("participant_id")
        return participant == worker_external_id and raw.get("study_id") == study_id

    # --- reconciliation ------------------------------------------------------------------------
    def confirmation_deadline(self, *, assignment) -> dt.datetime | None:
        """Prolific lists a session from the moment the participant starts, and as AWAITING
        REVIEW once they complete; a local submission still not listed as completed after
        `settings["prolific_confirm_grace_seconds"]` (default a day) is flagged."""
        start = assignment.submitted_at or assignment.started_at
        if start is None:
            return None
        grace = int((assignment.stage.settings or {}).get("prolific_confirm_grace_seconds",
                                                          86400))
        return start + dt.timedelta(seconds=grace)

    def accepts_no_more_submissions(self, *, stage, now: dt.datetime,
                                    active_listed: int) -> tuple[bool, str]:
        """A stopped study takes no new participants; those already in it can still complete
        (Prolific lists them as ACTIVE until they complete, return or time out)."""
        if not (stage.settings or {}).get("prolific_study_id"):
            return True, ""
        if stage.hits.filter(status=HitStatus.OPEN).exists():
            return False, "the study was not stopped"
        if active_listed:
            return False, f"{active_listed} participant(s) still active on Prolific"
        return True, ""

    def _transition(self, assignment, body: dict, wanted: str) -> dict:
        try:
            return self.request(
                "POST", f"submissions/{assignment.external_id}/transition/", json=body
            )
        except ProviderCallRefused as exc:
            # A retry after a lost response: the first attempt may have done it.
            current = self.request("GET", f"submissions/{assignment.external_id}/")
            if current.get("status") == wanted:
                return {"already": True}
            if wanted == "REJECTED" and current.get("status") == "APPROVED":
                raise ApprovedOnProvider(
                    "Prolific approved and paid this submission already (its auto-approval, "
                    "or an approval on Prolific's site) and no longer allows rejecting it"
                ) from exc
            raise

    def approve(self, *, assignment, feedback: str = "") -> dict:
        return self._transition(assignment, {"action": "APPROVE"}, "APPROVED")

    def rejection_reversal_refusal(self, *, assignment, now) -> str:
        """Prolific's API cannot undo a rejection: its transition endpoint says a status, once
        changed, cannot be restored. Only its researcher app reverses one (the submission goes
        back to awaiting review)."""
        return ("Prolific's API cannot reverse a rejection (a submission's status, once "
                "changed there, cannot be restored through it), so nothing was sent or changed. "
                "Reverse it in Prolific's researcher app (the study's rejected submissions: "
                "reverse the rejection, then approve the submission there); the next sync "
                "records that approval here and the participant's judgments count again. Or "
                "pay the participant a bonus on Prolific")

    def reject(self, *, assignment, reason: str) -> dict:
        message = reason if len(reason) >= MIN_REJECTION_MESSAGE else reason + REJECTION_SUFFIX
        body = {"action": "REJECT", "message": message,
                "rejection_category": "LOW_EFFORT"}
        return self._transition(assignment, body, "REJECTED")

    def bonus(self, *, assignment, amount: Decimal, reason: str, token: str) -> dict:
        """Set up a one-line bulk bonus, then pay it (two recorded calls)."""
        study_id = assignment.stage.settings.get("prolific_study_id", "")
        setup = provider_call_run(
            provider=Provider.PROLIFIC, operation="SetUpBonus",
            key=f"prolific:bonus-setup:{token}",
            call_fn=lambda _token: self.request("POST", "submissions/bonus-payments/", json={
                "study_id": study_id,
                "csv_bonuses": f"{assignment.worker.external_id},{amount:.2f}",
            }),
            assignment=assignment, amount=amount,
        )
        bonus_id = setup["id"]

        def pay(_token: str) -> dict:
            try:
                return self.request("POST", f"bulk-bonus-payments/{bonus_id}/pay/") or {}
            except ProviderCallRefused as exc:
                if "already" in str(exc).lower():
                    return {"already": True}
                raise

        return provider_call_run(
            provider=Provider.PROLIFIC, operation="PayBonus",
            key=f"prolific:bonus-pay:{bonus_id}", call_fn=pay, assignment=assignment,
            amount=amount,
        ) | {"bonus_id": bonus_id}

    # --- participants ------------------------------------------------------------------------------
    def ensure_participant_group(self, stage) -> str:
        group_id = stage.settings.get("prolific_participant_group_id")
        if group_id:
            return group_id
        body: dict[str, Any] = {"name": f"QA Judge {stage.project.slug} {stage.name} passed"}
        if getattr(settings, "PROLIFIC_WORKSPACE_ID", ""):
            body["workspace_id"] = settings.PROLIFIC_WORKSPACE_ID
        response = provider_call_run(
            provider=Provider.PROLIFIC, operation="CreateParticipantGroup",
            key=f"prolific:group-create:{stage.pk}",
            call_fn=lambda _token: self.request("POST", "participant-groups/", json=body),
            stage=stage,
        )
        stage_setting_store(stage, "prolific_participant_group_id", response["id"])
        return response["id"]

    def grant_qualification(self, *, stage, worker, value: int, passed: bool) -> dict:
        if not passed:
            return {"skipped": "failed"}  # Prolific never lets a participant retake a study
        group_id = self.ensure_participant_group(stage)
        self.request("POST", f"participant-groups/{group_id}/participants/",
                     json={"participant_ids": [worker.external_id]})
        return {"group": group_id}

    def withdraw_qualification(self, *, stage, worker, value: int) -> dict:
        group_id = self.ensure_participant_group(stage)
        self.request("DELETE", f"participant-groups/{group_id}/participants/",
                     json={"participant_ids": [worker.external_id]})
        return {"group": group_id, "removed": worker.external_id}

    def block(self, *, worker, reason: str) -> dict:
        group_id = getattr(settings, "PROLIFIC_BLOCKLIST_GROUP_ID", "")
        if not group_id:
            return {"local_only": True}
        self.request("POST", f"participant-groups/{group_id}/participants/",
                     json={"participant_ids": [worker.external_id]})
        return {"group": group_id}

    def unblock(self, *, worker, reason: str) -> dict:
        group_id = getattr(settings, "PROLIFIC_BLOCKLIST_GROUP_ID", "")
        if not group_id:
            return {"local_only": True}
        self.request("DELETE", f"participant-groups/{group_id}/participants/",
                     json={"participant_ids": [worker.external_id]})
        return {"group": group_id}

    def notify(self, *, workers: Iterable, subject: str, message: str) -> dict:
        """One message per participant, each a recorded call keyed by the text and the
        recipient, sent at most once: a retried notify sends nothing twice (change the text to
        send again), and a message whose answer was lost is not repeated ("in_doubt")."""
        import httpx

        body = f"{subject}\n\n{message}"
        digest = hashlib.sha256(body.encode()).hexdigest()[:20]
        out: dict[str, Any] = {"sent": 0, "already_sent": 0, "in_doubt": 0, "errors": []}
        for worker in workers:
            key = f"prolific:message:{digest}:{worker.pk}"
            previous = ProviderCall.objects.filter(key=key).first()
            if previous is not None and previous.status == ProviderCallStatus.SUCCEEDED:
                out["already_sent"] += 1
                continue
            if previous is not None and previous.status == ProviderCallStatus.PENDING \
                    and previous.attempts:
                out["in_doubt"] += 1
                continue

            def send(_token: str, worker=worker) -> dict:
                try:
                    return self.request("POST", "messages/", retry_lost=False, json={
                        "recipient_id": worker.external_id, "body": body})
                except ProlificError as exc:  # rate limited or failing: not sent
                    raise ProviderCallRefused(str(exc)) from exc

            try:
                provider_call_run(provider=Provider.PROLIFIC, operation="SendMessage", key=key,
                                  call_fn=send, worker=worker,
                                  request={"message_sha256": digest})
            except (ProviderCallRefused, httpx.TransportError) as exc:
                out["errors"].append(f"{worker.external_id}: {exc or type(exc).__name__}")
                continue
            out["sent"] += 1
        return out


def _ensure_token(stage, key: str) -> str:
    token = stage.settings.get(key)
    if not token:
        token = new_token(f"qaj-study-{stage.pk}")
        stage_setting_store(stage, key, token)
    return token


# Where a study transition leads ("Transition a study": the study object's statuses).
STUDY_ACTION_TARGETS = {"PAUSE": "PAUSED", "START": "ACTIVE", "STOP": "COMPLETED"}


def _currency_mismatch(workspace_id: str, currency: str) -> str:
    return (f"the Prolific workspace {workspace_id} prices studies in {currency}, but every "
            "amount QA Judge stores, shows and checks (rewards, bonuses, QAJ_MIN_HOURLY_PAY, "
            f"budget caps, the cost you confirm) is in {AMOUNTS_CURRENCY}: a reward of 0.40 "
            f"would pay 0.40 {currency}. Publish from a {AMOUNTS_CURRENCY} workspace (create one "
            "in Prolific, set PROLIFIC_WORKSPACE_ID to its id and the stage's Prolific project "
            "id to a project of it); nothing was created")


def _currency_unknown(why: str) -> ReadinessProblem:
    return ReadinessProblem(
        "currency", f"the Prolific workspace's currency is unknown ({why}): QA Judge's amounts "
                    f"are in {AMOUNTS_CURRENCY} and Prolific pays a study's reward in its "
                    "workspace's currency, so nothing is published until it is known; nothing "
                    "was created")


def prolific_is_real() -> bool:
    """Whether PROLIFIC_API_URL is Prolific's own API (real money), not a rehearsal fake."""
    host = urlparse(settings.PROLIFIC_API_URL or "").hostname or ""
    return host.endswith(("prolific.com", "prolific.co"))
