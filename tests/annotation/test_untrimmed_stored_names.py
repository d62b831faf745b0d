"""Names stored with spaces around them before every door trimmed them (an item's external id
or dataset, an imported judgment's worker or stage): re-importing the file that stored them
finds them (nothing new, nothing refused), and a name several stored rows trim to is refused,
naming them. The migration that trims them: test_trim_stored_names_migration.py."""
from __future__ import annotations

import copy
import re

import pytest
from django.core.management import CommandError

from annotation.importers.base import ItemRecord, validate_record
from annotation.models import Item, Judgment, Provider, Stage, Worker
from annotation.selectors import rows_stored_untrimmed
from annotation.services.imports import ImportConflictError, import_records
from testing.factories import make_item, make_project, make_user
from tests.support.imports import LIKERT_ROW, run_import, write_jsonl

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _row(**fields):
    row = copy.deepcopy(LIKERT_ROW)
    del row["judgments"]
    row.update(fields)
    return row


def _stored(project, row, **fields):
    """The item as the importer stored it before names were trimmed."""
    return make_item(project, content=row["content"], gold=row.get("gold"),
                     source=row.get("source", ""), split=row.get("split", ""),
                     dataset=row.get("dataset", ""), external_id=row["external_id"], **fields)


@pytest.fixture
def project():
    return make_project(slug="study", owner=make_user("alice"))


def test_an_item_stored_with_a_spaced_dataset_is_the_files_item(project, tmp_path):
    row = _row(external_id="q1", dataset="narrativeqa ")
    _stored(project, row)
    out = run_import("jsonl", str(write_jsonl(tmp_path / "i.jsonl", [row])),
                     "--project", project.slug, "--no-report")
    assert "1 already present" in out
    assert Item.objects.filter(project=project).count() == 1


def test_an_item_stored_with_a_spaced_id_is_the_files_item(project, tmp_path):
    row = _row(external_id=" q1 ")
    _stored(project, row)
    out = run_import("jsonl", str(write_jsonl(tmp_path / "i.jsonl", [row])),
                     "--project", project.slug, "--no-report")
    assert "1 already present" in out
    assert list(Item.objects.filter(project=project).values_list("external_id", flat=True)) \
        == [" q1 "]


def test_a_judgment_by_a_spaced_worker_is_not_stored_twice(project, tmp_path):
    row = copy.deepcopy(LIKERT_ROW)
    row["judgments"] = [{"worker": " w1 ", "score": 4}]
    path = write_jsonl(tmp_path / "i.jsonl", [row])
    run_import("jsonl", str(path), "--project", project.slug, "--no-report")
    Worker.objects.filter(provider=Provider.IMPORT, external_id="w1").update(external_id=" w1 ")
    run_import("jsonl", str(path), "--project", project.slug, "--no-report")
    assert list(Worker.objects.values_list("external_id", flat=True)) == [" w1 "]
    assert Judgment.objects.count() == 1


def test_a_judgment_in_a_spaced_stage_is_not_stored_twice(project, tmp_path):
    row = copy.deepcopy(LIKERT_ROW)
    row["judgments"] = [{"worker": "w1", "score": 4, "stage": "batch1 "}]
    path = write_jsonl(tmp_path / "i.jsonl", [row])
    run_import("jsonl", str(path), "--project", project.slug, "--no-report")
    Stage.objects.filter(project=project, name="batch1").update(name="batch1 ")
    run_import("jsonl", str(path), "--project", project.slug, "--no-report")
    assert list(Stage.objects.filter(project=project).values_list("name", flat=True)) \
        == ["batch1 "]
    assert Judgment.objects.count() == 1


def test_an_id_several_stored_items_trim_to_is_refused_naming_them(project, tmp_path):
    row = _row(external_id="q1")
    _stored(project, _row(external_id=" q1"))
    _stored(project, _row(external_id="q1 "))
    with pytest.raises(CommandError, match=r"item 'q1'.*' q1', 'q1 '"):
        run_import("jsonl", str(write_jsonl(tmp_path / "i.jsonl", [row])),
                   "--project", project.slug, "--no-report")
    assert Item.objects.filter(project=project).count() == 2


def test_a_record_is_named_as_the_file_wrote_its_id(project, tmp_path):
    """Ids are stored trimmed, so ' q1 ' and 'q1' are one item; the message quotes what the
    file says, not the trimmed id it does not contain."""
    records = [validate_record(ItemRecord(external_id=external_id, kind=project.kind,
                                          content=LIKERT_ROW["content"]), path="f", index=n)
               for n, external_id in enumerate(["q1", " q1 "])]
    with pytest.raises(ImportConflictError, match=re.escape(
            "record ' q1 ': external id appears twice (as q1 and ' q1 ': ids are stored "
            "trimmed)")):
        import_records(project=project, records=records)
    _stored(project, _row(external_id="q2"))
    path = write_jsonl(tmp_path / "j.jsonl", [_row(external_id=" q2", dataset="other")])
    with pytest.raises(CommandError, match=re.escape(
            "record ' q2': an item with this external id already exists")):
        run_import("jsonl", str(path), "--project", project.slug, "--no-report")


@pytest.mark.parametrize("odd", ["\u00a0", "\x85", "\x1f", "\u3000"])
def test_a_name_stored_with_any_space_python_strips_is_found(tmp_path, odd):
    """From the review: PostgreSQL's `\\s` (C.UTF-8) leaves out the no-break space, NEL and the
    information separators, which `str.strip()` trims: an item stored as "q1\\xa0" was not
    found, and re-importing its file stored a second item (SQLite's `\\s` is Python's)."""
    project = make_project(slug="study", owner=make_user("alice"))
    row = copy.deepcopy(LIKERT_ROW)
    del row["judgments"]
    row["external_id"] = "q1"
    make_item(project, content=row["content"], gold=row.get("gold"),
              source=row.get("source", ""), split=row.get("split", ""),
              dataset=row.get("dataset", ""), external_id="q1" + odd)
    found = rows_stored_untrimmed(Item.objects.filter(project=project), "external_id", ["q1"])
    assert "q1" in found.one
    run_import("jsonl", str(write_jsonl(tmp_path / "i.jsonl", [row])),
               "--project", project.slug, "--no-report")
    assert Item.objects.filter(project=project).count() == 1
