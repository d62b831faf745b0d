"""An item's human label is one thing at every door: a researcher's adjudication wins and the
project's aggregation model applies in the export, the metric report, the system estimates and
the judges page (service level and through the API), and every cached copy notices an
adjudication (it adds no judgment)."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.urls import reverse
from rest_framework.test import APIClient
from scipy.stats import pearsonr

from annotation.judgment_selectors import item_gold_scores
from annotation.models import Judgment, TaskKind
from annotation.services.adjudication import adjudication_record
from annotation.services.exports import export_write
from metrics_app.models import MetricScore, ModelKind
from metrics_app.reports.project import cached_project_report, project_report, report_refresh
from metrics_app.services.judges.alignment import human_labels, judge_alignment_report_refresh
from metrics_app.services.judges.imports import verdicts_import
from metrics_app.services.lerc import lerc_dataset_build
from metrics_app.services.meta_evaluation_report import (
    metric_evaluation_build,
    metric_report_refresh,
)
from metrics_app.services.scoring import project_score_metrics
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db

CANDIDATES = ["on the mat", "on a mat", "the mat", "a rug", "under the table", "kitchen",
              "on the red mat", "mat"]


def _export(project) -> dict[str, dict]:
    out = io.StringIO()
    export_write(project=project, out=out, fmt="jsonl", aggregate=True)
    return {row["external_id"]: row for row in map(json.loads, out.getvalue().splitlines())}


@pytest.fixture
def likert(tmp_path):
    """Eight Likert items, three judges each; `disputed` ("on the mat", f1 = 1) was scored 1 by
    all three, and an imported judge calls it correct."""
    project = make_project(TaskKind.LIKERT, owner=make_user("labels-owner"), slug="labels")
    stage = make_stage(project)
    workers = [make_worker() for _ in range(3)]
    rows = []
    for n, candidate in enumerate(CANDIDATES):
        item = make_item(project, external_id="disputed" if n == 0 else f"i{n}",
                         source="s1" if n < 4 else "s2", dataset="narrativeqa", content={
                             "passage": "The cat sat on the mat.", "question": "Where?",
                             "references": ["on the mat"], "candidate": candidate})
        base = 1 if n == 0 else 1 + (7 - n) % 5
        for k, worker in enumerate(workers):
            make_judgment(item=item, stage=stage, worker=worker,
                          score=base if n == 0 else min(5, base + k % 2))
        rows.append({"item_id": item.external_id, "probability": 0.9 if n < 4 else 0.2})
    path = tmp_path / "v.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="ext", version="1")
    project_score_metrics(project=project, metric_names=["f1"])
    return project


def _decide(project, external_id, value):
    return adjudication_record(item=project.items.get(external_id=external_id), value=value,
                               note="read the passage again")


def test_an_adjudicated_likert_score_is_the_gold_of_the_metric_report(likert):
    before = metric_evaluation_build(project=likert, params={"n_resamples": 0})
    _decide(likert, "disputed", 5)
    gold = item_gold_scores(project=likert)
    disputed = likert.items.get(external_id="disputed")
    assert gold[disputed.pk] == 5.0
    assert _export(likert)["disputed"]["label"] == 5.0  # the export's label, as a number
    after = metric_evaluation_build(project=likert, params={"n_resamples": 0})
    f1 = dict(MetricScore.objects.filter(metric="f1").values_list("item_id", "value"))
    ids = sorted(gold)
    expected = pearsonr([f1[i] for i in ids], [gold[i] for i in ids]).statistic
    assert after["correlations"]["f1"]["overall"]["pearson"] == pytest.approx(expected)
    assert (after["correlations"]["f1"]["overall"]["pearson"]
            != pytest.approx(before["correlations"]["f1"]["overall"]["pearson"]))
    # z-normalized gold keeps the item, its score standardized by all the scores' spread.
    z = metric_evaluation_build(project=likert, params={"n_resamples": 0, "znormalize": True})
    assert z["correlations"]["f1"]["overall"]["n"] == len(CANDIDATES)
    scores = np.array(Judgment.objects.filter(item__project=likert).values_list("score",
                                                                                 flat=True))
    zgold = item_gold_scores(project=likert, znormalize=True)
    assert zgold[disputed.pk] == pytest.approx((5 - scores.mean()) / scores.std())


def test_the_metric_report_api_sees_an_adjudication_as_stale(likert):
    metric_report_refresh(project=likert, params={"n_resamples": 0})
    api = APIClient()
    api.force_authenticate(likert.owner)
    url = reverse("metrics-api:metric-report", args=[likert.slug])
    body = api.get(url, {"n_resamples": 0}).json()
    assert body["stale"] is False
    old = body["report"]["correlations"]["f1"]["overall"]["pearson"]
    _decide(likert, "disputed", 5)
    assert api.get(url, {"n_resamples": 0}).json()["stale"] is True
    fresh = api.get(url, {"n_resamples": 0, "refresh": 1}).json()
    assert fresh["report"]["correlations"]["f1"]["overall"]["pearson"] != pytest.approx(old)


def test_the_estimates_read_the_adjudicated_score_and_the_cache_notices(likert):
    report_refresh(project=likert)
    human = project_report(project=likert)["estimates"]["systems"]["s1"]["accuracy"]["human"]
    _decide(likert, "disputed", 5)
    cached = cached_project_report(project=likert)  # the dashboard's and the API's read
    after = cached["estimates"]["systems"]["s1"]["accuracy"]["human"]
    assert after["estimate"] == pytest.approx(human["estimate"] + 1 / 4)
    assert cached["estimates"] == project_report(project=likert)["estimates"]
    api = APIClient()
    api.force_authenticate(likert.owner)
    body = api.get(reverse("metrics-api:project-report", args=[likert.slug])).json()
    assert (body["estimates"]["systems"]["s1"]["accuracy"]["human"]["estimate"]
            == pytest.approx(after["estimate"]))


def test_the_judges_page_reads_the_adjudicated_label_and_its_cache_notices(likert):
    disputed = likert.items.get(external_id="disputed")
    assert human_labels(likert)[disputed.pk]["label"] == 0
    api = APIClient()
    api.force_authenticate(likert.owner)
    url = reverse("metrics-api:judge-report", args=[likert.slug])
    first = judge_alignment_report_refresh(project=likert, n_resamples=20)
    cached = api.get(url, {"resamples": 20}).json()
    assert cached["computed_at"] == first["computed_at"]
    _decide(likert, "disputed", 5)
    assert human_labels(likert)[disputed.pk]["label"] == 1
    fresh = api.get(url, {"resamples": 20}).json()
    assert fresh["computed_at"] != first["computed_at"]
    # The judge called the item correct: it agreed with the humans once more.
    assert (fresh["judges"]["ext@1"]["accuracy"]
            == pytest.approx(cached["judges"]["ext@1"]["accuracy"] + 1 / len(CANDIDATES)))


@pytest.mark.parametrize("model", ["majority", "dawid_skene", "mace", "glad"])
def test_ab_judges_labels_are_the_exports_labels_under_every_model(model):
    """Two judges per pair, an expert who is always right and a worker who is right half the
    time: a tie under majority, broken by the worker models. The judges page's label of every
    item is the export's (the adjudicated side where a researcher decided)."""
    project = make_project(TaskKind.AB, slug=f"ab-{model}", aggregation=model)
    stage = make_stage(project)
    expert, guesser, third = make_worker(), make_worker(), make_worker()
    for n in range(16):
        truth = "AB"[n % 2]
        item = make_item(project, external_id=f"p{n}")
        make_judgment(item=item, stage=stage, worker=expert, choice=truth)
        make_judgment(item=item, stage=stage, worker=guesser,
                      choice=truth if n % 4 < 2 else "AB"[(n + 1) % 2])
        if n < 8:
            make_judgment(item=item, stage=stage, worker=third, choice=truth)
    unanimous = project.items.get(external_id="p0")  # all three chose A
    _decide(project, "p0", "B")
    exported = _export(project)
    labels = human_labels(project)
    for item in project.items.exclude(pk=unanimous.pk):
        side = exported[item.external_id]["label"]
        if side is None:
            assert item.pk not in labels
        else:
            assert labels[item.pk]["label"] == int(side == "A")
    assert labels[unanimous.pk]["label"] == 0  # adjudicated B over three votes for A
    assert item_gold_scores(project=project) == {}  # a choice is no Likert score
    ties = [item for item in project.items.all()
            if exported[item.external_id]["majority_tie"]]
    assert ties
    if model != "majority":  # the worker models give every tie a label, and so does the page
        assert all(item.pk in labels for item in ties)
    from annotation.services.exports import item_labels  # the owner (new)

    owner = {item: entry.label for item, entry in item_labels(project=project).items()}
    assert owner == {item.pk: exported[item.external_id]["label"]
                     for item in project.items.all()}


def test_a_disagreement_against_an_adjudication_is_not_shown_as_unanimous_humans(likert):
    """i3 was scored 5 by all three judges and the imported judge calls it correct; a researcher
    adjudicates it incorrect. The judge now disagrees with the label, but the humans who judged
    it sided with the judge: the "plainest disagreements" list (humans agreeing, judge sure)
    must not rank it as humans unanimous against the judge."""
    from metrics_app.services.judges.alignment import judge_alignment_report

    _decide(likert, "i3", 1)
    i3, i2 = (likert.items.get(external_id=x) for x in ("i3", "i2"))
    assert human_labels(likert)[i3.pk]["agreement"] == 0.0
    rows = judge_alignment_report(project=likert, n_resamples=0)["judges"]["ext@1"][
        "disagreements"]
    by_item = {row["item"]: row for row in rows}
    assert by_item["i3"]["human_label"] == "incorrect" and by_item["i3"]["human_agreement"] == 0
    assert by_item["i2"]["human_agreement"] == 1  # unanimous 1s and 2s, the judge said correct
    assert [row["item"] for row in rows].index("i2") < [row["item"] for row in rows].index("i3")


def _lerc_targets(project, **pins) -> dict[str, float]:
    dataset = lerc_dataset_build(projects=[project], split_mode="group", **pins)
    return {example.id: example.score
            for example in (*dataset.train, *dataset.val, *dataset.test)}


def test_an_adjudication_is_the_learned_metrics_target_from_the_version_that_pins_it(likert):
    """The LERC data set reads an item's label by the same rule (its adjudication wins), and a
    version reads the adjudications it pinned: one created before the decision trains on the
    crowd's gold, one created after on the decision (before: the crowd's mean always)."""
    rug = likert.items.get(external_id="i3")  # three judges, all 5
    before = lerc_dataset_build(projects=[likert], split_mode="group")
    assert _lerc_targets(likert)[str(rug.pk)] == 5.0
    _decide(likert, "i3", 1)
    after = lerc_dataset_build(projects=[likert], split_mode="group")
    assert _lerc_targets(likert)[str(rug.pk)] == 1.0
    assert after.snapshot["projects"][likert.slug]["adjudicated"] == 1
    # Pinned: the earlier data set's watermarks read no adjudication; the later one's do.
    assert _lerc_targets(likert, watermarks=before.snapshot["watermarks"],
                         adjudication_watermarks=before.snapshot[
                             "adjudication_watermarks"])[str(rug.pk)] == 5.0
    assert _lerc_targets(likert, watermarks=after.snapshot["watermarks"],
                         adjudication_watermarks=after.snapshot[
                             "adjudication_watermarks"])[str(rug.pk)] == 1.0
    # A version pinned before adjudications were pinned at all reads none of them.
    assert _lerc_targets(likert, watermarks=after.snapshot["watermarks"])[str(rug.pk)] == 5.0


def test_an_adjudicated_ab_pair_is_a_certain_lerc_target():
    project = make_project(TaskKind.AB, owner=make_user("ab-labels-owner"), slug="ab-labels")
    stage = make_stage(project)
    workers = [make_worker() for _ in range(3)]
    items = []
    for n in range(6):
        item = make_item(project, external_id=f"p{n}", content={
            "question": f"Why {n}?", "evidence": [], "setting": "HM",
            "answer_a": {"text": f"first answer {n}", "kind": "human", "upvotes": 1},
            "answer_b": {"text": f"second answer {n}", "kind": "model", "upvotes": None}})
        for worker in workers:
            make_judgment(item=item, stage=stage, worker=worker, choice="A",
                          justification="A reads better and answers the question.")
        items.append(item)
    dataset = lerc_dataset_build(projects=[project], kind=ModelKind.PAIRWISE,
                                 split_mode="group")
    labels = {e.id: e.label for e in (*dataset.train, *dataset.val, *dataset.test)}
    assert labels[str(items[0].pk)] == 1.0
    _decide(project, "p0", "B")
    dataset = lerc_dataset_build(projects=[project], kind=ModelKind.PAIRWISE,
                                 split_mode="group")
    labels = {e.id: e.label for e in (*dataset.train, *dataset.val, *dataset.test)}
    assert labels[str(items[0].pk)] == 0.0 and labels[str(items[1].pk)] == 1.0


@pytest.mark.parametrize("kind", [TaskKind.LIKERT, TaskKind.AB])
def test_an_adjudicated_item_whose_judgments_no_longer_count_is_labelled_at_every_door(kind):
    """An item judged only by a worker since blocked, then adjudicated by a researcher: the
    metric report, the estimates, the export and the frames read its adjudicated label; the
    judges page and the judge plan left it out ("7 of 8 study items carry a human label"
    beside the metric report's "8 of 8"), so a judge was measured on other items there."""
    from annotation.judgment_selectors import load_judgments
    from annotation.models import WorkerStatus
    from metrics_app.reports.estimates import estimates_report
    from metrics_app.services.judges.alignment import judge_alignment_report
    from metrics_app.services.judges.planning import judge_plan

    project = make_project(kind, slug=f"adjudicated-only-{kind}")
    stage = make_stage(project)
    blocked = make_worker(status=WorkerStatus.BLOCKED)
    workers = [make_worker() for _ in range(2)]
    for n in range(8):
        item = make_item(project, external_id=f"a{n}", source="s1" if n % 2 else "s2",
                         content={"passage": "The cat sat on the mat.",
                                  "question": f"Where? {n}", "references": ["on the mat"],
                                  "candidate": CANDIDATES[n]} if kind == TaskKind.LIKERT
                         else {"question": f"Why? {n}", "answer_a": {"text": f"a {n}"},
                               "answer_b": {"text": f"b {n}"}})
        if n == 0:
            make_judgment(item=item, stage=stage, worker=blocked,
                          **({"score": 1} if kind == TaskKind.LIKERT else {"choice": "B"}))
            _decide(project, "a0", 5 if kind == TaskKind.LIKERT else "A")
            continue
        for worker in workers:
            make_judgment(item=item, stage=stage, worker=worker,
                          **({"score": 1 + n % 5} if kind == TaskKind.LIKERT
                             else {"choice": "AB"[n % 2]}))
    adjudicated = project.items.get(external_id="a0")
    assert _export(project)["a0"]["label"] == (5 if kind == TaskKind.LIKERT else "A")
    labels = human_labels(project)
    assert labels[adjudicated.pk]["label"] == 1 and labels[adjudicated.pk]["n"] == 0
    judges = judge_alignment_report(project=project, refs=[], n_resamples=0)
    assert (judges["n_items"], judges["n_labelled"]) == (8, 8)
    if kind == TaskKind.LIKERT:
        project_score_metrics(project=project, metric_names=["f1"])
        metric = metric_report_refresh(project=project, params={"n_resamples": 0}).data
        estimates = estimates_report(load_judgments(project=project), project=project)
        judges = judge_alignment_report(project=project, refs=["metric:f1"], n_resamples=0)
        plan = judge_plan(project=project, budget=10, label_cost=1, refs=["metric:f1"])
        assert metric["measured_on"]["labelled"] == 8
        assert (judges["measured_on"] == estimates["measured_on"] == plan["measured_on"]
                == metric["measured_on"])
        assert plan["pilot_labels"] == 8
