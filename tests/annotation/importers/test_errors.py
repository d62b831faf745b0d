"""Bad input stops an import with a message naming the problem; the database is unchanged."""
from __future__ import annotations

import copy
import json

import pytest

from annotation.importers.lfqa_experts import parse_label
from annotation.models import Judgment, Project
from tests.support.imports import AB_ROW, LIKERT_ROW, MC_ROW, import_fails, run_import, write_jsonl

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]


def test_canonical_jsonl_imports_every_kind(tmp_path):
    for kind, row in (("likert", LIKERT_ROW), ("ab", AB_ROW), ("mc", MC_ROW)):
        path = write_jsonl(tmp_path / f"{kind}.jsonl", [row])
        output = run_import("jsonl", str(path), "--project", kind, "--create", "--kind", kind)
        assert "items: 1 created" in output
    ab = Judgment.objects.get(item__project__slug="ab")
    assert (ab.choice, ab.difficult, ab.aspects, ab.presented_order, ab.time_spent_ms) == (
        "A", False, ["factuality"], ["B", "A"], 61000,
    )
    assert ab.justification == "A names the actual mechanism."
    mc = Judgment.objects.get(item__project__slug="mc")
    assert mc.choice == "B" and mc.extra == {"is_correct": False}
    likert = Project.objects.get(slug="likert")
    assert sorted(Judgment.objects.filter(item__project=likert).values_list("score", flat=True)) \
        == [4.0, 5.0]
    assert likert.items.get().gold == {"score": 4.5}


def test_malformed_json_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(LIKERT_ROW) + "\n" + '{"external_id": "x", "content": {\n')
    message = import_fails("jsonl", str(path), "--project", "p", "--create", "--kind", "likert",
                     match="malformed JSON")
    assert "bad.jsonl" in message and "line 2" in message
    assert not Project.objects.filter(slug="p").exists()


def test_malformed_json_document(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text('{"narrativeqa": {"a": {"context": "x",}}}')
    message = import_fails("mocha", str(path), "--project", "p", "--create", match="malformed JSON")
    assert "dev.json" in message and "line 1" in message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json_in_an_import_either(tmp_path, constant):
    """The rule of the API's bodies (core/json_limits.py): Python's parser reads them, the
    database refused them only when storing the item (an IntegrityError, not a message)."""
    line = json.dumps(LIKERT_ROW)[:-1] + f', "metadata": {{"weight": {constant}}}}}'
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    message = import_fails("jsonl", str(path), "--project", "p", "--create", "--kind", "likert",
                           match=f"{constant} is not a JSON value")
    assert "bad.jsonl" in message and "line 1" in message
    document = tmp_path / "dev.json"
    document.write_text(f'{{"narrativeqa": {{"a": {{"score": {constant}}}}}}}')
    message = import_fails("mocha", str(document), "--project", "p", "--create",
                           match=f"{constant} is not a JSON value")
    assert "dev.json" in message
    assert not Project.objects.filter(slug="p").exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r["judgments"][0].update(score="4"), "judgments[0].score"),
        (lambda r: r["judgments"][1].update(score=0), "judgments[1].score"),
        (lambda r: r["content"].update(references="on the mat"), "content.references"),
        (lambda r: r["content"].pop("question"), "content.question"),
        (lambda r: r.update(gold={"score": "high"}), "gold.score"),
        (lambda r: r.update(split=3), "split"),
        (lambda r: r.update(judgments={"worker": "w1"}), "judgments"),
        (lambda r: r["judgments"][0].update(time_spent_ms=-5), "judgments[0].time_spent_ms"),
        (lambda r: r.update(colour="red"), "colour"),
        (lambda r: r.update(dataset="x" * 101), "dataset"),
        (lambda r: r["judgments"][0].update(stage=""), "judgments[0].stage"),
    ],
)
def test_wrong_field_types_name_the_field(tmp_path, change, field):
    good = copy.deepcopy(LIKERT_ROW) | {"external_id": "good"}
    bad = copy.deepcopy(LIKERT_ROW) | {"external_id": "bad"}
    change(bad)
    path = write_jsonl(tmp_path / "items.jsonl", [good, bad])
    message = import_fails("jsonl", str(path), "--project", "p", "--create", "--kind", "likert",
                     match="nothing imported")
    assert f"'{field}'" in message and "line 2" in message and "items.jsonl" in message


def test_a_score_above_the_projects_scale_names_file_record_and_field(tmp_path):
    # The top of the scale is the project's, so it is checked when the project is known: by
    # external id rather than line, with the same field name.
    bad = copy.deepcopy(LIKERT_ROW) | {"external_id": "bad"}
    bad["judgments"][1]["score"] = 7
    path = write_jsonl(tmp_path / "items.jsonl", [LIKERT_ROW, bad])
    message = import_fails("jsonl", str(path), "--project", "p", "--create", "--kind", "likert",
                           match="nothing imported")
    assert "items.jsonl: record bad: field 'judgments[1].score'" in message
    assert "1-5" in message and not Project.objects.filter(slug="p").exists()


def test_error_after_valid_records_writes_nothing_into_existing_project(tmp_path):
    run_import("jsonl", str(write_jsonl(tmp_path / "a.jsonl", [LIKERT_ROW])),
               "--project", "p", "--create", "--kind", "likert")
    rows = [copy.deepcopy(LIKERT_ROW) | {"external_id": f"n{i}"} for i in range(5)]
    rows[4]["judgments"][0]["worker"] = ""
    message = import_fails("jsonl", str(write_jsonl(tmp_path / "b.jsonl", rows)), "--project", "p",
                     match="worker")
    assert "n4" in message


def test_wrong_types_in_real_formats(tmp_path):
    mocha = tmp_path / "dev.json"
    mocha.write_text(json.dumps({"narrativeqa": {"x1": {
        "context": "c", "question": "q?", "reference": "r", "candidate": "c", "score": 3,
        "metadata": {"source": "gpt2", "scores": ["three"]}}}}))
    message = import_fails("mocha", str(mocha), "--project", "p", "--create", match="must be a number")
    assert "narrativeqa/x1" in message and "metadata.scores[0]" in message

    evouna = tmp_path / "evouna_nq.json"
    evouna.write_text(json.dumps([{"question": "q?", "golden_answer": "a", "answer_fid": "a",
                                   "judge_fid": "yes", "improper": False}]))
    message = import_fails("evouna", str(evouna), "--project", "p", "--create", match="judge_fid")
    assert "record 0" in message

    folder = tmp_path / "experts"
    folder.mkdir()
    (folder / "Biology_1_Common20.json").write_text(json.dumps([{
        "q_id": "x", "question_text": "Why?", "answer1": "a", "answer2": "b",
        "answer1_label": "HX?", "BetterAnswer": "Answer A", "DifficultToChoose": "No.",
        "comments": "", "annotator": 1, "lead_time": 3.0, "id": 1}]))
    message = import_fails("lfqa-experts", str(folder), "--project", "p", "--create",
                     match="answer1_label")
    assert "Biology_1_Common20.json" in message

    tsv = tmp_path / "in_lab.tsv"
    tsv.write_text("item_id\tparagraph\tquestion\toptions\tnew_options\tanswer_response\tRT\t"
                   "difficulty\tsource\tsubmission_ind\n"
                   "os1_1_1_Ele\tP.\tQ?\ta|b|c|d\t0|1|2|3\tfour\t100\tEle\tOnestop\t1\n")
    message = import_fails("onestopqa-responses", str(tsv), "--project", "p", "--create",
                     match="answer_response")
    assert "row 2" in message


def test_unknown_format():
    message = import_fails("xml", "whatever.xml", "--project", "p", "--create",
                     match="unknown format 'xml'")
    assert "jsonl" in message and "evouna" in message


def test_missing_file(tmp_path):
    import_fails("mocha", str(tmp_path / "nope.json"), "--project", "p", "--create",
           match="nope.json: file not found")


def test_missing_project_without_create(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [LIKERT_ROW])
    import_fails("jsonl", str(path), "--project", "ghost", match="does not exist; pass --create")


def test_format_kind_must_fit_project(tmp_path):
    Project.objects.create(slug="ab", title="A/B", kind="ab")
    path = tmp_path / "dev.json"
    path.write_text("{}")
    import_fails("mocha", str(path), "--project", "ab", match="holds likert items")
    jsonl = write_jsonl(tmp_path / "a.jsonl", [LIKERT_ROW | {"kind": "likert"}])
    import_fails("jsonl", str(jsonl), "--project", "ab", match="'kind'")


def test_same_external_id_with_other_content_is_refused(tmp_path):
    run_import("jsonl", str(write_jsonl(tmp_path / "a.jsonl", [LIKERT_ROW])),
               "--project", "p", "--create", "--kind", "likert")
    changed = copy.deepcopy(LIKERT_ROW)
    changed["content"]["candidate"] = "under the table"
    message = import_fails("jsonl", str(write_jsonl(tmp_path / "b.jsonl", [changed])),
                     "--project", "p", match="already exists")
    assert "q1-c1" in message and "content" in message


def test_changed_judgment_is_refused_append_only(tmp_path):
    run_import("jsonl", str(write_jsonl(tmp_path / "a.jsonl", [LIKERT_ROW])),
               "--project", "p", "--create", "--kind", "likert")
    changed = copy.deepcopy(LIKERT_ROW)
    changed["judgments"][0]["score"] = 1
    import_fails("jsonl", str(write_jsonl(tmp_path / "b.jsonl", [changed])), "--project", "p",
           match="different judgment")


def test_new_judgments_on_known_items_are_added(tmp_path):
    run_import("jsonl", str(write_jsonl(tmp_path / "a.jsonl", [LIKERT_ROW])),
               "--project", "p", "--create", "--kind", "likert")
    more = copy.deepcopy(LIKERT_ROW)
    more["judgments"].append({"worker": "w3", "score": 3})
    output = run_import("jsonl", str(write_jsonl(tmp_path / "b.jsonl", [more])), "--project", "p")
    assert "items: 0 created, 1 already present" in output
    assert "judgments: 1 created, 2 already present" in output


def test_duplicate_worker_in_one_stage_is_refused(tmp_path):
    row = copy.deepcopy(LIKERT_ROW)
    row["judgments"][1]["worker"] = "w1"
    message = import_fails("jsonl", str(write_jsonl(tmp_path / "a.jsonl", [row])), "--project", "p",
                     "--create", "--kind", "likert", match="judges this item twice")
    assert "judgments[1].worker" in message


def test_lfqa_label_reading():
    assert parse_label("HMH[9]") == {
        "setting": "HM", "answer_a": {"kind": "human", "upvotes": 9},
        "answer_b": {"kind": "model", "upvotes": None}, "model_answer": "B",
    }
    assert parse_label("HMM[900]")["answer_a"] == {"kind": "model", "upvotes": None}
    assert parse_label("HHH[15][2]")["answer_b"] == {"kind": "human", "upvotes": 2}
    lower_first = parse_label("HHh[15][-2]")
    assert lower_first["answer_a"]["upvotes"] == -2 and lower_first["higher_voted"] == "B"
    for bad in ("HM[3]", "HHM[1][2]", "HMH[1][2]", "HHH[1]", "", None):
        with pytest.raises(ValueError):
            parse_label(bad)


@pytest.mark.reliability
@pytest.mark.parametrize("body", [b"", b"\r\n\r\n", b"\xef\xbb\xbf\n  \n"])
@pytest.mark.parametrize("format_name, kind", [
    ("jsonl", "likert"), ("jsonl", None), ("mocha", None), ("onestopqa-responses", None),
    ("evouna", None)])
def test_an_empty_file_is_refused_in_every_format_and_nothing_is_stored(tmp_path, body,
                                                                       format_name, kind):
    """An empty file (no bytes, blank lines, a byte-order mark) is one refusal in every
    format, exit non-zero, no project created, as the items API refuses an empty list: the
    `jsonl` import said "the file holds no records" and exited 0 after `--create` had made an
    empty project, and the other formats called it "malformed JSON at line 1, column 1" or
    "the header has no column(s) item_id, ..."."""
    path = tmp_path / "items.jsonl"
    path.write_bytes(body)
    message = import_fails(format_name, str(path), "--project", "p", "--create",
                           *(("--kind", kind) if kind else ()),
                           match="the file is empty: nothing to import")
    assert message.startswith(f"nothing imported: {path}: ") and "malformed" not in message
    assert not Project.objects.filter(slug="p").exists()


@pytest.mark.reliability
@pytest.mark.parametrize("body", ["{}", '{"narrativeqa": {}}'])
def test_a_file_without_records_is_refused_and_nothing_is_stored(tmp_path, body):
    """A file that parses but holds no record (a MOCHA file of no dataset, or of empty ones)
    imports nothing:
    refused, naming the file, not "0 created" with exit 0 into an existing project."""
    from testing.factories import make_project

    make_project("likert", slug="p")
    path = tmp_path / "dev.json"
    path.write_text(body)
    import_fails("mocha", str(path), "--project", "p",
                 match="dev.json: the file holds no records: nothing to import")
