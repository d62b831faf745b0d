"""Cheap lexical features of a (candidate, references) pair, for the calibrated judge that is
stacked on the learned score (`calibration.py`). Pure Python, no Django.

Every feature is defined over all reference aliases (the best alias for "how much of a
reference the answer holds", the shortest for lengths), so a question with fourteen TriviaQA
aliases costs fourteen string comparisons, not fourteen model inputs.

The question-aware and character features (`QUESTION_AND_CHARACTER_FEATURES`) were added after
the first protocol run (docs/LERC.md): character 3- and 4-gram overlap forgives spelling
variants, plurals and word forms that token F1 counts as misses, and dropping the question's own
words from the answer stops an answer that echoes the question from scoring overlap it did not
earn. They were chosen by the validation judgments' leave-one-system-out accuracy, which rose on
every protocol run (e.g. 0.889 to 0.918 on the main split); the test splits were not looked at
to choose them.

The long-answer features (`spans.LONG_ANSWER_FEATURES`: the answer's best sentence and best
window against each alias, where the reference first appears, question types) are computed only
for a calibrator that names them (`lexical_features(..., names=...)`); see `spans.py` and
docs/LERC.md for what they did on validation.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from core.text_match import (
    char_ngrams,
    contains_answer,
    multiset_prf,
    squad_normalize,
    token_prf,
)

from .spans import LONG_ANSWER_FEATURES, long_answer_features

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Words with which generated answers decline or hedge; such answers are judged wrong far more
# often whatever their overlap with the reference.
_HEDGES = re.compile(
    r"\b(?:sorry|cannot|can't|unable|not sure|unclear|unknown|no information|i don't know|"
    r"as an ai|not possible to|there is no|it is not|not specified|depends)\b",
    re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|none)\b", re.IGNORECASE)
# Questions whose answer is a number or a date: a different number there is a wrong answer.
_NUMERIC_QUESTION = re.compile(
    r"^\s*(?:how many|how much|how long|how old|how far|when|what year|in what year|"
    r"which year|what date)\b", re.IGNORECASE)

BASE_FEATURES = (
    "f1", "precision", "recall", "exact_match", "reference_in_candidate",
    "candidate_in_reference", "log_candidate_tokens", "log_reference_tokens",
    "numbers_match", "numbers_conflict", "hedge", "negation", "empty_candidate",
)
QUESTION_AND_CHARACTER_FEATURES = (
    "f1_without_question_words", "precision_without_question_words",
    "recall_without_question_words", "char3_f1", "char3_recall", "numeric_question",
    "echoes_question", "char3_precision", "char4_recall", "char4_f1",
)
# The inputs a calibrator is fitted on unless told otherwise (`calibration.fit_calibrator`).
DEFAULT_FEATURES = BASE_FEATURES + QUESTION_AND_CHARACTER_FEATURES
# What the packaged sentence encoder reads (`semantic.py`): the meaning of the reference in
# the answer, where a long answer states it in other words. Computed there (torch) and handed
# to `lexical_features` as numbers.
SEMANTIC_FEATURES = ("semantic_recall", "semantic_precision", "semantic_f1", "semantic_cosine")
# What `lexical_features` computes from the strings alone.
LEXICAL_FEATURE_NAMES = DEFAULT_FEATURES + LONG_ANSWER_FEATURES
# A logistic regression weighs a feature the same in a 2-word and a 40-word answer, but the
# same overlap means different things there: a long answer's precision is low whether it is
# right or wrong, while whether it holds the reference (recall, containment, the semantic
# recall) and whether it hedges or negates decide. `long_answer` ramps from 0 at 3 words to 1
# at 20 (log scale, the protocol's length buckets), and each `long_x_<feature>` is that ramp
# times the feature, so the judge can weigh those inputs apart for long answers.
LENGTH_INTERACTION_BASES = (
    "recall", "precision", "reference_in_candidate", "recall_without_question_words",
    "char4_recall", "hedge", "negation", "semantic_recall", "semantic_cosine",
)
LENGTH_INTERACTION_FEATURES = ("long_answer",) + tuple(
    f"long_x_{name}" for name in LENGTH_INTERACTION_BASES)
_LONG_FROM, _LONG_TO = math.log1p(3), math.log1p(20)
# Every feature a calibrator may name, in a fixed order (a saved calibrator names its own).
FEATURE_NAMES = LEXICAL_FEATURE_NAMES + SEMANTIC_FEATURES + LENGTH_INTERACTION_FEATURES
# Named input sets (`fit_calibrator(feature_names=FEATURE_SETS[name])`, the protocol's
# `--calibrator-features`). "long-answer" adds the four long-answer features that did best on the
# validation judgments (docs/LERC.md, "Long answers"); it is not the default because it did not
# win there by more than a couple of answers in 2,000.
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "default": DEFAULT_FEATURES,
    "long-answer": DEFAULT_FEATURES + ("best_sentence_f1", "best_window_f1", "alternatives",
                                       "long_answer_contains_reference"),
    "all": LEXICAL_FEATURE_NAMES,
    # The served default since issue 37 (docs/LERC.md, "Semantic inputs, rewrites, and where
    # the judge still lost"): the default inputs and the four semantic ones, which raised the
    # held-out-system accuracy on the validation answers of all 8 protocol runs (+0.4 to +1.8).
    "semantic": DEFAULT_FEATURES + SEMANTIC_FEATURES,
    # The served inputs and their length interactions (see LENGTH_INTERACTION_BASES).
    "semantic-length": DEFAULT_FEATURES + SEMANTIC_FEATURES + LENGTH_INTERACTION_FEATURES,
}
SERVED_FEATURE_SET = "semantic"


def reads_semantic(names: Sequence[str]) -> bool:
    """Whether inputs named `names` need the semantic encoder's values."""
    return any(name in SEMANTIC_FEATURES or name.removeprefix("long_x_") in SEMANTIC_FEATURES
               for name in names)


def _length_interactions(values: dict[str, float]) -> dict[str, float]:
    """`long_answer` and each `long_x_<feature>` named in LENGTH_INTERACTION_FEATURES, from
    the other values (the semantic bases only when those were given)."""
    longness = min(1.0, max(0.0, (values["log_candidate_tokens"] - _LONG_FROM)
                            / (_LONG_TO - _LONG_FROM)))
    interactions = {"long_answer": longness}
    interactions.update({f"long_x_{name}": longness * values[name]
                         for name in LENGTH_INTERACTION_BASES if name in values})
    return interactions


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text or "")}


def lexical_features(candidate: str, references: Sequence[str], question: str = "",
                     names: Sequence[str] | None = None,
                     semantic: Sequence[float] | None = None) -> list[float]:
    """The values of `names` (default `DEFAULT_FEATURES`), in that order; each must be one of
    FEATURE_NAMES. The long-answer group is computed only when one of its features is named;
    the semantic ones are not computed here but taken from `semantic` (`SemanticEncoder`'s row
    for this answer, in `SEMANTIC_FEATURES` order), which they then need."""
    names = DEFAULT_FEATURES if names is None else names
    references = [r for r in references if (r or "").strip()] or [""]
    values = dict(zip(DEFAULT_FEATURES, _base_features(candidate, references)
                      + _question_and_character_features(candidate, references, question or ""),
                      strict=True))
    if any(name in LONG_ANSWER_FEATURES for name in names):
        values.update(zip(LONG_ANSWER_FEATURES,
                          long_answer_features(candidate, references, question or ""),
                          strict=True))
    if reads_semantic(names):
        if semantic is None:
            raise ValueError("these calibrator inputs name semantic features "
                             f"({', '.join(SEMANTIC_FEATURES)}): pass the semantic encoder's "
                             "values (metrics_app.lerc.semantic.SemanticEncoder.features)")
        values.update(zip(SEMANTIC_FEATURES, (float(v) for v in semantic), strict=True))
    if any(name in LENGTH_INTERACTION_FEATURES for name in names):
        values.update(_length_interactions(values))
    return [values[name] for name in names]


def _base_features(candidate: str, references: list[str]) -> list[float]:
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


def _question_and_character_features(candidate: str, references: list[str],
                                     question: str) -> list[float]:
    question_words = set(squad_normalize(question).split())
    candidate_tokens = squad_normalize(candidate).split()
    candidate_char3 = Counter(char_ngrams(candidate, 3))
    candidate_char4 = Counter(char_ngrams(candidate, 4))
    without_question = char3 = char4 = (0.0, 0.0, 0.0)
    for reference in references:
        reference_tokens = squad_normalize(reference).split()
        # A question word stays when the reference holds it too ("Lake Victoria" for "which
        # lake ...").
        kept = [t for t in candidate_tokens if t not in question_words or t in reference_tokens]
        without_question = max(without_question, multiset_prf(kept, reference_tokens),
                               key=lambda prf: prf[2])
        char3 = max(char3, multiset_prf(candidate_char3, char_ngrams(reference, 3)),
                    key=lambda prf: prf[2])
        char4 = max(char4, multiset_prf(candidate_char4, char_ngrams(reference, 4)),
                    key=lambda prf: prf[1])
    echoes_question = bool(candidate_tokens) and all(t in question_words for t in candidate_tokens)
    return [
        without_question[2],
        without_question[0],
        without_question[1],
        char3[2],
        char3[1],
        float(bool(_NUMERIC_QUESTION.match(question))),
        float(echoes_question),
        char3[0],
        char4[1],
        char4[2],
    ]
