"""Practice and qualification answers survive export → import without becoming data: an
`--include-qualification` export marks them (`stage_kind`, the item's `is_practice`), and the
copy stores them in imported stages of their own kind, which the counting rule leaves out, so
the copy counts what the original counts."""
from __future__ import annotations

import io
import json

import pytest

from annotation.models import Provider, Stage, StageKind, StageStatus, TaskKind
from annotation.selectors import judgments_that_count
from annotation.services.exports import export_write
from annotation.services.stages import stage_identity_errors, stage_requirement_error
from testing.factories import (
    item_content,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)
from tests.support.imports import db_state, import_fails, run_import, write_jsonl

pytestmark = pytest.mark.django_db

CONTENT = item_content(TaskKind.LIKERT)


def _export(project, tmp_path, name="export.jsonl"):
    out = io.StringIO()
    export_write(project=project, out=out, fmt="jsonl", include_qualification=True)
    path = tmp_path / name
    path.write_text(out.getvalue(), encoding="utf-8")
    return path, [json.loads(line) for line in out.getvalue().splitlines()]


def _counted(project):
    return sorted(judgments_that_count(project=project).values_list(
        "item__external_id", "worker__external_id", "score"))


def _with_qualification(rows):
    return sorted((row["external_id"], row["judgment"]["worker"], row["judgment"]["stage"],
                   row["judgment"]["stage_kind"], row["is_practice"], row["judgment"]["score"])
                  for row in rows if row["judgment"])


@pytest.fixture
def original():
    project = make_project(TaskKind.LIKERT, slug="orig")
    data = [make_item(project, external_id=f"q{n}") for n in range(2)]
    warmup = make_item(project, external_id="warmup", is_practice=True)
    practice = make_stage(project, kind=StageKind.PRACTICE, name="practice")
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual")
    full = make_stage(project, kind=StageKind.FULL, name="full")
    ann, bob = make_worker(external_id="ann"), make_worker(external_id="bob")
    make_judgment(item=data[0], stage=full, worker=ann, score=5)
    make_judgment(item=data[1], stage=full, worker=bob, score=2)
    # Not data: a practice stage's answer, qualification answers (one on an item that also
    # has data), and a practice item's answer inside the data stage.
    make_judgment(item=data[0], stage=practice, worker=bob, score=1)
    make_judgment(item=data[0], stage=qualification, worker=bob, score=1)
    make_judgment(item=data[1], stage=qualification, worker=ann, score=4)
    make_judgment(item=warmup, stage=full, worker=ann, score=3)
    return project


def test_an_export_with_qualification_imports_back_counting_what_the_original_counts(
        original, tmp_path):
    path, rows = _export(original, tmp_path)
    assert {row["judgment"]["stage_kind"] for row in rows} == {"full", "practice",
                                                                "qualification"}
    run_import("jsonl", str(path), "--project", "copy", "--create", "--kind", "likert")
    copy = original.__class__.objects.get(slug="copy")

    assert _counted(copy) == _counted(original) == [("q0", "ann", 5.0), ("q1", "bob", 2.0)]
    kinds = dict(Stage.objects.filter(project=copy).values_list("name", "kind"))
    assert kinds == {"full": StageKind.IMPORTED, "practice": StageKind.PRACTICE,
                     "qual": StageKind.QUALIFICATION}
    assert set(Stage.objects.filter(project=copy).values_list("provider", "status")) == {
        (Provider.IMPORT, StageStatus.CLOSED)}

    # The copy's own --include-qualification export still holds every practice and
    # qualification answer, marked as the original's were (only the data stage's kind differs).
    _copy_path, copy_rows = _export(copy, tmp_path, "copy.jsonl")
    expected = [(*row[:3], StageKind.IMPORTED if row[3] == StageKind.FULL else row[3], *row[4:])
                for row in _with_qualification(rows)]
    assert _with_qualification(copy_rows) == expected

    # Idempotent: the same file again creates nothing, stages included.
    before = db_state()
    assert "nothing new" in run_import("jsonl", str(path), "--project", "copy")
    assert db_state() == before


def test_a_copy_of_the_copy_counts_the_same(original, tmp_path):
    path, _rows = _export(original, tmp_path)
    run_import("jsonl", str(path), "--project", "copy", "--create", "--kind", "likert")
    copy = original.__class__.objects.get(slug="copy")
    second, _ = _export(copy, tmp_path, "copy.jsonl")
    run_import("jsonl", str(second), "--project", "copy2", "--create", "--kind", "likert")
    copy2 = original.__class__.objects.get(slug="copy2")
    assert _counted(copy2) == _counted(original)
    assert judgments_that_count(project=copy2, data_stages_only=False).count() == 6


def test_a_stage_imported_as_data_is_not_reused_for_qualification_answers(tmp_path):
    first = write_jsonl(tmp_path / "a.jsonl", [{"external_id": "q0", "content": CONTENT,
        "judgment": {"worker": "w1", "stage": "s", "score": 3}}])
    run_import("jsonl", str(first), "--project", "p", "--create", "--kind", "likert")
    second = write_jsonl(tmp_path / "b.jsonl", [{"external_id": "q0", "content": CONTENT,
        "judgment": {"worker": "w2", "stage": "s", "stage_kind": "qualification", "score": 3}}])
    before = db_state()
    message = import_fails("jsonl", str(second), "--project", "p",
                           match="was imported with kind 'imported'")
    assert "'s'" in message and db_state() == before


def test_one_stage_with_two_kinds_in_a_file_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "mixed.jsonl", [
        {"external_id": "q0", "content": CONTENT,
         "judgment": {"worker": "w1", "stage": "s", "stage_kind": "full", "score": 3}},
        {"external_id": "q1", "content": CONTENT,
         "judgment": {"worker": "w1", "stage": "s", "stage_kind": "qualification", "score": 3}},
    ])
    before = db_state()
    import_fails("jsonl", str(path), "--project", "p", "--create", "--kind", "likert",
                 match="one stage has one kind")
    assert db_state() == before


def test_an_imported_qualification_stage_is_not_the_projects_qualification(original, tmp_path):
    path, _rows = _export(original, tmp_path)
    run_import("jsonl", str(path), "--project", "copy", "--create", "--kind", "likert")
    copy = original.__class__.objects.get(slug="copy")
    imported = Stage.objects.get(project=copy, name="qual")
    # The copy may still get a qualification stage of its own ...
    assert stage_identity_errors(project=copy, name="screening",
                                 kind=StageKind.QUALIFICATION) == {}
    # ... and no stage may require the imported one, which grades nobody here.
    assert "grades nobody" in stage_requirement_error(project=copy, required=imported)
