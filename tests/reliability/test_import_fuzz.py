"""Import fuzzing: every format fed mutated versions of a valid file (values of the wrong type,
missing keys, huge fields, unicode, raw garbage). An import either succeeds or stops with a
CommandError that explains itself; a failed import leaves the database exactly as it was.
Any other exception (KeyError, TypeError, DataError ...) is a bug the test reports."""
from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import pytest
from django.core.management.base import CommandError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.imports import AB_ROW, LIKERT_ROW, MC_ROW, db_state, run_import

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
_slugs = itertools.count()

# One valid document per format: (format, file name, extra arguments, document).
SEEDS = {
    "jsonl-likert": ("jsonl", "items.jsonl", ["--kind", "likert"], [LIKERT_ROW]),
    "jsonl-ab": ("jsonl", "items.jsonl", ["--kind", "ab"], [AB_ROW]),
    "jsonl-mc": ("jsonl", "items.jsonl", ["--kind", "mc"], [MC_ROW]),
    "mocha": ("mocha", "dev.json", [], {"narrativeqa": {"x1": {
        "context": "The cat sat.", "question": "Where?", "reference": "on the mat",
        "candidate": "mat", "score": 3, "metadata": {"source": "gpt2"}}}}),
    "evouna": ("evouna", "evouna_nq.json", [], [{
        "question": "Who?", "golden_answer": "Ann", "answer_fid": "Ann", "judge_fid": True,
        "improper": False}]),
    "lfqa-experts": ("lfqa-experts", "experts/Biology_1_Common20.json", [], [{
        "q_id": "x", "question_text": "Why?", "answer1": "a", "answer2": "b",
        "answer1_label": "HMH[9]", "BetterAnswer": "Answer A", "DifficultToChoose": "No.",
        "comments": "", "annotator": 1, "lead_time": 3.0, "id": 1}]),
}
TSV_HEADER = ["item_id", "paragraph", "question", "options", "new_options", "answer_response",
              "RT", "difficulty", "source", "submission_ind"]
TSV_ROW = ["os1_1_1_Ele", "P.", "Q?", "a|b|c|d", "0|1|2|3", "1", "100", "Ele", "Onestop", "1"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=6,
)
replacement = st.one_of(
    json_values,
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40),
    st.just("x" * 200_000),  # a huge field
    st.just("\u202e\u0000\ud7ff\U0001f600 <script>alert(1)</script>"),
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


@st.composite
def mutated(draw, document):
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(document) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]  # a missing key
        else:
            parent[path[-1]] = draw(replacement)
    return document


def _check(fmt: str, path: Path, extra: list[str]) -> None:
    slug = f"fuzz-{next(_slugs)}"
    before = db_state()
    try:
        run_import(fmt, str(path), "--project", slug, "--create", *extra)
    except CommandError as exc:
        message = str(exc)
        assert message.strip() and "Traceback" not in message
        assert db_state() == before, f"failed import changed the database: {message[:200]}"


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def _serialise(fmt: str, document) -> str:
    if fmt == "jsonl":
        return "".join(json.dumps(row) + "\n" for row in document)
    return json.dumps(document)


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_seed_documents_import(tmp_path, seed):
    """The seeds are valid, so the fuzzing below starts from files that do import."""
    fmt, name, extra, document = SEEDS[seed]
    before = db_state()["items"]
    run_import(fmt, str(_write(tmp_path, name, _serialise(fmt, document))), "--project",
               f"seed-{seed}", "--create", *extra)
    assert db_state()["items"] == before + 1


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_mutated_json_documents_fail_cleanly(tmp_path_factory, seed):
    fmt, name, extra, document = SEEDS[seed]
    folder = tmp_path_factory.mktemp(seed)

    @FUZZ
    @given(mutated(document))
    def run(doc):
        _check(fmt, _write(folder, name, _serialise(fmt, doc)), extra)

    run()


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_garbage_bytes_fail_cleanly(tmp_path_factory, seed):
    fmt, name, extra, _document = SEEDS[seed]
    folder = tmp_path_factory.mktemp(seed)

    @settings(FUZZ, max_examples=15)
    @given(st.binary(max_size=300) | st.text(max_size=300))
    def run(raw):
        data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
        _check(fmt, _write(folder, name, data), extra)

    run()


def test_mutated_tsv_rows_fail_cleanly(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tsv")
    cell = st.one_of(st.sampled_from(TSV_ROW), st.text(max_size=30), st.just("9" * 5000),
                     st.just("a\tb\nc"), st.just("x" * 200_000))

    @FUZZ
    @given(st.lists(cell, min_size=0, max_size=12), st.booleans())
    def run(cells, drop_header_column):
        header = TSV_HEADER[1:] if drop_header_column else TSV_HEADER
        text = "\t".join(header) + "\n" + "\t".join(cells) + "\n"
        _check("onestopqa-responses", _write(folder, "in_lab.tsv", text), [])

    run()


def test_nul_characters_are_refused_by_name_on_every_database(tmp_path):
    """PostgreSQL cannot store NUL in text or JSON; found by the fuzzing above (a DataError from
    COPY). Refused with a message on every database so both behave the same."""
    row = copy.deepcopy(LIKERT_ROW)
    row["content"]["question"] = "Where\x00?"
    before = db_state()
    with pytest.raises(CommandError, match=r"content\.question.*NUL"):
        run_import("jsonl", str(_write(tmp_path, "items.jsonl", _serialise("jsonl", [row]))),
                   "--project", "nul", "--create", "--kind", "likert")
    assert db_state() == before
