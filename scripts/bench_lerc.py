"""LERC generalization protocol on the EVOUNA open-QA judgments (not part of the test suite).

    .venv/bin/python scripts/bench_lerc.py [--runs main,cross,loso,curve] [--epochs 2]

Every run trains the platform's own training code (`metrics_app.lerc.training.train`, the defaults
`train_lerc` uses) on CPU and measures, on judgments it never saw, whether the served judge
(the calibrated probability, "correct" at ≥ 0.5, i.e. 1–5 score ≥ 3) decides correct /
incorrect better than the baselines. Every option and threshold is chosen on validation
judgments; the test judgments are only measured.

Data: ../shared/data/open_qa_judgments/evouna_{nq,tq}.json parsed by the `evouna` importer
(23,499 judged answers of five systems; improper questions left out). Questions are hashed
into test (10%), validation (10%) and training (80%) buckets: no question is in two splits.

Runs:
- `main`: both datasets, unseen questions (the model `train_lerc` would promote);
- `cross`: train and validate on EVOUNA-NQ, test on every EVOUNA-TQ answer, and the reverse;
- `loso`: for each system, train and validate without its answers, test on its answers to the
  test questions (an unseen system on unseen questions);
- `curve`: the main split with 1K, 2K and 5K training judgments (seeded subsets); `main` is
  the point for all of them.

Baselines (threshold tuned on the run's validation judgments): token F1, "reference contained
in the answer", METEOR (needs Java), BERTScore (packaged MiniLM), each the maximum over every
reference alias; plus the lexical judge alone (the calibrator without the encoder's score), to
show what the encoder adds. Numbers: accuracy, Cohen's κ, ROC AUC and Pearson with 95%
bootstrap intervals, on all test answers and on those whose exact match fails.

`--audit N` prints a seeded sample of N validation answers that a trained run's served judge
decides against the human label (question, references, answer, label, P(correct), system), to
read what its errors are (docs/LERC.md, "Why the 5-point margin is out of reach").

Trained runs are kept under var/bench-lerc/<run>/ (a rerun reuses a finished one; `--fresh`
retrains); baseline scores are cached in var/bench-lerc/baselines.json. The summary goes to
var/bench-lerc/results.json and is printed.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")
BASELINES = ("f1", "contains", "meteor", "bertscore")
# BERTScore over every alias is 162,524 encoder pairs (TriviaQA lists about 14 aliases a
# question): about 40 minutes on 2 busy cores. It scores the first 4 aliases (NQ has 1.7 on
# average, so NQ is unaffected); the lexical baselines use every alias.
ALIAS_CAP = {"bertscore": 4}
CALIBRATED_ON = ("validation without exact matches; with and without the encoder's score, "
                 "averaged; question-aware, character and semantic features")
# The judge served before issue 37's semantic inputs and rewrites, refitted on the same encoder
# scores as the "previous LERC" row of every run.
PREVIOUS_JUDGE = {"features": "default", "augment": ()}
CURVE_SIZES = (1000, 2000, 5000)
SERVING_SAMPLE = 1000  # test answers the serving rate is measured on (the served path)


def question_bucket(question: str) -> float:
    from core.text_match import squad_normalize

    digest = hashlib.sha256(f"evouna:{squad_normalize(question)}".encode()).hexdigest()
    return int(digest[:12], 16) / float(16**12)


def load_examples(data: Path) -> list:
    """Every judged EVOUNA answer as a LercExample (id = importer external id, which ends with
    the system; group = the question's hash; score 5 / 1)."""
    from annotation.importers import evouna
    from metrics_app.lerc.data import LercExample

    examples = []
    for name in ("evouna_nq.json", "evouna_tq.json"):
        for record in evouna.parse(data / name):
            if record.excluded or not record.judgments:
                continue
            content = record.content
            examples.append(LercExample(
                question=content["question"], references=tuple(content["references"]),
                candidate=content["candidate"], score=float(record.judgments[0].score),
                id=record.external_id, dataset=record.dataset, source=record.source,
                group=hashlib.sha256(content["question"].encode()).hexdigest()[:16]))
    return examples


def mc_examples_from(path: Path | None) -> list:
    """MOCHA's 3-way multiple-choice pre-training examples from a OneStopQA file (every level's
    paragraph, answer A correct), parsed by the `onestopqa` importer; [] without a path."""
    if path is None:
        return []
    from annotation.importers import onestopqa
    from metrics_app.lerc.data import mc_item_row, mc_pretraining_examples

    rows = [row for record in onestopqa.parse(path)
            if (row := mc_item_row(record.content)) is not None]
    return mc_pretraining_examples(rows, seed=0)


def pretrained_backbone(args) -> str:
    """With --pretrain-mc: the packaged MiniLM after MOCHA's multiple-choice pre-training, done
    once and kept in <out>/pretrained-mc-<examples>-e<epochs>-L<max length>/ for every run (and rerun) to
    start from; without, `--backbone` ("" = the packaged MiniLM)."""
    if args.pretrain_mc is None:
        return args.backbone
    from metrics_app.lerc.config import TrainConfig
    from metrics_app.lerc.training import pretrain_backbone

    mc_examples = mc_examples_from(args.pretrain_mc)[: args.pretrain_max]
    folder = (args.out / f"pretrained-mc-{len(mc_examples)}-e{args.pretrain_epochs}"
              f"-L{args.max_length}")
    if not (folder / "pretrain.json").is_file():
        cfg = TrainConfig(max_length=args.max_length, device=args.device, seed=0,
                          pretrain_epochs=args.pretrain_epochs, progress_every=10)
        summary = pretrain_backbone(cfg, mc_examples, folder, progress=lambda info: print(
            "pretrain", json.dumps(info), file=sys.stderr, flush=True))
        print("pretrained:", json.dumps(summary), file=sys.stderr, flush=True)
    return str(folder)


def split_of(example) -> str:
    bucket = question_bucket(example.question)
    return "test" if bucket < 0.1 else "val" if bucket < 0.2 else "train"


def system_of(example) -> str:
    return example.id.rsplit("/", 1)[-1]


def run_definitions(examples, runs: list[str], curve_sizes=CURVE_SIZES) -> list[dict]:
    """[{name, train, val, test}] for the requested runs."""
    by_split = {"train": [], "val": [], "test": []}
    for example in examples:
        by_split[split_of(example)].append(example)
    defined = []
    if "main" in runs:
        defined.append({"name": "main", "train": by_split["train"], "val": by_split["val"],
                        "test": by_split["test"]})
    if "cross" in runs:
        for source, target in (("evouna_nq", "evouna_tq"), ("evouna_tq", "evouna_nq")):
            defined.append({
                "name": f"cross-{source[-2:]}-to-{target[-2:]}",
                "train": [e for e in by_split["train"] if e.dataset == source],
                "val": [e for e in by_split["val"] if e.dataset == source],
                "test": [e for e in examples if e.dataset == target]})
    if "loso" in runs:
        for system in SYSTEMS:
            defined.append({
                "name": f"loso-{system}",
                "train": [e for e in by_split["train"] if system_of(e) != system],
                "val": [e for e in by_split["val"] if system_of(e) != system],
                "test": [e for e in by_split["test"] if system_of(e) == system]})
    if "curve" in runs:
        for size in curve_sizes:
            defined.append({"name": f"curve-{size}", "train": by_split["train"],
                            "val": by_split["val"], "test": by_split["test"], "cap": size})
    return defined


def baseline_scores(examples, cache: Path, names) -> dict[str, dict[str, float | None]]:
    """{metric: {example id: score}} for every example, computed once and cached."""
    from metrics_app.registry import MetricInput, MetricUnavailable, get_metric

    cached = json.loads(cache.read_text()) if cache.is_file() else {}
    for name in names:
        if name in cached and len(cached[name]) >= len(examples):
            continue
        started = time.monotonic()
        try:
            metric = get_metric(name)
        except MetricUnavailable as exc:
            print(f"{name}: unavailable ({exc})", file=sys.stderr)
            continue
        values = {}
        batch = 2000
        try:
            for start in range(0, len(examples), batch):
                part = examples[start:start + batch]
                scored = metric.score_batch([
                    MetricInput(id=e.id, question=e.question,
                                references=list(e.references[:ALIAS_CAP.get(name)]),
                                candidate=e.candidate) for e in part])
                values.update({e.id: s for e, s in zip(part, scored, strict=True)})
                print(f"{name}: {start + len(part)}/{len(examples)}", file=sys.stderr)
        except MetricUnavailable as exc:
            print(f"{name}: unavailable ({exc})", file=sys.stderr)
            continue
        finally:
            metric.close()
        cached[name] = values
        cached.setdefault("_seconds", {})[name] = round(time.monotonic() - started, 1)
        cache.write_text(json.dumps(cached))
    return cached


def train_run(run: dict, args) -> dict:
    """Train (or reuse) the run's model; returns the training result."""
    from core.text_match import is_exact_match
    from metrics_app.lerc.config import TrainConfig
    from metrics_app.lerc.data import capped_examples
    from metrics_app.lerc.training import calibrate_model, train

    folder = args.out / run["name"]
    result_file = folder / "train-result.json"
    # MOCHA's protocol: candidates equal to a reference are never judged, so never trained on;
    # validation leaves them out too (as `lerc_dataset_build` does), so the calibrated judge is
    # fitted on the answers it will actually judge (the served rule scores exact matches).
    train_examples = [e for e in run["train"] if not is_exact_match(e.candidate, e.references)]
    val_examples = [e for e in run["val"] if not is_exact_match(e.candidate, e.references)]
    if result_file.is_file() and not args.fresh:
        result = json.loads(result_file.read_text())
        if result.get("calibrated_on") != CALIBRATED_ON:
            # Refitted with today's calibrator options (inputs, rewrites), not the stored ones.
            today = TrainConfig()
            cfg = TrainConfig.from_dict({
                **result["config"], "output_dir": str(folder),
                "calibration_features": today.calibration_features,
                "calibration_augment": today.calibration_augment,
                "calibration_augment_weight": today.calibration_augment_weight,
                "calibration_encoder": today.calibration_encoder})
            result["calibration"] = calibrate_model(
                cfg, result["model_dir"], capped_examples(cfg, val_examples, args.max_val))
            result["calibrated_on"] = CALIBRATED_ON
            result_file.write_text(json.dumps(result, indent=2, default=str))
        return result
    cfg = TrainConfig(output_dir=str(folder), epochs=args.epochs, learning_rate=args.lr,
                      max_length=args.max_length, device=args.device, progress_every=50,
                      max_train_examples=run.get("cap") or args.cap,
                      max_val_examples=args.max_val,
                      backbone=args.backbone,
                      freeze_word_embeddings=args.freeze_word_embeddings,
                      frozen_layers=args.frozen_layers, dropout=args.dropout,
                      seed=0)
    last = {"t": 0.0}

    def progress(info):
        if time.monotonic() - last["t"] > 60:
            last["t"] = time.monotonic()
            print(run["name"], json.dumps(info), file=sys.stderr, flush=True)

    started = time.monotonic()
    result = train(cfg, train_examples, val_examples, progress=progress)
    result["calibrated_on"] = CALIBRATED_ON
    result["total_seconds"] = round(time.monotonic() - started, 1)
    result["config"] = cfg.to_dict()
    result_file.write_text(json.dumps(result, indent=2, default=str))
    return result


def evaluate_run(run: dict, result: dict, baselines: dict, args) -> dict:
    from core.text_match import is_exact_match
    from metrics_app.lerc.config import TrainConfig
    from metrics_app.lerc.evaluation import best_threshold, labels_of, paired_by_length
    from metrics_app.lerc.features import FEATURE_SETS, SERVED_FEATURE_SET
    from metrics_app.lerc.inference import LercScorer

    test, val = run["test"], run["val"]
    scorer = LercScorer(result["model_dir"], device=args.device)
    # The serving rate: the served path (`score_details`) on a seeded sample of the test
    # answers; the verdicts on all of them come from the same calibrator on the encoder scores
    # and semantic values computed once for every row below (the same numbers, each computed
    # once instead of once per row).
    timed = capped_validation(test, argparse.Namespace(max_val=SERVING_SAMPLE))
    scorer.score_details(timed[:8])  # loads the semantic encoder out of the clock
    started = time.monotonic()
    scorer.score_details(timed)
    scoring_seconds = time.monotonic() - started
    test_raw = cached_raw_scores(args.out / run["name"], "test", test, scorer)
    details = served_details(scorer, test, test_raw, args)
    non_exact = [i for i, e in enumerate(test) if not is_exact_match(e.candidate, e.references)]
    report = _reporter(test, args)

    out = {"n_train": result.get("train_examples"), "n_val": len(val), "n_test": len(test),
           "calibration": result.get("calibration"),
           "n_test_exact_match_fails": len(non_exact),
           "train_seconds": result.get("total_seconds"),
           "best_epoch": result.get("best_epoch"),
           "scoring_items_per_second": round(len(timed) / scoring_seconds, 1),
           "scoring_sample": len(timed),
           "metrics": {}}
    out["metrics"]["lerc"] = report([d["probability"] for d in details], 0.5)
    hard_val = capped_validation([e for e in val if not is_exact_match(e.candidate, e.references)],
                                 args)
    val_raw = cached_raw_scores(args.out / run["name"], "validation", hard_val, scorer)
    previous = refitted_judge(hard_val, val_raw, test, test_raw,
                              FEATURE_SETS[PREVIOUS_JUDGE["features"]], args)
    if previous is not None:
        out["metrics"]["lerc_previous"] = report(previous, 0.5)
    # Every test answer's P(correct), kept for the efficiency simulation (bench/efficiency.py),
    # which needs a metric's predictions on answers to questions it never saw.
    (args.out / run["name"] / "test-predictions.json").write_text(json.dumps(
        {e.id: round(d["probability"], 6) for e, d in zip(test, details, strict=True)}))
    val_labels = labels_of([e.score for e in val])
    for name in BASELINES:
        if name not in baselines:
            continue
        values = baselines[name]
        threshold = best_threshold([values.get(e.id) for e in val], val_labels)
        out["metrics"][name] = report([values.get(e.id) for e in test], threshold)
        # The served judge against this baseline answer by answer (McNemar, by length): how
        # far a bucket's lead or gap is more than a few answers.
        out.setdefault("paired", {})[name] = paired_by_length(
            [d["probability"] for d in details], 0.5, [values.get(e.id) for e in test],
            threshold, [e.score for e in test], [e.candidate for e in test])
    out["metrics"].update(lexical_judges(run, report, args))
    # The served judge refitted with another calibrator input set, on the same encoder scores
    # (validation scores cached beside the model; nothing retrained).
    for name in (n for n in args.feature_sets
                 if n not in (SERVED_FEATURE_SET, PREVIOUS_JUDGE["features"])):
        probabilities = refitted_judge(hard_val, val_raw, test, test_raw, FEATURE_SETS[name],
                                       args, augment=TrainConfig().calibration_augment)
        if probabilities is not None:
            out["metrics"][f"lerc+{name}"] = report(probabilities, 0.5)
    # The served inputs with the embedded rewrites (not the default: see docs/LERC.md), to
    # show on test what validation decided.
    embedded = refitted_judge(
        hard_val, val_raw, test, test_raw, FEATURE_SETS[SERVED_FEATURE_SET], args,
        augment=("embed",), raw_of=lambda rewritten: cached_raw_scores(
            args.out / run["name"], "rewrites", rewritten, scorer))
    if embedded is not None:
        out["metrics"]["lerc+embed"] = report(embedded, 0.5)
    return out


def served_details(scorer, test, test_raw, args) -> list[dict]:
    """`scorer.score_details(test)` from encoder scores already computed (`test_raw`) and the
    cached semantic values: the served rules (empty answer wrong, exact match right), then the
    model folder's calibrator."""
    from core.text_match import is_exact_match

    calibrator = scorer.calibrator
    rest = [i for i, e in enumerate(test)
            if (e.candidate or "").strip() and not is_exact_match(e.candidate, e.references)]
    chosen = [test[i] for i in rest]
    probabilities = calibrator.probabilities(
        [test_raw[i] for i in rest], [e.candidate for e in chosen],
        [e.references for e in chosen], [e.question for e in chosen],
        semantic_values(chosen, args) if calibrator.reads_semantic else None)
    details = [{"probability": 0.0 if not (e.candidate or "").strip() else 1.0} for e in test]
    for index, probability in zip(rest, probabilities, strict=True):
        details[index]["probability"] = probability
    return details


def capped_validation(examples, args) -> list:
    """The seeded subset `train` calibrates on (`capped_examples`, seed 0, --max-val)."""
    import random

    if not args.max_val or len(examples) <= args.max_val:
        return list(examples)
    chosen = random.Random(0).sample(range(len(examples)), args.max_val)
    return [examples[i] for i in sorted(chosen)]


def cached_raw_scores(folder: Path, split: str, examples, scorer) -> list[float | None]:
    """The encoder's raw scores of `examples`, kept in <run>/raw-<split>.json by example id, so
    trying another calibrator costs no encoder pass."""
    path = folder / f"raw-{split}.json"
    cached = json.loads(path.read_text()) if path.is_file() else {}
    missing = [e for e in examples if e.id not in cached]
    if missing:
        details = scorer.score_details(missing, exact_match_score=None, calibrated=False)
        cached.update({e.id: d["raw"] for e, d in zip(missing, details, strict=True)})
        path.write_text(json.dumps(cached))
    return [cached[e.id] for e in examples]


def semantic_key(example) -> str:
    """The cache key of an example's semantic features: its id and the texts they are computed
    from, so a reading rule that changes an answer or a reference computes them again."""
    texts = json.dumps([example.candidate, list(example.references)])
    return f"{example.id}:{hashlib.sha1(texts.encode()).hexdigest()[:16]}"


def semantic_values(examples, args) -> list[list[float]]:
    """`SemanticEncoder.features` of each example, cached by `semantic_key` in
    <out>/semantic.json (the answers of every run are drawn from the same 23,499)."""
    from metrics_app.lerc.semantic import SemanticEncoder

    path = args.out / "semantic.json"
    if not hasattr(args, "semantic_cache"):
        args.semantic_cache = json.loads(path.read_text()) if path.is_file() else {}
    cache = args.semantic_cache
    missing = [e for e in examples if semantic_key(e) not in cache]
    if missing:
        if getattr(args, "semantic_encoder", None) is None:
            args.semantic_encoder = SemanticEncoder()
        started = time.monotonic()
        for start in range(0, len(missing), 2000):
            part = missing[start:start + 2000]
            rows = args.semantic_encoder.features([e.candidate for e in part],
                                                  [e.references for e in part])
            cache.update({semantic_key(e): [round(v, 6) for v in row]
                          for e, row in zip(part, rows, strict=True)})
            print(f"semantic: {start + len(part)}/{len(missing)}", file=sys.stderr, flush=True)
        path.write_text(json.dumps(cache))
        print(f"semantic features of {len(missing)} answers in "
              f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return [cache[semantic_key(e)] for e in examples]


def refitted_judge(val, val_raw, test, test_raw, feature_names, args,
                   augment=(), raw_of=None) -> list[float] | None:
    """P(correct) of the test answers from a calibrator refitted on the validation answers'
    raw scores with `feature_names` and `augment` rewrites (encoder kept or not by the same
    held-out-system CV); the served rules (empty answer wrong, exact match right) as
    `LercScorer` applies them. Rewrites get their encoder score from `raw_of`."""
    from core.text_match import is_exact_match
    from metrics_app.lerc.calibration import fit_calibrator
    from metrics_app.lerc.features import reads_semantic

    semantic = reads_semantic(feature_names)
    augmented = augmented_inputs(val, augment, 0.5, semantic=semantic, args=args,
                                 raw_of=raw_of)
    calibrator, _report = fit_calibrator(
        val_raw, [e.candidate for e in val], [e.references for e in val],
        [e.score for e in val], [e.group for e in val], sources=[e.source for e in val],
        questions=[e.question for e in val], feature_names=feature_names,
        augmented=augmented, semantic=semantic_values(val, args) if semantic else None)
    if calibrator is None:
        return None
    probabilities = calibrator.probabilities(
        [0.0 if r is None else r for r in test_raw], [e.candidate for e in test],
        [e.references for e in test], [e.question for e in test],
        semantic_values(test, args) if semantic else None)
    return [0.0 if not e.candidate.strip() else 1.0
            if is_exact_match(e.candidate, e.references) else p
            for e, p in zip(test, probabilities, strict=True)]


def lexical_judges(run: dict, report, args) -> dict:
    """The calibrated judge without the encoder ("lexical judge alone"), once per calibrator
    input set of --calibrator-features: {"lexical_judge" or "lexical_judge+<set>": report}.
    Needs no trained model, so `--lexical-only` can run it on every run in seconds."""
    from core.text_match import is_exact_match
    from metrics_app.lerc.calibration import fit_calibrator
    from metrics_app.lerc.features import FEATURE_SETS, reads_semantic

    test, val = run["test"], run["val"]
    hard_val = [e for e in val if not is_exact_match(e.candidate, e.references)]
    rows = {}
    for name in args.feature_sets:
        semantic = reads_semantic(FEATURE_SETS[name])
        lexical, _ = fit_calibrator([0.0] * len(hard_val), [e.candidate for e in hard_val],
                                    [e.references for e in hard_val],
                                    [e.score for e in hard_val], [e.group for e in hard_val],
                                    sources=[system_of(e) for e in hard_val],
                                    questions=[e.question for e in hard_val], use_encoder=False,
                                    feature_names=FEATURE_SETS[name],
                                    semantic=semantic_values(hard_val, args) if semantic
                                    else None)
        if lexical is None:
            continue
        probabilities = lexical.probabilities([0.0] * len(test), [e.candidate for e in test],
                                              [e.references for e in test],
                                              [e.question for e in test],
                                              semantic_values(test, args) if semantic else None)
        probabilities = [1.0 if is_exact_match(e.candidate, e.references) else p
                         for e, p in zip(test, probabilities, strict=True)]
        rows["lexical_judge" if name == "default" else f"lexical_judge+{name}"] = report(
            probabilities, 0.5)
    return rows


def augmentation_configs(text: str) -> list[tuple[tuple[str, ...], float]]:
    """"none;embed@0.5;embed,alias,number@1" → [((), 0), (("embed",), 0.5), ...]."""
    configs = []
    for part in (p.strip() for p in text.split(";") if p.strip()):
        rules, _, weight = part.partition("@")
        chosen = () if rules in ("", "none") else tuple(r for r in rules.split(",") if r)
        configs.append((chosen, float(weight or 0.5) if chosen else 0.0))
    return configs


def screen_rules(rules: tuple[str, ...]) -> tuple[str, ...]:
    """The rewrites a screened option is measured on: its own, or every rule's for "none"
    (fitted at weight 0: the judge without augmentation, measured on the same rewrites)."""
    from metrics_app.lerc.augmentation import RULES

    return rules or RULES


def augmented_inputs(examples, rules, weight, *, semantic: bool = False, args=None,
                     raw_of=None):
    """The calibrator's `AugmentedInputs` for `examples` (rewritten by `rules`; the encoder's
    score of each rewrite from `raw_of(rewritten examples)`, else none; when `semantic`, the
    semantic values of each), or None."""
    from dataclasses import replace

    from metrics_app.lerc.augmentation import rewrites
    from metrics_app.lerc.calibration import AugmentedInputs

    if not rules:
        return None
    made = rewrites([e.candidate for e in examples], [e.references for e in examples],
                    [e.question for e in examples], rules=rules)
    rewritten = [replace(examples[r.origin], candidate=r.candidate,
                         id=f"{examples[r.origin].id}#{r.rule}") for r in made]
    values = semantic_values(rewritten, args) if semantic else None
    raw = raw_of(rewritten) if raw_of is not None else [None] * len(made)
    return AugmentedInputs(made, raw, weight, values)


def screen_run(run: dict, args) -> dict:
    """`--screen`: validation only. The lexical judge fitted with each `--augment` option (and
    each `--calibrator-features` set) on the run's validation answers whose exact match fails;
    its held-out-system cross-validated accuracy and false-negative rate, overall and by answer
    length, and its held-out accuracy on the folds' own rewrites. No test answer is read."""
    from core.text_match import is_exact_match
    from metrics_app.lerc.calibration import fit_calibrator
    from metrics_app.lerc.evaluation import decision_report, report_by_length
    from metrics_app.lerc.features import FEATURE_SETS, reads_semantic

    val = [e for e in run["val"] if not is_exact_match(e.candidate, e.references)]
    gold = [e.score for e in val]
    rows = {}
    for feature_set in args.feature_sets:
        semantic = reads_semantic(FEATURE_SETS[feature_set])
        for rules, weight in augmentation_configs(args.augment):
            _calibrator, fit = fit_calibrator(
                [0.0] * len(val), [e.candidate for e in val], [e.references for e in val], gold,
                [e.group for e in val], sources=[system_of(e) for e in val],
                questions=[e.question for e in val], use_encoder=False,
                feature_names=FEATURE_SETS[feature_set],
                augmented=augmented_inputs(val, screen_rules(rules), weight, semantic=semantic,
                                           args=args),
                semantic=semantic_values(val, args) if semantic else None)
            cv = fit.get("cv_probabilities")
            if cv is None:
                continue
            name = f"{feature_set}/{'+'.join(rules) or 'none'}" + (f"@{weight:g}" if rules else "")
            rows[name] = {
                "all": decision_report(cv, gold, 0.5, bootstrap=0),
                "by_length": report_by_length(cv, gold, [e.candidate for e in val], 0.5,
                                              bootstrap=0),
                "rewrites": fit.get("cv_accuracy_rewrites"), "c": fit.get("c")}
    return {"n_val": len(val), "screen": rows}


ENCODER_SCREEN = {"with the encoder": {"use_encoder": True},
                  "without it": {"use_encoder": False},
                  "choose": {"encoder_rule": "choose"}, "average": {"encoder_rule": "average"}}


def encoder_screen_run(run: dict, args) -> dict:
    """`--encoder-screen`: validation only, on a trained run's cached encoder scores. How the
    calibrated judge should use the encoder's score (`ENCODER_SCREEN`), each way fitted by
    `fit_calibrator` on all but one fold of the calibration answers (the held-out-system folds,
    question groups with fewer than three systems) and measured on that fold: the rule's own
    choices are made inside each fit, so "choose" is not flattered by choosing on the answers
    it is measured on. No test answer is read."""
    import numpy as np
    from sklearn.metrics import log_loss

    from core.text_match import is_exact_match
    from metrics_app.lerc.calibration import CORRECT_AT, fit_calibrator, group_folds, held_out_keys
    from metrics_app.lerc.features import FEATURE_SETS, SERVED_FEATURE_SET

    raw_file = args.out / run["name"] / "raw-validation.json"
    if not raw_file.is_file():
        raise SystemExit(f"{run['name']}: not trained in {args.out}; run the protocol first")
    val = capped_validation([e for e in run["val"]
                             if not is_exact_match(e.candidate, e.references)], args)
    cached = json.loads(raw_file.read_text())
    raw = [cached[e.id] for e in val]
    semantic = semantic_values(val, args)
    labels = np.array([e.score >= CORRECT_AT for e in val], dtype=int)
    sources = [system_of(e) for e in val]
    keys, _by_system = held_out_keys(sources, [e.group for e in val])
    splits, _folds = group_folds(np.zeros((len(val), 1)), labels, keys)
    predictions = {name: np.zeros(len(val)) for name in ENCODER_SCREEN}
    for fit_rows, held_out in splits:
        fit, predict = [val[i] for i in fit_rows], [val[i] for i in held_out]
        for name, options in ENCODER_SCREEN.items():
            calibrator, _report = fit_calibrator(
                [raw[i] for i in fit_rows], [e.candidate for e in fit],
                [e.references for e in fit], [e.score for e in fit], [e.group for e in fit],
                sources=[sources[i] for i in fit_rows], questions=[e.question for e in fit],
                feature_names=FEATURE_SETS[SERVED_FEATURE_SET],
                semantic=[semantic[i] for i in fit_rows], **options)
            predictions[name][held_out] = calibrator.probabilities(
                [raw[i] for i in held_out], [e.candidate for e in predict],
                [e.references for e in predict], [e.question for e in predict],
                [semantic[i] for i in held_out])
    return {"n_val": len(val), "folds": len(splits), "rows": {
        name: {"errors": int(((p >= 0.5) != labels).sum()),
               "accuracy": round(float(((p >= 0.5) == labels).mean()), 4),
               "log_loss": round(float(log_loss(labels, np.clip(p, 1e-6, 1 - 1e-6))), 4)}
        for name, p in predictions.items()}}


def encoder_screen_markdown(screens: dict) -> str:
    names = list(ENCODER_SCREEN)
    lines = ["| run | answers | " + " | ".join(f"{n}: errors (log loss)" for n in names) + " |",
             "| --- | --- | " + " | ".join("---" for _ in names) + " |"]
    totals = dict.fromkeys(names, 0)
    for run_name, screen in screens.items():
        rows = screen["rows"]
        for name in names:
            totals[name] += rows[name]["errors"]
        lines.append(f"| {run_name} | {screen['n_val']} | " + " | ".join(
            f"{rows[n]['errors']} ({rows[n]['log_loss']:.4f})" for n in names) + " |")
    lines.append("| all runs | " + str(sum(s["n_val"] for s in screens.values())) + " | "
                 + " | ".join(str(totals[n]) for n in names) + " |")
    return "\n".join(lines)


def _numbers_in_words(text: str) -> str:
    from metrics_app.lerc.augmentation import numbers_in_words

    return numbers_in_words(text)


def _numbers_in_digits(text: str) -> str:
    from metrics_app.lerc.augmentation import numbers_in_digits

    return numbers_in_digits(text)


def _dates_reordered(text: str) -> str:
    from metrics_app.lerc.augmentation import dates_reordered

    return dates_reordered(text)


def _thousands_regrouped(text: str) -> str:
    from metrics_app.lerc.augmentation import thousands_regrouped

    return thousands_regrouped(text)


# `--format-probe`: rewrites that change how an answer, its question or its references are
# written and never what they say. A judge that reads meaning decides each answer alike; one
# that keys on surface form flips, and would on a new dataset's conventions.
FORMAT_REWRITES = {
    "trailing period": lambda e: dataclasses.replace(
        e, candidate=e.candidate[:-1] if e.candidate.endswith(".") else e.candidate + "."),
    "lower case": lambda e: dataclasses.replace(e, candidate=e.candidate.lower()),
    "white space": lambda e: dataclasses.replace(e, candidate=f"\n{e.candidate} \n"),
    "'Answer:' prefix": lambda e: dataclasses.replace(e, candidate=f"Answer: {e.candidate}"),
    "'A:' prefix": lambda e: dataclasses.replace(e, candidate=f"A: {e.candidate}"),
    "'Final answer:' prefix": lambda e: dataclasses.replace(
        e, candidate=f"Final answer: {e.candidate}"),
    "markdown bold": lambda e: dataclasses.replace(e, candidate=f"**{e.candidate}**"),
    "in quotes": lambda e: dataclasses.replace(e, candidate=f'"{e.candidate}"'),
    "in curly quotes": lambda e: dataclasses.replace(
        e, candidate=f"\u201c{e.candidate}\u201d"),
    "curly apostrophes": lambda e: dataclasses.replace(
        e, candidate=e.candidate.replace("'", "\u2019")),
    "en dashes": lambda e: dataclasses.replace(e, candidate=e.candidate.replace("-", "\u2013")),
    "non-breaking spaces": lambda e: dataclasses.replace(
        e, candidate=e.candidate.replace(" ", "\u00a0")),
    "references typeset": lambda e: dataclasses.replace(e, references=tuple(
        r.replace("'", "\u2019").replace("-", "\u2013") for r in e.references)),
    "numbers in words": lambda e: dataclasses.replace(
        e, candidate=_numbers_in_words(e.candidate)),
    "numbers in digits": lambda e: dataclasses.replace(
        e, candidate=_numbers_in_digits(e.candidate)),
    "references' numbers in digits": lambda e: dataclasses.replace(
        e, references=tuple(map(_numbers_in_digits, e.references))),
    "dates reordered": lambda e: dataclasses.replace(
        e, candidate=_dates_reordered(e.candidate)),
    "thousands regrouped": lambda e: dataclasses.replace(
        e, candidate=_thousands_regrouped(e.candidate)),
    "references reversed": lambda e: dataclasses.replace(
        e, references=tuple(reversed(e.references))),
    "question mark": lambda e: dataclasses.replace(
        e, question=e.question[:-1] if e.question.endswith("?") else e.question + "?"),
    "question capitalized": lambda e: dataclasses.replace(
        e, question=e.question[:1].upper() + e.question[1:]),
}


def probe_rewrites(names: str) -> dict:
    """The rewrites of FORMAT_REWRITES named (comma-separated), all when none is; an unknown
    name is refused, naming the ones there are."""
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    if unknown := [name for name in wanted if name not in FORMAT_REWRITES]:
        raise SystemExit(f"--rewrites: no rewrite named {', '.join(map(repr, unknown))}; "
                         f"there are {', '.join(map(repr, FORMAT_REWRITES))}")
    return {name: FORMAT_REWRITES[name] for name in wanted or FORMAT_REWRITES}


def format_probe_run(run: dict, args) -> dict:
    """`--format-probe`: validation only, on a trained run's served judge: each of the run's
    calibration answers (validation, exact match failing) as written and under each
    `FORMAT_REWRITES` rule; how many answers the rule changes, how many decisions (P >= 0.5)
    flip and the accuracy either way."""
    from core.text_match import is_exact_match
    from metrics_app.lerc.calibration import CORRECT_AT
    from metrics_app.lerc.inference import LercScorer

    result_file = args.out / run["name"] / "train-result.json"
    if not result_file.is_file():
        raise SystemExit(f"{run['name']}: not trained in {args.out}; run the protocol first")
    scorer = LercScorer(json.loads(result_file.read_text())["model_dir"], device=args.device)
    val = capped_validation([e for e in run["val"]
                             if not is_exact_match(e.candidate, e.references)], args)
    labels = [e.score >= CORRECT_AT for e in val]

    def decisions(examples) -> list[bool]:
        return [d["probability"] >= 0.5 for d in scorer.score_details(examples)]

    def accuracy(decided) -> float:
        return round(sum(d == y for d, y in zip(decided, labels, strict=True)) / len(val), 4)

    base = decisions(val)
    rows = {}
    for name, rewrite in probe_rewrites(args.rewrites).items():
        rewritten = [rewrite(e) for e in val]
        # Only an answer the rewrite changed can flip: the others keep their decision as
        # written, and only the changed ones are scored (a date rewrite touches a few dozen).
        changed = [i for i, (e, r) in enumerate(zip(val, rewritten, strict=True)) if e != r]
        decided = list(base)
        for i, decision in zip(changed, decisions([rewritten[i] for i in changed]), strict=True):
            decided[i] = decision
        rows[name] = {"flips": sum(a != b for a, b in zip(decided, base, strict=True)),
                      "changed": len(changed), "accuracy": accuracy(decided)}
    return {"n_val": len(val), "accuracy": accuracy(base), "rows": rows}


def format_probe_markdown(screens: dict) -> str:
    names = list(next(iter(screens.values()))["rows"]) if screens else []
    lines = ["| run | answers | accuracy as written | " + " | ".join(
        f"{n}: flips of changed (accuracy)" for n in names) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in names) + " |"]
    for run_name, screen in screens.items():
        rows = screen["rows"]
        lines.append(f"| {run_name} | {screen['n_val']} | {screen['accuracy']:.4f} | " + " | ".join(
            f"{rows[n]['flips']} of {rows[n]['changed']} ({rows[n]['accuracy']:.4f})"
            for n in names) + " |")
    return "\n".join(lines)


def distill_teachers(val, labelled_ids: set, args) -> dict[str, list[float]]:
    """Teachers for `--distill-screen`, each a verdict (1/0) per validation answer: simulated
    judges that agree with the human label at each `--teacher-accuracy` (wrong at random, the
    best case for a judge of that accuracy: a real judge's errors cluster), and token F1 at
    the threshold that fits the labelled answers best (a real, weaker judge)."""
    import random

    from core.text_match import token_f1
    from metrics_app.domain.meta_evaluation import best_threshold
    from metrics_app.lerc.calibration import CORRECT_AT

    human = [int(e.score >= CORRECT_AT) for e in val]
    teachers = {}
    for accuracy in args.teacher_accuracy:
        rng = random.Random(f"teacher:{accuracy}")
        teachers[f"simulated {accuracy:g}"] = [
            float(y if rng.random() < accuracy else 1 - y) for y in human]
    f1 = [max(token_f1(e.candidate, r) for r in e.references) for e in val]
    known = [i for i, e in enumerate(val) if e.id in labelled_ids]
    threshold = best_threshold([f1[i] for i in known], [human[i] for i in known])
    teachers[f"token F1 ≥ {threshold:.2f}"] = [float(v >= threshold) for v in f1]
    return teachers


def distill_screen_run(run: dict, args) -> dict:
    """`--distill-screen`: validation only. Whole question groups of the run's validation
    answers (exact match failing) keep their human labels, `--distill-labelled` answers in all;
    the rest play a project's unjudged items, labelled by each teacher (`distill_teachers`).
    Per teacher: the weight that cross-validation on the labelled answers chooses
    (`TrainConfig.calibration_distill_weights`), the CV accuracy at each weight, and the fitted
    judge's accuracy on the unjudged answers' human labels, which no fit reads, against the
    judge fitted on the labelled answers alone. No test answer is read."""
    import random

    import numpy as np

    from core.text_match import is_exact_match
    from metrics_app.lerc.calibration import CORRECT_AT, DistilledInputs, fit_calibrator
    from metrics_app.lerc.config import TrainConfig
    from metrics_app.lerc.features import FEATURE_SETS, SERVED_FEATURE_SET

    val = [e for e in run["val"] if not is_exact_match(e.candidate, e.references)]
    semantic = semantic_values(val, args)
    groups = sorted({e.group for e in val})
    random.Random(0).shuffle(groups)
    by_group: dict[str, list[int]] = {}
    for i, e in enumerate(val):
        by_group.setdefault(e.group, []).append(i)
    labelled: list[int] = []
    for group in groups:
        if len(labelled) >= args.distill_labelled:
            break
        labelled += by_group[group]
    labelled_set = set(labelled)
    free = [i for i in range(len(val)) if i not in labelled_set]
    features = FEATURE_SETS[SERVED_FEATURE_SET]

    def inputs(indices):
        return ([0.0] * len(indices), [val[i].candidate for i in indices],
                [val[i].references for i in indices])

    def fit(distilled=None):
        calibrator, report = fit_calibrator(
            *inputs(labelled), [val[i].score for i in labelled], [val[i].group for i in labelled],
            sources=[system_of(val[i]) for i in labelled],
            questions=[val[i].question for i in labelled], use_encoder=False,
            feature_names=features, semantic=[semantic[i] for i in labelled],
            distilled=distilled)
        probabilities = np.asarray(calibrator.probabilities(
            *inputs(free), [val[i].question for i in free], [semantic[i] for i in free]))
        human = np.asarray([val[i].score >= CORRECT_AT for i in free])
        return report, float(((probabilities >= 0.5) == human).mean())

    alone_report, alone_accuracy = fit()
    rows = {"human labels only": {"cv_accuracy": alone_report.get("cv_accuracy"),
                                  "unjudged_accuracy": alone_accuracy}}
    weights = TrainConfig().calibration_distill_weights
    teachers = distill_teachers(val, {val[i].id for i in labelled}, args)
    for name, verdicts in teachers.items():
        started = time.monotonic()
        report, accuracy = fit(DistilledInputs(
            *inputs(free), [val[i].question for i in free], [verdicts[i] for i in free],
            [system_of(val[i]) for i in free], [val[i].group for i in free], weights,
            [semantic[i] for i in free]))
        human = [int(val[i].score >= CORRECT_AT) for i in free]
        rows[name] = {
            "teacher_accuracy": float(np.mean([verdicts[i] == h for i, h in zip(free, human,
                                                                                 strict=True)])),
            "weight": report["distillation"]["weight"],
            "cv_accuracy_by_weight": report["distillation"]["cv_accuracy_by_weight"],
            "cv_log_loss_by_weight": report["distillation"]["cv_log_loss_by_weight"],
            "unjudged_accuracy": accuracy, "seconds": round(time.monotonic() - started, 1)}
        print(f"  {name}: {rows[name]}", file=sys.stderr, flush=True)
    return {"labelled": len(labelled), "unjudged": len(free), "rows": rows}


def distill_screen_markdown(screens: dict) -> str:
    lines = []
    for run_name, screen in screens.items():
        lines += [f"### {run_name}: {screen['labelled']} human-labelled validation answers, "
                  f"{screen['unjudged']} unjudged", "",
                  "| teacher | its accuracy on the unjudged | weight chosen | CV accuracy by "
                  "weight (labelled) | judge's accuracy on the unjudged |",
                  "| --- | --- | --- | --- | --- |"]
        for name, row in screen["rows"].items():
            by_weight = row.get("cv_accuracy_by_weight") or {}
            lines.append(
                f"| {name} | " + (f"{row['teacher_accuracy']:.3f}" if "teacher_accuracy" in row
                                  else "–")
                + f" | {row.get('weight', '–')} | "
                + (", ".join(f"{w}: {a:.3f}" for w, a in by_weight.items()) or
                   f"{row['cv_accuracy']:.3f}")
                + f" | {row['unjudged_accuracy']:.3f} |")
        lines.append("")
    return "\n".join(lines)


def screen_markdown(screens: dict) -> str:
    """One table per run: validation CV accuracy / FNR overall and by length, rewrites."""
    from metrics_app.lerc.evaluation import LENGTH_BUCKETS

    lines = []
    for run_name, screen in screens.items():
        lines += [f"### {run_name} (validation, exact match fails: {screen['n_val']})", "",
                  "| lexical judge | all: acc / FNR | " + " | ".join(
                      f"{b}: acc / FNR" for b, _ in LENGTH_BUCKETS) + " | rewrites acc |",
                  "| --- " * (3 + len(LENGTH_BUCKETS)) + "|"]
        for name, row in screen["screen"].items():
            def cell(part):
                acc, fnr = part.get("accuracy"), part.get("false_negative_rate")
                return "–" if acc is None else f"{acc:.3f} / " + (
                    "–" if fnr is None else f"{fnr:.3f}")
            rewrites = row.get("rewrites") or {}
            lines.append(f"| {name} | {cell(row['all'])} | " + " | ".join(
                cell(row["by_length"][b]) for b, _ in LENGTH_BUCKETS) + " | " + (
                ", ".join(f"{k} {v:.3f}" for k, v in rewrites.items()) or "–") + " |")
        lines.append("")
    return "\n".join(lines)


def evaluate_lexical_run(run: dict, baselines: dict, args) -> dict:
    """`--lexical-only`: the baselines and the lexical judges of a run, no encoder."""
    from core.text_match import is_exact_match
    from metrics_app.lerc.evaluation import best_threshold, labels_of

    test, val = run["test"], run["val"]
    report = _reporter(test, args)
    out = {"n_train": len(run["train"]), "n_val": len(val), "n_test": len(test),
           "n_test_exact_match_fails": sum(not is_exact_match(e.candidate, e.references)
                                           for e in test),
           "lexical_only": True, "metrics": {}}
    val_labels = labels_of([e.score for e in val])
    for name in BASELINES:
        if name in baselines:
            values = baselines[name]
            threshold = best_threshold([values.get(e.id) for e in val], val_labels)
            out["metrics"][name] = report([values.get(e.id) for e in test], threshold)
    out["metrics"].update(lexical_judges(run, report, args))
    return out


def _reporter(test, args):
    """report(scores, threshold): all answers, those whose exact match fails, by length."""
    from core.text_match import is_exact_match
    from metrics_app.lerc.evaluation import decision_report, report_by_length

    gold = [e.score for e in test]
    non_exact = [i for i, e in enumerate(test) if not is_exact_match(e.candidate, e.references)]
    candidates = [e.candidate for e in test]

    def report(scores, threshold):
        return {
            "all": decision_report(scores, gold, threshold, bootstrap=args.bootstrap),
            "exact_match_fails": decision_report([scores[i] for i in non_exact],
                                                 [gold[i] for i in non_exact], threshold,
                                                 bootstrap=args.bootstrap),
            # Where a judge loses: accuracy and false-negative rate by answer length.
            "by_length": report_by_length(scores, gold, candidates, threshold,
                                          bootstrap=args.bootstrap),
        }
    return report


def audit_text(run: dict, result: dict, size: int, device: str = "cpu") -> str:
    """The served judge's errors on the run's validation answers whose exact match fails (the
    answers it is fitted on and judges; exact matches are scored by rule), as plain text."""
    from core.text_match import is_exact_match
    from metrics_app.lerc.evaluation import CORRECT_AT, judge_errors
    from metrics_app.lerc.inference import LercScorer

    val = [e for e in run["val"] if not is_exact_match(e.candidate, e.references)]
    details = LercScorer(result["model_dir"], device=device).score_details(val)
    count, sample = judge_errors(val, [d["probability"] for d in details], size)
    lines = [f"{run['name']}: the served judge decides {count} of {len(val)} validation answers "
             f"(exact match failing) against the human label; a seeded {len(sample)} of them:"]
    for number, (example, probability) in enumerate(sample, 1):
        label = "correct" if example.score >= CORRECT_AT else "wrong"
        lines += ["", f"{number}. [{system_of(example)}] human: {label}, judge P(correct) "
                      f"{probability:.2f}", f"   Q: {example.question}",
                  f"   references: {' / '.join(example.references)[:200]}",
                  f"   answer: {' '.join(example.candidate.split())[:400]}"]
    return "\n".join(lines)


def _best_baseline(metrics: dict) -> str:
    """The baseline with the highest test accuracy (each at its validation threshold)."""
    present = [name for name in BASELINES if name in metrics]
    return max(present, key=lambda name: metrics[name]["all"]["accuracy"])


def summary_markdown(summary: dict) -> str:
    """One row per run: the served judge against the best baseline of that run."""
    lines = ["| run | test answers | LERC accuracy | best baseline accuracy | LERC κ | "
             "best baseline κ | gain in accuracy (points) | encoder used |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run_name, run in (summary.get("runs") or {}).items():
        m = run["metrics"]
        if "lerc" not in m:  # a --lexical-only run
            continue
        best = _best_baseline(m)
        lerc, base = m["lerc"], m[best]

        def pair(row, key):  # all answers (those whose exact match fails)
            return f"{row['all'][key]:.3f} ({row['exact_match_fails'][key]:.3f})"

        gain = 100 * (lerc["all"]["accuracy"] - base["all"]["accuracy"])
        gain_hard = 100 * (lerc["exact_match_fails"]["accuracy"]
                           - base["exact_match_fails"]["accuracy"])
        lines.append(
            f"| {run_name} | {run['n_test']} ({run['n_test_exact_match_fails']}) | "
            f"{pair(lerc, 'accuracy')} | {best} {pair(base, 'accuracy')} | "
            f"{pair(lerc, 'kappa')} | {best} {pair(base, 'kappa')} | "
            f"{gain:+.1f} ({gain_hard:+.1f}) | {_encoder_use(run)} |")
    return "\n".join(lines)


def curve_markdown(summary: dict) -> str:
    """Accuracy against the number of training judgments (the curve runs and `main`)."""
    runs = summary.get("runs") or {}
    points = sorted([run for name, run in runs.items()
                     if (name == "main" or name.startswith("curve-")) and "lerc" in run["metrics"]],
                    key=lambda run: run["n_train"])
    lines = ["| training judgments | LERC accuracy | LERC κ | encoder used | "
             "lexical judge alone | F1 | METEOR |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for run in points:
        m = run["metrics"]

        def acc(name, m=m):
            return f"{m[name]['all']['accuracy']:.3f}" if name in m else "–"

        lines.append(f"| {run['n_train']} | {acc('lerc')} | {m['lerc']['all']['kappa']:.3f} | "
                     f"{_encoder_use(run)} | {acc('lexical_judge')} | {acc('f1')} | "
                     f"{acc('meteor')} |")
    return "\n".join(lines)


def _encoder_use(run: dict) -> str:
    """How the served judge used the encoder's score: "averaged" (with and without it), or
    "yes" / "no" (a judge fitted by the "choose" rule, or before the outcome was recorded)."""
    calibration = run.get("calibration") or {}
    if calibration.get("encoder") == "averaged":
        return "averaged"
    return "yes" if calibration.get("uses_encoder") else "no"


def _accuracy_fnr_cell(part: dict) -> str:
    """"accuracy / false-negative rate" of one length bucket; "–" where it has no accuracy (an
    empty bucket, or one too small to report)."""
    accuracy, fnr = part.get("accuracy"), part.get("false_negative_rate")
    if accuracy is None:
        return "–"
    return f"{accuracy:.3f} / " + ("–" if fnr is None else f"{fnr:.3f}")


def length_markdown(run: dict, previous: dict | None = None) -> str:
    """Accuracy and false-negative rate (correct answers judged incorrect) by answer length,
    for the served judge, every baseline and, where given, the previous run's judge."""
    from metrics_app.lerc.evaluation import LENGTH_BUCKETS

    buckets = [label for label, _ in LENGTH_BUCKETS]
    rows = [(name, run["metrics"][name]) for name in _metric_names(run)
            if "by_length" in run["metrics"].get(name, {})]
    if previous and "by_length" in previous.get("metrics", {}).get("lerc", {}):
        rows.insert(1, ("previous LERC", previous["metrics"]["lerc"]))
    if not rows:
        return ""
    counts = rows[0][1]["by_length"]
    lines = ["| metric | " + " | ".join(f"{b} words (n={counts[b]['n']}): acc / FNR"
                                         for b in buckets) + " |",
             "| --- | " + " | ".join("---" for _ in buckets) + " |"]
    for name, row in rows:
        cells = [_accuracy_fnr_cell(row["by_length"][bucket]) for bucket in buckets]
        lines.append(f"| {_label(name)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def long_answer_fnr(row: dict) -> float | None:
    """The false-negative rate on answers over 8 words (the 9-20 and >20 buckets together),
    from each bucket's rate and its share of correct answers."""
    positives = missed = 0.0
    for bucket in ("9-20", ">20"):
        part = row["by_length"][bucket]
        if not part.get("n") or part.get("false_negative_rate") is None:
            continue
        bucket_positives = part["n"] * part["positive_rate"]
        positives += bucket_positives
        missed += part["false_negative_rate"] * bucket_positives
    return missed / positives if positives else None


def bucket_comparison_markdown(summary: dict, previous: dict | None = None) -> str:
    """Per run and length bucket: the served judge, the previous version's (the served judge
    of `previous`, an earlier results.json, where given), the judge with lexical inputs and the
    baseline with the highest accuracy in that bucket (bold where the served judge is ahead of
    it); then how many run-buckets the served judge leads, ties and trails."""
    from metrics_app.lerc.evaluation import LENGTH_BUCKETS

    buckets = [label for label, _ in LENGTH_BUCKETS]
    cell = _accuracy_fnr_cell

    lines = ["| run | judge | " + " | ".join(f"{b} words" for b in buckets)
             + " | FNR > 8 words |", "| --- | --- | " + " | ".join("---" for _ in buckets)
             + " | --- |"]
    ahead, tied, behind = [], [], []
    for run_name, run in (summary.get("runs") or {}).items():
        metrics = run["metrics"]
        if "by_length" not in metrics.get("lerc", {}):
            continue
        served, best_cells = [], []
        for bucket in buckets:
            part = metrics["lerc"]["by_length"][bucket]
            if not part.get("n") or part.get("accuracy") is None:
                served.append("–")
                best_cells.append("–")
                continue
            best = max((n for n in BASELINES if "by_length" in metrics.get(n, {})
                        and metrics[n]["by_length"][bucket].get("accuracy") is not None),
                       key=lambda n, b=bucket: metrics[n]["by_length"][b]["accuracy"])
            best_part = metrics[best]["by_length"][bucket]
            lead = round(part["accuracy"] - best_part["accuracy"], 9)
            where = f"{run_name} {bucket}"
            paired = (run.get("paired") or {}).get(best, {}).get(bucket)
            (ahead if lead > 0 else tied if lead == 0 else behind).append(
                (where, part["accuracy"], best, best_part["accuracy"], part["n"], paired))
            served.append(f"**{cell(part)}**" if lead > 0 else cell(part))
            best_cells.append(f"{best} {cell(best_part)} (n={part['n']})")
        rows = [("served", served, long_answer_fnr(metrics["lerc"]))]
        earlier = (((previous or {}).get("runs") or {}).get(run_name) or {}).get("metrics", {})
        for judge, row in (("previous version", earlier.get("lerc", {})),
                           ("lexical inputs", metrics.get("lerc_previous", {}))):
            if "by_length" in row:
                rows.append((judge, [cell(row["by_length"][b]) for b in buckets],
                             long_answer_fnr(row)))
        rows.append(("best baseline", best_cells, None))
        for judge, cells, fnr in rows:
            lines.append(f"| {run_name} | {judge} | " + " | ".join(cells) + " | "
                         + ("" if judge == "best baseline" else
                            "–" if fnr is None else f"{fnr:.3f}") + " |")
    lines += ["", f"(Served judge ahead of the bucket's best baseline in {len(ahead)} "
              f"run-buckets, tied in {len(tied)}, behind in {len(behind)}"
              + ("" if not behind else ": " + "; ".join(
                  f"{w} {a:.3f} against {n} {b:.3f}, n = {k}{_paired_note(p)}"
                  for w, a, n, b, k, p in behind))
              + ".)"]
    significant = [(w, p) for w, *_rest, p in ahead + behind if p and p["p_value"] < 0.05]
    if any(p for *_rest, p in ahead + tied + behind):
        lines.append(
            f"(Answer by answer, McNemar's exact test: {len(significant)} of "
            f"{len(ahead) + len(behind)} leads and gaps at p < 0.05"
            + ("" if not significant else ": " + "; ".join(
                f"{w}{_paired_note(p)}" for w, p in significant)) + ".)")
    return "\n".join(lines)


def _paired_note(paired: dict | None) -> str:
    """" (judge alone right on 3 answers, the baseline alone on 5: p = 0.73)", or "" without a
    paired comparison."""
    if not paired:
        return ""
    return (f" (judge alone right on {paired['judge_only']} answers, the baseline alone on "
            f"{paired['other_only']}: p = {paired['p_value']:.2g})")


def _metric_names(run: dict) -> list[str]:
    """The run's judges (served, refitted with other input sets, lexical) then baselines."""
    names = list(run["metrics"])
    judges = sorted((n for n in names if n.startswith("lerc")), key=lambda n: (n != "lerc", n))
    lexical = sorted((n for n in names if n.startswith("lexical_judge")),
                     key=lambda n: (n != "lexical_judge", n))
    return judges + lexical + [n for n in BASELINES if n in names]


def _label(name: str) -> str:
    label = {"lerc": "**LERC (served judge)**", "lexical_judge": "lexical judge alone",
             "lerc_previous": "previous LERC (lexical inputs, no rewrites)",
             "contains": "reference in answer"}.get(name)
    if label:
        return label
    if name == "lerc+embed":
        return "LERC fitted with embedded rewrites too"
    if name.startswith("lerc+"):
        return f"LERC, calibrator inputs {name[5:]}"
    if name.startswith("lexical_judge+"):
        return f"lexical judge alone, inputs {name[14:]}"
    return name


def markdown(summary: dict, previous: dict | None = None) -> str:
    """The results as the tables of docs/LERC.md."""
    lines = ["## Summary", "",
             "Accuracy and Cohen's κ of the served judge (\"correct\" at P ≥ 0.5) against the "
             "best baseline of each run (threshold tuned on that run's validation judgments); "
             "in brackets, on the answers whose exact match fails.", "",
             summary_markdown(summary), "", "### By answer length: the served judge, the "
             "previous version, the judge with lexical inputs and the best baseline of each "
             "bucket", "",
             "Accuracy / false-negative rate on every test answer of each run. \"previous "
             "version\": the served judge of the earlier results given (`--previous`); "
             "\"lexical inputs\": the judge of before 2026-11-28 (lexical calibrator inputs "
             "only), refitted on this run's encoder scores. The best baseline is the one with "
             "the highest accuracy in that bucket (each at its validation threshold); n is the "
             "bucket's size. **Bold**: the served judge is ahead of that baseline.", "",
             bucket_comparison_markdown(summary, previous), "",
             "## Learning curve", "",
             "The main split (unseen questions, both datasets) with seeded subsets of the "
             "training judgments; validation and test are the same for every point.", "",
             curve_markdown(summary), "", "## Every run", ""]
    for run_name, run in (summary.get("runs") or {}).items():
        names = _metric_names(run)
        lines += [f"### {run_name}: train {run['n_train']}, validation {run['n_val']}, test "
                  f"{run['n_test']} ({run['n_test_exact_match_fails']} where exact match fails)",
                  "", "| metric | accuracy | κ | ROC AUC | Pearson | accuracy, EM fails | "
                  "κ, EM fails |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for name in names:
            row = run["metrics"].get(name)
            if not row:
                continue
            cells = []
            for part, key in (("all", "accuracy"), ("all", "kappa"), ("all", "roc_auc"),
                              ("all", "pearson"), ("exact_match_fails", "accuracy"),
                              ("exact_match_fails", "kappa")):
                value, ci = row[part].get(key), row[part].get(f"{key}_ci")
                cells.append("–" if value is None else f"{value:.3f}" + (
                    f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and key in ("accuracy", "kappa")
                    else ""))
            lines.append(f"| {_label(name)} | " + " | ".join(cells) + " |")
        by_length = length_markdown(run, ((previous or {}).get("runs") or {}).get(run_name))
        if by_length:
            lines += ["", "By answer length (accuracy / false-negative rate):", "", by_length]
        if not run.get("lexical_only"):
            lines += ["", f"Training {run.get('train_seconds')} s (best epoch "
                      f"{run.get('best_epoch')}); scoring {run.get('scoring_items_per_second')} "
                      "answers/s."]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path,
                        default=REPO.parent / "shared" / "data" / "open_qa_judgments")
    parser.add_argument("--out", type=Path, default=REPO / "var" / "bench-lerc")
    parser.add_argument("--runs", default="main,cross,loso,curve")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--max-val", type=int, default=2000,
                        help="validation judgments used per run (epoch choice, calibration)")
    parser.add_argument("--curve-sizes", default=",".join(map(str, CURVE_SIZES)),
                        help="training judgments of the learning-curve runs")
    parser.add_argument("--cap", type=int, default=None,
                        help="at most this many training judgments per run (seeded subset)")
    parser.add_argument("--pretrain-mc", type=Path, default=None,
                        help="OneStopQA JSON: MOCHA's multiple-choice pre-training first")
    parser.add_argument("--pretrain-epochs", type=int, default=1)
    parser.add_argument("--pretrain-max", type=int, default=None,
                        help="at most this many pre-training examples (a seeded subset)")
    parser.add_argument("--baselines", default=",".join(BASELINES))
    parser.add_argument("--calibrator-features", default="default,semantic",
                        help="calibrator input sets (metrics_app.lerc.features.FEATURE_SETS), "
                             "comma-separated: the lexical judge is fitted with each, and a "
                             "trained run's judge is refitted with each besides 'default' on "
                             "its cached encoder scores (rows 'lerc+<set>', "
                             "'lexical_judge+<set>')")
    parser.add_argument("--lexical-only", action="store_true",
                        help="no encoder: baselines and lexical judges only, every run in "
                             "seconds; results in <out>/lexical-results.json")
    parser.add_argument("--augment", default="none",
                        help="with --screen: calibrator augmentation options to compare, "
                             "';'-separated, each 'rule,rule@weight' (rules of "
                             "metrics_app.lerc.augmentation.RULES) or 'none'")
    parser.add_argument("--screen", action="store_true",
                        help="validation only: the lexical judge with each --augment option "
                             "and --calibrator-features set, by answer length; no test answer "
                             "read; results in <out>/screen.json")
    parser.add_argument("--encoder-screen", action="store_true",
                        help="validation only, on trained runs: the calibrated judge with the "
                             "encoder's score, without it, and by each rule of "
                             "CALIBRATION_ENCODER_RULES, each measured on held-out systems; "
                             "results in <out>/encoder-screen.json")
    parser.add_argument("--format-probe", action="store_true",
                        help="validation only, on trained runs: how many of the served judge's "
                             "decisions flip when an answer, its question or its references are "
                             "written differently (FORMAT_REWRITES); results in "
                             "<out>/format-probe.json")
    parser.add_argument("--rewrites", default="",
                        help="with --format-probe: only these rewrites of FORMAT_REWRITES "
                             "(comma-separated names; default all)")
    parser.add_argument("--only", default="",
                        help="of the --runs, only these run names (comma-separated)")
    parser.add_argument("--distill-screen", action="store_true",
                        help="validation only: distillation from simulated and real teachers "
                             "onto the lexical judge, on answers whose human labels the fit "
                             "never reads; results in <out>/distill-screen.json")
    parser.add_argument("--distill-labelled", type=int, default=300,
                        help="with --distill-screen: validation answers that keep their human "
                             "label (whole question groups)")
    parser.add_argument("--teacher-accuracy", default="0.95,0.85,0.75",
                        help="with --distill-screen: accuracies of the simulated teachers")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--freeze-word-embeddings", action=argparse.BooleanOptionalAction,
                        default=None,
                        help="train with the backbone's word-embedding matrix frozen "
                             "(default: the model kind's, frozen for the regression judge)")
    parser.add_argument("--frozen-layers", type=int, default=0,
                        help="keep the embeddings and this many of the backbone's lowest "
                             "layers as pre-trained (default 0: train every layer)")
    parser.add_argument("--dropout", type=float, default=None,
                        help="every dropout of the backbone and head at this rate (default: "
                             "the model kind's, none for the regression judge)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu",
                        help="where the encoders train and score: cpu (the 2-core protocol), "
                             "cuda on a GPU machine (bf16 autocast), or auto")
    parser.add_argument("--backbone", default="",
                        help="a local Hugging Face model folder to fine-tune instead of the "
                             "packaged MiniLM (e.g. an MPNet sentence encoder)")
    parser.add_argument("--fresh", action="store_true", help="retrain finished runs")
    parser.add_argument("--audit", type=int, default=0, metavar="N",
                        help="print N of each trained run's validation errors and stop")
    parser.add_argument("--markdown", action="store_true",
                        help="print the tables of the saved results and stop")
    parser.add_argument("--previous", type=Path, default=None,
                        help="with --markdown: an earlier results.json whose judge is shown "
                             "beside this one in the by-length tables")
    args = parser.parse_args()
    args.feature_sets = [name for name in args.calibrator_features.split(",") if name]
    args.teacher_accuracy = [float(a) for a in args.teacher_accuracy.split(",") if a]
    if args.rewrites and not args.format_probe:
        parser.error("--rewrites chooses the rewrites of --format-probe; add --format-probe")
    probe_rewrites(args.rewrites)  # an unknown name is refused before anything is loaded
    results_file = args.out / ("lexical-results.json" if args.lexical_only else "results.json")
    if args.markdown:
        previous = json.loads(args.previous.read_text()) if args.previous else None
        print(markdown(json.loads(results_file.read_text()), previous))
        return

    import torch

    from metrics_app.lerc.data import examples_as_judged

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    examples = load_examples(args.data)
    args.backbone = pretrained_backbone(args)
    runs = run_definitions(examples, args.runs.split(","),
                           [int(n) for n in args.curve_sizes.split(",")])
    # The splits and the baselines read the answers as written (a question's split is fixed by
    # its text as the dataset wrote it; `baseline_scores(examples)` below); every path of the
    # judge reads them as a served version does (`examples_as_judged`: plain typography, no
    # answer label), so its training, calibration, screens and test rows are the served ones.
    as_judged = dict(zip(map(id, examples), examples_as_judged(examples), strict=True))
    for run in runs:
        for split in ("train", "val", "test"):
            run[split] = [as_judged[id(e)] for e in run[split]]
    if args.only:
        runs = [run for run in runs if run["name"] in args.only.split(",")]
    if args.screen or args.distill_screen or args.encoder_screen or args.format_probe:
        if args.screen:
            label, measure, file_name, tables = "screen", screen_run, "screen.json", screen_markdown
        elif args.format_probe:
            label, measure, file_name, tables = ("format probe", format_probe_run,
                                                 "format-probe.json", format_probe_markdown)
        elif args.encoder_screen:
            label, measure, file_name, tables = ("encoder screen", encoder_screen_run,
                                                 "encoder-screen.json", encoder_screen_markdown)
        else:
            label, measure, file_name, tables = ("distillation screen", distill_screen_run,
                                                 "distill-screen.json", distill_screen_markdown)
        screens = {}
        for run in runs:
            print(f"== {label} {run['name']}", file=sys.stderr, flush=True)
            screens[run["name"]] = measure(run, args)
            (args.out / file_name).write_text(json.dumps(screens, indent=2))
        print(tables(screens))
        return
    if args.audit:
        # Reads trained runs only: no baselines, no training, results.json untouched.
        for run in runs:
            if not (args.out / run["name"] / "train-result.json").is_file():
                print(f"{run['name']}: not trained in {args.out}; run the protocol first",
                      file=sys.stderr)
                continue
            print(audit_text(run, train_run(run, args), args.audit, args.device), "\n")
        return
    baselines = baseline_scores(examples, args.out / "baselines.json",
                                [b for b in args.baselines.split(",") if b])
    summary = json.loads(results_file.read_text()) if results_file.is_file() else {}
    summary["data"] = {"judged_answers": len(examples),
                       "by_split": {s: sum(split_of(e) == s for e in examples)
                                    for s in ("train", "val", "test")}}
    summary["baseline_seconds"] = baselines.get("_seconds", {})
    for run in runs:
        print(f"== {run['name']}: train {len(run['train'])}, val {len(run['val'])}, "
              f"test {len(run['test'])}", file=sys.stderr, flush=True)
        if args.lexical_only:
            summary.setdefault("runs", {})[run["name"]] = evaluate_lexical_run(run, baselines, args)
            results_file.write_text(json.dumps(summary, indent=2, default=str))
            continue
        result = train_run(run, args)
        # Read the cache again: another process may have added a slow baseline meanwhile.
        baselines = json.loads((args.out / "baselines.json").read_text())
        summary.setdefault("runs", {})[run["name"]] = evaluate_run(run, result, baselines, args)
        results_file.write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
