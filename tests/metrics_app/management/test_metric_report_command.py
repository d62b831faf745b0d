"""`manage.py metric_report SLUG --json`: the shape researchers script against."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import TaskKind
from metrics_app.services.scoring import project_score_metrics
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db

CELL = {"pearson", "spearman", "kendall", "n", "ci"}


def _run(*args) -> dict:
    out = io.StringIO()
    call_command("metric_report", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def _likert(project, candidate, **fields):
    return make_item(project, content={"passage": "", "question": "Where?",
                                       "references": ["on the mat"], "candidate": candidate},
                     **fields)


def test_likert_report_per_metric_and_group_with_minimal_pairs():
    project = make_project(kind=TaskKind.LIKERT, slug="mr-likert")
    stage = make_stage(project)
    for n, (candidate, score) in enumerate([("on the mat", 5), ("rug", 1), ("a mat", 4),
                                            ("the kitchen floor", 2), ("mat", 4)]):
        make_judgment(item=_likert(project, candidate, dataset="narrativeqa",
                                   source="gpt2" if n % 2 else "mhpg"),
                      stage=stage, score=score)
    for role, candidate in ((1, "on a mat"), (2, "in the kitchen")):
        _likert(project, candidate, dataset="narrativeqa", gold={"score": 5 - 3 * (role - 1)},
                metadata={"minimal_pair": "p1", "pair_role": role})
    project_score_metrics(project=project, metric_names=["f1", "length"])

    report = _run(project.slug, "--resamples", "20")
    assert report["metrics"].keys() == {"f1", "length"}
    groups = {"overall", "dataset:narrativeqa", "source:gpt2", "source:mhpg"}
    assert set(report["groups"]) == groups
    for metric in ("f1", "length"):
        assert set(report["correlations"][metric]) == groups
        for cell in report["correlations"][metric].values():
            assert set(cell) >= CELL
            assert set(cell["ci"]) == {"pearson", "spearman", "kendall"}
        assert report["correlations"][metric]["overall"]["n"] == 5   # pairs kept apart
    assert report["correlations"]["f1"]["overall"]["pearson"] > 0.5
    # minimal pairs: per metric and dataset {accuracy, n, ties, wins}
    pair = report["minimal_pairs"]["f1"]
    assert set(pair) == {"overall", "narrativeqa"}
    assert pair["overall"] == {"accuracy": 1.0, "n": 1, "ties": 0, "wins": 1}
    assert "pairwise" not in report

    with pytest.raises(CommandError, match="no project"):
        _run("missing")


def test_ab_report_has_the_pairwise_section_with_baselines():
    project = make_project(kind=TaskKind.AB, slug="mr-ab")
    stage = make_stage(project)
    experts = [make_worker() for _ in range(2)]
    for n in range(4):
        item = make_item(project, domain="Biology", content={
            "question": "Why?", "evidence": [], "setting": "HM",
            "answer_a": {"text": "short", "kind": "human", "upvotes": 3},
            "answer_b": {"text": "a much longer model answer " * (n + 1), "kind": "model",
                         "upvotes": None}})
        for expert in experts:
            make_judgment(item=item, stage=stage, worker=expert, choice="B" if n else "A")
    project_score_metrics(project=project, metric_names=["length"])

    report = _run(project.slug, "--resamples", "0")
    pairwise = report["pairwise"]
    assert pairwise["groups"] == ["overall", "domain:Biology", "setting:HM"]
    assert set(pairwise["baselines"]) == {"random", "always_human", "longer_answer"}
    # 8 judgments, 6 prefer the longer (model) answer
    assert pairwise["metrics"]["length"]["overall"] == {"accuracy": 0.75, "n": 8, "ties": 0}
    assert pairwise["baselines"]["always_human"]["overall"]["accuracy"] == 0.25
    assert pairwise["baselines"]["random"]["overall"]["accuracy"] == 0.5
    assert "correlations" not in report
