"""The project's `aggregation` setting: validated where it is set (model, REST API, admin), used
by `export_data --aggregate` (label, confidence, model; `--aggregation` overrides it) and by the
LERC dataset builder for Likert targets; adjudicated labels still win."""
from __future__ import annotations

import csv
import io
import json
import random

import pytest
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Judgment, Project, TaskKind
from annotation.services.adjudication import adjudication_record
from annotation.services.projects import project_create, project_update
from metrics_app.services.lerc import lerc_dataset_build
from testing.factories import make_item, make_project, make_stage, make_user, make_worker
from tests.support.imports import run_export

pytestmark = pytest.mark.django_db


def _aggregate(slug, *args, fmt="jsonl"):
    out = run_export(slug, "--aggregate", "--format", fmt, *args)
    if fmt == "csv":
        return {r["external_id"]: r for r in csv.DictReader(io.StringIO(out))}
    return {r["external_id"]: r for r in map(json.loads, out.splitlines())}


@pytest.fixture
def crowd_project():
    """A STARC project judged by three experts (always right) and four workers who pick one of
    the four options at random; two experts and two random workers per item. On the "trap"
    items one expert is outvoted by two random workers who agree. The truth cycles A, B, C, D.

    (Experts must share items for any model to tell them from random workers: with one expert
    per item among random workers, every pair of judges agrees 1/4 of the time either way.)"""
    project = make_project(TaskKind.MC, slug="crowd", aggregation="dawid_skene")
    stage = make_stage(project)
    experts = [make_worker(external_id=f"expert-{n}") for n in range(3)]
    randoms = [make_worker(external_id=f"random-{n}") for n in range(4)]
    rng = random.Random(11)
    judgments = []
    for n in range(40):
        item = make_item(project, external_id=f"q{n}")
        truth = "ABCD"[n % 4]
        for worker in [*rng.sample(experts, 2), *rng.sample(randoms, 2)]:
            choice = truth if worker in experts else rng.choice("ABCD")
            judgments.append(Judgment(item=item, stage=stage, worker=worker, choice=choice))
    for n in range(2):
        item = make_item(project, external_id=f"trap{n}")
        judgments += [Judgment(item=item, stage=stage, worker=experts[n], choice="A"),
                      Judgment(item=item, stage=stage, worker=randoms[2 * n], choice="C"),
                      Judgment(item=item, stage=stage, worker=randoms[2 * n + 1], choice="C")]
    make_item(project, external_id="unjudged")
    Judgment.objects.bulk_create(judgments)
    return project


def test_export_uses_the_projects_model_with_label_confidence_and_model_name(crowd_project):
    rows = _aggregate("crowd")
    for trap in ("trap0", "trap1"):
        assert rows[trap]["majority"] == "C"  # two random workers outvote the expert
        assert rows[trap]["aggregation"] == "dawid_skene"
        assert rows[trap]["aggregate_label"] == rows[trap]["label"] == "A"
        assert 0.5 < rows[trap]["confidence"] <= 1.0
    truth = {f"q{n}": "ABCD"[n % 4] for n in range(40)}
    model_right = sum(rows[item]["label"] == label for item, label in truth.items())
    majority_right = sum(rows[item]["majority"] == label for item, label in truth.items())
    assert model_right > majority_right
    unjudged = rows["unjudged"]
    assert (unjudged["aggregate_label"], unjudged["confidence"], unjudged["label"]) == (
        None, None, None)
    assert unjudged["aggregation"] == "dawid_skene"

    table = _aggregate("crowd", fmt="csv")
    assert (table["trap0"]["aggregation"], table["trap0"]["aggregate_label"],
            table["trap0"]["majority"]) == ("dawid_skene", "A", "C")
    assert float(table["trap0"]["confidence"]) == pytest.approx(rows["trap0"]["confidence"])
    assert table["unjudged"]["confidence"] == "" and table["q0"]["count_A"] != ""


def test_aggregation_option_overrides_the_project_and_adjudication_still_wins(crowd_project):
    rows = _aggregate("crowd", "--aggregation", "majority")
    assert rows["trap0"]["aggregation"] == "majority"
    assert rows["trap0"]["label"] == rows["trap0"]["aggregate_label"] == "C"
    assert rows["trap0"]["confidence"] == pytest.approx(2 / 3)
    crowd_project.refresh_from_db()
    assert crowd_project.aggregation == "dawid_skene"  # the override changed nothing stored

    adjudication_record(item=crowd_project.items.get(external_id="trap0"), value="C",
                        note="both random workers were right this time")
    for model in ("dawid_skene", "mace", "glad"):
        row = _aggregate("crowd", "--aggregation", model)["trap0"]
        assert (row["aggregate_label"], row["adjudicated"], row["label"]) == ("A", "C", "C")


@pytest.mark.parametrize(("args", "message"), [
    (("--aggregate", "--aggregation", "mean"),
     "--aggregation: aggregation 'mean' is not allowed for A/B projects.*allowed: majority, "
     "dawid_skene, mace, glad"),
    (("--aggregate", "--aggregation", "wisdom"), "unknown aggregation 'wisdom'"),
    (("--aggregate", "--aggregation", ""), "give a model name, e.g. --aggregation majority"),
    (("--aggregation", "glad"), "--aggregation chooses the model of an --aggregate export"),
])
def test_bad_aggregation_option_is_a_command_error(args, message):
    make_project(TaskKind.AB, slug="ab")
    with pytest.raises(CommandError, match=message):
        run_export("ab", *args)


def test_likert_median_setting_and_mean_override():
    project = make_project(TaskKind.LIKERT, slug="likert", aggregation="median")
    stage = make_stage(project)
    item = make_item(project, external_id="c1")
    for score in (5, 4, 1):
        Judgment.objects.create(item=item, stage=stage, worker=make_worker(), score=score)
    row = _aggregate("likert")["c1"]
    assert (row["aggregation"], row["aggregate_label"], row["label"]) == ("median", 4.0, 4.0)
    assert row["confidence"] == pytest.approx(2 / 3)  # 5 and 4 are ≥ 3 like the median
    assert row["mean_score"] == pytest.approx(10 / 3, abs=1e-6)
    row = _aggregate("likert", "--aggregation", "mean")["c1"]
    assert (row["aggregation"], row["label"]) == ("mean", pytest.approx(10 / 3, abs=1e-6))
    with pytest.raises(CommandError, match="'dawid_skene' is not allowed for Likert projects"):
        run_export("likert", "--aggregate", "--aggregation", "dawid_skene")


def test_lerc_targets_follow_the_projects_likert_choice():
    project = make_project(TaskKind.LIKERT, slug="lerc-median")
    stage = make_stage(project)
    item = make_item(project, split="train", content={
        "passage": "", "question": "q?", "references": ["r"], "candidate": "c"})
    for score in (5, 5, 2):
        Judgment.objects.create(item=item, stage=stage, worker=make_worker(), score=score)
    mean = lerc_dataset_build(projects=[project], split_mode="item")
    assert [e.score for e in mean.train] == [pytest.approx(4.0)]
    assert mean.snapshot["projects"]["lerc-median"]["aggregation"] == "mean"
    project.aggregation = "median"
    project.save()
    median = lerc_dataset_build(projects=[project], split_mode="item")
    assert [e.score for e in median.train] == [5.0]
    assert median.snapshot["projects"]["lerc-median"]["aggregation"] == "median"


# --- The setting --------------------------------------------------------------------------------


def test_default_follows_the_kind_and_is_stored():
    assert make_project(TaskKind.LIKERT).aggregation == "mean"
    assert make_project(TaskKind.AB).aggregation == "majority"
    assert make_project(TaskKind.MC).aggregation == "majority"
    owner = make_user("owner")
    project = project_create(owner=owner, slug="mc-mace", title="MC", kind="mc",
                             aggregation="mace")
    assert Project.objects.get(pk=project.pk).aggregation_model == "mace"


def test_services_refuse_a_model_that_does_not_fit_the_kind():
    owner = make_user("owner")
    with pytest.raises(ValidationError, match="'glad' is not allowed for Likert projects"):
        project_create(owner=owner, slug="l", title="L", kind="likert", aggregation="glad")
    project = make_project(TaskKind.AB, owner=owner)
    with pytest.raises(ValidationError, match="'median' is not allowed for A/B projects.*"
                                              "allowed: majority, dawid_skene, mace, glad"):
        project_update(project=project, user=owner, data={"aggregation": "median"})
    project.refresh_from_db()
    assert project.aggregation == "majority"


def test_researcher_api_shows_and_changes_the_setting_and_names_bad_values():
    alice = make_user("alice")
    make_project(TaskKind.LIKERT, owner=alice, slug="mocha")
    api = APIClient()
    api.force_authenticate(alice)
    assert api.get("/api/projects/mocha/").json()["aggregation"] == "mean"
    response = api.patch("/api/projects/mocha/", {"aggregation": "median"}, format="json")
    assert response.status_code == 200 and response.json()["aggregation"] == "median"
    response = api.patch("/api/projects/mocha/", {"aggregation": "glad"}, format="json")
    assert response.status_code == 400
    assert "'glad' is not allowed for Likert projects" in response.json()["aggregation"][0]
    assert "allowed: mean, median" in response.json()["aggregation"][0]
    response = api.patch("/api/projects/mocha/", {"aggregation": "wisdom"}, format="json")
    assert response.status_code == 400
    assert '"wisdom" is not an aggregation model' in response.json()["aggregation"][0]
    assert Project.objects.get(slug="mocha").aggregation == "median"
    response = api.post("/api/projects/", {"slug": "starc", "title": "STARC", "kind": "mc",
                                           "aggregation": "mace"}, format="json")
    assert response.status_code == 201 and response.json()["aggregation"] == "mace"
    response = api.post("/api/projects/", {"slug": "ab", "title": "AB", "kind": "ab",
                                           "aggregation": "mean"}, format="json")
    assert response.status_code == 400 and "aggregation" in response.json()


def test_admin_form_shows_the_setting_and_refuses_a_misfit(client):
    root = make_user("root", superuser=True)
    client.force_login(root)
    project = make_project(TaskKind.LIKERT, owner=root, slug="admin-likert")
    url = reverse("admin:annotation_project_change", args=[project.pk])
    page = client.get(url)
    assert page.status_code == 200 and b'name="aggregation"' in page.content
    form = page.context["adminform"].form
    data = {name: form.initial.get(name) for name in form.fields}
    data.update({"redundancy": json.dumps(project.redundancy), "scale_labels": "[]",
                 "aspects": "[]", "aspect_preferences": "[]", "owner": root.pk,
                 "budget_cap": "", "shared_with": [],
                 "stages-TOTAL_FORMS": 0, "stages-INITIAL_FORMS": 0})
    response = client.post(url, {**data, "aggregation": "dawid_skene"})
    assert response.status_code == 200
    assert "'dawid_skene' is not allowed for Likert projects" in " ".join(
        response.context["adminform"].form.errors["aggregation"])
    response = client.post(url, {**data, "aggregation": "median"})
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.aggregation == "median"


def test_ab_lerc_targets_are_the_worker_models_posterior_when_the_project_chooses_one():
    """Two reliable judges agree on every pair; a third always answers B. Majority gives the
    share preferring A; Dawid–Skene gives its posterior, which discounts the constant judge."""
    from metrics_app.models import ModelKind

    project = make_project(TaskKind.AB, slug="ab-targets")
    stage = make_stage(project)
    judges = [make_worker(external_id=f"j{n}") for n in range(3)]
    for n in range(12):
        item = make_item(project, split="train", external_id=f"pair{n}")
        truth = "A" if n % 2 else "B"
        for judge, choice in zip(judges, (truth, truth, "B"), strict=True):
            Judgment.objects.create(item=item, stage=stage, worker=judge, choice=choice)
    share = lerc_dataset_build(projects=[project], kind=ModelKind.PAIRWISE, split_mode="item")
    assert sorted({round(e.label, 3) for e in share.train}) == [0.0, 0.667]
    project.aggregation = "dawid_skene"
    project.save()
    posterior = lerc_dataset_build(projects=[project], kind=ModelKind.PAIRWISE,
                                   split_mode="item")
    labels = sorted(e.label for e in posterior.train)
    assert labels[0] < 0.05 and labels[-1] > 0.9  # A-pairs now near-certain, not 2/3
    assert posterior.snapshot["projects"]["ab-targets"]["aggregation"] == "dawid_skene"


def test_ab_lerc_targets_count_a_tie_half_as_the_leaderboard_does():
    """A pair voted [A, tie, tie] was trained on as "A certainly better" (ties were dropped),
    while the leaderboard counts a tie as half a win. The share now counts it half; the worker
    models still read A and B only."""
    from metrics_app.models import ModelKind

    project = make_project(TaskKind.AB, slug="ab-ties")
    stage = make_stage(project)
    judges = [make_worker(external_id=f"t{n}") for n in range(3)]
    votes = {"mild": ("A", "tie", "tie"), "even": ("both_good", "both_bad", "tie"),
             "clear": ("B", "B", "both_bad")}
    items = {}
    for name, choices in votes.items():
        items[name] = item = make_item(project, split="train", external_id=name)
        for judge, choice in zip(judges, choices, strict=True):
            Judgment.objects.create(item=item, stage=stage, worker=judge, choice=choice)
    share = lerc_dataset_build(projects=[project], kind=ModelKind.PAIRWISE, split_mode="item")
    labels = {e.id: e.label for e in share.train}
    assert labels == {str(items["mild"].pk): pytest.approx(2 / 3),
                      str(items["even"].pk): pytest.approx(0.5),
                      str(items["clear"].pk): pytest.approx(1 / 6)}
    project.aggregation = "dawid_skene"
    project.save()
    posterior = lerc_dataset_build(projects=[project], kind=ModelKind.PAIRWISE,
                                   split_mode="item")
    # Only pairs with an A or B vote get a posterior; the all-tie pair is no example.
    assert {e.id for e in posterior.train} == {str(items["mild"].pk), str(items["clear"].pk)}


def test_metric_report_gold_follows_the_median_setting_and_goes_stale_when_it_changes():
    from metrics_app.services.meta_evaluation_report import (
        metric_report_cached,
        metric_report_refresh,
    )

    project = make_project(TaskKind.LIKERT, slug="gold-median")
    stage = make_stage(project)
    item = make_item(project)
    for score in (1, 3, 3):
        Judgment.objects.create(item=item, stage=stage, worker=make_worker(), score=score)
    from annotation.judgment_selectors import item_gold_scores

    assert item_gold_scores(project=project) == {item.pk: pytest.approx(7 / 3)}
    report = metric_report_refresh(project=project)
    assert report.data["human_score"] == "mean"
    project.aggregation = "median"
    project.save()
    assert item_gold_scores(project=project) == {item.pk: 3.0}
    _cached, stale = metric_report_cached(project=project)
    assert stale is True
    assert metric_report_refresh(project=project).data["human_score"] == "median"
