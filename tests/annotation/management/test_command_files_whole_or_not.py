"""A command's output file is written whole or not at all, and a Ctrl-C is a one-line error
saying what was left as it was (`core/output_files.py`): `export_data --output` stopped half-way
leaves an existing file as it was and no partial file beside it; a folder that does not exist is
named before anything is read; `import_data` stopped by Ctrl-C says nothing was imported."""
from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

import annotation.management.commands.export_data as export_command
import annotation.management.commands.import_data as import_command
from tests.support.imports import LIKERT_ROW, db_state, write_jsonl

pytestmark = pytest.mark.django_db


def _imported(tmp_path, count=5):
    rows = [{**LIKERT_ROW, "external_id": f"i{n}",
             "content": {**LIKERT_ROW["content"], "candidate": f"answer {n}"}}
            for n in range(count)]
    path = write_jsonl(tmp_path / "items.jsonl", rows)
    call_command("import_data", "jsonl", str(path), "--project", "study", "--create",
                 "--kind", "likert", "--no-progress", "--no-report")
    return path


class _StopsAfter:
    """A stream whose third write is a Ctrl-C, as a researcher stopping a long export."""

    def __init__(self, out):
        self.out, self.writes = out, 0

    def write(self, text):
        self.writes += 1
        if self.writes == 3:
            raise KeyboardInterrupt
        return self.out.write(text)


def test_an_export_stopped_half_way_leaves_the_old_file_and_no_part(tmp_path, monkeypatch):
    _imported(tmp_path)
    target = tmp_path / "out" / "judgments.jsonl"
    target.parent.mkdir()
    target.write_text("yesterday's export\n", encoding="utf-8")
    real = export_command.export_write
    monkeypatch.setattr(export_command, "export_write",
                        lambda *, out, **kw: real(out=_StopsAfter(out), **kw))
    with pytest.raises(CommandError, match=r"interrupted \(Ctrl-C\): no --output file written"):
        call_command("export_data", "study", "--output", str(target), "--no-progress")
    assert target.read_text(encoding="utf-8") == "yesterday's export\n"
    assert [p.name for p in target.parent.iterdir()] == ["judgments.jsonl"]


def test_a_finished_export_replaces_the_file_whole(tmp_path):
    _imported(tmp_path)
    target = tmp_path / "judgments.csv"
    target.write_text("old\n", encoding="utf-8")
    call_command("export_data", "study", "--format", "csv", "--output", str(target),
                 "--no-progress")
    lines = target.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 + 10 and "old" not in lines  # the header and two judgments an item


def test_an_output_in_a_missing_folder_or_a_folder_is_named(tmp_path):
    _imported(tmp_path)
    with pytest.raises(CommandError, match=r"folder .*nowhere does not exist; create it first"):
        call_command("export_data", "study", "--output", str(tmp_path / "nowhere" / "x.jsonl"))
    with pytest.raises(CommandError, match="a folder; give a file name inside it"):
        call_command("export_data", "study", "--output", str(tmp_path))


def test_an_import_stopped_by_ctrl_c_says_nothing_was_imported(tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "items.jsonl", [LIKERT_ROW])
    before = db_state()
    real = import_command.import_file

    def interrupted(**kwargs):
        real(**kwargs)  # every row stored inside the transaction, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(import_command, "import_file", interrupted)
    with pytest.raises(CommandError, match=r"interrupted \(Ctrl-C\): nothing imported"):
        call_command("import_data", "jsonl", str(path), "--project", "study", "--create",
                     "--kind", "likert", "--no-progress", "--no-report")
    assert db_state() == before
