"""A pretty-printed JSON object given where JSON Lines are read (the real MOCHA sample file
given to `import_data jsonl`, `import_verdicts` or `score --input`) is refused in one sentence
saying what the file is, by one rule (`annotation/importers/base.py:json_lines_not_array`),
nothing stored; before, each door read it line by line: `import_verdicts` listed 127
"not JSON (Extra data)" problems, the item import named only line 1's `{`."""
from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Project
from tests.support.imports import db_state

pytestmark = pytest.mark.django_db

SAYS = r"holds one JSON object written over 127 lines \(keys: narrativeqa, .*not one JSON object per line"


@pytest.fixture
def mocha_file(shared_data):
    return shared_data / "mocha_format_sample" / "dev.json"


def test_the_item_import_says_what_the_file_is_and_names_the_formats(mocha_file, tmp_path):
    # A file of a known format names that format (tests/annotation/importers/test_wrong_format.py)
    with pytest.raises(CommandError, match=r"it is a MOCHA file .*give the format mocha instead"):
        call_command("import_data", "jsonl", str(mocha_file), "--project", "study", "--create",
                     "--kind", "likert", "--no-progress")
    # ... and a pretty-printed file of none says what it is and names the formats.
    other = tmp_path / "other.json"
    other.write_text('{\n  "rows": [1, 2]\n}\n', encoding="utf-8")
    with pytest.raises(CommandError, match=r"holds one JSON object written over 3 lines \(keys: "
                                           r"rows\).*by its own format \(mocha"):
        call_command("import_data", "jsonl", str(other), "--project", "study", "--create",
                     "--kind", "likert", "--no-progress")
    assert not Project.objects.exists()


def test_the_verdict_import_says_it_once_not_127_times(mocha_file):
    Project.objects.create(slug="study", title="Study", kind="likert")
    before = db_state()
    with pytest.raises(CommandError) as caught:
        call_command("import_verdicts", "study", str(mocha_file))
    message = str(caught.value)
    assert message.startswith("1 problem(s), nothing imported")
    assert "Extra data" not in message
    assert db_state() == before


def test_score_says_it_too(mocha_file, tmp_path):
    with pytest.raises(CommandError, match=SAYS):
        call_command("score", "--metric", "em", "--input", str(mocha_file),
                     "--output", str(tmp_path / "out.jsonl"), "--no-progress")
    assert not (tmp_path / "out.jsonl").exists()


def test_one_json_line_without_a_line_break_is_still_read(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "a", "question": "q", "candidate": "x", "references": ["x"]}',
                      encoding="utf-8")
    call_command("score", "--metric", "em", "--input", str(source),
                 "--output", str(tmp_path / "out.jsonl"), "--no-progress")
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8").strip() == '{"id": "a", "em": 1.0}'
