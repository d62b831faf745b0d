"""What README.md and docs/DATA_FORMATS.md show a new researcher is what the product does:
the `jsonl` example imports as documented, the documented error names what the importer names,
the export's columns and judgment fields are the ones the format tables list, the README's
benchmark list is `python -m bench --list`, and the README's LFQA leaderboard is the table
docs/LEADERBOARD.md keeps current."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.management.base import CommandError

from annotation.models import Item, Judgment, Project
from annotation.services.exports import JUDGMENT_COLUMNS, csv_columns
from tests.support.imports import run_export, run_import

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
DATA_FORMATS = (REPO / "docs" / "DATA_FORMATS.md").read_text(encoding="utf-8")
LEADERBOARD = (REPO / "docs" / "LEADERBOARD.md").read_text(encoding="utf-8")


def _jsonl_example() -> dict:
    """The indented line under "Example:" in the `jsonl` section."""
    match = re.search(r"^Example:\n\n    (\{.*\})$", DATA_FORMATS, re.MULTILINE)
    assert match, "docs/DATA_FORMATS.md lost its jsonl example"
    return json.loads(match.group(1))


@pytest.mark.django_db
def test_the_documented_jsonl_example_imports_as_the_doc_says_and_again_creates_nothing(tmp_path):
    example = _jsonl_example()
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(example) + "\n", encoding="utf-8")

    run_import("jsonl", str(path), "--project", "my-study", "--create", "--kind", "likert")
    item = Item.objects.get(project__slug="my-study", external_id=example["external_id"])
    assert item.content == example["content"] and item.gold == example["gold"]
    assert Judgment.objects.filter(item=item).count() == len(example["judgments"])

    assert "nothing new: this data was imported before" in run_import(
        "jsonl", str(path), "--project", "my-study")


@pytest.mark.django_db
def test_the_documented_import_error_is_the_one_the_importer_gives(tmp_path):
    documented = re.search(r"`(nothing imported: items\.jsonl: record line 2 \(q7\): [^`]*)`",
                           DATA_FORMATS.replace("\n  ", " "))
    assert documented, "docs/DATA_FORMATS.md lost its example error"
    good = _jsonl_example()
    bad = {**good, "external_id": "q7", "judgments": [{"worker": "w1", "score": "4"}]}
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(CommandError) as error:
        run_import("jsonl", str(path), "--project", "p", "--create", "--kind", "likert")
    assert str(error.value).replace(str(path), "items.jsonl") == documented.group(1)


@pytest.mark.django_db
def test_the_csv_columns_and_judgment_fields_are_the_ones_data_formats_lists(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(_jsonl_example()) + "\n", encoding="utf-8")
    run_import("jsonl", str(path), "--project", "p", "--create", "--kind", "likert")

    listed = re.search(r"- CSV columns: `([^`]*)`", DATA_FORMATS).group(1)
    documented_columns = [c.strip() for c in listed.replace("\n", " ").split(",")]
    assert documented_columns == csv_columns(project=Project.objects.get(slug="p"),
                                             aggregate=False)

    judgment = json.loads(run_export("p").splitlines()[0])["judgment"]
    assert set(judgment) == set(JUDGMENT_COLUMNS)
    judgment_table = DATA_FORMATS.split("Judgment object:", 1)[1].split("\n\n", 2)[1]
    documented_fields = set(re.findall(r"`([a-z_]+)`", "\n".join(
        line.split("|")[1] for line in judgment_table.splitlines() if line.startswith("| `"))))
    assert set(judgment) - documented_fields == set()


def test_the_readme_lists_every_benchmark():
    from bench import registry

    lines = README.split("make bench B=reports", 1)[1].splitlines()[1:]
    names = []
    for line in lines:  # the comment lines right under `make bench B=reports`
        if not re.match(r"\s+#   ", line):
            break
        names.append(line.split("#", 1)[1])
    assert " ".join(names).split() == registry.names()


def _board(text: str, heading: str) -> list[list[str]]:
    """The first rows of the first table after `heading` (rank, system, strength, both
    intervals, rank interval) with `3–3` read as `3`."""
    after = text.split(heading, 1)[1]
    rows = [line for line in after.splitlines() if re.match(r"\| \d \| ", line)][:3]
    cells = [[c.strip() for c in row.strip("|").split("|")][:6] for row in rows]
    return [[re.sub(r"^(\d)–\1$", r"\1", c) for c in row] for row in cells]


def test_the_readme_leaderboard_is_the_one_leaderboard_md_keeps_current():
    readme = _board(README, "On the long-form QA experts' 260 votes")
    current = _board(LEADERBOARD, "## On the long-form QA expert judgments")
    assert len(readme) == 3
    assert readme == current


@pytest.mark.parametrize("command", ["import_data", "export_data"])
def test_data_formats_names_every_option_of_the_import_and_export_commands(command):
    from django.core.management import load_command_class

    parser = load_command_class("annotation", command).create_parser("manage.py", command)
    django_defaults = {"--version", "--verbosity", "--settings", "--pythonpath", "--traceback",
                       "--no-color", "--force-color", "--skip-checks", "--help"}
    options = {option for action in parser._actions for option in action.option_strings
               if option.startswith("--")} - django_defaults
    synopsis = DATA_FORMATS.split("\n\n", 2)[1]
    assert sorted(o for o in options if o not in synopsis) == []
