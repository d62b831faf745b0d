"""LERC training speed: `metrics_app.lerc.training.train` (the code the platform's training jobs
run) with the default backbone (the packaged MiniLM-L6) on CPU, regression on EVOUNA NQ open-QA
judgments (correct → 5, incorrect → 1; one example per golden answer), batch 32, paper defaults
otherwise, one epoch.

The number of training examples is capped (600 by default, `BENCH_LERC_EXAMPLES`) so the whole
benchmark run stays under 20 minutes on a 2-core machine; the time of a full epoch over every
EVOUNA example is extrapolated from the measured examples/s. Validation (200 examples) is timed
separately; torch runs with 1 thread (`runner.torch_threads`). `padding_share` is the share of
batched tokens that are padding with the default length-bucketed batches and with a plain
shuffle (both padded per batch), on the same 2,000 training examples. The GPU variant (bert-base,
bf16) runs only where CUDA is available and a local bert-base folder is given in
`BENCH_BERT_BASE` (nothing is downloaded).
"""
from __future__ import annotations

import os
import time

from .runner import Benchmark, Context, Outcome, torch_threads


def evouna_examples(ctx: Context):
    from annotation.importers import evouna
    from metrics_app.lerc.data import LercExample

    examples = []
    # NQ only: TQ's alias lists (14 references per question on average, up to 185) would turn
    # one judged answer into dozens of near-identical training inputs.
    for name in ("evouna_nq.json",):
        for record in evouna.parse(ctx.data_dir / "open_qa_judgments" / name):
            content = record.content
            if record.excluded or not record.judgments or not content.get("candidate"):
                continue
            examples.append(LercExample(
                question=content["question"], references=tuple(content["references"]),
                candidate=content["candidate"], score=float(record.judgments[0].score),
                id=record.external_id))
    return examples


def train_once(ctx: Context, train_examples, val_examples, *, backbone: str = "",
               device: str = "cpu", bf16: bool = False, backbone_config=None) -> dict:
    from metrics_app.lerc.config import TrainConfig
    from metrics_app.lerc.training import train

    cfg = TrainConfig(output_dir=str(ctx.work_dir / f"lerc-{device}"), backbone=backbone,
                      backbone_config=backbone_config, epochs=1, batch_size=32,
                      max_length=512, device=device, bf16=bf16, eval_batch_size=64)
    started = time.perf_counter()
    metrics = train(cfg, train_examples, val_examples)
    total = time.perf_counter() - started
    epoch_s = metrics["epoch_seconds"][0]
    inputs = metrics["train_inputs"]
    return {"train_inputs": inputs, "epoch_train_s": round(epoch_s, 1),
            "examples_per_s": round(inputs / epoch_s, 1), "total_s_with_setup_and_val":
            round(total, 1), "val_pearson": metrics.get("val_pearson"),
            "device": metrics["device"]}


def padding_shares(train_examples) -> dict:
    """Share of the batched tokens that are padding in one epoch, with the default
    length-bucketed batches and with a plain shuffle (dynamic padding in both)."""
    import torch

    from metrics_app.lerc.batching import epoch_batches
    from metrics_app.lerc.config import TrainConfig
    from metrics_app.lerc.model import build_encoder, model_for_kind

    cfg = TrainConfig()
    _encoder, tokenizer = build_encoder("")
    inputs, _targets, _skipped = model_for_kind(cfg.kind).encode_training_set(
        cfg, tokenizer, train_examples)
    real = sum(len(i) for i in inputs)
    shares = {}
    for name, grouped in (("length_bucketed", True), ("plain_shuffle", False)):
        batches = epoch_batches(inputs, cfg.batch_size, torch.Generator().manual_seed(0),
                                group_by_length=grouped)
        padded = sum(max(len(inputs[i]) for i in batch) * len(batch) for batch in batches)
        shares[name] = round(1 - real / padded, 3)
    return shares


def run(ctx: Context) -> Outcome:
    import torch

    torch.set_num_threads(torch_threads())
    examples = evouna_examples(ctx)
    cap = ctx.size(int(os.environ.get("BENCH_LERC_EXAMPLES", "600")), 32)
    n_val = ctx.size(200, 8)
    # A fixed shuffle so the cap takes answers from every system and dataset.
    import random

    random.Random(0).shuffle(examples)
    val, train_examples = examples[:n_val], examples[n_val:n_val + cap]
    tiny = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 64} if ctx.quick else None
    cpu = train_once(ctx, train_examples, val, backbone_config=tiny)
    all_inputs = sum(len(e.references) for e in examples[n_val:])
    outcome = Outcome(inputs={
        "backbone": "tiny random BERT (quick)" if ctx.quick else "MiniLM-L6 (packaged)",
        "training_examples_capped_at": cap, "validation_examples": n_val,
        "batch_size": 32, "epochs": 1, "torch_threads": torch.get_num_threads(),
        "data": "EVOUNA NQ judgments",
        "available_training_examples": len(examples) - n_val,
    })
    outcome.numbers = {"cpu": cpu, "full_epoch_estimate_min": round(
        all_inputs / cpu["examples_per_s"] / 60, 1), "inputs_in_full_epoch": all_inputs,
        # Tokenizing is cheap: measured on 2,000 examples even when training is capped lower.
        "padding_share": padding_shares(examples[n_val:n_val + 2000])}
    outcome.notes.append(
        f"capped at {cap} examples to fit the 20-minute budget; a full epoch over all "
        f"{all_inputs} EVOUNA NQ inputs ≈ {outcome.numbers['full_epoch_estimate_min']} min on "
        "this CPU")
    bert_base = os.environ.get("BENCH_BERT_BASE", "")
    if torch.cuda.is_available() and bert_base:
        outcome.numbers["gpu_bert_base_bf16"] = train_once(
            ctx, examples[n_val:], val, backbone=bert_base, device="cuda", bf16=True)
    else:
        outcome.numbers["gpu_bert_base_bf16"] = (
            "skipped: no GPU" if not torch.cuda.is_available()
            else "skipped: BENCH_BERT_BASE (a local bert-base folder) not set")
        outcome.notes.append(f"GPU variant {outcome.numbers['gpu_bert_base_bf16']}")
    outcome.check("trained one epoch (examples/s reported)", cpu["examples_per_s"] > 0,
                  f"{cpu['examples_per_s']} examples/s, epoch {cpu['epoch_train_s']} s "
                  f"for {cpu['train_inputs']} inputs")
    return outcome


BENCHMARK = Benchmark(
    name="lerc_training", title="LERC training speed (MiniLM, CPU)",
    target="examples/s and time per epoch reported (no target); GPU variant when CUDA exists",
    run=run,
)
