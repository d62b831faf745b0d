"""Worker identities survive export → import: two people the project tells apart by provider
(an in-house annotator and an imported annotator who happen to share an id) are never merged
into one import worker without a word; the import is refused naming them."""
from __future__ import annotations

import io

import pytest

from annotation.models import Judgment, Provider, StageKind, TaskKind, Worker
from annotation.services.exports import export_write
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker
from tests.support.imports import db_state, import_fails, run_import

pytestmark = pytest.mark.django_db


def _export(project, tmp_path):
    out = io.StringIO()
    export_write(project=project, out=out, fmt="jsonl")
    path = tmp_path / "export.jsonl"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def test_two_people_sharing_an_id_across_providers_are_not_merged(tmp_path):
    project = make_project(TaskKind.LIKERT, slug="mixed")
    items = [make_item(project, external_id=f"q{n}") for n in range(2)]
    collected = make_stage(project, kind=StageKind.FULL, name="full")
    imported = make_stage(project, kind=StageKind.IMPORTED, name="imported",
                          provider=Provider.IMPORT)
    make_judgment(item=items[0], stage=collected, score=5,
                  worker=make_worker(provider=Provider.INHOUSE, external_id="ann"))
    make_judgment(item=items[1], stage=imported, score=1,
                  worker=make_worker(provider=Provider.IMPORT, external_id="ann"))
    path = _export(project, tmp_path)
    before = db_state()
    message = import_fails("jsonl", str(path), "--project", "copy", "--create", "--kind",
                           "likert", match="two people with one id")
    assert "'ann'" in message and db_state() == before


def test_one_worker_in_several_stages_round_trips_as_one(tmp_path):
    project = make_project(TaskKind.LIKERT, slug="one")
    items = [make_item(project, external_id=f"q{n}") for n in range(2)]
    ann = make_worker(provider=Provider.INHOUSE, external_id="ann")
    make_judgment(item=items[0], stage=make_stage(project, name="trial"), worker=ann, score=4)
    make_judgment(item=items[1], stage=make_stage(project, name="full"), worker=ann, score=2)
    run_import("jsonl", str(_export(project, tmp_path)), "--project", "copy", "--create",
               "--kind", "likert")
    copied = Judgment.objects.filter(item__project__slug="copy")
    assert copied.count() == 2
    assert set(copied.values_list("worker__external_id", "worker__provider")) == {
        ("ann", Provider.IMPORT)}
    assert Worker.objects.filter(provider=Provider.IMPORT).count() == 1


def test_an_ab_export_with_tie_answers_round_trips(tmp_path):
    # A stage offering ties stores "tie"/"both_good"/"both_bad" as the choice; the export
    # carries them, so the import of that export must take them back, not refuse the file.
    project = make_project(TaskKind.AB, slug="ties")
    item = make_item(project, external_id="p1")
    stage = make_stage(project, name="full")
    for worker, choice in (("a", "tie"), ("b", "both_bad"), ("c", "B")):
        make_judgment(item=item, stage=stage, choice=choice,
                      worker=make_worker(external_id=worker))
    path = _export(project, tmp_path)
    run_import("jsonl", str(path), "--project", "copy", "--create", "--kind", "ab")
    copied = Judgment.objects.filter(item__project__slug="copy")
    assert sorted(copied.values_list("worker__external_id", "choice")) == [
        ("a", "tie"), ("b", "both_bad"), ("c", "B")]
    # Re-importing it is idempotent, as for any other answer.
    assert "nothing new" in run_import("jsonl", str(path), "--project", "copy")


def test_an_ab_choice_that_is_no_answer_is_still_refused(tmp_path):
    project = make_project(TaskKind.AB, slug="abc")
    make_judgment(item=make_item(project, external_id="p1"), stage=make_stage(project),
                  choice="C", worker=make_worker(external_id="a"))
    before = db_state()
    message = import_fails("jsonl", str(_export(project, tmp_path)), "--project", "copy",
                           "--create", "--kind", "ab", match=r"field .judgments\[0\]\.choice.")
    assert "must be A or B" in message and db_state() == before


def test_an_audit_export_brings_back_as_data_only_the_work_that_counted(tmp_path):
    """`--include-rejected` also exports a blocked worker's approved work, whose review status
    says nothing; each judgment's `counts` says whether the study counted it, and the import
    leaves out what it did not."""
    from annotation.services.workers import worker_block

    project = make_project(TaskKind.LIKERT, slug="audited")
    item = make_item(project, external_id="q0")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    good, spammer = make_worker(external_id="good"), make_worker(external_id="spammer")
    make_judgment(item=item, stage=stage, worker=good, score=5)
    make_judgment(item=item, stage=stage, worker=spammer, score=1)
    worker_block(worker=spammer, reason="spam", by=None)
    out = io.StringIO()
    export_write(project=project, out=out, fmt="jsonl", include_rejected=True)
    path = tmp_path / "audit.jsonl"
    path.write_text(out.getvalue(), encoding="utf-8")
    assert '"counts": false' in out.getvalue() and '"counts": true' in out.getvalue()
    output = run_import("jsonl", str(path), "--project", "copy", "--create", "--kind", "likert")
    copied = Judgment.objects.filter(item__project__slug="copy")
    assert list(copied.values_list("worker__external_id", flat=True)) == ["good"]
    assert "Not imported: 1 judgment(s)" in output
