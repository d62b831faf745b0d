"""Preference pairs for training from A/B judgments: which items are clear, which are ties or
contested, what the metadata says, and the command."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from annotation.models import StageKind, TaskKind
from annotation.services.adjudication import adjudication_record
from annotation.services.preference_exports import PreferenceExportError, preference_rows
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    project = make_project(TaskKind.AB, slug="prefs")
    stage = make_stage(project, kind=StageKind.FULL)
    workers = [make_worker() for _ in range(3)]

    def item(name, choices):
        made = make_item(project, external_id=name, domain="Law", content={
            "question": f"question {name}", "evidence": [], "setting": "HM",
            "answer_a": {"text": f"{name} answer A", "kind": "model", "upvotes": None,
                         "system": "model-x"},
            "answer_b": {"text": f"{name} answer B", "kind": "human", "upvotes": 3}})
        for worker, choice in zip(workers, choices, strict=False):
            make_judgment(item=made, stage=stage, worker=worker, choice=choice)
        return made

    item("clear", ["B", "B", "B"])
    item("two-one", ["A", "A", "B"])
    item("split", ["A", "B"])
    item("tie", ["tie", "both_bad", "tie"])
    adjudicated = item("decided", ["A", "B"])
    adjudication_record(item=adjudicated, value="B", note="B cites the statute")
    return project


def _rows(project, **options):
    return {row["metadata"]["item"]: row for row in preference_rows(project=project, **options)}


def test_clear_preferences_only_by_default(study):
    rows = _rows(study)
    assert set(rows) == {"clear", "two-one", "decided"}
    clear = rows["clear"]
    assert clear["prompt"] == "question clear"
    assert (clear["chosen"], clear["rejected"]) == ("clear answer B", "clear answer A")
    meta = clear["metadata"]
    assert meta["chosen_system"] == "human-higher-voted" and meta["rejected_system"] == "model-x"
    assert meta["agreement"] == 1.0 and meta["votes"] == {"B": 3}
    assert meta["aggregation"] == study.aggregation_model and meta["label_source"] == "aggregation"
    assert rows["two-one"]["metadata"]["agreement"] == pytest.approx(2 / 3, abs=1e-6)
    assert rows["decided"]["metadata"]["label_source"] == "adjudication"
    assert rows["decided"]["chosen"] == "decided answer B"


def test_min_agreement_ties_and_contested_on_request(study):
    assert set(_rows(study, min_agreement=0.7)) == {"clear", "decided"}
    with_ties = _rows(study, include_ties=True)
    assert with_ties["tie"]["metadata"]["tie"] is True
    assert with_ties["tie"]["metadata"]["votes"] == {"tie": 2, "both_bad": 1}
    contested = _rows(study, include_contested=True)
    assert "split" in contested and contested["split"]["metadata"]["contested"] is True
    assert "tie" not in contested


def test_only_ab_projects_and_valid_agreement(study):
    with pytest.raises(PreferenceExportError, match="A/B items"):
        list(preference_rows(project=make_project(TaskKind.LIKERT, slug="lik")))
    with pytest.raises(PreferenceExportError, match="between 0 and 1"):
        list(preference_rows(project=study, min_agreement=1.5))


def test_export_command_writes_pairs(study):
    out = io.StringIO()
    call_command("export_data", "prefs", "--preferences", "--min-agreement", "0.9", stdout=out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["metadata"]["item"] for r in rows] == ["clear", "decided"]
    assert set(rows[0]) == {"prompt", "chosen", "rejected", "metadata"}
    with pytest.raises(CommandError, match="JSON Lines"):
        call_command("export_data", "prefs", "--preferences", "--format", "csv",
                     stdout=io.StringIO())


@pytest.mark.reliability
@pytest.mark.parametrize("args, refused", [
    (["--include-ties"], "--include-ties chooses the pairs of a --preferences export"),
    (["--min-agreement", "0"], "--min-agreement chooses the pairs"),  # 0.0 == False
    (["--min-agreement", "0.9", "--include-contested"],
     "--min-agreement, --include-contested choose the pairs of a --preferences export"),
    (["--spot-checks", "--include-ties"], "--include-ties chooses the pairs"),
    (["--preferences", "--include-rejected"],
     "--preferences builds its pairs from the judgments that count .*drop --include-rejected"),
    (["--preferences", "--include-qualification"], "drop --include-qualification"),
    (["--include-gold-checks"],
     "--include-gold-checks chooses the pairs of a --preferences export; add --preferences"),
    (["--aggregate", "--include-gold-checks"], "--include-gold-checks chooses the pairs"),
])
def test_an_export_option_that_would_change_nothing_is_refused_not_ignored(study, tmp_path,
                                                                          args, refused):
    """A researcher's day: `export_data prefs --include-ties --output ties.jsonl` wrote the
    plain judgments export, exit 0, and was taken for the pairs with ties; `--preferences
    --include-rejected` wrote the pairs of accepted work only, read as an audit. Refused as
    `--aggregation` without `--aggregate` is, naming the options, and no file is written."""
    target = tmp_path / "out.jsonl"
    with pytest.raises(CommandError, match=refused):
        call_command("export_data", "prefs", *args, "--output", str(target),
                     stdout=io.StringIO(), stderr=io.StringIO())
    assert not target.exists()


@pytest.mark.reliability
def test_export_data_names_a_stage_by_its_id_as_report_does(study):
    """`report --stage` (and the report URLs) take a stage's name or id
    (`project_stage_by_ref`); `export_data --stage 7` said "project has no stage '7'"."""
    from annotation.models import Stage

    stage = Stage.objects.get(project=study)
    by_id, by_name = io.StringIO(), io.StringIO()
    call_command("export_data", "prefs", "--stage", str(stage.pk), "--no-progress",
                 stdout=by_id, stderr=io.StringIO())
    call_command("export_data", "prefs", "--stage", stage.name, "--no-progress",
                 stdout=by_name, stderr=io.StringIO())
    assert by_id.getvalue() == by_name.getvalue() and by_id.getvalue().count("\n") == 13


@pytest.mark.reliability
def test_a_qualification_stages_preferences_are_refused_by_name_not_an_empty_file(study):
    """`export_data --stage QUAL` refuses a qualification stage by name (its judgments test
    workers); `--preferences --stage QUAL` wrote an empty file without a word, the pairs'
    votes counted from the stage's work but its labels from the data stages'. It is refused
    by name too, by the one rule the plain export reads (`non_data_stage_error`)."""
    qualification = make_stage(study, kind=StageKind.QUALIFICATION, name="qual")
    items = list(study.items.all())
    qualification.items.set(items)
    for item in items:
        make_judgment(item=item, stage=qualification, worker=make_worker(), choice="A")
    with pytest.raises(PreferenceExportError, match="'qual' is a qualification stage"):
        list(preference_rows(project=study, stage=qualification))
    for args in (["--preferences"], []):
        with pytest.raises(CommandError, match="'qual' is a qualification stage"):
            call_command("export_data", study.slug, *args, "--stage", "qual",
                         stdout=io.StringIO(), stderr=io.StringIO())


def _gold_check_and_practice(project):
    """A gold check all three workers got right and a practice item they all answered, each
    with clear votes in the full stage (as `study`'s items)."""
    from annotation.models import Stage, Worker

    stage = Stage.objects.get(project=project, kind=StageKind.FULL)
    for name, flags in (("gold", {"is_gold_check": True, "gold": {"choice": "B"}}),
                        ("practice", {"is_practice": True})):
        made = make_item(project, external_id=name, domain="Law", **flags, content={
            "question": f"question {name}", "evidence": [], "setting": "HM",
            "answer_a": {"text": f"{name} answer A", "kind": "model", "system": "model-x"},
            "answer_b": {"text": f"{name} answer B", "kind": "human", "upvotes": 3}})
        for worker in Worker.objects.filter(judgments__item__project=project).distinct():
            make_judgment(item=made, stage=stage, worker=worker, choice="B")


@pytest.mark.reliability
def test_gold_checks_are_left_out_of_the_pairs_as_the_leaderboard_leaves_them_out(study):
    """A DPO dataset built from `export_data --preferences` trained on the attention checks:
    the pairs kept gold-check items (chosen for their known answer, no comparison of systems)
    that the leaderboard and the long-form A/B table leave out (`board_mask`). Left out by the
    board's rule (`items_measured_on`), back only when asked, and said so in the metadata."""
    from annotation.selectors import items_measured_on

    _gold_check_and_practice(study)
    left_out = {}
    rows = {row["metadata"]["item"]: row
            for row in preference_rows(project=study, left_out=left_out)}
    assert set(rows) == {"clear", "two-one", "decided"}
    assert set(rows) <= set(items_measured_on(study).values_list("external_id", flat=True))
    assert left_out == {"gold_check": 1, "tie": 1, "contested": 1}
    assert not any(row["metadata"]["gold_check"] for row in rows.values())
    asked = _rows(study, include_gold_checks=True)
    assert set(asked) == {"clear", "two-one", "decided", "gold"}, "practice items never count"
    assert asked["gold"]["metadata"]["gold_check"] is True
    assert asked["gold"]["chosen"] == "gold answer B"


@pytest.mark.reliability
def test_the_preferences_command_says_what_it_left_out_and_takes_the_gold_checks_on_request(
        study, tmp_path):
    """`export_data --preferences` said "3 preference pairs written" and nothing of the tie,
    the contested item and the gold check it had left out; it names each with the option that
    brings it back, and `--include-gold-checks` does."""
    _gold_check_and_practice(study)
    target, err = tmp_path / "pairs.jsonl", io.StringIO()
    call_command("export_data", "prefs", "--preferences", "--output", str(target),
                 stdout=io.StringIO(), stderr=err)
    assert len(target.read_text().splitlines()) == 3
    note = err.getvalue()
    assert note.startswith(f"3 preference pairs written to {target}; left out: ")
    assert "1 gold-check item (attention checks with a known answer, not a comparison of " \
           "systems; --include-gold-checks brings it back)" in note
    assert "1 tie (the label is a tie; --include-ties brings it back)" in note
    assert "1 contested item (" in note and "--include-contested brings it back" in note
    out, err = io.StringIO(), io.StringIO()
    call_command("export_data", "prefs", "--preferences", "--include-gold-checks",
                 "--include-ties", "--include-contested", stdout=out, stderr=err)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {r["metadata"]["item"] for r in rows} == {"clear", "two-one", "decided", "gold",
                                                     "tie", "split"}
    assert err.getvalue().strip() == "6 preference pairs of prefs exported; nothing left out"
