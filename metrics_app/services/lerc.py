"""LERC on the platform: datasets from gathered judgments, model versions, training, promotion,
refresh and stuck-job safety. The training itself is `metrics_app.lerc` (no Django there).

Life of a version: queued → training → evaluated → promoted | rejected; failed on an error or a
lost worker; cancelled on request. Every transition is logged in ModelVersionEvent.

Promotion rule: a new version is promoted only if its validation metric (Pearson, or pairwise
accuracy for A/B) is at least the promoted version's measured on the SAME validation judgments
(the incumbent is re-scored on the newcomer's validation set, so growing data never compares
apples with oranges). The test split / held-out dataset is reported, never used to decide.

Promotion is scoped by project set: a version competes with, and replaces, only the promoted
version trained on the same set of projects (the refresh trains per project, so project B's
model never replaces project A's after being compared on B's judgments alone). The `lerc`
metric for a project serves the most recently promoted version whose projects include it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import statistics
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from annotation.domain.aggregation import mean_by_item
from annotation.domain.agreement import pearson
from annotation.models import Item, Judgment, Project, StageKind, TaskKind
from annotation.services.background import task_send

from ..domain.meta_evaluation import minimal_pair_accuracy, minimal_pairs
from ..domain.text_match import is_exact_match
from ..lerc.data import LercExample, PairExample
from ..lerc.evaluation import compare_with_baselines, decision_report
from ..lerc.train import (
    KIND_PAIRWISE,
    KIND_REGRESSION,
    TrainConfig,
    TrainingCancelled,
    capped_examples,
    pairwise_accuracy_of_labels,
    validation_metric_name,
)
from ..models import ModelKind, ModelStatus, ModelVersion, ModelVersionEvent
from ..selectors import NON_DATA_STAGE_KINDS, judgment_rows
from .lerc_artifacts import artifact_local_path, artifact_store, work_dir

logger = logging.getLogger(__name__)

NAME_BY_KIND = {ModelKind.REGRESSION: "lerc", ModelKind.PAIRWISE: "lerc-ab"}
TASK_KIND_BY_MODEL_KIND = {ModelKind.REGRESSION: TaskKind.LIKERT, ModelKind.PAIRWISE: TaskKind.AB}
IN_FLIGHT = (ModelStatus.QUEUED, ModelStatus.TRAINING)
VAL_SPLITS = {"dev", "val", "valid", "validation"}
SPLIT_MODES = ("auto", "item", "group")


class LercError(Exception):
    """A LERC request that cannot be carried out; the message says why."""


class TrainingElsewhere(Exception):
    """Another machine's worker holds the version with a fresh heartbeat: look again in
    `countdown` seconds (the Celery task retries) rather than dropping the delivery, so a job
    whose worker died there is resumed or failed, never forgotten."""

    def __init__(self, message: str, countdown: int):
        super().__init__(message)
        self.countdown = countdown


# ---- datasets ---------------------------------------------------------------------------------


@dataclass
class LercDataset:
    kind: str
    train: list = field(default_factory=list)
    val: list = field(default_factory=list)
    test: list = field(default_factory=list)
    snapshot: dict = field(default_factory=dict)


def _group_bucket(group: str, seed: int) -> float:
    """Deterministic position in [0, 1) of a passage/question group."""
    digest = hashlib.sha256(f"{seed}:{group}".encode()).hexdigest()
    return int(digest[:12], 16) / float(16**12)


def _item_group(item: Item) -> str:
    """Items sharing a passage (or, without one, a question) share a group and thus a split."""
    if item.group_key:
        return f"key:{item.group_key}"
    content = item.content or {}
    text = content.get("passage") or content.get("question") or ""
    return "text:" + hashlib.sha256(text.strip().lower().encode()).hexdigest()[:16]


def _data_watermark(project: Project) -> int:
    return (
        Judgment.objects.filter(item__project=project)
        .exclude(stage__kind__in=NON_DATA_STAGE_KINDS)
        .aggregate(m=Max("id"))["m"] or 0
    )


def lerc_dataset_build(
    *,
    projects: list[Project],
    kind: str = ModelKind.REGRESSION,
    watermarks: dict[str, int] | None = None,
    holdout_dataset: str = "",
    split_mode: str = "auto",
    znormalize: bool = False,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    seed: int = 0,
    drop_exact_match: bool = True,
) -> LercDataset:
    """Training, validation and test examples from the projects' judgments.

    Only judgments with id ≤ the project's watermark are read (judgments are append-only, so a
    watermark pins the exact set). Gold = mean score (optionally z-normalized per annotator:
    the mean of the annotators' z-scores is mapped back onto the 1–5 scale with the project's
    pooled mean and standard deviation of the raw scores, z · std + mean, so `lerc` still
    scores on 1–5 and "≥ 3 means correct" keeps its meaning);
    A/B gold = share of judgments preferring A. Candidates that exactly match a reference are
    dropped (unless `drop_exact_match=False`, to evaluate against EM on whole splits).
    Splits: the item's split field ("item"), or passage/question groups hashed into
    train/val/test ("group") so no passage lands in two splits; "auto" uses the split field when
    the items carry train and dev splits. With `holdout_dataset` that dataset is the test set
    (out-of-dataset setting) and is never trained or validated on.
    """
    if split_mode not in SPLIT_MODES:
        raise LercError(f"split mode must be one of {', '.join(SPLIT_MODES)}")
    watermarks = dict(watermarks or {})
    dataset = LercDataset(kind=kind)
    seen_ids: list[int] = []
    per_project: dict[str, dict] = {}
    dropped = {"exact_match": 0, "excluded": 0, "no_gold": 0}
    for project in projects:
        watermark = watermarks.get(str(project.id))
        if watermark is None:
            watermark = _data_watermark(project)
            watermarks[str(project.id)] = watermark
        rows = [r for r in judgment_rows(project=project) if r.id <= watermark]
        if kind == ModelKind.PAIRWISE:
            rows = [r for r in rows if r.choice in ("A", "B")]
        else:
            rows = [r for r in rows if r.score is not None]
        items = {item.id: item for item in Item.objects.filter(id__in={r.item_id for r in rows})}
        used_items = {}
        for item_id, item in items.items():
            if item.excluded or item.is_practice:
                dropped["excluded"] += 1
                continue
            content = item.content or {}
            if drop_exact_match and kind == ModelKind.REGRESSION and is_exact_match(
                content.get("candidate", ""), content.get("references", [])
            ):
                dropped["exact_match"] += 1
                continue
            used_items[item_id] = item
        rows = [r for r in rows if r.item_id in used_items]
        seen_ids.extend(r.id for r in rows)
        per_project[project.slug] = {
            "id": project.id, "watermark": watermark, "judgments": len(rows),
            "items": len({r.item_id for r in rows}),
        }
        if kind == ModelKind.PAIRWISE:
            gold = mean_by_item((r.worker_id, r.item_id, 1.0 if r.choice == "A" else 0.0)
                                for r in rows)
        else:
            gold = mean_by_item(((r.worker_id, r.item_id, r.score) for r in rows),
                                znormalize=znormalize)
            if znormalize and rows:
                raw = [float(r.score) for r in rows]
                pooled_mean = statistics.fmean(raw)
                pooled_std = statistics.pstdev(raw) if len(raw) > 1 else 0.0
                gold = {item_id: z * pooled_std + pooled_mean for item_id, z in gold.items()}
                per_project[project.slug]["znormalize_scale"] = {
                    "mean": pooled_mean, "std": pooled_std}
        has_splits = {i.split.lower() for i in used_items.values()}
        use_item_split = split_mode == "item" or (
            split_mode == "auto" and "train" in has_splits and has_splits & VAL_SPLITS
        )
        for item_id in sorted(gold):
            item = used_items[item_id]
            example = _example(kind, item, gold[item_id], project)
            if holdout_dataset:
                if item.dataset == holdout_dataset:
                    dataset.test.append(example)
                    continue
                if use_item_split and item.split.lower() == "test":
                    continue  # another dataset's test split: never trained on
            split = item.split.lower()
            if use_item_split and split in ({"train", "test"} | VAL_SPLITS):
                target = "val" if split in VAL_SPLITS else split
            else:
                position = _group_bucket(example.group, seed)
                target = ("test" if position < test_fraction and not holdout_dataset
                          else "val" if position < test_fraction + val_fraction else "train")
            getattr(dataset, target).append(example)
    seen_ids.sort()
    dataset.snapshot = {
        "watermarks": watermarks,
        "judgment_count": len(seen_ids),
        "max_judgment_id": seen_ids[-1] if seen_ids else 0,
        "judgment_ids_sha256": hashlib.sha256(
            ",".join(map(str, seen_ids)).encode()).hexdigest(),
        "projects": per_project,
        "examples": {"train": len(dataset.train), "val": len(dataset.val),
                     "test": len(dataset.test)},
        "dropped_items": dropped,
        "holdout_dataset": holdout_dataset,
        "split_mode": split_mode,
        "znormalize": znormalize,
    }
    return dataset


def _example(kind: str, item: Item, gold: float, project: Project):
    content = item.content or {}
    group = f"{project.id}:{_item_group(item)}"
    if kind == ModelKind.PAIRWISE:
        return PairExample(question=content.get("question", ""),
                           answer_a=content["answer_a"]["text"],
                           answer_b=content["answer_b"]["text"], label=gold,
                           id=str(item.id), dataset=item.dataset, group=group)
    return LercExample(question=content.get("question", ""),
                       references=tuple(content.get("references") or ("",)),
                       candidate=content.get("candidate", ""), passage=content.get("passage", ""),
                       score=gold, id=str(item.id), dataset=item.dataset, group=group,
                       source=item.source)


def mc_pretraining_build(*, projects: list[Project], seed: int = 0) -> list:
    """3-way pre-training examples from multiple-choice projects' items (role A is correct)."""
    from ..lerc.data import mc_pretraining_examples

    rows = []
    for item in Item.objects.filter(project__in=projects, project__kind=TaskKind.MC,
                                    is_practice=False).order_by("id"):
        content = item.content or {}
        answers = content.get("answers") or []
        if len(answers) >= 2:
            rows.append((content.get("paragraph", ""), content.get("question", ""), answers[0],
                         answers[1:]))
    return mc_pretraining_examples(rows, seed=seed)


def _held_out(item: Item, train_ids: set[str], train_groups: set[str]) -> bool:
    """Whether an item is outside training: not a training example; judged items that are not
    training examples are validation/test; unjudged ones count when their split field is
    validation/test, or, without one, when no training example shares their passage group."""
    if str(item.id) in train_ids:
        return False
    split = (item.split or "").lower()
    if split == "train":
        return False
    if split in VAL_SPLITS or split == "test":
        return True
    return f"{item.project_id}:{_item_group(item)}" not in train_groups


def lerc_minimal_pair_accuracy(scorer, projects: list[Project], trained_on: list | None = None
                               ) -> dict[str, Any]:
    """How often the model scores a minimal pair's better candidate higher
    (`meta_evaluation.minimal_pairs` and `minimal_pair_accuracy`: a tie counts half); with
    `trained_on` (the training examples) only pairs whose both items are held out (validation
    or test, see _held_out) count: a pair the model was trained on measures memory."""
    train_ids = {e.id for e in trained_on or []}
    train_groups = {e.group for e in trained_on or []}
    items = [i for i in Item.objects.filter(project__in=projects, project__kind=TaskKind.LIKERT)
             .order_by("id") if "minimal_pair" in (i.metadata or {})
             and (trained_on is None or _held_out(i, train_ids, train_groups))]
    index = {item.pk: position for position, item in enumerate(items)}
    pairs = minimal_pairs({"id": i.pk, "metadata": i.metadata, "gold": i.gold} for i in items)
    if not pairs:
        return {"accuracy": None, "n": 0}
    scores = scorer.score([_example(ModelKind.REGRESSION, item, 0.0, item.project)
                           for item in items])
    result = minimal_pair_accuracy(
        (scores[index[better["id"]]], scores[index[worse["id"]]]) for _, better, worse in pairs)
    return {"accuracy": result["accuracy"], "n": result["n"]}


# ---- versions ---------------------------------------------------------------------------------


def _event(model_version: ModelVersion, event: str, detail: str = "", user=None) -> None:
    ModelVersionEvent.objects.create(model_version=model_version, event=event, detail=detail,
                                     user=user)


def default_train_options() -> dict[str, Any]:
    """Training options every new version starts from (QAJ_LERC_TRAIN_OPTIONS)."""
    return dict(getattr(settings, "QAJ_LERC_TRAIN_OPTIONS", {}) or {})


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
    user=None,
    reason: str = "",
) -> ModelVersion:
    """A queued version pinned to the judgments that exist now (per-project watermarks)."""
    if not projects:
        raise LercError("at least one project is needed")
    wanted = TASK_KIND_BY_MODEL_KIND[kind]
    wrong = [p.slug for p in projects if p.kind != wanted]
    if wrong:
        raise LercError(f"{kind} models train on {wanted} projects; not: {', '.join(wrong)}")
    options = {**default_train_options(), **(train_options or {})}
    options["kind"] = KIND_PAIRWISE if kind == ModelKind.PAIRWISE else KIND_REGRESSION
    backbone = backbone or options.pop("backbone", "") or getattr(settings, "QAJ_LERC_BACKBONE", "")
    options.pop("backbone", None)
    options.pop("output_dir", None)
    try:
        TrainConfig.from_dict(options)
    except (TypeError, ValueError) as exc:
        raise LercError(str(exc)) from exc
    if pretrain_projects and any(p.kind != TaskKind.MC for p in pretrain_projects):
        raise LercError("pre-training uses multiple-choice (mc) projects")
    if pretrain_projects and not options.get("pretrain_epochs"):
        options["pretrain_epochs"] = 1
    name = NAME_BY_KIND[kind]
    config = {
        "train": options,
        "data": {"holdout_dataset": holdout_dataset, "split_mode": split_mode,
                 "znormalize": znormalize,
                 "pretrain_projects": [p.slug for p in pretrain_projects or []]},
    }
    snapshot = {"watermarks": {str(p.id): _data_watermark(p) for p in projects}}
    for _attempt in range(5):
        try:
            with transaction.atomic():
                number = (ModelVersion.objects.filter(name=name).aggregate(m=Max("number"))["m"]
                          or 0) + 1
                version = ModelVersion.objects.create(
                    name=name, number=number, kind=kind, backbone=backbone or "packaged MiniLM",
                    config=config, data_snapshot=snapshot, status=ModelStatus.QUEUED,
                )
                version.projects.set(projects)
                _event(version, "created", reason or f"projects: {', '.join(p.slug for p in projects)}",
                       user)
                return version
        except IntegrityError:
            continue  # two creators took the same number; take the next
    raise LercError("could not allocate a version number")


def model_version_enqueue(*, model_version: ModelVersion, task: str = "train") -> str:
    """Send the version's training (or evaluation) to the gpu queue once the transaction
    commits; returns the task id."""
    task_id = str(uuid.uuid4())
    model_version.task_id = task_id
    model_version.save(update_fields=["task_id"])
    name = "worker.tasks.lerc.lerc_train" if task == "train" else "worker.tasks.lerc.lerc_evaluate"
    transaction.on_commit(lambda: task_send(name, args=[model_version.id], task_id=task_id))
    return task_id


def _train_config(model_version: ModelVersion, output_dir) -> TrainConfig:
    options = dict(model_version.config.get("train", {}))
    backbone = "" if model_version.backbone == "packaged MiniLM" else model_version.backbone
    return TrainConfig.from_dict({**options, "backbone": backbone, "output_dir": str(output_dir)})


def _dataset_for(model_version: ModelVersion) -> LercDataset:
    data = model_version.config.get("data", {})
    return lerc_dataset_build(
        projects=list(model_version.projects.order_by("id")),
        kind=model_version.kind,
        watermarks=model_version.data_snapshot.get("watermarks"),
        holdout_dataset=data.get("holdout_dataset", ""),
        split_mode=data.get("split_mode", "auto"),
        znormalize=data.get("znormalize", False),
    )


def _stale_after() -> int:
    return int(getattr(settings, "QAJ_LERC_STALE_AFTER_SECONDS", 1800))


def _heartbeat_age(model_version: ModelVersion) -> float | None:
    beat = (model_version.progress or {}).get("heartbeat")
    if beat:
        from django.utils.dateparse import parse_datetime

        parsed = parse_datetime(beat)
        if parsed:
            return (timezone.now() - parsed).total_seconds()
    if model_version.started_at:
        return (timezone.now() - model_version.started_at).total_seconds()
    return None


def _this_worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def _worker_state(worker: str) -> str:
    """"dead" (this host, the process is gone), "alive" (this host, running) or "elsewhere"
    (another host, or unknown) for a heartbeat's `host:pid`. A reused pid reads as alive: the
    safe side, the task then waits for the heartbeat to go stale."""
    host, _sep, pid = (worker or "").rpartition(":")
    if not host or host != socket.gethostname() or not pid.isdigit():
        return "elsewhere"
    if int(pid) == os.getpid():
        return "alive"
    return "alive" if _pid_alive(int(pid)) else "dead"


class _ProgressReporter:
    """Saves training progress (and a heartbeat) to the version; answers the cancel check.
    Both touch the database at most every `interval` seconds."""

    def __init__(self, model_version: ModelVersion, interval: float = 2.0):
        self.pk = model_version.pk
        self.interval = interval
        self._last_save = 0.0
        self._last_check = 0.0
        self._cancel = False
        self.worker = _this_worker()

    def __call__(self, info: dict, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_save < self.interval and info.get("phase") == "train":
            return
        self._last_save = now
        progress = {**info, "heartbeat": timezone.now().isoformat(), "worker": self.worker}
        ModelVersion.objects.filter(pk=self.pk).update(progress=progress)

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
    from ..lerc.train import train

    current = ModelVersion.objects.get(pk=model_version.pk)
    if current.status == ModelStatus.EVALUATED and "promotion_decision" not in current.metrics:
        # The worker died between the evaluation and the promotion decision.
        return model_version_decide(model_version=current)
    with transaction.atomic():
        version = ModelVersion.objects.select_for_update().get(pk=model_version.pk)
        if version.status not in IN_FLIGHT:
            logger.info("%s is %s; nothing to train", version, version.status)
            return version
        if version.status == ModelStatus.TRAINING:
            age = _heartbeat_age(version)
            owner = (version.progress or {}).get("worker", "")
            if age is not None and age < _stale_after():
                state = _worker_state(owner)
                if state == "alive":
                    logger.info("%s is being trained by %s (heartbeat %.0fs ago)", version,
                                owner, age)
                    return version
                if state == "elsewhere":
                    raise TrainingElsewhere(
                        f"{version} is being trained by {owner or 'another worker'} "
                        f"(heartbeat {age:.0f}s ago)",
                        countdown=max(60, int(_stale_after() - age) + 60))
                _event(version, "resumed", f"redelivered: its worker {owner} on this host is gone")
            else:
                _event(version, "resumed", "redelivered after its worker stopped")
        if version.cancel_requested:
            return _finish_cancelled(version, "cancelled before training started")
        version.status = ModelStatus.TRAINING
        version.started_at = version.started_at or timezone.now()
        version.error = ""
        version.progress = {"phase": "preparing", "heartbeat": timezone.now().isoformat(),
                            "worker": _this_worker()}
        version.save(update_fields=["status", "started_at", "error", "progress"])
        if not version.events.filter(event="training started").exists():
            _event(version, "training started")
    reporter = _ProgressReporter(version)
    try:
        # Heartbeats around the phases outside the training loop (reading judgments,
        # evaluating), so a long one on a big project is not mistaken for a lost worker.
        reporter({"phase": "building data"}, force=True)
        dataset = _dataset_for(version)
        reporter({"phase": "data built", "examples": dataset.snapshot.get("examples")},
                 force=True)
        if not dataset.train:
            raise LercError("no training examples in the selected judgments")
        key = f"{version.name}-v{version.number}"
        output = work_dir(key)
        cfg = _train_config(version, output)
        started = time.monotonic()
        mc_examples = None
        pretrain_slugs = version.config.get("data", {}).get("pretrain_projects") or []
        if pretrain_slugs and cfg.pretrain_epochs:
            mc_examples = mc_pretraining_build(
                projects=list(Project.objects.filter(slug__in=pretrain_slugs)), seed=cfg.seed)
        result = train(cfg, dataset.train, dataset.val, progress=reporter,
                       should_cancel=reporter.should_cancel, mc_examples=mc_examples)
        train_seconds = time.monotonic() - started
        reporter({"phase": "evaluating"}, force=True)
        from pathlib import Path

        uri = None
        scorer = _scorer_for_path(result["model_dir"])
        started_eval = time.monotonic()
        val_examples = capped_examples(cfg, dataset.val, cfg.max_val_examples)
        test_examples = capped_examples(cfg, dataset.test, cfg.max_test_examples)
        regression = version.kind == ModelKind.REGRESSION
        # Scored once, used for the version's numbers and for the baseline comparison.
        val_scores = scorer.score(val_examples) if regression and val_examples else None
        test_scores = scorer.score(test_examples) if regression and test_examples else None
        evaluation = {"validation": _evaluate(scorer, version.kind, val_examples, val_scores)}
        reporter({"phase": "evaluating", "split": "test"}, force=True)
        evaluation["test"] = _evaluate(scorer, version.kind, test_examples, test_scores)
        if regression and _promotion_baselines():
            reporter({"phase": "evaluating", "split": "baselines"}, force=True)
            evaluation["baselines"] = compare_with_baselines(
                val_scores or [], test_scores or [], val_examples, test_examples,
                baselines=_promotion_baselines())
        if version.kind == ModelKind.REGRESSION:
            reporter({"phase": "evaluating", "split": "minimal pairs"}, force=True)
            pairs = lerc_minimal_pair_accuracy(scorer, list(version.projects.all()),
                                          trained_on=dataset.train)
            if pairs["n"]:
                evaluation["minimal_pairs"] = pairs
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
    except TrainingCancelled as exc:
        return _finish_cancelled(ModelVersion.objects.get(pk=version.pk), str(exc))
    except Exception as exc:
        _fail(version, f"{type(exc).__name__}: {exc}", traceback.format_exc())
        raise
    with transaction.atomic():
        version = ModelVersion.objects.select_for_update().get(pk=version.pk)
        # While this worker evaluated, the stale check may have failed the version (a slow
        # evaluation without heartbeat) or someone asked to cancel it: those win.
        if version.status != ModelStatus.TRAINING:
            logger.info("%s became %s during evaluation; result dropped", version,
                        version.status)
            return version
        if version.cancel_requested:
            return _finish_cancelled(version, "cancelled during evaluation")
        version.data_snapshot = dataset.snapshot
        version.metrics = metrics
        version.artifact_uri = uri
        version.status = ModelStatus.EVALUATED
        version.finished_at = timezone.now()
        version.progress = {**(version.progress or {}), "phase": "done",
                            "heartbeat": timezone.now().isoformat()}
        version.save(update_fields=["data_snapshot", "metrics", "artifact_uri", "status",
                                    "finished_at", "progress"])
        _event(version, "evaluated", _metric_summary(version))
    return model_version_decide(model_version=version, val_examples=val_examples)


def _finish_cancelled(version: ModelVersion, detail: str) -> ModelVersion:
    version.status = ModelStatus.CANCELLED
    version.finished_at = timezone.now()
    version.save(update_fields=["status", "finished_at"])
    _event(version, "cancelled", detail)
    return version


def _fail(version: ModelVersion, error: str, trace: str = "") -> None:
    ModelVersion.objects.filter(pk=version.pk).update(
        status=ModelStatus.FAILED, error=(error + "\n\n" + trace).strip(),
        finished_at=timezone.now())
    _event(version, "failed", error)


def _metric_summary(version: ModelVersion) -> str:
    name = validation_metric_name(KIND_PAIRWISE if version.kind == ModelKind.PAIRWISE
                                  else KIND_REGRESSION)
    value = (version.metrics.get("validation") or {}).get(name)
    return f"validation {name} = {value if value is None else round(value, 4)}"


_SCORERS: dict[str, Any] = {}


def _scorer_for_path(path: str):
    """Loaded models are cached per process (a worker scores many batches with one model)."""
    from ..lerc.infer import LercScorer

    if path not in _SCORERS:
        if len(_SCORERS) >= 3:
            _SCORERS.pop(next(iter(_SCORERS)))
        _SCORERS[path] = LercScorer(path)
    return _SCORERS[path]


def model_version_scorer(model_version: ModelVersion):
    """A LercScorer for a trained version (downloading it from S3 once if needed)."""
    return _scorer_for_path(str(artifact_local_path(model_version.artifact_uri)))


def _evaluate(scorer, kind: str, examples: list, predictions: list | None = None
              ) -> dict[str, Any]:
    """Validation/test numbers; `predictions` are the scorer's scores when already computed."""
    if not examples:
        return {}
    if kind == ModelKind.PAIRWISE:
        scores = scorer.score_pairs(examples)
        return {"pairwise_accuracy": pairwise_accuracy_of_labels(scores, [e.label for e in examples]),
                "n": len(examples)}
    if predictions is None:
        predictions = scorer.score(examples)
    gold = [e.score for e in examples]
    result: dict[str, Any] = {"pearson": pearson(predictions, gold), "n": len(examples)}
    by_dataset = {}
    for name in sorted({e.dataset for e in examples}):
        chosen = [i for i, e in enumerate(examples) if e.dataset == name]
        by_dataset[name or "(none)"] = pearson([predictions[i] for i in chosen],
                                               [gold[i] for i in chosen])
    result["pearson_by_dataset"] = by_dataset
    # "score ≥ 3 means correct" (binary judgments are 1 or 5): accuracy, κ, AUC.
    decision = decision_report(predictions, gold, 3.0, bootstrap=0)
    result["accuracy_at_3"] = decision.get("accuracy")
    result.update({key: decision.get(key) for key in ("kappa", "roc_auc", "f1")})
    return result


# ---- promotion --------------------------------------------------------------------------------


def _project_set(version: ModelVersion) -> frozenset[int]:
    return frozenset(version.projects.values_list("id", flat=True))


def _scope_label(project_ids) -> str:
    slugs = Project.objects.filter(id__in=project_ids).order_by("slug").values_list("slug",
                                                                                     flat=True)
    return ", ".join(slugs) or "no project"


def promoted_model_version(*, name: str = "lerc", project: Project | None = None,
                           projects=None) -> ModelVersion | None:
    """The served version: for exactly the project set `projects` (ids or projects; the
    promotion scope); else for `project` the most recently promoted one trained on it, or,
    when none was (a new project scored out of domain, as LERC is meant to be used), the most
    recently promoted one of the name."""
    promoted = (ModelVersion.objects.filter(name=name, status=ModelStatus.PROMOTED)
                .order_by("-promoted_at", "-id"))
    if projects is not None:
        wanted = frozenset(getattr(p, "id", p) for p in projects)
        return next((v for v in promoted if _project_set(v) == wanted), None)
    if project is not None:
        own = promoted.filter(projects=project).first()
        if own is not None:
            return own
    return promoted.first()


def model_version_decide(*, model_version: ModelVersion, val_examples: list | None = None
                         ) -> ModelVersion:
    """Apply the promotion rule to an evaluated version (see the module docstring)."""
    version = ModelVersion.objects.get(pk=model_version.pk)
    if version.status != ModelStatus.EVALUATED:
        return version
    metric = validation_metric_name(KIND_PAIRWISE if version.kind == ModelKind.PAIRWISE
                                    else KIND_REGRESSION)
    candidate = (version.metrics.get("validation") or {}).get(metric)
    incumbent = promoted_model_version(name=version.name, projects=_project_set(version))
    if val_examples is None:
        cfg = _train_config(version, "")
        val_examples = capped_examples(cfg, _dataset_for(version).val, cfg.max_val_examples)
    decision: dict[str, Any] = {"metric": metric, "candidate": candidate,
                                "validation_judgments_sha256":
                                    version.data_snapshot.get("judgment_ids_sha256"),
                                "validation_examples": len(val_examples)}
    if incumbent is None:
        promote, why = candidate is not None, "no promoted version yet"
        if candidate is None:
            why = f"validation {metric} could not be computed"
    else:
        try:
            incumbent_value = _evaluate(model_version_scorer(incumbent), version.kind,
                                        val_examples).get(metric)
        except FileNotFoundError as exc:
            # The served model is gone: it cannot be compared, and serving it fails anyway.
            incumbent_value = None
            decision["incumbent_error"] = str(exc)
        decision.update(incumbent=f"v{incumbent.number}", incumbent_value=incumbent_value)
        promote = candidate is not None and (incumbent_value is None
                                             or candidate >= incumbent_value)
        why = (f"{metric} {candidate} vs v{incumbent.number}'s {incumbent_value} on the same "
               f"{len(val_examples)} validation examples")
    floor = _baseline_floor(version, metric)
    if floor is not None:
        decision["floor"] = floor
        if promote and not floor["passed"]:
            promote = False
            why = (f"{metric} {candidate} does not beat the best baseline, "
                   f"{floor['best']} at {floor['best_value']}, on the same "
                   f"{len(val_examples)} validation examples")
        elif promote:
            why += f"; beats the best baseline {floor['best']} ({floor['best_value']})"
    decision["promoted"] = promote
    version.metrics = {**version.metrics, "promotion_decision": decision}
    version.save(update_fields=["metrics"])
    if promote:
        return model_version_promote(model_version=version, reason=f"automatic: {why}")
    version.status = ModelStatus.REJECTED
    version.save(update_fields=["status"])
    _event(version, "rejected", f"automatic: {why}")
    return version


def _promotion_baselines() -> list[str]:
    return list(getattr(settings, "QAJ_LERC_PROMOTION_BASELINES", []) or [])


def _baseline_floor(version: ModelVersion, metric: str) -> dict | None:
    """The promotion floor: the version's validation metric must beat every baseline metric
    measured on the same validation examples (`metrics["baselines"]`, computed after training).
    None when no floor applies (A/B models, or QAJ_LERC_PROMOTION_BASELINES empty)."""
    if version.kind != ModelKind.REGRESSION or not _promotion_baselines():
        return None
    candidate = (version.metrics.get("validation") or {}).get(metric)
    measured = (version.metrics.get("baselines") or {}).get("validation") or {}
    values = {name: (measured.get(name) or {}).get(metric) for name in _promotion_baselines()
              if name in measured}
    values = {name: value for name, value in values.items() if value is not None}
    if not values:
        return {"passed": candidate is not None, "best": None, "best_value": None,
                "baselines": {}, "note": "no baseline could be measured on validation"}
    best = max(values, key=values.get)
    return {"passed": candidate is not None and candidate > values[best], "best": best,
            "best_value": values[best], "baselines": values,
            "unavailable": (version.metrics.get("baselines") or {}).get("unavailable", {})}


def model_card(version: ModelVersion) -> str:
    """A Markdown model card: data, options, timings and every number against the baselines."""
    metrics = version.metrics or {}
    lines = [f"# {version.name} v{version.number}", "",
             f"- status: {version.status}; backbone: {version.backbone}",
             f"- projects: {', '.join(p.slug for p in version.projects.order_by('slug'))}",
             f"- examples: {json.dumps(metrics.get('examples', {}))}",
             f"- training options: {json.dumps(version.config.get('train', {}), sort_keys=True)}",
             f"- data options: {json.dumps(version.config.get('data', {}), sort_keys=True)}",
             f"- timings: {json.dumps(metrics.get('timings', {}))}",
             f"- calibration: {json.dumps((metrics.get('training') or {}).get('calibration'))}",
             ""]
    comparison = metrics.get("baselines") or {}
    for split in ("validation", "test"):
        rows = comparison.get(split) or {}
        if not rows:
            continue
        lines += [f"## {split.capitalize()}: {version.name} against the baselines", "",
                  "| metric | threshold | accuracy | κ | ROC AUC | Pearson | n |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for name, row in rows.items():
            cells = [_fmt(comparison.get("thresholds", {}).get(name))] + [
                _fmt(row.get(key)) for key in ("accuracy", "kappa", "roc_auc", "pearson")]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {row.get('n')} |")
        lines.append("")
    if comparison.get("unavailable"):
        lines += [f"Baselines not measured: {json.dumps(comparison['unavailable'])}", ""]
    decision = metrics.get("promotion_decision")
    if decision:
        lines += ["## Promotion decision", "", "```", json.dumps(decision, indent=2), "```", ""]
    return "\n".join(lines)


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def write_model_card(folder, version: ModelVersion, metrics: dict, snapshot: dict) -> None:
    """MODEL_CARD.md and model_card.json beside the weights, so an artifact describes itself
    (the admin renders the same card from the database, with the promotion decision)."""
    from pathlib import Path

    folder = Path(folder)
    shown = ModelVersion(name=version.name, number=version.number, kind=version.kind,
                         backbone=version.backbone, config=version.config, metrics=metrics,
                         status=version.status, id=version.id)
    (folder / "MODEL_CARD.md").write_text(model_card(shown))
    (folder / "model_card.json").write_text(json.dumps(
        {"name": version.name, "number": version.number, "config": version.config,
         "data_snapshot": snapshot, "metrics": metrics}, indent=2, default=str))


@transaction.atomic
def model_version_promote(*, model_version: ModelVersion, user=None, reason: str = ""
                          ) -> ModelVersion:
    """Make this the served version of its name for its project set; the version promoted for
    the same set goes back to evaluated (other project sets keep theirs)."""
    version = ModelVersion.objects.select_for_update().get(pk=model_version.pk)
    if version.status == ModelStatus.PROMOTED:
        return version
    if version.status not in (ModelStatus.EVALUATED, ModelStatus.REJECTED) or not version.artifact_uri:
        raise LercError(f"v{version.number} is {version.status}; only trained versions "
                        "(evaluated or rejected) can be promoted")
    scope = _project_set(version)
    for previous in ModelVersion.objects.select_for_update().filter(
        name=version.name, status=ModelStatus.PROMOTED
    ):
        if _project_set(previous) != scope:
            continue
        previous.status = ModelStatus.EVALUATED
        previous.save(update_fields=["status"])
        _event(previous, "demoted", f"replaced by v{version.number}", user)
    version.status = ModelStatus.PROMOTED
    version.promoted_at = timezone.now()
    version.save(update_fields=["status", "promoted_at"])
    _event(version, "promoted", reason or ("by hand" if user else ""), user)
    return version


@transaction.atomic
def model_version_rollback(*, name: str = "lerc", user=None,
                           model_version: ModelVersion | None = None) -> ModelVersion:
    """Serve again the version that was promoted before the current one, within a project
    set: `model_version`'s, or the only set with a promoted version of `name`."""
    if model_version is not None:
        name, scope = model_version.name, _project_set(model_version)
    else:
        scopes = {_project_set(v) for v in ModelVersion.objects.filter(
            name=name, status=ModelStatus.PROMOTED)}
        if len(scopes) > 1:
            raise LercError(f"{name} has promoted versions for {len(scopes)} project sets; "
                            "roll back one of them by choosing a version of that set")
        scope = next(iter(scopes), frozenset())
    current = promoted_model_version(name=name, projects=scope)
    if current is None:
        raise LercError(f"no promoted {name} version to roll back from"
                        + (f" for projects {_scope_label(scope)}" if scope else ""))
    # promoted_at is set at every promotion: the latest other one was served just before.
    earlier = next((v for v in ModelVersion.objects.filter(
        name=name, promoted_at__isnull=False,
        status__in=(ModelStatus.EVALUATED, ModelStatus.REJECTED),
    ).exclude(pk=current.pk).order_by("-promoted_at", "-id") if _project_set(v) == scope), None)
    if earlier is None:
        raise LercError(f"{name} v{current.number} is the only version ever promoted for "
                        f"projects {_scope_label(scope)}")
    _event(current, "rolled back", f"back to v{earlier.number}", user)
    return model_version_promote(model_version=earlier, user=user,
                                 reason=f"rollback from v{current.number}")


def model_version_cancel(*, model_version: ModelVersion, user=None) -> ModelVersion:
    """Queued: cancelled at once. Training: the loop stops at its next cancel check."""
    with transaction.atomic():
        version = ModelVersion.objects.select_for_update().get(pk=model_version.pk)
        if version.status not in IN_FLIGHT:
            raise LercError(f"v{version.number} is {version.status}; nothing to cancel")
        version.cancel_requested = True
        version.save(update_fields=["cancel_requested"])
        _event(version, "cancel requested", "", user)
        if version.status == ModelStatus.QUEUED:
            return _finish_cancelled(version, "cancelled while queued")
    return version


# ---- safety and refresh -----------------------------------------------------------------------


def model_versions_fail_stale(*, stale_after_seconds: int | None = None) -> list[ModelVersion]:
    """Versions 'training' without a heartbeat for too long lost their worker (killed, machine
    gone): mark them failed so nothing stays 'training' forever. A redelivered task for a
    failed version does nothing; retrain by creating a new version."""
    limit = stale_after_seconds if stale_after_seconds is not None else _stale_after()
    failed = []
    for version in ModelVersion.objects.filter(status=ModelStatus.TRAINING):
        age = _heartbeat_age(version)
        if age is None or age < limit:
            continue
        with transaction.atomic():
            locked = ModelVersion.objects.select_for_update().get(pk=version.pk)
            if locked.status != ModelStatus.TRAINING:
                continue
            locked.status = ModelStatus.FAILED
            locked.error = (f"worker lost: no progress heartbeat for {age:.0f}s "
                            f"(last worker {(locked.progress or {}).get('worker', '?')})")
            locked.finished_at = timezone.now()
            locked.save(update_fields=["status", "error", "finished_at"])
            _event(locked, "failed", locked.error)
        failed.append(locked)
    return failed


def lerc_refresh_due(*, min_new_judgments: int) -> list[tuple[Project, ModelKind, int]]:
    """(project, model kind, new judgments) for projects that gathered at least
    `min_new_judgments` data judgments since the last version trained on them. Judgments in
    imported stages do not count unless QAJ_LERC_REFRESH_COUNTS_IMPORTS is true.

    "Since" counts from the latest version that includes the project and finished training
    (promoted, evaluated or rejected): counting from the promoted one would retrain after every
    rejection on every beat, and counting from a failed one (e.g. a lost worker) would wait for
    N more judgments before replacing a version that never trained. A project whose newest
    version is in flight is skipped.
    """
    due = []
    trained = (ModelStatus.PROMOTED, ModelStatus.EVALUATED, ModelStatus.REJECTED)
    for kind, task_kind in TASK_KIND_BY_MODEL_KIND.items():
        for project in Project.objects.filter(kind=task_kind).order_by("id"):
            versions = (ModelVersion.objects.filter(name=NAME_BY_KIND[kind], projects=project)
                        .exclude(status=ModelStatus.CANCELLED))
            newest = versions.order_by("-created_at", "-id").first()
            if newest is not None and newest.status in IN_FLIGHT:
                continue
            latest = (versions.filter(status__in=trained).order_by("-created_at", "-id")
                      .first())
            since = int(((latest.data_snapshot or {}).get("watermarks") or {})
                        .get(str(project.id), 0)) if latest else 0
            new = Judgment.objects.filter(item__project=project, id__gt=since).exclude(
                stage__kind__in=NON_DATA_STAGE_KINDS)
            if not getattr(settings, "QAJ_LERC_REFRESH_COUNTS_IMPORTS", False):
                # Imported judgments were gathered elsewhere (and a re-import of the same file
                # adds none): only work collected here makes a refresh due.
                new = new.exclude(stage__kind=StageKind.IMPORTED)
            new = new.count()
            if new >= min_new_judgments:
                due.append((project, kind, new))
    return due


def lerc_refresh(*, min_new_judgments: int | None = None) -> list[ModelVersion]:
    """Create and enqueue a training version for every project that is due."""
    if min_new_judgments is None:
        min_new_judgments = int(getattr(settings, "QAJ_LERC_MIN_NEW_JUDGMENTS", 500))
    created = []
    for project, kind, new in lerc_refresh_due(min_new_judgments=min_new_judgments):
        with transaction.atomic():
            version = model_version_create(projects=[project], kind=kind,
                                           reason=f"refresh: {new} new judgments in {project.slug}")
            model_version_enqueue(model_version=version)
        created.append(version)
    return created


def model_version_for_label(label: str | int | None, *, name: str = "lerc",
                            project: Project | None = None) -> ModelVersion:
    """A version by label ("3", "v3", "lerc-ab:v2"), or when label is empty the promoted one
    (for `project`: the most recently promoted one trained on it, see promoted_model_version)."""
    if label in (None, ""):
        version = promoted_model_version(name=name, project=project)
        if version is None:
            raise LercError(f"no {name} version is promoted yet: train one with "
                            "`manage.py train_lerc --project SLUG` or pass --model VERSION")
        return version
    text = str(label)
    if ":" in text:
        name, text = text.split(":", 1)
    try:
        number = int(text.lower().lstrip("v"))
    except ValueError:
        raise LercError(f"model version {label!r} is not like 3, v3 or lerc:v3") from None
    version = ModelVersion.objects.filter(name=name, number=number).first()
    if version is None:
        raise LercError(f"there is no {name} v{number}")
    if not version.artifact_uri:
        raise LercError(f"{name} v{number} is {version.status} and has no trained model")
    return version

