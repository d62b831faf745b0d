"""Reading what a judge gets wrong (`metrics_app.lerc.evaluation.judge_errors`)."""
from __future__ import annotations

import pytest


def test_judge_errors_counts_disagreements_and_samples_them_reproducibly():
    from metrics_app.lerc.data import LercExample
    from metrics_app.lerc.evaluation import judge_errors

    examples = [LercExample(question=f"q{i}", references=("r",), candidate=f"c{i}",
                            score=5.0 if i % 2 else 1.0, id=str(i)) for i in range(20)]
    # Even ids are wrong answers, odd ids right ones; the judge says "correct" for ids < 10.
    probabilities = [0.9 if i < 10 else 0.1 for i in range(20)]
    probabilities[3] = None  # unscored: neither right nor wrong
    count, sample = judge_errors(examples, probabilities, size=4, seed=7)
    # Disagreements: even ids below 10 (0, 2, 4, 6, 8) and odd ids from 10 (11, 13, 15, 17, 19).
    assert count == 10
    ids = [example.id for example, _ in sample]
    assert len(ids) == 4 and set(ids) <= {"0", "2", "4", "6", "8", "11", "13", "15", "17", "19"}
    assert ids == sorted(ids, key=int)  # input order
    assert judge_errors(examples, probabilities, size=4, seed=7)[1] == sample
    assert [p for _, p in sample] == [probabilities[int(i)] for i in ids]
    assert len(judge_errors(examples, probabilities, size=50)[1]) == 10


def test_false_negative_and_positive_rates_separate_strictness_from_leniency():
    from metrics_app.lerc.evaluation import decision_report

    # Four correct answers (gold 5) and four wrong ones (gold 1); the judge misses one correct
    # answer and accepts two wrong ones.
    gold = [5, 5, 5, 5, 1, 1, 1, 1]
    scores = [0.9, 0.8, 0.7, 0.2, 0.6, 0.7, 0.1, 0.2]
    report = decision_report(scores, gold, 0.5, bootstrap=0)
    assert report["false_negative_rate"] == 0.25
    assert report["false_positive_rate"] == 0.5
    assert report["accuracy"] == 5 / 8
    only_correct = decision_report([0.9, 0.1], [5, 4], 0.5, bootstrap=0)
    assert only_correct["false_negative_rate"] == 0.5 and only_correct["false_positive_rate"] is None


@pytest.mark.reliability
def test_kappa_of_one_label_on_both_sides_is_undefined_on_the_model_card_not_zero():
    """Every validation answer correct and judged correct: κ is 0/0 (scikit-learn: NaN),
    shown as "–" on the model card, as the metric report and the judges page say it; it
    read 0.000. One side constant and the other not stays scikit-learn's 0."""
    from sklearn.metrics import cohen_kappa_score

    from metrics_app.lerc.evaluation import decision_report

    assert decision_report([0.9, 0.8, 0.7], [5, 5, 4], 0.5, bootstrap=0)["kappa"] is None
    mixed = decision_report([0.9, 0.8, 0.7], [5, 1, 4], 0.5, bootstrap=0)
    assert mixed["kappa"] == pytest.approx(cohen_kappa_score([1, 0, 1], [1, 1, 1])) == 0.0


def test_report_by_length_buckets_answers_by_words_and_reports_each_bucket():
    from metrics_app.lerc.evaluation import LENGTH_BUCKETS, length_bucket_of, report_by_length

    assert [length_bucket_of(" ".join(["w"] * n)) for n in (1, 3, 4, 8, 9, 20, 21)] == [
        "<=3", "<=3", "4-8", "4-8", "9-20", "9-20", ">20"]
    short = ["Paris", "Lyon", "1990", "no"]
    long = [" ".join(["word"] * 25)] * 4
    candidates = short + long
    gold = [5, 1, 5, 1, 5, 5, 1, 1]
    # Right on every short answer; on long ones it calls every answer wrong (too strict).
    scores = [0.9, 0.1, 0.8, 0.2, 0.1, 0.2, 0.1, 0.3]
    report = report_by_length(scores, gold, candidates, 0.5, bootstrap=0)
    assert list(report) == [label for label, _ in LENGTH_BUCKETS]
    assert report["<=3"]["n"] == 4 and report["<=3"]["accuracy"] == 1.0
    assert report["<=3"]["false_negative_rate"] == 0.0
    assert report[">20"]["n"] == 4 and report[">20"]["accuracy"] == 0.5
    assert report[">20"]["false_negative_rate"] == 1.0
    assert report["4-8"]["n"] == 0 and report["9-20"]["n"] == 0


def test_paired_by_length_counts_answers_only_one_decider_gets_right_and_tests_them():
    from scipy.stats import binomtest

    from metrics_app.lerc.evaluation import paired_by_length

    short, long_ = "Paris", " ".join(["word"] * 25)
    # 20 short answers, all correct: the judge (threshold 0.5) gets 18, the other (threshold
    # 0.3 on its own scale) 10; both miss answers 0 and 1. 12 long ones, all wrong: the judge
    # misses one the other gets right; one the other could not score is left out.
    gold = [5.0] * 20 + [1.0] * 12
    candidates = [short] * 20 + [long_] * 12
    judge = [0.1, 0.2] + [0.9] * 18 + [0.7] + [0.1] * 11
    other = [0.1] * 10 + [0.8] * 10 + [0.1] * 11 + [None]
    paired = paired_by_length(judge, 0.5, other, 0.3, gold, candidates)
    assert set(paired) == {"<=3", "4-8", "9-20", ">20"}
    assert paired["<=3"]["n"] == 20
    assert (paired["<=3"]["judge_only"], paired["<=3"]["other_only"]) == (8, 0)
    assert paired["<=3"]["p_value"] == binomtest(8, 8, 0.5).pvalue < 0.01
    assert paired[">20"] == {"n": 11, "judge_only": 0, "other_only": 1, "p_value": 1.0}
    assert paired["4-8"] == {"n": 0, "judge_only": 0, "other_only": 0, "p_value": 1.0}
