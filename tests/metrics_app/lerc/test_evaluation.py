"""Reading what a judge gets wrong (`metrics_app.lerc.evaluation.judge_errors`)."""
from __future__ import annotations


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
