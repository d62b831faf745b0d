"""How well a score decides "correct / incorrect" against human labels. Pure (numpy, scipy,
scikit-learn), no Django: the LERC protocol benchmark and model cards both use it.

A metric is judged the way answer-correctness papers report it: accuracy and Cohen's κ at a
threshold chosen on validation judgments (never on the ones measured), ROC AUC (threshold-free)
and Pearson with the 1–5 gold, each with a percentile bootstrap interval over items.
"""
from __future__ import annotations

from collections.abc import Sequence

from annotation.domain.agreement import pearson
from annotation.domain.likert_scale import FIVE_POINT_TOP, likert_correct_at
from metrics_app.domain.meta_evaluation import best_threshold

__all__ = ["CORRECT_AT", "LENGTH_BUCKETS", "baseline_scores", "best_threshold",
           "compare_with_baselines", "decision_report", "judge_errors", "labels_of",
           "length_bucket_of", "paired_by_length", "report_by_length"]

# Gold is on 1-5 (MOCHA / EVOUNA; a project on another scale is mapped onto it before it
# gets here): correct at that scale's cut, 3.
CORRECT_AT = likert_correct_at(FIVE_POINT_TOP)
# Answer length in words: (label, longest length in the bucket). Short answers are where
# lexical metrics already work; long ones that hold the right entity in a sentence, or qualify
# it, are where a small judge loses most, so the protocol reports each bucket apart.
LENGTH_BUCKETS: tuple[tuple[str, float], ...] = (
    ("<=3", 3), ("4-8", 8), ("9-20", 20), (">20", float("inf")))


def labels_of(gold: Sequence[float], correct_at: float = CORRECT_AT) -> list[int]:
    return [int(float(g) >= correct_at) for g in gold]


def judge_errors(examples: Sequence, probabilities: Sequence[float | None], size: int,
                 seed: int = 0) -> tuple[int, list]:
    """(how many `examples` the judge decides against their human label, a seeded sample of
    `size` of those as (example, probability) in input order), for reading what a judge gets
    wrong. Correct means probability ≥ 0.5 and gold ≥ `CORRECT_AT`; unscored examples (None)
    are left out, as `decision_report` leaves them out."""
    import random

    wrong = [(example, probability) for example, probability, label
             in zip(examples, probabilities, labels_of([e.score for e in examples]), strict=True)
             if probability is not None and (probability >= 0.5) != bool(label)]
    chosen = sorted(random.Random(seed).sample(range(len(wrong)), min(size, len(wrong))))
    return len(wrong), [wrong[i] for i in chosen]


def _decision(scores, labels, gold, threshold) -> dict:
    import numpy as np
    from sklearn.metrics import cohen_kappa_score, f1_score, roc_auc_score

    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    predicted = (s >= threshold).astype(int)
    result = {"accuracy": float((predicted == y).mean())}
    # One and the same label on both sides: κ is 0/0, undefined (scikit-learn's NaN), not 0.
    result["kappa"] = (float(cohen_kappa_score(y, predicted))
                       if len(set(y.tolist()) | set(predicted.tolist())) > 1 else None)
    result["f1"] = float(f1_score(y, predicted, zero_division=0.0))
    result["roc_auc"] = float(roc_auc_score(y, s)) if len(set(y.tolist())) > 1 else None
    result["pearson"] = pearson(s, np.asarray(gold, dtype=float))
    # Strictness and leniency apart: the share of correct answers judged incorrect, and of
    # incorrect answers judged correct (None where a class is absent).
    positives, negatives = int(y.sum()), int(len(y) - y.sum())
    result["false_negative_rate"] = (float(((predicted == 0) & (y == 1)).sum() / positives)
                                     if positives else None)
    result["false_positive_rate"] = (float(((predicted == 1) & (y == 0)).sum() / negatives)
                                     if negatives else None)
    return result


def decision_report(scores: Sequence[float | None], gold: Sequence[float], threshold: float, *,
                    bootstrap: int = 1000, seed: int = 0, correct_at: float = CORRECT_AT
                    ) -> dict:
    """Accuracy, κ, F1 (of "correct"), ROC AUC and Pearson of `scores` against `gold` at
    `threshold`, with 95% percentile bootstrap intervals (`<name>_ci`) over items. Inputs the
    metric could not score (None) are left out and counted in `unscored`."""
    import numpy as np

    kept = [(float(s), float(g)) for s, g in zip(scores, gold, strict=True) if s is not None]
    result: dict = {"n": len(kept), "unscored": len(scores) - len(kept),
                    "threshold": threshold}
    if len(kept) < 2:
        return result
    s = np.array([k[0] for k in kept])
    g = np.array([k[1] for k in kept])
    y = (g >= correct_at).astype(int)
    result.update(_decision(s, y, g, threshold))
    result["positive_rate"] = float(y.mean())
    if bootstrap:
        rng = np.random.default_rng(seed)
        draws: dict[str, list[float]] = {}
        for _ in range(bootstrap):
            rows = rng.integers(0, len(s), len(s))
            for name, value in _decision(s[rows], y[rows], g[rows], threshold).items():
                if value is not None:
                    draws.setdefault(name, []).append(value)
        for name, values in draws.items():
            if len(values) >= bootstrap // 2:
                low, high = np.percentile(values, [2.5, 97.5])
                result[f"{name}_ci"] = [float(low), float(high)]
    return result


def length_bucket_of(candidate: str) -> str:
    """The `LENGTH_BUCKETS` label of an answer, by its whitespace-separated words."""
    words = len(candidate.split())
    return next(label for label, longest in LENGTH_BUCKETS if words <= longest)


def report_by_length(scores: Sequence[float | None], gold: Sequence[float],
                     candidates: Sequence[str], threshold: float, *, bootstrap: int = 200,
                     seed: int = 0, correct_at: float = CORRECT_AT) -> dict[str, dict]:
    """`decision_report` within each answer-length bucket: {bucket label: report}, every
    bucket present (an empty one reports n = 0)."""
    rows: dict[str, list[int]] = {label: [] for label, _ in LENGTH_BUCKETS}
    for index, candidate in enumerate(candidates):
        rows[length_bucket_of(candidate)].append(index)
    return {label: decision_report([scores[i] for i in indices], [gold[i] for i in indices],
                                   threshold, bootstrap=bootstrap, seed=seed,
                                   correct_at=correct_at)
            for label, indices in rows.items()}


def paired_by_length(judge: Sequence[float | None], judge_threshold: float,
                     other: Sequence[float | None], other_threshold: float,
                     gold: Sequence[float], candidates: Sequence[str], *,
                     correct_at: float = CORRECT_AT) -> dict[str, dict]:
    """Two deciders on the same answers, within each answer-length bucket: how many answers
    only `judge` decides right (`judge_only`), how many only `other` (`other_only`), and the
    exact McNemar p-value (two-sided binomial test on those discordant answers) of the
    difference, over the answers both scored. A one-answer lead in a 24-answer bucket and a
    30-answer lead in a 3,000-answer one are different claims; this says which."""
    from scipy.stats import binomtest

    counts = {label: [0, 0, 0] for label, _ in LENGTH_BUCKETS}  # n, judge_only, other_only
    for a, b, g, candidate in zip(judge, other, gold, candidates, strict=True):
        if a is None or b is None:
            continue
        label = float(g) >= correct_at
        judge_right = (float(a) >= judge_threshold) == label
        other_right = (float(b) >= other_threshold) == label
        bucket = counts[length_bucket_of(candidate)]
        bucket[0] += 1
        bucket[1] += judge_right and not other_right
        bucket[2] += other_right and not judge_right
    return {label: {"n": n, "judge_only": only_judge, "other_only": only_other,
                    "p_value": (binomtest(only_judge, only_judge + only_other, 0.5).pvalue
                                if only_judge + only_other else 1.0)}
            for label, (n, only_judge, only_other) in counts.items()}


def baseline_scores(names: Sequence[str], examples) -> dict[str, list[float | None] | str]:
    """{metric: scores in example order, or the reason it could not run} for registered
    baseline metrics (max over references)."""
    from ..registry import MetricInput, MetricUnavailable, get_metric

    inputs = [MetricInput(id=str(i), question=e.question, references=list(e.references),
                          candidate=e.candidate, passage=e.passage)
              for i, e in enumerate(examples)]
    results: dict[str, list[float | None] | str] = {}
    for name in names:
        try:
            metric = get_metric(name)
            try:
                results[name] = metric.score_batch(inputs)
            finally:
                metric.close()
        except MetricUnavailable as exc:
            results[name] = f"unavailable: {exc}"
        except KeyError as exc:  # a misspelt name in QAJ_LERC_PROMOTION_BASELINES
            results[name] = f"unknown metric: {exc.args[0]}"
    return results


def compare_with_baselines(judge_val: Sequence[float | None], judge_test: Sequence[float | None],
                           val, test, *, baselines: Sequence[str], judge_threshold: float = CORRECT_AT,
                           bootstrap: int = 200) -> dict:
    """The judge's 1–5 scores and each baseline, on validation and test examples (LercExample
    with gold `score`): every baseline's threshold is tuned on validation; the judge keeps its
    own (≥ 3). {"validation": {name: report}, "test": {...}, "thresholds": {...}}."""
    val_gold = [e.score for e in val]
    test_gold = [e.score for e in test]
    val_scores = baseline_scores(baselines, val) if val else {}
    test_scores = baseline_scores(baselines, test) if test else {}
    out: dict = {"validation": {}, "test": {}, "thresholds": {"lerc": judge_threshold},
                 "unavailable": {}}
    if val:
        out["validation"]["lerc"] = decision_report(judge_val, val_gold, judge_threshold,
                                                    bootstrap=bootstrap)
    if test:
        out["test"]["lerc"] = decision_report(judge_test, test_gold, judge_threshold,
                                              bootstrap=bootstrap)
    for name in baselines:
        scored = val_scores.get(name)
        if isinstance(scored, str) or (not val and isinstance(test_scores.get(name), str)):
            out["unavailable"][name] = scored if isinstance(scored, str) else test_scores[name]
            continue
        threshold = best_threshold(scored, labels_of(val_gold)) if val else 0.5
        out["thresholds"][name] = threshold
        if val:
            out["validation"][name] = decision_report(scored, val_gold, threshold,
                                                      bootstrap=bootstrap)
        if test and not isinstance(test_scores.get(name), str):
            out["test"][name] = decision_report(test_scores[name], test_gold, threshold,
                                                bootstrap=bootstrap)
    return out
