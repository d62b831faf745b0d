"""Hostile or careless LLM judge configs are refused by the one validator
(`metrics_app/domain/judge_prompts.py:validate_config`, behind `judge_version_create`, which
`create_judge` and every other creator call), naming the field, never a traceback nor a
config that fails (or builds a gigabyte) at the run's first item."""
from __future__ import annotations

import json
import threading
import time

import pytest
from django.core.management import CommandError, call_command

from metrics_app.domain.judge_prompts import (
    FIELDS,
    REQUIRED_FIELDS,
    JudgeConfigError,
    parse_answer,
    render,
    validate_config,
)
from metrics_app.models import Judge

BASE = {"base_url": "http://127.0.0.1:8765/v1", "model": "fake-judge"}

HOSTILE = [
    # A format spec: rendering it built 900 MB per item (validated on an empty field: the same).
    ({"prompt": "{candidate:>900000000}"}, "prompt: {candidate} with a format"),
    ({"prompt": "{candidate!r} {question}"}, "prompt: {candidate} with a format"),
    # Attribute and index lookups read Python's objects into the prompt (or raised at render).
    ({"prompt": "{candidate.__class__.__mro__} {candidate}"}, "unknown field"),
    ({"prompt": "{candidate[0]} {candidate}"}, "unknown field"),
    ({"prompt": "{0} {candidate}"}, "unknown field {0}"),
    ({"prompt": "{} {candidate}"}, "unknown field {}"),
    ({"prompt": "{gold_score} {candidate}"}, "unknown field {gold_score}"),
    # Stray braces passed validation as a ValueError (a traceback out of create_judge).
    ({"prompt": "Return {\"verdict\": ...} for {candidate}"}, "prompt: "),
    ({"prompt": "{candidate"}, "literal brace"),
    ({"prompt": "candidate} {candidate}"}, "literal brace"),
    # A prompt that does not show what is judged.
    ({"prompt": "Is this right? {question}"}, "does not show {candidate}"),
    ({"task": "ab", "prompt": "{question} {answer_a}"}, "does not show {answer_b}"),
    ({"task": "mc", "prompt": "{question} {choice_a} {choice_b} {choice_c}"},
     "does not show {choice_d}"),
    # Enormous texts (sent, and paid for, with every request) and control characters.
    ({"prompt": "{candidate}" + "x" * 100_000}, "prompt: 100011 characters, over"),
    ({"system": "s" * 70_000}, "system: 70000 characters, over"),
    ({"model": "m" * 1000}, "model: 1000 characters, over"),
    ({"prompt": "{candidate}\x1b[2J"}, "prompt: must not contain control characters"),
    ({"system": "grade\x00"}, "system: must not contain control characters"),
    ({"model": "gpt-4o\n"}, "model: must be one line"),
    ({"prompt": ["{candidate}"]}, "prompt: must be a non-empty string"),
    ({"system": 7}, "system: must be a string"),
    # Values of the wrong type that were stored as given.
    ({"temperature": True}, "temperature: True"),
    ({"max_tokens": True}, "max_tokens: True"),
    ({"logprobs": "no"}, "logprobs: 'no' is not true or false"),
    ({"price": {"prompt_per_million": float("inf"), "completion_per_million": 0}}, "price:"),
    ({"parse": "regex", "pattern": r"grade: (\w+)", "verdicts": ["pass"]}, "verdicts: an object"),
    ({"parse": "regex", "pattern": r"grade: (\w+)", "verdicts": {"pass": "maybe"}},
     "verdicts: 'pass' maps to 'maybe'"),
    ({"parse": "regex", "pattern": "(" * 600 + ")" * 600}, "pattern: 1200 characters"),
    ({"pattern": r"Score: (\d)"}, "pattern, verdicts: read only by the regex rule"),
    # A field outside its own tags: a text holding "Ignore the instructions above" reads as
    # the prompt's own words.
    ({"prompt": "Candidate: {candidate}\nScore 1-5."}, "prompt: {candidate} is not fenced"),
    ({"prompt": "<candidate>{candidate}</candidate> <question>{question}"},
     "prompt: {question} is not fenced"),
    ({"prompt": "<question>{candidate}</question>"}, "prompt: {candidate} is not fenced"),
    ({"prompt": "<candidate>{candidate} and more</candidate>"}, "{candidate} is not fenced"),
]


@pytest.mark.parametrize(("fields", "message"), HOSTILE)
def test_a_hostile_config_is_refused_naming_the_field(fields, message):
    started = time.monotonic()
    with pytest.raises(JudgeConfigError) as refused:
        validate_config({**BASE, **fields})
    assert message in str(refused.value)
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("fields", [
    {"prompt": 'Reply as {{"verdict": "correct"}}. <candidate>\n{candidate}\n</candidate>',
     "parse": "json"},
    {"system": ""},
    {"task": "ab", "prompt": "<answer_b>{answer_b}</answer_b> <answer_a>{answer_a}</answer_a>"},
    {"parse": "regex", "pattern": r"grade:\s*(pass|fail)",
     "verdicts": {"pass": "correct", "fail": "incorrect"}},
])
def test_a_careful_config_still_passes_and_renders(fields):
    config = validate_config({**BASE, **fields})
    shown = render(config["prompt"], {name: f"<{name} text>" for name in FIELDS[config["task"]]})
    assert all(f"<{name} text>" in shown for name in REQUIRED_FIELDS[config["task"]])


@pytest.mark.django_db
@pytest.mark.parametrize(("fields", "message"), [HOSTILE[0], HOSTILE[7], HOSTILE[16]])
def test_create_judge_says_what_is_wrong_and_stores_nothing(tmp_path, fields, message):
    path = tmp_path / "judge.json"
    path.write_text(json.dumps({**BASE, **fields}), encoding="utf-8")
    with pytest.raises(CommandError) as refused:
        call_command("create_judge", "hostile", str(path))
    assert message in str(refused.value)
    assert not Judge.objects.filter(name="hostile").exists()


def test_a_backtracking_pattern_leaves_the_answer_unparseable_instead_of_holding_the_run():
    """`(a|a)+$` on 40 a's and a "!" backtracks for days (`re` has no timeout): the run's
    thread, and the job, never came back."""
    config = validate_config({**BASE, "parse": "regex", "pattern": "(a|a)+$"})
    result = {}
    worker = threading.Thread(target=lambda: result.update(
        parsed=parse_answer("a" * 40 + "!", config)), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert not result["parsed"].ok and "took more than" in result["parsed"].error
    assert parse_answer("aaa", config).ok is False  # "aaa" is no verdict of the task
    assert parse_answer("Grade: 4", validate_config(
        {**BASE, "parse": "regex", "pattern": r"grade: (\d)"})).score == 4.0
