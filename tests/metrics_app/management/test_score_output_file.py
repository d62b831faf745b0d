"""`manage.py score --output` is checked before the scoring and written whole or not at all
(`core/output_files.py`): the input file given as the output is refused, not replaced by the
scores; a folder is named as a folder (was an IsADirectoryError traceback), as a file given
as the folder (a FileExistsError traceback) — a folder that does not exist is made, as before; a Ctrl-C while
scoring is a one-line error and an existing output file is left as it was."""
from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

import metrics_app.management.commands.score as score_command
from annotation.models import Project

ROW = {"id": "a", "question": "Where did the cat sit?", "candidate": "on the mat",
       "references": ["on the mat"]}


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    return path


def _score(source, output):
    call_command("score", "--metric", "em", "--input", str(source), "--output", str(output),
                 "--no-progress")


def test_the_input_file_given_as_the_output_is_refused_not_replaced(source):
    before = source.read_text(encoding="utf-8")
    with pytest.raises(CommandError, match="the input file; writing there would replace it"):
        _score(source, source)
    assert source.read_text(encoding="utf-8") == before


def test_a_folder_or_a_file_as_folder_is_named_before_scoring(source, tmp_path):
    with pytest.raises(CommandError, match="a folder; give a file name inside it"):
        _score(source, tmp_path)
    with pytest.raises(CommandError, match="in.jsonl is not a folder"):
        _score(source, source / "out.jsonl")


def test_ctrl_c_while_scoring_leaves_the_old_output(source, tmp_path, monkeypatch):
    target = tmp_path / "out.jsonl"
    target.write_text("last week's scores\n", encoding="utf-8")

    def interrupted(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(score_command, "score_inputs", interrupted)
    with pytest.raises(CommandError, match=r"interrupted \(Ctrl-C\): nothing written"):
        _score(source, target)
    assert target.read_text(encoding="utf-8") == "last week's scores\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_the_scores_replace_an_old_output(source, tmp_path):
    target = tmp_path / "out.jsonl"
    target.write_text("last week's scores\n", encoding="utf-8")
    _score(source, target)
    assert [json.loads(line) for line in target.read_text().splitlines()] == \
        [{"id": "a", "em": 1.0}]


@pytest.mark.django_db
def test_judge_report_json_path_is_checked_by_the_same_rule(tmp_path):
    """Before: `judge_report SLUG --json FOLDER` computed the report, then ended in an
    IsADirectoryError traceback; `--json missing/x.json` in a FileNotFoundError one."""
    Project.objects.create(slug="study", title="Study", kind="likert")
    with pytest.raises(CommandError, match="--json .*a folder; give a file name inside it"):
        call_command("judge_report", "study", "--json", str(tmp_path))
    with pytest.raises(CommandError, match="--json .*folder .*nowhere does not exist"):
        call_command("judge_report", "study", "--json", str(tmp_path / "nowhere" / "r.json"))
    call_command("judge_report", "study", "--json", str(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
