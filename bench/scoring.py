"""Metric scoring on real EVOUNA answers (NQ + TQ; question, `/`-split golden answers,
candidate).

1. `manage.py score --metric f1,bleu1,rougeL,meteor` on 10,000 candidates (JSONL in, JSONL out,
   as a researcher runs it; METEOR runs the packaged Java jar). Items/s reported.

Per-metric throughput against each package's own batch call, and LERC batched vs one at a
time, are in `bench/metric_throughput.py` (issue #19), which uses `time_lerc` below.
"""
from __future__ import annotations

import json
import time

from .runner import Benchmark, Context, Outcome, torch_threads

METRICS = "f1,bleu1,rougeL,meteor"
# Quick mode (the smoke test) leaves out METEOR: its Java process alone takes 10-60 s to start
# on a busy 2-core host, which says nothing about the plumbing.
QUICK_METRICS = "f1,bleu1,rougeL"


def evouna_rows(ctx: Context, names=("evouna_nq.json", "evouna_tq.json")) -> list[dict]:
    from annotation.importers import evouna

    rows = []
    for name in names:
        for record in evouna.parse(ctx.data_dir / "open_qa_judgments" / name):
            content = record.content
            if record.excluded or not content.get("candidate") or not content.get("references"):
                continue
            rows.append({"id": record.external_id, "question": content["question"],
                         "references": content["references"], "candidate": content["candidate"]})
    return rows


def time_score_command(ctx: Context, rows: list[dict], metrics: str) -> tuple[float, dict]:
    from django.core.management import call_command

    source, target = ctx.work_dir / "score-in.jsonl", ctx.work_dir / "score-out.jsonl"
    with source.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    started = time.perf_counter()
    call_command("score", "--metric", metrics, "--input", str(source), "--output", str(target),
                 "--no-progress", stderr=open("/dev/null", "w"))
    seconds = time.perf_counter() - started
    scored = {name: 0 for name in metrics.split(",")}
    with target.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            for name in scored:
                scored[name] += row.get(name) is not None
    return seconds, scored


def time_lerc(rows: list[dict], *, batch_size: int = 64, threads: int | None = None) -> dict:
    """LERC inference on `rows` (1.8 references each on NQ; LERC scores each) with the
    packaged MiniLM encoder and a regression head (untrained weights score as fast as trained
    ones): length-sorted dynamic batches of `batch_size` (`metrics_app.lerc.inference`, the
    default) vs the same function one input at a time in input order, as the original LERC
    scripts did. Same inputs, same model, `torch.inference_mode`; the two score lists must
    agree. torch runs with `threads` intra-op threads (default `runner.torch_threads`)."""
    import torch

    from metrics_app.lerc.data import LercExample
    from metrics_app.lerc.inference import predict_scores
    from metrics_app.lerc.model import build_encoder, model_class

    torch.manual_seed(0)
    torch.set_num_threads(threads or torch_threads())
    encoder, tokenizer = build_encoder("")
    model = model_class("LercRegressor")(encoder)
    examples = [LercExample(question=r["question"], references=tuple(r["references"]),
                            candidate=r["candidate"]) for r in rows]
    kwargs = dict(max_length=512, bf16=False)
    predict_scores(model, tokenizer, examples[:8], batch_size=8, **kwargs)  # warm-up
    started = time.perf_counter()
    batched = predict_scores(model, tokenizer, examples, batch_size=batch_size,
                             length_sorted=True, **kwargs)
    batched_s = time.perf_counter() - started
    started = time.perf_counter()
    single = predict_scores(model, tokenizer, examples, batch_size=1, length_sorted=False,
                            **kwargs)
    single_s = time.perf_counter() - started
    pairs = [(a, b) for a, b in zip(batched, single, strict=True) if a is not None]
    return {
        "batched_s": round(batched_s, 2), "one_at_a_time_s": round(single_s, 2),
        "batched_items_per_s": round(len(rows) / batched_s, 1),
        "one_at_a_time_items_per_s": round(len(rows) / single_s, 1),
        "speedup": round(single_s / batched_s, 2),
        "inputs_encoded": sum(len(r["references"]) for r in rows),
        "max_abs_score_difference": max(abs(a - b) for a, b in pairs) if pairs else None,
        "batch_size": batch_size, "torch_threads": torch.get_num_threads(),
    }


def time_served_judge(rows: list[dict], folder, *, threads: int | None = None) -> dict:
    """The served judge as `score --metric lerc` runs it (`LercScorer.score_details`): the
    packaged MiniLM with an untrained head (as fast as a trained one), the default max length,
    and a calibrator over the served input set (`features.SERVED_FEATURE_SET`: the lexical
    features and the semantic encoder's) — once with the encoder's score weighted (the
    validation choice kept it) and once without (it then never runs). Answers/s of each, the
    rule-decided answers (empty, exact match) included as in serving, at the served precision
    (QAJ_LERC_PRECISION's default, "auto": bf16 weights on a CPU with AMX) and, when that is
    not fp32, at fp32 too, with the largest difference between the two probabilities."""
    import torch

    from metrics_app.lerc.calibration import Calibrator
    from metrics_app.lerc.config import TrainConfig
    from metrics_app.lerc.data import LercExample
    from metrics_app.lerc.device import inference_dtype
    from metrics_app.lerc.features import FEATURE_SETS, SERVED_FEATURE_SET
    from metrics_app.lerc.inference import LercScorer
    from metrics_app.lerc.model import build_model, save_model

    torch.manual_seed(0)
    torch.set_num_threads(threads or torch_threads())
    cfg = TrainConfig(max_length=256)
    model, tokenizer = build_model(cfg, torch.device("cpu"))
    save_model(model, tokenizer, folder, train_config=cfg.to_dict())
    names = ["raw_score", *FEATURE_SETS[SERVED_FEATURE_SET]]
    examples = [LercExample(question=r["question"], references=tuple(r["references"]),
                            candidate=r["candidate"]) for r in rows]
    served = "bf16" if inference_dtype(torch.device("cpu")) == torch.bfloat16 else "fp32"
    numbers = {"answers": len(examples), "calibrator_inputs": SERVED_FEATURE_SET,
               "torch_threads": torch.get_num_threads(), "precision": served}
    runs = [("", "auto")] + ([("fp32_", "fp32")] if served != "fp32" else [])
    probabilities = {}
    for prefix, precision in runs:
        for label, encoder_weight in (("with_encoder", 1.0), ("without_encoder", 0.0)):
            Calibrator(input_names=names, mean=[0.0] * len(names), scale=[1.0] * len(names),
                       coef=[encoder_weight] + [0.1] * (len(names) - 1), intercept=0.0,
                       raw_fill=0.0, c=1.0).save(folder)
            scorer = LercScorer(folder, device="cpu", precision=precision)
            scorer.score_details(examples[:8])  # loads the semantic encoder out of the clock
            started = time.perf_counter()
            details = scorer.score_details(examples)
            seconds = time.perf_counter() - started
            numbers[prefix + label] = {"seconds": round(seconds, 2),
                                       "answers_per_s": round(len(examples) / seconds, 1),
                                       "judged": sum(d["probability"] is not None
                                                     for d in details)}
            probabilities[prefix + label] = [d["probability"] for d in details]
    if served != "fp32":
        numbers["max_abs_probability_difference_to_fp32"] = max(
            abs(a - b) for label in ("with_encoder", "without_encoder")
            for a, b in zip(probabilities[label], probabilities["fp32_" + label], strict=True))
    return numbers


def run(ctx: Context) -> Outcome:
    rows = evouna_rows(ctx)
    n_score = ctx.size(10_000, 40)
    score_rows = rows[:n_score]
    metrics = QUICK_METRICS if ctx.quick else METRICS
    score_s, scored = time_score_command(ctx, score_rows, metrics)
    outcome = Outcome(inputs={"score_candidates": len(score_rows), "metrics": metrics,
                              "data": "EVOUNA NQ+TQ answers"})
    outcome.numbers = {"score_command_s": round(score_s, 2),
                       "score_items_per_s": round(len(score_rows) / score_s, 1),
                       "scored_per_metric": scored}
    outcome.check("score: every metric scored every candidate",
                  all(v == len(score_rows) for v in scored.values()),
                  ", ".join(f"{k} {v}" for k, v in scored.items()))
    return outcome


BENCHMARK = Benchmark(
    name="scoring", title="Metric scoring (the score command on 10,000 candidates)",
    target="items/s reported; every metric scores every candidate", run=run,
)
