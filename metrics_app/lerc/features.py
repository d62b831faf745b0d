"""Cheap lexical features of a (candidate, references) pair, for the calibrated judge that is
stacked on the learned score (`calibration.py`). Pure Python, no Django.

Every feature is defined over all reference aliases (the best alias for "how much of a
reference the answer holds", the shortest for lengths), so a question with fourteen TriviaQA
aliases costs fourteen string comparisons, not fourteen model inputs.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence

from metrics_app.domain.text_match import contains_answer, squad_normalize, token_prf

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Words with which generated answers decline or hedge; such answers are judged wrong far more
# often whatever their overlap with the reference.
_HEDGES = re.compile(
    r"\b(?:sorry|cannot|can't|unable|not sure|unclear|unknown|no information|i don't know|"
    r"as an ai|not possible to|there is no|it is not|not specified|depends)\b",
    re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|none)\b", re.IGNORECASE)

FEATURE_NAMES = (
    "f1", "precision", "recall", "exact_match", "reference_in_candidate",
    "candidate_in_reference", "log_candidate_tokens", "log_reference_tokens",
    "numbers_match", "numbers_conflict", "hedge", "negation", "empty_candidate",
)


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text or "")}


def lexical_features(candidate: str, references: Sequence[str]) -> list[float]:
    """The values of FEATURE_NAMES, in that order."""
    references = [r for r in references if (r or "").strip()] or [""]
    prf = [token_prf(candidate, reference) for reference in references]
    normalized_candidate = squad_normalize(candidate)
    candidate_tokens = normalized_candidate.split()
    contained = max(contains_answer(candidate, reference) for reference in references)
    inside = float(bool(candidate_tokens) and any(
        f" {normalized_candidate} " in f" {squad_normalize(reference)} "
        for reference in references))
    exact = float(any(normalized_candidate == squad_normalize(r) for r in references))
    reference_tokens = min(len(squad_normalize(r).split()) for r in references)
    candidate_numbers = _numbers(candidate)
    reference_numbers = [_numbers(r) for r in references]
    numbers_match = float(any(nums and nums <= candidate_numbers for nums in reference_numbers))
    numbers_conflict = float(bool(candidate_numbers) and any(reference_numbers) and not any(
        nums & candidate_numbers for nums in reference_numbers))
    return [
        max(p[2] for p in prf),
        max(p[0] for p in prf),
        max(p[1] for p in prf),
        exact,
        contained,
        inside,
        math.log1p(len(candidate_tokens)),
        math.log1p(reference_tokens),
        numbers_match,
        numbers_conflict,
        float(bool(_HEDGES.search(candidate or ""))),
        float(bool(_NEGATION.search(candidate or ""))),
        float(not candidate_tokens),
    ]
