"""The metric evaluation report on small hand-built projects: groups, z-normalized gold,
study filters, gold fallback, caching and staleness."""
from __future__ import annotations

import pytest
from scipy.stats import pearsonr

from annotation.models import TaskKind
from metrics_app.aggregation import mean_by_item
from metrics_app.models import MetricScore
from metrics_app.services.metric_evaluation import (
    metric_evaluation_build,
    metric_report_cached,
    metric_report_refresh,
)
from metrics_app.services.scoring import project_score_metrics
from tests.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db


def _item(project, candidate, references, **fields):
    return make_item(project, content={"passage": "", "question": "q", "references": references,
                                       "candidate": candidate}, **fields)


def test_znormalized_gold_and_groups():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    strict, lenient = make_worker(), make_worker()
    rows = [("on the mat", ["on the mat"], 5, 4, "ds1", "gpt2"),
            ("on a rug", ["on the mat"], 2, 1, "ds1", "gpt2"),
            ("the mat", ["on the mat"], 4, 2, "ds2", "mhpg"),
            ("kitchen", ["on the mat"], 1, 1, "ds2", "mhpg"),
            ("mat on the", ["on the mat"], 3, 3, "ds2", "gpt2")]
    triples = []
    for cand, refs, s1, s2, dataset, source in rows:
        item = _item(project, cand, refs, dataset=dataset, source=source)
        make_judgment(item=item, stage=stage, worker=strict, score=s1)
        make_judgment(item=item, stage=stage, worker=lenient, score=s2)
        triples += [(strict.pk, item.pk, s1), (lenient.pk, item.pk, s2)]
    project_score_metrics(project=project, metric_names=["f1"])
    report = metric_evaluation_build(project=project,
                                     params={"znormalize": True, "n_resamples": 0})
    assert report["human_score"] == "z-normalized mean"
    assert report["groups"] == ["overall", "dataset:ds1", "dataset:ds2", "source:gpt2",
                                "source:mhpg"]
    gold = mean_by_item(triples, znormalize=True)
    f1 = dict(MetricScore.objects.filter(metric="f1").values_list("item_id", "value"))
    ids = sorted(gold)
    expected = pearsonr([f1[i] for i in ids], [gold[i] for i in ids]).statistic
    assert report["correlations"]["f1"]["overall"]["pearson"] == pytest.approx(expected)
    assert report["correlations"]["f1"]["dataset:ds1"]["n"] == 2
    assert report["correlations"]["f1"]["source:gpt2"]["n"] == 3


def test_study_filters_drop_exact_matches_and_span_number_pairs():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    specs = [("The mat.", ["on the mat", "mat"], "narrativeqa", 5),   # exact match
             ("12", ["13"], "ropes", 1),                             # numbers, span dataset
             ("12", ["13"], "narrativeqa", 2),                       # numbers, generative
             ("a rug", ["mat"], "ropes", 1),
             ("floor", ["mat"], "narrativeqa", 3)]
    for cand, refs, dataset, score in specs:
        make_judgment(item=_item(project, cand, refs, dataset=dataset), stage=stage, score=score)
    project_score_metrics(project=project, metric_names=["length"])

    def n(**params):
        report = metric_evaluation_build(project=project, params={"n_resamples": 0, **params})
        return report["correlations"]["length"]["overall"]["n"]

    assert n() == 5
    assert n(drop_exact_matches=True) == 4
    assert n(drop_number_pairs=True) == 4          # only the ropes pair goes
    assert n(drop_exact_matches=True, drop_number_pairs=True) == 3


def test_items_without_judgments_fall_back_to_imported_gold_and_excluded_items_are_left_out():
    project = make_project(kind=TaskKind.LIKERT)
    for cand, score in [("on the mat", 5), ("rug", 1), ("mat", 4)]:
        _item(project, cand, ["on the mat"], gold={"score": score})
    _item(project, "excluded", ["on the mat"], gold={"score": 2}, excluded=True)
    project_score_metrics(project=project, metric_names=["f1"])
    cell = metric_evaluation_build(project=project, params={"n_resamples": 0})[
        "correlations"]["f1"]["overall"]
    assert cell["n"] == 3 and cell["pearson"] > 0.9


def test_cached_report_goes_stale_with_new_judgments_or_scores():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    items = [_item(project, c, ["on the mat"]) for c in ("on the mat", "rug", "a mat")]
    for item, score in zip(items, (5, 1, 4), strict=True):
        make_judgment(item=item, stage=stage, score=score)
    project_score_metrics(project=project, metric_names=["f1"])
    assert metric_report_cached(project=project) == (None, True)
    report = metric_report_refresh(project=project, params={"n_resamples": 20})
    assert metric_report_cached(project=project, params={"n_resamples": 20}) == (report, False)
    make_judgment(item=items[0], stage=stage, score=4)
    assert metric_report_cached(project=project, params={"n_resamples": 20})[1] is True
    report = metric_report_refresh(project=project, params={"n_resamples": 20})
    project_score_metrics(project=project, metric_names=["length"])
    assert metric_report_cached(project=project, params={"n_resamples": 20})[1] is True
