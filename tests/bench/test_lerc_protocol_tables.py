"""The protocol's by-length table (`scripts/bench_lerc.py --markdown`): which baseline is best
in each bucket, where the served judge leads, ties or trails, and the false-negative rate on
answers over 8 words pooled from its two buckets."""
from __future__ import annotations

import importlib.util

import pytest

from tests.support.paths import REPO_ROOT


@pytest.fixture(scope="module")
def bench_lerc():
    spec = importlib.util.spec_from_file_location("bench_lerc",
                                                  REPO_ROOT / "scripts" / "bench_lerc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def part(n, accuracy, fnr=0.0, positive_rate=0.5):
    return {"n": n, "accuracy": accuracy, "false_negative_rate": fnr,
            "positive_rate": positive_rate}


def judge(short, medium, long_, longest):
    return {"by_length": {"<=3": short, "4-8": medium, "9-20": long_, ">20": longest}}


def test_buckets_against_the_best_baseline_of_each(bench_lerc):
    empty = {"n": 0}
    summary = {"runs": {"run-a": {"metrics": {
        "lerc": judge(part(10, 0.9), part(4, 0.75), part(20, 0.95, 0.1, 0.5),
                      part(30, 0.8, 0.2, 1.0)),
        "lerc_previous": judge(part(10, 0.8), part(4, 0.5), part(20, 0.9), part(30, 0.7)),
        "f1": judge(part(10, 0.8), part(4, 0.75), part(20, 0.9), part(30, 0.85)),
        "meteor": judge(part(10, 0.85), part(4, 0.5), part(20, 0.96), empty),
    }}}}
    table = bench_lerc.bucket_comparison_markdown(summary)

    served = next(line for line in table.splitlines() if "| served |" in line)
    best = next(line for line in table.splitlines() if "| best baseline |" in line)
    assert "**0.900 / 0.000**" in served  # ahead of METEOR's 0.85
    assert "| 0.750 / 0.000 |" in served  # tied with F1: not bold
    assert "meteor 0.960 / 0.000 (n=20)" in best and "f1 0.850 / 0.000 (n=30)" in best
    # Over 8 words: 1 of 10 correct answers missed in 9-20, 6 of 30 in >20 → 7 / 40.
    assert served.endswith("| 0.175 |")
    assert ("ahead of the bucket's best baseline in 1 run-buckets, tied in 1, behind in 2: "
            "run-a 9-20 0.950 against meteor 0.960, n = 20; run-a >20 0.800 against f1 "
            "0.850, n = 30.") in table


def test_gaps_carry_their_paired_test_and_significant_ones_are_listed(bench_lerc):
    paired = {"f1": {"<=3": {"n": 10, "judge_only": 9, "other_only": 0, "p_value": 0.0039},
                     "4-8": {"n": 4, "judge_only": 0, "other_only": 1, "p_value": 1.0}}}
    summary = {"runs": {"run-b": {"paired": paired, "metrics": {
        "lerc": judge(part(10, 0.95), part(4, 0.5), {"n": 0}, {"n": 0}),
        "f1": judge(part(10, 0.05), part(4, 0.75), {"n": 0}, {"n": 0}),
    }}}}
    table = bench_lerc.bucket_comparison_markdown(summary)
    assert ("run-b 4-8 0.500 against f1 0.750, n = 4 (judge alone right on 0 answers, the "
            "baseline alone on 1: p = 1)") in table
    assert ("McNemar's exact test: 1 of 2 leads and gaps at p < 0.05: run-b <=3 (judge alone "
            "right on 9 answers, the baseline alone on 0: p = 0.0039).") in table
    # Without paired counts (an older results.json) the table says nothing of them.
    del summary["runs"]["run-b"]["paired"]
    assert "McNemar" not in bench_lerc.bucket_comparison_markdown(summary)


def test_the_previous_versions_judge_and_the_lexical_one_sit_under_the_served_judge(bench_lerc):
    metrics = {"lerc": judge(part(10, 0.9), part(4, 0.75), part(20, 0.95), part(30, 0.8)),
               "lerc_previous": judge(part(10, 0.7), part(4, 0.5), part(20, 0.9), part(30, 0.6)),
               "f1": judge(part(10, 0.8), part(4, 0.75), part(20, 0.9), part(30, 0.85))}
    earlier = {"runs": {"run-a": {"metrics": {
        "lerc": judge(part(10, 0.6), part(4, 0.25), part(20, 0.85), part(30, 0.9))}}}}
    table = bench_lerc.bucket_comparison_markdown({"runs": {"run-a": {"metrics": metrics}}},
                                                  earlier)
    judges = [line.split(" | ")[1] for line in table.splitlines() if line.startswith("| run-a")]
    assert judges == ["served", "previous version", "lexical inputs", "best baseline"]
    previous = next(line for line in table.splitlines() if "| previous version |" in line)
    assert "| 0.600 / 0.000 | 0.250 / 0.000 | 0.850 / 0.000 | 0.900 / 0.000 |" in previous
    # Only the served judge is compared with the baselines.
    assert "behind in 1: run-a >20 0.800 against f1 0.850" in table


def test_the_summary_says_how_the_served_judge_used_the_encoder(bench_lerc):
    assert bench_lerc._encoder_use({"calibration": {"encoder": "averaged",
                                                    "uses_encoder": True}}) == "averaged"
    assert bench_lerc._encoder_use({"calibration": {"encoder": "used",
                                                    "uses_encoder": True}}) == "yes"
    assert bench_lerc._encoder_use({"calibration": {"uses_encoder": False}}) == "no"
    assert bench_lerc._encoder_use({}) == "no"


def test_format_rewrites_change_the_writing_and_never_the_content(bench_lerc):
    """Each rewrite changes how the example is written, never what it says: as the judge reads
    texts (plain typography, small numbers in digits, `text_as_judged`) and SQuAD-normalized,
    only a label differs."""
    from core.text_match import squad_normalize
    from metrics_app.lerc.data import LercExample, text_as_judged

    def read(text):
        return squad_normalize(text_as_judged(text))

    example = LercExample(question="who wrote hamlet",
                          references=("Shakespeare", "W. Shakespeare's play in five acts"),
                          candidate="William Shakespeare's play in 5 acts and twenty scenes, "
                                    "written 1599-1601, printed on July 4, 1603 in 1,200 "
                                    "copies.", score=5.0)
    for name, rewrite in bench_lerc.FORMAT_REWRITES.items():
        changed = rewrite(example)
        assert changed != example, f"{name} changed nothing"
        assert {read(r) for r in changed.references} == {read(r) for r in example.references}
        assert changed.score == example.score
        assert read(changed.question.rstrip("?")) == read(example.question)
        if name == "dates reordered":  # the same words, day and month in the other order
            assert read(changed.candidate) == read("William Shakespeare's play in 5 acts and "
                                                   "twenty scenes, written 1599-1601, printed "
                                                   "on 4 July 1603 in 1,200 copies.")
        elif not name.endswith("prefix"):
            assert read(changed.candidate) == read(example.candidate), name

    screens = {"main": {"n_val": 10, "accuracy": 0.9, "rows": {
        name: {"flips": 1 if name == "lower case" else 0, "changed": 10, "accuracy": 0.9}
        for name in bench_lerc.FORMAT_REWRITES}}}
    table = bench_lerc.format_probe_markdown(screens)
    assert "| main | 10 | 0.9000 |" in table and "1 of 10 (0.9000)" in table


def test_the_probe_runs_the_rewrites_named_and_refuses_an_unknown_one(bench_lerc):
    assert list(bench_lerc.probe_rewrites("")) == list(bench_lerc.FORMAT_REWRITES)
    assert list(bench_lerc.probe_rewrites(" dates reordered,lower case ")) == [
        "dates reordered", "lower case"]
    with pytest.raises(SystemExit, match="no rewrite named 'nope'"):
        bench_lerc.probe_rewrites("lower case,nope")
    screens = {"loso-fid": {"n_val": 4, "accuracy": 0.75, "rows": {
        "dates reordered": {"flips": 2, "changed": 3, "accuracy": 0.5}}}}
    table = bench_lerc.format_probe_markdown(screens)
    assert "dates reordered: flips" in table and "lower case" not in table
    assert "| loso-fid | 4 | 0.7500 | 2 of 3 (0.5000) |" in table


def test_semantic_values_are_cached_by_the_texts_they_were_computed_from(bench_lerc):
    """A reading rule that changes an answer or a reference (a rerun in the same folder) must
    not be served the semantic features of the text before it."""
    import dataclasses

    from metrics_app.lerc.data import LercExample

    example = LercExample(id="q1:fid", question="how many", references=("1,500",),
                          candidate="about 1,500", score=5.0)
    key = bench_lerc.semantic_key(example)
    assert key.startswith("q1:fid:")
    assert bench_lerc.semantic_key(dataclasses.replace(example, score=1.0)) == key
    assert bench_lerc.semantic_key(dataclasses.replace(example, candidate="about 1500")) != key
    assert bench_lerc.semantic_key(dataclasses.replace(example, references=("1500",))) != key
