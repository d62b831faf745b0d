"""The metric evaluation report on small hand-built projects: groups, z-normalized gold,
study filters, gold fallback, caching and staleness."""
from __future__ import annotations

import pytest
from scipy.stats import pearsonr

from annotation.domain.aggregation import mean_by_item
from annotation.models import TaskKind
from metrics_app.models import MetricScore, Report
from metrics_app.services.meta_evaluation_report import (
    metric_evaluation_build,
    metric_report_cached,
    metric_report_cached_with_reason,
    metric_report_refresh,
    metric_report_stale_reason,
    scatter_points,
)
from metrics_app.services.scoring import project_score_metrics
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

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


def test_study_filters_drop_exact_matches_and_drop_number_pairs():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    specs = [("The mat.", ["on the mat", "mat"], "narrativeqa", 5),   # exact match
             ("12", ["13"], "drop", 1),                              # numbers, DROP
             ("12", ["13"], "ropes", 2),                             # numbers, kept by MOCHA
             ("12", ["13"], "narrativeqa", 2),                       # numbers, generative
             ("a rug", ["mat"], "drop", 1),
             ("floor", ["mat"], "narrativeqa", 3)]
    for cand, refs, dataset, score in specs:
        make_judgment(item=_item(project, cand, refs, dataset=dataset), stage=stage, score=score)
    project_score_metrics(project=project, metric_names=["length"])

    def n(**params):
        report = metric_evaluation_build(project=project, params={"n_resamples": 0, **params})
        return report["correlations"]["length"]["overall"]["n"]

    assert n() == 6
    assert n(drop_exact_matches=True) == 5
    # MOCHA filtered number-vs-number pairs in DROP only: the DROP pair goes, ROPES' stays
    assert n(drop_number_pairs=True) == 5
    report = metric_evaluation_build(project=project,
                                     params={"n_resamples": 0, "drop_number_pairs": True})
    assert report["correlations"]["length"]["dataset:drop"]["n"] == 1
    assert report["correlations"]["length"]["dataset:ropes"]["n"] == 1
    assert n(drop_exact_matches=True, drop_number_pairs=True) == 4


def test_znormalized_gold_never_mixes_in_imported_raw_scores():
    """Items with judgments get z-scores; an item with only an imported raw 1-5 mean has no
    z-score and is left out (counted), in the table and in the scatter plot alike."""
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    worker = make_worker()
    judged = []
    for cand, score in [("on the mat", 5), ("rug", 1), ("a mat", 4), ("floor", 2)]:
        item = _item(project, cand, ["on the mat"])
        make_judgment(item=item, stage=stage, worker=worker, score=score)
        judged.append(item.pk)
    imported = [_item(project, c, ["on the mat"], gold={"score": g}).pk
                for c, g in [("mat", 5), ("the rug", 1)]]
    project_score_metrics(project=project, metric_names=["f1"])

    z = metric_evaluation_build(project=project, params={"znormalize": True, "n_resamples": 0})
    assert z["correlations"]["f1"]["overall"]["n"] == 4
    assert z["n_skipped_imported_gold"] == 2
    raw = metric_evaluation_build(project=project, params={"n_resamples": 0})
    assert raw["correlations"]["f1"]["overall"]["n"] == 6
    assert raw["n_skipped_imported_gold"] == 0

    xs, ys, total = scatter_points(project=project, metric="f1", params={"znormalize": True})
    assert total == 4
    assert sum(ys) == pytest.approx(0.0, abs=1e-9)   # one annotator's z-scores only
    xs, ys, total = scatter_points(project=project, metric="f1")
    assert total == 6 and sorted(ys) == [1, 1, 2, 4, 5, 5]
    assert len(judged) + len(imported) == total


def test_minimal_pairs_stay_out_of_the_correlation_groups():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    for cand, score in [("on the mat", 5), ("rug", 1), ("a mat", 4)]:
        make_judgment(item=_item(project, cand, ["on the mat"], dataset="ds"), stage=stage,
                      score=score)
    for role, (cand, score) in enumerate([("the mat", 4), ("the kitchen", 1)], start=1):
        _item(project, cand, ["on the mat"], dataset="ds", gold={"score": score},
              metadata={"minimal_pair": "p1", "pair_role": role})
    project_score_metrics(project=project, metric_names=["f1"])
    report = metric_evaluation_build(project=project, params={"n_resamples": 0})
    assert report["correlations"]["f1"]["overall"]["n"] == 3
    assert report["correlations"]["f1"]["dataset:ds"]["n"] == 3
    assert report["minimal_pairs"]["f1"]["overall"]["n"] == 1
    assert scatter_points(project=project, metric="f1")[2] == 3


def test_scatter_uses_the_tables_study_filters():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    specs = [("on the mat", ["on the mat"], "drop", 5),    # exact match
             ("12", ["13"], "drop", 1),                    # DROP number pair
             ("a rug", ["mat"], "drop", 2),
             ("floor", ["mat"], "drop", 3)]
    for cand, refs, dataset, score in specs:
        make_judgment(item=_item(project, cand, refs, dataset=dataset), stage=stage, score=score)
    project_score_metrics(project=project, metric_names=["length"])
    for params, expected in [({}, 4), ({"drop_exact_matches": True}, 3),
                             ({"drop_number_pairs": True}, 3),
                             ({"drop_exact_matches": True, "drop_number_pairs": True}, 2)]:
        table = metric_evaluation_build(project=project, params={"n_resamples": 0, **params})
        assert table["correlations"]["length"]["overall"]["n"] == expected
        assert scatter_points(project=project, metric="length", params=params)[2] == expected


def test_items_without_judgments_fall_back_to_imported_gold_and_excluded_items_are_left_out():
    project = make_project(kind=TaskKind.LIKERT)
    for cand, score in [("on the mat", 5), ("rug", 1), ("mat", 4)]:
        _item(project, cand, ["on the mat"], gold={"score": score})
    _item(project, "excluded", ["on the mat"], gold={"score": 2}, excluded=True)
    project_score_metrics(project=project, metric_names=["f1"])
    cell = metric_evaluation_build(project=project, params={"n_resamples": 0})[
        "correlations"]["f1"]["overall"]
    assert cell["n"] == 3 and cell["pearson"] > 0.9


def _judged_and_scored():
    """Three judged items scored with F1: (project, stage, items)."""
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    items = [_item(project, c, ["on the mat"]) for c in ("on the mat", "rug", "a mat")]
    for item, score in zip(items, (5, 1, 4), strict=True):
        make_judgment(item=item, stage=stage, score=score)
    project_score_metrics(project=project, metric_names=["f1"])
    return project, stage, items


def test_cached_report_goes_stale_with_new_judgments_or_scores():
    project, stage, items = _judged_and_scored()
    assert metric_report_cached(project=project) == (None, True)
    report = metric_report_refresh(project=project, params={"n_resamples": 20})
    assert metric_report_cached(project=project, params={"n_resamples": 20}) == (report, False)
    make_judgment(item=items[0], stage=stage, score=4)
    assert metric_report_cached(project=project, params={"n_resamples": 20})[1] is True
    report = metric_report_refresh(project=project, params={"n_resamples": 20})
    project_score_metrics(project=project, metric_names=["length"])
    assert metric_report_cached(project=project, params={"n_resamples": 20})[1] is True


def test_a_copy_cached_by_an_older_report_says_so_until_it_is_refreshed():
    """A copy stored before an undefined correlation said why keeps showing a dash (or kappa
    0.000) with no word that it is old: no judgment or score changed. Its format says it."""
    project, _stage, _items = _judged_and_scored()
    report = metric_report_refresh(project=project, params={"n_resamples": 20})
    assert metric_report_stale_reason(project=project, report=report) == ""
    for stored, says in [({"format_version": 2}, "undefined correlation or kappa says why"),
                         ({}, "only on the answers they never saw")]:
        data = {k: v for k, v in report.data.items() if k != "format_version"}
        if stored:
            data.update(stored)
        else:
            data.pop("left_out_seen")
        Report.objects.filter(pk=report.pk).update(data=data)
        cached, reason = metric_report_cached_with_reason(project=project,
                                                          params={"n_resamples": 20})
        assert cached.pk == report.pk and says in reason
    metric_report_refresh(project=project, params={"n_resamples": 20})
    assert metric_report_cached(project=project, params={"n_resamples": 20})[1] is False


def test_a_cached_report_whose_params_were_stored_in_another_key_order_is_found():
    """A database restored from a PostgreSQL dump holds the params in jsonb's key order. The
    metric report looked its row up with a JSON equality lookup: PostgreSQL compares values,
    SQLite the stored text, so on SQLite the page said "no report has been computed" while
    each refresh (`report_store`, which compares in Python) rewrote that very row. Every
    cached report is now found by the one lookup, `reports/store.py:report_cached`."""
    project, _stage, _items = _judged_and_scored()
    report = metric_report_refresh(project=project, params={"n_resamples": 20})
    reordered = dict(reversed(list(report.params.items())))
    assert list(reordered) != list(report.params) and reordered == report.params
    Report.objects.filter(pk=report.pk).update(params=reordered)
    assert metric_report_cached(project=project, params={"n_resamples": 20}) == (report, False)
    assert metric_report_cached(project=project, params={"n_resamples": 30},
                                any_resamples=True) == (report, False)
    assert metric_report_refresh(project=project, params={"n_resamples": 20}).pk == report.pk
    assert Report.objects.filter(project=project).count() == 1


def test_scores_without_any_judgment_give_a_report_without_decision_or_significance():
    """Scoring a project before anyone judged it (what a scoring job does) must not fail."""
    project = make_project(kind=TaskKind.LIKERT)
    for n in range(4):
        make_item(project, content={"passage": "", "question": f"q{n}", "references": ["a"],
                                    "candidate": "a" * (n + 1)})
    project_score_metrics(project=project, metric_names=["em", "length"])
    report = metric_evaluation_build(project=project, params={"n_resamples": 10})
    assert report["metrics"] == {"em": "squad-v1", "length": report["metrics"]["length"]}
    assert report["correlations"] == {"em": {}, "length": {}}
    assert "decision" not in report and "significance" not in report


@pytest.mark.reliability
def test_the_significance_tests_do_not_depend_on_the_import_order_or_item_names():
    """The paired bootstrap of "is metric A's Pearson higher than B's" resampled the items in
    the order of their ids, which follow the import order: 600 real EVOUNA answers imported in
    another row order moved every interval (contains over f1: [0.170, 0.264] → [0.171, 0.268])
    and a p-value from 0.002 to 0.000."""
    rows = [(f"answer {i} " + "mat " * (i % 4) + "x" * (i % 7), 1 + (i * 7) % 5)
            for i in range(40)]
    reports = []
    for slug, ordered, prefix in (("sig-first", rows, "a"), ("sig-second", rows[::-1], "b")):
        project = make_project(kind=TaskKind.LIKERT, slug=slug)
        stage = make_stage(project)
        worker = make_worker()
        for n, (candidate, score) in enumerate(ordered):
            item = _item(project, candidate, ["on the mat"], external_id=f"{prefix}-{n}")
            make_judgment(item=item, stage=stage, worker=worker, score=score)
        project_score_metrics(project=project, metric_names=["f1", "bleu1", "length"])
        reports.append(metric_evaluation_build(project=project,
                                               params={"n_resamples": 200}))
    first, second = (report["significance"] for report in reports)
    assert len(first["pairs"]) == 3
    for one, two in zip(first["pairs"], second["pairs"], strict=True):
        assert (one["a"], one["b"]) == (two["a"], two["b"])
        assert two["bootstrap"]["ci"] == pytest.approx(one["bootstrap"]["ci"], abs=1e-12)
        assert two["bootstrap"]["p_not_better"] == one["bootstrap"]["p_not_better"]
