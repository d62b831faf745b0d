"""What a validation pass measures, and which value is better: Pearson against the gold 1–5
score (regression) or the accuracy on preferred answers (pairwise). Plain Python (no torch),
shared by the training loop's epoch choice and the platform's promotion rule."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from annotation.domain.agreement import pearson
from metrics_app.domain.meta_evaluation import pairwise_accuracy

from .config import KIND_PAIRWISE, KIND_REGRESSION

VALIDATION_METRIC = {KIND_REGRESSION: "pearson", KIND_PAIRWISE: "pairwise_accuracy"}


def validation_metric_name(kind: str) -> str:
    return VALIDATION_METRIC[kind]


def is_better(value: float | None, best: float | None) -> bool:
    """A measured value beats none; none beats nothing measured yet."""
    if value is None:
        return best is None
    return best is None or value > best


def pairwise_accuracy_of_labels(scores: Sequence[tuple[float | None, float | None]],
                                labels: Sequence[float]) -> float | None:
    """`meta_evaluation.pairwise_accuracy` (a tie in score counts half) on training pairs,
    whose label is 1 when answer A was preferred, 0 when B was and 0.5 for no preference
    (left out)."""
    return pairwise_accuracy(
        (a, b, "A" if label > 0.5 else "B")
        for (a, b), label in zip(scores, labels, strict=True) if label != 0.5
    )["accuracy"]


def pearson_metrics(predictions: Sequence[float | None], examples: Sequence) -> dict[str, Any]:
    """Pearson overall and, with several datasets, per dataset."""
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


def pairwise_metrics(scores: Sequence[tuple[float | None, float | None]],
                     pairs: Sequence) -> dict[str, Any]:
    return {"pairwise_accuracy": pairwise_accuracy_of_labels(scores, [p.label for p in pairs]),
            "n": len(pairs)}
