"""Examples and tokenization for LERC (no torch: the web processes build examples too; the
tensors are made in `batching.py`).

Input layout (the paper's):  [CLS] passage [SEP] question [SEP] reference [SEP] candidate [SEP]
Token types: 0 for [CLS] passage [SEP] question [SEP], 1 for reference [SEP] candidate [SEP], so
the context/question segment and the answers segment are told apart as in BERT sentence pairs.
Only the passage is shortened (from its end) to fit `max_length`: the question and both answers
are what is being judged, so cutting them would change the judged input.

"joined" references (`encode_joined`, the default since model format 2): every reference alias
in one segment, "a1 / a2 / …", so one input judges a candidate against all of them; there the
candidate's end is cut when nothing else fits (a judge must score every answer it is given).
"""
from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from annotation.domain.control_characters import without_invisible
from core.text_match import is_exact_match, squad_normalize

from .config import TrainConfig


class InputTooLong(ValueError):
    """Question + reference + candidate alone exceed the maximum length."""


@dataclass(frozen=True)
class LercExample:
    """One judged candidate. `score` is the gold (mean human) score; None when only scoring."""

    question: str
    references: tuple[str, ...]
    candidate: str
    passage: str = ""
    score: float | None = None
    id: str = ""
    dataset: str = ""
    group: str = ""
    source: str = ""  # the system that produced the candidate (an item's `source`)


@dataclass(frozen=True)
class PairExample:
    """A/B pair: `label` is the probability that answer A is preferred (1.0, 0.0 or a share)."""

    question: str
    answer_a: str
    answer_b: str
    label: float | None = None
    id: str = ""
    dataset: str = ""
    group: str = ""


@dataclass(frozen=True)
class McExample:
    """MC pre-training example: 0 = first answer correct, 1 = second, 2 = both correct."""

    passage: str
    question: str
    answer1: str
    answer2: str
    label: int


@dataclass
class Encoded:
    input_ids: list[int]
    token_type_ids: list[int]
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.input_ids)


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text or "", add_special_tokens=False)["input_ids"]


def encode_quadruple(tokenizer, *, passage: str, question: str, reference: str, candidate: str,
                     max_length: int) -> Encoded:
    """[CLS] p [SEP] q [SEP] a [SEP] â [SEP], cutting only the passage's end to fit."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    p, q, a, c = (_ids(tokenizer, t) for t in (passage, question, reference, candidate))
    fixed = len(q) + len(a) + len(c) + 5
    if fixed > max_length:
        raise InputTooLong(
            f"question, reference and candidate take {fixed} tokens, over the maximum "
            f"{max_length}; they are never truncated"
        )
    p = p[: max_length - fixed]
    first = [cls, *p, sep, *q, sep]
    second = [*a, sep, *c, sep]
    return Encoded(first + second, [0] * len(first) + [1] * len(second),
                   {"passage_tokens_kept": len(p)})


REFERENCE_SEPARATOR = " / "


def join_references(tokenizer, references: Sequence[str], max_tokens: int) -> list[int]:
    """Token ids of every reference alias in one segment, "a / b / c", stopping before the
    alias that would pass `max_tokens` (the first alias is always kept, cut if it must be).
    One input per candidate however many aliases a question lists (TriviaQA lists about 14),
    and the model sees all of them at once."""
    separator = _ids(tokenizer, REFERENCE_SEPARATOR.strip())
    joined: list[int] = []
    for reference in references:
        ids = _ids(tokenizer, reference)
        if not ids:
            continue
        extra = ([*separator, *ids] if joined else ids)
        if joined and len(joined) + len(extra) > max_tokens:
            break
        joined.extend(extra)
    return joined[:max_tokens]


def encode_joined(tokenizer, *, passage: str, question: str, references: Sequence[str],
                  candidate: str, max_length: int, max_reference_tokens: int = 64) -> Encoded:
    """[CLS] p [SEP] q [SEP] a1 / a2 / … [SEP] â [SEP] (token types as in encode_quadruple).

    To fit `max_length` the passage is cut first, then the candidate from its end: a long
    generated answer states its answer early, and a judge must still score it rather than skip
    it. Only a question too long on its own raises InputTooLong."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    p, q, c = (_ids(tokenizer, t) for t in (passage, question, candidate))
    a = join_references(tokenizer, references, max_reference_tokens)
    room_for_candidate = max_length - len(q) - len(a) - 5
    if room_for_candidate < min(len(c), 8):
        raise InputTooLong(
            f"question and references take {len(q) + len(a) + 5} tokens, leaving no room for "
            f"the candidate within the maximum {max_length}")
    cut = max(0, len(c) - room_for_candidate)
    c = c[: len(c) - cut] if cut else c
    p = p[: max(0, max_length - len(q) - len(a) - len(c) - 5)]
    first = [cls, *p, sep, *q, sep]
    second = [*a, sep, *c, sep]
    return Encoded(first + second, [0] * len(first) + [1] * len(second),
                   {"passage_tokens_kept": len(p), "candidate_tokens_cut": cut})


def encode_pair(tokenizer, *, question: str, answer: str, max_length: int) -> Encoded:
    """[CLS] question [SEP] answer [SEP] for the pairwise scorer; long answers (long-form QA) are
    cut from their end, the question never."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    q, a = _ids(tokenizer, question), _ids(tokenizer, answer)
    if len(q) + 3 > max_length:
        raise InputTooLong(f"question takes {len(q)} tokens, over the maximum {max_length}")
    a = a[: max_length - len(q) - 3]
    first = [cls, *q, sep]
    second = [*a, sep]
    return Encoded(first + second, [0] * len(first) + [1] * len(second))


def expand_references(examples: Iterable[LercExample]) -> list[LercExample]:
    """Training: one example per reference (several references each become a target)."""
    expanded = []
    for example in examples:
        for reference in example.references:
            expanded.append(
                LercExample(question=example.question, references=(reference,),
                            candidate=example.candidate, passage=example.passage,
                            score=example.score, id=example.id, dataset=example.dataset,
                            group=example.group)
            )
    return expanded


def encode_scored_examples(cfg: TrainConfig, tokenizer, examples: Sequence[LercExample]
                           ) -> tuple[list[Encoded], list[float], int]:
    """Training inputs of a regression model: (inputs, gold scores, skipped as too long).
    "joined": one input per candidate holding every alias; "each": one per reference."""
    inputs, targets, skipped = [], [], 0
    if cfg.max_references:
        examples = [replace(e, references=e.references[: cfg.max_references])
                    for e in examples]
    if cfg.reference_mode == "joined":
        for example in examples:
            try:
                inputs.append(encode_joined(
                    tokenizer, passage=example.passage, question=example.question,
                    references=example.references, candidate=example.candidate,
                    max_length=cfg.max_length, max_reference_tokens=cfg.max_reference_tokens))
            except InputTooLong:
                skipped += 1
                continue
            targets.append(float(example.score))
        return inputs, targets, skipped
    for example in expand_references(examples):
        try:
            inputs.append(encode_quadruple(
                tokenizer, passage=example.passage, question=example.question,
                reference=example.references[0], candidate=example.candidate,
                max_length=cfg.max_length))
        except InputTooLong:
            skipped += 1
            continue
        targets.append(float(example.score))
    return inputs, targets, skipped


def encode_preference_pairs(cfg: TrainConfig, tokenizer, pairs: Sequence[PairExample]
                            ) -> tuple[list[tuple[Encoded, Encoded]], list[float], int]:
    """Training inputs of a pairwise model: ((encoded A, encoded B), label, skipped)."""
    inputs, targets, skipped = [], [], 0
    for pair in pairs:
        try:
            inputs.append((
                encode_pair(tokenizer, question=pair.question, answer=pair.answer_a,
                            max_length=cfg.max_length),
                encode_pair(tokenizer, question=pair.question, answer=pair.answer_b,
                            max_length=cfg.max_length),
            ))
        except InputTooLong:
            skipped += 1
            continue
        targets.append(float(pair.label))
    return inputs, targets, skipped


# How an answer is written, not what it says: a label in front of it ("Answer: ...", "A:",
# "Final answer:", as generated answers and some datasets' exports carry) and markdown emphasis
# around its words. Judged as written, a label adds words no reference holds and made the judge
# stricter on 8 of 1,606 validation answers (docs/LERC.md, the format probe). Only a label
# followed by a colon counts: "A" or "Answer" alone may be the answer's own first word.
_ANSWER_LABEL = re.compile(r"^\s*(?:(?:the\s+)?final\s+answer|answer|ans\.?|a)\s*[:\uff1a]\s*",
                           re.IGNORECASE)
_EMPHASIS = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)


# Typography, not words: generating systems write curly quotes and apostrophes, en dashes and
# non-breaking spaces where datasets' references (and other systems) write the plain characters,
# "Guns N’ Roses" for "Guns N' Roses", "2001–2002" for "2001-2002": 3,639 of EVOUNA's 23,499
# judged answers hold one in the answer (2,525), its references (970) or its question (485).
# SQuAD normalization drops only ASCII punctuation, so the lexical inputs counted such a word as
# missing, and the encoder read other tokens. The table folds the quote, prime and dash forms
# that NFKC keeps (before NFKC, which would split an acute accent into a space and a combining
# mark); NFKC then folds the compatibility forms (non-breaking and full-width characters, "…").
_PLAIN_TYPOGRAPHY = str.maketrans({
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u00b4", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
})


# Small whole numbers are written both ways: "season 6" against a reference's "six", "seven"
# against "7". By a rough count, 94 of EVOUNA's judged answers hold a number in words where a
# reference holds it in digits or the other way round (83 of them judged correct). The judge
# reads the words as digits. "one" stays as written: it is a pronoun as often as a number ("the one who ..."). So
# does a word in a hyphenated number ("twenty-one" is 21, not 20-1; "thirty-two" is not 30-2).
SMALL_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                      "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
                      "sixteen", "seventeen", "eighteen", "nineteen", "twenty")
_TENS = ("thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred",
         "thousand")
_NUMBER_WORD_READ_AS_DIGITS = re.compile(
    r"(?<![\w-])(" + "|".join(w for w in SMALL_NUMBER_WORDS if w != "one") + r")"
    r"(?!\w|-(?:" + "|".join(SMALL_NUMBER_WORDS + _TENS) + r")\b)", re.IGNORECASE)


def _as_digits(found: re.Match) -> str:
    return str(SMALL_NUMBER_WORDS.index(found.group(1).lower()))


# A number with its thousands grouped by commas ("1,500", "2,000,000"), not a decimal's tail or
# a list of numbers without spaces ("1,23,456" is left as written).
GROUPED_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d]|,\d)")


def _ungrouped(found: re.Match) -> str:
    return found.group(0).replace(",", "")


def text_as_judged(text: str) -> str:
    """`text` in plain typography (`_PLAIN_TYPOGRAPHY`, then NFKC), without the characters that
    draw nothing (the platform's one rule, `without_invisible`: soft hyphens, zero-width
    spaces, direction marks), thousands without their commas (`GROUPED_THOUSANDS`: "1,500" is
    1500), small numbers in digits (`_NUMBER_WORD_READ_AS_DIGITS`): the form of every text the
    judge reads (question, references, answer, passage), so one word is one word however it was
    typeset, and one number one number however it was spelled."""
    text = text or ""
    if not text.isascii():
        text = unicodedata.normalize("NFKC",
                                     without_invisible(text.translate(_PLAIN_TYPOGRAPHY)))
    text = GROUPED_THOUSANDS.sub(_ungrouped, text)
    return _NUMBER_WORD_READ_AS_DIGITS.sub(_as_digits, text)


def answer_as_judged(candidate: str) -> str:
    """The candidate as the judge reads it: in plain typography, without a leading answer label
    and markdown emphasis markers. Anything else stays as written; a label with nothing after it
    stays."""
    text = _EMPHASIS.sub(r"\2", text_as_judged(candidate))
    unlabelled = _ANSWER_LABEL.sub("", text, count=1)
    return unlabelled if unlabelled.strip() else text


def is_exact_match_as_judged(candidate: str, references: Sequence[str]) -> bool:
    """Whether the served judge scores the answer by rule, without its encoder: an exact match
    of a reference as the judge reads both ("6" for "six", "Answer: Paris" for "Paris")."""
    return is_exact_match(answer_as_judged(candidate), [text_as_judged(r) for r in references])


def example_as_judged(example: LercExample) -> LercExample:
    """The example as the judge reads it: its answer by `answer_as_judged`, its question,
    references and passage by `text_as_judged`; the same object when nothing changes."""
    judged = {"candidate": answer_as_judged(example.candidate),
              "question": text_as_judged(example.question),
              "references": tuple(text_as_judged(r) for r in example.references),
              "passage": text_as_judged(example.passage)}
    changed = {name: value for name, value in judged.items()
               if value != getattr(example, name)}
    return replace(example, **changed) if changed else example


def examples_as_judged(examples: Iterable[LercExample]) -> list[LercExample]:
    """`example_as_judged` of each example: what training, calibration and scoring read, so
    that a version never learns or serves a label's words or a typesetter's characters. Other
    kinds of example (A/B pairs) pass unchanged."""
    return [example_as_judged(e) if isinstance(e, LercExample) else e for e in examples]


def capped_examples(cfg: TrainConfig, examples, cap: int | None = -1) -> list:
    """At most `cap` (default `cfg.max_train_examples`) examples: a seeded random subset kept in
    input order. The first N in item-id order would be the oldest items (often one dataset or
    one batch of annotation)."""
    cap = cfg.max_train_examples if cap == -1 else cap
    examples = list(examples)
    if not cap or len(examples) <= cap:
        return examples
    chosen = random.Random(cfg.seed).sample(range(len(examples)), cap)
    return [examples[i] for i in sorted(chosen)]


def mc_item_row(content: dict) -> tuple[str, str, str, list[str]] | None:
    """(passage, question, correct, wrong answers) of a multiple-choice item's content (answer A
    is the correct one, as OneStopQA and the MC importer store it); None with fewer than two
    answers."""
    answers = content.get("answers") or []
    if len(answers) < 2:
        return None
    return (content.get("paragraph", ""), content.get("question", ""), answers[0],
            list(answers[1:]))


def mc_pretraining_examples(
    items: Iterable[tuple[str, str, str, Sequence[str]]], *, seed: int = 0
) -> list[McExample]:
    """3-way examples from multiple-choice items (passage, question, correct, wrong answers).

    For each wrong answer: (correct, wrong) → first correct, (wrong, correct) → second correct;
    and per question (correct, correct) → both correct, made by duplicating the correct answer
    as the paper does for datasets with a single correct answer.
    """
    examples = []
    for passage, question, correct, wrong_answers in items:
        for wrong in wrong_answers:
            examples.append(McExample(passage, question, correct, wrong, 0))
            examples.append(McExample(passage, question, wrong, correct, 1))
        examples.append(McExample(passage, question, correct, correct, 2))
    random.Random(seed).shuffle(examples)
    return examples


# One definition of normalization and exact match for the whole project (re-exported here for
# the LERC code that imported them from this module).
normalize_answer = squad_normalize
