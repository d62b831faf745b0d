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


def _binary_project(slug: str, *, declared_split: bool):
    """Answers judged correct (5) or not (1); `length` separates them only on the validation
    side (long = correct there, short = correct on the measured side), so a threshold chosen
    on the measured items would differ from the one the report must use."""
    project = make_project(kind=TaskKind.LIKERT, slug=slug)
    stage = make_stage(project)
    for n in range(40):
        validation = n < 20
        correct = n % 2 == 0
        words = (6 if correct else 2) if validation else (2 if correct else 6)
        item = make_item(project, split=("dev" if validation else "test") if declared_split
                         else "", content={"passage": "", "question": f"Question {n}?",
                                           "references": ["x"], "candidate": "w " * words})
        make_judgment(item=item, stage=stage, worker=make_worker(), score=5 if correct else 1)
    project_score_metrics(project=project, metric_names=["length", "em"])
    return project


def test_decision_threshold_is_chosen_on_the_validation_split_and_measured_on_the_rest():
    project = _binary_project("mr-binary", declared_split=True)
    decision = _run(project.slug, "--resamples", "50")["decision"]
    assert decision["threshold_chosen_on"] == "the project's validation split"
    assert (decision["n_validation_items"], decision["n_test_items"]) == (20, 20)
    length = decision["metrics"]["length"]["overall"]
    assert length["threshold"] == 6.0          # what validation says: long answers are right
    assert length["accuracy"] == 0.0 and length["n"] == 20   # and it fails on the other side
    assert length["roc_auc"] == 0.0 and length["kappa"] == pytest.approx(-1.0)
    assert set(decision["metrics"]) == {"length", "em"}


def test_without_a_split_half_of_the_questions_choose_the_threshold():
    project = _binary_project("mr-hash", declared_split=False)
    decision = _run(project.slug, "--resamples", "0")["decision"]
    assert decision["threshold_chosen_on"].startswith("half of the questions")
    assert decision["n_validation_items"] + decision["n_test_items"] == 40
    assert 10 <= decision["n_validation_items"] <= 30


def test_significance_compares_every_two_metrics_on_the_same_items():
    project = make_project(kind=TaskKind.LIKERT, slug="mr-sig")
    stage = make_stage(project)
    for n in range(30):
        score = 1 + n % 5
        item = make_item(project, content={
            "passage": "", "question": f"Where is cat {n}?", "references": ["on the mat"],
            "candidate": "on the mat " + "x " * (score * 2 + n % 3)})
        make_judgment(item=item, stage=stage, worker=make_worker(), score=score)
    project_score_metrics(project=project, metric_names=["length", "f1"])
    report = _run(project.slug, "--resamples", "100")
    assert "decision" in report, sorted(report)
    pairs = report["significance"]["pairs"]
    assert [(p["a"], p["b"]) for p in pairs] == [("length", "f1")]   # higher Pearson first
    pair = pairs[0]
    assert pair["pearson_a"] == pytest.approx(report["correlations"]["length"]["overall"]["pearson"])
    assert pair["williams"]["p_one_sided"] < 0.05 and pair["bootstrap"]["difference"] > 0
    text = io.StringIO()
    call_command("metric_report", project.slug, stdout=text)
    assert "Williams p =" in text.getvalue() and "correct / incorrect" in text.getvalue()


def test_score_project_scores_resumes_and_explains_bad_input():
    project = make_project(kind=TaskKind.LIKERT, slug="sp")
    for candidate in ("on the mat", "rug", "a mat"):
        _likert(project, candidate)
    hint = io.StringIO()
    call_command("metric_report", "sp", stdout=hint)
    assert "python manage.py score_project sp --metric" in hint.getvalue()
    out = io.StringIO()
    call_command("score_project", "sp", "--metric", "em,f1", "--no-progress", stdout=out)
    assert "em (squad-v1): 3 scored, 0 already stored" in out.getvalue()
    again = io.StringIO()
    call_command("score_project", "sp", "--metric", "em,f1,length", "--no-progress",
                 stdout=again)
    assert "f1 (squad-v1): 0 scored, 3 already stored" in again.getvalue()
    assert "length (" in again.getvalue() and "next: python manage.py metric_report sp" in \
        again.getvalue()
    with pytest.raises(CommandError, match="no project with slug 'nope'"):
        call_command("score_project", "nope", "--metric", "em")
    with pytest.raises(CommandError, match="unknown metric.*bogus"):
        call_command("score_project", "sp", "--metric", "em,bogus")
    with pytest.raises(CommandError, match="not computed: lerc"):
        call_command("score_project", "sp", "--metric", "lerc", "--no-progress",
                     stdout=io.StringIO())


def test_a_multiple_choice_project_is_never_sent_to_score_project(shared_data):
    """The real OneStopQA items (mc): `metric_report` said "compute them first, e.g.
    score_project starc --metric em,f1,...", and that command then said only "has no items to
    score". Both now give the rule the metrics page and API give, and where the numbers are."""
    out = io.StringIO()
    call_command("import_data", "onestopqa", str(shared_data / "onestopqa" / "onestop_qa.json"),
                 "--project", "starc", "--create", "--no-progress", "--no-report", stdout=out)
    assert "1458 created" in out.getvalue()
    hint = io.StringIO()
    call_command("metric_report", "starc", stdout=hint)
    assert "score_project" not in hint.getvalue()
    assert "mc items have no candidate or reference answers to score" in hint.getvalue()
    assert "python manage.py report starc" in hint.getvalue()
    with pytest.raises(CommandError, match="'starc': mc items have no candidate or reference "
                                           "answers to score;.*python manage.py report starc"):
        call_command("score_project", "starc", "--metric", "em,f1", "--no-progress")


def test_answers_without_references_are_counted_unscorable_not_scored(shared_data):
    """The real LFQA expert pairs hold no reference answers: em ran on 280 answers and gave
    none a value, which read "280 scored, 0 already stored, 280 unscorable"."""
    call_command("import_data", "lfqa-experts", str(shared_data / "lfqa_experts"), "--project",
                 "lfqa", "--create", "--no-progress", "--no-report", stdout=io.StringIO())
    out = io.StringIO()
    call_command("score_project", "lfqa", "--metric", "em", "--no-progress", stdout=out)
    assert ("em (squad-v1): 0 scored, 0 already stored, 280 unscorable (no reference answer "
            "to compare with)") in out.getvalue()
    # ... and the report says it in em's cells, where it printed a bare "–"
    report = io.StringIO()
    call_command("metric_report", "lfqa", "--resamples", "0", stdout=report)
    assert ("pairwise em: overall – (undefined: unscorable: the metric gave none of the 280 "
            "answers a value (no reference answer to compare with))") in report.getvalue()


@pytest.mark.reliability
@pytest.mark.parametrize("resamples", ["-5", "5001", "2000000000"])
def test_resamples_outside_the_apis_limits_are_refused_and_nothing_is_stored(resamples):
    """Before: -5 stored a report with n_resamples -5 and null intervals; 2,000,000,000 ran
    away. The API's limits (0 to 5000, `core.statistics.MAX_RESAMPLES`) hold here too."""
    from metrics_app.models import Report

    project = make_project(kind=TaskKind.LIKERT, slug="mr-resamples")
    stage = make_stage(project)
    for candidate, score in (("on the mat", 5), ("rug", 1), ("a mat", 4)):
        make_judgment(item=_likert(project, candidate), stage=stage, score=score)
    project_score_metrics(project=project, metric_names=["f1"])
    with pytest.raises(CommandError, match=r"^--resamples: a whole number of bootstrap "
                                           r"resamples from 0 to 5000, not -?\d+$"):
        call_command("metric_report", project.slug, "--resamples", resamples, "--refresh")
    with pytest.raises(CommandError, match="^--resamples: "):
        call_command("judge_report", project.slug, "--resamples", resamples)
    assert not Report.objects.exists()
    assert _run(project.slug, "--resamples", "0", "--refresh")["params"]["n_resamples"] == 0
