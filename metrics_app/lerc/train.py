"""Training LERC: `train(cfg, train_examples, val_examples, progress=...) -> metrics`.

Regression (LERC proper): MSE between the [CLS] head and the gold 1–5 score; one training
example per reference. Pairwise (A/B projects): Bradley–Terry cross-entropy on s(A) − s(B).
Optional pre-training: 3-way classification on multiple-choice items (first / second / both
correct). AdamW without decay on biases and LayerNorm, linear warmup then linear decay,
gradient accumulation and clipping, seeded; the epoch with the best validation metric
(Pearson, or pairwise accuracy) is kept. A checkpoint after every epoch lets a killed job resume.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from annotation.domain.agreement import pearson
from core.vocabulary import ModelKind

PAPER_LEARNING_RATES = (1e-5, 2e-5, 3e-5)
KIND_REGRESSION = ModelKind.REGRESSION.value
KIND_PAIRWISE = ModelKind.PAIRWISE.value


class TrainingCancelled(Exception):
    """The cancel check asked training to stop."""


@dataclass
class TrainConfig:
    """Hyperparameters; the defaults are the paper's (batch 32, 3 epochs, lr in
    {1e-5, 2e-5, 3e-5})."""

    output_dir: str = ""
    kind: str = KIND_REGRESSION
    backbone: str = ""  # a local Hugging Face folder; "" = the packaged MiniLM
    backbone_config: dict | None = None  # random init from this config (tiny test models)
    batch_size: int = 32
    epochs: int = 3
    learning_rate: float = 2e-5
    tune_learning_rate: bool = False  # try every PAPER_LEARNING_RATES, keep the best on val
    max_length: int = 512
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_accumulation: int = 1
    max_grad_norm: float = 1.0
    dropout: float | None = None  # None keeps the backbone's
    seed: int = 42
    eval_batch_size: int = 64
    device: str = "auto"
    bf16: bool = True
    pretrain_epochs: int = 0  # multiple-choice pre-training epochs (0 = none)
    pretrain_learning_rate: float = 2e-5
    max_train_examples: int | None = None  # seeded random subset (benchmarks on small machines)
    max_val_examples: int | None = None  # the same for validation (epoch choice, calibration)
    max_test_examples: int | None = None  # the same for the test split the service reports
    calibrate: bool = True  # fit the calibrated judge on validation (regression models)
    group_by_length: bool = True  # batches of similar length (less padding), in random order
    max_references: int | None = None  # train on the first N references only (None = all)
    # "joined": all reference aliases in one input (one input per candidate; the default);
    # "each": one input per alias, the maximum over aliases when scoring (the paper's layout).
    reference_mode: str = "joined"
    max_reference_tokens: int = 64  # "joined": aliases after this many tokens are left out
    progress_every: int = 10  # optimizer steps between progress reports
    # ...and at most this many seconds between reports (checked every micro-batch), so slow
    # steps (big batches, accumulation, CPU) still send the heartbeat the stale check reads.
    heartbeat_seconds: float = 60.0
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown training options: {', '.join(sorted(unknown))}")
        return cls(**data)

    def model_class_name(self) -> str:
        return "PairwiseScorer" if self.kind == KIND_PAIRWISE else "LercRegressor"


ProgressCallback = Callable[[dict], None]
CancelCheck = Callable[[], bool]


# ---- statistics -----------------------------------------------------------------------------


def pairwise_accuracy_of_labels(scores: Sequence[tuple[float | None, float | None]],
                                labels: Sequence[float]) -> float | None:
    """`meta_evaluation.pairwise_accuracy` (a tie in score counts half) on training pairs,
    whose label is 1 when answer A was preferred, 0 when B was and 0.5 for no preference
    (left out)."""
    from metrics_app.domain.meta_evaluation import pairwise_accuracy

    return pairwise_accuracy(
        (a, b, "A" if label > 0.5 else "B")
        for (a, b), label in zip(scores, labels, strict=True) if label != 0.5
    )["accuracy"]


# ---- helpers ----------------------------------------------------------------------------------


def _seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def _optimizer(model, lr: float, weight_decay: float):
    """AdamW; biases and LayerNorm weights get no weight decay (as in BERT)."""
    import torch
    from torch import nn

    no_decay: set[int] = set()
    for module in model.modules():
        if isinstance(module, nn.LayerNorm) or "norm" in type(module).__name__.lower():
            no_decay.update(id(p) for p in module.parameters(recurse=False))
    for name, parameter in model.named_parameters():
        if name.endswith("bias"):
            no_decay.add(id(parameter))
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if id(p) not in no_decay], "weight_decay": weight_decay},
        {"params": [p for p in params if id(p) in no_decay], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr)


def _fingerprint(cfg: TrainConfig, lr: float, n_train: int) -> str:
    data = cfg.to_dict()
    for volatile in ("output_dir", "progress_every", "heartbeat_seconds", "device",
                     "eval_batch_size"):
        data.pop(volatile, None)
    data.update(lr=lr, n_train=n_train)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _encode_training_set(cfg: TrainConfig, tokenizer, examples) -> tuple[list, list, int]:
    """(inputs, targets, skipped): regression → one encoded input per reference; pairwise →
    (encoded A, encoded B) per pair."""
    from .data import (
        InputTooLong,
        encode_joined,
        encode_pair,
        encode_quadruple,
        expand_references,
    )

    inputs, targets, skipped = [], [], 0
    if cfg.kind == KIND_PAIRWISE:
        for pair in examples:
            try:
                inputs.append((
                    encode_pair(tokenizer, question=pair.question, answer=pair.answer_a,
                                max_length=cfg.max_length),
                    encode_pair(tokenizer, question=pair.question, answer=pair.answer_b,
                                max_length=cfg.max_length),
                ))
            except InputTooLong:
                skipped += 1
                continue
            targets.append(float(pair.label))
        return inputs, targets, skipped
    if cfg.max_references:
        examples = [replace(e, references=e.references[: cfg.max_references])
                    for e in examples]
    if cfg.reference_mode == "joined":
        for example in examples:
            try:
                inputs.append(encode_joined(
                    tokenizer, passage=example.passage, question=example.question,
                    references=example.references, candidate=example.candidate,
                    max_length=cfg.max_length, max_reference_tokens=cfg.max_reference_tokens))
            except InputTooLong:
                skipped += 1
                continue
            targets.append(float(example.score))
        return inputs, targets, skipped
    for example in expand_references(examples):
        try:
            inputs.append(encode_quadruple(
                tokenizer, passage=example.passage, question=example.question,
                reference=example.references[0], candidate=example.candidate,
                max_length=cfg.max_length))
        except InputTooLong:
            skipped += 1
            continue
        targets.append(float(example.score))
    return inputs, targets, skipped


def evaluate(model, tokenizer, cfg: TrainConfig, examples) -> dict[str, Any]:
    """Validation metrics: Pearson (overall and per dataset) or pairwise accuracy."""
    from .infer import predict_pairs, predict_scores

    if not examples:
        return {}
    if cfg.kind == KIND_PAIRWISE:
        scores = predict_pairs(model, tokenizer, examples, max_length=cfg.max_length,
                               batch_size=cfg.eval_batch_size, bf16=cfg.bf16)
        return {"pairwise_accuracy": pairwise_accuracy_of_labels(scores, [e.label for e in examples]),
                "n": len(examples)}
    predictions = predict_scores(model, tokenizer, examples, max_length=cfg.max_length,
                                 batch_size=cfg.eval_batch_size, bf16=cfg.bf16,
                                 reference_mode=cfg.reference_mode,
                                 max_reference_tokens=cfg.max_reference_tokens)
    gold = [e.score for e in examples]
    result: dict[str, Any] = {"pearson": pearson(predictions, gold), "n": len(examples)}
    datasets = sorted({e.dataset for e in examples if e.dataset})
    if len(datasets) > 1:
        result["pearson_by_dataset"] = {
            name: pearson([p for p, e in zip(predictions, examples, strict=True)
                           if e.dataset == name],
                          [e.score for e in examples if e.dataset == name])
            for name in datasets
        }
    return result


def validation_metric_name(kind: str) -> str:
    return "pairwise_accuracy" if kind == KIND_PAIRWISE else "pearson"


def _better(value: float | None, best: float | None) -> bool:
    if value is None:
        return best is None
    return best is None or value > best


# ---- the loops --------------------------------------------------------------------------------


def _pretrain_mc(model, tokenizer, cfg: TrainConfig, mc_examples, device,
                 progress: ProgressCallback | None, should_cancel: CancelCheck | None) -> dict:
    """3-way multiple-choice pre-training of the encoder (its own head and optimizer)."""
    import torch
    from torch import nn

    from .data import InputTooLong, collate, encode_quadruple
    from .infer import autocast_context

    encoded, labels = [], []
    for ex in mc_examples:
        try:
            encoded.append(encode_quadruple(tokenizer, passage=ex.passage, question=ex.question,
                                            reference=ex.answer1, candidate=ex.answer2,
                                            max_length=cfg.max_length))
            labels.append(ex.label)
        except InputTooLong:
            continue
    if not encoded:
        return {}
    optimizer = _optimizer(model, cfg.pretrain_learning_rate, cfg.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(cfg.seed)
    model.train()
    correct = total = 0
    last_report = time.monotonic()
    for epoch in range(cfg.pretrain_epochs):
        order = torch.randperm(len(encoded), generator=generator).tolist()
        for step, start in enumerate(range(0, len(order), cfg.batch_size), start=1):
            if should_cancel and should_cancel():
                raise TrainingCancelled("cancelled during pre-training")
            batch = order[start:start + cfg.batch_size]
            input_ids, mask, types = collate([encoded[i] for i in batch], tokenizer.pad_token_id)
            target = torch.tensor([labels[i] for i in batch], device=device)
            with autocast_context(device, cfg.bf16):
                logits = model.mc_logits(input_ids.to(device), mask.to(device), types.to(device))
                loss = loss_fn(logits.float(), target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if epoch == cfg.pretrain_epochs - 1:
                correct += int((logits.argmax(-1) == target).sum())
                total += len(batch)
            if progress and (step % cfg.progress_every == 0
                             or time.monotonic() - last_report >= cfg.heartbeat_seconds):
                last_report = time.monotonic()
                progress({"phase": "pretrain", "epoch": epoch + 1,
                          "epochs": cfg.pretrain_epochs, "step": step, "loss": float(loss.detach())})
    return {"pretrain_examples": len(encoded),
            "pretrain_train_accuracy": correct / total if total else None}


def pretrain_backbone(cfg: TrainConfig, mc_examples, folder: str | Path,
                      progress: ProgressCallback | None = None) -> dict:
    """MOCHA's multiple-choice pre-training once, kept as a backbone folder (`TrainConfig.backbone`)
    that any number of later runs start from, instead of pre-training inside each run. Writes
    the encoder and tokenizer to `folder` (a Hugging Face model folder) with `pretrain.json`
    (examples, epochs, accuracy, seconds); returns that summary."""
    import torch

    from .infer import pick_device
    from .model import build_encoder, model_class

    folder = Path(folder)
    if not mc_examples or not cfg.pretrain_epochs:
        raise ValueError("pre-training needs multiple-choice examples and pretrain_epochs ≥ 1")
    torch.manual_seed(cfg.seed)
    encoder, tokenizer = build_encoder(cfg.backbone, cfg.backbone_config)
    model = model_class(cfg.model_class_name())(encoder)
    started = time.monotonic()
    device = pick_device(cfg.device)
    model.to(device)
    summary = _pretrain_mc(model, tokenizer, cfg, mc_examples, device, progress, None)
    summary.update(pretrain_epochs=cfg.pretrain_epochs, max_length=cfg.max_length,
                   seconds=round(time.monotonic() - started, 1), base=cfg.backbone or "packaged")
    folder.mkdir(parents=True, exist_ok=True)
    model.encoder.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    (folder / "pretrain.json").write_text(json.dumps(summary, indent=2))
    return summary


@dataclass
class _Run:
    """What a training run carries from epoch to epoch, and what its checkpoint restores."""

    model: Any
    optimizer: Any
    scheduler: Any
    history: list[dict] = field(default_factory=list)
    best_value: float | None = None
    best_epoch: int = 0
    start_epoch: int = 0
    global_step: int = 0
    pretrain: dict = field(default_factory=dict)
    resumed_from: int | None = None
    last_report: float = 0.0


def _train_one(cfg: TrainConfig, lr: float, run_dir: Path, train_examples, val_examples,
               progress: ProgressCallback | None, should_cancel: CancelCheck | None,
               mc_examples) -> dict[str, Any]:
    from transformers import get_linear_schedule_with_warmup

    from .infer import pick_device

    _seed_everything(cfg.seed)
    device = pick_device(cfg.device)
    model, tokenizer = _build_model(cfg, device)
    if progress:
        progress({"phase": "encoding", "epochs": cfg.epochs, "learning_rate": lr})
    inputs, targets, skipped = _encode_training_set(cfg, tokenizer, train_examples)
    if not inputs:
        raise ValueError("no training examples (after dropping inputs longer than max_length)")
    optimizer = _optimizer(model, lr, cfg.weight_decay)
    steps = _Steps(micro_batches=math.ceil(len(inputs) / cfg.batch_size), cfg=cfg)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(cfg.warmup_ratio * steps.total), steps.total)

    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint_dir, best_dir = run_dir / "checkpoint", run_dir / "model"
    fingerprint = _fingerprint(cfg, lr, len(inputs))
    run = _Run(model=model, optimizer=optimizer, scheduler=scheduler)
    _resume(run, checkpoint_dir / "state.pt", fingerprint, device)
    if run.resumed_from is None:
        _fresh_start(run, cfg, tokenizer, targets, mc_examples, device, progress, should_cancel)

    metric_name = validation_metric_name(cfg.kind)
    model.train()
    run.last_report = time.monotonic()
    for epoch in range(run.start_epoch, cfg.epochs):
        started = time.monotonic()
        loss = _train_epoch(cfg, run, epoch, inputs, targets, device, tokenizer.pad_token_id,
                            steps, lr, progress, should_cancel)
        train_seconds = time.monotonic() - started
        report = {"epoch": epoch + 1, "epochs": cfg.epochs, "step": steps.per_epoch,
                  "steps_per_epoch": steps.per_epoch, "global_step": run.global_step,
                  "total_steps": steps.total, "loss": loss, "learning_rate": lr}
        if progress:
            progress({"phase": "validate", **report})
        val = evaluate(model, tokenizer, cfg, val_examples)
        run.last_report = time.monotonic()
        if progress:
            progress({"phase": "validated", **report})
        value = val.get(metric_name)
        run.history.append({"epoch": epoch + 1, "train_loss": loss,
                            f"val_{metric_name}": value,
                            "train_seconds": round(train_seconds, 3),
                            "seconds": round(time.monotonic() - started, 3)})
        if _better(value, run.best_value) or not val_examples:
            run.best_value, run.best_epoch = value, epoch + 1
            _keep_best(run, cfg, tokenizer, run_dir, best_dir, epoch=epoch + 1, lr=lr,
                       metric_name=metric_name, value=value)
        _checkpoint(run, checkpoint_dir, fingerprint, epoch=epoch + 1)
    return {
        "validation_metric": metric_name, f"val_{metric_name}": run.best_value,
        "best_epoch": run.best_epoch, "learning_rate": lr, "history": run.history,
        "epoch_seconds": [h["train_seconds"] for h in run.history],
        "train_inputs": len(inputs), "skipped_too_long": skipped,
        "val_examples": len(val_examples), "device": str(device),
        "resumed_from_epoch": run.resumed_from, **run.pretrain, "model_dir": str(best_dir),
    }


@dataclass(frozen=True)
class _Steps:
    """Micro-batches per epoch, and the optimizer steps they make with accumulation."""

    micro_batches: int
    cfg: TrainConfig

    @property
    def per_epoch(self) -> int:
        return math.ceil(self.micro_batches / self.cfg.grad_accumulation)

    @property
    def total(self) -> int:
        return self.per_epoch * self.cfg.epochs


def _build_model(cfg: TrainConfig, device):
    """The encoder with its head on `device`, dropout set as configured; and its tokenizer."""
    from torch import nn

    from .model import build_encoder, model_class

    encoder, tokenizer = build_encoder(cfg.backbone, cfg.backbone_config)
    model = model_class(cfg.model_class_name())(encoder).to(device)
    if cfg.dropout is not None:
        for module in model.modules():
            if isinstance(module, nn.Dropout):
                module.p = cfg.dropout
    return model, tokenizer


def _resume(run: _Run, state_file: Path, fingerprint: str, device) -> None:
    """Continue from the last epoch's checkpoint when it belongs to this very run."""
    import torch

    if not state_file.is_file():
        return
    state = torch.load(state_file, map_location=device, weights_only=False)
    if state.get("fingerprint") != fingerprint:
        return
    run.model.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    run.start_epoch, run.global_step = state["epoch"], state["global_step"]
    run.history, run.best_value = state["history"], state["best"]
    run.best_epoch = state["best_epoch"]
    run.pretrain = state.get("pretrain", {})
    run.resumed_from = run.start_epoch


def _fresh_start(run: _Run, cfg: TrainConfig, tokenizer, targets: list[float], mc_examples,
                 device, progress, should_cancel) -> None:
    """A run from scratch: the regression head starts at the mean gold score, then the
    optional multiple-choice pre-training."""
    import torch

    if cfg.kind == KIND_REGRESSION:
        # Start the head at the mean gold score: from a zero bias, the first epochs of a short
        # run go to learning the offset of the 1–5 scale rather than the judgments.
        with torch.no_grad():
            run.model.head.bias.fill_(sum(targets) / len(targets))
    if mc_examples and cfg.pretrain_epochs:
        run.pretrain = _pretrain_mc(run.model, tokenizer, cfg, mc_examples, device, progress,
                                    should_cancel)


def _train_epoch(cfg: TrainConfig, run: _Run, epoch: int, inputs: list, targets: list[float],
                 device, pad: int, steps: _Steps, lr: float, progress, should_cancel) -> float:
    """One pass over the training set; the mean training loss."""
    import torch
    from torch import nn

    from .data import collate
    from .infer import autocast_context

    mse, bt = nn.MSELoss(), nn.BCEWithLogitsLoss()
    # Per-epoch generator: a resumed run sees the same order as an uninterrupted one.
    generator = torch.Generator().manual_seed(cfg.seed * 1000 + epoch)
    running, seen = 0.0, 0
    run.optimizer.zero_grad(set_to_none=True)
    for micro, batch in enumerate(_epoch_batches(cfg, inputs, generator), start=1):
        target = torch.tensor([targets[i] for i in batch], dtype=torch.float, device=device)
        with autocast_context(device, cfg.bf16):
            if cfg.kind == KIND_PAIRWISE:
                encoded = [inputs[i][0] for i in batch] + [inputs[i][1] for i in batch]
                ids, mask, types = collate(encoded, pad)
                scores = run.model(ids.to(device), mask.to(device), types.to(device)).float()
                loss = bt(scores[: len(batch)] - scores[len(batch):], target)
            else:
                ids, mask, types = collate([inputs[i] for i in batch], pad)
                scores = run.model(ids.to(device), mask.to(device), types.to(device)).float()
                loss = mse(scores, target)
        (loss / cfg.grad_accumulation).backward()
        running += float(loss.detach()) * len(batch)
        seen += len(batch)
        stepped = micro % cfg.grad_accumulation == 0 or micro == steps.micro_batches
        if stepped:
            torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.max_grad_norm)
            run.optimizer.step()
            run.scheduler.step()
            run.optimizer.zero_grad(set_to_none=True)
            run.global_step += 1
            if should_cancel and should_cancel():
                raise TrainingCancelled(f"cancelled at epoch {epoch + 1}, step {run.global_step}")
        step_in_epoch = run.global_step - epoch * steps.per_epoch
        due = stepped and (run.global_step % cfg.progress_every == 0
                           or step_in_epoch == steps.per_epoch)
        if progress and (due or time.monotonic() - run.last_report >= cfg.heartbeat_seconds):
            run.last_report = time.monotonic()
            progress({"phase": "train", "epoch": epoch + 1, "epochs": cfg.epochs,
                      "step": step_in_epoch, "steps_per_epoch": steps.per_epoch,
                      "global_step": run.global_step, "total_steps": steps.total,
                      "micro_batch": micro, "loss": running / seen, "learning_rate": lr})
    return running / seen


def _keep_best(run: _Run, cfg: TrainConfig, tokenizer, run_dir: Path, best_dir: Path, *,
               epoch: int, lr: float, metric_name: str, value) -> None:
    """Save the model of this epoch as the best one (atomically: written beside, renamed)."""
    from .model import save_model

    tmp = run_dir / "model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(run.model, tokenizer, tmp, train_config=cfg.to_dict(),
               extra={"epoch": epoch, "learning_rate": lr, metric_name: value})
    shutil.rmtree(best_dir, ignore_errors=True)
    tmp.rename(best_dir)


def _checkpoint(run: _Run, checkpoint_dir: Path, fingerprint: str, *, epoch: int) -> None:
    _save_checkpoint(checkpoint_dir, {
        "fingerprint": fingerprint, "model": run.model.state_dict(),
        "optimizer": run.optimizer.state_dict(), "scheduler": run.scheduler.state_dict(),
        "epoch": epoch, "global_step": run.global_step, "history": run.history,
        "best": run.best_value, "best_epoch": run.best_epoch, "pretrain": run.pretrain,
    })


def _epoch_batches(cfg: TrainConfig, inputs: list, generator) -> list[list[int]]:
    """A shuffled epoch. With group_by_length, chunks of 50 batches are sorted by length and
    cut into batches, whose order is shuffled again: far less padding, still random."""
    import torch

    order = torch.randperm(len(inputs), generator=generator).tolist()
    size = cfg.batch_size
    if not cfg.group_by_length:
        return [order[i:i + size] for i in range(0, len(order), size)]

    def length(index: int) -> int:
        item = inputs[index]
        return max(len(item[0]), len(item[1])) if isinstance(item, tuple) else len(item)

    chunk = size * 50
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=length, reverse=True)
        batches.extend(part[i:i + size] for i in range(0, len(part), size))
    shuffled = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffled]


def _save_checkpoint(folder: Path, state: dict) -> None:
    """Atomic: a kill during the write leaves the previous checkpoint intact."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "state.pt.tmp"
    torch.save(state, tmp)
    tmp.replace(folder / "state.pt")


def capped_examples(cfg: TrainConfig, examples, cap: int | None = -1) -> list:
    """At most `cap` (default `cfg.max_train_examples`) examples: a seeded random subset kept in
    input order. The first N in item-id order would be the oldest items (often one dataset or
    one batch of annotation)."""
    cap = cfg.max_train_examples if cap == -1 else cap
    examples = list(examples)
    if not cap or len(examples) <= cap:
        return examples
    chosen = random.Random(cfg.seed).sample(range(len(examples)), cap)
    return [examples[i] for i in sorted(chosen)]


def calibrate_model(cfg: TrainConfig, model_dir: str | Path, val_examples) -> dict[str, Any]:
    """Fit the calibrated judge (`calibration.py`) on the validation examples' raw scores and
    write it beside the weights. Returns the fit report (without per-example predictions)."""
    from .calibration import fit_calibrator
    from .infer import predict_scores
    from .model import load_model

    model, tokenizer, _meta = load_model(model_dir, device="cpu")
    raw = predict_scores(model, tokenizer, val_examples, max_length=cfg.max_length,
                         batch_size=cfg.eval_batch_size, bf16=cfg.bf16,
                         reference_mode=cfg.reference_mode,
                         max_reference_tokens=cfg.max_reference_tokens)
    calibrator, report = fit_calibrator(
        raw, [e.candidate for e in val_examples], [e.references for e in val_examples],
        [e.score for e in val_examples], [e.group or e.question for e in val_examples],
        sources=[e.source for e in val_examples],
        questions=[e.question or "" for e in val_examples], seed=cfg.seed)
    if calibrator is not None:
        calibrator.save(model_dir)
    report.pop("cv_probabilities", None)
    return report


def train(cfg: TrainConfig, train_examples, val_examples, progress: ProgressCallback | None = None,
          should_cancel: CancelCheck | None = None, mc_examples=None) -> dict[str, Any]:
    """Train, keep the best epoch, write it to `<output_dir>/model`, return the metrics.

    Re-running with the same config and output folder resumes from the last finished epoch.
    """
    if not cfg.output_dir:
        raise ValueError("TrainConfig.output_dir is required")
    if cfg.kind not in (KIND_REGRESSION, KIND_PAIRWISE):
        raise ValueError(f"unknown kind {cfg.kind!r}")
    train_examples = capped_examples(cfg, train_examples)
    val_examples = capped_examples(cfg, val_examples, cfg.max_val_examples)
    output = Path(cfg.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    rates = PAPER_LEARNING_RATES if cfg.tune_learning_rate else (cfg.learning_rate,)
    runs = []
    for lr in rates:
        run_dir = output / "runs" / f"lr-{lr:g}" if len(rates) > 1 else output / "run"
        runs.append(_train_one(cfg, lr, run_dir, train_examples, list(val_examples), progress,
                               should_cancel, mc_examples))
    metric = f"val_{runs[0]['validation_metric']}"
    best = runs[0]
    for run in runs[1:]:
        if _better(run[metric], best[metric]):
            best = run
    final = output / "model"
    shutil.rmtree(final, ignore_errors=True)
    shutil.copytree(best["model_dir"], final)
    result = {**best, "model_dir": str(final), "train_examples": len(train_examples),
              "val_examples": len(val_examples)}
    if cfg.kind == KIND_REGRESSION and cfg.calibrate and val_examples:
        if progress:
            progress({"phase": "calibrating", "examples": len(val_examples)})
        result["calibration"] = calibrate_model(cfg, final, val_examples)
    if len(runs) > 1:
        result["learning_rate_search"] = {f"{r['learning_rate']:g}": r[metric] for r in runs}
    return result
