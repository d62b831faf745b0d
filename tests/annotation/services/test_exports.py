"""export_data: one row per judgment or per item, JSON Lines or CSV; export → import round-trips."""
from __future__ import annotations

import copy
import csv
import io
import json

import pytest
from django.core.management.base import CommandError

from annotation.models import (
    Item,
    Judgment,
    Project,
    Provider,
    Stage,
    StageKind,
    StageStatus,
    Worker,
)
from tests.support.imports import AB_ROW, LIKERT_ROW, MC_ROW, run_export, run_import, write_jsonl

pytestmark = pytest.mark.django_db

# Fields that legitimately change when judgments move into another project via import.
VOLATILE = {"project", "created_at", "worker_provider", "stage_kind"}


def _normalized(jsonl: str) -> list[dict]:
    rows = []
    # Lines end at "\n" only: str.splitlines would also cut at a U+2028 inside a text.
    for line in filter(None, jsonl.split("\n")):
        row = json.loads(line)
        for key in VOLATILE:
            row.pop(key, None)
            if row.get("judgment"):
                row["judgment"].pop(key, None)
        rows.append(row)
    return rows


def _project_with_everything(tmp_path, kind: str, row: dict) -> Project:
    unjudged = copy.deepcopy(row) | {"external_id": "unjudged", "judgments": []}
    run_import("jsonl", str(write_jsonl(tmp_path / f"{kind}.jsonl", [row, unjudged])),
               "--project", f"src-{kind}", "--create", "--kind", kind)
    project = Project.objects.get(slug=f"src-{kind}")
    # Judgments collected on the platform (in-house full stage), not only imported ones.
    stage = Stage.objects.create(project=project, kind=StageKind.FULL, name="full",
                                 provider=Provider.INHOUSE, status=StageStatus.PUBLISHED)
    worker = Worker.objects.create(provider=Provider.INHOUSE, external_id="expert-7")
    value = {"likert": {"score": 2}, "ab": {"choice": "B", "difficult": True,
                                            "justification": "B is concise."},
             "mc": {"choice": "A", "presented_order": ["D", "C", "B", "A"]}}[kind]
    Judgment.objects.create(item=project.items.get(external_id=row["external_id"]),
                            worker=worker, stage=stage, time_spent_ms=4000, **value)
    return project


@pytest.mark.reliability
@pytest.mark.parametrize(("kind", "row"), [("likert", LIKERT_ROW), ("ab", AB_ROW),
                                           ("mc", MC_ROW)])
def test_export_import_round_trip(tmp_path, kind, row):
    project = _project_with_everything(tmp_path, kind, row)
    first = run_export(project.slug)
    n_judgments = Judgment.objects.filter(item__project=project).count()
    assert len(first.splitlines()) == n_judgments + 1  # + the unjudged item, once
    exported = tmp_path / "export.jsonl"
    exported.write_text(first)
    run_import("jsonl", str(exported), "--project", "copy", "--create", "--kind", kind)
    copy_project = Project.objects.get(slug="copy")
    assert copy_project.items.count() == project.items.count()
    assert Judgment.objects.filter(item__project=copy_project).count() == n_judgments
    assert set(copy_project.stages.values_list("name", "kind")) == {
        ("imported", StageKind.IMPORTED), ("full", StageKind.IMPORTED),
    }
    second = run_export("copy")
    assert _normalized(second) == _normalized(first)
    # Importing the export again into the copy changes nothing.
    output = run_import("jsonl", str(exported), "--project", "copy")
    assert "nothing new" in output


def test_round_trip_of_real_expert_data(shared_data, tmp_path):
    run_import("lfqa-experts", str(shared_data / "lfqa_experts"), "--project", "lfqa",
               "--create")
    path = tmp_path / "lfqa.jsonl"
    run_export_to = run_export("lfqa", "--output", str(path))
    assert run_export_to == ""  # nothing on stdout when --output is given
    run_import("jsonl", str(path), "--project", "lfqa-copy", "--create", "--kind", "ab")
    assert Item.objects.filter(project__slug="lfqa-copy").count() == 140
    assert Judgment.objects.filter(item__project__slug="lfqa-copy").count() == 260
    assert _normalized(run_export("lfqa-copy")) == _normalized(path.read_text())


@pytest.mark.reliability
def test_an_export_imports_back_into_a_new_project_without_naming_its_kind(shared_data,
                                                                           tmp_path):
    """The export states its project's kind on every line, so `import_data jsonl EXPORT
    --project NEW --create` and the admin's create-from-file (the same service) take it from
    there: the real in-lab responses come back as an mc project with all their items and
    judgments. A file whose lines state no kind still asks for one."""
    from annotation.services.import_files import ImportRefused, NewProject, import_file

    run_import("onestopqa-responses", str(shared_data / "onestopqa" / "in_lab_qa.tsv"),
               "--project", "inlab", "--create")
    path = tmp_path / "inlab.jsonl"
    run_export("inlab", "--output", str(path))
    output = run_import("jsonl", str(path), "--project", "inlab-copy", "--create")
    copy_project = Project.objects.get(slug="inlab-copy")
    assert copy_project.kind == "mc" and "'inlab-copy' (mc)" in output
    assert copy_project.items.count() == 430
    assert Judgment.objects.filter(item__project=copy_project).count() == 430
    outcome = import_file(format_name="jsonl", path=path, new_project=NewProject(slug="inlab-2"))
    assert outcome.project.kind == "mc" and outcome.summary.judgments_created == 430
    plain = write_jsonl(tmp_path / "plain.jsonl", [{**LIKERT_ROW, "external_id": "p1"}])
    with pytest.raises(CommandError, match="--kind is required .* states no kind"):
        run_import("jsonl", str(plain), "--project", "plain", "--create")
    with pytest.raises(ImportRefused, match="choose the task kind"):
        import_file(format_name="jsonl", path=plain, new_project=NewProject(slug="plain"))


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_an_export_whose_first_text_holds_a_unicode_line_separator_imports_back_as_it_is(
        tmp_path, separator):
    # The export writes U+2028 as it is (valid JSON); the kind was read from the first line as
    # str.splitlines cut it, so the line did not parse and the import asked for --kind.
    row = copy.deepcopy(LIKERT_ROW)
    row["content"]["candidate"] = f"on a mat{separator}by the fire"
    run_import("jsonl", str(write_jsonl(tmp_path / "in.jsonl", [row])), "--project", "sep",
               "--create", "--kind", "likert")
    path = tmp_path / "sep.jsonl"
    run_export("sep", "--output", str(path))
    assert separator in path.read_text(encoding="utf-8")
    output = run_import("jsonl", str(path), "--project", "sep-copy", "--create")
    assert "'sep-copy' (likert)" in output
    copied = Project.objects.get(slug="sep-copy").items.get()
    assert copied.content["candidate"] == f"on a mat{separator}by the fire"
    assert _normalized(run_export("sep-copy")) == _normalized(path.read_text(encoding="utf-8"))


def test_csv_has_one_row_per_judgment(tmp_path):
    project = _project_with_everything(tmp_path, "ab", AB_ROW)
    rows = list(csv.DictReader(io.StringIO(run_export(project.slug, "--format", "csv"))))
    assert len(rows) == 3  # two judgments of the judged item, one row for the unjudged item
    by_worker = {r["worker"]: r for r in rows}
    assert by_worker["e1"]["choice"] == "A" and by_worker["e1"]["difficult"] == "false"
    assert json.loads(by_worker["e1"]["presented_order"]) == ["B", "A"]
    assert by_worker["expert-7"]["stage"] == "full"
    assert by_worker["expert-7"]["worker_provider"] == "inhouse"
    assert by_worker["expert-7"]["justification"] == "B is concise."
    assert json.loads(by_worker["e1"]["content"])["answer_a"]["upvotes"] == 12
    assert by_worker[""]["external_id"] == "unjudged" and by_worker[""]["choice"] == ""


def test_aggregate_likert_mean_and_count(tmp_path):
    project = _project_with_everything(tmp_path, "likert", LIKERT_ROW)
    rows = {r["external_id"]: r for r in map(json.loads, run_export(
        project.slug, "--aggregate").splitlines())}
    assert rows["q1-c1"]["n_judgments"] == 3
    assert rows["q1-c1"]["mean_score"] == pytest.approx((4 + 5 + 2) / 3, abs=1e-6)
    assert rows["unjudged"]["n_judgments"] == 0 and rows["unjudged"]["mean_score"] is None
    table = list(csv.DictReader(io.StringIO(run_export(project.slug, "--aggregate",
                                                       "--format", "csv"))))
    assert {r["external_id"]: r["n_judgments"] for r in table} == {"q1-c1": "3", "unjudged": "0"}


def test_aggregate_choice_counts_leave_out_practice(tmp_path):
    project = _project_with_everything(tmp_path, "mc", MC_ROW)
    practice = Stage.objects.create(project=project, kind=StageKind.PRACTICE, name="practice")
    Judgment.objects.create(item=project.items.get(external_id="mc-1"), stage=practice,
                            worker=Worker.objects.get(external_id="expert-7"), choice="D")
    table = list(csv.DictReader(io.StringIO(run_export(project.slug, "--aggregate",
                                                       "--format", "csv"))))
    judged = next(r for r in table if r["external_id"] == "mc-1")
    assert (judged["count_A"], judged["count_B"], judged["count_C"], judged["count_D"]) == (
        "1", "1", "0", "0",
    )
    assert judged["n_judgments"] == "2"
    # The per-judgment export follows the same rule; practice answers only when asked.
    assert len(run_export(project.slug).splitlines()) == 3
    assert len(run_export(project.slug, "--include-qualification").splitlines()) == 3 + 1


def test_stage_filter_and_errors(tmp_path):
    project = _project_with_everything(tmp_path, "likert", LIKERT_ROW)
    rows = [json.loads(line) for line in run_export(project.slug, "--stage", "full").splitlines()]
    assert [r["judgment"]["worker"] for r in rows] == ["expert-7"]
    with pytest.raises(CommandError, match="no stage 'nope'"):
        run_export(project.slug, "--stage", "nope")
    with pytest.raises(CommandError, match="project 'ghost' does not exist"):
        run_export("ghost")


def _choice_project(kind, judgments, *, mode=None):
    """One item with the given judgment fields (one worker each) in a data stage."""
    from testing.factories import make_item, make_project, make_stage, make_worker

    project = make_project(kind=kind, **({"experiment_mode": mode} if mode else {}))
    item = make_item(project, external_id="it")
    stage = make_stage(project)
    for fields in judgments:
        Judgment.objects.create(item=item, stage=stage, worker=make_worker(), **fields)
    return project


def _aggregate(project, fmt="jsonl"):
    out = run_export(project.slug, "--aggregate", "--format", fmt)
    if fmt == "csv":
        return list(csv.DictReader(io.StringIO(out)))
    return [json.loads(line) for line in out.splitlines()]


def test_aggregate_majority_and_tie_for_ab_and_mc():
    ab = _choice_project("ab", [{"choice": "B"}, {"choice": "B"}, {"choice": "A"}])
    [row] = _aggregate(ab)
    assert (row["majority"], row["majority_tie"]) == ("B", False)
    assert row["choice_counts"] == {"A": 1, "B": 2}
    [table] = _aggregate(ab, "csv")
    assert (table["majority"], table["majority_tie"]) == ("B", "false")

    tied = _choice_project("mc", [{"choice": "A"}, {"choice": "C"}])
    [row] = _aggregate(tied)
    assert row["majority"] is None and row["majority_tie"] is True
    [table] = _aggregate(tied, "csv")
    assert (table["majority"], table["majority_tie"]) == ("", "true")

    likert = _choice_project("likert", [{"score": 4}])
    [row] = _aggregate(likert)
    assert row["majority"] is None and row["majority_tie"] is None


def test_aggregate_counts_validity_judgments():
    """Validity judging: "several" marks count for every role marked, "none" is counted, and the
    majority is over role / several / none (these judgments have an empty `choice`)."""
    project = _choice_project("mc", [
        {"choice": "", "choices": ["A", "B"], "extra": {"validity": "several"}},
        {"choice": "", "choices": ["A", "C"], "extra": {"validity": "several"}},
        {"choice": "", "choices": [], "extra": {"validity": "none"}},
        {"choice": "A", "choices": ["A"], "extra": {"validity": "one"}},
    ], mode="validity")
    [row] = _aggregate(project)
    assert row["choice_counts"] == {"A": 3, "B": 1, "C": 1, "D": 0}
    assert row["validity_counts"] == {"one": 1, "several": 2, "none": 1}
    assert (row["majority"], row["majority_tie"]) == ("several", False)
    [table] = _aggregate(project, "csv")
    assert (table["count_A"], table["validity_several"], table["validity_none"]) == (
        "3", "2", "1")


def test_the_design_unit_and_the_server_time_are_exported_and_the_unit_round_trips(tmp_path):
    """A design unit set by the researcher (not derivable from the id) survives export →
    import; the time the server measured is exported beside the browser's."""
    project = _project_with_everything(tmp_path, "mc", MC_ROW)
    judged = project.items.get(external_id=MC_ROW["external_id"])
    Item.objects.filter(pk=judged.pk).update(design_unit="my-text-7")
    Judgment.objects.create(
        item=judged, worker=Worker.objects.create(provider=Provider.INHOUSE, external_id="timed"),
        stage=project.stages.get(name="full"), choice="A", time_spent_ms=4000,
        server_time_ms=3500)
    rows = list(csv.DictReader(io.StringIO(run_export(project.slug, "--format", "csv"))))
    mine = next(r for r in rows if r["worker"] == "timed")
    assert mine["design_unit"] == "my-text-7"
    assert (mine["time_spent_ms"], mine["server_time_ms"]) == ("4000", "3500")
    exported = tmp_path / "export.jsonl"
    exported.write_text(run_export(project.slug))
    run_import("jsonl", str(exported), "--project", "copy", "--create", "--kind", "mc")
    assert Item.objects.get(project__slug="copy",
                            external_id=MC_ROW["external_id"]).design_unit == "my-text-7"


@pytest.mark.parametrize("preferences", [False, True])
def test_an_output_path_that_cannot_be_written_is_a_command_error_naming_it(tmp_path,
                                                                           preferences):
    from testing.factories import make_project

    make_project("ab", slug="out")
    extra = ("--preferences",) if preferences else ("--format", "csv")
    for target, why in (
            (tmp_path / "missing" / "x.csv",
             f"the folder {tmp_path / 'missing'} does not exist; create it first or choose "
             "another path"),
            (tmp_path, f"a folder; give a file name inside it, e.g. {tmp_path / 'out.jsonl'}")):
        with pytest.raises(CommandError) as error:
            run_export("out", *extra, "--output", str(target))
        assert str(error.value) == f"--output {target}: {why}"
    assert not (tmp_path / "missing").exists()
