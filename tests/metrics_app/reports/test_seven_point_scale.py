"""A Likert project on a 7-point scale is correct at its midpoint, 4 (`likert_correct_at`): a 3
("somewhat incorrect") is incorrect at every door that turns a score into correct/incorrect —
the judges' alignment with the humans, the system estimates, the metric report's decision
table — and LERC reads its gold mapped onto 1-5. Before, every door cut at 3, so on a 7-point
project a 3 counted as correct."""
from __future__ import annotations

import io
import json

import pytest

from annotation.domain.likert_scale import likert_correct_at, to_five_point
from annotation.judgment_selectors import load_judgments
from annotation.models import TaskKind
from annotation.services.exports import export_write
from metrics_app.reports.estimates import estimates_report
from metrics_app.services.judges.alignment import human_labels, judge_alignment_report
from metrics_app.services.judges.imports import verdicts_import
from metrics_app.services.lerc import lerc_dataset_build
from metrics_app.services.meta_evaluation_report import metric_evaluation_build, roc_curves
from metrics_app.services.scoring import project_score_metrics
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db

SEVEN_POINT = [f"point {n}" for n in range(1, 8)]
# (human score, candidate): the 3s are "somewhat incorrect" answers sharing no word with the
# reference; the 4s and 5s hold it.
ROWS = [(1, "a rug"), (3, "the kitchen"), (4, "the cat sat on the mat"), (5, "on the red mat")]


def _project(tmp_path, *, labels=SEVEN_POINT, slug="seven"):
    """Twenty-four items on distinct questions, two judges each agreeing on the score; the
    4s and 5s from system "good", the 1s and 3s from system "bad"; an imported judge says
    correct exactly on the 4s and 5s."""
    project = make_project(TaskKind.LIKERT, slug=slug, scale_labels=labels)
    stage = make_stage(project)
    workers = [make_worker(), make_worker()]
    verdicts = []
    for n in range(24):
        score, candidate = ROWS[n % 4]
        item = make_item(project, external_id=f"i{n}", source="good" if score >= 4 else "bad",
                         content={"passage": "The cat sat on the mat.",
                                  "question": f"Where did cat number {n} sit?",
                                  "references": ["on the mat"], "candidate": candidate})
        for worker in workers:
            make_judgment(item=item, stage=stage, worker=worker, score=score)
        verdicts.append({"item_id": item.external_id,
                         "verdict": "correct" if score >= 4 else "incorrect"})
    path = tmp_path / f"{slug}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in verdicts), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="ext", version="1")
    return project


def test_the_cut_is_the_midpoint_of_the_scale():
    assert likert_correct_at(5) == 3.0 and likert_correct_at() == 3.0
    assert likert_correct_at(7) == 4.0 and likert_correct_at(4) == 2.5
    assert [to_five_point(s, 7) for s in (1, 4, 7)] == [1.0, 3.0, 5.0]
    with pytest.raises(ValueError, match="top score must be a whole number of at least 2"):
        likert_correct_at(1)


def test_a_judge_agreeing_with_the_humans_on_a_seven_point_project_is_right(tmp_path):
    project = _project(tmp_path)
    by_score = {h["mean"]: h["label"] for h in human_labels(project).values()}
    assert by_score == {1.0: 0, 3.0: 0, 4.0: 1, 5.0: 1}
    report = judge_alignment_report(project=project, refs=["ext"], n_resamples=50,
                                    estimate_labels=10)
    judge = report["judges"]["ext@1"]
    assert judge["accuracy"] == 1.0 and judge["kappa"] == 1.0 and not judge["disagreements"]
    assert project.correct_at == 4.0


def test_the_estimates_count_a_three_as_incorrect_on_a_seven_point_project(tmp_path):
    project = _project(tmp_path)
    report = estimates_report(load_judgments(project=project), project=project)
    bad = report["systems"]["bad"]["accuracy"]["human"]["estimate"]
    good = report["systems"]["good"]["accuracy"]["human"]["estimate"]
    assert (bad, good) == (0.0, 1.0)
    assert report["correct_at"] == 4.0


def test_the_decision_table_labels_a_three_incorrect_on_a_seven_point_project(tmp_path):
    project = _project(tmp_path)
    project_score_metrics(project=project, metric_names=["f1"])
    report = metric_evaluation_build(project=project, params={"n_resamples": 0},
                                     metric_names=["f1"])
    decision = report["decision"]
    # f1 is 0 exactly on the 1s and 3s: it separates correct from incorrect.
    assert decision["metrics"]["f1"]["overall"]["accuracy"] == 1.0
    curves, _binary = roc_curves(project=project)
    assert curves["f1"]["auc"] == 1.0
    assert decision["correct_at"] == 4.0


def test_lerc_reads_seven_point_gold_on_one_to_five(tmp_path):
    project = _project(tmp_path)
    dataset = lerc_dataset_build(projects=[project], split_mode="group")
    examples = dataset.train + dataset.val + dataset.test
    assert examples
    assert {e.score for e in examples} <= {1.0, to_five_point(3, 7), 3.0, to_five_point(5, 7)}
    assert to_five_point(3, 7) < 3.0 <= to_five_point(4, 7)
    assert dataset.snapshot["projects"]["seven"]["scale"] == {"top": 7, "mapped_onto": [1, 5]}


def test_a_five_point_project_keeps_its_cut_at_three(tmp_path):
    project = _project(tmp_path, labels=[], slug="five")
    assert project.scale_top == 5 and project.correct_at == 3.0
    by_score = {h["mean"]: h["label"] for h in human_labels(project).values()}
    assert by_score == {1.0: 0, 3.0: 1, 4.0: 1, 5.0: 1}
    report = estimates_report(load_judgments(project=project), project=project)
    assert report["correct_at"] == 3.0
    dataset = lerc_dataset_build(projects=[project], split_mode="group")
    assert "scale" not in dataset.snapshot["projects"]["five"]


def test_the_exports_confidence_reads_the_seven_point_cut():
    """An aggregated export's confidence is the share of an item's judgments on its label's side
    of the cut: a 3 and a 4 on a 7-point project split evenly (was: both ≥ 3, full
    confidence)."""
    project = make_project(TaskKind.LIKERT, slug="seven-export", scale_labels=SEVEN_POINT)
    stage = make_stage(project)
    item = make_item(project, external_id="split")
    for score in (3, 4):
        make_judgment(item=item, stage=stage, worker=make_worker(), score=score)
    out = io.StringIO()
    export_write(project=project, out=out, fmt="jsonl", aggregate=True)
    [row] = map(json.loads, out.getvalue().splitlines())
    assert row["confidence"] == 0.5


def test_a_judges_one_to_five_score_predicts_the_mean_score_on_the_projects_scale(tmp_path):
    """A judge's score (its 1-5 score, or 1 + 4·P) predicts a 7-point project's mean score on
    1-7: a judge agreeing with humans who gave 7 and 1 reads 7 and 1, bias 0 (it read 5,
    "biased by -2", and weighed the prediction-powered estimate by a slope clipped from 1.5)."""
    project = make_project(TaskKind.LIKERT, slug="seven-mean", scale_labels=SEVEN_POINT)
    stage = make_stage(project)
    verdicts = []
    for n in range(12):
        good = n % 2 == 0
        item = make_item(project, external_id=f"m{n}", source="good" if good else "bad")
        make_judgment(item=item, stage=stage, worker=make_worker(), score=7 if good else 1)
        verdicts.append({"item_id": item.external_id,
                         "verdict": "correct" if good else "incorrect"})
    path = tmp_path / "mean.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in verdicts), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="ext", version="1")
    report = estimates_report(load_judgments(project=project), project=project, judge="ext")
    for system, top in (("good", 7.0), ("bad", 1.0)):
        mean = report["systems"][system]["mean_score"]
        assert mean["human"]["estimate"] == top
        assert mean["metric"]["estimate"] == pytest.approx(top)
        assert mean["metric"]["bias"] == pytest.approx(0.0)
