"""Scoring items with registered metrics, in batches, with cached results.

Works for any name in `metrics_app.registry` (the baselines, BERTScore, LERC ...). A project's
scores are cached in `MetricScore` per item, metric, version and side: rerunning skips what is
already scored at the current version. The web never calls these directly: the metrics page and
the API create a `ScoringJob` whose Celery task (`worker/tasks/metrics.py`, sent by name) runs it; posted
items (no project) that need a heavy metric become an `ItemScoringJob`, run the same way.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from django.db import transaction
from django.utils import timezone

from annotation.access_selectors import queued_access_check
from annotation.models import Item, Project, TaskKind
from core.leases import (
    JobCancelled,
    JobLease,
    held_filter,
    job_in_flight,
    job_send,
    job_send_after,
    jobs_unsent,
    leased_run,
    scope_lock,
)
from metrics_app.models import ItemScoringJob, ScoringJob, ScoringStatus

from ..models import MetricScore
from ..registry import MetricInput, MetricUnavailable, get_metric, metric_accepts_option

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 256
# Most items one ItemScoringJob holds (they are stored in the job row and scored in one task).
ITEM_JOB_MAX_ITEMS = 1000
# Answer metrics need a candidate and references: Likert items and A/B answers (each side).
SCORABLE_KINDS = (TaskKind.LIKERT, TaskKind.AB)
# Model-based metrics that want the GPU workers (see CELERY_TASK_ROUTES and docs).
GPU_METRIC_PREFIXES = ("lerc",)

Progress = Callable[[int], None]


def metric_queue(name: str) -> str:
    return "gpu" if name.startswith(GPU_METRIC_PREFIXES) else "default"


def build_metric(name: str, *, model: str | None = None, project: Project | None = None,
                 user=None):
    """The registered metric; `model` (a model version), `project` (LERC serves the version
    promoted for that project) and `user` (whom a model version must be visible to) go only to
    metrics that take them."""
    options = {}
    if model and metric_accepts_option(name, "model"):
        options["model"] = model
        if user is not None and metric_accepts_option(name, "user"):
            options["user"] = user
    if project is not None and metric_accepts_option(name, "project"):
        options["project"] = project
    return get_metric(name, **options) if options else get_metric(name)


class ScoringModelError(ValueError):
    """The `model` of a scoring request names no version its metrics may score with (the
    message names the metric and the version)."""


def scoring_model_check(*, metric_names: Sequence[str], model: str | None, user=None) -> None:
    """The one check of a scoring request's model version, at every door before anything is
    stored or scored: both APIs (through `scoring_jobs_create` / `item_scoring_job_create`),
    `manage.py score` and `score_project`, and the Celery runs of the jobs (their requester,
    again). Each metric that takes a model resolves the label as it will when it scores
    (`model_version_for_label`: its own model's name, a trained version, one `user` may see
    when a user is known); ScoringModelError otherwise. Only a database lookup: no model is
    loaded."""
    if not model:
        return
    for name in metric_names:
        if not metric_accepts_option(name, "model"):
            continue
        try:
            metric = build_metric(name, model=model, user=user)
        except MetricUnavailable as exc:
            raise ScoringModelError(f"{name}: {exc}") from None
        close_metric(metric)


def close_metric(metric) -> None:
    close = getattr(metric, "close", None)
    if callable(close):
        close()


def prepare_metrics(metric_names: Sequence[str]) -> list:
    """Start, in the background, what takes long to start (METEOR's Java process) before the
    first metric scores, so it boots while the metrics before it run. Only the registry's
    shared instances (metrics without a model or project option) are prepared; one that cannot
    start is left alone here and reports its error when its turn comes. Returns the prepared
    metrics: the caller closes them when the run ends, however it ends."""
    prepared = []
    for name in metric_names:
        if metric_accepts_option(name, "model") or metric_accepts_option(name, "project"):
            continue
        try:
            metric = get_metric(name)
        except (KeyError, MetricUnavailable):
            continue
        prepare = getattr(metric, "prepare", None)
        if callable(prepare):
            try:
                prepare()
            except MetricUnavailable:
                continue
            prepared.append(metric)
    return prepared


@dataclass
class MetricRun:
    """Scores of one metric over a list of inputs (None where it could not score)."""

    name: str
    version: str = ""
    values: list[float | None] = field(default_factory=list)
    error: str = ""


def batch_size_check(batch_size) -> None:
    """ValueError unless `batch_size` (items scored per call, and stored per batch) is a whole
    number of at least 1: the one rule of the scoring services, `score` and `score_project`."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch size must be a whole number of at least 1, not {batch_size!r}")


def items_per_call(metric, batch_size: int) -> int:
    """How many items one `score_batch` call of `score_inputs` gets: `batch_size`, or more for
    a metric that asks (encoder metrics sort a call's texts by length before batching them, and
    a bigger call pads less: BERTScore on 1,000 EVOUNA answers took 16.1 s in calls of 256
    items, 12.1 s in one)."""
    return max(batch_size, getattr(metric, "items_per_call", 0))


def score_inputs(
    *,
    metric_names: Sequence[str],
    inputs: Sequence[MetricInput],
    model: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> dict[str, MetricRun]:
    """Score `inputs` with every metric, batch by batch. A metric that cannot run here (e.g.
    METEOR without Java) is reported in `error` and the others still run."""
    batch_size_check(batch_size)
    runs: dict[str, MetricRun] = {}
    prepared = prepare_metrics(metric_names) if len(metric_names) > 1 else []
    try:
        for name in metric_names:
            runs[name] = _score_with(name, inputs, model=model, batch_size=batch_size,
                                     progress=progress)
    finally:
        for metric in prepared:
            close_metric(metric)
    return runs


def _score_with(name: str, inputs: Sequence[MetricInput], *, model: str | None,
                batch_size: int, progress: Progress | None) -> MetricRun:
    run = MetricRun(name=name)
    metric = None
    try:
        metric = build_metric(name, model=model)
        run.version = metric.version
        step = items_per_call(metric, batch_size)
        for start in range(0, len(inputs), step):
            batch = inputs[start: start + step]
            values = metric.score_batch(batch)
            if len(values) != len(batch):
                raise RuntimeError(f"{name} returned {len(values)} scores for {len(batch)}")
            run.values.extend(values)
            if progress:
                progress(len(batch))
    except MetricUnavailable as exc:
        run.error = str(exc)
        if progress:
            progress(len(inputs) - len(run.values))
        run.values = [None] * len(inputs)
    finally:
        if metric is not None:
            close_metric(metric)
    return run


def item_metric_inputs(item: Item, kind: str) -> list[tuple[str, MetricInput]]:
    """(side, input) pairs for an item: one for Likert ("" side), one per answer for A/B.

    A/B items score each answer as the candidate; their references are the item's optional
    `content["references"]` (none → reference-based metrics leave them unscored)."""
    content = item.content or {}
    if kind == TaskKind.LIKERT:
        return [("", MetricInput(
            id=str(item.pk), question=content.get("question", ""),
            references=list(content.get("references") or []),
            candidate=content.get("candidate", ""), passage=content.get("passage", ""),
        ))]
    if kind == TaskKind.AB:
        references = list(content.get("references") or [])
        passage = "\n".join(content.get("evidence") or [])
        return [
            (side, MetricInput(
                id=f"{item.pk}:{side}", question=content.get("question", ""),
                references=references, candidate=(content.get(key) or {}).get("text", ""),
                passage=passage,
            ))
            for side, key in (("A", "answer_a"), ("B", "answer_b"))
        ]
    return []


def project_unscorable_reason(project: Project) -> str | None:
    """Why automatic metrics cannot score the project's items (a multiple-choice project: its
    items hold no candidate or reference answer), or None when they can: the one answer of
    every door that would score them or report their scores."""
    if project.kind in SCORABLE_KINDS:
        return None
    return f"{project.kind} items have no candidate or reference answers to score"


def project_metric_inputs(*, project: Project) -> list[tuple[int, str, MetricInput]]:
    """(item id, side, input) for every scorable item of the project (practice items and
    items excluded from collection are left out)."""
    rows = []
    # project_id too: the related manager checks each row's project against `project`, and a
    # deferred project_id cost one query per item (10,000 on EVOUNA-TQ, half the run).
    items = project.items.filter(is_practice=False, excluded=False).only("id", "project_id",
                                                                         "content")
    for item in items.order_by("id").iterator(chunk_size=2000):
        for side, metric_input in item_metric_inputs(item, project.kind):
            rows.append((item.pk, side, metric_input))
    return rows


def project_score_metrics(
    *,
    project: Project,
    metric_names: Sequence[str],
    model: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> dict[str, dict]:
    """Score the project's items with each metric and cache the scores; items already scored
    at the metric's current version are skipped. Returns per metric {version, scored, cached,
    unscorable, error}."""
    batch_size_check(batch_size)
    rows = project_metric_inputs(project=project)
    prepared = prepare_metrics(metric_names) if len(metric_names) > 1 and rows else []
    try:
        return _project_score(project, rows, metric_names, model=model, batch_size=batch_size,
                              progress=progress)
    finally:
        for metric in prepared:
            close_metric(metric)


def _project_score(project: Project, rows: list, metric_names: Sequence[str], *,
                   model: str | None, batch_size: int, progress: Progress | None
                   ) -> dict[str, dict]:
    summary: dict[str, dict] = {}
    for name in metric_names:
        detail = {"version": "", "scored": 0, "cached": 0, "unscorable": 0, "error": ""}
        summary[name] = detail
        metric = None
        try:
            metric = build_metric(name, model=model, project=project)
            version = metric.version
            detail["version"] = version
            done = set(
                MetricScore.objects.filter(item__project=project, metric=name, version=version)
                .values_list("item_id", "side")
            )
            todo = [row for row in rows if (row[0], row[1]) not in done]
            detail["cached"] = len(rows) - len(todo)
            if progress and detail["cached"]:
                progress(detail["cached"])
            # Stored batch by batch (not in `items_per_call` chunks): a killed job resumes
            # from the last stored batch.
            for start in range(0, len(todo), batch_size):
                batch = todo[start: start + batch_size]
                values = metric.score_batch([row[2] for row in batch])
                MetricScore.objects.bulk_create(
                    [MetricScore(item_id=item_id, side=side, metric=name, version=version,
                                 value=value)
                     for (item_id, side, _input), value in zip(batch, values, strict=True)],
                    ignore_conflicts=True,  # a concurrent run may have stored the same score
                )
                detail["scored"] += len(batch)
                detail["unscorable"] += sum(value is None for value in values)
                if progress:
                    progress(len(batch))
        except MetricUnavailable as exc:
            detail["error"] = str(exc)
            logger.warning("metric %s unavailable: %s", name, exc)
            if progress:
                progress(len(rows) - detail["scored"] - detail["cached"])
        finally:
            if metric is not None:
                close_metric(metric)
    return summary


# --- jobs -------------------------------------------------------------------------------------


def scoring_jobs_create(
    *, project: Project, metric_names: Sequence[str], user=None, model: str | None = None
) -> list[ScoringJob]:
    """Queue scoring of `metric_names` on the project: one job per Celery queue (model-based
    metrics such as LERC go to `gpu`), enqueued once the transaction commits.

    A job already queued or running on the project with the same metrics (in any order) and
    the same model is returned instead of a second one (a double click, two tabs, an API
    retry): the scores it stores are the ones asked for. The check and the insert run under
    the project's row lock, so two requests at once take turns."""
    unknown = [name for name in metric_names if not _is_registered(name)]
    if unknown:
        raise ValueError(f"unknown metric(s): {', '.join(unknown)}")
    if reason := project_unscorable_reason(project):
        raise ValueError(reason)
    scoring_model_check(metric_names=metric_names, model=model, user=user)
    by_queue: dict[str, list[str]] = {}
    for name in metric_names:
        by_queue.setdefault(metric_queue(name), []).append(name)
    options = {"model": model} if model else {}
    jobs = []
    with transaction.atomic():
        scope_lock(project)
        for queue, names in by_queue.items():
            existing = job_in_flight(ScoringJob, project=project,
                                     same=_same_metrics_and_options(names, options))
            if existing is not None:
                jobs.append(existing)
                continue
            job = ScoringJob.objects.create(
                project=project, metrics=names, queue=queue, requested_by=user,
                options=options,
            )
            jobs.append(job)
            transaction.on_commit(lambda job=job: scoring_job_send(job))
    return jobs


def _same_metrics_and_options(metric_names: Sequence[str], options: dict):
    """A scoring job asks for the same scores: these metrics (in any order), these options."""
    wanted = sorted(metric_names)
    return lambda job: sorted(job.metrics or []) == wanted and (job.options or {}) == options


def _is_registered(name: str) -> bool:
    from ..registry import metric_names

    return name in metric_names()


def scoring_job_send(job: ScoringJob | ItemScoringJob) -> bool:
    """Send the job's task (False when the broker is unreachable: beat sends it later)."""
    name = "metrics.score_items" if isinstance(job, ItemScoringJob) else "metrics.score_project"
    return job_send(job, name, queue=job.queue)


def scoring_jobs_enqueue_pending(*, older_than_seconds: int = 60) -> int:
    """Send queued jobs (project `ScoringJob`s and `ItemScoringJob`s) that never reached the
    broker (`core/leases.py` `jobs_unsent`); returns how many were sent."""
    return sum(scoring_job_send(job) for model in (ScoringJob, ItemScoringJob)
               for job in jobs_unsent(model, older_than_seconds=older_than_seconds))


def _progress_recorder(lease: JobLease, *, total: int, also: Progress | None = None
                       ) -> Progress:
    """Save the job's total, then return the callback that saves how many are done (what the
    admin's and the API's progress show), then tells `also` (a command's progress bar); each
    save also renews the lease."""
    lease.update(total=total, done=0)
    done = 0

    def progress(n: int) -> None:
        nonlocal done
        done = min(total, done + n)
        lease.update(done=done)
        if also is not None:
            also(n)

    return progress


class ScoringRunBusy(ValueError):
    """A run of metrics a live worker (or `score_project`) is scoring on the project now
    (another job, `holder`, holds them): it would score the same answers again beside it. The
    message names the job."""

    def __init__(self, message: str, holder: ScoringJob):
        super().__init__(message)
        self.holder = holder


class ScoringRunTakenOver(ScoringRunBusy):
    """`score_project`'s job went on in another run (this process lost its lease)."""


def scoring_job_run(*, job_id: int, batch_size: int = DEFAULT_BATCH_SIZE,
                    progress: Progress | None = None, here: bool = False) -> ScoringJob | None:
    """Run a queued job: score, record progress as it goes, then refresh the project's cached
    metric report, also when it is cancelled mid-run (the scores it stored stay). Failures are
    stored on the job (and re-raised for Celery's log). A job that is finished or alive in
    another worker (a redelivered message) is left alone (None); a run that lost its lease
    stops and returns the job as the other run left it.

    One run of a metric on a project at a time, whichever door started it (the metrics page,
    the API, `score_project`): a job with a metric another job is scoring in a live worker is
    not started; it is sent again later and then scores only what is left. `here`: a run in
    this process (`scoring_job_run_here`): refused then (ScoringRunBusy), and failed, not
    left for the sweep to resend, when Ctrl-C stops it; `progress` is told too."""
    try:
        return _scoring_job_run(job_id, batch_size=batch_size, progress=progress, here=here)
    except ScoringRunBusy as busy:
        if here:
            raise
        waiting = ScoringJob.objects.get(pk=job_id)
        job_send_after(waiting, "metrics.score_project", holder=busy.holder,
                       queue=waiting.queue)
        return None


def _scoring_job_run(job_id: int, *, batch_size: int, progress: Progress | None,
                     here: bool) -> ScoringJob | None:
    with leased_run(ScoringJob, job_id, done=0,
                    claim_lock=lambda: _run_scope_check(job_id)) as (lease, job):
        if job is None:
            return None
        try:
            _scoring_job_body(lease, job, batch_size=batch_size, progress=progress)
        except KeyboardInterrupt:
            if here:
                # Ctrl-C stops `score_project`, at any step (the checks, the scoring, the
                # report's refresh): left running, the lease sweep would send the job to a
                # worker to finish the run its user stopped. (`beat`, not `finish`: a lost
                # lease must not swallow the Ctrl-C.)
                lease.beat(status=ScoringStatus.FAILED, finished_at=timezone.now(),
                           error="interrupted in this process (Ctrl-C); not resumed")
            raise
    return ScoringJob.objects.get(pk=job_id)


def _scoring_job_body(lease: JobLease, job: ScoringJob, *, batch_size: int,
                      progress: Progress | None) -> None:
    from metrics_app.services.meta_evaluation_report import metric_report_refresh

    job = ScoringJob.objects.select_related("project", "requested_by").get(pk=job.pk)
    # Checked again for the requester: their access may have changed since it was queued.
    queued_access_check(user=job.requested_by, project=job.project)
    scoring_model_check(metric_names=job.metrics, model=(job.options or {}).get("model"),
                        user=job.requested_by)
    recorder = _progress_recorder(
        lease, total=len(project_metric_inputs(project=job.project)) * len(job.metrics),
        also=progress)
    try:
        detail = project_score_metrics(
            project=job.project, metric_names=job.metrics,
            model=(job.options or {}).get("model"), batch_size=batch_size,
            progress=recorder,
        )
    except JobCancelled:
        # Cancelled mid-run: the batches stored before the cancel stay, so the cached
        # report reads them as it would a finished run's (it was left stale).
        metric_report_refresh(project=job.project)
        raise
    metric_report_refresh(project=job.project)
    lease.finish(status=ScoringStatus.DONE, detail=detail, error="")


def scoring_run_holder(job: ScoringJob) -> ScoringJob | None:
    """Another job of `job`'s project scoring one of its metrics in a live worker now
    (`core/leases.py:held_filter`), if any: the same scores, so the same model where the metric
    takes one (a job's `model` option means nothing to F1: `f1,lerc --model X` queues an F1 job
    carrying it, which scores the same F1 as a plain one)."""
    wanted, model = set(job.metrics or []), (job.options or {}).get("model")
    others = (ScoringJob.objects.filter(held_filter(ScoringJob), project_id=job.project_id)
              .exclude(pk=job.pk).order_by("pk"))

    def same_scores(other: ScoringJob) -> bool:
        other_model = (other.options or {}).get("model")
        return any(other_model == model or not metric_accepts_option(name, "model")
                   for name in wanted & set(other.metrics or []))

    return next((other for other in others if same_scores(other)), None)


def _run_scope_check(job_id: int) -> None:
    """The claim lock of scoring jobs, in the claim's transaction: the project's row (claims
    of one project take turns with each other and with queuing, so each sees the other's
    claim), then ScoringRunBusy when a live worker scores one of the job's metrics on the
    project (a job not claimable anyway, finished or cancelled, is left to the claim)."""
    job = ScoringJob.objects.get(pk=job_id)
    scope_lock(Project(pk=job.project_id))
    if job.status != ScoringStatus.QUEUED:
        return
    holder = scoring_run_holder(job)
    if holder is not None:
        shared = ", ".join(sorted(set(job.metrics) & set(holder.metrics)))
        raise ScoringRunBusy(
            f"not run: scoring job {holder.pk} is running {shared} on this project in "
            f"{holder.lease or 'another worker'}; wait for it (its scores are reused), or "
            "cancel it on the metrics page, then run again", holder)


def scoring_job_run_here(*, project: Project, metric_names: Sequence[str],
                         model: str | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                         progress: Progress | None = None) -> ScoringJob:
    """Score the project in this process (`score_project`) as a scoring job, so it holds the
    lease the metrics page's and the API's jobs hold: its progress shows where jobs are shown,
    a request to queue the same metrics meanwhile answers it, the doors that cancel jobs stop
    it, and it is refused (ScoringRunBusy, the job failed with the reason) while a live worker
    scores one of its metrics here. Returns the job as it ended (done, or cancelled)."""
    # The queue a worker would take it from were it sent again (its process killed): the
    # gpu queue when one of its metrics wants it.
    queues = {metric_queue(name) for name in metric_names}
    job = ScoringJob.objects.create(project=project, metrics=list(metric_names),
                                    queue="gpu" if "gpu" in queues else "default",
                                    options={"model": model} if model else {})
    try:
        scoring_job_run(job_id=job.pk, batch_size=batch_size, progress=progress, here=True)
    except ScoringRunBusy as exc:
        ScoringJob.objects.filter(pk=job.pk, status=ScoringStatus.QUEUED).update(
            status=ScoringStatus.FAILED, error=str(exc), finished_at=timezone.now())
        raise
    job = ScoringJob.objects.get(pk=job.pk)
    if job.status not in (ScoringStatus.DONE, ScoringStatus.CANCELLED):
        # This process lost the lease (its heartbeat went stale, e.g. a suspended laptop) and
        # another run took the job over: the scoring is not this run's to report as done.
        raise ScoringRunTakenOver(
            f"scoring job {job.pk} was taken over by {job.lease or 'another run'} "
            f"({job.status}) after this process stopped renewing its lease; its progress "
            "shows on the metrics page", job)
    return job


# --- jobs over posted items (no project) ------------------------------------------------------


def item_scoring_job_create(
    *, metric_names: Sequence[str], inputs: Sequence[MetricInput], user,
    model: str | None = None,
) -> ItemScoringJob:
    """Store posted inputs and queue their scoring: one job, on `gpu` if any metric wants it
    (that worker runs the cheap ones too), enqueued once the transaction commits. If the
    broker is down the job stays queued for `scoring_jobs_enqueue_pending`."""
    unknown = [name for name in metric_names if not _is_registered(name)]
    if unknown:
        raise ValueError(f"unknown metric(s): {', '.join(unknown)}")
    if not 1 <= len(inputs) <= ITEM_JOB_MAX_ITEMS:
        raise ValueError(f"a scoring job holds 1 to {ITEM_JOB_MAX_ITEMS} items, not {len(inputs)}")
    scoring_model_check(metric_names=metric_names, model=model, user=user)
    queues = {metric_queue(name) for name in metric_names}
    with transaction.atomic():
        job = ItemScoringJob.objects.create(
            metrics=list(metric_names), queue="gpu" if "gpu" in queues else "default",
            options={"model": model} if model else {}, requested_by=user,
            items=[asdict(metric_input) for metric_input in inputs],
            total=len(inputs) * len(metric_names),
        )
        transaction.on_commit(lambda: scoring_job_send(job))
    return job


def _metric_error(name: str, message: str) -> str:
    return message if message.startswith(name) else f"{name}: {message}"


def item_scoring_job_run(*, job_id: int, batch_size: int = DEFAULT_BATCH_SIZE
                         ) -> ItemScoringJob | None:
    """Score a job's items with `score_inputs`, batch by batch, recording progress; store the
    results in input order. A metric that cannot run (e.g. METEOR without Java, a LERC model
    that does not load) ends the job `failed` with its message in `error`; the other metrics'
    scores are kept in `results` (that metric's are null). A job that is finished or alive in
    another worker (a redelivered message) is left alone (None)."""
    with leased_run(ItemScoringJob, job_id, done=0) as (lease, job):
        if job is None:
            return None
        scoring_model_check(metric_names=job.metrics, model=(job.options or {}).get("model"),
                            user=job.requested_by)
        inputs = [MetricInput(**row) for row in job.items]
        progress = _progress_recorder(lease, total=len(inputs) * len(job.metrics))
        runs = score_inputs(metric_names=job.metrics, inputs=inputs,
                            model=(job.options or {}).get("model"), batch_size=batch_size,
                            progress=progress)
        results = [
            {"id": metric_input.id,
             **{name: (run.values[index] if run.values else None)
                for name, run in runs.items()}}
            for index, metric_input in enumerate(inputs)
        ]
        errors = [_metric_error(name, run.error) for name, run in runs.items() if run.error]
        lease.finish(
            status=ScoringStatus.FAILED if errors else ScoringStatus.DONE,
            results=results, error="; ".join(errors), done=len(inputs) * len(job.metrics),
            detail={name: {"version": run.version, "error": run.error}
                    for name, run in runs.items()},
        )
    return ItemScoringJob.objects.get(pk=job_id)
