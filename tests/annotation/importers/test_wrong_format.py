"""A file given to the wrong importer says which format it is and how to import it, at every
door (`import_data`, the admin's import page), for the real data files of each format.

Before, the refusal was true but did not guide: an LFQA expert file given as `mocha` said
"field '(top level)': must be an object {dataset: {id: entry}}, got list"."""
from __future__ import annotations

import html
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.importers import FORMAT_MODULES
from annotation.importers.detect import detected_format
from annotation.models import TaskKind
from testing.factories import make_project, make_user
from tests.support.imports import LIKERT_ROW, db_state, write_jsonl
from tests.support.paths import shared_data_path

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

DATA = shared_data_path()
# The real file (or folder) of each format, as a researcher has it.
REAL_FILES = {
    "mocha": "mocha_format_sample/dev.json",
    "mocha-minimal-pairs": "mocha_format_sample/minimal_pairs.json",
    "onestopqa": "onestopqa/onestop_qa.json",
    "onestopqa-responses": "onestopqa/in_lab_qa.tsv",
    "lfqa-experts": "lfqa_experts/Biology_12_Common20.json",
    "evouna": "open_qa_judgments/evouna_tq.json",
}
FOLDERS = {"lfqa-experts": "lfqa_experts"}


@pytest.fixture
def jsonl_file(tmp_path):
    return write_jsonl(tmp_path / "items.jsonl", [LIKERT_ROW])


def _real(format_name, jsonl_file):
    return jsonl_file if format_name == "jsonl" else DATA / REAL_FILES[format_name]


@pytest.mark.parametrize("path", [*REAL_FILES.values(), *FOLDERS.values(),
                                  "open_qa_judgments/evouna_nq.json",
                                  "lfqa_experts/TechCS_15_Common20.json"])
def test_every_real_file_is_told_its_own_format(path):
    expected = {**{v: k for k, v in REAL_FILES.items()}, **{v: k for k, v in FOLDERS.items()}}
    expected |= {"open_qa_judgments/evouna_nq.json": "evouna",
                 "lfqa_experts/TechCS_15_Common20.json": "lfqa-experts"}
    assert detected_format(DATA / path)[0] == expected[path]


def test_an_export_and_files_of_no_known_format(jsonl_file, tmp_path):
    assert detected_format(jsonl_file)[0] == "jsonl"
    (tmp_path / "notes.txt").write_text("just some notes\n", encoding="utf-8")
    (tmp_path / "other.json").write_text('{"rows": [1, 2]}', encoding="utf-8")
    (tmp_path / "bytes.bin").write_bytes(b"\x00\xff\x10")
    for name in ("notes.txt", "other.json", "bytes.bin"):
        assert detected_format(tmp_path / name) is None
    assert detected_format(DATA / "onestopqa") is None  # a folder, but not of LFQA files


WRONG_PAIRS = [(chosen, actual) for chosen in FORMAT_MODULES
               for actual in [*REAL_FILES, "jsonl"] if actual != chosen]


@pytest.mark.parametrize(("chosen", "actual"), WRONG_PAIRS)
def test_import_data_names_the_format_to_give(chosen, actual, jsonl_file):
    path = _real(actual, jsonl_file)
    before = db_state()
    with pytest.raises(CommandError) as refused:
        call_command("import_data", chosen, str(path), "--project", "study", "--create",
                     *(["--kind", "likert"] if chosen == "jsonl" else []),
                     "--no-progress", "--no-report")
    assert str(refused.value) == (
        f"nothing imported: {path} does not fit the format {chosen}: it is "
        f"{detected_format(path)[1]}: give the format {actual} instead "
        f"(`manage.py import_data {actual} {path} --project study ...`)")
    assert db_state() == before


@pytest.mark.parametrize("chosen", [name for name in FORMAT_MODULES if name != "lfqa-experts"])
def test_the_lfqa_folder_given_as_another_format_names_lfqa_experts(chosen):
    path = DATA / FOLDERS["lfqa-experts"]
    with pytest.raises(CommandError, match=re.escape(
            f"{path} does not fit the format {chosen}: it is a folder of long-form QA expert "
            f"comparison files: give the format lfqa-experts instead")):
        call_command("import_data", chosen, str(path), "--project", "study", "--create",
                     "--kind", "likert", "--no-progress", "--no-report")


def test_an_existing_project_of_the_files_kind_is_pointed_to_the_files_format():
    """Into an A/B project, an LFQA file given as `mocha` was refused for the kind ("format
    mocha holds likert items; project 'lfqa' is ab") and not for what it is."""
    make_project(TaskKind.AB, slug="lfqa")
    path = DATA / REAL_FILES["lfqa-experts"]
    with pytest.raises(CommandError, match=r"give the format lfqa-experts instead"):
        call_command("import_data", "mocha", str(path), "--project", "lfqa", "--no-progress")


def test_a_file_of_the_chosen_format_keeps_its_own_error(tmp_path):
    broken = tmp_path / "dev.json"
    broken.write_text('{"narrativeqa": {"x": {"context": "c", "question": "q", '
                      '"reference": "r", "candidate": "c", "score": "five"}}}',
                      encoding="utf-8")
    with pytest.raises(CommandError) as refused:
        call_command("import_data", "mocha", str(broken), "--project", "study", "--create",
                     "--no-progress", "--no-report")
    assert "score" in str(refused.value) and "give the format" not in str(refused.value)


def test_the_admin_import_page_names_the_format_to_choose(client, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    alice = make_user("alice")
    project = make_project(TaskKind.LIKERT, owner=alice, slug="study")
    client.force_login(alice)
    real = DATA / REAL_FILES["evouna"]
    before = db_state()
    response = client.post(
        reverse("admin:annotation_project_import", args=[project.pk]),
        {"format": "mocha", "split": "",
         "file": SimpleUploadedFile(real.name, real.read_bytes(),
                                    content_type="application/json")})
    page = html.unescape(response.content.decode())
    assert (f"Nothing imported: {real.name} does not fit the format mocha: it is an EVOUNA "
            "judgment file (question, golden_answer, answer_ and judge_ of each system): "
            "choose the format evouna instead") in page
    assert db_state() == before
