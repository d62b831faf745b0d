"""Who agrees with whom: annotator pairs and each annotator against the others.

- Pairs: for every two workers who judged at least `min_shared` of the same items (judgments
  that count, data stages), Cohen's κ (scikit-learn; Likert also quadratic-weighted on the
  1-5 scale), Krippendorff's α of the two (the project's level: interval for Likert, nominal
  for choices) and the confusion matrix (rows: the first worker's label, columns: the
  second's). The `max_pairs` pairs with the most shared items are listed.
- Workers: each worker's label against the majority label of the other workers on the same
  items (items where the others tie are left out): agreement rate and confusion matrix.
"""
from __future__ import annotations

import numpy as np

from annotation.domain.agreement import cohen_kappa_from_confusion, krippendorff_alpha
from annotation.judgment_selectors import CHOICE_DOMAIN, JudgmentFrame
from annotation.models import TaskKind, Worker

MIN_SHARED = 5
MAX_PAIRS = 200


def _labels(frame: JudgmentFrame, has: np.ndarray, domain: np.ndarray) -> list[str]:
    if frame.kind == TaskKind.LIKERT:
        return [format(float(value), "g") for value in domain]
    return [str(label) for label in np.union1d(CHOICE_DOMAIN, np.unique(frame.choice[has]))]


def annotator_pairs_report(frame: JudgmentFrame, *, min_shared: int = MIN_SHARED,
                           max_pairs: int = MAX_PAIRS) -> dict:
    has, index, domain = frame.coded_values()
    keep = has & frame.data_mask()
    labels = _labels(frame, has, domain)
    if frame.kind != TaskKind.LIKERT and keep.any():
        # Only the answers given (A/B projects never see C or D); Likert keeps its 1-5 scale.
        present = np.unique(index[keep])
        labels = [labels[i] for i in present]
        domain = domain[present]
        index = np.searchsorted(present, index)
    item, worker, label = _latest_per_item_and_worker(frame, keep, index)
    first_pos, second_pos = _pairs_within_items(item)
    codes, worker_code = np.unique(worker, return_inverse=True)
    n_workers = len(codes)
    pair_key = worker_code[first_pos] * n_workers + worker_code[second_pos]
    keys, pair_of_row, n_shared = np.unique(pair_key, return_inverse=True, return_counts=True)
    judged_by_several = np.bincount(item, minlength=item.max() + 1 if len(item) else 0)[item] > 1
    names = dict(Worker.objects.filter(pk__in=codes[np.unique(worker_code[judged_by_several])]
                                       .tolist()).values_list("pk", "external_id"))
    # Most shared items first, then by worker ids (keys order pairs by their workers' ids).
    eligible = np.flatnonzero(n_shared >= min_shared)
    chosen = eligible[np.lexsort((keys[eligible], -n_shared[eligible]))]
    rows_by_pair = np.argsort(pair_of_row, kind="stable")
    starts = np.concatenate([[0], np.cumsum(n_shared)])
    level = frame.default_level()
    pairs = []
    for pair in chosen[:max_pairs]:
        rows = rows_by_pair[starts[pair]:starts[pair + 1]]
        first, second = label[first_pos[rows]], label[second_pos[rows]]
        a, b = (int(codes[k]) for k in divmod(int(keys[pair]), n_workers))
        confusion = np.zeros((len(labels), len(labels)), dtype=int)
        np.add.at(confusion, (first, second), 1)
        values_a, values_b = domain[first], domain[second]
        row = {
            "a": names.get(a, str(a)), "b": names.get(b, str(b)), "n_shared": len(rows),
            "cohen_kappa": cohen_kappa_from_confusion(confusion),
            "alpha": krippendorff_alpha(np.vstack([values_a, values_b]), level,
                                        value_domain=domain),
            "agreement": float((first == second).mean()),
            "confusion": confusion.tolist(),
        }
        if frame.kind == TaskKind.LIKERT:
            row["weighted_kappa"] = cohen_kappa_from_confusion(confusion, weights="quadratic")
        pairs.append(row)
    return {"labels": labels, "min_shared": min_shared, "n_pairs": len(chosen),
            "pairs": pairs,
            "workers": _against_the_others(item, worker, label, len(labels), names)}


def _latest_per_item_and_worker(frame: JudgmentFrame, keep: np.ndarray, index: np.ndarray
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item position, worker id, label index) of each worker's latest counted judgment of each
    item, ordered by item and then worker id."""
    positions = np.flatnonzero(keep)
    item, worker = frame.item_pos[positions], frame.worker_id[positions]
    order = np.lexsort((frame.id[positions], worker, item))
    item, worker, positions = item[order], worker[order], positions[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = (item[1:] != item[:-1]) | (worker[1:] != worker[:-1])
    return item[last].astype(np.int64), worker[last].astype(np.int64), \
        index[positions[last]].astype(np.int64)


def _pairs_within_items(item: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (first, second) of every two judgments of the same item, the first with
    the lower worker id (rows are sorted by item, then worker). One vectorized step per
    distance between the two rows, so the cost follows the judgments, not the items."""
    firsts, seconds = [], []
    distance = 1
    while distance < len(item):
        same = np.flatnonzero(item[distance:] == item[:-distance])
        if not len(same):
            break
        firsts.append(same)
        seconds.append(same + distance)
        distance += 1
    if not firsts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    return np.concatenate(firsts), np.concatenate(seconds)


def _against_the_others(item: np.ndarray, worker: np.ndarray, label: np.ndarray,
                        n_labels: int, names: dict[int, str]) -> dict[str, dict]:
    """Each worker's label against the majority label of the other workers of the same item;
    items judged by one worker, and judgments whose others tie, are left out."""
    if not len(item):
        return {}
    counts = np.zeros((item.max() + 1, n_labels), dtype=np.int64)
    np.add.at(counts, (item, label), 1)
    several = counts.sum(axis=1)[item] > 1
    others = counts[item] - np.eye(n_labels, dtype=np.int64)[label]
    top = others.argmax(axis=1)
    ranked = np.sort(others, axis=1)
    tie = ranked[:, -1] == ranked[:, -2] if n_labels > 1 else np.zeros(len(item), dtype=bool)
    compared = several & ~tie
    codes, worker_code = np.unique(worker[compared], return_inverse=True)
    confusions = np.zeros((len(codes), n_labels, n_labels), dtype=int)
    np.add.at(confusions, (worker_code, label[compared], top[compared]), 1)
    result = {}
    for pk, confusion in zip(codes.tolist(), confusions, strict=True):
        n = int(confusion.sum())
        result[names.get(pk, str(pk))] = {
            "n": n, "agreement_with_majority": float(np.trace(confusion) / n),
            "confusion": confusion.tolist()}
    return result
