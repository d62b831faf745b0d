"""Imports that must fit the target project: its Likert scale, and stages it collected itself."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from annotation.models import Judgment, Project, StageKind
from testing.factories import make_item, make_judgment, make_stage
from tests.support.imports import (
    LIKERT_ROW,
    db_state,
    import_fails,
    run_export,
    run_import,
    write_jsonl,
)
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.django_db


def _evouna_file(tmp_path):
    path = tmp_path / "evouna_nq.json"
    path.write_text(json.dumps([{
        "question": "who wrote hamlet", "golden_answer": "Shakespeare/William Shakespeare",
        "answer_fid": "Shakespeare", "judge_fid": True,
        "answer_gpt35": "Marlowe", "judge_gpt35": False, "improper": False,
    }]))
    return path


def test_binary_judgments_land_on_the_projects_own_scale(tmp_path):
    Project.objects.create(slug="three", title="3-point", kind="likert",
                           scale_labels=["Wrong", "Partly right", "Right"])
    run_import("evouna", str(_evouna_file(tmp_path)), "--project", "three")
    scores = dict(Judgment.objects.values_list("item__source", "score"))
    assert scores == {"fid": 3.0, "gpt35": 1.0}
    # The default (MOCHA) scale keeps 5 / 1, and a re-import finds the same values.
    run_import("evouna", str(_evouna_file(tmp_path)), "--project", "five", "--create")
    five = Project.objects.get(slug="five")
    assert sorted(Judgment.objects.filter(item__project=five).values_list("score", flat=True)) \
        == [1.0, 5.0]
    assert "nothing new" in run_import("evouna", str(_evouna_file(tmp_path)), "--project", "five")


def test_a_score_outside_the_projects_scale_is_refused(tmp_path):
    Project.objects.create(slug="three", title="3-point", kind="likert",
                           scale_labels=["Wrong", "Partly right", "Right"])
    path = write_jsonl(tmp_path / "a.jsonl", [LIKERT_ROW])  # scores 4 and 5
    message = import_fails("jsonl", str(path), "--project", "three", match="outside")
    assert "q1-c1" in message and "score" in message and "1-3" in message


SEVEN_POINTS = ["1", "2", "3", "4", "5", "6", "7"]


def test_a_seven_point_export_imports_into_a_seven_point_project(tmp_path):
    # A 7-point project collects 6s and 7s; its export must import into a project of the same
    # scale (the file's scores were refused as "1 to 5" whatever the project's scale).
    study = Project.objects.create(slug="study", title="Study", kind="likert",
                                   scale_labels=SEVEN_POINTS)
    make_judgment(item=make_item(study), stage=make_stage(study, name="full"), score=7)
    exported = tmp_path / "export.jsonl"
    exported.write_text(run_export("study"))
    Project.objects.create(slug="copy", title="Copy", kind="likert", scale_labels=SEVEN_POINTS)
    run_import("jsonl", str(exported), "--project", "copy")
    assert list(Judgment.objects.filter(item__project__slug="copy")
                .values_list("score", flat=True)) == [7.0]
    # Into a 5-point project the 7 is still refused, naming the record, field and scale.
    before = db_state()
    message = import_fails("jsonl", str(exported), "--project", "five", "--create",
                           "--kind", "likert", match="outside")
    assert "score" in message and "1-5" in message and db_state() == before


@pytest.mark.parametrize("score", [0, 0.5, -3])
def test_a_score_below_one_is_refused_naming_the_field(tmp_path, score):
    row = {**LIKERT_ROW, "judgments": [{"worker": "w1", "score": score}]}
    path = write_jsonl(tmp_path / "a.jsonl", [row])
    before = db_state()
    import_fails("jsonl", str(path), "--project", "p", "--create", "--kind", "likert",
                 match=r"field 'judgments\[0\]\.score': must be a number from 1")
    assert db_state() == before


def test_an_export_cannot_be_imported_back_into_the_project_that_collected_it(tmp_path):
    project = Project.objects.create(slug="study", title="Study", kind="likert")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    make_judgment(item=make_item(project), stage=stage, score=4)
    exported = tmp_path / "export.jsonl"
    exported.write_text(run_export("study"))
    message = import_fails("jsonl", str(exported), "--project", "study",
                     match="collected on the platform")
    assert "'full'" in message and "another project" in message
    assert Judgment.objects.filter(item__project=project).count() == 1
    # Into another project it goes, as before.
    run_import("jsonl", str(exported), "--project", "copy", "--create", "--kind", "likert")
    assert Judgment.objects.filter(item__project__slug="copy").count() == 1


def test_long_imports_show_a_progress_bar_on_stderr(tmp_path, capsys):
    from annotation.services.imports import PROGRESS_MIN_RECORDS

    rows = []
    for n in range(PROGRESS_MIN_RECORDS):
        row = json.loads(json.dumps(LIKERT_ROW))
        row["external_id"] = f"q{n}"
        rows.append(row)
    path = write_jsonl(tmp_path / "many.jsonl", rows)
    from django.core.management import call_command

    call_command("import_data", "jsonl", str(path), "--project", "many", "--create",
                 "--kind", "likert")
    err = capsys.readouterr().err
    assert "importing many.jsonl" in err and f"{PROGRESS_MIN_RECORDS}/{PROGRESS_MIN_RECORDS}" in err
    assert db_state()["items"] == PROGRESS_MIN_RECORDS


def test_a_failed_import_exits_non_zero_naming_the_problem(tmp_path):
    """As a researcher runs it: a separate process, its exit status and its message."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.dev",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO_ROOT, env=env,
                   check=True, timeout=300)
    missing = subprocess.run(
        [sys.executable, "manage.py", "import_data", "jsonl", str(tmp_path / "nope.jsonl"),
         "--project", "p", "--create", "--kind", "likert"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert missing.returncode != 0, missing.stdout
    assert "nope.jsonl" in missing.stderr, missing.stderr
    unknown = subprocess.run(
        [sys.executable, "manage.py", "import_data", "xml", str(tmp_path / "a.xml"),
         "--project", "p"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert unknown.returncode != 0 and "xml" in unknown.stderr, unknown.stderr
