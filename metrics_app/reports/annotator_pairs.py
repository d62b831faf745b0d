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

from collections import Counter, defaultdict
from itertools import combinations

import numpy as np

from annotation.domain.agreement import cohen_kappa, krippendorff_alpha
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
    # item → worker → label index (the latest judgment when a worker judged an item twice)
    by_item: dict[int, dict[int, int]] = defaultdict(dict)
    for position in np.flatnonzero(keep)[np.argsort(frame.id[keep], kind="stable")]:
        by_item[int(frame.item_pos[position])][int(frame.worker_id[position])] = int(
            index[position])
    shared: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for judged in by_item.values():
        for a, b in combinations(sorted(judged), 2):
            shared[(a, b)].append((judged[a], judged[b]))
    names = dict(Worker.objects.filter(pk__in={w for pair in shared for w in pair})
                 .values_list("pk", "external_id"))
    chosen = sorted(((pair, rows) for pair, rows in shared.items() if len(rows) >= min_shared),
                    key=lambda entry: (-len(entry[1]), entry[0]))
    level = frame.default_level()
    pairs = []
    for (a, b), rows in chosen[:max_pairs]:
        first = np.array([r[0] for r in rows])
        second = np.array([r[1] for r in rows])
        confusion = np.zeros((len(labels), len(labels)), dtype=int)
        np.add.at(confusion, (first, second), 1)
        values_a, values_b = domain[first], domain[second]
        row = {
            "a": names.get(a, str(a)), "b": names.get(b, str(b)), "n_shared": len(rows),
            "cohen_kappa": cohen_kappa(values_a, values_b),
            "alpha": krippendorff_alpha(np.vstack([values_a, values_b]), level,
                                        value_domain=domain),
            "agreement": float((first == second).mean()),
            "confusion": confusion.tolist(),
        }
        if frame.kind == TaskKind.LIKERT:
            row["weighted_kappa"] = cohen_kappa(values_a, values_b, weights="quadratic",
                                                labels=list(domain))
        pairs.append(row)
    return {"labels": labels, "min_shared": min_shared, "n_pairs": len(chosen),
            "pairs": pairs, "workers": _against_the_others(by_item, labels, names)}


def _against_the_others(by_item: dict[int, dict[int, int]], labels: list[str],
                        names: dict[int, str]) -> dict[str, dict]:
    confusions: dict[int, np.ndarray] = {}
    for judged in by_item.values():
        if len(judged) < 2:
            continue
        for worker, label in judged.items():
            others = Counter(value for other, value in judged.items() if other != worker)
            (top, count), *rest = others.most_common(2) + [(None, 0)]
            if rest and rest[0][1] == count:
                continue   # the others tie: no majority to compare with
            confusion = confusions.setdefault(
                worker, np.zeros((len(labels), len(labels)), dtype=int))
            confusion[label, top] += 1
    result = {}
    for worker, confusion in sorted(confusions.items()):
        n = int(confusion.sum())
        result[names.get(worker, str(worker))] = {
            "n": n, "agreement_with_majority": float(np.trace(confusion) / n) if n else None,
            "confusion": confusion.tolist()}
    return result
