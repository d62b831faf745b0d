"""How far a judge (an LLM, imported verdicts, a metric, LERC) agrees with humans, on the items
humans labelled: pure numpy/scipy, no Django.

Every number comes with a 95% percentile-bootstrap interval over items. Two judges are compared
on the items both judged (McNemar's exact test on their correct/incorrect decisions, and a
paired bootstrap of the accuracy difference). Human-vs-human agreement on the same items
(each judgment against the majority of the others) is the ceiling a judge can be held to.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from core.statistics import finite_or_none, percentile_interval

from .meta_evaluation import correlations, decision_statistics

CONFIDENCE = 0.95
ECE_BINS = 10


def resample_indices(n: int, n_resamples: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(max(0, n_resamples), n))


def expected_calibration_error(probability: Sequence[float], labels: Sequence[int], *,
                               bins: int = ECE_BINS, n_resamples: int = 500,
                               seed: int = 0) -> dict:
    """ECE with equal-width bins (the share-weighted gap between mean probability and the
    observed rate), the reliability table behind it, and a bootstrap interval."""
    p = np.clip(np.asarray(probability, dtype=float), 0, 1)
    y = np.asarray(labels, dtype=float)
    n = len(p)
    if n == 0:
        return {"n": 0, "ece": None, "ci": [None, None], "bins": []}
    which = np.minimum((p * bins).astype(int), bins - 1)

    def ece(index: np.ndarray) -> float:
        count = np.bincount(which[index], minlength=bins)
        mean_p = np.bincount(which[index], weights=p[index], minlength=bins)
        rate = np.bincount(which[index], weights=y[index], minlength=bins)
        return float(np.abs(mean_p - rate).sum() / max(1, count.sum()))

    table = []
    for b in range(bins):
        members = which == b
        if members.any():
            table.append({"low": b / bins, "high": (b + 1) / bins, "n": int(members.sum()),
                          "mean_probability": float(p[members].mean()),
                          "observed": float(y[members].mean())})
    resampled = np.array([ece(idx) for idx in resample_indices(n, n_resamples, seed)])
    return {"n": n, "ece": ece(np.arange(n)), "ci": percentile_interval(resampled, CONFIDENCE),
            "bins": table}


def binary_alignment(*, rank: Sequence[float], threshold: float, labels: Sequence[int],
                     human_mean: Sequence[float], probability: Sequence[float] | None = None,
                     n_resamples: int = 1000, seed: int = 0) -> dict:
    """Accuracy, Cohen's κ, F1 and ROC AUC of "rank ≥ threshold means correct" against the
    human majority (labels 1/0), the confusion matrix, Pearson/Spearman of `rank` with the mean
    human score, and, with a probability, the expected calibration error; intervals on all."""
    rank = np.asarray(rank, dtype=float)
    labels = np.asarray(labels, dtype=int)
    decision = decision_statistics(rank, labels, threshold, n_resamples=n_resamples, seed=seed)
    predicted = rank >= threshold
    confusion = {"judge_correct_human_correct": int((predicted & (labels == 1)).sum()),
                 "judge_correct_human_incorrect": int((predicted & (labels == 0)).sum()),
                 "judge_incorrect_human_correct": int((~predicted & (labels == 1)).sum()),
                 "judge_incorrect_human_incorrect": int((~predicted & (labels == 0)).sum())}
    corr = correlations(rank, human_mean, n_resamples=n_resamples, kendall_resamples=20,
                        seed=seed)
    out = {"n": int(len(rank)), "threshold": threshold,
           "judge_positive_rate": finite_or_none(predicted.mean()) if len(rank) else None,
           "human_positive_rate": decision["positive_rate"],
           **{k: decision[k] for k in ("accuracy", "kappa", "f1", "roc_auc")},
           "pearson": corr["pearson"], "spearman": corr["spearman"],
           # Why a statistic is None, as the metric report says it (`correlations`,
           # `decision_statistics`).
           "undefined": {name: why for name, why in (
               ("kappa", decision["kappa_undefined"]), ("pearson", corr["undefined"]),
               ("spearman", corr["undefined"])) if why},
           "ci": {**{k: decision["ci"][k] for k in ("accuracy", "kappa", "f1", "roc_auc")},
                  "pearson": corr["ci"].get("pearson", [None, None]),
                  "spearman": corr["ci"].get("spearman", [None, None])},
           "confusion": confusion}
    if probability is not None:
        calibration = expected_calibration_error(probability, labels,
                                                 n_resamples=min(n_resamples, 500), seed=seed)
        out["ece"] = calibration["ece"]
        out["ci"]["ece"] = calibration["ci"]
        out["reliability"] = calibration["bins"]
    else:
        out["ece"] = None
    return out


def paired_comparison(correct_a: Sequence[bool], correct_b: Sequence[bool], *,
                      n_resamples: int = 1000, seed: int = 0) -> dict:
    """Judge A vs judge B on the same items: accuracy difference with a paired bootstrap
    interval, and McNemar's exact test on the items only one of them got right."""
    from scipy.stats import binomtest

    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    n = len(a)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    out = {"n": n, "accuracy_difference": None, "ci": [None, None], "only_a_right": only_a,
           "only_b_right": only_b, "mcnemar_p": None}
    if n == 0:
        return out
    diff = a.astype(float) - b.astype(float)
    out["accuracy_difference"] = finite_or_none(diff.mean())
    idx = resample_indices(n, n_resamples, seed)
    if len(idx):
        out["ci"] = percentile_interval(diff[idx].mean(axis=1), CONFIDENCE)
    discordant = only_a + only_b
    out["mcnemar_p"] = float(binomtest(only_a, discordant, 0.5).pvalue) if discordant else 1.0
    return out


def human_ceiling(judgments: dict[int, list[int]], *, n_resamples: int = 1000,
                  seed: int = 0) -> dict:
    """Each human judgment (1 correct / 0 not) against the majority of the item's other
    judgments, on items with at least two (ties among the others left out): the accuracy and
    κ a judge compared with a human majority can hope for. {n_items, n_pairs, accuracy,
    kappa, ci}, or n_items 0 when no item has two labels."""
    own, others = [], []
    items = 0
    for labels in judgments.values():
        if len(labels) < 2:
            continue
        items += 1
        total = sum(labels)
        for label in labels:
            rest_pos, rest_n = total - label, len(labels) - 1
            if 2 * rest_pos == rest_n:
                continue
            own.append(label)
            others.append(int(2 * rest_pos > rest_n))
    if not own:
        return {"n_items": items, "n_pairs": 0, "accuracy": None, "kappa": None,
                "kappa_undefined": "no item has two human labels",
                "ci": {"accuracy": [None, None], "kappa": [None, None]}}
    stats = decision_statistics(np.array(own, float), np.array(others), 0.5,
                                n_resamples=n_resamples, seed=seed)
    return {"n_items": items, "n_pairs": len(own), "accuracy": stats["accuracy"],
            "kappa": stats["kappa"], "kappa_undefined": stats["kappa_undefined"],
            "ci": {"accuracy": stats["ci"]["accuracy"], "kappa": stats["ci"]["kappa"]}}


def rate_gap(judge: Sequence[float], human: Sequence[float], *, n_resamples: int = 1000,
             seed: int = 0) -> dict:
    """Judge's positive rate minus the humans' on the same items, with a paired bootstrap
    interval: above 0 the judge is more lenient than the humans there."""
    j = np.asarray(judge, dtype=float)
    h = np.asarray(human, dtype=float)
    n = len(j)
    if n == 0:
        return {"n": 0, "judge_rate": None, "human_rate": None, "gap": None, "ci": [None, None]}
    diff = j - h
    idx = resample_indices(n, n_resamples, seed)
    return {"n": n, "judge_rate": finite_or_none(j.mean()), "human_rate": finite_or_none(h.mean()),
            "gap": finite_or_none(diff.mean()),
            "ci": (percentile_interval(diff[idx].mean(axis=1), CONFIDENCE) if len(idx)
                   else [None, None])}


def length_bias(lengths: Sequence[float], judge: Sequence[float], human: Sequence[float], *,
                judge_positive: Sequence[float] | None = None,
                human_positive: Sequence[float] | None = None,
                n_resamples: int = 500, seed: int = 0) -> dict:
    """Does the judge favour longer answers more than the humans? Spearman(length, judge)
    minus Spearman(length, human) on the same items with a paired bootstrap interval (> 0:
    more than the humans), and the judge's and the humans' positive rates per length tercile:
    the shares of items each calls correct (`judge_positive`, `human_positive`: 1/0 per item;
    by default `judge` and `human` themselves, when they are such calls). The rates are never
    means of the graded values: beside a judge's rate of 0.51, the humans' mean score of 4.11
    on the 1-5 scale read as their "rate"."""
    from scipy.stats import rankdata

    length = np.asarray(lengths, dtype=float)
    j = np.asarray(judge, dtype=float)
    h = np.asarray(human, dtype=float)
    n = len(length)
    out = {"n": n, "spearman_length_judge": None, "spearman_length_human": None,
           "difference": None, "ci": [None, None], "favours_longer": None, "terciles": []}
    if n < 10 or np.ptp(length) == 0:
        return out

    def spearman(x, y):
        rx, ry = rankdata(x), rankdata(y)
        if np.ptp(rx) == 0 or np.ptp(ry) == 0:
            return math.nan
        return float(np.corrcoef(rx, ry)[0, 1])

    sj, sh = spearman(length, j), spearman(length, h)
    diffs = np.array([spearman(length[i], j[i]) - spearman(length[i], h[i])
                      for i in resample_indices(n, n_resamples, seed)])
    ci = percentile_interval(diffs, CONFIDENCE)
    out.update(spearman_length_judge=finite_or_none(sj), spearman_length_human=finite_or_none(sh),
               difference=finite_or_none(sj - sh), ci=ci,
               favours_longer=None if ci[0] is None else bool(ci[0] > 0))
    j_pos = j if judge_positive is None else np.asarray(judge_positive, dtype=float)
    h_pos = h if human_positive is None else np.asarray(human_positive, dtype=float)
    edges = np.quantile(length, [1 / 3, 2 / 3])
    tercile = np.searchsorted(edges, length, side="right")
    for t, name in enumerate(("short", "medium", "long")):
        members = tercile == t
        if members.any():
            out["terciles"].append({
                "tercile": name, "n": int(members.sum()),
                "max_words": finite_or_none(length[members].max()),
                "judge_rate": finite_or_none(j_pos[members].mean()),
                "human_rate": finite_or_none(h_pos[members].mean())})
    return out


def position_bias(first_shown_chosen: Sequence[bool], consistent: Sequence[bool], *,
                  n_resamples: int = 1000, seed: int = 0) -> dict:
    """A/B judges asked in both orders: how often the answer shown first wins (0.5 = no
    position bias) and how often both orders pick the same side, with intervals."""
    first = np.asarray(first_shown_chosen, dtype=float)
    same = np.asarray(consistent, dtype=float)
    out = {"n_answers": len(first), "first_position_rate": None, "ci_first": [None, None],
           "n_pairs": len(same), "position_consistency": None, "ci_consistency": [None, None]}
    if len(first):
        out["first_position_rate"] = finite_or_none(first.mean())
        out["ci_first"] = percentile_interval(
            first[resample_indices(len(first), n_resamples, seed)].mean(axis=1), CONFIDENCE)
    if len(same):
        out["position_consistency"] = finite_or_none(same.mean())
        out["ci_consistency"] = percentile_interval(
            same[resample_indices(len(same), n_resamples, seed)].mean(axis=1), CONFIDENCE)
    return out
