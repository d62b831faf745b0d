"""Labels without spread measure no error: an estimate from them, while items remain
unlabelled, has no interval and says why (`metrics_app/domain/estimates.py:no_spread`), at
every door that shows one (the project report API, the dashboard, `manage.py report`,
`judge_report --estimates-with`, the judges page and its report, the judge plan).

Before: an imported judge that gave verdicts only, and agreed with the humans on the 8
labelled answers of each system (of 40), made the prediction-powered accuracy 0.750
[0.750, 0.750] and 0.500 [0.500, 0.500], and the pair "told apart" with "0 more judgments
needed", where the humans' own intervals were [0.44, 0.92] and [0.24, 0.76] and said 28 more;
the judge plan promised ±0.000 with such a judge, or with humans alone on a pilot where every
label was the same."""
from __future__ import annotations

import io
import json
from html import unescape

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import StageKind, TaskKind
from metrics_app.domain import estimates
from metrics_app.domain.judge_planning import SAME_PILOT_LABEL, SAME_PILOT_RESIDUAL, plan
from metrics_app.services.judges.alignment import judge_alignment_report
from metrics_app.services.judges.imports import verdicts_import
from metrics_app.services.judges.planning import judge_plan
from testing.factories import make_item, make_judgment, make_project, make_stage, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def test_labels_without_spread_give_no_interval_and_every_item_labelled_stays_exact():
    y = np.array([1, 0, 1, 1, 0, 1, 1, 1], dtype=float)
    f_all = np.concatenate([y, np.tile([1.0, 0.0], 16)])  # right on every labelled item
    ppi = estimates.prediction_powered(y, y, f_all)
    assert ppi.estimate == pytest.approx(f_all.mean())
    assert (ppi.low, ppi.high, ppi.se, ppi.effective_n) == (None, None, None, None)
    assert ppi.undefined == estimates.SAME_RESIDUAL
    # Every labelled answer correct, and a judge that says the same of every item: λ = 0
    # reads the humans alone, a share, which keeps Wilson's interval as `human_only` does.
    flat = estimates.prediction_powered(np.ones(8), np.ones(8), np.ones(40))
    alone = estimates.human_only(np.ones(8), n_items=40)
    assert (flat.low, flat.high, flat.undefined) == (alone.low, alone.high, None)
    # Scores alike with λ = 0: no interval, as for the humans alone.
    scores_flat = estimates.prediction_powered(np.full(8, 5.0), np.ones(8), np.ones(40))
    assert scores_flat.low is None and scores_flat.undefined == estimates.SAME_LABEL
    # A power-tuning weight a rounding short of 1 leaves no real spread either.
    assert estimates.prediction_powered(y, y * (1 - 1e-15), f_all).low is None
    # The whole population labelled: exact, an interval of width 0.
    exact = estimates.prediction_powered(y, y, y)
    assert exact.low == exact.high == pytest.approx(y.mean())
    assert exact.effective_n_undefined == estimates.EVERY_ITEM_JUDGED
    # Active inference: the same rule.
    pi = np.full(40, 0.2)
    active = estimates.active_estimate(y, list(range(8)), f_all, pi)
    assert active.low is None and active.undefined == estimates.SAME_RESIDUAL
    # Scores all alike (every labelled answer judged 5) out of more items.
    scores = estimates.human_only(np.full(6, 5.0), n_items=20)
    assert scores.estimate == 5.0 and scores.low is None
    assert scores.undefined == estimates.SAME_LABEL
    assert estimates.human_only(np.full(6, 5.0), n_items=6).low == 5.0  # all judged: exact
    # ... but read as a sample of new questions like these, never all of them.
    assert estimates.human_only(np.full(6, 5.0)).undefined == estimates.SAME_LABEL
    # Shares all alike keep Wilson's interval, which is made for them.
    share = estimates.human_only(np.ones(8), n_items=40)
    assert share.low < 0.8 and share.high == pytest.approx(1.0)
    bias = estimates.metric_only(f_all, y, y)
    assert bias["bias"] == 0.0 and bias["bias_low"] is None
    assert bias["bias_undefined"] == estimates.SAME_BIAS
    # With spread, nothing changes.
    spread = estimates.prediction_powered(y, np.array([1, 0, 1, 1, 1, 1, 1, 1.0]), f_all)
    assert spread.low < spread.estimate < spread.high and spread.undefined is None


@pytest.fixture
def agreeing_judge(tmp_path):
    """Two systems of 40 answers, 8 of each judged by humans; an imported judge's verdicts
    (no probability, no score) agree with the humans on all 16."""
    owner = make_user("no-spread-owner")
    project = make_project(TaskKind.LIKERT, slug="no-spread", owner=owner,
                           estimates_judge="agreeing")
    stage = make_stage(project, kind=StageKind.FULL)
    rows = []
    for system in ("x", "y"):
        for n in range(40):
            item = make_item(project, source=system, external_id=f"{system}{n}", content={
                "passage": "The cat sat on the mat.", "question": f"Question {n}?",
                "references": ["on the mat"], "candidate": f"answer {system} {n}"})
            correct = n % 4 != 0 if system == "x" else n % 2 == 0
            rows.append({"item_id": item.external_id,
                         "verdict": "correct" if correct else "incorrect"})
            if n < 8:
                make_judgment(item=item, stage=stage, score=5 if correct else 1)
    path = tmp_path / "verdicts.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="agreeing", version="1")
    return project, owner


def test_a_judge_right_on_every_labelled_item_gets_no_interval_at_any_door(agreeing_judge,
                                                                           client):
    project, owner = agreeing_judge
    why = estimates.SAME_RESIDUAL
    api = APIClient()
    api.force_authenticate(owner)
    report = api.get(reverse("metrics-api:project-report", args=[project.slug])).json()
    systems = report["estimates"]["systems"]
    assert systems["x"]["accuracy"]["ppi"]["estimate"] == 0.75
    for system in ("x", "y"):
        ppi = systems[system]["accuracy"]["ppi"]
        assert (ppi["low"], ppi["high"], ppi["undefined"]) == (None, None, why)
        assert systems[system]["accuracy"]["human"]["low"] < systems[system]["accuracy"][
            "human"]["high"]
    [pair] = report["estimates"]["pairs"]
    assert pair["accuracy"]["ppi"]["separated"] is None
    assert pair["accuracy"]["ppi"]["undefined"] == f"x: {why}"
    assert pair["accuracy"]["human"]["separated"] is False

    client.force_login(owner)
    dashboard = unescape(client.get(reverse("metrics:project-dashboard",
                                            args=[project.slug])).content.decode())
    table = dashboard[dashboard.index('id="estimates"'):]
    assert f"75.0% <small>(no interval: {why})</small>" in table
    # The pair's verdict falls back to the humans' difference, which can be measured.
    assert pair["shown"] == "human"
    assert "told apart" not in table and "not yet: about 28 more judgments" in table

    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    text = out.getvalue()
    assert f"0.750 (no interval: {why})" in text
    assert "(human), not separated; about 28 more judgments" in text
    assert "(ppi), separated" not in text

    out = io.StringIO()
    call_command("judge_report", project.slug, "--estimates-with", "agreeing", stdout=out)
    assert f"with the judge 0.750 (no interval: {why})" in out.getvalue()

    alignment = judge_alignment_report(project=project, refs=["agreeing"], n_resamples=0)
    estimate = alignment["estimates"]["agreeing@1"]
    assert estimate["ppi"]["low"] is None and estimate["ppi"]["undefined"] == why
    assert estimate["width_ratio"] is None
    out = io.StringIO()
    call_command("judge_report", project.slug, "--judge", "agreeing", "--resamples", "0",
                 stdout=out)
    assert f"agreeing@1: 0.625 (no interval: {why})" in out.getvalue()
    page = unescape(client.get(reverse("metrics:project-judges", args=[project.slug]),
                               {"resamples": 0}).content.decode())
    assert f"no interval: {why} (16 labels)" in page


def test_the_plan_predicts_no_width_from_a_pilot_without_spread(agreeing_judge):
    project, _owner = agreeing_judge
    result = judge_plan(project=project, budget=10, label_cost=0.5, refs=["agreeing"])
    judge = result["per_judge"]["agreeing@1"]
    assert judge["half_width_at_budget"] is None
    assert judge["half_width_undefined"] == SAME_PILOT_RESIDUAL
    assert all(row["half_width"] is None for row in result["table"]
               if row["judge"] == "agreeing@1")
    assert result["best"]["judge"] == "humans" and result["best"]["half_width"] > 0
    out = io.StringIO()
    call_command("judge_report", project.slug, "--plan", "10", "--label-cost", "0.5",
                 "--judge", "agreeing", stdout=out)
    assert f"agreeing@1: no width predicted: {SAME_PILOT_RESIDUAL}" in out.getvalue()
    assert "recommended: humans with" in out.getvalue()

    flat = plan(y=[1, 1, 1, 1], predictions={"judge": [0.9, 0.8, 0.7, 0.95]}, n_items=100,
                label_cost=1, judge_costs={}, budget=50)
    assert flat["best"] is None
    assert flat["per_judge"]["humans"]["half_width_undefined"] == SAME_PILOT_LABEL
    assert flat["best_undefined"].startswith("no width can be predicted: humans: ")
