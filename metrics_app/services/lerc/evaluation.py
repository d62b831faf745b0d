"""Scoring with a model version and its validation/test numbers (Pearson overall and per
dataset, accuracy at 3, kappa, AUC, F1; pairwise accuracy for A/B; minimal pairs)."""
from __future__ import annotations

from typing import Any

from django.conf import settings

from annotation.domain.agreement import pearson
from annotation.models import Item, Project, TaskKind
from metrics_app.domain.meta_evaluation import (
    correlation_undefined_reason,
    minimal_pair_accuracy,
    minimal_pairs,
)
from metrics_app.lerc.config import KIND_PAIRWISE, KIND_REGRESSION
from metrics_app.lerc.evaluation import CORRECT_AT, decision_report
from metrics_app.lerc.validation import pairwise_accuracy_of_labels, validation_metric_name
from metrics_app.models import ModelKind, ModelVersion
from metrics_app.services.lerc_artifacts import ModelFilesUnusable, artifact_local_path

from .datasets import is_held_out, item_example, text_group


def lerc_minimal_pair_accuracy(scorer, projects: list[Project], trained_on: list | None = None
                               ) -> dict[str, Any]:
    """How often the model scores a minimal pair's better candidate higher
    (`meta_evaluation.minimal_pairs` and `minimal_pair_accuracy`: a tie counts half); with
    `trained_on` (the training examples) only pairs whose both items are held out (validation
    or test, see is_held_out) count: a pair the model was trained on measures memory."""
    train_ids = {e.id for e in trained_on or []}
    train_groups = {text_group(e.group) for e in trained_on or []}
    # Practice items and items removed from the study are no data at any LERC door.
    items = [i for i in Item.objects.filter(project__in=projects, project__kind=TaskKind.LIKERT,
                                            is_practice=False, excluded=False)
             .order_by("id") if "minimal_pair" in (i.metadata or {})
             and (trained_on is None or is_held_out(i, train_ids, train_groups))]
    index = {item.pk: position for position, item in enumerate(items)}
    pairs = minimal_pairs({"id": i.pk, "metadata": i.metadata, "gold": i.gold} for i in items)
    if not pairs:
        return {"accuracy": None, "n": 0}
    scores = scorer.score([item_example(ModelKind.REGRESSION, item, 0.0, item.project)
                           for item in items])
    result = minimal_pair_accuracy(
        (scores[index[better["id"]]], scores[index[worse["id"]]]) for _, better, worse in pairs)
    return {"accuracy": result["accuracy"], "n": result["n"]}


def validation_summary(version: ModelVersion) -> str:
    """The version's validation metric in words (its "evaluated" event)."""
    name = validation_metric_name(KIND_PAIRWISE if version.kind == ModelKind.PAIRWISE
                                  else KIND_REGRESSION)
    value = (version.metrics.get("validation") or {}).get(name)
    if value is None:
        return f"validation {name} undefined: {validation_undefined_reason(version)}"
    return f"validation {name} = {round(value, 4)}"


def validation_undefined_reason(version: ModelVersion) -> str:
    """Why the version's validation number is missing, from what its evaluation stored."""
    name = validation_metric_name(KIND_PAIRWISE if version.kind == ModelKind.PAIRWISE
                                  else KIND_REGRESSION)
    validation = version.metrics.get("validation") or {}
    if not validation.get("n"):
        return ("no validation examples (too few items, or none in a validation split, to "
                "measure it on)")
    return validation.get(f"{name}_undefined") or f"{name} undefined on {validation['n']} examples"


_SCORERS: dict[str, Any] = {}


def scorer_for_path(path: str):
    """Loaded models are cached per process (a worker scores many batches with one model)."""
    # Lazy: torch and transformers load in the process that scores, not in every process
    # that imports the services.
    from metrics_app.lerc.inference import LercScorer

    if path not in _SCORERS:
        if len(_SCORERS) >= 3:
            _SCORERS.pop(next(iter(_SCORERS)))
        _SCORERS[path] = LercScorer(path, precision=settings.QAJ_LERC_PRECISION)
    return _SCORERS[path]


def model_version_scorer(model_version: ModelVersion):
    """A LercScorer for a trained version (downloading it from S3 once if needed).
    ModelFilesUnusable when its folder is missing or its files cannot be loaded (a truncated
    copy, a disk error): one clear error for every door, instead of whatever the file reader
    raised (a SafetensorError, a JSON error) failing a scoring job or a promotion decision."""
    path = str(artifact_local_path(model_version.artifact_uri))
    try:
        return scorer_for_path(path)
    except MemoryError:
        raise
    except Exception as exc:
        import torch

        if isinstance(exc, torch.OutOfMemoryError):
            raise  # the machine, not the files
        raise ModelFilesUnusable(
            f"model folder {path} cannot be loaded, its files are damaged or incomplete "
            f"({type(exc).__name__}: {exc}); restore the folder or train a new version"
        ) from exc


def split_metrics(scorer, kind: str, examples: list, predictions: list | None = None
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
    if result["pearson"] is None:
        # Said where the number is read (the version's "evaluated" event, the promotion
        # decision): a bare "could not be computed" left the researcher to guess.
        scored = [(p, g) for p, g in zip(predictions, gold, strict=True) if p is not None]
        result["pearson_undefined"] = correlation_undefined_reason(
            [p for p, _g in scored], [g for _p, g in scored])
    by_dataset = {}
    for name in sorted({e.dataset for e in examples}):
        chosen = [i for i, e in enumerate(examples) if e.dataset == name]
        by_dataset[name or "(none)"] = pearson([predictions[i] for i in chosen],
                                               [gold[i] for i in chosen])
    result["pearson_by_dataset"] = by_dataset
    # "score ≥ 3 means correct" on LERC's 1-5 gold (binary judgments are 1 or 5; a project on
    # another scale was mapped onto it, `datasets._on_five_points`): accuracy, κ, AUC.
    decision = decision_report(predictions, gold, CORRECT_AT, bootstrap=0)
    result["accuracy_at_3"] = decision.get("accuracy")
    result.update({key: decision.get(key) for key in ("kappa", "roc_auc", "f1")})
    return result
