"""Export → import into a new project keeps the numbers a researcher reads: each item's label
(a researcher's adjudication included), the workers' median time, and an export note that says
what it leaves out. The same service is behind `export_data`, the admin's export actions and
`import_data` / the admin's import (`annotation/services/exports.py`, `import_files.py`)."""
from __future__ import annotations

import copy

import pytest
from django.core.management.base import CommandError

from annotation.judgment_selectors import latest_adjudications
from annotation.models import (
    Adjudication,
    Item,
    Judgment,
    Project,
    Provider,
    Stage,
    StageKind,
    StageStatus,
    Worker,
)
from annotation.services.adjudication import adjudication_record
from annotation.services.exports import aggregate_rows, export_note
from annotation.services.import_files import ImportRefused, NewProject, import_file
from metrics_app.reports.project import project_report
from tests.support.imports import (
    AB_ROW,
    LIKERT_ROW,
    MC_ROW,
    db_state,
    import_fails,
    run_export,
    run_import,
    write_jsonl,
)

pytestmark = pytest.mark.django_db

ROWS = {"likert": LIKERT_ROW, "ab": AB_ROW, "mc": MC_ROW}
# Two answers per kind that disagree, so a researcher has something to decide.
ANSWERS = {"likert": ({"score": 1}, {"score": 5}), "ab": ({"choice": "A"}, {"choice": "B"}),
           "mc": ({"choice": "A"}, {"choice": "C"})}
DECISION = {"likert": "2", "ab": "B", "mc": "C"}


def _studied_project(tmp_path, kind: str) -> Project:
    """An imported item and one collected on the platform by two in-house workers (timed by
    the server), whose disagreement a researcher adjudicated."""
    row = ROWS[kind]
    collected = copy.deepcopy(row) | {"external_id": "collected", "judgments": []}
    if kind == "likert":  # not the reference itself (MOCHA's send filter keeps those out)
        collected["content"]["candidate"] = "under the table"
    run_import("jsonl", str(write_jsonl(tmp_path / f"{kind}.jsonl", [row, collected])),
               "--project", f"study-{kind}", "--create", "--kind", kind)
    project = Project.objects.get(slug=f"study-{kind}")
    stage = Stage.objects.create(project=project, kind=StageKind.FULL, name="full",
                                 provider=Provider.INHOUSE, status=StageStatus.PUBLISHED)
    item = project.items.get(external_id="collected")
    for n, answer in enumerate(ANSWERS[kind]):
        worker, _ = Worker.objects.get_or_create(provider=Provider.INHOUSE,
                                                 external_id=f"expert-{n}")
        Judgment.objects.create(item=item, worker=worker, stage=stage, time_spent_ms=90_000,
                                server_time_ms=4_000 + 1_000 * n, **answer)
    adjudication_record(item=item, value=DECISION[kind], note="the passage says so — ✓")
    return project


def _exported_and_copied(tmp_path, project: Project) -> tuple:
    """The project's JSON Lines export and the project `import_data --create` makes of it."""
    path = tmp_path / "export.jsonl"
    run_export(project.slug, "--output", str(path))
    run_import("jsonl", str(path), "--project", "copy", "--create")
    return path, Project.objects.get(slug="copy")


def _labels(project: Project) -> dict[str, object]:
    return {row["external_id"]: row["label"]
            for row in aggregate_rows(project=project, progress=False)}


def _median_times(project: Project) -> dict[str, float]:
    return {row["external_id"]: row["median_time_s"]
            for row in project_report(project=project)["workers"]}


@pytest.mark.reliability
@pytest.mark.parametrize("kind", ["likert", "ab", "mc"])
def test_a_copy_keeps_each_items_label(tmp_path, kind):
    """Against the old code the adjudicated item's label fell back to the majority or the mean
    in the copy: the export carried no adjudication."""
    project = _studied_project(tmp_path, kind)
    path, copied = _exported_and_copied(tmp_path, project)
    assert _labels(copied) == _labels(project)
    assert _labels(copied)["collected"] == (2.0 if kind == "likert" else DECISION[kind])
    decision = latest_adjudications(project=copied)[copied.items.get(external_id="collected").pk]
    assert decision.note == "the passage says so — ✓"
    # Importing the same export again adds nothing, the decision included.
    again = run_import("jsonl", str(path), "--project", "copy")
    assert "nothing new" in again and "adjudications: 0 created, 1 already present" in again
    assert Adjudication.objects.filter(item__project=copied).count() == 1


@pytest.mark.reliability
@pytest.mark.parametrize("kind", ["likert", "ab", "mc"])
def test_a_copy_keeps_the_workers_median_times(tmp_path, kind):
    """Against the old code the copy's workers report read the browser's 90 s instead of the
    server's 4-5 s: `server_time_ms` was exported but ignored on import."""
    project = _studied_project(tmp_path, kind)
    path, copied = _exported_and_copied(tmp_path, project)
    assert _median_times(copied) == _median_times(project)
    assert (_median_times(copied)["expert-0"], _median_times(copied)["expert-1"]) == (4.0, 5.0)


def test_an_import_never_overrules_a_decision_taken_in_the_copy(tmp_path):
    path, _copied = _exported_and_copied(tmp_path, _studied_project(tmp_path, "ab"))
    item = Item.objects.get(project__slug="copy", external_id="collected")
    adjudication_record(item=item, value="A", note="second reading")
    import_fails("jsonl", str(path), "--project", "copy",
                 match=r"collected: field 'adjudication': the item's latest adjudication in "
                       r"this project is 'A', the file's 'B'")
    assert latest_adjudications(project=item.project)[item.pk].choice == "A"


@pytest.mark.parametrize(("kind", "decision", "field"), [
    ("likert", {"score": 4, "choice": "A"}, "adjudication.score"),
    ("likert", {"score": 0}, "adjudication.score"),
    # A researcher decides in whole points (`adjudication_record`); 2.5 came in on import.
    ("likert", {"score": 2.5}, "adjudication.score"),
    ("ab", {"choice": "C"}, "adjudication.choice"),
    ("mc", {"choice": "A", "score": 3}, "adjudication.choice"),
    ("mc", {"choice": "A", "note": "bad\x00note"}, "adjudication.note"),
    ("ab", {"choice": "A", "by": "x"}, "adjudication"),
])
def test_an_adjudication_that_does_not_fit_the_kind_is_refused_naming_the_field(
        tmp_path, kind, decision, field):
    row = copy.deepcopy(ROWS[kind]) | {"adjudication": decision}
    path = write_jsonl(tmp_path / "bad.jsonl", [row])
    import_fails("jsonl", str(path), "--project", "bad", "--create", "--kind", kind,
                 match=f"field '{field}'")


def test_an_adjudication_above_the_projects_scale_is_refused(tmp_path):
    row = copy.deepcopy(LIKERT_ROW) | {"adjudication": {"score": 6}}
    import_fails("jsonl", str(write_jsonl(tmp_path / "six.jsonl", [row])), "--project", "five",
                 "--create", "--kind", "likert", match=r"'adjudication.score': 6 is outside")


def test_the_export_note_names_what_it_holds_and_the_starc_practice_rule(tmp_path):
    project = _studied_project(tmp_path, "mc")
    item = project.items.get(external_id="collected")
    adjudication_record(item=item, value="A", note="on second thought")
    practice = project.items.get(external_id=MC_ROW["external_id"])
    Item.objects.filter(pk=practice.pk).update(is_practice=True)
    # expert-1 answers the practice item wrong: out of the STARC analysis, with their data.
    Judgment.objects.create(item=practice, worker=Worker.objects.get(external_id="expert-1"),
                            stage=project.stages.get(name="full"), choice="B")
    note = export_note(project=project)
    assert "the latest adjudication of 1 item" in note
    assert "1 earlier adjudication replaced by a later one" in note
    assert ("1 that do not count (rejected, returned or flagged work, unverified sessions, "
            "blocked workers, participants who failed the practice)") in note


def test_a_csv_export_given_to_the_import_is_refused_saying_what_it_is(tmp_path):
    project = _studied_project(tmp_path, "likert")
    path = tmp_path / "study.csv"
    run_export(project.slug, "--format", "csv", "--output", str(path))
    before = db_state()
    with pytest.raises(CommandError, match="is a CSV export .* import the project's JSON Lines "
                                           "export instead"):
        run_import("jsonl", str(path), "--project", project.slug)
    with pytest.raises(ImportRefused, match="is a CSV export"):
        import_file(format_name="jsonl", path=path,
                    new_project=NewProject(slug="from-csv", kind="likert"), dry_run=True)
    assert db_state() == before


@pytest.mark.reliability
def test_a_csv_export_is_refused_saying_what_it_is_by_every_format(tmp_path):
    """The CSV export given to any importer, into the project it came from or a new one, is
    refused in the `jsonl` import's words: a JSON format (mocha, evouna, lfqa-experts, ...)
    read its header as "malformed JSON at line 1, column 1: Expecting value", the TSV one as
    "the header has no column(s) item_id, ...", neither naming the file for what it is."""
    from annotation.importers import FORMAT_MODULES

    project = _studied_project(tmp_path, "likert")
    path = tmp_path / "study.csv"
    run_export(project.slug, "--format", "csv", "--output", str(path))
    for format_name in FORMAT_MODULES:
        for target in (["--project", project.slug], ["--project", "fresh", "--create"]):
            message = import_fails(format_name, str(path), *target,
                                   match="is a CSV export .* import the project's JSON Lines "
                                         "export instead")
            assert "malformed" not in message, (format_name, message)
        with pytest.raises(ImportRefused, match="is a CSV export"):
            import_file(format_name=format_name, path=path, project=project, dry_run=True)


@pytest.mark.parametrize("value", [-1, 2**31, 1.5, "4000"])
def test_a_server_time_that_no_column_holds_is_refused_naming_it(tmp_path, value):
    row = copy.deepcopy(LIKERT_ROW)
    row["judgments"][0]["server_time_ms"] = value
    import_fails("jsonl", str(write_jsonl(tmp_path / "t.jsonl", [row])), "--project", "t",
                 "--create", "--kind", "likert", match=r"'judgments\[0\].server_time_ms'")


def test_the_export_note_names_the_settings_a_copy_does_not_get(tmp_path):
    """A file holds items and judgments, not the project: a copy created from it gets the
    default aggregation model, a 5-point scale and the QA mode, and its labels and analytics
    differ. Against the old code the note said "nothing left out"."""
    likert = _studied_project(tmp_path, "likert")
    assert export_note(project=likert).endswith("nothing left out")
    Project.objects.filter(pk=likert.pk).update(
        aggregation="median", scale_labels=[str(n) for n in range(1, 8)])
    likert.refresh_from_db()
    assert export_note(project=likert).endswith(
        "; not in the file, set on a copy before reading its numbers: aggregation model "
        "median, 7-point scale")
    mc = _studied_project(tmp_path, "mc")
    Project.objects.filter(pk=mc.pk).update(aggregation="dawid_skene", experiment_mode="validity")
    mc.refresh_from_db()
    assert export_note(project=mc).endswith(
        "set on a copy before reading its numbers: aggregation model dawid_skene, STARC mode "
        "validity")
