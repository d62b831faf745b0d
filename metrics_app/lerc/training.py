"""Training LERC: `train(cfg, train_examples, val_examples, progress=...) -> metrics`.

Regression (LERC proper): MSE between the [CLS] head and the gold 1–5 score; one training
example per reference. Pairwise (A/B projects): Bradley–Terry cross-entropy on s(A) − s(B).
Optional pre-training: 3-way classification on multiple-choice items (first / second / both
correct). AdamW without decay on biases and LayerNorm, linear warmup then linear decay,
gradient accumulation and clipping, seeded; the epoch with the best validation metric
(Pearson, or pairwise accuracy) is kept. A checkpoint after every epoch lets a killed job resume.

The kind-specific parts (inputs, head start, loss) belong to the model class of `cfg.kind`
(`model.py`); validation scores through `inference.evaluate`; this module is the loop.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup

from .augmentation import rewrites
from .batching import collate, epoch_batches
from .calibration import AugmentedInputs, DistilledInputs, fit_calibrator
from .config import (
    PAPER_LEARNING_RATES,
    CancelCheck,
    ProgressCallback,
    TrainConfig,
    TrainingCancelled,
)
from .data import InputTooLong, capped_examples, encode_quadruple, examples_as_judged
from .device import inference_dtype, pick_device, seed_everything, training_autocast
from .features import FEATURE_SETS, reads_semantic
from .inference import evaluate, predict_scores
from .model import build_encoder, build_model, load_model, model_for_kind, save_model
from .semantic import SemanticEncoder
from .validation import is_better, validation_metric_name


def optimizer_for(model, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW; biases and LayerNorm weights get no weight decay (as in BERT)."""
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
    """What a checkpoint must match to be resumed: the config without its volatile fields."""
    data = cfg.to_dict()
    for volatile in ("output_dir", "progress_every", "heartbeat_seconds", "device",
                     "eval_batch_size"):
        data.pop(volatile, None)
    data.update(lr=lr, n_train=n_train)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


# ---- multiple-choice pre-training -------------------------------------------------------------


def _pretrain_mc(model, tokenizer, cfg: TrainConfig, mc_examples, device,
                 progress: ProgressCallback | None, should_cancel: CancelCheck | None) -> dict:
    """3-way multiple-choice pre-training of the encoder (its own head and optimizer)."""
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
    optimizer = optimizer_for(model, cfg.pretrain_learning_rate, cfg.weight_decay)
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
            with training_autocast(device, cfg.bf16):
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
    folder = Path(folder)
    if not mc_examples or not cfg.pretrain_epochs:
        raise ValueError("pre-training needs multiple-choice examples and pretrain_epochs ≥ 1")
    torch.manual_seed(cfg.seed)
    encoder, tokenizer = build_encoder(cfg.backbone, cfg.backbone_config)
    model = model_for_kind(cfg.kind)(encoder)
    model.freeze_word_embeddings(cfg.freeze_word_embeddings)
    model.freeze_lower_layers(cfg.frozen_layers)
    started = time.monotonic()
    device = pick_device(cfg.device)
    model.to(device)
    summary = _pretrain_mc(model, tokenizer, cfg, mc_examples, device, progress, None)
    summary.update(pretrain_epochs=cfg.pretrain_epochs, max_length=cfg.max_length,
                   seconds=round(time.monotonic() - started, 1), base=cfg.backbone or "packaged")
    _folder_written_whole(folder, lambda part: (
        model.encoder.save_pretrained(str(part)), tokenizer.save_pretrained(str(part)),
        (part / "pretrain.json").write_text(json.dumps(summary, indent=2))))
    return summary


def _folder_written_whole(folder: Path, write) -> None:
    """`write(part)` fills a hidden folder beside `folder`, whose files then move in, the
    model's `config.json` last: a Ctrl-C or an error while saving leaves no half model (a
    `config.json` without its weights would read as a model already there)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    part = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".part", dir=folder.parent))
    try:
        write(part)
        folder.mkdir(exist_ok=True)
        for file in sorted(part.iterdir(), key=lambda f: f.name == "config.json"):
            file.replace(folder / file.name)
    finally:
        shutil.rmtree(part, ignore_errors=True)


# ---- one training run -------------------------------------------------------------------------


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


def _train_one(cfg: TrainConfig, lr: float, run_dir: Path, train_examples, val_examples,
               progress: ProgressCallback | None, should_cancel: CancelCheck | None,
               mc_examples) -> dict[str, Any]:
    seed_everything(cfg.seed)
    device = pick_device(cfg.device)
    model, tokenizer = build_model(cfg, device)
    if progress:
        progress({"phase": "encoding", "epochs": cfg.epochs, "learning_rate": lr})
    inputs, targets, skipped = model.encode_training_set(cfg, tokenizer, train_examples)
    if not inputs:
        raise ValueError("no training examples (after dropping inputs longer than max_length)")
    optimizer = optimizer_for(model, lr, cfg.weight_decay)
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
        if is_better(value, run.best_value) or not val_examples:
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


def _resume(run: _Run, state_file: Path, fingerprint: str, device) -> None:
    """Continue from the last epoch's checkpoint when it belongs to this very run."""
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
    """A run from scratch: the kind's head start (regression: the mean gold score), then the
    optional multiple-choice pre-training."""
    run.model.init_head(targets)
    if mc_examples and cfg.pretrain_epochs:
        run.pretrain = _pretrain_mc(run.model, tokenizer, cfg, mc_examples, device, progress,
                                    should_cancel)


def _train_epoch(cfg: TrainConfig, run: _Run, epoch: int, inputs: list, targets: list[float],
                 device, pad: int, steps: _Steps, lr: float, progress, should_cancel) -> float:
    """One pass over the training set; the mean training loss."""
    # Per-epoch generator: a resumed run sees the same order as an uninterrupted one.
    generator = torch.Generator().manual_seed(cfg.seed * 1000 + epoch)
    running, seen = 0.0, 0
    run.optimizer.zero_grad(set_to_none=True)
    batches = epoch_batches(inputs, cfg.batch_size, generator,
                            group_by_length=cfg.group_by_length)
    for micro, batch in enumerate(batches, start=1):
        target = torch.tensor([targets[i] for i in batch], dtype=torch.float, device=device)
        with training_autocast(device, cfg.bf16):
            loss = run.model.training_loss([inputs[i] for i in batch], target, pad, device)
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
    tmp = run_dir / "model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(run.model, tokenizer, tmp, train_config=cfg.to_dict(),
               extra={"epoch": epoch, "learning_rate": lr, metric_name: value})
    shutil.rmtree(best_dir, ignore_errors=True)
    tmp.rename(best_dir)


def _checkpoint(run: _Run, checkpoint_dir: Path, fingerprint: str, *, epoch: int) -> None:
    """The state a killed run resumes from; atomic: a kill during the write leaves the previous
    checkpoint intact."""
    state = {
        "fingerprint": fingerprint, "model": run.model.state_dict(),
        "optimizer": run.optimizer.state_dict(), "scheduler": run.scheduler.state_dict(),
        "epoch": epoch, "global_step": run.global_step, "history": run.history,
        "best": run.best_value, "best_epoch": run.best_epoch, "pretrain": run.pretrain,
    }
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    tmp = checkpoint_dir / "state.pt.tmp"
    torch.save(state, tmp)
    tmp.replace(checkpoint_dir / "state.pt")


# ---- the entry points -------------------------------------------------------------------------


def calibrate_model(cfg: TrainConfig, model_dir: str | Path, val_examples,
                    distill_examples=()) -> dict[str, Any]:
    """Fit the calibrated judge (`calibration.py`) on the validation examples' raw scores and
    write it beside the weights. Returns the fit report (without per-example predictions).

    `distill_examples`: answers no human judged, each `score` a trusted judge's value on the
    1–5 scale (1 + 4·P(correct)); they join the fit at the weight of
    `cfg.calibration_distill_weights` that cross-validation on the human judgments chooses."""
    # On the device the encoder trained on (a GPU worker's GPU, under the same bf16 autocast as
    # its scorer there), at the precision the served scorer will use on that device.
    val_examples = examples_as_judged(val_examples)
    distill_examples = examples_as_judged(distill_examples)
    device = pick_device(cfg.device)
    model, tokenizer, _meta = load_model(model_dir, device=device)
    model.to(inference_dtype(device, cfg.scoring_precision))

    def raw_scores(examples):
        return predict_scores(model, tokenizer, examples, max_length=cfg.max_length,
                              batch_size=cfg.eval_batch_size, bf16=cfg.bf16,
                              reference_mode=cfg.reference_mode,
                              max_reference_tokens=cfg.max_reference_tokens)

    feature_names = FEATURE_SETS[cfg.calibration_features]
    semantic_encoder = (SemanticEncoder(device=str(device), precision=cfg.scoring_precision)
                        if reads_semantic(feature_names) else None)

    def semantic_of(examples):
        if semantic_encoder is None:
            return None
        return semantic_encoder.features([e.candidate for e in examples],
                                         [e.references for e in examples])

    raw = raw_scores(val_examples)
    augmented = None
    if cfg.calibration_augment:
        made = rewrites([e.candidate for e in val_examples], [e.references for e in val_examples],
                        [e.question or "" for e in val_examples], rules=cfg.calibration_augment,
                        seed=cfg.seed)
        rewritten = [replace(val_examples[r.origin], candidate=r.candidate) for r in made]
        augmented = AugmentedInputs(made, raw_scores(rewritten), cfg.calibration_augment_weight,
                                    semantic_of(rewritten))
    distilled = None
    if distill_examples:
        distill_examples = capped_examples(cfg, distill_examples, cfg.calibration_distill_max)
        distilled = DistilledInputs(
            raw=raw_scores(distill_examples),
            candidates=[e.candidate for e in distill_examples],
            references=[e.references for e in distill_examples],
            questions=[e.question or "" for e in distill_examples],
            probabilities=[(float(e.score) - 1) / 4 for e in distill_examples],
            sources=[e.source for e in distill_examples],
            groups=[e.group or e.question for e in distill_examples],
            weights=cfg.calibration_distill_weights, semantic=semantic_of(distill_examples))
    calibrator, report = fit_calibrator(
        raw, [e.candidate for e in val_examples], [e.references for e in val_examples],
        [e.score for e in val_examples], [e.group or e.question for e in val_examples],
        sources=[e.source for e in val_examples],
        questions=[e.question or "" for e in val_examples], seed=cfg.seed, augmented=augmented,
        feature_names=feature_names, semantic=semantic_of(val_examples), distilled=distilled,
        encoder_rule=cfg.calibration_encoder)
    if calibrator is not None:
        calibrator.save(model_dir)
    report.pop("cv_probabilities", None)
    return report


def train(cfg: TrainConfig, train_examples, val_examples, progress: ProgressCallback | None = None,
          should_cancel: CancelCheck | None = None, mc_examples=None,
          distill_examples=()) -> dict[str, Any]:
    """Train, keep the best epoch, write it to `<output_dir>/model`, return the metrics.
    `distill_examples` (a trusted judge's verdicts, see `calibrate_model`) reach only the
    calibrated judge, never the encoder's training.

    Re-running with the same config and output folder resumes from the last finished epoch.
    """
    if not cfg.output_dir:
        raise ValueError("TrainConfig.output_dir is required")
    model_class = model_for_kind(cfg.kind)  # an unknown kind fails here, before any work
    train_examples = examples_as_judged(capped_examples(cfg, train_examples))
    val_examples = examples_as_judged(capped_examples(cfg, val_examples, cfg.max_val_examples))
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
        if is_better(run[metric], best[metric]):
            best = run
    final = output / "model"
    shutil.rmtree(final, ignore_errors=True)
    shutil.copytree(best["model_dir"], final)
    result = {**best, "model_dir": str(final), "train_examples": len(train_examples),
              "val_examples": len(val_examples)}
    if model_class.calibrates and cfg.calibrate and val_examples:
        if progress:
            progress({"phase": "calibrating", "examples": len(val_examples)})
        result["calibration"] = calibrate_model(cfg, final, val_examples, distill_examples)
    if len(runs) > 1:
        result["learning_rate_search"] = {f"{r['learning_rate']:g}": r[metric] for r in runs}
    return result
