"""Features that read a long answer the way a person does: find the part that answers, judge
that part. Pure Python, no Django; the calibrated judge's inputs (`features.py`).

Whole-answer token F1 punishes a long answer for every word that is not the reference, so a
correct sentence ("The first Nobel Prize in Physics was awarded in 1901 to Wilhelm Röntgen")
scores like a wrong one. These features look at the answer's best-matching part instead:

- the best sentence (token F1 of each sentence against each alias, the maximum);
- the best window of the answer as long as the alias (sliding, token F1): how tightly the
  reference appears, not only whether its words are somewhere;
- where the reference first appears (0 at the start, 1 at the end; 1 when absent): a correct
  long answer states it early, a wrong one often mentions it among alternatives or late;
- whether every number of the reference (a year, a count) is in the answer's best sentence;
- how many alternatives the answer offers ("X or Y", lists), a hedge that overlap cannot see;
- the question's type (a date, a person, a place, a list), so the calibrator can weigh the
  others differently for each.

Each is a maximum over every reference alias, as in `features.py`.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from core.text_match import multiset_prf, squad_normalize

LONG_ANSWER_FEATURES = (
    "best_sentence_f1", "best_window_f1", "best_window_char3_f1",
    "reference_position", "reference_numbers_in_best_sentence", "alternatives",
    "date_question", "person_question", "place_question", "list_question",
    "long_answer_contains_reference",
)

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_ALTERNATIVE = re.compile(r"\b(?:or|either|possibly|maybe|perhaps|alternatively)\b",
                          re.IGNORECASE)
_DATE_QUESTION = re.compile(r"^\s*(?:when|what year|in what year|which year|what date|"
                            r"what day|what month|what century)\b|\b(?:year|date)\b",
                            re.IGNORECASE)
_PERSON_QUESTION = re.compile(r"^\s*(?:who|whom|whose)\b|\bwho\b", re.IGNORECASE)
_PLACE_QUESTION = re.compile(r"^\s*where\b|\b(?:which|what) (?:country|city|state|place)\b",
                             re.IGNORECASE)
_LIST_QUESTION = re.compile(r"\b(?:who (?:are|were)|what are|which are|list|name (?:the|all)|"
                            r"members|countries|states|players)\b", re.IGNORECASE)
# Answers of at most this many words are short: the whole answer is its own best part.
LONG_ANSWER_WORDS = 8


def sentences_of(text: str) -> list[str]:
    """The answer's sentences (split after . ! ? ; : and at line breaks), never empty."""
    parts = [part for part in _SENTENCE_END.split(text or "") if part.strip()]
    return parts or [text or ""]


def _char3(tokens: Sequence[str]) -> list[str]:
    padded = f" {' '.join(tokens)} "
    return [padded[i:i + 3] for i in range(max(1, len(padded) - 2))] if tokens else []


def _best_window(candidate_tokens: list[str], reference_tokens: list[str]
                 ) -> tuple[float, float, int]:
    """(best token F1, best character-3-gram F1, start of the best window) over the answer's
    windows as long as the reference; the whole answer when it is shorter."""
    width = len(reference_tokens)
    if not width or not candidate_tokens:
        return 0.0, 0.0, -1
    if len(candidate_tokens) <= width:
        windows = [(0, candidate_tokens)]
    else:
        reference_set = set(reference_tokens)
        # Only windows that start on a reference word can beat one that does not.
        starts = [i for i in range(len(candidate_tokens) - width + 1)
                  if candidate_tokens[i] in reference_set] or [0]
        windows = [(i, candidate_tokens[i:i + width]) for i in starts]
    best_f1, best_start, best_char = 0.0, -1, 0.0
    reference_char3 = _char3(reference_tokens)
    for start, window in windows:
        f1 = multiset_prf(window, reference_tokens)[2]
        if f1 > best_f1:
            best_f1, best_start = f1, start
        best_char = max(best_char, multiset_prf(_char3(window), reference_char3)[2])
    return best_f1, best_char, best_start


def _first_position(candidate_tokens: list[str], reference_tokens: list[str]) -> float:
    """Where the reference first occurs as whole words, 0 (start) to 1 (end); 1 if absent."""
    width = len(reference_tokens)
    if not width or len(candidate_tokens) < width:
        return 1.0
    last_start = len(candidate_tokens) - width
    for start in range(last_start + 1):
        if candidate_tokens[start:start + width] == reference_tokens:
            return start / last_start if last_start else 0.0
    return 1.0


def long_answer_features(candidate: str, references: Sequence[str],
                         question: str = "") -> list[float]:
    """The values of LONG_ANSWER_FEATURES, in that order (references already non-empty)."""
    candidate_tokens = squad_normalize(candidate).split()
    sentences = sentences_of(candidate)
    sentence_tokens = [squad_normalize(s).split() for s in sentences]
    best_sentence = window = window_char = 0.0
    position = 1.0
    numbers_in_sentence = 0.0
    for reference in references:
        reference_tokens = squad_normalize(reference).split()
        if not reference_tokens:
            continue
        scored = [(multiset_prf(tokens, reference_tokens)[2], text)
                  for tokens, text in zip(sentence_tokens, sentences, strict=True)]
        sentence_f1, sentence = max(scored, key=lambda pair: pair[0])
        best_sentence = max(best_sentence, sentence_f1)
        f1, char_f1, _start = _best_window(candidate_tokens, reference_tokens)
        window, window_char = max(window, f1), max(window_char, char_f1)
        position = min(position, _first_position(candidate_tokens, reference_tokens))
        numbers = set(_NUMBER.findall(reference.replace(",", "")))
        if numbers and numbers <= set(_NUMBER.findall(sentence.replace(",", ""))):
            numbers_in_sentence = 1.0
    long_answer = len(candidate_tokens) > LONG_ANSWER_WORDS
    return [
        best_sentence,
        window,
        window_char,
        position,
        numbers_in_sentence,
        float(len(_ALTERNATIVE.findall(candidate or ""))),
        float(bool(_DATE_QUESTION.search(question or ""))),
        float(bool(_PERSON_QUESTION.search(question or ""))),
        float(bool(_PLACE_QUESTION.search(question or ""))),
        float(bool(_LIST_QUESTION.search(question or ""))),
        # The reference inside a long answer, apart from inside a short one: the calibrator
        # is linear, and the two mean different things (a short answer that holds the
        # reference is nearly always right; a long one only when it commits to it).
        float(long_answer and position < 1.0),
    ]
