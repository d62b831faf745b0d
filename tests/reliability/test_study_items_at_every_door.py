"""Which items a metric or judge is measured on is one set at every door
(`annotation.selectors.items_measured_on`, docs/ANALYSIS.md "Which items a metric or judge
is measured on"). In a scratch study the metrics page said n=37 while the judges page said
"34 of 35 labelled": the metric report counted the gold checks (an unjudged one scored by its
answer key) and an item served only in a qualification (by its answer key too), the judges
page left the gold checks out but kept the qualification item, and the estimates showed that
item as a system "(none)", 0 of 1 judged."""
from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.judgment_selectors import load_judgments
from annotation.models import StageKind, TaskKind
from metrics_app.reports.estimates import estimates_report
from metrics_app.reports.leaderboard import leaderboard_report
from metrics_app.services.judges.alignment import judge_alignment_report
from metrics_app.services.judges.planning import judge_plan
from metrics_app.services.meta_evaluation_report import metric_report_refresh
from metrics_app.services.scoring import project_score_metrics
from testing.factories import make_item, make_judgment, make_project, make_stage, make_user

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

CANDIDATES = ["on the mat", "on a mat", "under the table", "in the garden", "the mat",
              "nowhere", "on the rug", "mat"]


def _study():
    """8 study items from two systems, each judged twice in a full stage; a gold check judged
    in that stage, a gold check nobody judged (its answer key only), an item released only in
    a qualification (judged there, with its answer key) and a practice item (judged)."""
    owner = make_user("study-items-owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="study-items")
    full = make_stage(project)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION)
    content = {"passage": "The cat sat on the mat.", "question": "Where did the cat sit?",
               "references": ["on the mat"]}
    study = []
    for n, candidate in enumerate(CANDIDATES):
        item = make_item(project, source="fid" if n % 2 else "gpt",
                         content={**content, "candidate": candidate})
        for score in (1 + n % 5, 1 + (n * 3) % 5):
            make_judgment(item=item, stage=full, score=score)
        study.append(item)
    full.items.add(*study)
    judged_gold = make_item(project, is_gold_check=True, gold={"score": 5},
                            content={**content, "candidate": "on the mat!"})
    make_judgment(item=judged_gold, stage=full, score=5)
    make_item(project, is_gold_check=True, gold={"score": 1},
              content={**content, "candidate": "in space"})
    qualification_item = make_item(project, gold={"score": 4},
                                   content={**content, "candidate": "a mat"})
    qualification.items.add(qualification_item)
    make_judgment(item=qualification_item, stage=qualification, score=4)
    practice = make_item(project, is_practice=True, gold={"score": 5},
                         content={**content, "candidate": "the mat, yes"})
    make_judgment(item=practice, stage=full, score=5)
    project_score_metrics(project=project, metric_names=["f1"])
    return owner, project, len(study)


def test_every_door_measures_on_the_same_study_items(client):
    owner, project, n_study = _study()

    metric = metric_report_refresh(project=project, params={"n_resamples": 0}).data
    assert metric["correlations"]["f1"]["overall"]["n"] == n_study
    assert metric["n_imported_gold"] == 0  # no answer key stands in for a human judgment
    assert metric["measured_on"] == {
        "items": n_study, "labelled": n_study, "imported": 0,
        "text": metric["measured_on"]["text"]}

    judges = judge_alignment_report(project=project, refs=["metric:f1"], n_resamples=0)
    assert (judges["n_items"], judges["n_labelled"]) == (n_study, n_study)
    assert judges["measured_on"] == metric["measured_on"]

    estimates = estimates_report(load_judgments(project=project), project=project)
    assert set(estimates["systems"]) == {"fid", "gpt"}  # no "(none)" from the qualification
    assert sum(row["n_items"] for row in estimates["systems"].values()) == n_study
    assert sum(row["n_judged"] for row in estimates["systems"].values()) == n_study
    assert estimates["measured_on"] == metric["measured_on"]

    plan = judge_plan(project=project, budget=10, label_cost=1, refs=["metric:f1"])
    assert plan["measured_on"] == metric["measured_on"]

    sentence = metric["measured_on"]["text"]
    assert sentence.startswith(f"{n_study} of {n_study} study items")
    client.force_login(owner)
    metrics_page = client.get(reverse("metrics:project-metrics", args=[project.slug]),
                              {"n_resamples": 0}).content.decode()
    judges_page = client.get(reverse("metrics:project-judges", args=[project.slug])
                             ).content.decode()
    assert sentence in metrics_page and sentence in judges_page
    assert f"n={n_study}<" in metrics_page
    api = client.get(reverse("metrics-api:metric-report", args=[project.slug]),
                     {"n_resamples": 0}).json()
    assert api["report"]["measured_on"] == metric["measured_on"]
    out = io.StringIO()
    call_command("metric_report", project.slug, "--resamples", "0", stdout=out)
    assert sentence in out.getvalue()
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert sentence in out.getvalue()
    dashboard = client.get(reverse("metrics:project-dashboard", args=[project.slug])
                           ).content.decode()
    assert sentence in dashboard
    out = io.StringIO()
    call_command("judge_report", project.slug, "--resamples", "0", "--judge", "metric:f1",
                 stdout=out)
    assert sentence in out.getvalue()


def test_the_leaderboard_ranks_the_systems_on_the_study_items():
    """An A/B gold check (a pair built for its known answer) ranked its made-up "decoy"
    system beside the real ones, and its votes sat under the judge boards compared with the
    humans."""
    project = make_project(TaskKind.AB, slug="study-items-ab")
    stage = make_stage(project)

    def pair(a: str, b: str, **fields):
        return make_item(project, content={
            "question": "Why is the sky blue?", "evidence": [], "setting": "MM",
            "answer_a": {"text": f"{a} says scattering.", "kind": "model", "system": a},
            "answer_b": {"text": f"{b} says the sea.", "kind": "model", "system": b}},
            **fields)

    for n in range(6):
        item = pair("alpha", "beta") if n % 2 else pair("beta", "alpha")
        for choice in ("A", "A", "B"):
            make_judgment(item=item, stage=stage, choice=choice)
    check = pair("alpha", "decoy", is_gold_check=True, gold={"choice": "A"})
    for _ in range(3):
        make_judgment(item=check, stage=stage, choice="A")
    board = leaderboard_report(load_judgments(project=project), project=project, rounds=10)
    assert {row["system"] for row in board["overall"]["systems"]} == {"alpha", "beta"}
    assert board["overall"]["model"]["n_items"] == 6
