"""Aggregating several judgments of an item into one gold label. Pure functions.

Gold score per Likert item = mean of its judgments (MOCHA), or their median when the project
chooses it. Optionally each annotator's scores are z-normalized first (Blatz et al. 2004, as in
"Evaluating QA Evaluation"), which removes annotators' personal offsets and spreads before
averaging. Nominal labels: majority vote, or a model of worker reliability (Dawid–Skene, MACE,
GLAD) through `aggregate_items`, the entry point for a project's `aggregation` setting.
"""
from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from statistics import fmean, median, pstdev
from typing import Any

from annotation.domain.likert_scale import likert_correct_at
from core.vocabulary import TaskKind


def znormalize_by_annotator(
    triples: Iterable[tuple[Hashable, Hashable, float]],
) -> list[tuple[Hashable, Hashable, float]]:
    """(annotator, item, score) → the same with each annotator's scores z-normalized.

    An annotator with a single score, or with no spread, gets 0 for every score: they carry no
    information about relative quality.
    """
    triples = list(triples)
    by_annotator: dict[Hashable, list[float]] = defaultdict(list)
    for annotator, _item, score in triples:
        by_annotator[annotator].append(score)
    stats = {
        annotator: (fmean(scores), pstdev(scores)) for annotator, scores in by_annotator.items()
    }
    normalized = []
    for annotator, item, score in triples:
        mean, std = stats[annotator]
        normalized.append((annotator, item, (score - mean) / std if std > 0 else 0.0))
    return normalized


def mean_by_item(
    triples: Iterable[tuple[Hashable, Hashable, float]], *, znormalize: bool = False
) -> dict[Hashable, float]:
    """Mean score per item from (annotator, item, score) triples."""
    triples = list(triples)
    if znormalize:
        triples = znormalize_by_annotator(triples)
    by_item: dict[Hashable, list[float]] = defaultdict(list)
    for _annotator, item, score in triples:
        by_item[item].append(score)
    return {item: fmean(scores) for item, scores in by_item.items()}


def majority_by_item(
    pairs: Iterable[tuple[Hashable, Hashable]],
) -> dict[Hashable, tuple[Hashable | None, bool, Counter]]:
    """(item, label) pairs → item: (majority label or None on a tie, is_tie, counts)."""
    counts: dict[Hashable, Counter] = defaultdict(Counter)
    for item, label in pairs:
        counts[item][label] += 1
    result = {}
    for item, counter in counts.items():
        ranked = counter.most_common()
        tie = len(ranked) > 1 and ranked[0][1] == ranked[1][1]
        result[item] = (None if tie else ranked[0][0], tie, counter)
    return result


# --- Crowd aggregation models ----------------------------------------------------------------
#
# One entry point, `aggregate_items`, for every model a project can choose (its `aggregation`
# setting). Nominal labels (A/B preference, STARC options, binary correctness): majority vote,
# Dawid–Skene, MACE and GLAD, the last three fitted by crowd-kit (docs/ARCHITECTURE.md says
# why crowd-kit); Likert scores: mean or median. The models that learn worker reliability
# (Dawid–Skene, MACE, GLAD) need every judgment of the project at once: they are fitted on all
# items together, never one item at a time.

# The kinds of labels a task gives: nominal (A/B choices, multiple-choice options) or Likert
# scores; not the task kinds (core.vocabulary.TaskKind), though Likert shares its name.
NOMINAL_LABELS = "nominal"
LIKERT_LABELS = "likert"
AGGREGATION_KINDS = (NOMINAL_LABELS, LIKERT_LABELS)
NOMINAL_MODELS = ("majority", "dawid_skene", "mace", "glad")
LIKERT_MODELS = ("mean", "median")
AGGREGATION_MODELS = NOMINAL_MODELS + LIKERT_MODELS
DEFAULT_AGGREGATION = {NOMINAL_LABELS: "majority", LIKERT_LABELS: "mean"}
_PROJECT_NAMES = {TaskKind.LIKERT: "Likert", TaskKind.AB: "A/B", TaskKind.MC: "multiple-choice"}
# Posteriors closer than this count as equal (a tie, broken as `_pick` says).
_TIE_TOLERANCE = 1e-9
FIVE_POINT_CUT = likert_correct_at()


@dataclass(frozen=True)
class AggregateLabel:
    """One item's aggregate. `label`: the chosen label (nominal; None for a majority-vote tie)
    or the mean/median score (Likert). `confidence` in [0, 1]: the model's posterior probability
    of `label` (Dawid–Skene, MACE, GLAD), the share of the item's judgments for the winning
    label (majority; on a tie the share of each tied label), or, for Likert, the share of the
    item's judgments on the same side of the correctness cut as the aggregate. `n`: number of
    judgments of the item."""

    label: Any
    confidence: float
    n: int


def aggregation_kind(task_kind: str) -> str:
    """The kind of labels a project's task gives: "likert" for Likert projects (1–5 scores),
    "nominal" for the others (A/B choices, multiple-choice options)."""
    return LIKERT_LABELS if task_kind == TaskKind.LIKERT else NOMINAL_LABELS


def aggregation_models_for(kind: str) -> tuple[str, ...]:
    if kind not in AGGREGATION_KINDS:
        raise ValueError(f"unknown label kind {kind!r}; use one of {', '.join(AGGREGATION_KINDS)}")
    return LIKERT_MODELS if kind == LIKERT_LABELS else NOMINAL_MODELS


def check_aggregation_model(model: str, kind: str) -> None:
    """ValueError naming the model, the kind and what is allowed, unless `model` aggregates
    labels of this kind."""
    allowed = aggregation_models_for(kind)
    if model not in AGGREGATION_MODELS:
        raise ValueError(f"unknown aggregation model {model!r}; use one of "
                         f"{', '.join(AGGREGATION_MODELS)} ({kind} labels: {', '.join(allowed)})")
    if model not in allowed:
        what = "nominal labels" if model in NOMINAL_MODELS else "Likert scores"
        raise ValueError(f"aggregation model {model!r} aggregates {what}, not {kind} labels; "
                         f"for {kind} labels use one of {', '.join(allowed)}")


def resolve_aggregation(task_kind: str, value: str | None) -> str:
    """A project's `aggregation` setting → the model to use: `value`, or the default for the
    project's labels when empty ("mean" for Likert projects, "majority" for A/B and multiple
    choice). ValueError naming the bad value and the allowed ones when it does not fit."""
    kind = aggregation_kind(task_kind)
    allowed = aggregation_models_for(kind)
    if not value:
        return DEFAULT_AGGREGATION[kind]
    if value not in allowed:
        projects = _PROJECT_NAMES.get(task_kind, task_kind)
        if value not in AGGREGATION_MODELS:
            raise ValueError(f"unknown aggregation {value!r}; allowed for {projects} projects: "
                             f"{', '.join(allowed)}")
        raise ValueError(f"aggregation {value!r} is not allowed for {projects} projects "
                         f"({kind} labels); allowed: {', '.join(allowed)}")
    return value


def aggregate_items(
    judgments: Iterable[tuple[Hashable, Hashable, object]],
    *,
    model: str,
    kind: str,
    cut: float = FIVE_POINT_CUT,
    seed: int = 0,
) -> dict[Hashable, AggregateLabel]:
    """(worker, item, value) triples → item: AggregateLabel, by `model` for labels of `kind`
    ("nominal" or "likert"; see AGGREGATION_MODELS). A value of None is no vote and is left
    out (also from `n`). Labels come back as given (an int option stays an int, "A" stays "A").
    `cut`: Likert scores ≥ cut count as correct (confidence of a Likert aggregate; the
    project's `likert_correct_at`, 3 on a 1-5 scale). `seed`: the
    random state of MACE's restarts (the other models draw nothing at random). An empty input
    gives {}; ValueError when the model does not fit the kind or a Likert value is not a
    number."""
    check_aggregation_model(model, kind)
    triples = [(w, i, v) for w, i, v in judgments if v is not None]
    if not triples:
        return {}
    if kind == LIKERT_LABELS:
        return _aggregate_scores(triples, model=model, cut=cut)
    return _aggregate_labels(triples, model=model, seed=seed)


def _aggregate_scores(triples: list, *, model: str, cut: float) -> dict[Hashable, AggregateLabel]:
    by_item: dict[Hashable, list[float]] = defaultdict(list)
    for _worker, item, value in triples:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"Likert aggregation ({model}) needs numeric scores, got {value!r}")
        by_item[item].append(float(value))
    result = {}
    for item, scores in by_item.items():
        value = fmean(scores) if model == "mean" else float(median(scores))
        correct = value >= cut
        same_side = sum((score >= cut) == correct for score in scores)
        result[item] = AggregateLabel(label=value, confidence=same_side / len(scores),
                                      n=len(scores))
    return result


def _sort_key(value: Hashable) -> tuple:
    """A total order over labels of any type: by type name, then by value (numbers and strings
    compare naturally), else by repr."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return (type(value).__name__, value, "")
    return (type(value).__name__, 0, repr(value))


def _aggregate_labels(triples: list, *, model: str, seed: int) -> dict[Hashable, AggregateLabel]:
    votes: dict[Hashable, Counter] = defaultdict(Counter)
    for _worker, item, label in triples:
        votes[item][label] += 1
    labels = sorted({label for _w, _i, label in triples}, key=_sort_key)
    if model == "majority" or len(labels) == 1:
        # Majority vote, counted here rather than by crowd-kit's MajorityVote (which gives the
        # same shares) because its tie-break picks a label: a tie is no label (None) here, as in
        # `majority_by_item`. With one label in the whole data every model agrees on it.
        return {item: _majority(counter) for item, counter in votes.items()}
    posteriors = _fit_posteriors(triples, labels=labels, model=model, seed=seed)
    result = {}
    for item, counter in votes.items():
        label, probability = _pick(posteriors[item], counter)
        result[item] = AggregateLabel(label=label, confidence=probability,
                                      n=sum(counter.values()))
    return result


def _majority(counter: Counter) -> AggregateLabel:
    n = sum(counter.values())
    ranked = counter.most_common()
    top = ranked[0][1]
    tie = len(ranked) > 1 and ranked[1][1] == top
    return AggregateLabel(label=None if tie else ranked[0][0], confidence=top / n, n=n)


def _pick(posterior: dict[Hashable, float], counter: Counter) -> tuple[Hashable, float]:
    """The label of highest posterior probability. Ties (within 1e-9) are broken
    deterministically: first by the item's raw votes (the tied label more judges chose), then by
    the labels' order (`_sort_key`: "A" before "B", 0 before 1)."""
    best = max(posterior.values())
    tied = [label for label, p in posterior.items() if best - p <= _TIE_TOLERANCE]
    label = min(tied, key=lambda lab: (-counter.get(lab, 0), _sort_key(lab)))
    return label, min(1.0, max(0.0, float(posterior[label])))


def _fit_posteriors(triples: list, *, labels: list, model: str,
                    seed: int) -> dict[Hashable, dict[Hashable, float]]:
    """item → {label: posterior probability} from a crowd-kit model fitted on every triple.

    Workers, items and labels go to crowd-kit as integer codes given in a fixed order (sorted),
    so the fit does not depend on the order of the input and labels come back exactly as they
    were given (pandas would turn ints into numpy ints)."""
    import pandas as pd
    from crowdkit.aggregation import GLAD, MACE

    workers = {w: n for n, w in enumerate(sorted({w for w, _i, _v in triples}, key=_sort_key))}
    items = sorted({i for _w, i, _v in triples}, key=_sort_key)
    item_code = {item: n for n, item in enumerate(items)}
    label_code = {label: n for n, label in enumerate(labels)}
    rows = sorted((item_code[i], workers[w], label_code[v]) for w, i, v in triples)
    frame = pd.DataFrame(rows, columns=["task", "worker", "label"])
    if model == "dawid_skene":
        fitted = _smoothed_dawid_skene(len(labels))
    elif model == "mace":
        fitted = MACE(n_restarts=10, n_iter=50, random_state=seed)
    else:  # glad
        fitted = GLAD(n_iter=100, tol=1e-5)
    with warnings.catch_warnings():
        # crowd-kit 1.4.2 calls pandas APIs that pandas 3 deprecates (inplace=...): noise for
        # whoever exports, not something they can act on.
        warnings.filterwarnings("ignore", module="crowdkit")
        probas = fitted.fit_predict_proba(frame[["worker", "task", "label"]])
    probas = probas.reindex(columns=range(len(labels)), fill_value=0.0).fillna(0.0)
    posteriors = {}
    for code, row in zip(probas.index.tolist(), probas.to_numpy(dtype=float), strict=True):
        posteriors[items[int(code)]] = {labels[j]: float(p) for j, p in enumerate(row)}
    return posteriors


# Dawid–Skene is estimated with pseudo-counts (Dirichlet priors, i.e. MAP instead of maximum
# likelihood), added at every EM step: per worker and true label, 1 for every answer plus 1
# more for the right one; and one pseudo-item per label in the label frequencies. Without them
# (crowd-kit's plain DawidSkene) a worker seen once carries no information at all, so an item
# only they judged gets the most common label; a worker seen a few times who always agreed gets
# an error rate of ~0 that outvotes everyone else; and a label that is rare in a small project
# sees its frequency collapse towards 0 over the iterations until two votes for it lose to one
# against. The pseudo-counts weigh little against a worker's real record or many items.
_DS_PSEUDO_RIGHT, _DS_PSEUDO_ANY, _DS_PSEUDO_ITEMS = 1.0, 1.0, 1.0


def _smoothed_dawid_skene(n_labels: int):
    """crowd-kit's DawidSkene with the pseudo-counts above in every M-step."""
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    class SmoothedDawidSkene(DawidSkene):
        def _m_step(self, data, probas, *_initial):  # crowd-kit: a staticmethod, called on self
            joined = data.join(probas, on="task").drop(columns=["task"])
            errors = joined.groupby(["worker", "label"], sort=False).sum()
            grid = pd.MultiIndex.from_product(
                [sorted(data["worker"].unique()), range(n_labels)], names=["worker", "label"])
            errors = errors.reindex(index=grid, columns=range(n_labels), fill_value=0.0)
            errors = errors.fillna(0.0) + _DS_PSEUDO_ANY
            observed = errors.index.get_level_values("label").to_numpy()
            for true_label in range(n_labels):
                errors.loc[observed == true_label, true_label] += _DS_PSEUDO_RIGHT
            return errors / errors.groupby("worker", sort=False).sum()

        def _e_step(self, data, priors, errors):  # crowd-kit: a staticmethod, called on self
            n_items = data["task"].nunique()
            priors = (priors * n_items + _DS_PSEUDO_ITEMS) / (n_items + _DS_PSEUDO_ITEMS
                                                              * len(priors))
            return DawidSkene._e_step(data, priors, errors)

    return SmoothedDawidSkene(n_iter=100, tol=1e-5)
