"""Tokenization, truncation, reference expansion, MC pre-training examples and batching."""
from __future__ import annotations

import pytest

from metrics_app.lerc.data import (
    InputTooLong,
    LercExample,
    encode_pair,
    encode_quadruple,
    expand_references,
    mc_pretraining_examples,
)


def _ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_layout_and_token_types(tokenizer):
    enc = encode_quadruple(tokenizer, passage="The cat sat.", question="Where?",
                           reference="on the mat", candidate="a mat", max_length=64)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    p, q, a, c = (_ids(tokenizer, t) for t in ("The cat sat.", "Where?", "on the mat", "a mat"))
    assert enc.input_ids == [cls, *p, sep, *q, sep, *a, sep, *c, sep]
    first = len(p) + len(q) + 3
    assert enc.token_type_ids == [0] * first + [1] * (len(a) + len(c) + 2)


def test_only_the_passage_is_truncated_from_its_end(tokenizer):
    passage = " ".join(f"word{i}" for i in range(200))
    question, reference = "Which word comes first in the list?", "word0 comes first"
    candidate = "the first is word0"
    enc = encode_quadruple(tokenizer, passage=passage, question=question, reference=reference,
                           candidate=candidate, max_length=48)
    assert len(enc) == 48
    tail = [*_ids(tokenizer, question), tokenizer.sep_token_id, *_ids(tokenizer, reference),
            tokenizer.sep_token_id, *_ids(tokenizer, candidate), tokenizer.sep_token_id]
    assert enc.input_ids[-len(tail):] == tail  # question, reference, candidate intact
    kept = enc.meta["passage_tokens_kept"]
    assert 0 < kept < len(_ids(tokenizer, passage))
    assert enc.input_ids[1:1 + kept] == _ids(tokenizer, passage)[:kept]  # the start survives


def test_question_and_answers_are_never_cut(tokenizer):
    long_candidate = " ".join(["answer"] * 80)
    with pytest.raises(InputTooLong):
        encode_quadruple(tokenizer, passage="p", question="q?", reference="r",
                         candidate=long_candidate, max_length=32)


def test_pair_encoding_cuts_only_the_answer(tokenizer):
    enc = encode_pair(tokenizer, question="Why is the sky blue?",
                      answer=" ".join(["because"] * 100), max_length=20)
    q = _ids(tokenizer, "Why is the sky blue?")
    assert len(enc) == 20
    assert enc.input_ids[1:1 + len(q)] == q
    assert enc.token_type_ids[: len(q) + 2] == [0] * (len(q) + 2)


def test_several_references_train_on_each():
    example = LercExample(question="q", references=("a", "b", "c"), candidate="x", score=4.0)
    expanded = expand_references([example])
    assert [e.references for e in expanded] == [("a",), ("b",), ("c",)]
    assert all(e.score == 4.0 for e in expanded)


def test_mc_pretraining_examples_three_way():
    examples = mc_pretraining_examples([("para", "q?", "right", ["w1", "w2", "w3"])])
    labels = sorted((e.answer1, e.answer2, e.label) for e in examples)
    assert ("right", "right", 2) in labels  # "both correct" by duplicating the correct answer
    assert ("right", "w1", 0) in labels and ("w1", "right", 1) in labels
    assert len(examples) == 3 * 2 + 1
