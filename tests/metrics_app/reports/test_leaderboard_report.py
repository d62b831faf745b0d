"""The leaderboard of the project report on the long-form QA expert judgments (Xu et al. 2023)
and on A/B items that name their systems, its CSV, and its consistency with the preference
rates of Table 2."""
from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command

from annotation.domain.item_content import HUMAN_HIGHER_VOTED, HUMAN_LOWER_VOTED
from annotation.models import Item, Project
from metrics_app.reports.leaderboard import leaderboard_csv
from metrics_app.reports.project import project_report

pytestmark = pytest.mark.django_db
MODEL = "text-davinci-002"


def _import(path, slug: str) -> Project:
    call_command("import_data", "lfqa-experts", str(path), project=slug, create=True,
                 no_progress=True, stdout=io.StringIO())
    return Project.objects.get(slug=slug)


def test_lfqa_leaderboard(shared_data):
    project = _import(shared_data / "lfqa_experts", "lfqa-board")
    report = project_report(project=project)
    systems = {tuple(sorted((c["answer_a"]["system"], c["answer_b"]["system"])))
               for c in Item.objects.filter(project=project).values_list("content", flat=True)}
    _check_importer_names_each_answers_system(systems)
    _check_overall_agrees_with_table_2(report)
    _check_per_domain(report)
    _check_csv(report)


def _check_importer_names_each_answers_system(systems):
    assert systems == {tuple(sorted((HUMAN_HIGHER_VOTED, HUMAN_LOWER_VOTED))),
                       tuple(sorted((HUMAN_HIGHER_VOTED, MODEL)))}


def _check_overall_agrees_with_table_2(report):
    board = report["leaderboard"]["overall"]
    rows = {r["system"]: r for r in board["systems"]}
    assert set(rows) == {HUMAN_HIGHER_VOTED, HUMAN_LOWER_VOTED, MODEL}
    assert board["model"]["n_votes"] == 260 and board["model"]["name"] == "bradley_terry"
    # Table 2: experts prefer the higher-voted answer to the lower-voted one (62.4%) and the
    # model to the higher-voted human answer (61.8%): the fitted order follows.
    assert [r["system"] for r in board["systems"]] == [MODEL, HUMAN_HIGHER_VOTED,
                                                       HUMAN_LOWER_VOTED]
    rate = board["win_rate"]
    i, j = rate["systems"].index(HUMAN_HIGHER_VOTED), rate["systems"].index(HUMAN_LOWER_VOTED)
    assert 0.55 < rate["matrix"][i][j] < 0.7
    for row in board["systems"]:
        for key in ("ci_item", "ci_worker"):
            assert row[key][0] < row["strength"] < row[key][1]
        assert 1 <= row["rank_interval_item"][0] <= row["rank"] <= row["rank_interval_item"][1]
    robustness = board["robustness"]
    assert robustness["drop_to_flip_top"]["votes"] >= 1
    assert len(robustness["power"]) == 2
    assert board["style_control"]["features"][0] == "length"


def _check_per_domain(report):
    by_domain = report["leaderboard"]["by_domain"]
    assert set(by_domain) == {"Biology", "Chemistry", "Economics", "History", "Law", "Physics",
                              "TechCS"}
    history = {r["system"]: r for r in by_domain["History"]["systems"]}
    # History: 80% prefer the higher-voted answer, 24.4% the model (Table 2).
    assert history[HUMAN_HIGHER_VOTED]["rank"] == 1
    assert history[HUMAN_LOWER_VOTED]["strength"] < history[HUMAN_HIGHER_VOTED]["strength"]
    assert history[MODEL]["strength"] < history[HUMAN_HIGHER_VOTED]["strength"]


def _check_csv(report):
    report = report["leaderboard"]
    rows = list(csv.DictReader(io.StringIO(leaderboard_csv(report))))
    assert len(rows) == 3 * (1 + 7)
    overall = [r for r in rows if r["category"] == "overall"]
    assert [r["system"] for r in overall] == [s["system"] for s in report["overall"]["systems"]]
    assert float(overall[0]["ci_item_low"]) < float(overall[0]["strength"])


def test_report_command_json_carries_the_leaderboard(shared_data):
    _import(shared_data / "lfqa_experts", "lfqa-board-cmd")
    out = io.StringIO()
    call_command("report", "lfqa-board-cmd", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["leaderboard"]["overall"]["systems"][0]["system"] == MODEL
    text = io.StringIO()
    call_command("report", "lfqa-board-cmd", stdout=text)
    assert f"1. {MODEL}" in text.getvalue() and "Leaderboard (bradley_terry, 260 votes" in text.getvalue()


def test_ties_stay_out_of_the_preference_shares_and_count_as_ties():
    from annotation.models import StageKind, TaskKind
    from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

    project = make_project(TaskKind.AB, slug="hh-ties")
    stage = make_stage(project, kind=StageKind.FULL)
    item = make_item(project, domain="Law", metadata={"higher_voted": "A"}, content={
        "question": "q", "evidence": [], "setting": "HH",
        "answer_a": {"text": "a", "kind": "human", "upvotes": 9},
        "answer_b": {"text": "b", "kind": "human", "upvotes": 2}})
    for choice in ("A", "tie", "both_good", "B", "A"):
        make_judgment(item=item, stage=stage, worker=make_worker(), choice=choice)
    report = project_report(project=project)
    assert report["lfqa"]["by_domain"]["Law"]["prefer_higher_voted_hh"] == pytest.approx(2 / 3)
    board = report["leaderboard"]["overall"]
    assert board["model"]["name"] == "davidson" and board["model"]["n_ties"] == 2
    assert report["leaderboard"]["tie_choices"] == {"tie": 1, "both_good": 1, "both_bad": 0}


def test_position_bias_reads_the_votes_whose_order_was_recorded_when_others_were_imported():
    """Experts' labels imported without the order shown beside a crowd stage that recorded
    it: the whole project's board fits no position effect (it needs every vote's order), but
    its position-bias check reads the crowd's votes, as the crowd stage's own board does; it
    said only "the order shown was not recorded", hiding a worker who always clicks left."""
    from annotation.models import StageKind, TaskKind
    from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

    project = make_project(TaskKind.AB, slug="mixed-orders")
    imported = make_stage(project, kind=StageKind.IMPORTED, name="experts")
    crowd = make_stage(project, kind=StageKind.FULL, name="crowd")
    experts = [make_worker(external_id=f"expert-{n}") for n in range(2)]
    clicker, careful = make_worker(external_id="left-clicker"), make_worker(external_id="careful")
    for n in range(24):
        item = make_item(project)
        for expert in experts:
            make_judgment(item=item, stage=imported, worker=expert, choice="AB"[n % 5 == 0],
                          presented_order=[])
        order = ["A", "B"] if n % 2 else ["B", "A"]
        make_judgment(item=item, stage=crowd, worker=clicker, choice=order[0],
                      presented_order=order)
        make_judgment(item=item, stage=crowd, worker=careful, choice="AB"[n % 3 == 0],
                      presented_order=order)
    whole = project_report(project=project)["leaderboard"]["overall"]
    alone = project_report(project=project, stage=crowd)["leaderboard"]["overall"]
    assert whole["model"]["position_effect"] is None  # 48 votes say no order
    assert alone["model"]["position_effect"] is not None
    bias, crowd_bias = whole["robustness"]["position_bias"], alone["robustness"]["position_bias"]
    assert bias["overall"] == crowd_bias["overall"] and bias["overall"]["n"] == 48
    flagged = [w["external_id"] for w in bias["workers"] if w["biased"]]
    assert flagged == ["left-clicker"]
    assert "48 of 96 votes" in bias["note"] and "no position effect is fitted" in bias["note"]


def _hm_item(project, n, *, model_text=None, human_text=None, **fields):
    from testing.factories import make_item

    return make_item(project, domain="Physics", source="gpt-x", content={
        "question": f"q{n}", "evidence": [], "setting": "HM",
        "answer_a": {"text": model_text or f"model answer {n}", "kind": "model",
                     "upvotes": None},
        "answer_b": {"text": human_text or f"a human answer {n}", "kind": "human",
                     "upvotes": 5}}, **fields)


@pytest.mark.reliability
def test_the_long_form_preference_shares_read_the_votes_the_leaderboard_reads():
    """The long-form A/B table (Table 2's "prefers the model in H/M") and the leaderboard
    beside it are one comparison of the model with the human answer: the table counted a
    gold check's votes (a pair built for its known answer) and picks between two identical
    answers, which the board leaves out, so the two disagreed on the same page."""
    from annotation.models import StageKind, TaskKind
    from testing.factories import make_judgment, make_project, make_stage, make_worker

    project = make_project(TaskKind.AB, slug="hm-gold")
    stage = make_stage(project, kind=StageKind.FULL)
    workers = [make_worker() for _ in range(3)]
    for n in range(6):  # the study: the human answer wins 2 votes of 3
        item = _hm_item(project, n)
        for i, worker in enumerate(workers):
            make_judgment(item=item, stage=stage, worker=worker, choice="A" if i == 0 else "B")
    gold = _hm_item(project, 90, human_text="no idea", is_gold_check=True)
    same = _hm_item(project, 91, model_text="one text", human_text="one  text")
    for item in (gold, same):
        for worker in workers:
            make_judgment(item=item, stage=stage, worker=worker, choice="A")
    report = project_report(project=project)
    board = report["leaderboard"]["overall"]
    rate = board["win_rate"]
    i, j = rate["systems"].index("gpt-x"), rate["systems"].index(HUMAN_HIGHER_VOTED)
    assert board["model"]["n_votes"] == 18
    physics = report["lfqa"]["by_domain"]["Physics"]
    assert physics["n_hm"] == 18
    assert physics["prefer_model_hm"] == pytest.approx(rate["matrix"][i][j]) == pytest.approx(1 / 3)
    assert report["lfqa"]["overall"]["prefer_model_hm"] == pytest.approx(1 / 3)
