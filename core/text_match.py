"""Answer-string matching: the one definition of SQuAD normalization, exact match, token
precision/recall/F1, character n-grams and "the reference is contained in the answer". Pure Python, no Django, no
heavy imports: the baseline metrics (`metrics_app.metrics.baselines`), the LERC data code and its lexical features
all use these functions, so "exact match" means the same thing everywhere. MOCHA's rule of which
candidates are not sent out to annotators (`send_filter_reason`) is here too: the annotation app
sends items out by it and the metric report's study filters drop by it.
"""
from __future__ import annotations

import functools
import hashlib
import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
# str.translate deletes punctuation in one C pass (a character-by-character join was most of
# the lexical features' time).
_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)


def squad_normalize(text: str | None) -> str:
    """SQuAD answer normalization: lowercase, drop punctuation and articles, fold whitespace."""
    text = text or ""
    return _normalized_short(text) if len(text) <= _REMEMBERED_LENGTH else _normalized(text)


def _normalized(text: str) -> str:
    text = text.lower().translate(_DROP_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


# The lexical features normalize each alias once per feature and per answer (a TriviaQA question
# has about 14 aliases and several answers): recent short texts are remembered, at most about
# 16,384 × 256 characters, whatever the answers' length.
_REMEMBERED_LENGTH = 256
_normalized_short = functools.lru_cache(maxsize=16_384)(_normalized)


def forget_normalized_texts() -> None:
    """Forget the remembered normalizations (a benchmark's cold start)."""
    _normalized_short.cache_clear()


def exact_match(candidate: str, reference: str) -> float:
    return float(squad_normalize(candidate) == squad_normalize(reference))


def is_exact_match(candidate: str, references: Iterable[str]) -> bool:
    normalized = squad_normalize(candidate)
    return any(normalized == squad_normalize(reference) for reference in references)


def token_prf(candidate: str, reference: str) -> tuple[float, float, float]:
    """(precision, recall, F1) of normalized tokens, as the SQuAD script counts them; when
    either side is empty all three are 1 if both are, else 0."""
    cand_tokens = squad_normalize(candidate).split()
    ref_tokens = squad_normalize(reference).split()
    if not cand_tokens or not ref_tokens:
        same = float(cand_tokens == ref_tokens)
        return same, same, same
    return multiset_prf(cand_tokens, ref_tokens)


def multiset_prf(candidate_units: Iterable[str] | Counter, reference_units: Iterable[str] | Counter
                 ) -> tuple[float, float, float]:
    """(precision, recall, F1) of the units two texts share, counted with multiplicity (SQuAD's
    token overlap, or character n-grams); 0 when either side has none. Either side may be a
    Counter already (a long answer's n-grams, counted once for all of a question's aliases)."""
    candidate_counts = _counts(candidate_units)
    reference_counts = _counts(reference_units)
    # The overlap walks the smaller side only: a short alias against a long answer's n-grams.
    small, large = sorted((candidate_counts, reference_counts), key=len)
    overlap = sum(min(count, large[unit]) for unit, count in small.items() if unit in large)
    if overlap == 0:
        return 0.0, 0.0, 0.0
    precision = overlap / sum(candidate_counts.values())
    recall = overlap / sum(reference_counts.values())
    return precision, recall, 2 * precision * recall / (precision + recall)


def _counts(units: Iterable[str] | Counter) -> Counter:
    return units if isinstance(units, Counter) else Counter(units)


def char_ngrams(text: str, n: int) -> list[str]:
    """The character n-grams of the normalized text, padded with a space on each side (so a
    short word still has some); none for an empty text."""
    normalized = squad_normalize(text)
    if not normalized:
        return []
    padded = f" {normalized} "
    return [padded[i:i + n] for i in range(max(1, len(padded) - n + 1))]


def token_f1(candidate: str, reference: str) -> float:
    """SQuAD token F1 on normalized tokens; if either side is empty, 1 only if both are."""
    return token_prf(candidate, reference)[2]


def contains_answer(candidate: str, reference: str) -> float:
    """1 when the normalized reference occurs in the normalized candidate as whole words (the
    "reference contained in the answer" rule used to judge long generated answers), else 0.
    An empty reference is never contained."""
    ref = squad_normalize(reference)
    if not ref:
        return 0.0
    return float(f" {ref} " in f" {squad_normalize(candidate)} ")


def passage_group(group_key: str | None, passage: str | None, question: str | None) -> str:
    """The group an item's text belongs to: its `group_key` when the study set one, else its
    passage (or, without one, its question), case- and space-folded. Items of one group share
    a LERC split, so no passage is trained on and measured on; and a version that trained on a
    group has seen it, in whichever project the same text appears again."""
    if group_key:
        return f"key:{group_key}"
    text = passage or question or ""
    if not isinstance(text, str):  # a JSON value the study stored as a list or number
        text = str(text)
    return "text:" + hashlib.sha256(text.strip().lower().encode()).hexdigest()[:16]


# --- MOCHA's send filter: candidates that are not sent out to annotators ----------------------

# Datasets whose number-vs-number candidates are filtered. The MOCHA paper: "We also
# filtered out instances in DROP where the reference and the candidate are both numbers" -- only
# DROP; its other span datasets (Quoref, ROPES) kept such pairs and had them annotated.
NUMBER_PAIR_DATASETS = frozenset({"drop"})

_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)$")

# The reasons an item is not sent out, as its `exclusion_reason` says them; every one begins
# with SEND_FILTER_PREFIX, which tells the rule's exclusion from one a researcher made.
SEND_FILTER_PREFIX = "not sent out: "
EXACT_MATCH_REASON = (f"{SEND_FILTER_PREFIX}the candidate matches a reference exactly after "
                      "normalization (MOCHA)")
NUMBER_PAIR_REASON = (f"{SEND_FILTER_PREFIX}candidate and reference are both numbers on "
                      "{dataset} (MOCHA: such unequal pairs are always wrong)")


def _is_number(text: str) -> bool:
    return bool(_NUMBER.match(text.strip().replace(",", "").rstrip(".")))


def is_number_pair(candidate: str, references: Iterable[str]) -> bool:
    """Candidate and a reference are both plain numbers (MOCHA filters these on DROP, see
    `NUMBER_PAIR_DATASETS`: such unequal pairs were always judged wrong)."""
    return _is_number(candidate) and any(_is_number(r) for r in references)


def is_filtered_number_pair(dataset: str | None, candidate: str,
                            references: Iterable[str]) -> bool:
    """A number-vs-number pair on a dataset MOCHA filters them on (any case of its name)."""
    return ((dataset or "").lower() in NUMBER_PAIR_DATASETS
            and is_number_pair(candidate, references))


def send_filter_reason(*, dataset: str | None, candidate: Any, references: Any) -> str:
    """Why MOCHA would not send this candidate out to annotators (empty when it would): it
    matches a reference exactly after SQuAD normalization, or it and a reference are both
    numbers on a dataset of `NUMBER_PAIR_DATASETS`. Content that is not text (refused by the
    content check) is never filtered here."""
    if not isinstance(candidate, str) or not isinstance(references, list) or not all(
            isinstance(reference, str) for reference in references):
        return ""
    if is_exact_match(candidate, references):
        return EXACT_MATCH_REASON
    if is_filtered_number_pair(dataset, candidate, references):
        return NUMBER_PAIR_REASON.format(dataset=dataset)
    return ""
