"""How well automatic metrics track human judgments. Pure functions over plain sequences.

- `correlations`: Pearson, Spearman and Kendall between a metric and the human gold score,
  with percentile bootstrap intervals (items resampled with replacement).
- `minimal_pairs`: which items form a minimal pair and which of the two is the better one;
  `minimal_pair_accuracy`: share of minimal pairs where the metric scores the better candidate
  higher, a tie counting half (MOCHA).
- `pairwise_accuracy`: share of A/B comparisons where the metric's higher-scored answer is the
  one the human preferred, a tie counting half (long-form QA paper, Table 4), and the
  random / always-human / longer-answer baselines. LERC's validation and promotion count
  training pairs with it too (`lerc.validation.pairwise_accuracy_of_labels`).
- Pearson is `annotation.domain.agreement.pearson` everywhere (None when undefined); exact match
  and SQuAD normalization are `core.text_match`.
- Study filters: `is_number_pair` and `NUMBER_PAIR_DATASETS` (MOCHA drops number-vs-number
  pairs on DROP) are `core.text_match`'s, the rule the annotation app sends items out by.

Bootstrap speed: a resample is a vector of counts over the original items, so Pearson and
Spearman are computed for all resamples at once as count-weighted statistics (Spearman from the
average ranks the resample would have, derived from the counts — exact, no re-sorting). Kendall
has no such shortcut and runs one scipy call per resample, so it uses at most
`kendall_resamples` of them.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from annotation.domain.agreement import pearson
from core.statistics import (
    ROUNDING_VARIANCE,
    finite_or_none,
    has_variation,
    percentile_interval,
)
from core.vocabulary import AB_CHOICES

CORRELATIONS = ("pearson", "spearman", "kendall")


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row-wise Pearson of x, y (n,) or (B, n) under weights w (B, n)."""
    if x.ndim == 1 and y.ndim == 1:
        # Fixed values, resampled weights: five matrix-vector products (BLAS) instead of
        # (B, n) temporaries. Centring first keeps the one-pass moments accurate.
        x, y = x - x.mean(), y - y.mean()
        total = w.sum(axis=1)
        mx, my = (w @ x) / total, (w @ y) / total
        cov = (w @ (x * y)) / total - mx * my
        vx = (w @ (x * x)) / total - mx * mx
        vy = (w @ (y * y)) / total - my * my
        return _correlation(cov, vx, vy, float((x * x).mean()), float((y * y).mean()))
    total = w.sum(axis=1, keepdims=True)
    mx = (w * x).sum(axis=1, keepdims=True) / total
    my = (w * y).sum(axis=1, keepdims=True) / total
    dx, dy = x - mx, y - my
    cov = (w * dx * dy).sum(axis=1)
    vx = (w * dx * dx).sum(axis=1)
    vy = (w * dy * dy).sum(axis=1)
    return _correlation(cov, vx, vy, (w * x * x).sum(axis=1), (w * y * y).sum(axis=1))


def _correlation(cov: np.ndarray, vx: np.ndarray, vy: np.ndarray, scale_x, scale_y) -> np.ndarray:
    """cov / √(vx·vy) inside [−1, 1]; NaN where a side is constant. A resample of one distinct
    value has variance 0, which floating point leaves as rounding noise (±1e-17): undefined
    there, not a correlation of 10^8 or an infinite bound on the metrics page."""
    vx = np.where(vx > ROUNDING_VARIANCE * (scale_x + 1e-300), vx, np.nan)
    vy = np.where(vy > ROUNDING_VARIANCE * (scale_y + 1e-300), vy, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(cov / np.sqrt(vx * vy), -1.0, 1.0)


def _resample_ranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The average (mid) rank each original item would get inside each resample, given the
    resample's multiplicity `counts` (B, n) of every item."""
    uniques, group = np.unique(values, return_inverse=True)
    group_counts = np.zeros((counts.shape[0], len(uniques)))
    for b in range(counts.shape[0]):
        group_counts[b] = np.bincount(group, weights=counts[b], minlength=len(uniques))
    before = np.cumsum(group_counts, axis=1) - group_counts
    mid = before + (group_counts + 1) / 2
    return mid[:, group]


def correlation_undefined_reason(metric_values: Sequence[float],
                                 human_values: Sequence[float]) -> str | None:
    """Why Pearson, Spearman and Kendall of these paired scores are undefined, in the words
    every door shows (the metrics page, the judges page, `metric_report`, `judge_report`, the
    APIs); None when they are defined. The cases are exactly those `correlations` answers None
    for: fewer than 3 items, or a side without variation (a correlation divides by it)."""
    x = np.asarray(metric_values, dtype=float)
    y = np.asarray(human_values, dtype=float)
    if len(x) < 3:
        return (f"{len(x)} item{'' if len(x) == 1 else 's'} with both an automatic and a "
                "human score; a correlation needs 3")
    if not has_variation(x):  # up to rounding: 0.1 + 0.2 beside 0.3 is one score
        return (f"every item has the same automatic score ({x[0]:g}), so there is no "
                "variation to correlate")
    if not has_variation(y):
        return (f"every item has the same human score ({y[0]:g}), so there is no variation "
                "to correlate")
    return None


# Why a metric gives an answer no value (`metrics_app.metrics.baselines`: a reference-based
# metric of an answer without references); `score_project` says it beside its count.
NO_REFERENCE = "no reference answer to compare with"


def unscorable_reason(values: Sequence[float | None]) -> str | None:
    """Why a metric has nothing to evaluate on these stored scores: it stored some and every
    one is None (it could not score any of the answers); None when one has a value or none
    was stored. The words every door shows in the metric's cell."""
    if values and all(value is None for value in values):
        return (f"unscorable: the metric gave none of the {len(values)} answers a value "
                f"({NO_REFERENCE})")
    return None


def correlations(
    metric_values: Sequence[float],
    human_values: Sequence[float],
    *,
    n_resamples: int = 1000,
    kendall_resamples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """{n, pearson, spearman, kendall, ci: {pearson: [low, high], ...}, undefined}; the
    correlations are None when either side is constant (or fewer than 3 items), and
    `undefined` says which (`correlation_undefined_reason`; None when they are defined)."""
    from scipy.stats import kendalltau, spearmanr

    x = np.asarray(metric_values, dtype=float)
    y = np.asarray(human_values, dtype=float)
    if x.shape != y.shape:
        raise ValueError("metric and human values differ in length")
    n = len(x)
    result: dict = {"n": n, "pearson": None, "spearman": None, "kendall": None,
                    "ci": {name: [None, None] for name in CORRELATIONS},
                    "n_resamples": n_resamples, "confidence": confidence,
                    "undefined": correlation_undefined_reason(x, y)}
    if result["undefined"]:
        return result
    result["pearson"] = pearson(x, y)
    result["spearman"] = finite_or_none(spearmanr(x, y).statistic)
    result["kendall"] = finite_or_none(kendalltau(x, y).statistic)
    if n_resamples <= 0:
        return result

    rng = np.random.default_rng(seed)
    (xc, yc), freq = distinct_rows(x, y)
    pearson_est, spearman_est = [], []
    chunk = max(1, min(n_resamples, 2_000_000 // len(freq)))
    for start in range(0, n_resamples, chunk):
        counts = resample_row_counts(rng, freq, min(chunk, n_resamples - start))
        pearson_est.append(_weighted_pearson(xc, yc, counts))
        spearman_est.append(
            _weighted_pearson(_resample_ranks(xc, counts), _resample_ranks(yc, counts), counts)
        )
    result["ci"]["pearson"] = percentile_interval(np.concatenate(pearson_est), confidence)
    result["ci"]["spearman"] = percentile_interval(np.concatenate(spearman_est), confidence)

    n_kendall = min(n_resamples, kendall_resamples)
    result["ci"]["kendall"] = percentile_interval(
        _resampled_kendall(xc, yc, resample_row_counts(rng, freq, n_kendall)), confidence)
    result["kendall_resamples"] = n_kendall
    return result


def _resampled_kendall(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Kendall's τ-b of each resample (rows of `counts` over the distinct (x, y) rows): from
    the resample's x-by-y contingency table (what scipy's kendalltau computes on the resampled
    items) when the table is small, else one scipy call per resample on the expanded items."""
    from scipy.stats import kendalltau

    x_values, x_code = np.unique(x, return_inverse=True)
    y_values, y_code = np.unique(y, return_inverse=True)
    table_size = len(x_values) * len(y_values)
    if table_size > 1_000_000:
        return np.array([kendalltau(np.repeat(x, row.astype(int)),
                                    np.repeat(y, row.astype(int))).statistic
                         for row in counts])
    chunk = max(1, 2_000_000 // table_size)
    return np.concatenate([
        _kendall_from_tables(_contingency_tables(x_code * len(y_values) + y_code,
                                                 counts[start:start + chunk],
                                                 (len(x_values), len(y_values))))
        for start in range(0, len(counts), chunk)])


def _contingency_tables(cell: np.ndarray, counts: np.ndarray, shape: tuple[int, int]
                        ) -> np.ndarray:
    """(B, X, Y) tables: each resample's weight of every (x, y) cell; `cell` is each row's
    flat cell index."""
    size = shape[0] * shape[1]
    flat = (np.arange(len(counts))[:, None] * size + cell[None, :]).ravel()
    return np.bincount(flat, weights=counts.ravel(), minlength=len(counts) * size).reshape(
        len(counts), *shape)


def _kendall_from_tables(table: np.ndarray) -> np.ndarray:
    """Kendall's τ-b of (B, X, Y) contingency tables with X and Y in increasing order."""
    # Weight of the cells with a larger x and a larger y (concordant partners), and with a
    # larger x and a smaller y (discordant partners), of every cell.
    suffix = np.cumsum(np.cumsum(table[:, ::-1, ::-1], axis=1), axis=2)[:, ::-1, ::-1]
    larger_both = np.zeros_like(table)
    larger_both[:, :-1, :-1] = suffix[:, 1:, 1:]
    larger_x = np.cumsum(table[:, ::-1], axis=1)[:, ::-1]
    larger_x_smaller_y = np.zeros_like(table)
    larger_x_smaller_y[:, :-1, 1:] = np.cumsum(larger_x[:, 1:, :], axis=2)[:, :, :-1]
    concordant = (table * larger_both).sum(axis=(1, 2))
    discordant = (table * larger_x_smaller_y).sum(axis=(1, 2))
    n = table.sum(axis=(1, 2))
    pairs = n * (n - 1) / 2
    rows, columns = table.sum(axis=2), table.sum(axis=1)
    x_ties = (rows * (rows - 1) / 2).sum(axis=1)
    y_ties = (columns * (columns - 1) / 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (concordant - discordant) / np.sqrt((pairs - x_ties) * (pairs - y_ties))


def minimal_pairs(items: Iterable[dict]) -> list[tuple[str, dict, dict]]:
    """The complete minimal pairs among `items` (dicts with "metadata" and "gold"): two items
    whose metadata names the same `minimal_pair`, one with `pair_role` 1 and one with 2, as
    (pair key, better item, worse item) in order of first appearance. Role 1 holds the better
    candidate (MOCHA: score1 > score2); the gold scores decide when both are present, so a pair
    stored the other way round is still read correctly."""
    members: dict[str, dict[int, dict]] = {}
    for item in items:
        meta = item.get("metadata") or {}
        if "minimal_pair" not in meta:
            continue
        try:
            role = int(meta.get("pair_role", 0))
        except (TypeError, ValueError):
            continue
        if role in (1, 2):
            members.setdefault(str(meta["minimal_pair"]), {})[role] = item
    pairs = []
    for key, roles in members.items():
        if len(roles) < 2:
            continue
        better, worse = roles[1], roles[2]
        gold_better = (better.get("gold") or {}).get("score")
        gold_worse = (worse.get("gold") or {}).get("score")
        if gold_better is not None and gold_worse is not None and gold_worse > gold_better:
            better, worse = worse, better
        pairs.append((key, better, worse))
    return pairs


def minimal_pair_accuracy(pairs: Iterable[tuple[float | None, float | None]]) -> dict:
    """(metric score of the better candidate, of the worse one) per pair → {accuracy, n, ties,
    wins}; a tie counts half; pairs with a missing score are left out."""
    wins = ties = n = 0
    for better, worse in pairs:
        if better is None or worse is None:
            continue
        n += 1
        if better > worse:
            wins += 1
        elif better == worse:
            ties += 1
    return {"accuracy": (wins + 0.5 * ties) / n if n else None, "n": n, "ties": ties,
            "wins": wins}


def pairwise_accuracy(comparisons: Iterable[tuple[float | None, float | None, str]]) -> dict:
    """(metric score of answer A, of answer B, human choice "A"/"B") → {accuracy, n, ties}:
    how often the higher-scored answer is the preferred one, a tie counting half."""
    correct = ties = n = 0
    for score_a, score_b, choice in comparisons:
        if score_a is None or score_b is None or choice not in AB_CHOICES:
            continue
        n += 1
        if score_a == score_b:
            ties += 1
        elif (score_a > score_b) == (choice == "A"):
            correct += 1
    return {"accuracy": (correct + 0.5 * ties) / n if n else None, "n": n, "ties": ties}


def always_human_accuracy(comparisons: Iterable[tuple[str, str, str]]) -> dict:
    """(kind of answer A, kind of answer B, human choice) → how often the human-written answer
    was preferred; only comparisons of a human with a model answer count (H/H has no
    'human' side to pick)."""
    correct = n = 0
    for kind_a, kind_b, choice in comparisons:
        if {kind_a, kind_b} != {"human", "model"} or choice not in AB_CHOICES:
            continue
        n += 1
        human_side = "A" if kind_a == "human" else "B"
        correct += choice == human_side
    return {"accuracy": correct / n if n else None, "n": n, "ties": 0}


def random_accuracy(n: int) -> dict:
    """Picking an answer at random is right half the time in expectation."""
    return {"accuracy": 0.5 if n else None, "n": n, "ties": 0}


# --- Deciding correct / incorrect (binary-labelled answers) -------------------------------------

def distinct_rows(*columns: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct rows of the given value columns (one array each) and how many items share
    each. Items with the same values contribute the same to every bootstrap statistic here, so
    resampling runs on these rows: EVOUNA's 23,499 answers with a binary human label and a
    metric of a few hundred distinct values are a few hundred rows."""
    stacked = np.column_stack([np.asarray(c, dtype=float) for c in columns])
    distinct, freq = np.unique(stacked, axis=0, return_counts=True)
    return [distinct[:, i] for i in range(stacked.shape[1])], freq


def resample_row_counts(rng: np.random.Generator, freq: np.ndarray, size: int) -> np.ndarray:
    """(size, rows) multiplicities of the distinct rows in `size` bootstrap resamples of the
    freq.sum() items. Drawing n items with replacement and counting them per distinct row is
    exactly multinomial with the rows' shares of the items."""
    n = int(freq.sum())
    if len(freq) * 8 <= n:
        return rng.multinomial(n, freq / n, size=size).astype(float)
    # Many distinct rows: numpy's multinomial draws one binomial per row and resample, slower
    # than drawing the n items themselves and counting them per row.
    row_of_item = np.repeat(np.arange(len(freq)), freq)
    draws = row_of_item[rng.integers(0, n, (size, n))] + (np.arange(size) * len(freq))[:, None]
    return np.bincount(draws.ravel(), minlength=size * len(freq)).reshape(
        size, len(freq)).astype(float)


def content_order_key(content: dict | None, *rest) -> tuple:
    """A sort key for an item from what it says (a digest of its content), then `rest`: the
    one order of items every bootstrap and sampled draw over items reads, so a result does
    not depend on the items' ids, which follow the order a file was imported in, nor on
    their names. Items alike in content and `rest` are interchangeable."""
    import hashlib
    import json

    text = json.dumps(content or {}, sort_keys=True, ensure_ascii=False)
    return (hashlib.sha256(text.encode("utf-8")).hexdigest(), *rest)


def is_validation_key(key: str, fraction: float = 0.5) -> bool:
    """A stable, seedless assignment of a key (a question) to the validation half: the same
    question is always on the same side, whatever else the project holds."""
    import hashlib

    digest = hashlib.sha256(key.strip().lower().encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def best_threshold(scores: Sequence[float | None], labels: Sequence[int]) -> float:
    """The threshold t maximising the accuracy of "score ≥ t means correct" (ties: the lowest
    such t). Unscored inputs (None) are left out."""
    pairs = [(float(s), int(y)) for s, y in zip(scores, labels, strict=True) if s is not None]
    if not pairs:
        return 0.5
    values = np.array([p[0] for p in pairs])
    ys = np.array([p[1] for p in pairs])
    order = np.argsort(values, kind="stable")
    values, ys = values[order], ys[order]
    # Threshold at each distinct value: predicted correct = values ≥ t.
    distinct, first = np.unique(values, return_index=True)
    negatives_below = np.concatenate([[0], np.cumsum(1 - ys)])[first]  # true negatives
    positives_from = ys.sum() - np.concatenate([[0], np.cumsum(ys)])[first]  # true positives
    accuracy = (negatives_below + positives_from) / len(ys)
    # "Everything incorrect" (a threshold above the maximum) is a candidate too.
    if (1 - ys).sum() / len(ys) > accuracy.max():
        return float(distinct[-1]) + 1.0
    return float(distinct[int(np.argmax(accuracy))])


# Why Cohen's κ of a correct/incorrect decision is undefined (`kappa_undefined`).
NO_ITEMS = "no items to compare"
ONE_LABEL_BOTH_SIDES = ("both sides give one and the same label throughout, so chance "
                        "explains all the agreement")


def _confusion_statistics(tp, fp, fn, tn) -> dict[str, np.ndarray]:
    """Accuracy, F1 of "correct" and Cohen's κ from (possibly weighted) confusion counts."""
    total = tp + fp + fn + tn
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = (tp + tn) / total
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
        expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / total**2
        # Both sides one and the same label throughout: chance agreement is 1 and κ is 0/0,
        # undefined (scikit-learn's NaN, `annotation.domain.agreement.cohen_kappa`'s None),
        # not the 0 of "no better than chance".
        kappa = np.where(expected < 1, (accuracy - expected) / (1 - expected), np.nan)
    return {"accuracy": accuracy, "f1": f1, "kappa": kappa}


def decision_statistics(
    scores: Sequence[float],
    labels: Sequence[int],
    threshold: float,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """How well "score ≥ threshold means correct" matches human labels (1 correct, 0 not):
    {n, threshold, positive_rate, accuracy, f1, kappa, roc_auc, ci: {name: [low, high]},
    kappa_undefined: why κ is None, else None}.
    κ is Cohen's (as scikit-learn computes it: 0 when one side is constant and the other is
    not, None when both give one and the same label throughout); ROC AUC is threshold-free
    (None with one class only). Intervals: percentile bootstrap over items."""
    from sklearn.metrics import roc_auc_score

    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    if s.shape != y.shape:
        raise ValueError("scores and labels differ in length")
    n = len(s)
    result: dict = {"n": n, "threshold": threshold, "positive_rate": None, "accuracy": None,
                    "f1": None, "kappa": None, "roc_auc": None,
                    "ci": {name: [None, None] for name in ("accuracy", "f1", "kappa", "roc_auc")},
                    "n_resamples": n_resamples, "confidence": confidence,
                    "kappa_undefined": NO_ITEMS}
    if n == 0:
        return result
    predicted = (s >= threshold).astype(float)
    cells = np.stack([predicted * y, predicted * (1 - y), (1 - predicted) * y,
                      (1 - predicted) * (1 - y)])            # tp, fp, fn, tn per item
    point = _confusion_statistics(*cells.sum(axis=1))
    result.update({name: finite_or_none(value) for name, value in point.items()})
    result["kappa_undefined"] = None if result["kappa"] is not None else ONE_LABEL_BOTH_SIDES
    result["positive_rate"] = float(y.mean())
    two_classes = 0 < y.sum() < n
    if two_classes:
        result["roc_auc"] = finite_or_none(roc_auc_score(y, s))
    if n_resamples <= 0 or n < 3:
        return result
    rng = np.random.default_rng(seed)
    (sc, yc), freq = distinct_rows(s, y)
    yc = yc.astype(int)
    predicted_c = (sc >= threshold).astype(float)
    cells_c = np.stack([predicted_c * yc, predicted_c * (1 - yc), (1 - predicted_c) * yc,
                        (1 - predicted_c) * (1 - yc)])
    estimates: dict[str, list[np.ndarray]] = {"accuracy": [], "f1": [], "kappa": []}
    chunk = max(1, min(n_resamples, 2_000_000 // len(freq)))
    for start in range(0, n_resamples, chunk):
        counts = resample_row_counts(rng, freq, min(chunk, n_resamples - start))
        for name, values in _confusion_statistics(*(counts @ cells_c.T).T).items():
            estimates[name].append(values)
        if two_classes:
            estimates.setdefault("roc_auc", []).append(_weighted_auc(sc, yc, counts))
    for name, parts in estimates.items():
        result["ci"][name] = percentile_interval(np.concatenate(parts), confidence)
    return result


def _weighted_auc(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ROC AUC of each row of item weights (B, n) -- a bootstrap resample's multiplicities --
    at once: the weighted share of (correct, wrong) pairs the score orders right, ties half
    (what scikit-learn's roc_auc_score gives for weights 1). NaN where a class is absent."""
    order = np.argsort(scores, kind="stable")
    ordered = scores[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    positive = np.add.reduceat(weights[:, order] * labels[order], starts, axis=1)
    negative = np.add.reduceat(weights[:, order] * (1 - labels[order]), starts, axis=1)
    below = np.cumsum(negative, axis=1) - negative
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((positive * (below + 0.5 * negative)).sum(axis=1)
                / (positive.sum(axis=1) * negative.sum(axis=1)))


# --- Is one metric better than another? ----------------------------------------------------------

def williams_test(r_human_a: float, r_human_b: float, r_a_b: float, n: int) -> dict:
    """Williams' test (Williams 1959, in Steiger 1980's form) that metric A correlates with the
    human scores differently than metric B, on the same n items; r_a_b is the correlation of
    the two metrics with each other. {t, df, p_two_sided, p_one_sided} where the one-sided p
    tests "A correlates higher than B" (what MT metric papers report)."""
    from scipy.stats import t as student_t

    if n <= 3:
        return {"t": None, "df": n - 3, "p_two_sided": None, "p_one_sided": None}
    r12, r13, r23 = r_human_a, r_human_b, r_a_b
    determinant = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    denominator = (2 * (n - 1) / (n - 3) * determinant
                   + ((r12 + r13) ** 2 / 4) * (1 - r23) ** 3)
    if denominator <= 0:
        return {"t": None, "df": n - 3, "p_two_sided": None, "p_one_sided": None}
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23) / denominator)
    df = n - 3
    return {"t": t, "df": df, "p_two_sided": float(2 * student_t.sf(abs(t), df)),
            "p_one_sided": float(student_t.sf(t, df))}


def paired_bootstrap_pearson_difference(
    metric_a: Sequence[float], metric_b: Sequence[float], human: Sequence[float], *,
    n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0,
) -> dict:
    """Pearson(A, human) − Pearson(B, human) on the same items, with a paired percentile
    bootstrap interval (both metrics see the same resample) and the share of resamples in
    which A is not ahead (a one-sided p-value for "A correlates better")."""
    return paired_bootstrap_pearson_differences(
        {"a": metric_a, "b": metric_b}, human, [("a", "b")], n_resamples=n_resamples,
        confidence=confidence, seed=seed)[("a", "b")]


def paired_bootstrap_pearson_differences(
    metrics: dict[str, Sequence[float]], human: Sequence[float], pairs: Sequence[tuple[str, str]],
    *, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0,
) -> dict[tuple[str, str], dict]:
    """`paired_bootstrap_pearson_difference` of each (A, B) in `pairs`, all metrics aligned with
    `human` item by item. Every metric sees the same resamples of the items, so each metric's
    Pearson is computed once per resample and a pair's estimate is a difference (seven
    metrics, 21 pairs: seven bootstraps instead of 21)."""
    h = np.asarray(human, dtype=float)
    values = {name: np.asarray(metrics[name], dtype=float)
              for name in {name for pair in pairs for name in pair}}
    n = len(h)
    results = {}
    for a, b in pairs:
        difference = None
        if n >= 3 and np.ptp(values[a]) > 0 and np.ptp(values[b]) > 0 and np.ptp(h) > 0:
            difference = pearson(values[a], h) - pearson(values[b], h)
        results[(a, b)] = {"difference": difference, "ci": [None, None], "p_not_better": None,
                           "n": n, "n_resamples": n_resamples, "confidence": confidence}
    wanted = [pair for pair in pairs if results[pair]["difference"] is not None]
    if not wanted or n_resamples <= 0:
        return results
    names = sorted({name for pair in wanted for name in pair})
    rng = np.random.default_rng(seed)
    estimates: dict[str, list[np.ndarray]] = {name: [] for name in names}
    freq = np.ones(n, dtype=np.int64)
    chunk = max(1, min(n_resamples, 2_000_000 // n))
    for start in range(0, n_resamples, chunk):
        counts = resample_row_counts(rng, freq, min(chunk, n_resamples - start))
        for name in names:
            estimates[name].append(_weighted_pearson(values[name], h, counts))
    per_metric = {name: np.concatenate(parts) for name, parts in estimates.items()}
    for a, b in wanted:
        differences = per_metric[a] - per_metric[b]
        differences = differences[~np.isnan(differences)]
        results[(a, b)]["ci"] = percentile_interval(differences, confidence)
        results[(a, b)]["p_not_better"] = (float((differences <= 0).mean())
                                           if len(differences) else None)
    return results
