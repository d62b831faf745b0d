"""Model versions and their training run: created with the judgments pinned by watermark,
queued by task name, trained with progress and a heartbeat (a redelivered task never trains
twice, a cancel request is honoured), evaluated, stored and decided."""
from __future__ import annotations

import logging
import threading
import time
import traceback
import uuid
from pathlib import Path

from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from annotation.models import Project, TaskKind
from core.background import task_send
from core.leases import (
    Heartbeat,
    JobLease,
    LeaseLost,
    heartbeat_age,
    heartbeat_seconds,
    held_filter,
    jobs_unsent,
    owner_state,
    stale_after_seconds,
)
from metrics_app.judge_selectors import judge_view
from metrics_app.lerc.config import TrainingCancelled
from metrics_app.lerc.data import capped_examples
from metrics_app.lerc.evaluation import compare_with_baselines
from metrics_app.model_selectors import version_project_set
from metrics_app.models import ModelKind, ModelStatus, ModelVersion
from metrics_app.services.lerc_artifacts import artifact_store, work_dir

from .common import (
    NAME_BY_KIND,
    REFUSED,
    TASK_KIND_BY_MODEL_KIND,
    DataRefused,
    LercError,
    decision_pending,
    version_event,
    versions_locked,
)
from .datasets import (
    LercDataset,
    examples_seen_record,
    mc_pretraining_build,
    one_score_reason,
    project_adjudication_watermarks,
    project_watermarks,
    version_dataset_build,
)
from .evaluation import (
    lerc_minimal_pair_accuracy,
    scorer_for_path,
    split_metrics,
    validation_summary,
)
from .model_card import write_model_card
from .options import (
    DataOptions,
    version_config_build,
    version_data_options,
    version_train_config,
)
from .promotion import model_version_decide, promotion_baselines

logger = logging.getLogger(__name__)


class TrainingElsewhere(Exception):
    """Another machine's worker holds the version with a fresh heartbeat: look again in
    `countdown` seconds (the Celery task retries) rather than dropping the delivery, so a job
    whose worker died there is resumed or failed, never forgotten."""

    def __init__(self, message: str, countdown: int):
        super().__init__(message)
        self.countdown = countdown


def model_version_create(
    *,
    projects: list[Project],
    kind: str = ModelKind.REGRESSION,
    backbone: str = "",
    train_options: dict | None = None,
    holdout_dataset: str = "",
    split_mode: str = "auto",
    znormalize: bool = False,
    pretrain_projects: list[Project] | None = None,
    distill_judge: str = "",
    user=None,
    reason: str = "",
) -> ModelVersion:
    """A queued version pinned to the judgments that exist now (per-project watermarks).

    `distill_judge`: a judge the researcher trusts (`NAME`, `NAME@VERSION` or `metric:NAME`);
    its verdicts on the items no human judged join the calibrated judge's fit, weighed below
    human judgments. NAME alone is pinned to its version now, so a later run of the judge does
    not change what this version trains on; a metric is read at its latest stored version when
    the version trains."""
    if not projects:
        raise LercError("at least one project is needed")
    wanted = TASK_KIND_BY_MODEL_KIND[kind]
    wrong = [p.slug for p in projects if p.kind != wanted]
    if wrong:
        raise LercError(f"{kind} models train on {wanted} projects; not: {', '.join(wrong)}")
    config, backbone = version_config_build(
        kind=kind, backbone=backbone, train_options=train_options,
        data=DataOptions(holdout_dataset=holdout_dataset, split_mode=split_mode,
                         znormalize=znormalize,
                         pretrain_projects=tuple(p.slug for p in pretrain_projects or []),
                         distill_judge=distill_judge_resolve(distill_judge, projects=projects,
                                                             kind=kind)))
    if pretrain_projects and any(p.kind != TaskKind.MC for p in pretrain_projects):
        raise LercError("pre-training uses multiple-choice (mc) projects")
    name = NAME_BY_KIND[kind]
    snapshot = {"watermarks": project_watermarks(projects),
                "adjudication_watermarks": project_adjudication_watermarks(projects)}
    for _attempt in range(5):
        number = next_version_number(name)
        try:
            with transaction.atomic():
                version = ModelVersion.objects.create(
                    name=name, number=number, kind=kind, backbone=backbone,
                    config=config, data_snapshot=snapshot, status=ModelStatus.QUEUED,
                )
                version.projects.set(projects)
                version_event(version, "created", reason or f"projects: {', '.join(p.slug for p in projects)}",
                       user)
                return version
        except IntegrityError:
            # Only the collision this loop is for is retried: another creator took the same
            # number (model_version_unique). Any other refusal of the row (a constraint, JSON
            # the database will not store) is the real error and goes up as it is.
            if not ModelVersion.objects.filter(name=name, number=number).exists():
                raise
    raise LercError("could not allocate a version number")


def next_version_number(name: str) -> int:
    """The number the next version of `name` takes (one above the highest); two creators may
    both read it, and the unique constraint lets only one of them have it."""
    return (ModelVersion.objects.filter(name=name).aggregate(m=Max("number"))["m"] or 0) + 1


def distill_judge_resolve(ref: str, *, projects: list[Project], kind: str) -> str:
    """The judge a version distils from, as the label that pins its version ("" for none);
    LercError when it cannot teach this version: a pairwise model, LERC itself, or a judge with
    nothing on these projects."""
    ref = (ref or "").strip()
    if not ref:
        return ""
    if kind != ModelKind.REGRESSION:
        raise LercError("distillation reads a judge's verdicts on Likert answers; a pairwise "
                        "model has none to read")
    if ref.startswith("metric:lerc"):
        raise LercError(f"{ref} is LERC's own score: a version cannot be taught by LERC; name "
                        "another judge (an LLM judge, imported verdicts or a metric)")
    labels, missing = set(), []
    for project in projects:
        try:
            labels.add(judge_view(project, ref).label)
        except LookupError as exc:
            missing.append(str(exc))
    if not labels:
        raise LercError(f"the judge {ref!r} has nothing to distil on these projects: "
                        + "; ".join(missing))
    if len(labels) > 1:
        raise LercError(f"{ref!r} is a different version on each project ({', '.join(sorted(labels))}"
                        "): name one as NAME@VERSION")
    return labels.pop()


def model_version_enqueue(*, model_version: ModelVersion, task: str = "train") -> str:
    """Send the version's training (or evaluation) to the gpu queue once the transaction
    commits; returns the task id."""
    task_id = str(uuid.uuid4())
    model_version.task_id = task_id
    model_version.save(update_fields=["task_id"])
    name = "worker.tasks.lerc.lerc_train" if task == "train" else "worker.tasks.lerc.lerc_evaluate"
    transaction.on_commit(lambda: _send(name, model_version.pk, task_id))
    return task_id


def _send(name: str, version_id: int, task_id: str) -> bool:
    """Send a version's task; with the broker unreachable the version keeps no task id, and
    the next refresh sends it (`model_versions_send_pending`), rather than failing the door
    that queued it after the version was stored (a queued version that is never sent would
    also keep the refresh from ever retraining its projects)."""
    try:
        task_send(name, args=[version_id], task_id=task_id)
    except Exception:
        logger.warning("model version %s not sent (broker unavailable); the refresh sends it",
                       version_id, exc_info=True)
        ModelVersion.objects.filter(pk=version_id, task_id=task_id).update(task_id="")
        return False
    return True


def model_versions_send_pending(*, older_than_seconds: int = 60) -> int:
    """Send the training of queued versions that never reached the broker (no task id) and
    are older than `older_than_seconds` (a younger one may still be on its way); how many were
    sent. A version delivered twice trains once (`model_version_train`)."""
    sent = 0
    for version_id in (jobs_unsent(ModelVersion, older_than_seconds=older_than_seconds)
                       .values_list("pk", flat=True)):
        task_id = str(uuid.uuid4())
        if ModelVersion.objects.filter(pk=version_id, task_id="").update(task_id=task_id):
            sent += _send("worker.tasks.lerc.lerc_train", version_id, task_id)
    return sent


class _ProgressReporter:
    """Saves training progress to the version under its lease (each save renews the
    heartbeat); answers the cancel check. Both touch the database at most every `interval`
    seconds."""

    def __init__(self, model_version: ModelVersion, lease: JobLease, interval: float = 2.0):
        self.pk = model_version.pk
        self.lease = lease
        self.interval = interval
        self._last_save = 0.0
        self._last_check = 0.0
        self._cancel = False
        self._info: dict = {}
        self._lock = threading.Lock()  # the heartbeat thread writes the same row

    def __call__(self, info: dict, force: bool = False) -> None:
        """LeaseLost once this worker no longer holds the version (the heartbeat thread or
        this save found another run's lease): training stops instead of going on beside it."""
        if self.lease.lost.is_set():
            raise LeaseLost(f"ModelVersion {self.pk} was taken from this worker")
        now = time.monotonic()
        self._info = info
        if not force and now - self._last_save < self.interval and info.get("phase") == "train":
            return
        self._last_save = now
        if not self._save():
            raise LeaseLost(f"ModelVersion {self.pk} was taken from this worker")

    def beat(self) -> bool:
        """The heartbeat thread: renew the heartbeat with the latest progress, also during
        steps that report nothing for minutes (building data, evaluation)."""
        return self._save()

    def _save(self) -> bool:
        with self._lock:
            return self.lease.beat(progress=dict(self._info))

    def should_cancel(self) -> bool:
        now = time.monotonic()
        if now - self._last_check >= self.interval:
            self._last_check = now
            self._cancel = ModelVersion.objects.filter(pk=self.pk, cancel_requested=True).exists()
        return self._cancel


def model_version_train(*, model_version: ModelVersion) -> ModelVersion:
    """Train, evaluate and promote-or-reject one version. Safe to run again for the same
    version (Celery redelivers a task whose worker died): finished versions are left alone, a
    version another live worker is training is left alone, and a version whose worker died
    resumes from its last epoch checkpoint.

    A redelivery of a version in training looks at the heartbeat's `host:pid`: on this host
    with that process gone (a killed pool child, requeued at once by reject-on-worker-lost) it
    resumes at once; on this host with the process alive it is a duplicate delivery and does
    nothing; on another host with a fresh heartbeat it raises TrainingElsewhere so the task
    looks again once the heartbeat could be stale; a stale heartbeat resumes anywhere."""
    current = ModelVersion.objects.get(pk=model_version.pk)
    if decision_pending(current):
        # The worker died between the evaluation and the promotion decision.
        return model_version_decide(model_version=current)
    lease = JobLease(ModelVersion, model_version.pk)
    version, claimed = _claim_for_training(model_version, lease)
    if not claimed:
        return version
    reporter = _ProgressReporter(version, lease)
    heartbeat = Heartbeat(reporter.beat, every=heartbeat_seconds(),
                          name=f"lerc-v{version.number}").start()
    try:
        dataset, metrics, uri, val_examples = _train_and_evaluate(version, reporter)
    except TrainingCancelled as exc:
        return _finish_cancelled(ModelVersion.objects.get(pk=version.pk), str(exc))
    except LeaseLost:
        # Another run owns the version now (or the sweep failed it): its row is not ours.
        logger.warning("%s was taken from this worker; this run stops", version)
        return ModelVersion.objects.get(pk=version.pk)
    except Exception as exc:
        _fail(version, f"{type(exc).__name__}: {exc}", traceback.format_exc(), lease=lease,
              refused=str(exc) if isinstance(exc, DataRefused) else "")
        raise
    finally:
        heartbeat.stop()
    with transaction.atomic():
        version = ModelVersion.objects.select_for_update().get(pk=version.pk)
        # While this worker evaluated, the stale check may have failed the version (a slow
        # evaluation without heartbeat) or someone asked to cancel it: those win.
        if version.status != ModelStatus.TRAINING or version.lease != lease.token:
            logger.info("%s became %s (lease %s) during evaluation; result dropped", version,
                        version.status, version.lease)
            return version
        if version.cancel_requested:
            return _finish_cancelled(version, "cancelled during evaluation")
        version.data_snapshot = dataset.snapshot
        version.examples_seen = examples_seen_record(dataset)
        version.metrics = metrics
        version.artifact_uri = uri
        version.status = ModelStatus.EVALUATED
        version.finished_at = timezone.now()
        version.progress = {**(version.progress or {}), "phase": "done"}
        version.heartbeat_at = timezone.now()
        version.save(update_fields=["data_snapshot", "examples_seen", "metrics", "artifact_uri", "status",
                                    "finished_at", "progress", "heartbeat_at"])
        version_event(version, "evaluated", validation_summary(version))
    return model_version_decide(model_version=version, val_examples=val_examples)


def _scope_training(version: ModelVersion) -> ModelVersion | None:
    """Another version of the same model and project set in training with a fresh heartbeat
    (a stale one lost its worker: the lease sweep fails it)."""
    scope = version_project_set(version)
    others = (ModelVersion.objects.filter(held_filter(ModelVersion), name=version.name)
              .exclude(pk=version.pk).order_by("pk"))
    return next((other for other in others if version_project_set(other) == scope), None)


@transaction.atomic
def _claim_for_training(model_version: ModelVersion, lease: JobLease
                        ) -> tuple[ModelVersion, bool]:
    """Lock the version and claim its lease for this worker; (version, False) when there is
    nothing to do here: finished, cancelled before it started, or alive in another worker.
    TrainingElsewhere when another version of its project set is training (the task looks
    again later). The claims of one model take turns (`versions_locked`), so two versions of
    one set claimed at once do not both start."""
    versions_locked(model_version.name)
    version = ModelVersion.objects.select_for_update().get(pk=model_version.pk)
    if version.status not in ModelVersion.lease_states.in_flight:
        logger.info("%s is %s; nothing to train", version, version.status)
        return version, False
    if version.status == ModelStatus.TRAINING:
        age = heartbeat_age(version)
        owner = version.lease
        if age is not None and age < stale_after_seconds():
            state = owner_state(owner)
            if state == "alive":
                logger.info("%s is being trained by %s (heartbeat %.0fs ago)", version,
                            owner, age)
                return version, False
            if state == "elsewhere":
                raise TrainingElsewhere(
                    f"{version} is being trained by {owner or 'another worker'} "
                    f"(heartbeat {age:.0f}s ago)",
                    countdown=max(60, int(stale_after_seconds() - age) + 60))
            version_event(version, "resumed", f"redelivered: its worker {owner} on this host is gone")
        else:
            version_event(version, "resumed", "redelivered after its worker stopped")
    if version.cancel_requested:
        return _finish_cancelled(version, "cancelled before training started"), False
    holder = _scope_training(version)
    if holder is not None:
        # One training of a project set at a time, whichever door queued it (the refresh,
        # train_lerc, rundemo): this one looks again once the other could be finished.
        raise TrainingElsewhere(
            f"{holder.name} v{holder.number} of the same projects is training "
            f"(worker {holder.lease or '?'}); v{version.number} starts after it",
            countdown=max(60, int(stale_after_seconds())))
    # The row is locked and the decision made: the claim takes it whatever its lease says.
    version = lease.claim(claimable=Q(status__in=ModelVersion.lease_states.in_flight),
                          started_at=version.started_at or timezone.now(), error="",
                          progress={"phase": "preparing"})
    if not version.events.filter(event="training started").exists():
        version_event(version, "training started")
    return version, True


def _train_and_evaluate(version: ModelVersion, reporter: _ProgressReporter
                        ) -> tuple[LercDataset, dict, str, list]:
    """Build the data, train, evaluate and store the weights with their model card:
    (dataset, metrics, artifact URI, validation examples)."""
    # Lazy: the learning stack (torch, transformers) loads in the worker that trains, not in
    # every process that imports the services.
    from metrics_app.lerc.training import train

    # Heartbeats around the phases outside the training loop (reading judgments,
    # evaluating), so a long one on a big project is not mistaken for a lost worker.
    reporter({"phase": "building data"}, force=True)
    dataset = version_dataset_build(version)
    reporter({"phase": "data built", "examples": dataset.snapshot.get("examples")},
             force=True)
    if not dataset.train:
        raise DataRefused("no training examples in the selected judgments")
    if version.kind == ModelKind.REGRESSION:
        # Refused before the GPU time: such a version trained in full, then was rejected as
        # "validation pearson could not be computed", which said nothing of the data.
        constant = one_score_reason([e.score for e in dataset.train + dataset.distill],
                                    what="training answers")
        if constant:
            raise DataRefused(f"not trained: {constant}")
    key = version_folder_key(version)
    cfg = version_train_config(version, work_dir(key))
    started = time.monotonic()
    mc_examples = None
    pretrain_slugs = version_data_options(version).pretrain_projects
    if pretrain_slugs and cfg.pretrain_epochs:
        mc_examples = mc_pretraining_build(
            projects=list(Project.objects.filter(slug__in=pretrain_slugs)), seed=cfg.seed)
    result = train(cfg, dataset.train, dataset.val, progress=reporter,
                   should_cancel=reporter.should_cancel, mc_examples=mc_examples,
                   distill_examples=dataset.distill)
    train_seconds = time.monotonic() - started
    reporter({"phase": "evaluating"}, force=True)
    started_eval = time.monotonic()
    val_examples = capped_examples(cfg, dataset.val, cfg.max_val_examples)
    test_examples = capped_examples(cfg, dataset.test, cfg.max_test_examples)
    evaluation = _evaluation(version, scorer_for_path(result["model_dir"]), dataset,
                             val_examples, test_examples, reporter)
    metrics = {
        **evaluation,
        "examples": {"train": result.get("train_examples"), "validation": len(val_examples),
                     "test": len(test_examples),
                     "available": dataset.snapshot.get("examples")},
        "training": {k: v for k, v in result.items() if k != "model_dir"},
        "timings": {"train_seconds": round(train_seconds, 2),
                    "epoch_seconds": result.get("epoch_seconds"),
                    "evaluate_seconds": round(time.monotonic() - started_eval, 2)},
    }
    write_model_card(Path(result["model_dir"]), version, metrics, dataset.snapshot)
    uri = artifact_store(Path(result["model_dir"]), key)
    return dataset, metrics, uri, val_examples


def version_folder_key(version: ModelVersion) -> str:
    """The name of the folder (or S3 prefix) a version trains in and keeps its weights in:
    its number and the moment it was created, which no other version shares, also one of
    another database under the same artifact root (a database started afresh or restored,
    two deployments sharing a bucket), so a version never resumes from another's checkpoint
    nor writes over its weights; and the same for every run of the version (a resumed run
    finds its checkpoint)."""
    return f"{version.name}-v{version.number}-{version.created_at:%Y%m%dT%H%M%S%f}"


def _evaluation(version: ModelVersion, scorer, dataset: LercDataset, val_examples: list,
                test_examples: list, reporter: _ProgressReporter) -> dict:
    """Validation and test numbers, the promotion baselines on the same examples, and the
    held-out minimal pairs."""
    regression = version.kind == ModelKind.REGRESSION
    # Scored once, used for the version's numbers and for the baseline comparison.
    val_scores = scorer.score(val_examples) if regression and val_examples else None
    test_scores = scorer.score(test_examples) if regression and test_examples else None
    evaluation = {"validation": split_metrics(scorer, version.kind, val_examples, val_scores)}
    reporter({"phase": "evaluating", "split": "test"}, force=True)
    evaluation["test"] = split_metrics(scorer, version.kind, test_examples, test_scores)
    if regression and promotion_baselines():
        reporter({"phase": "evaluating", "split": "baselines"}, force=True)
        evaluation["baselines"] = compare_with_baselines(
            val_scores or [], test_scores or [], val_examples, test_examples,
            baselines=promotion_baselines())
    if regression:
        reporter({"phase": "evaluating", "split": "minimal pairs"}, force=True)
        pairs = lerc_minimal_pair_accuracy(scorer, list(version.projects.all()),
                                           trained_on=dataset.train)
        if pairs["n"]:
            evaluation["minimal_pairs"] = pairs
    return evaluation


def _finish_cancelled(version: ModelVersion, detail: str) -> ModelVersion:
    version.status = ModelStatus.CANCELLED
    version.finished_at = timezone.now()
    version.save(update_fields=["status", "finished_at"])
    version_event(version, "cancelled", detail)
    return version


def _fail(version: ModelVersion, error: str, trace: str = "", *,
          lease: JobLease, refused: str = "") -> None:
    """Fail the version this run holds; a row another run took over is left to that run.
    `refused`: why its data was refused (`DataRefused`), kept in its data snapshot."""
    extra = {"data_snapshot": {**(version.data_snapshot or {}), REFUSED: refused}} \
        if refused else {}
    if ModelVersion.objects.filter(pk=version.pk, lease=lease.token,
                                   status=ModelStatus.TRAINING).update(
            status=ModelStatus.FAILED, error=(error + "\n\n" + trace).strip(),
            finished_at=timezone.now(), **extra):
        version_event(version, "failed", error)


def model_version_cancel(*, model_version: ModelVersion, user=None) -> ModelVersion:
    """Queued: cancelled at once. Training: the loop stops at its next cancel check."""
    with transaction.atomic():
        version = ModelVersion.objects.select_for_update().get(pk=model_version.pk)
        if version.status not in ModelVersion.lease_states.in_flight:
            raise LercError(f"v{version.number} is {version.status}; nothing to cancel")
        version.cancel_requested = True
        version.save(update_fields=["cancel_requested"])
        version_event(version, "cancel requested", "", user)
        if version.status == ModelStatus.QUEUED:
            return _finish_cancelled(version, "cancelled while queued")
    return version


def model_version_train_here(*, model_version: ModelVersion) -> ModelVersion:
    """Train a version in this process (`train_lerc --sync`): `model_version_train`, except
    that a version whose project set another worker is training is cancelled, not left
    queued with no task to start it (LercError says which version holds the set)."""
    try:
        return model_version_train(model_version=model_version)
    except TrainingElsewhere as exc:
        model_version_cancel(model_version=model_version)
        raise LercError(f"not trained: {exc}") from exc
    except KeyboardInterrupt:
        _fail_stopped_here(model_version)
        raise


STOPPED_HERE = "stopped by Ctrl-C in this process (train_lerc --sync); not resumed"


def _fail_stopped_here(model_version: ModelVersion) -> None:
    """Ctrl-C stopped `train_lerc --sync`: the version it was training (or had still to
    claim, or to decide on) is failed with STOPPED_HERE. Left `training`, the lease sweep
    would hand it to a GPU worker to resume the run its user stopped (and until then it read
    as training); left queued or undecided, the next refresh would send it."""
    version = ModelVersion.objects.get(pk=model_version.pk)
    if version.status not in (ModelStatus.QUEUED, ModelStatus.TRAINING) \
            and not decision_pending(version):
        return  # finished before the stop: promoted, rejected, failed or cancelled stays
    if ModelVersion.objects.filter(pk=version.pk, status=version.status).update(
            status=ModelStatus.FAILED, error=STOPPED_HERE, finished_at=timezone.now()):
        version_event(version, "failed", STOPPED_HERE)


def model_version_worker_lost(version: ModelVersion, reason: str) -> None:
    """The lease sweep failed a version whose worker stopped beating (core/leases.py): log it
    on the version. A redelivered task for a failed version does nothing; retrain by creating
    a new version."""
    version_event(version, "failed", reason)
