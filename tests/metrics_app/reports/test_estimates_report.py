"""System estimates in the project report: humans judged a sample of two systems' answers, LERC
scored every answer; the report, `report SLUG` and the cache must carry the estimates."""
from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import StageKind, TaskKind
from metrics_app.models import MetricScore
from metrics_app.reports.project import cached_project_report, project_report
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


def score(item, metric, value, version="v1"):
    MetricScore.objects.create(item=item, metric=metric, version=version, value=value)


@pytest.fixture
def two_systems():
    """300 answers each of "strong" (about 85% correct) and "weak" (about 55%); humans judged
    80 of each (two workers, who agree); LERC scored every answer (a noisy but useful P)."""
    project = make_project(TaskKind.LIKERT, slug="systems", owner=make_user("owner"))
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"w{i}") for i in range(2)]
    rng = np.random.default_rng(0)
    truth = {}
    for system, accuracy in (("strong", 0.85), ("weak", 0.55)):
        for n in range(300):
            item = make_item(project, source=system)
            correct = bool(rng.random() < accuracy)
            truth[item.pk] = correct
            p = float(np.clip((0.8 if correct else 0.2) + rng.normal(0, 0.15), 0.01, 0.99))
            score(item, "lerc_prob", p)
            score(item, "lerc", 1 + 4 * p)
            if n < 80:
                for worker in workers:
                    make_judgment(item=item, stage=stage, worker=worker,
                                  score=5 if correct else 1)
    return project, truth


def test_each_system_gets_human_metric_and_prediction_powered_accuracy(two_systems):
    project, truth = two_systems
    estimates = project_report(project=project)["estimates"]
    assert estimates["metric"]["probability"] == "lerc_prob"
    strong = estimates["systems"]["strong"]
    assert (strong["n_items"], strong["n_judged"], strong["n_scored"]) == (300, 80, 300)
    accuracy = strong["accuracy"]
    judged_truth = np.mean([truth[i] for i in sorted(truth)[:80]])
    assert accuracy["human"]["estimate"] == pytest.approx(judged_truth)
    assert accuracy["human"]["low"] < accuracy["human"]["estimate"] < accuracy["human"]["high"]
    ppi = accuracy["ppi"]
    assert ppi["n_human"] == 80 and ppi["n_items"] == 300
    assert ppi["high"] - ppi["low"] < accuracy["human"]["high"] - accuracy["human"]["low"]
    assert ppi["effective_n"] > 80  # the metric's predictions are worth extra judgments
    assert 0 < ppi["lam"] <= 1
    assert accuracy["metric"]["n_human"] == 80 and accuracy["metric"]["bias"] is not None
    assert strong["mean_score"]["ppi"]["estimate"] > 3  # mean 1–5 score, from `lerc`
    [pair] = estimates["pairs"]
    assert (pair["a"], pair["b"]) == ("strong", "weak")
    assert pair["accuracy"]["ppi"]["difference"] > 0.15
    assert pair["accuracy"]["ppi"]["separated"] is True
    assert set(estimates["assumptions"]) >= {"human", "metric", "ppi"}


def test_without_lerc_scores_only_human_estimates_and_a_note(two_systems):
    project, _truth = two_systems
    MetricScore.objects.all().delete()
    estimates = project_report(project=project)["estimates"]
    assert "ppi" not in estimates["systems"]["weak"]["accuracy"]
    assert "score_project" in estimates["note"]
    assert set(estimates["pairs"][0]["accuracy"]) == {"human", "human_new_questions"}


def test_new_lerc_scores_make_the_cached_report_stale(two_systems):
    project, _truth = two_systems
    before = cached_project_report(project=project)["estimates"]
    assert before["metric"]["probability_version"] == "v1"
    for item in project.items.all():
        score(item, "lerc_prob", 0.5, version="v2")
    after = cached_project_report(project=project)["estimates"]
    assert after["metric"]["probability_version"] == "v2"
    # A constant metric explains nothing: PPI falls back to the humans' width.
    assert after["systems"]["weak"]["accuracy"]["ppi"]["lam"] == 0


def test_report_command_prints_system_accuracy_and_pairs(two_systems):
    project, _truth = two_systems
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    text = out.getvalue()
    assert "System accuracy" in text and "strong" in text
    assert "strong − weak" in text and "separated" in text


def test_every_item_judged_is_exact_for_these_items_but_not_for_new_questions():
    project = make_project(TaskKind.LIKERT, slug="all-judged")
    stage = make_stage(project, kind=StageKind.FULL)
    for n in range(40):
        make_judgment(item=make_item(project, source="only"), stage=stage,
                      score=5 if n % 4 else 1)
    accuracy = project_report(project=project)["estimates"]["systems"]["only"]["accuracy"]
    assert accuracy["human"]["estimate"] == 0.75
    assert accuracy["human"]["low"] == accuracy["human"]["high"] == 0.75
    general = accuracy["human_new_questions"]
    assert general["low"] < 0.75 < general["high"]
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert "all judged: exact for these items; on new questions 0.750 [" in out.getvalue()


def test_two_systems_right_on_every_item_judged_so_far_are_not_called_exact(client):
    """Both systems scored 100 % on the two of three items judged: the difference has no
    spread, but a third of the items is unjudged, so it is not "every item judged"."""
    owner = make_user("exact-owner")
    project = make_project(TaskKind.LIKERT, slug="two-thirds", owner=owner)
    stage = make_stage(project, kind=StageKind.FULL)
    for system in ("backtranslation", "mhpg"):
        items = [make_item(project, source=system) for _ in range(3)]
        for item in items[:2]:
            make_judgment(item=item, stage=stage, score=3)
    [pair] = project_report(project=project)["estimates"]["pairs"]
    assert pair["every_item_judged"] is False
    assert pair["accuracy"]["human"]["se"] == 0
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert "exact for these items" not in out.getvalue()
    client.force_login(owner)
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content
    assert b"every item judged: exact" not in page and b"backtranslation" in page


def test_the_project_aggregation_model_decides_an_items_verdict():
    """Scores 1, 3, 3: the mean (2.33) says incorrect, the median (3) correct."""
    project = make_project(TaskKind.LIKERT, slug="median")
    stage = make_stage(project, kind=StageKind.FULL)
    item = make_item(project, source="only")
    for value in (1, 3, 3):
        make_judgment(item=item, stage=stage, score=value)
    by_mean = project_report(project=project)["estimates"]
    assert by_mean["aggregation"] == "mean"
    assert by_mean["systems"]["only"]["accuracy"]["human"]["estimate"] == 0.0
    project.aggregation = "median"
    project.save()
    by_median = project_report(project=project)["estimates"]
    assert by_median["systems"]["only"]["accuracy"]["human"]["estimate"] == 1.0
    assert by_median["systems"]["only"]["mean_score"]["human"]["estimate"] == 3.0


def test_non_likert_projects_say_why_there_are_no_estimates():
    project = make_project(TaskKind.AB, slug="ab")
    assert "Likert" in project_report(project=project)["estimates"]["skipped"]


def test_dashboard_shows_the_forest_plots_and_the_verdict_per_pair(client, two_systems):
    project, _truth = two_systems
    client.force_login(project.owner)
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    section = html[html.index('id="estimates"'):html.index("</section>", html.index('id="estimates"'))]
    assert section.count("<svg") == 2  # systems and pairs
    assert "prediction-powered" in section and "80 / 300" in section
    assert "strong − weak" in section and "told apart" in section
    assert "What these intervals assume" in section


def test_an_accuracy_interval_stays_inside_zero_and_one():
    from metrics_app.reports.estimates import clip_share

    quantity = clip_share({"ppi": {"estimate": 0.97, "low": 0.9, "high": 1.04},
                           "human": {"estimate": 0.02, "low": -0.03, "high": 0.1},
                           "routed": True})
    assert (quantity["ppi"]["low"], quantity["ppi"]["high"]) == (0.9, 1.0)
    assert (quantity["human"]["low"], quantity["human"]["high"]) == (0.0, 0.1)


def test_a_routed_estimate_stays_on_its_scale_point_and_interval(client):
    """A routed draw with probability 0.1 per answer that drew 8 of 40, all judged correct
    (5): the Horvitz-Thompson estimate of the humans' accuracy read 200% and their mean score
    10.0 on a 1-5 scale, the prediction-powered accuracy over 100%, each outside its own
    interval clipped to the scale; the dashboard printed "200.0%"."""
    from annotation.models import RoutingDraw

    owner = make_user("routed-scale-owner")
    project = make_project(TaskKind.LIKERT, slug="routed-scale", owner=owner)
    stage = make_stage(project, kind=StageKind.FULL)
    for n in range(40):
        item = make_item(project, source="only")
        score(item, "lerc_prob", 0.9 if n % 3 else 0.4)
        score(item, "lerc", 4.5 if n % 3 else 2.5)
        RoutingDraw.objects.create(stage=stage, item=item, probability=0.1, drawn=n < 8)
        if n < 8:
            make_judgment(item=item, stage=stage, score=5)
    row = project_report(project=project)["estimates"]["systems"]["only"]
    assert row["accuracy"]["routed"] is True
    for quantity, (low, high) in (("accuracy", (0.0, 1.0)), ("mean_score", (1.0, 5.0))):
        for method in ("human", "ppi"):
            cell = row[quantity][method]
            assert low <= cell["estimate"] <= high, (quantity, method, cell)
            if cell["low"] is not None:
                assert cell["low"] <= cell["estimate"] <= cell["high"]
    client.force_login(owner)
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content
    assert b"200.0%" not in page and b"100.0%" in page
