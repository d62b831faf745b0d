"""Likert score distributions per dataset and per generation source."""
from __future__ import annotations

import numpy as np

from annotation.judgment_selectors import JudgmentFrame


def _distribution(scores: np.ndarray, domain: np.ndarray) -> dict:
    n = len(scores)
    counts = {str(int(v)) if float(v).is_integer() else str(v): int((scores == v).sum())
              for v in domain}
    return {
        "n": n,
        "mean": float(scores.mean()) if n else None,
        "counts": counts,
        "shares": {k: (c / n if n else None) for k, c in counts.items()},
    }


def likert_report(frame: JudgmentFrame) -> dict:
    """{"distribution": {dataset: {...}}, "by_source": {source: {...}}, "all": {...}}; the
    shares are fractions of the judgments of that group with each score."""
    mask = frame.data_mask() & ~np.isnan(frame.score)
    scores = frame.score[mask]
    _has, _index, domain = frame.coded_values()
    report = {"all": _distribution(scores, domain), "distribution": {}, "by_source": {}}
    for field, key in (("dataset", "distribution"), ("source", "by_source")):
        labels, codes = frame.codes(field)
        codes = codes[mask]
        for code in np.unique(codes):
            report[key][labels[code] or "(none)"] = _distribution(scores[codes == code], domain)
    return report
