"""Report builders on small hand-made projects."""
from __future__ import annotations

import io
import json

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command

from annotation.models import ExperimentMode, Judgment, StageKind, TaskKind
from metrics_app.models import Report
from metrics_app.reports.project import (
    cached_project_report,
    project_report,
    report_refresh,
    stale_report_projects,
)
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db


@pytest.fixture
def likert_project():
    """Two datasets, three workers; worker 3 answers at random and is slow."""
    project = make_project(TaskKind.LIKERT, slug="likert-demo")
    stage = make_stage(project, kind=StageKind.TRIAL, name="trial")
    workers = [make_worker(external_id=f"w{i}") for i in range(1, 4)]
    rng = np.random.default_rng(0)
    matrix = []
    for n in range(30):
        dataset = "squad" if n < 15 else "narrativeqa"
        item = make_item(project, dataset=dataset, source="gpt2" if n % 2 else "mhpg")
        truth = int(rng.integers(1, 6))
        row = [truth, min(5, truth + int(n % 3 == 0)), int(rng.integers(1, 6))]
        for worker, score in zip(workers, row, strict=True):
            make_judgment(item=item, stage=stage, worker=worker, score=score,
                          time_spent_ms=4000 if worker.external_id != "w3" else 20000)
        matrix.append(row)
    return project, np.array(matrix, dtype=float).T


def test_likert_agreement_groups_and_counts(likert_project):
    project, matrix = likert_project
    report = project_report(project=project)
    everything = report["agreement"]["all"]
    assert everything["n_items"] == 30 and everything["n_judgments"] == 90
    assert everything["level"] == "interval"
    assert everything["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(matrix, level_of_measurement="interval", value_domain=[1, 2, 3, 4, 5])
    )
    assert everything["krippendorff_alpha_ordinal"] == pytest.approx(
        krippendorff.alpha(matrix, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    )
    ci = everything["alpha_ci"]
    assert ci["low"] < everything["krippendorff_alpha"] < ci["high"]
    squad = report["agreement"]["dataset=squad"]
    assert squad["n_items"] == 15 and squad["n_judgments"] == 45
    assert squad["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(matrix[:, :15], level_of_measurement="interval",
                           value_domain=[1, 2, 3, 4, 5])
    )
    # Only one stage: no stage groups; two sources: source groups.
    assert "stage=trial" not in report["agreement"]
    assert {"source=gpt2", "source=mhpg"} <= set(report["agreement"])
    distribution = report["likert"]["distribution"]["squad"]
    assert distribution["n"] == 45
    assert sum(distribution["shares"].values()) == pytest.approx(1.0)
    assert distribution["counts"]["1"] == int((matrix[:, :15] == 1).sum())
    assert report["lfqa"] == {} and report["starc"] == {}


def test_worker_report_finds_the_random_worker(likert_project):
    project, matrix = likert_project
    workers = {w["external_id"]: w for w in project_report(project=project)["workers"]}
    assert workers["w3"]["alpha_contribution"] < 0 < workers["w1"]["alpha_contribution"]
    assert "lowers agreement" in workers["w3"]["flags"]
    without_w3 = krippendorff.alpha(matrix[:2], level_of_measurement="interval",
                                    value_domain=[1, 2, 3, 4, 5])
    assert workers["w3"]["alpha_without"] == pytest.approx(without_w3)
    assert workers["w3"]["median_time_s"] == 20.0 and workers["w1"]["median_time_s"] == 4.0
    assert workers["w1"]["n_judgments"] == 30
    # w1's mean distance to the mean of the two others, computed directly.
    others = matrix[1:].mean(axis=0)
    assert workers["w1"]["agreement_with_others"] == pytest.approx(
        np.abs(matrix[0] - others).mean()
    )


def test_worker_gold_practice_and_straight_lining():
    project = make_project(TaskKind.AB)
    practice = make_stage(project, kind=StageKind.PRACTICE)
    full = make_stage(project, kind=StageKind.FULL)
    liner, careful = make_worker(external_id="liner"), make_worker(external_id="careful")
    gold_items = [make_item(project, is_gold_check=True, gold={"choice": "B"}) for _ in range(4)]
    practice_item = make_item(project, is_practice=True, gold={"choice": "A"})
    make_judgment(item=practice_item, stage=practice, worker=liner, choice="B")
    make_judgment(item=practice_item, stage=practice, worker=careful, choice="A")
    for item in gold_items:
        make_judgment(item=item, stage=full, worker=liner, choice="A",
                      presented_order=["A", "B"])
        make_judgment(item=item, stage=full, worker=careful, choice="B",
                      presented_order=["B", "A"])
    for n in range(8):
        item = make_item(project)
        # The liner always clicks the first answer on screen (A or B in item order).
        order = ["A", "B"] if n % 2 else ["B", "A"]
        make_judgment(item=item, stage=full, worker=liner, choice=order[0],
                      presented_order=order)
    rows = {w["external_id"]: w for w in project_report(project=project)["workers"]}
    assert rows["liner"]["gold_accuracy"] == 0 and rows["careful"]["gold_accuracy"] == 1
    assert rows["liner"]["practice_accuracy"] == 0 and rows["liner"]["n_practice"] == 1
    assert rows["liner"]["modal_answer_share"] == 1.0
    assert set(rows["liner"]["flags"]) >= {"straight-lining", "low gold accuracy",
                                            "failed practice"}
    assert rows["careful"]["flags"] == []
    # Practice judgments do not count towards item agreement.
    assert project_report(project=project)["agreement"]["all"]["n_judgments"] == 16


@pytest.mark.reliability
def test_a_worker_clicking_through_is_flagged_too_fast_on_the_workers_table():
    """A worker answering every item in 0.4 s (the review rule holds work under 2 s per item)
    read with no flag on the workers table beside a straight-liner's three: the table flagged
    straight-lining, repeated justifications and low gold accuracy, the review rule's siblings,
    but not speed. Flagged from the median over the worker's work; a careful worker is not."""
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    fast, careful = make_worker(external_id="fast"), make_worker(external_id="careful")
    for n in range(6):
        item = make_item(project)
        make_judgment(item=item, stage=stage, worker=fast, score=1 + n % 5,
                      time_spent_ms=400, server_time_ms=400)
        make_judgment(item=item, stage=stage, worker=careful, score=1 + n % 5,
                      time_spent_ms=9000, server_time_ms=1900 if n == 0 else 9000)
    rows = {w["external_id"]: w for w in project_report(project=project)["workers"]}
    assert rows["fast"]["median_time_s"] == pytest.approx(0.4)
    assert rows["fast"]["flags"] == ["too fast"]
    assert rows["careful"]["flags"] == []


def _mc_item(project, question: str, level: str, **fields):
    return make_item(project, external_id=f"{question}_{level}", text_level=level,
                     dataset="onestopqa", gold={"choice": "A"}, **fields)


def test_starc_pilot_before_after_flags_and_practice_exclusion():
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.PILOT)
    stage = make_stage(project, kind=StageKind.PILOT)
    practice_item = _mc_item(project, "practice", "Ele", is_practice=True)
    people = [make_worker(external_id=f"p{i}") for i in range(11)]
    bad = people[10]
    make_judgment(item=practice_item, stage=stage, worker=bad, choice="C")
    for person in people[:10]:
        make_judgment(item=practice_item, stage=stage, worker=person, choice="A")
    q1_ele, q1_adv = _mc_item(project, "q1", "Ele"), _mc_item(project, "q1", "Adv")
    q2_ele = _mc_item(project, "q2", "Ele")
    # q1: guessed right by 7/10 before reading (guessable); after reading Ele all right,
    # Adv 1/5 right and 4/5 chose B: pooled over levels B is 4/10 > 30% (distractor problem)
    # and Ele − Adv accuracy is 80 points (caters to one level).
    for i, person in enumerate(people[:10]):
        guess = "A" if i < 7 else "D"
        if i < 5:
            make_judgment(item=q1_ele, stage=stage, worker=person, choice="A",
                          extra={"guess_choice": guess})
        else:
            make_judgment(item=q1_adv, stage=stage, worker=person,
                          choice="A" if i < 6 else "B", extra={"guess_choice": guess})
        # q2: everyone right after reading (too easy), guesses spread.
        make_judgment(item=q2_ele, stage=stage, worker=person, choice="A",
                      extra={"guess_choice": "ABCD"[i % 4]})
    # The excluded participant's answers must not count.
    make_judgment(item=q2_ele, stage=stage, worker=bad, choice="D", extra={"guess_choice": "D"})
    starc = project_report(project=project)["starc"]
    assert starc["n_excluded_practice"] == 1 and starc["excluded_worker_ids"] == [bad.pk]
    assert starc["choice_rates"]["onestopqa/Adv"] == {"A": 0.2, "B": 0.8, "C": 0.0, "D": 0.0,
                                                      "n": 5}
    assert starc["accuracy"]["onestopqa/Ele"] == 1.0
    assert starc["accuracy"]["onestopqa"] == pytest.approx(16 / 20)
    assert starc["before_reading"]["accuracy"]["onestopqa"] == pytest.approx((7 + 3) / 20)
    assert set(starc["question_flags"]["q1"]) == {
        "guessable", "distractor problem", "caters to one level"}
    assert starc["question_flags"]["q2"] == ["too easy"]
    # `manage.py report` says what the dashboard says (it printed the accuracies only).
    out = io.StringIO()
    call_command("report", project.slug, "--refresh", stdout=out)
    text = out.getvalue()
    assert "1 excluded for failing practice items; 20 trials analysed" in text
    assert "A before reading" in text
    adv = next(line.split() for line in text.splitlines() if "onestopqa/Adv" in line)
    assert adv == ["onestopqa/Adv", "5", "0.200", "0.800", "0.000", "0.000", "0.400"]
    assert "q1: guessable, distractor problem, caters to one level" in text


def test_starc_guessing_answers_meet_only_the_before_reading_criteria():
    """In the guessing experiment nobody reads the paragraph: its answers are guesses. They
    were judged by the after-reading criteria, so a question most guessers got wrong read
    "question or answers problem" and one whose guesses spread over B, C and D "distractor
    problem" — what guessing should look like. They are the pilot's before-reading answers:
    a question guessed right by more than 60% is guessable, and nothing else is flagged."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.GUESSING)
    stage = make_stage(project)
    people = [make_worker() for _ in range(10)]
    guessable, hard = _mc_item(project, "q1", "Ele"), _mc_item(project, "q2", "Adv")
    for i, person in enumerate(people):
        make_judgment(item=guessable, stage=stage, worker=person, choice="A" if i < 7 else "B")
        make_judgment(item=hard, stage=stage, worker=person, choice="ABCD"[i % 4])
    starc = project_report(project=project)["starc"]
    assert starc["accuracy"]["onestopqa"] == pytest.approx((7 + 3) / 20)
    assert starc["question_flags"] == {"q1": ["guessable"]}


def test_starc_pilot_criteria_at_their_boundaries_are_not_met():
    """The brief's criteria are strict ("A chosen > 60% before reading", "A < 50%", "A > 95%",
    "any of B/C/D > 30%", "differing by > 30 points"): a question exactly at a boundary is not
    flagged. In floats 1.0 - 0.7 and 0.8 - 0.5 are more than 0.30, so a question all right at
    Elementary and 7 in 10 right at Advanced read "caters to one level"."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.PILOT)
    stage = make_stage(project)

    def answers(item, choices, guesses=None):
        for n, choice in enumerate(choices):
            extra = {"guess_choice": guesses[n]} if guesses else {}
            make_judgment(item=item, stage=stage, worker=make_worker(), choice=choice,
                          extra=extra)

    # Elementary 3 of 3 and Advanced 7 of 10 right: 30 points apart, not more.
    answers(_mc_item(project, "gap1", "Ele"), "AAA")
    answers(_mc_item(project, "gap1", "Adv"), "AAAAAAABCD")
    # Elementary 4 of 5 and Advanced 3 of 6: 30 points again.
    answers(_mc_item(project, "gap2", "Ele"), "AAAAB")
    answers(_mc_item(project, "gap2", "Adv"), "AAABCD")
    # A guessed right by exactly 60% before reading, chosen by exactly 50% after, B by 30%.
    answers(_mc_item(project, "edge", "Int"), "AAAAABBBCD", guesses="AAAAAABBCD")
    # A chosen by exactly 95% after reading.
    answers(_mc_item(project, "easy", "Int"), "A" * 19 + "B")
    # Just past each boundary: flagged.
    answers(_mc_item(project, "past", "Ele"), "AAAA")
    answers(_mc_item(project, "past", "Adv"), "AAAAAAABCD" + "D")
    starc = project_report(project=project)["starc"]
    assert starc["question_flags"] == {"past": ["caters to one level"]}


def test_starc_validity_invalid_share_and_ceiling():
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.VALIDITY)
    stage = make_stage(project)
    judges = [make_worker() for _ in range(3)]
    valid, invalid, none = (make_item(project, source="RACE", text_level="High")
                            for _ in range(3))
    for judge in judges:
        make_judgment(item=valid, stage=stage, worker=judge, choice="A", choices=["A"])
        make_judgment(item=none, stage=stage, worker=judge, choice="", choices=[])
    # All three call `invalid` ambiguous, marking 2, 2 and 3 answers correct.
    for judge, marked in zip(judges, (["A", "B"], ["A", "C"], ["A", "B", "C"]), strict=True):
        make_judgment(item=invalid, stage=stage, worker=judge, choice="", choices=marked)
    validity = project_report(project=project)["starc"]["validity"]
    assert validity["RACE"]["n_items"] == 3
    assert validity["RACE"]["invalid_share"] == pytest.approx(2 / 3)
    # Ceiling: valid 1; ambiguous 1 / mean(2, 2, 3); none correct counts as 4 answers → 1/4.
    assert validity["RACE"]["ceiling"] == pytest.approx((1 + 1 / (7 / 3) + 1 / 4) / 3)
    out = io.StringIO()
    call_command("report", project.slug, "--refresh", stdout=out)
    race = next(line.split() for line in out.getvalue().splitlines() if "validity RACE" in line)
    assert race == ["validity", "RACE", "items=3", "all", "judges", "invalid", "0.667",
                    "approximate", "ceiling", "0.560"]


def test_report_cache_follows_the_judgment_watermark(likert_project):
    project, _matrix = likert_project
    assert stale_report_projects() == [project.pk]
    cached_project_report(project=project)
    assert not Report.objects.filter(project=project).exists()  # a read stores nothing
    stored = report_refresh(project=project)
    assert Report.objects.filter(project=project).count() == 1
    assert stale_report_projects() == []
    first = cached_project_report(project=project)
    assert first["judgment_watermark"] == stored["judgment_watermark"]
    item = project.items.first()
    make_judgment(item=item, stage=project.stages.first(), worker=make_worker(), score=1)
    assert stale_report_projects() == [project.pk]
    second = cached_project_report(project=project)
    assert second["judgment_watermark"] == Judgment.objects.order_by("-id").first().pk
    assert second["agreement"]["all"]["n_judgments"] == 91
    row = Report.objects.get(project=project)
    assert row.judgment_watermark == first["judgment_watermark"]  # still the stale copy
    report_refresh(project=project)
    assert Report.objects.get(project=project).judgment_watermark == second["judgment_watermark"]


@pytest.mark.parametrize("change", [
    {"is_practice": True}, {"excluded": True}, {"gold": {"score": 5}}, {"dataset": "other"},
])
def test_report_cache_follows_item_changes(likert_project, change):
    """Editing items adds no judgment; the cache must still notice (a practice or gold item
    changes worker accuracy, a regrouped item the distributions)."""
    project, _matrix = likert_project
    first = cached_project_report(project=project)
    assert cached_project_report(project=project)["item_fingerprint"] == first["item_fingerprint"]
    item = project.items.order_by("id").first()
    project.items.filter(pk=item.pk).update(**change)
    second = cached_project_report(project=project)
    assert second["item_fingerprint"] != first["item_fingerprint"]
    if "dataset" in change:
        assert "other" in second["likert"]["distribution"]


def test_dashboard_charts_follow_item_changes(likert_project):
    from metrics_app.reports.project import dashboard_charts_refresh, dashboard_data

    project, _matrix = likert_project
    report_refresh(project=project)
    dashboard_charts_refresh(project=project)
    report, charts = dashboard_data(project=project)
    assert "_item_fingerprint" not in charts
    stored = Report.objects.get(project=project, kind="project-charts")
    assert stored.data["_item_fingerprint"] == report["item_fingerprint"]
    project.items.filter(pk=project.items.order_by("id").first().pk).update(is_practice=True)
    again, fresh = dashboard_data(project=project)
    assert again["item_fingerprint"] != report["item_fingerprint"]
    assert set(fresh) == set(charts)
    stored.refresh_from_db()
    assert stored.data["_item_fingerprint"] == report["item_fingerprint"]  # a read stores nothing
    report_refresh(project=project)
    dashboard_charts_refresh(project=project)
    stored.refresh_from_db()
    assert stored.data["_item_fingerprint"] == again["item_fingerprint"]


def test_report_command_json_stage_and_errors(likert_project):
    project, _matrix = likert_project
    out = io.StringIO()
    call_command("report", project.slug, "--json", "--stage", "trial", "--group-by", "dataset",
                 stdout=out)
    report = json.loads(out.getvalue())
    assert report["stage"] == "trial"
    assert set(report["agreement"]) == {"all", "dataset=squad", "dataset=narrativeqa"}
    assert set(report["likert"]["distribution"]) == {"squad", "narrativeqa"}
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no stage"):
        call_command("report", project.slug, "--json", "--stage", "nope")
    with pytest.raises(CommandError, match="does not exist"):
        call_command("report", "missing-project", "--json")


def test_empty_project_report_is_valid_json():
    project = make_project(TaskKind.MC)
    report = project_report(project=project)
    json.dumps(report, allow_nan=False)
    assert report["agreement"]["all"]["n_items"] == 0
    assert report["agreement"]["all"]["krippendorff_alpha"] is None
    assert report["workers"] == [] and report["starc"]["accuracy"] == {}


def test_report_of_an_older_version_is_recomputed(likert_project):
    project, _matrix = likert_project
    report_refresh(project=project)
    row = Report.objects.get(project=project, kind="project")
    Report.objects.filter(pk=row.pk).update(params={"group_by": None, "version": 0},
                                            data={"stale": True})
    fresh = cached_project_report(project=project)
    assert "stale" not in fresh and fresh["agreement"]["all"]["n_judgments"] == 90
    assert stale_report_projects() == [project.pk]
    report_refresh(project=project)
    assert Report.objects.filter(project=project, kind="project").count() == 1
    assert stale_report_projects() == []


def test_stages_section_shows_the_agreement_guard(likert_project):
    project, matrix = likert_project
    trial = project.stages.get(name="trial")
    full = make_stage(project, kind=StageKind.FULL, name="full", order=5,
                      agreement_threshold=0.99, requires_stage=trial)
    report = project_report(project=project)
    rows = {row["name"]: row for row in report["stages"]}
    assert rows["trial"]["n_judgments"] == 90 and rows["trial"]["n_workers"] == 3
    expected = krippendorff.alpha(matrix, level_of_measurement="interval",
                                  value_domain=[1, 2, 3, 4, 5])
    assert rows["trial"]["krippendorff_alpha"] == pytest.approx(expected)
    assert rows["trial"]["gate"] is None
    gate = rows["full"]["gate"]
    assert gate["stage"] == "trial" and gate["alpha"] == pytest.approx(expected)
    assert gate["passes"] is False and rows["full"]["n_judgments"] == 0
    # A report narrowed to the full stage still finds the trial's α in the database.
    narrowed = project_report(project=project, stage=full)
    assert narrowed["stages"][1]["gate"]["alpha"] == pytest.approx(expected)
