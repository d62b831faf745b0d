"""Running an LLM judge over a project's items: bounded concurrency (a thread pool the size of
the job's concurrency, one shared httpx pool), retries with backoff (client.py), a per-item
cache (a verdict row per judge version, item, order and content hash: a rerun of the same
version asks nothing), tokens and cost from the price table, and a budget no request can
exceed: before each request its worst case (every prompt character a token, all of
`max_tokens` answered) is reserved, and nothing is sent that could take the total past the
cap. Answers that cannot be parsed are stored (`parsed=False`), counted and shown.

A/B items are asked twice, the answers in both orders; the verdict rows name the item's side
either way, and the alignment report reads position consistency from the pair.

`judge_job_create` queues a `JudgeJob`; the Celery task `judges.run` runs it under the
job lease every background job holds (core/leases.py): a worker killed mid-run leaves its
stored verdicts, the sweep sends the job again, and the rerun asks only for the rest.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from annotation.access_selectors import queued_access_check
from annotation.domain.control_characters import without_control_characters
from annotation.models import Project, TaskKind
from core.leases import (
    JobCancelled,
    JobLease,
    LeaseLost,
    claimable_filter,
    held_filter,
    job_in_flight,
    job_send,
    job_send_after,
    jobs_unsent,
    leased_run,
    scope_lock,
)

from ...domain.judge_prompts import (
    JudgeConfigError,
    Parsed,
    call_cost,
    is_verdict_only,
    item_prompt,
    mc_role,
    mc_shown_roles,
    parse_answer,
    worst_case_cost,
)
from ...models import JudgeJob, JudgeKind, JudgeVerdict, JudgeVersion, ScoringStatus
from .client import ChatAnswer, ChatClient, EndpointError, RequestStopped, RetryPolicy
from .versions import price_for

logger = logging.getLogger(__name__)

TASK_OF_KIND = {TaskKind.LIKERT: "likert", TaskKind.AB: "ab", TaskKind.MC: "mc"}
DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 256
FLUSH_EVERY = 50       # verdicts stored per write
FLUSH_SECONDS = 2.0    # ... or at least this often
GIVE_UP_AFTER = 10     # requests failing in a row (after retries) that stop a run


@dataclass(frozen=True)
class Request:
    item_id: int
    order: str
    prompt: str
    content_hash: str
    # The item's texts the prompt quoted: a verdict they state is not read from the answer
    # (a model may echo the candidate's forged "Score: 5" after its own verdict).
    quoted: tuple[str, ...] = ()
    # STARC: the answers' roles in the order shown (`judge_prompts.mc_shown_roles`); the
    # verdict names the letter shown and is stored as that answer's role.
    roles: str = ""


def _check_kind(project: Project, version: JudgeVersion) -> str:
    task = version.config["task"]
    if TASK_OF_KIND.get(project.kind) != task:
        raise JudgeConfigError(f"judge {version.label} judges {task} items; project "
                               f"{project.slug} holds {project.kind} items")
    return task


def judged_items(project: Project):
    """The items a judge run asks about: every item of the study (not a practice item, not
    excluded), gold checks included (their human votes are data: the leaderboard's judge boards
    read the judge on them). What running a judge costs is counted on these
    (`planning.judge_plan`), whatever subset the estimates then read."""
    return project.items.filter(is_practice=False, excluded=False)


def judge_requests(project: Project, version: JudgeVersion) -> list[Request]:
    """Every request the judge makes on the project (A/B: both orders per item)."""
    config = version.config
    task = _check_kind(project, version)
    orders = ("AB", "BA") if task == TaskKind.AB else ("",)
    requests = []
    # project_id too: the related manager checks each row's project against `project`, and a
    # deferred project_id cost one query per item (10,000 on EVOUNA-TQ, half the run).
    items = judged_items(project).only("id", "project_id", "content")
    for item in items.order_by("id").iterator(chunk_size=2000):
        for order in orders:
            prompt, digest, quoted = item_prompt({**config, "task": task}, item.content,
                                                 order=order)
            roles = mc_shown_roles(item.content or {}) if task == TaskKind.MC else ""
            requests.append(Request(item.pk, order, prompt, digest, quoted, roles))
    return requests


def _verdict_row(version: JudgeVersion, request: Request, answer: ChatAnswer,
                 price: dict | None) -> tuple[JudgeVerdict, Parsed]:
    config = version.config
    if answer.refused:
        # The refusal text is kept as the raw answer; it is no verdict.
        parsed = Parsed(ok=False, error="refused")
    else:
        parsed = parse_answer(answer.text, config, answer.logprobs, quoted=request.quoted)
        if answer.finish_reason == "length" and parsed.ok \
                and not is_verdict_only(answer.text):
            # Cut before it ended: the verdict the prompt asks for last never came, and what
            # was read is a line of the reasoning ("At first Score: 4 seemed right, but the").
            # A reply that is only its verdict lost nothing (a one-token logprobs judge).
            parsed = Parsed(ok=False, error=(
                f"truncated (finish_reason length) before the answer ended: the verdict "
                f"{parsed.verdict or parsed.score!r} read in it may not be the model's final "
                "one (raise max_tokens)"))
        elif answer.finish_reason == "length":
            parsed.error = f"truncated (finish_reason length): {parsed.error}"
    verdict, score, probability = parsed.verdict, parsed.score, parsed.probability
    if request.roles and parsed.ok:
        # The letter chosen names the answer shown there: stored as that answer's role.
        verdict = mc_role(request.roles, verdict)
    if request.order == "BA" and parsed.ok:
        # The item's answer B was shown first: map the position chosen back to the side.
        verdict = {"A": "B", "B": "A"}.get(verdict, verdict)
        score = None if score is None else 1.0 - score
        probability = None if probability is None else 1.0 - probability
    return JudgeVerdict(
        judge_version=version, item_id=request.item_id, order=request.order,
        content_hash=request.content_hash, verdict=verdict if parsed.ok else "",
        score=score, probability=probability, parsed=parsed.ok,
        # An endpoint's text is stored, not refused: control characters are dropped (NUL cannot
        # be stored by PostgreSQL at all).
        reasoning=without_control_characters(
            parsed.reasoning if parsed.ok else parsed.error)[:4000],
        raw=without_control_characters(answer.text)[:4000], prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        cost=call_cost(answer.prompt_tokens, answer.completion_tokens, price),
    ), parsed


def judge_project(*, project: Project, version: JudgeVersion, budget: float | None = None,
                  concurrency: int = DEFAULT_CONCURRENCY, timeout: float = 120.0,
                  retry: RetryPolicy | None = None,
                  progress: Callable[[int, dict], None] | None = None) -> dict:
    """Ask the judge about every item not yet judged at this version; store the verdicts as
    they arrive. Returns {requests, cached, calls, unparseable, truncated, failed, retries,
    prompt_tokens, completion_tokens, cost, stopped, errors}. `progress(done, detail)` is
    called after each stored batch (the job's lease renews there and may raise LeaseLost,
    which stops the run). When it raises JobCancelled (the job was cancelled by hand) no new
    request is sent (a request retrying after a 429 or a 5xx is not sent again either), the
    answers already on their way (paid for) are stored and counted, and the run returns with
    `stopped` "cancelled". An endpoint that refuses the key or the model
    (401/403/404) ends the run with EndpointError."""
    if version.judge.kind != JudgeKind.LLM:
        raise JudgeConfigError(f"{version.label} is an {version.judge.kind} judge: only LLM "
                               "judges are run")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise JudgeConfigError(f"concurrency: {concurrency} is not in 1..{MAX_CONCURRENCY}")
    config = version.config
    price = price_for(config)
    if budget is not None and price is None:
        raise JudgeConfigError(f"a budget needs a price for model {config['model']!r}: give "
                               "the judge a `price` or add the model to QAJ_JUDGE_PRICES")
    requests = judge_requests(project, version)
    have = set(JudgeVerdict.objects.filter(judge_version=version, item__project=project)
               .values_list("item_id", "order", "content_hash"))
    todo = [r for r in requests if (r.item_id, r.order, r.content_hash) not in have]
    detail = {"requests": len(requests), "cached": len(requests) - len(todo), "calls": 0,
              "unparseable": 0, "truncated": 0, "failed": 0, "retries": 0,
              "paid_unusable": 0,
              "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0 if price else None,
              "stopped": "", "errors": []}
    done = detail["cached"]
    if progress:
        progress(done, detail)  # JobCancelled here: nothing was asked; the job stops
    if not todo:
        return detail
    ledger = _Ledger(budget)
    buffer: list[JudgeVerdict] = []
    last_flush = time.monotonic()

    def flush() -> None:
        nonlocal buffer, last_flush, done
        if buffer:
            JudgeVerdict.objects.bulk_create(buffer, ignore_conflicts=True)
            done += len(buffer)
            buffer = []
        last_flush = time.monotonic()
        if progress:
            try:
                progress(done, detail)
            except JobCancelled:
                # Stop asking; the loop still drains (stores, counts) what is in flight, and
                # a request retrying (429, 5xx) is not sent again.
                detail["stopped"] = "cancelled"
                stop.set()

    # Set when the job is cancelled, or the run ends early (an error, a lost lease): requests
    # retrying in the pool then give up instead of paying for answers nobody stores.
    stop = threading.Event()
    client = ChatClient(base_url=config["base_url"], model=config["model"],
                        api_key_env=config.get("api_key_env", ""), concurrency=concurrency,
                        timeout=timeout, retry=retry)
    pending: dict[Future, tuple[Request, float]] = {}
    queue = iter(todo)
    held: Request | None = None
    exhausted = False
    failing = 0
    give_up_after = max(GIVE_UP_AFTER, 2 * concurrency)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judge")
    try:
        while True:
            while not exhausted and not detail["stopped"] and len(pending) < concurrency:
                request = held or next(queue, None)
                held = None
                if request is None:
                    exhausted = True
                    break
                worst = worst_case_cost(config["system"] + request.prompt,
                                        config["max_tokens"], price) or 0.0
                if not ledger.reserve(worst):
                    if pending:
                        # In-flight requests reserve their worst case; what they really cost
                        # is known when they answer. Wait for them before deciding.
                        held = request
                        break
                    detail["stopped"] = (f"budget: ${ledger.spent:.4f} spent of "
                                         f"${budget:.4f}; the next request could cost up to "
                                         f"${worst:.4f}")
                    break
                holds = _Holds(ledger, worst)
                future = pool.submit(client.complete, system=config["system"],
                                     prompt=request.prompt,
                                     temperature=config["temperature"],
                                     max_tokens=config["max_tokens"],
                                     logprobs=bool(config.get("logprobs")), stop=stop,
                                     pay_again=holds.reserve_again)
                pending[future] = (request, holds)
            if not pending:
                break
            finished, _ = wait(pending, timeout=FLUSH_SECONDS, return_when=FIRST_COMPLETED)
            for future in finished:
                request, holds = pending.pop(future)
                worst = holds.worst
                try:
                    answer = future.result()
                except RequestStopped as stopped:
                    _charge_unusable(detail, holds, stopped.paid_unusable)
                    continue  # unjudged, not failed: a later run asks it
                except Exception as raised:  # noqa: BLE001 - see below
                    # What no rule of the client foresaw in an endpoint's answer (a body that
                    # decoded to nothing it reads, a library's own error) fails this request,
                    # naming the item, not the run: the run ended with the error alone, and
                    # the answers paid for since the last stored batch were lost.
                    exc = raised if isinstance(raised, EndpointError) else EndpointError(
                        client.redact(f"{type(raised).__name__}: {raised}"))
                    _charge_unusable(detail, holds, exc.paid_unusable)
                    if exc.fatal:
                        # Keep what was answered (paid for) before the endpoint refused, and
                        # count it on the job (its spent, done and detail) as any batch is.
                        flush()
                        raise
                    detail["failed"] += 1
                    failing += 1
                    if len(detail["errors"]) < 5:
                        detail["errors"].append(f"item {request.item_id}: {exc}")
                    if failing >= give_up_after and not detail["stopped"]:
                        # Every request in a row failed after all its retries: the endpoint
                        # is down, not one item hard. Stop; a later run asks the rest.
                        detail["stopped"] = (f"endpoint failing: {failing} requests in a row "
                                             f"failed after retries; last: {exc}")
                    continue
                failing = 0
                row, parsed = _verdict_row(version, request, answer, price)
                if not answer.usage_known and row.cost is not None:
                    # The endpoint did not report what the call used: charge it what was
                    # reserved for it, its worst case, so the budget still holds.
                    row.cost = worst
                buffer.append(row)
                detail["calls"] += 1
                detail["retries"] += answer.retries
                detail["prompt_tokens"] += answer.prompt_tokens
                detail["completion_tokens"] += answer.completion_tokens
                _charge_unusable(detail, holds, answer.paid_unusable, row.cost)
                if not parsed.ok:
                    detail["unparseable"] += 1
                    detail["truncated"] += answer.finish_reason == "length"
            if len(buffer) >= FLUSH_EVERY or time.monotonic() - last_flush >= FLUSH_SECONDS:
                flush()
        flush()
    except KeyboardInterrupt:
        # Ctrl-C of `run_judge`: the answers paid for since the last stored batch are stored
        # (not `flush`: its progress may raise and hide the Ctrl-C), so a rerun reuses them
        # instead of paying for them again.
        stop.set()
        JudgeVerdict.objects.bulk_create(buffer, ignore_conflicts=True)
        raise
    finally:
        stop.set()
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        client.close()
    return detail


class _Ledger:
    """A run's money, shared with its requests' threads (a request retrying after a paid
    answer it could not use reserves again from its thread): what was spent, and the worst
    case the requests in flight have reserved. Nothing is reserved past the budget."""

    def __init__(self, budget: float | None):
        self.budget = budget
        self.spent = self.reserved = 0.0
        self.lock = threading.Lock()

    def reserve(self, worst: float) -> bool:
        with self.lock:
            if self.budget is not None and self.spent + self.reserved + worst > self.budget:
                return False
            self.reserved += worst
            return True

    def settle(self, reserved: float, cost: float) -> None:
        with self.lock:
            self.reserved -= reserved
            self.spent += cost


class _Holds:
    """What one request has reserved: its worst case once per answer it may be paid for."""

    def __init__(self, ledger: _Ledger, worst: float):
        self.ledger, self.worst, self.count = ledger, worst, 1

    def reserve_again(self) -> bool:
        if not self.ledger.reserve(self.worst):
            return False
        self.count += 1
        return True


def _charge_unusable(detail: dict, holds: _Holds, paid_unusable: int,
                     cost: float | None = None) -> None:
    """Settle a finished request: release what it reserved and charge what it cost (`cost`,
    its stored answer's) plus its worst case for each 200 it could not use: the endpoint ran
    the model for those, and a budget that counted only stored answers was exceeded by an
    endpoint whose bodies broke."""
    detail["paid_unusable"] += paid_unusable
    charged = (cost or 0.0) + holds.worst * paid_unusable
    holds.ledger.settle(holds.worst * holds.count, charged)
    if detail["cost"] is not None and (cost is not None or paid_unusable):
        detail["cost"] = round(holds.ledger.spent, 6)


# --- jobs -------------------------------------------------------------------------------------


class JudgeJobInFlight(JudgeConfigError):
    """Queuing refused: a job of the same judge version on the same project is queued or
    running with another budget or concurrency (`job` names it). Cancel it to change them."""

    def __init__(self, message: str, job: JudgeJob):
        super().__init__(message)
        self.job = job


def judge_job_create(*, project: Project, version: JudgeVersion, budget: float | None = None,
                     concurrency: int = DEFAULT_CONCURRENCY, user=None,
                     send: bool = True) -> JudgeJob:
    """Queue a run of the LLM judge version over the project (sent once the transaction
    commits; with the broker down it stays queued for `judge_jobs_enqueue_pending`).
    `send=False`: the caller runs it in this process (`judge_job_run_here`).

    One queued run per judge version and project: while a job of it is queued or running,
    queuing it again with the same budget and concurrency (a double click, two tabs, an API
    retry) returns that job and sends nothing; with another budget or concurrency it is
    refused (JudgeJobInFlight names the job: cancel it first). The check and the insert run
    under the project's row lock, so two requests at once take turns."""
    if version.judge.kind != JudgeKind.LLM:
        raise JudgeConfigError(f"{version.label} is not an LLM judge")
    _check_kind(project, version)
    # NaN passes `< 0` and every later `spent > budget` test; SQLite stores it as NULL (no
    # cap at all). `run_judge --budget nan` reaches here through argparse's float().
    if budget is not None and not math.isfinite(budget):
        raise JudgeConfigError(f"budget: must be a finite number of USD, not {budget}")
    if budget is not None and (budget < 0 or price_for(version.config) is None):
        raise JudgeConfigError("budget: must be >= 0 and the model needs a price")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise JudgeConfigError(f"concurrency: {concurrency} is not in 1..{MAX_CONCURRENCY}")
    with transaction.atomic():
        if send:
            # A run here (`send=False`) is not deduplicated: it is held to one run per scope
            # when it claims (`judge_job_run`), and refused there while a worker runs it.
            scope_lock(project)
            existing = job_in_flight(JudgeJob, project=project, judge_version=version)
            if existing is not None:
                return _same_request_or_refuse(existing, budget=budget,
                                               concurrency=concurrency)
        job = JudgeJob.objects.create(project=project, judge_version=version, budget=budget,
                                      metrics=[version.label], requested_by=user,
                                      options={"concurrency": concurrency})
        if send:
            transaction.on_commit(lambda: judge_job_send(job))
    return job


def _same_request_or_refuse(existing: JudgeJob, *, budget: float | None,
                            concurrency: int) -> JudgeJob:
    asked = int((existing.options or {}).get("concurrency", DEFAULT_CONCURRENCY))
    if existing.budget == budget and asked == concurrency:
        return existing
    cap = "no budget" if existing.budget is None else f"budget ${existing.budget:g}"
    raise JudgeJobInFlight(
        f"judge job {existing.pk} of {existing.judge_version.label} on this project is "
        f"{existing.status} ({cap}, concurrency {asked}); cancel it before queuing the judge "
        "with another budget or concurrency", existing)


def judge_job_send(job: JudgeJob) -> bool:
    """Send the job's task (False when the broker is unreachable: beat sends it later)."""
    return job_send(job, "judges.run", queue=job.queue)


def judge_jobs_enqueue_pending(*, older_than_seconds: int = 60) -> int:
    """Send queued judge jobs that never reached the broker (`core/leases.py` `jobs_unsent`);
    returns how many were sent."""
    return sum(judge_job_send(job)
               for job in jobs_unsent(JudgeJob, older_than_seconds=older_than_seconds))


class JudgeRunBusy(JudgeConfigError):
    """The judge version is already running on the project (another job holds that scope)."""


def _same_scope_running() -> Exists:
    """Another job of the same judge version on the same project, running with a fresh
    heartbeat (`OuterRef`: the job being claimed). A stale one lost its worker: the sweep
    sends it again, and it does not hold the scope."""
    return Exists(JudgeJob.objects.filter(
        held_filter(JudgeJob), project_id=OuterRef("project_id"),
        judge_version_id=OuterRef("judge_version_id")).exclude(pk=OuterRef("pk")))


def _judge_version_locked(job_id: int) -> None:
    """The claim lock of judge jobs: the job's judge version row, so two workers claiming
    jobs of one judge version take turns and each sees the other's claim."""
    list(JudgeVersion.objects.select_for_update().filter(
        pk__in=JudgeJob.objects.filter(pk=job_id).values("judge_version_id")))


def _scope_holder(job_id: int) -> JudgeJob | None:
    """The running job that kept this queued one from starting, if that is why."""
    job = JudgeJob.objects.filter(pk=job_id, status=ScoringStatus.QUEUED).first()
    if job is None:
        return None
    return (JudgeJob.objects.filter(held_filter(JudgeJob), project_id=job.project_id,
                                    judge_version_id=job.judge_version_id)
            .exclude(pk=job.pk).first())


def judge_job_run(*, job_id: int, retry: RetryPolicy | None = None,
                  progress: Callable[[int, dict], None] | None = None,
                  here: bool = False) -> JudgeJob | None:
    """Run a queued judge job under its lease; progress and the running cost are saved with
    every stored batch (and passed to `progress`). None when there is nothing to do in this
    worker.

    One run of a judge version on a project at a time, whichever door queued it (API,
    `run_judge`): a job whose judge is already running on its project with another job is
    not started (it would pay again for every item that run is asking); it is sent again
    later and then asks only what is left. `here` (a run in this process, `run_judge`): it
    is failed instead, and JudgeRunBusy says which job holds the scope."""
    with leased_run(JudgeJob, job_id, claim_lock=lambda: _judge_version_locked(job_id),
                    claimable=claimable_filter(JudgeJob) & ~_same_scope_running(),
                    done=0) as (lease, job):
        if job is None:
            holder = _scope_holder(job_id)
        else:
            holder = None
            try:
                job = _judge_job_work(lease, job.pk, retry=retry, progress=progress)
            except KeyboardInterrupt:
                if here:
                    # Ctrl-C stops `run_judge`: left running, the lease sweep would send the
                    # job to a worker that goes on paying for the run its user stopped.
                    # (`beat`, not `finish`: a lost lease must not swallow the Ctrl-C.)
                    lease.beat(status=ScoringStatus.FAILED, finished_at=timezone.now(),
                               error="interrupted in this process (Ctrl-C); not resumed")
                raise
    if job is not None:
        from .alignment import judge_alignment_precompute

        judge_alignment_precompute(project=job.project)
        return JudgeJob.objects.get(pk=job_id)
    if holder is not None and here:
        message = (f"not run: judge job {holder.pk} of the same judge version on this "
                   "project is running; wait for it (its verdicts are reused)")
        JudgeJob.objects.filter(pk=job_id, status=ScoringStatus.QUEUED).update(
            status=ScoringStatus.FAILED, error=message, finished_at=timezone.now())
        raise JudgeRunBusy(message)
    if holder is not None:
        # Sent again later: by then the holder has stored its verdicts, so the job asks only
        # what is left (or nothing).
        waiting = JudgeJob.objects.get(pk=job_id)
        job_send_after(waiting, "judges.run", holder=holder, queue=waiting.queue)
    return None


def _judge_job_work(lease: JobLease, job_id: int, *, retry: RetryPolicy | None,
                    progress: Callable[[int, dict], None] | None) -> JudgeJob:
    """The run of a claimed judge job, under `lease`."""
    job = JudgeJob.objects.select_related("project", "judge_version__judge",
                                          "requested_by").get(pk=job_id)
    # Its requester may have lost the project since it was queued: then nothing is asked.
    queued_access_check(user=job.requested_by, project=job.project)
    # The budget is the job's, over all its runs: a run sent again after its worker died
    # may spend only what the earlier runs left (their verdicts are reused, not asked again).
    before = job.spent or 0.0
    budget = None if job.budget is None else max(0.0, job.budget - before)
    detail = judge_project(
        project=job.project, version=job.judge_version, budget=budget,
        concurrency=int((job.options or {}).get("concurrency", DEFAULT_CONCURRENCY)),
        retry=retry, progress=_job_progress(lease, spent_before=before, also=progress))
    lease.finish(status=ScoringStatus.DONE, detail=detail,
                 spent=before + (detail["cost"] or 0.0),
                 done=detail["cached"] + detail["calls"], error=detail["stopped"])
    return job


def _job_progress(lease: JobLease, *, spent_before: float = 0.0,
                  also: Callable[[int, dict], None] | None = None
                  ) -> Callable[[int, dict], None]:
    """Saves a run's progress on its job (then tells `also`); `spent` is the job's total (what
    its earlier runs spent, `spent_before`, plus this run's)."""
    first = True

    def progress(done: int, detail: dict) -> None:
        nonlocal first
        fields = {"done": done, "spent": spent_before + (detail["cost"] or 0.0),
                  "detail": {k: v for k, v in detail.items()}}
        if first:
            fields["total"] = detail["requests"]
            first = False
        lease.update(**fields)
        if also is not None:
            also(done, detail)

    return progress


def judge_job_run_here(*, project: Project, version: JudgeVersion,
                       budget: float | None = None, concurrency: int = DEFAULT_CONCURRENCY,
                       progress: Callable[[int, dict], None] | None = None,
                       retry: RetryPolicy | None = None) -> JudgeJob:
    """Run the judge over the project in this process (`run_judge` without --queue) as a judge
    job, so it holds the same lease and the same one-run-per-scope rule as a worker's run;
    JudgeRunBusy when another job of this judge is running on the project."""
    job = judge_job_create(project=project, version=version, budget=budget,
                           concurrency=concurrency, send=False)
    done = judge_job_run(job_id=job.pk, retry=retry, progress=progress, here=True)
    return done if done is not None else JudgeJob.objects.get(pk=job.pk)


__all__ = ["JudgeJobInFlight", "JudgeRunBusy", "LeaseLost", "judge_job_create",
           "judge_job_run", "judge_job_run_here", "judge_project"]
