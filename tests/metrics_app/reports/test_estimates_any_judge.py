"""System estimates with a judge other than LERC (an imported-verdict judge with
probabilities, an LLM judge's verdicts, a metric's scores): the prediction-powered numbers
equal ppi-python's on the same labels and predictions, and the report names the judge and
its effective n."""
from __future__ import annotations

import json

import numpy as np
import pytest
from django.core.management import call_command

from annotation.judgment_selectors import load_judgments
from annotation.models import StageKind, TaskKind
from metrics_app.models import MetricScore
from metrics_app.reports.estimates import estimates_report
from metrics_app.services.judges.imports import verdicts_import
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(tmp_path):
    project = make_project(TaskKind.LIKERT, slug="any-judge")
    stage = make_stage(project, kind=StageKind.FULL)
    worker = make_worker()
    rng = np.random.default_rng(4)
    rows = []
    for system, accuracy in (("x", 0.8), ("y", 0.5)):
        for n in range(200):
            item = make_item(project, source=system, external_id=f"{system}{n}")
            correct = bool(rng.random() < accuracy)
            p = float(np.clip((0.75 if correct else 0.25) + rng.normal(0, 0.2), 0, 1))
            rows.append({"item_id": item.external_id, "probability": round(p, 4),
                         "verdict": "correct" if p >= 0.5 else "incorrect"})
            MetricScore.objects.create(item=item, metric="f1", version="1",
                                       value=float(correct) * 0.6 + rng.random() * 0.4)
            if n < 50:
                make_judgment(item=item, stage=stage, worker=worker, score=5 if correct else 1)
    path = tmp_path / "v.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="imported", version="1")
    return project


def test_prediction_powered_accuracy_with_an_imported_judge_matches_ppi_python(project):
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    report = estimates_report(load_judgments(project=project), project=project,
                              judge="imported")
    assert report["metric"]["judge"] == "imported@1"
    assert report["metric"]["kind"] == "imported"
    for system in ("x", "y"):
        ids = list(project.items.filter(source=system).order_by("id").values_list(
            "id", flat=True))
        from metrics_app.models import JudgeVerdict

        p = dict(JudgeVerdict.objects.filter(item__source=system).values_list(
            "item_id", "probability"))
        labelled = ids[:50]
        y = np.array([float(project.items.get(pk=i).judgments.get().score >= 3)
                      for i in labelled])
        f = np.array([p[i] for i in labelled])
        f_all = np.array([p[i] for i in ids])
        ppi = report["systems"][system]["accuracy"]["ppi"]
        assert ppi["n_human"] == 50 and ppi["n_items"] == 200
        lam = ppi["lam"]
        expected = ppi_mean_pointestimate(y, f, f_all, lam=lam)
        assert ppi["estimate"] == pytest.approx(float(np.ravel(expected)[0]), abs=1e-6)
        # ppi-python's interval treats the 200 items as a sample of an infinite pool; ours
        # holds the finite population fixed (the finite-population correction): narrower,
        # around the same centre.
        low, high = (float(np.ravel(v)[0]) for v in ppi_mean_ci(y, f, f_all, lam=lam))
        assert ppi["high"] - ppi["low"] < high - low
        assert ppi["effective_n"] > 50
        human = report["systems"][system]["accuracy"]["human"]
        assert ppi["high"] - ppi["low"] < human["high"] - human["low"]


def test_a_metric_and_an_unknown_judge(project):
    frame = load_judgments(project=project)
    report = estimates_report(frame, project=project, judge="metric:f1")
    assert report["metric"]["judge"] == "metric:f1"
    ppi = report["systems"]["x"]["accuracy"]["ppi"]
    assert ppi["effective_n"] > 50 and ppi["low"] < ppi["estimate"] < ppi["high"]
    # f1 has no 1-5 score: the mean score is predicted by 1 + 4 x its value.
    assert report["systems"]["x"]["mean_score"]["ppi"]["estimate"] is not None
    missing = estimates_report(frame, project=project, judge="nobody")
    assert "no judge named 'nobody'" in missing["skipped"]


def test_the_command_prints_estimates_with_a_judge(project, capsys):
    from io import StringIO

    out = StringIO()
    call_command("judge_report", project.slug, "--estimates-with", "imported", "--resamples",
                 "0", stdout=out)
    text = out.getvalue()
    assert "system estimates with imported@1" in text and "effective n" in text


def _one_system(slug: str, n: int):
    """A Likert project of `n` answers of one system "s", and how a human judges one."""
    project = make_project(TaskKind.LIKERT, slug=slug)
    stage = make_stage(project, kind=StageKind.FULL)
    worker = make_worker()
    for k in range(n):
        make_item(project, source="s", external_id=f"{slug}-{k}")
    return project, lambda item, score: make_judgment(item=item, stage=stage, worker=worker,
                                                      score=score)


def _system_with_judge(project, tmp_path, rows, *, routed: bool = False) -> dict:
    """System "s"'s estimates with a judge whose verdicts are `rows` (`routed`: after a draft
    stage drew on the judge's uncertainty, so the estimates weigh the draw)."""
    path = tmp_path / "judge.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="partial", version="1")
    if routed:
        from annotation.models import StageStatus
        from metrics_app.services.routing import stage_route_by_uncertainty

        stage = make_stage(project, kind=StageKind.FULL, name="routed",
                           status=StageStatus.DRAFT,
                           settings={"routing": "uncertainty", "routing_budget": 10})
        stage_route_by_uncertainty(stage=stage, judge="partial")
    report = estimates_report(load_judgments(project=project), project=project, judge="partial")
    return report["systems"]["s"]


def test_a_judge_that_saw_only_some_items_still_estimates_every_item(tmp_path):
    """A budget-capped or partial judge: the estimate is about all the system's items (the
    unscored ones predicted 0.5), so with every item labelled it equals the humans' exactly,
    not the accuracy of the few items the judge saw."""
    project, judge = _one_system("partial", 60)
    rows = []
    for n, item in enumerate(project.items.order_by("id")):
        correct = n % 3 != 0
        judge(item, score=5 if correct else 1)
        if n < 12 and correct:  # the judge saw 12 items, mostly right ones
            rows.append({"item_id": item.external_id, "probability": 0.9})
        elif n < 12:
            rows.append({"item_id": item.external_id, "probability": 0.6})
    system = _system_with_judge(project, tmp_path, rows)
    assert system["n_scored"] == 12 and system["n_items"] == 60
    accuracy = system["accuracy"]
    assert accuracy["ppi"]["estimate"] == pytest.approx(accuracy["human"]["estimate"]) == \
        pytest.approx(40 / 60)


@pytest.mark.parametrize("routed", [False, True])
def test_the_judge_alone_reads_only_the_verdicts_it_gave(routed, tmp_path):
    """A judge that scored half a system's answers, calling every one wrong: the judge's own
    estimate is 0 over the answers it scored and its bias is measured on the answers it and
    the humans both judged. The unscored half, predicted unsure (0.5) for the
    prediction-powered estimate, read as the judge calling them correct: its own accuracy
    read 0.5 over every answer, and its bias +1 on answers it never judged."""
    project, judge = _one_system("half-judged", 40)
    rows = []
    for n, item in enumerate(project.items.order_by("id")):
        if n % 2 == 0:  # humans: every other answer, each of them wrong
            judge(item, score=1)
        if n < 20:  # the judge: the first half, each "incorrect"
            rows.append({"item_id": item.external_id, "verdict": "incorrect",
                         "probability": 0.1})

    accuracy = _system_with_judge(project, tmp_path, rows, routed=routed)["accuracy"]
    assert accuracy.get("routed", False) is routed
    alone = accuracy["metric"]
    assert (alone["estimate"], alone["n_items"], alone["n_human"]) == (0.0, 20, 10)
    assert alone["bias"] == 0.0  # it says wrong where the humans say wrong
    # The prediction-powered estimate still covers all 40 answers.
    assert accuracy["ppi"]["n_items"] == 40


def _report_with_judge(project, tmp_path, rows, *, routed: bool) -> dict:
    """Every system's estimates with a judge whose verdicts are `rows` (`_system_with_judge`)."""
    _system_with_judge(project, tmp_path, rows, routed=routed)
    return estimates_report(load_judgments(project=project), project=project, judge="partial")


@pytest.mark.parametrize("routed", [False, True])
def test_a_system_the_judge_scored_none_of_has_no_judge_numbers_routed_or_not(routed,
                                                                              tmp_path):
    """A judge that scored system "t" only: system "s" has no estimate from the judge alone
    and no prediction-powered one, and says why, whether a routed draw is weighed or not.
    The routed path asked whether the judge scored anything in the project: "s" showed a
    judge alone over no item and a prediction-powered estimate from the unsure value alone."""
    project, judge = _one_system("routed-none", 0)
    rows = []
    for system in ("s", "t"):
        for k in range(20):
            item = make_item(project, source=system, external_id=f"{system}{k}")
            if k % 2 == 0:
                judge(item, score=1)
            if system == "t":
                rows.append({"item_id": item.external_id, "verdict": "incorrect",
                             "probability": 0.1})
    systems = _report_with_judge(project, tmp_path, rows, routed=routed)["systems"]
    assert systems["s"]["accuracy"].get("routed", False) is routed
    assert systems["s"]["n_scored"] == 0 and systems["t"]["n_scored"] == 20
    for quantity in ("accuracy", "mean_score"):
        unscored = systems["s"][quantity]
        assert "metric" not in unscored and "ppi" not in unscored, unscored
        assert unscored["judge_undefined"] == "partial@1 scored none of this system's items"
        assert unscored["human"]["estimate"] is not None
        scored = systems["t"][quantity]
        assert scored["judge_undefined"] is None and scored["metric"]["n_items"] == 20


@pytest.mark.parametrize("routed", [False, True])
def test_the_judge_alone_bias_says_the_judge_scored_none_of_the_labelled_items(routed,
                                                                               tmp_path):
    """The judge scored the first 10 answers, the humans labelled the other 10: the judge's
    bias read "no judgments that count yet" though 10 answers carry human labels."""
    project, judge = _one_system("disjoint", 20)
    rows = []
    for n, item in enumerate(project.items.order_by("id")):
        if n >= 10:
            judge(item, score=1 + n % 5)
        else:
            rows.append({"item_id": item.external_id, "verdict": "incorrect",
                         "probability": 0.1})
    alone = _system_with_judge(project, tmp_path, rows, routed=routed)["accuracy"]["metric"]
    assert (alone["n_items"], alone["n_human"], alone["bias"]) == (10, 0, None)
    assert alone["bias_undefined"] == ("the judge scored none of the 10 human-labelled items; "
                                       "its bias needs 2")


def test_a_routed_system_whose_judge_scored_only_items_outside_its_draw_says_so(tmp_path):
    """From the review: after a routing draw, a judge that scored only items added later read
    "scored none of this system's items" beside n_scored 10."""
    from annotation.models import StageStatus
    from metrics_app.services.routing import stage_route_by_uncertainty

    project, judge = _one_system("late", 20)
    drawn = list(project.items.order_by("id"))
    for item in drawn[:6]:
        judge(item, score=5)

    def verdicts(name, rows):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
        verdicts_import(project=project, path=path, judge=name, version="1")

    verdicts("router", [{"item_id": i.external_id, "probability": 0.7} for i in drawn])
    stage = make_stage(project, kind=StageKind.FULL, name="routed", status=StageStatus.DRAFT,
                       settings={"routing": "uncertainty", "routing_budget": 10})
    stage_route_by_uncertainty(stage=stage, judge="router")
    added = [make_item(project, source="s", external_id=f"new{k}") for k in range(10)]
    verdicts("late", [{"item_id": i.external_id, "probability": 0.2} for i in added])
    system = estimates_report(load_judgments(project=project), project=project,
                              judge="late")["systems"]["s"]
    assert system["n_scored"] == 10 and "metric" not in system["accuracy"]
    assert "it scored 10 outside them" in system["accuracy"]["judge_undefined"]
