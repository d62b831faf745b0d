"""What a format deliberately does not import is said at every door (the command's output, the
admin preview's warnings), with its count: a researcher comparing the file with the project
never meets a smaller number unexplained."""
from __future__ import annotations

import json

import pytest

from annotation.models import Judgment, Project
from annotation.services.import_files import NewProject, import_file
from tests.support.imports import LIKERT_ROW, run_import, write_jsonl

pytestmark = pytest.mark.django_db


def test_evouna_says_how_many_judgments_of_improper_questions_it_leaves_out(shared_data):
    path = shared_data / "open_qa_judgments" / "evouna_tq.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    systems = ["fid", "gpt35", "chatgpt", "gpt4", "newbing"]
    in_file = sum(1 for q in document for s in systems if isinstance(q[f"judge_{s}"], bool))
    of_improper = sum(1 for q in document for s in systems
                      if q["improper"] and isinstance(q[f"judge_{s}"], bool))
    assert of_improper > 0
    output = run_import("evouna", str(path), "--project", "tq", "--create", "--no-report")
    imported = Judgment.objects.filter(item__project__slug="tq").count()
    assert imported == in_file - of_improper
    assert f"Not imported: {of_improper} true/false judgment(s) of answers to improper" in output


def test_the_preview_names_the_unaccepted_work_an_audit_export_carries(tmp_path):
    row = json.loads(json.dumps(LIKERT_ROW))
    row["judgments"][1]["assignment_status"] = "rejected"
    path = write_jsonl(tmp_path / "audit.jsonl", [row])
    outcome = import_file(format_name="jsonl", path=path, dry_run=True,
                          new_project=NewProject(slug="audit", kind="likert"))
    assert outcome.judgments == 1
    assert outcome.left_out == ["1 judgment(s) of rejected, returned or flagged work "
                                "(assignment_status) or that the study did not count (counts: "
                                "false): an audit export's unaccepted work is never imported "
                                "as data"]
    assert any("1 judgment(s) of rejected" in warning for warning in outcome.warnings)
    assert not Project.objects.filter(slug="audit").exists()


def test_nothing_left_out_says_nothing(tmp_path):
    path = write_jsonl(tmp_path / "items.jsonl", [LIKERT_ROW])
    outcome = import_file(format_name="jsonl", path=path, dry_run=True,
                          new_project=NewProject(slug="plain", kind="likert"))
    assert outcome.left_out == []
    assert not any("Not imported" in warning for warning in outcome.warnings)


def test_items_kept_with_different_texts_are_not_called_the_same(shared_data):
    run_import("onestopqa", str(shared_data / "onestopqa" / "onestop_qa.json"),
               "--project", "starc", "--create", "--no-report")
    outcome = import_file(format_name="onestopqa-responses",
                          path=shared_data / "onestopqa" / "in_lab_qa.tsv",
                          project=Project.objects.get(slug="starc"), keep_existing_items=True,
                          dry_run=True)
    kept = outcome.summary.items_kept_differing
    assert kept > 0 and outcome.summary.items_unchanged >= kept
    assert any(warning.startswith(f"{kept} item(s) already in the project with different "
                                  "content") for warning in outcome.warnings)
    assert not any(f"{outcome.summary.items_unchanged} item(s) already in the project with the "
                   "same content" in warning for warning in outcome.warnings)
