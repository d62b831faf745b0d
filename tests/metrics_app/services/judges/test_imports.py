"""Verdicts imported from JSONL/CSV: stored as one judge version, or refused as a whole with
every problem named (metrics_app/services/judges/imports.py, command import_verdicts)."""
from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import TaskKind
from metrics_app.models import Judge, JudgeVerdict
from metrics_app.services.judges.imports import VerdictImportError, verdicts_import
from testing.factories import make_item, make_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    project = make_project(TaskKind.LIKERT, slug="imp")
    for n in range(4):
        make_item(project, external_id=f"q{n}")
    return project


def _jsonl(tmp_path, rows, name="v.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_jsonl_verdicts_are_stored_as_the_named_version(project, tmp_path):
    path = _jsonl(tmp_path, [
        {"item_id": "q0", "verdict": "correct", "probability": 0.9, "reasoning": "same"},
        {"item_id": "q1", "verdict": "no", "score": 2},
        {"item_id": "q2", "score": 4.5},
    ])
    result = verdicts_import(project=project, path=path, judge="gpt-x", version="2024-05")
    assert result == {"judge": "gpt-x", "version": "2024-05", "label": "gpt-x@2024-05",
                      "imported": 3, "unchanged": 0}
    rows = {r.item.external_id: r for r in JudgeVerdict.objects.select_related("item")}
    assert (rows["q0"].verdict, rows["q0"].probability, rows["q0"].reasoning) == \
        ("correct", 0.9, "same")
    assert (rows["q1"].verdict, rows["q1"].score) == ("incorrect", 2.0)
    assert (rows["q2"].verdict, rows["q2"].score) == ("", 4.5)
    assert Judge.objects.get(name="gpt-x").kind == "imported"


def test_csv_with_judge_columns(project, tmp_path):
    path = tmp_path / "v.csv"
    path.write_text("item_id,verdict,probability,judge,judge_version\n"
                    "q0,correct,0.7,ext,1\nq3,incorrect,,ext,1\n", encoding="utf-8")
    out = StringIO()
    call_command("import_verdicts", "imp", str(path), stdout=out)
    assert "ext@1: 2 verdicts imported" in out.getvalue()
    assert JudgeVerdict.objects.get(item__external_id="q3").probability is None


@pytest.mark.parametrize("rows, message", [
    ([{"item_id": "nope", "verdict": "correct"}], "item_id 'nope' is not an item of imp"),
    ([{"item_id": "q0", "verdict": "correct"}, {"item_id": "q0", "verdict": "incorrect"}],
     "item_id 'q0' again (first on line 1)"),
    ([{"item_id": "q0", "score": 7}], "score 7 is outside 1..5"),
    ([{"item_id": "q0", "probability": -0.1}], "probability -0.1 is outside 0..1"),
    ([{"item_id": "q0", "probability": "NaN"}], "not finite"),
    ([{"item_id": "q0", "verdict": "maybe"}], "'maybe' is not one of correct, incorrect"),
    ([{"item_id": "q0", "score": True}], "score True is not a number"),
    ([{"item_id": "q0", "verdict": "correct", "probability": False}],
     "probability False is not a number"),
    ([{"item_id": "q0"}], "no verdict, score or probability"),
    ([{"verdict": "correct"}], "no item_id"),
    ([{"item_id": "q0", "verdict": "correct", "reasoning": "ok\x00"}],
     "line 1: reasoning must not contain control characters (found U+0000 (NUL))"),
])
def test_bad_rows_are_named_and_nothing_is_stored(project, tmp_path, rows, message):
    good = [{"item_id": "q3", "verdict": "correct"}]
    path = _jsonl(tmp_path, good + rows)
    with pytest.raises(VerdictImportError) as caught:
        verdicts_import(project=project, path=path, judge="j", version="1")
    assert message.replace("line 1", "line 2") in str(caught.value)
    assert "nothing imported" in str(caught.value)
    assert not JudgeVerdict.objects.exists() and not Judge.objects.exists()


def test_every_problem_is_listed_at_once(project, tmp_path):
    path = _jsonl(tmp_path, [{"item_id": f"x{n}", "verdict": "correct"} for n in range(3)])
    with pytest.raises(VerdictImportError) as caught:
        verdicts_import(project=project, path=path, judge="j", version="1")
    assert len(caught.value.errors) == 3


def test_broken_files_and_missing_names(project, tmp_path):
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"item_id": "q0", "verdict": "correct"}\n{oops\n', encoding="utf-8")
    with pytest.raises(VerdictImportError, match="line 2: not JSON"):
        verdicts_import(project=project, path=broken, judge="j", version="1")
    with pytest.raises(VerdictImportError, match="no judge version"):
        verdicts_import(project=project, path=_jsonl(tmp_path, [{"item_id": "q0",
                                                                  "verdict": "correct"}]),
                        judge="j")
    xlsx = tmp_path / "v.xlsx"
    xlsx.write_text("x", encoding="utf-8")
    with pytest.raises(VerdictImportError, match="jsonl or .csv"):
        verdicts_import(project=project, path=xlsx, judge="j", version="1")
    headerless = tmp_path / "h.csv"
    headerless.write_text("id,verdict\nq0,correct\n", encoding="utf-8")
    with pytest.raises(CommandError, match="the CSV header has no column\\(s\\) item_id"):
        call_command("import_verdicts", "imp", str(headerless), "--judge", "j",
                     "--judge-version", "1")
    assert not JudgeVerdict.objects.exists()


@pytest.mark.parametrize("judge, version", [("gpt 4", "1"), ("gpt@paper", "1"),
                                            ("gpt.4", "1"), ("metric:f1", "1"), ("x" * 101, "1"),
                                            ("gpt", "v 1"), ("gpt", "1@2"), ("gpt", "v" * 51)])
def test_a_judge_that_could_never_be_named_is_refused(project, tmp_path, judge, version):
    """A judge stored as "gpt 4", "gpt@paper" or "gpt.4" was kept, but no door could name it
    again (estimates_judge and routing_judge refuse the reference; "gpt@paper" read as version
    "paper" of "gpt"). The file's columns are checked alike, and nothing is stored."""
    path = _jsonl(tmp_path, [{"item_id": "q0", "verdict": "correct"}])
    with pytest.raises(VerdictImportError, match="a judge name is letters"):
        verdicts_import(project=project, path=path, judge=judge, version=version)
    columns = _jsonl(tmp_path, [{"item_id": "q0", "verdict": "correct", "judge": judge,
                                 "judge_version": version}], name="c.jsonl")
    with pytest.raises(CommandError, match="a judge name is letters"):
        call_command("import_verdicts", "imp", str(columns))
    assert not Judge.objects.exists() and not JudgeVerdict.objects.exists()


def test_create_judge_refuses_a_name_no_door_could_name(tmp_path):
    config = tmp_path / "judge.json"
    config.write_text(json.dumps({"base_url": "http://127.0.0.1:1/v1", "model": "m"}),
                      encoding="utf-8")
    with pytest.raises(CommandError, match="a judge name is letters"):
        call_command("create_judge", "my judge", str(config), stdout=StringIO())
    assert not Judge.objects.exists()
    call_command("create_judge", "my-judge_2", str(config), stdout=StringIO())
    assert Judge.objects.get().name == "my-judge_2"


@pytest.mark.reliability
def test_the_same_file_again_stores_nothing_and_other_verdicts_are_refused(project, tmp_path):
    """A re-run of the same import (a script run twice) is no error and stores nothing; other
    verdicts under the version it holds are refused as a whole, whichever door."""
    rows = [{"item_id": "q0", "verdict": "correct", "probability": 0.8, "reasoning": "r"},
            {"item_id": "q1", "score": 2}]
    path = _jsonl(tmp_path, rows)
    verdicts_import(project=project, path=path, judge="j", version="1")
    again = verdicts_import(project=project, path=path, judge="j", version="1")
    assert (again["imported"], again["unchanged"]) == (0, 2)
    out = StringIO()
    call_command("import_verdicts", "imp", str(path), "--judge", "j", "--judge-version", "1",
                 stdout=out)
    assert "j@1: 0 verdicts imported on imp (2 already imported, unchanged)" in out.getvalue()
    changed = _jsonl(tmp_path, [{**rows[0], "verdict": "incorrect"}, rows[1]], "c.jsonl")
    with pytest.raises(VerdictImportError, match="already holds other verdicts"):
        verdicts_import(project=project, path=changed, judge="j", version="1")
    fewer = _jsonl(tmp_path, rows[:1], "f.jsonl")
    with pytest.raises(CommandError, match="already holds other verdicts"):
        call_command("import_verdicts", "imp", str(fewer), "--judge", "j",
                     "--judge-version", "1")
    assert sorted(JudgeVerdict.objects.values_list("item__external_id", "verdict")) == \
        [("q0", "correct"), ("q1", "")]


def test_ab_verdicts_per_order(tmp_path):
    project = make_project(TaskKind.AB, slug="ab-imp")
    make_item(project, external_id="p0")
    path = _jsonl(tmp_path, [{"item_id": "p0", "order": "AB", "verdict": "a"},
                             {"item_id": "p0", "order": "BA", "verdict": "B"}])
    verdicts_import(project=project, path=path, judge="j", version="1")
    assert sorted(JudgeVerdict.objects.values_list("order", "verdict")) == \
        [("AB", "A"), ("BA", "B")]
    with pytest.raises(VerdictImportError, match="not one of A, B"):
        verdicts_import(project=project, path=_jsonl(tmp_path, [
            {"item_id": "p0", "verdict": "C"}], "c.jsonl"), judge="j", version="2")


@pytest.mark.parametrize("first, second", [({}, {"order": "AB"}), ({"order": "ab"}, {})])
def test_an_ab_verdict_without_an_order_and_one_in_order_ab_are_the_same_item_twice(
        tmp_path, first, second):
    """A missing order counts as shown AB, so these two rows are conflicting verdicts on the
    same showing; the refusal names both lines."""
    project = make_project(TaskKind.AB, slug="ab-dup")
    make_item(project, external_id="p0")
    path = _jsonl(tmp_path, [{"item_id": "p0", "verdict": "A", **first},
                             {"item_id": "p0", "verdict": "B", **second}])
    with pytest.raises(VerdictImportError) as refused:
        verdicts_import(project=project, path=path, judge="j", version="1")
    assert "line 2: item_id 'p0' in order AB" in str(refused.value)
    assert "first on line 1" in str(refused.value)
    assert not JudgeVerdict.objects.exists()
    # A missing order is stored as missing (the leaderboard fits no position effect then).
    verdicts_import(project=project, path=_jsonl(tmp_path, [
        {"item_id": "p0", "verdict": "A"}, {"item_id": "p0", "order": "BA", "verdict": "A"}],
        "ok.jsonl"), judge="j", version="2")
    assert sorted(JudgeVerdict.objects.values_list("order", flat=True)) == ["", "BA"]


def test_ab_rows_with_only_a_score_beside_rows_with_a_verdict_are_refused(tmp_path):
    """On A/B items a score has no threshold that makes it a verdict, so a file mixing the two
    could not be compared item by item: refused, naming the first such lines."""
    project = make_project(TaskKind.AB, slug="ab-mixed")
    for n in range(3):
        make_item(project, external_id=f"p{n}")
    path = _jsonl(tmp_path, [{"item_id": "p0", "verdict": "A"},
                             {"item_id": "p1", "score": 0.7},
                             {"item_id": "p2", "score": 0.2}])
    with pytest.raises(VerdictImportError, match="line 2: a score without a verdict or "
                                                 "probability, while line 1 gives one"):
        verdicts_import(project=project, path=path, judge="j", version="1")
    assert not JudgeVerdict.objects.exists()
    # Scores alone (the report picks a threshold on validation questions) are accepted.
    verdicts_import(project=project, path=_jsonl(tmp_path, [
        {"item_id": "p1", "score": 0.7}, {"item_id": "p2", "score": 0.2}], "s.jsonl"),
        judge="j", version="2")
    assert JudgeVerdict.objects.count() == 2


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_a_reasoning_holding_a_unicode_line_separator_is_one_line(project, tmp_path, separator):
    # Valid JSON (only characters below U+0020 must be escaped), as a judge's output may be;
    # str.splitlines cut the line there and the file was refused as "not JSON".
    path = tmp_path / "v.jsonl"
    path.write_text(json.dumps({"item_id": "q0", "verdict": "correct",
                                "reasoning": f"first{separator}second"}, ensure_ascii=False)
                    + "\n" + json.dumps({"item_id": "q1", "verdict": "no"}) + "\n",
                    encoding="utf-8")
    assert verdicts_import(project=project, path=path, judge="j", version="1")["imported"] == 2
    assert JudgeVerdict.objects.get(item__external_id="q0").reasoning == \
        f"first{separator}second"


@pytest.mark.parametrize("line, message", [
    ('{"item_id": "q0", "verdict": "correct", "reasoning": "a\\ud800b"}', "lone surrogate"),
    ('{"item_id": "q0", "verdict": "correct", "x": ' + "[" * 5000 + "]" * 5000 + "}",
     "nested more than"),
    ('{"item_id": "q0", "item_id": "q1", "verdict": "correct"}', "'item_id' appears twice"),
])
def test_verdict_lines_are_read_by_the_json_rule_of_every_door(project, tmp_path, line, message):
    path = tmp_path / "v.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(VerdictImportError, match=message) as info:
        verdicts_import(project=project, path=path, judge="j", version="1")
    assert "line 1" in str(info.value)
    assert not JudgeVerdict.objects.exists()


@pytest.mark.reliability
@pytest.mark.parametrize("name, text, message", [
    ("v.jsonl", '{"item_id": "q0", "verdict": "correct", "probabilty": 0.9}\n',
     "line 1: unknown column(s) 'probabilty' (known: item_id, verdict, score, probability"),
    ("v.csv", "item_id,verdict,prob\nq0,correct,0.9\n",
     "the CSV header has unknown column(s) 'prob'"),
    ("v.csv", "item_id,verdict,verdict\nq0,correct,incorrect\n",
     "the CSV header names 'verdict' twice"),
    ("v.csv", "item_id,verdict\nq0,correct,0.9\n",
     "line 2: 1 more cell(s) than the header has columns"),
])
def test_a_column_that_would_be_dropped_or_overwritten_is_refused(project, tmp_path, name, text,
                                                                  message):
    """A misspelt `probability` was dropped without a word (the judge then read by its
    verdicts alone); a CSV column named twice kept its last cell, where a JSON key given twice
    is refused; a cell past the header's columns was dropped."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(VerdictImportError, match=re.escape(message)):
        verdicts_import(project=project, path=path, judge="j", version="1")
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("import_verdicts", "imp", str(path), "--judge", "j", "--judge-version", "1")
    assert not JudgeVerdict.objects.exists() and not Judge.objects.exists()


def test_a_csv_with_a_bom_crlf_and_an_empty_trailing_column_is_read(project, tmp_path):
    path = tmp_path / "v.csv"
    path.write_bytes("\ufeffitem_id,verdict,score,\r\nq0,correct,4,\r\nq1,no,,\r\n"
                     .encode("utf-8"))
    assert verdicts_import(project=project, path=path, judge="j", version="1")["imported"] == 2
    assert sorted(JudgeVerdict.objects.values_list("verdict", "score")) == \
        [("correct", 4.0), ("incorrect", None)]


@pytest.mark.reliability
def test_an_item_with_imported_verdicts_keeps_the_content_they_judged(project, tmp_path):
    """An imported judge cannot be asked again: once its verdicts are on an item, the item's
    content is fixed by the item rule every door that edits an item asks (`item_edit_errors`),
    as it is once metric scores are computed from it. Before, the text could be changed under the
    verdicts, which went on counting in the judge's accuracy against the humans."""
    from annotation.services.items import item_edit_errors

    item = project.items.get(external_id="q0")
    other = project.items.get(external_id="q1")
    verdicts_import(project=project, path=_jsonl(tmp_path, [
        {"item_id": "q0", "verdict": "correct"}]), judge="ext", version="1")
    changed = {**item.content, "candidate": "something else"}
    assert "imported verdicts (ext@1)" in item_edit_errors(
        item=item, changes={"content": changed})["content"]
    assert item_edit_errors(item=other, changes={"content": {**other.content, "x": 1}}) == {}


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_utf16_verdict_file_with_its_mark_is_read_as_item_files_are(project, tmp_path,
                                                                      encoding):
    # Notepad's "Unicode" and Excel's "Unicode text" save UTF-16 with a byte-order mark: the
    # item importers read it (`decode_text`); the verdict reader refused it as undecodable.
    path = tmp_path / "v.csv"
    body = "item_id,verdict,reasoning\r\nq0,correct,café ✓\r\nq1,no,\r\n"
    path.write_bytes((body if encoding == "utf-16" else "\ufeff" + body).encode(encoding))
    assert verdicts_import(project=project, path=path, judge="j", version="1")["imported"] == 2
    assert JudgeVerdict.objects.get(item__external_id="q0").reasoning == "café ✓"


def test_a_latin1_verdict_file_is_refused_naming_the_line_as_item_files_are(project,
                                                                             tmp_path):
    path = tmp_path / "v.csv"
    path.write_bytes("item_id,verdict,reasoning\nq0,correct,ok\nq1,no,caf\xe9\n"
                     .encode("latin-1"))
    message = "line 3, byte 10 of the line is 0xE9"
    with pytest.raises(VerdictImportError, match=message):
        verdicts_import(project=project, path=path, judge="j", version="1")
    with pytest.raises(CommandError, match=message):
        call_command("import_verdicts", "imp", str(path), "--judge", "j", "--judge-version", "1")
    assert not JudgeVerdict.objects.exists() and not Judge.objects.exists()


def test_a_folder_given_as_the_verdict_file_is_named_as_a_folder(project, tmp_path):
    folder = tmp_path / "verdicts.csv"
    folder.mkdir()
    (folder / "gpt.csv").write_text("item_id,verdict\nq0,correct\n", encoding="utf-8")
    with pytest.raises(VerdictImportError, match="is a folder, not a file.*it holds gpt.csv"):
        verdicts_import(project=project, path=folder, judge="j", version="1")
    with pytest.raises(VerdictImportError, match="file not found"):
        verdicts_import(project=project, path=tmp_path / "nope.csv", judge="j", version="1")


def test_a_row_after_a_reasoning_with_line_breaks_is_named_by_its_own_line(project, tmp_path):
    # An LLM's reasoning holds line breaks; a CSV keeps them inside the quoted cell. The
    # unknown item is on line 7 of the file (what an editor shows), not the 4th row.
    path = tmp_path / "v.csv"
    path.write_text('item_id,verdict,reasoning\r\nq0,correct,"Step 1: read.\r\nStep 2: compare.'
                    '\r\nSo: correct."\r\nq1,no,short\r\n\r\nqX,yes,"again\nx"\r\nq2,maybe,\r\n',
                    encoding="utf-8")
    with pytest.raises(VerdictImportError) as refused:
        verdicts_import(project=project, path=path, judge="j", version="1")
    assert refused.value.errors[:2] == [
        "line 7: item_id 'qX' is not an item of imp",
        "line 9: verdict 'maybe' is not one of correct, incorrect"]
    assert not JudgeVerdict.objects.exists()


@pytest.mark.parametrize("header, message", [
    ("Item_ID,verdict", "the CSV header has no column(s) item_id (it has 'Item_ID' for "
                        "'item_id': column names are matched exactly, in case and spaces)"),
    ("item_id, verdict", "the CSV header has unknown column(s) ' verdict' (it has ' verdict' "
                         "for 'verdict'"),
])
def test_a_header_differing_only_in_case_or_spaces_names_what_it_resembles(project, tmp_path,
                                                                           header, message):
    path = tmp_path / "v.csv"
    path.write_text(f"{header}\nq0,correct\n", encoding="utf-8")
    with pytest.raises(VerdictImportError, match=re.escape(message)):
        verdicts_import(project=project, path=path, judge="j", version="1")
    assert not JudgeVerdict.objects.exists()


def test_a_long_reasoning_is_stored_whole_and_the_file_again_is_unchanged(project, tmp_path):
    # A chain-of-thought reasoning of 5,000 characters was cut to 4,000 without a word.
    reasoning = "Step. " * 1000 + "So the answer is correct."
    path = _jsonl(tmp_path, [{"item_id": "q0", "verdict": "correct", "reasoning": reasoning}])
    assert verdicts_import(project=project, path=path, judge="j", version="1")["imported"] == 1
    assert JudgeVerdict.objects.get().reasoning == reasoning
    again = verdicts_import(project=project, path=path, judge="j", version="1")
    assert (again["imported"], again["unchanged"]) == (0, 1)


def test_a_quote_never_closed_is_refused_not_the_rest_of_the_file_swallowed(project, tmp_path):
    # A reasoning opening with a stray quote: csv's lenient reading took every later row into
    # that cell, and the import stored 2 verdicts of 4 without a word.
    path = tmp_path / "v.csv"
    path.write_text('item_id,verdict,reasoning\nq0,correct,fine\nq1,no,"He said no\n'
                    'q2,yes,ok\nq3,no,ok\n', encoding="utf-8")
    with pytest.raises(VerdictImportError, match="the row starting on line 3 opens a quoted "
                                                 "cell that is never closed"):
        verdicts_import(project=project, path=path, judge="j", version="1")
    path.write_text('item_id,verdict,reasoning\nq0,correct,"fine" really\n', encoding="utf-8")
    with pytest.raises(VerdictImportError, match="line 2 has text after the quote that "
                                                 "closes a quoted cell"):
        verdicts_import(project=project, path=path, judge="j", version="1")
    assert not JudgeVerdict.objects.exists()


def test_a_cell_longer_than_csvs_default_limit_is_read(project, tmp_path):
    # 200,000 characters: csv's default limit (131,072) raised an uncaught csv.Error, a
    # traceback from the command and a 500 from the API and the judges page.
    reasoning = "long thought " * 15_000 + "done"
    path = tmp_path / "v.csv"
    path.write_text(f'item_id,verdict,reasoning\nq0,correct,"{reasoning}"\nq1,no,\n',
                    encoding="utf-8")
    assert verdicts_import(project=project, path=path, judge="j", version="1")["imported"] == 2
    assert JudgeVerdict.objects.get(item__external_id="q0").reasoning == reasoning


@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_of_verdicts_is_refused_saying_what_it_is(project, tmp_path, indent):
    # What json.dump(verdicts, f, indent=2) writes: read line by line it was ten "not JSON"
    # errors (or one "not a JSON object") for a file that is valid JSON.
    path = tmp_path / "v.json"
    path.write_text(json.dumps([{"item_id": "q0", "verdict": "correct"},
                                {"item_id": "q1", "verdict": "no"}], indent=indent),
                    encoding="utf-8")
    with pytest.raises(VerdictImportError) as refused:
        verdicts_import(project=project, path=path, judge="j", version="1")
    assert len(refused.value.errors) == 1
    assert "holds one JSON array of 2 value(s), not one JSON object per line" in \
        refused.value.errors[0]
    assert not JudgeVerdict.objects.exists()


def test_a_semicolon_separated_csv_says_how_its_cells_are_separated(project, tmp_path):
    # Excel saves "CSV" with ';' where the decimal mark is a comma: the header was one column
    # 'item_id;verdict;score', refused as having no item_id and nothing more.
    path = tmp_path / "v.csv"
    path.write_text("item_id;verdict;score\nq0;correct;4,5\n", encoding="utf-8")
    with pytest.raises(VerdictImportError, match=re.escape(
            "the CSV header has no column(s) item_id (its cells are separated by ';', not "
            "',': save the file with ',' between cells)")):
        verdicts_import(project=project, path=path, judge="j", version="1")


@pytest.mark.reliability
def test_a_judge_named_with_spaces_is_the_same_judge_at_every_door(project, tmp_path):
    """The API's and the judges page's fields trim `judge` and `version`; the command refused
    `--judge " gpt-x "` ("a judge name is letters ...") that the API stored as gpt-x. And an
    item_id written " q0 " names the item q0, as every item door stores it trimmed."""
    from rest_framework.test import APIClient

    from testing.factories import make_user

    owner = make_user("owner")
    project.owner = owner
    project.save(update_fields=["owner"])
    path = _jsonl(tmp_path, [{"item_id": " q0 ", "verdict": "correct"}])
    out = StringIO()
    call_command("import_verdicts", "imp", str(path), "--judge", " gpt-x ",
                 "--judge-version", " 1 ", stdout=out)
    assert "gpt-x@1: 1 verdicts imported" in out.getvalue()
    api = APIClient()
    api.force_authenticate(owner)
    response = api.post("/api/metrics/projects/imp/judges/verdicts/", {
        "judge": " gpt-x ", "version": " 1 ",
        "verdicts": [{"item_id": " q0 ", "verdict": "correct"}]}, format="json")
    assert response.status_code == 200, response.json()  # the same verdicts: unchanged
    assert response.json()["unchanged"] == 1
    assert list(Judge.objects.values_list("name", flat=True)) == ["gpt-x"]
    assert JudgeVerdict.objects.get().item.external_id == "q0"


@pytest.mark.reliability
@pytest.mark.parametrize("item_id", [" q0 ", "q0"])
def test_verdicts_for_an_item_stored_with_a_spaced_id(tmp_path, item_id):
    """An item stored with spaces around its id before every door trimmed them: its verdicts
    (the project's own export writes ' q0 ', a hand-made file 'q0') are stored on it."""
    project = make_project(TaskKind.LIKERT, slug="spaced")
    item = make_item(project, external_id=" q0 ")
    result = verdicts_import(project=project, path=_jsonl(tmp_path, [
        {"item_id": item_id, "verdict": "correct"}]), judge="gpt-x", version="1")
    assert result["imported"] == 1
    assert list(JudgeVerdict.objects.values_list("item_id", flat=True)) == [item.pk]


@pytest.mark.reliability
def test_an_unknown_item_id_is_named_as_the_file_wrote_it(project, tmp_path):
    with pytest.raises(VerdictImportError) as caught:
        verdicts_import(project=project, path=_jsonl(tmp_path, [
            {"item_id": " nope ", "verdict": "correct"}]), judge="gpt-x", version="1")
    assert "item_id ' nope ' is not an item" in str(caught.value)


@pytest.mark.reliability
def test_an_item_id_several_stored_items_trim_to_is_refused_naming_them(tmp_path):
    project = make_project(TaskKind.LIKERT, slug="twice")
    make_item(project, external_id=" q0")
    make_item(project, external_id="q0 ")
    with pytest.raises(VerdictImportError, match=r"item_id 'q0' is any of the items ' q0', 'q0 '"):
        verdicts_import(project=project, path=_jsonl(tmp_path, [
            {"item_id": "q0", "verdict": "correct"}]), judge="gpt-x", version="1")
    assert not JudgeVerdict.objects.exists()
