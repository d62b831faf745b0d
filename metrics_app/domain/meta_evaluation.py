"""How well automatic metrics track human judgments. Pure functions over plain sequences.

- `correlations`: Pearson, Spearman and Kendall between a metric and the human gold score,
  with percentile bootstrap intervals (items resampled with replacement).
- `minimal_pairs`: which items form a minimal pair and which of the two is the better one;
  `minimal_pair_accuracy`: share of minimal pairs where the metric scores the better candidate
  higher, a tie counting half (MOCHA).
- `pairwise_accuracy`: share of A/B comparisons where the metric's higher-scored answer is the
  one the human preferred, a tie counting half (long-form QA paper, Table 4), and the
  random / always-human / longer-answer baselines. LERC's validation and promotion count
  training pairs with it too (`lerc.train.pairwise_accuracy_of_labels`).
- Pearson is `annotation.domain.agreement.pearson` everywhere (None when undefined); exact match
  and SQuAD normalization are `metrics_app.domain.text_match`.
- Study filters: `is_number_pair` (MOCHA drops number-vs-number pairs on DROP).

Bootstrap speed: a resample is a vector of counts over the original items, so Pearson and
Spearman are computed for all resamples at once as count-weighted statistics (Spearman from the
average ranks the resample would have, derived from the counts — exact, no re-sorting). Kendall
has no such shortcut and runs one scipy call per resample, so it uses at most
`kendall_resamples` of them.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np

from annotation.domain.agreement import pearson

CORRELATIONS = ("pearson", "spearman", "kendall")
# Datasets whose number-vs-number candidates are filtered. The MOCHA paper: "We also
# filtered out instances in DROP where the reference and the candidate are both numbers" -- only
# DROP; its other span datasets (Quoref, ROPES) kept such pairs and had them annotated.
NUMBER_PAIR_DATASETS = frozenset({"drop"})


def _clean(value: float) -> float | None:
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row-wise Pearson of x, y (n,) or (B, n) under weights w (B, n)."""
    total = w.sum(axis=1, keepdims=True)
    mx = (w * x).sum(axis=1, keepdims=True) / total
    my = (w * y).sum(axis=1, keepdims=True) / total
    dx, dy = x - mx, y - my
    cov = (w * dx * dy).sum(axis=1)
    vx = (w * dx * dx).sum(axis=1)
    vy = (w * dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cov / np.sqrt(vx * vy)


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


def _percentile(estimates: np.ndarray, confidence: float) -> list[float | None]:
    estimates = estimates[~np.isnan(estimates)]
    if len(estimates) == 0:
        return [None, None]
    alpha = (1 - confidence) / 2
    low, high = np.quantile(estimates, [alpha, 1 - alpha])
    return [_clean(low), _clean(high)]


def correlations(
    metric_values: Sequence[float],
    human_values: Sequence[float],
    *,
    n_resamples: int = 1000,
    kendall_resamples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """{n, pearson, spearman, kendall, ci: {pearson: [low, high], ...}}; a correlation is None
    when either side is constant (or fewer than 3 items)."""
    from scipy.stats import kendalltau, spearmanr

    x = np.asarray(metric_values, dtype=float)
    y = np.asarray(human_values, dtype=float)
    if x.shape != y.shape:
        raise ValueError("metric and human values differ in length")
    n = len(x)
    result: dict = {"n": n, "pearson": None, "spearman": None, "kendall": None,
                    "ci": {name: [None, None] for name in CORRELATIONS},
                    "n_resamples": n_resamples, "confidence": confidence}
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return result
    result["pearson"] = pearson(x, y)
    result["spearman"] = _clean(spearmanr(x, y).statistic)
    result["kendall"] = _clean(kendalltau(x, y).statistic)
    if n_resamples <= 0:
        return result

    rng = np.random.default_rng(seed)
    pearson_est, spearman_est = [], []
    chunk = max(1, min(n_resamples, 2_000_000 // max(n, 1)))
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        counts = np.zeros((size, n))
        for b in range(size):
            counts[b] = np.bincount(rng.integers(0, n, n), minlength=n)
        pearson_est.append(_weighted_pearson(x, y, counts))
        spearman_est.append(
            _weighted_pearson(_resample_ranks(x, counts), _resample_ranks(y, counts), counts)
        )
    result["ci"]["pearson"] = _percentile(np.concatenate(pearson_est), confidence)
    result["ci"]["spearman"] = _percentile(np.concatenate(spearman_est), confidence)

    kendall_est = np.empty(min(n_resamples, kendall_resamples))
    for b in range(len(kendall_est)):
        idx = rng.integers(0, n, n)
        kendall_est[b] = kendalltau(x[idx], y[idx]).statistic
    result["ci"]["kendall"] = _percentile(kendall_est, confidence)
    result["kendall_resamples"] = len(kendall_est)
    return result


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
        if score_a is None or score_b is None or choice not in ("A", "B"):
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
        if {kind_a, kind_b} != {"human", "model"} or choice not in ("A", "B"):
            continue
        n += 1
        human_side = "A" if kind_a == "human" else "B"
        correct += choice == human_side
    return {"accuracy": correct / n if n else None, "n": n, "ties": 0}


def random_accuracy(n: int) -> dict:
    """Picking an answer at random is right half the time in expectation."""
    return {"accuracy": 0.5 if n else None, "n": n, "ties": 0}


# --- study filters ------------------------------------------------------------------------------

_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)$")


def _is_number(text: str) -> bool:
    return bool(_NUMBER.match(text.strip().replace(",", "").rstrip(".")))


def is_number_pair(candidate: str, references: Sequence[str]) -> bool:
    """Candidate and a reference are both plain numbers (MOCHA filters these on DROP, see
    `NUMBER_PAIR_DATASETS`: such unequal pairs were always judged wrong)."""
    return _is_number(candidate) and any(_is_number(r) for r in references)
