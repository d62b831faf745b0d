"""Judgments made from judgments: label-preserving rewrites of judged answers, for the
calibrated judge (and, optionally, the encoder) to learn what must not change a verdict.

A small judge fitted on EVOUNA learns that a long answer is a suspicious answer: whole-answer
precision and F1 fall with every word that is not the reference, and most long answers in its
validation data come from two systems. On answers from other systems, a correct sentence that
states the entity ("Dolly Parton first recorded it in 1973") is then judged wrong: the issue's
strictness (216 correct answers judged wrong against 77 the other way). Each rule below rewrites
a judged answer in a way a person judging correctness would not care about, so the rewrite keeps
the human label ("labelled by the rule that produced it"):

- `embed`: the answer inside a longer sentence or two (neutral frames and fillers that name no
  entity and no number), so length alone stops counting against it;
- `alias`: a reference alias the answer states, swapped for another alias of the same question
  (TriviaQA lists about 14 per question);
- `number`: a number written another way: "1,500" / "1500", "7" / "seven", "September 5, 2016"
  / "5 September 2016".

An incorrect answer stays incorrect under every rule (an embedded wrong entity is still wrong;
a swapped alias only appears in answers that state a reference). Pure Python, seeded, no Django.
Which rules are used, and how much an augmented judgment weighs, were chosen on validation
judgments (docs/LERC.md, "Semantic inputs, rewrites, and where the judge still lost").
"""
from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .config import AUGMENT_RULES
from .data import GROUPED_THOUSANDS, SMALL_NUMBER_WORDS

RULES = AUGMENT_RULES

# Neutral frames: none names an entity, a number, a hedge or a negation (those change verdicts).
_FRAMES = (
    "The answer is {a}.",
    "{A}.",
    "It is {a}.",
    "The correct answer to this question is {a}.",
    "Based on the information available, the answer to the question \"{q}\" is {a}.",
    "In response to the question of {q}, the answer would be {a}.",
    "{A} is the answer to that question.",
    "That would be {a}, according to the commonly cited sources.",
)
_FILLERS = (
    "This is widely reported in reliable sources.",
    "Sources generally agree on this point.",
    "This information comes from commonly cited references.",
    "Further details can be found in standard reference works.",
    "This has been documented in several published accounts.",
    "It is mentioned in most encyclopedic entries on the subject.",
)
_FRAMED_UP_TO = 5  # words; a longer answer reads as a sentence of its own
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_MONTH = "(" + "|".join(_MONTHS) + ")"
_MONTH_DAY_YEAR = re.compile(_MONTH + r" (\d{1,2}),? (\d{4})")
_DAY_MONTH_YEAR = re.compile(r"(\d{1,2}) " + _MONTH + r",? (\d{4})")
# The judge's own reading of a grouped number (`data.GROUPED_THOUSANDS`), so a rewrite ungroups
# exactly what the judge would read ungrouped.
_GROUPED = GROUPED_THOUSANDS
_PLAIN_THOUSANDS = re.compile(r"\b(?<![.,])\d{4,}(?![.,]\d)\b")
_SMALL_DIGIT = re.compile(r"(?<![\d.,])\b(\d|1\d|20)\b(?![.,]?\d)")
_SMALL_WORD = re.compile(r"\b(" + "|".join(SMALL_NUMBER_WORDS) + r")\b", re.IGNORECASE)
# A four-digit number that reads as a year is left alone ("1500" may be a year; "1,500" never).
_YEAR_LIKE = re.compile(r"^1[0-9]{3}$|^20[0-9]{2}$")


@dataclass(frozen=True)
class Rewrite:
    """One augmented answer: which judged answer it came from (its index), by which rule."""

    origin: int
    candidate: str
    rule: str


def rewrites(candidates: Sequence[str], references: Sequence[Sequence[str]],
             questions: Sequence[str] | None = None, rules: Sequence[str] = RULES,
             seed: int = 0) -> list[Rewrite]:
    """Label-preserving rewrites of the judged answers, at most one per rule per answer (a rule
    that does not apply to an answer makes none), in input order; seeded."""
    unknown = [rule for rule in rules if rule not in RULES]
    if unknown:
        raise ValueError(f"unknown augmentation rules: {', '.join(unknown)} "
                         f"(known: {', '.join(RULES)})")
    rng = random.Random(seed)
    questions = questions or [""] * len(candidates)
    made = []
    for index, (candidate, refs, question) in enumerate(
            zip(candidates, references, questions, strict=True)):
        if not (candidate or "").strip():
            continue  # an empty answer is judged by rule, never by the calibrator
        for rule in rules:
            text = _APPLY[rule](candidate, refs, question or "", rng)
            if text and text.strip() != candidate.strip():
                made.append(Rewrite(index, text, rule))
    return made


def embedded(candidate: str, _references, question: str, rng: random.Random) -> str:
    """The answer inside a neutral frame, with zero to two neutral filler sentences after it;
    an answer that is already a sentence (more than `_FRAMED_UP_TO` words) keeps its words and
    gets one or two fillers before or after it."""
    answer = " ".join(candidate.split()).rstrip(".")
    if len(answer.split()) > _FRAMED_UP_TO:
        fillers = rng.sample(_FILLERS, rng.choice((1, 2)))
        return " ".join([*fillers, answer + "."] if rng.random() < 0.5
                        else [answer + ".", *fillers])
    frame = rng.choice(_FRAMES)
    asked = " ".join(question.split()).rstrip("?").strip()
    if "{q}" in frame and not asked:
        frame = "The answer is {a}."
    text = frame.format(a=answer, A=answer[:1].upper() + answer[1:],
                        q=asked[:1].lower() + asked[1:])
    fillers = rng.sample(_FILLERS, rng.choice((0, 1, 2)))
    return " ".join([text, *fillers])


def alias_swapped(candidate: str, references: Sequence[str], _question, rng: random.Random
                  ) -> str | None:
    """The first alias (longest first) the answer states, replaced by another alias; None when
    the answer states none or the question has one alias."""
    distinct = {r.strip().lower(): r.strip() for r in references if r and r.strip()}
    aliases = sorted(distinct.values(), key=len, reverse=True)
    if len(aliases) < 2:
        return None
    for alias in aliases:
        found = re.search(r"(?<!\w)" + re.escape(alias) + r"(?!\w)", candidate, re.IGNORECASE)
        if found:
            others = [a for a in aliases if a.lower() != alias.lower()]
            return candidate[:found.start()] + rng.choice(others) + candidate[found.end():]
    return None


def number_reformatted(candidate: str, _references, _question, _rng) -> str | None:
    """One number or date of the answer written another way; None when it has none."""
    for pattern, rewrite in _NUMBER_REWRITES:
        found = pattern.search(candidate)
        if found:
            replacement = rewrite(found)
            if replacement is not None:
                return candidate[:found.start()] + replacement + candidate[found.end():]
    return None


def _month_day_year(found: re.Match) -> str:
    return f"{int(found.group(2))} {found.group(1)} {found.group(3)}"


def _day_month_year(found: re.Match) -> str:
    return f"{found.group(2)} {int(found.group(1))}, {found.group(3)}"


def _ungrouped(found: re.Match) -> str:
    return found.group(0).replace(",", "")


def _grouped(found: re.Match) -> str | None:
    digits = found.group(0)
    return None if _YEAR_LIKE.match(digits) else f"{int(digits):,}"


def _digit_to_word(found: re.Match) -> str:
    return SMALL_NUMBER_WORDS[int(found.group(1))]


def _word_to_digit(found: re.Match) -> str | None:
    word = found.group(1).lower()
    # "one" is a pronoun as often as a number ("the one who ..."): left alone.
    return None if word == "one" else str(SMALL_NUMBER_WORDS.index(word))


def numbers_in_words(text: str) -> str:
    """Every whole number from 0 to 20 standing alone written as a word ("6" -> "six")."""
    return _SMALL_DIGIT.sub(_digit_to_word, text)


def numbers_in_digits(text: str) -> str:
    """Every small number word but "one" written in digits ("six" -> "6")."""
    return _SMALL_WORD.sub(lambda found: _word_to_digit(found) or found.group(0), text)


# One pass over a text, so a date or a number is rewritten once and never back again.
_ANY_DATE = re.compile(f"(?:{_MONTH_DAY_YEAR.pattern})|(?:{_DAY_MONTH_YEAR.pattern})")
_ANY_THOUSANDS = re.compile(f"({_GROUPED.pattern})|(?:{_PLAIN_THOUSANDS.pattern})")


def dates_reordered(text: str) -> str:
    """Every full date written in the other order ("July 4, 1776" <-> "4 July 1776")."""
    def one(found: re.Match) -> str:
        month, day, year, day_first, month_second, year_second = found.groups()
        if month:
            return f"{int(day)} {month} {year}"
        return f"{month_second} {int(day_first)}, {year_second}"

    return _ANY_DATE.sub(one, text)


def thousands_regrouped(text: str) -> str:
    """Every number of four digits or more with its thousands grouped the other way ("1,500"
    <-> "1500"); a number that reads as a year stays as written."""
    def one(found: re.Match) -> str:
        if found.group(1):
            return _ungrouped(found)
        return _grouped(found) or found.group(0)

    return _ANY_THOUSANDS.sub(one, text)


_NUMBER_REWRITES = (
    (_MONTH_DAY_YEAR, _month_day_year),
    (_DAY_MONTH_YEAR, _day_month_year),
    (_GROUPED, _ungrouped),
    (_PLAIN_THOUSANDS, _grouped),
    (_SMALL_DIGIT, _digit_to_word),
    (_SMALL_WORD, _word_to_digit),
)
_APPLY = {"embed": embedded, "alias": alias_swapped, "number": number_reformatted}
