"""Hostile import files (nested past the parser's limit, numbers no column holds, NaN and
Infinity) stop the import with a message naming file, record and field; nothing is written.
Before, they crashed: RecursionError, OverflowError, IntegrityError (JSON_VALID)."""
from __future__ import annotations

import copy
import json

import pytest

from annotation.domain.item_content import ItemContentError, validate_item_text
from annotation.importers.base import MAX_TIME_SPENT_MS
from tests.support.imports import AB_ROW, LIKERT_ROW, import_fails, run_import, write_jsonl

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

DEEP = 100_000


def _jsonl_args(path, kind="likert"):
    return ("jsonl", str(path), "--project", "p", "--create", "--kind", kind)


def test_content_nested_100000_levels_deep_in_jsonl(tmp_path):
    path = tmp_path / "deep.jsonl"
    line = json.dumps(LIKERT_ROW)
    path.write_text(line + "\n" + '{"external_id": "x", "content": ' + "[" * DEEP + "]" * DEEP
                    + "}\n")
    message = import_fails(*_jsonl_args(path), match="nested more than 64 levels")
    assert "deep.jsonl: record line 2: field 'line'" in message


def test_a_json_document_nested_100000_levels_deep(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text('{"narrativeqa": ' + "[" * DEEP + "]" * DEEP + "}")
    message = import_fails("mocha", str(path), "--project", "p", "--create",
                           match="nested more than 64 levels")
    assert "dev.json" in message


def test_a_time_spent_no_column_holds(tmp_path):
    row = copy.deepcopy(LIKERT_ROW)
    row["judgments"][1]["time_spent_ms"] = 10**30
    message = import_fails(*_jsonl_args(write_jsonl(tmp_path / "t.jsonl", [row])),
                           match=f"must be at most {MAX_TIME_SPENT_MS}")
    assert "t.jsonl: record line 1 (q1-c1): field 'judgments[1].time_spent_ms'" in message
    row["judgments"][1]["time_spent_ms"] = MAX_TIME_SPENT_MS
    assert "items: 1 created" in run_import(
        *_jsonl_args(write_jsonl(tmp_path / "t.jsonl", [row])))


def _lfqa_file(tmp_path, lead_time_text: str):
    folder = tmp_path / "experts"
    folder.mkdir(exist_ok=True)
    path = folder / "Biology_1_Common20.json"
    record = {"q_id": "x", "question_text": "Why?", "answer1": "a", "answer2": "b",
              "answer1_label": "HMH[9]", "BetterAnswer": "Answer A",
              "DifficultToChoose": "No.", "comments": "", "annotator": 1, "id": 7}
    path.write_text(json.dumps([record])[:-2] + f', "lead_time": {lead_time_text}}}]')
    return folder


@pytest.mark.parametrize("lead_time", ["1e300", "1e999", "-3", "NaN", "Infinity"])
def test_an_lfqa_lead_time_no_column_holds(tmp_path, lead_time):
    folder = _lfqa_file(tmp_path, lead_time)
    message = import_fails("lfqa-experts", str(folder), "--project", "p", "--create",
                           match="lead_time|NaN|Infinity")
    assert "Biology_1_Common20.json" in message
    if lead_time not in ("NaN", "Infinity"):  # those two may be refused when parsed
        assert "record 0 (id 7): field 'lead_time'" in message


@pytest.mark.parametrize(("where", "number"), [
    ("metadata", "NaN"), ("metadata", "1e999"), ("extra", "-Infinity"), ("extra", "1e999"),
    ("score", "1e999"),
])
def test_nan_or_infinity_in_metadata_or_judgments(tmp_path, where, number):
    row = copy.deepcopy(AB_ROW)
    placeholder = "__number__"
    if where == "metadata":
        row["metadata"] = {"x": [1, placeholder]}
    elif where == "extra":
        row["judgments"][0]["extra"] = {"rt": placeholder}
    else:
        row["judgments"][0]["score"] = placeholder
    path = tmp_path / "n.jsonl"
    path.write_text(json.dumps(row).replace(f'"{placeholder}"', number) + "\n")
    message = import_fails(*_jsonl_args(path, kind="ab"), match="NaN|Infinity")
    assert "n.jsonl: record line 1" in message
    if number == "1e999":  # read as infinity by every JSON parser; refused by the record check
        field = {"metadata": "metadata.x[1]", "extra": "judgments[0].extra.rt",
                 "score": "judgments[0].score"}[where]
        assert f"field {field!r}: must be a finite number" in message


def test_the_item_rule_refuses_non_finite_numbers_for_every_door():
    with pytest.raises(ItemContentError, match=r"gold\.weights\[0\]: must be a finite number"):
        validate_item_text({"gold": {"choice": "A", "weights": [float("inf")]}})


def test_a_file_with_large_floats_imported_twice_creates_nothing_the_second_time(tmp_path):
    # PostgreSQL's jsonb gives 1.5e24 back as the whole number 1500000000000000000000000,
    # which == never found equal to the float in the file: the second import of the same
    # file was refused there as "different content" / "a different judgment".
    row = copy.deepcopy(LIKERT_ROW)
    row["content"]["retrieval_score"] = 2.5e30
    row["metadata"] = {"tokens": 1e23}
    row["judgments"][0]["extra"] = {"model_loss": 1.5e24, "scores": [1e23, 0.1, 7]}
    path = write_jsonl(tmp_path / "items.jsonl", [row])
    run_import("jsonl", str(path), "--project", "big", "--create", "--kind", "likert")
    again = run_import("jsonl", str(path), "--project", "big")
    assert "nothing new: this data was imported before" in again
    changed = copy.deepcopy(row)
    changed["judgments"][0]["extra"]["model_loss"] = 1.6e24
    import_fails("jsonl", str(write_jsonl(tmp_path / "changed.jsonl", [changed])),
                 "--project", "big", match="already has a different judgment")
