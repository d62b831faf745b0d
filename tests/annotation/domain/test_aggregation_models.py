"""Crowd aggregation models (`aggregate_items`): majority vote, Dawid–Skene, MACE and GLAD on
nominal labels, mean and median on Likert scores. Pure: no database."""
from __future__ import annotations

import random

import pytest

from annotation.domain.aggregation import (
    AGGREGATION_MODELS,
    LIKERT_MODELS,
    NOMINAL_MODELS,
    AggregateLabel,
    aggregate_items,
    resolve_aggregation,
)

LABELS = ("A", "B", "C", "D")
WORKER_MODELS = ("dawid_skene", "mace", "glad")


def _crowd(seed: int = 7, n_items: int = 120):
    """Three reliable workers (90% right) and six who answer at random, five per item; plus
    "trap" items where one reliable worker is outvoted by two random workers who happen to
    agree on a wrong label. Returns (triples, truth)."""
    rng = random.Random(seed)
    reliable = ["r1", "r2", "r3"]
    spammers = [f"s{n}" for n in range(1, 7)]
    triples, truth = [], {}
    for n in range(n_items):
        item = f"q{n}"
        truth[item] = rng.choice(LABELS)
        for worker in rng.sample(reliable + spammers, 5):
            if worker in reliable and rng.random() < 0.9:
                label = truth[item]
            elif worker in reliable:
                label = rng.choice([lab for lab in LABELS if lab != truth[item]])
            else:
                label = rng.choice(LABELS)
            triples.append((worker, item, label))
    for n, (good, bad1, bad2) in enumerate([("r1", "s1", "s2"), ("r2", "s3", "s4"),
                                            ("r3", "s5", "s6")]):
        item = f"trap{n}"
        truth[item] = "A"
        triples += [(good, item, "A"), (bad1, item, "C"), (bad2, item, "C")]
    return triples, truth


def _accuracy(result, truth):
    return sum(result[item].label == label for item, label in truth.items()) / len(truth)


@pytest.fixture(scope="module")
def crowd():
    triples, truth = _crowd()
    return triples, truth, {model: aggregate_items(triples, model=model, kind="nominal")
                            for model in NOMINAL_MODELS}


def test_majority_is_fooled_on_the_traps_and_dawid_skene_is_not(crowd):
    _triples, truth, results = crowd
    traps = [item for item in truth if item.startswith("trap")]
    assert all(results["majority"][item].label == "C" for item in traps)
    assert all(results["dawid_skene"][item].label == "A" for item in traps)
    assert all(results["dawid_skene"][item].confidence > 0.5 for item in traps)
    # Not only the traps: weighing the random workers down wins on the whole data set (a
    # majority tie, frequent with 5 votes over 4 labels, counts as wrong: it names no label).
    assert _accuracy(results["dawid_skene"], truth) >= _accuracy(results["majority"], truth) + 0.2
    assert _accuracy(results["dawid_skene"], truth) >= 0.75
    fixed = [item for item in truth if results["dawid_skene"][item].label == truth[item]
             and results["majority"][item].label != truth[item]]
    broken = [item for item in truth if results["majority"][item].label == truth[item]
              and results["dawid_skene"][item].label != truth[item]]
    assert len(fixed) > 3 * max(1, len(broken))


@pytest.mark.parametrize("model", ["mace", "glad"])
def test_mace_and_glad_also_beat_majority_with_random_workers(crowd, model):
    """MACE models spammers explicitly and GLAD worker ability: both see through the random
    workers at least as well as Dawid–Skene here."""
    _triples, truth, results = crowd
    assert _accuracy(results[model], truth) >= 0.85
    assert _accuracy(results[model], truth) >= _accuracy(results["dawid_skene"], truth)
    assert all(results[model][f"trap{n}"].label == "A" for n in range(3))


@pytest.mark.parametrize("model", NOMINAL_MODELS)
def test_every_item_once_with_confidence_in_unit_interval_and_its_count(crowd, model):
    triples, truth, results = crowd
    result = results[model]
    assert set(result) == set(truth)
    assert all(isinstance(a, AggregateLabel) and 0.0 <= a.confidence <= 1.0
               for a in result.values())
    assert result["trap0"].n == 3 and result["q0"].n == 5
    assert {a.label for a in result.values()} <= set(LABELS) | {None}


@pytest.mark.parametrize("model", WORKER_MODELS)
def test_models_are_deterministic_and_ignore_input_order(crowd, model):
    triples, _truth, results = crowd
    shuffled = list(triples)
    random.Random(3).shuffle(shuffled)
    again = aggregate_items(shuffled, model=model, kind="nominal")
    assert {k: a.label for k, a in again.items()} == {k: a.label for k, a in
                                                       results[model].items()}
    assert all(again[k].confidence == pytest.approx(results[model][k].confidence, abs=1e-9)
               for k in again)


def test_majority_tie_has_no_label_and_the_tied_share_as_confidence():
    result = aggregate_items([("w1", "i", "A"), ("w2", "i", "B"), ("w3", "j", "A"),
                              ("w4", "j", "A"), ("w5", "j", "B")], model="majority",
                             kind="nominal")
    assert result["i"] == AggregateLabel(label=None, confidence=0.5, n=2)
    assert result["j"].label == "A" and result["j"].confidence == pytest.approx(2 / 3)


@pytest.mark.parametrize("model", ["dawid_skene", "glad"])
def test_symmetric_tie_is_broken_the_same_documented_way(model):
    """Two workers with the same record disagree on every item: the posteriors tie, and the tie
    goes to the label that sorts first (the raw votes are tied too)."""
    triples = [("w1", "i1", "B"), ("w2", "i1", "A"), ("w1", "i2", "A"), ("w2", "i2", "B")]
    result = aggregate_items(triples, model=model, kind="nominal")
    assert result["i1"].label == result["i2"].label == "A"
    assert result["i1"].confidence == pytest.approx(0.5, abs=1e-9)


def test_mace_on_a_symmetric_tie_stays_near_even_odds():
    """MACE's seeded random restarts break the symmetry by a hair (not a tie within 1e-9): the
    label is the model's, the confidence says it is a coin flip, and the seed makes it
    repeatable."""
    triples = [("w1", "i1", "B"), ("w2", "i1", "A"), ("w1", "i2", "A"), ("w2", "i2", "B")]
    first = aggregate_items(triples, model="mace", kind="nominal")
    assert all(a.confidence == pytest.approx(0.5, abs=0.01) for a in first.values())
    assert aggregate_items(triples, model="mace", kind="nominal") == first


@pytest.mark.parametrize("model", NOMINAL_MODELS)
def test_one_judgment_items_and_one_judgment_workers(model):
    triples = [("w1", "i1", "A"), ("w2", "i1", "A"), ("w3", "i1", "B"),
               ("w1", "i2", "B"), ("w2", "i2", "B"),
               ("w1", "only-one", "B"),       # an item with one judgment
               ("newcomer", "i3", "A")]       # a worker with one judgment, alone on the item
    result = aggregate_items(triples, model=model, kind="nominal")
    assert result["only-one"].label == "B" and result["only-one"].n == 1
    assert result["i3"].label == "A" and result["i3"].n == 1
    assert result["i1"].label == "A" and result["i2"].label == "B"
    if model == "majority":
        assert result["only-one"].confidence == 1.0


@pytest.mark.parametrize("model", AGGREGATION_MODELS)
def test_empty_input_gives_an_empty_result(model):
    kind = "likert" if model in LIKERT_MODELS else "nominal"
    assert aggregate_items([], model=model, kind=kind) == {}
    assert aggregate_items([("w", "i", None)], model=model, kind=kind) == {}


@pytest.mark.parametrize("model", NOMINAL_MODELS)
def test_label_types_round_trip(model):
    """STARC options as ints stay Python ints (not numpy ints), strings stay strings."""
    options = {1: 0, 2: 3, 3: 1, 4: 2}  # item → the option every worker but one picks
    triples = [(worker, item, option if worker != "w3" or item != 1 else 2)
               for item, option in options.items() for worker in ("w1", "w2", "w3")]
    result = aggregate_items(triples, model=model, kind="nominal")
    assert {item: a.label for item, a in result.items()} == options
    assert all(type(a.label) is int for a in result.values())
    assert all(type(item) is int for item in result)
    strings = aggregate_items([("w1", "x", "A"), ("w2", "x", "A"), ("w2", "y", "B")],
                              model=model, kind="nominal")
    assert [type(a.label) for a in strings.values()] == [str, str]


@pytest.mark.parametrize("model", NOMINAL_MODELS)
def test_one_label_in_the_whole_data_is_certain(model):
    result = aggregate_items([("w1", "i", "A"), ("w2", "i", "A"), ("w1", "j", "A")],
                             model=model, kind="nominal")
    assert {k: (a.label, a.confidence) for k, a in result.items()} == {"i": ("A", 1.0),
                                                                       "j": ("A", 1.0)}


def test_likert_mean_and_median_with_confidence_around_the_cut():
    triples = [("w1", "i", 5), ("w2", "i", 4), ("w3", "i", 1),   # mean 3.33, median 4
               ("w1", "j", 1), ("w2", "j", 2), ("w3", "j", 5), ("w4", "j", 1),  # mean 2.25
               ("w1", "k", 3)]
    mean = aggregate_items(triples, model="mean", kind="likert")
    median = aggregate_items(triples, model="median", kind="likert")
    assert mean["i"].label == pytest.approx(10 / 3) and median["i"].label == 4.0
    # 2 of the 3 judgments are on the aggregate's side of the cut (≥ 3: correct).
    assert mean["i"].confidence == pytest.approx(2 / 3) and median["i"].n == 3
    assert mean["j"].label == pytest.approx(2.25) and median["j"].label == 1.5
    assert mean["j"].confidence == pytest.approx(3 / 4) == median["j"].confidence
    assert mean["k"] == AggregateLabel(label=3.0, confidence=1.0, n=1)
    # Another cut moves the sides: at 4.5 only the 5 of item i is "correct".
    strict = aggregate_items(triples, model="mean", kind="likert", cut=4.5)
    assert strict["i"].confidence == pytest.approx(2 / 3)  # 3.33 < 4.5, like the 4 and the 1
    assert strict["k"].confidence == 1.0


def test_likert_values_must_be_numbers():
    with pytest.raises(ValueError, match="numeric scores.*'A'"):
        aggregate_items([("w", "i", "A")], model="mean", kind="likert")


@pytest.mark.parametrize(("model", "kind", "message"), [
    ("dawid_skene", "likert", "'dawid_skene' aggregates nominal labels, not likert labels.*"
                              "mean, median"),
    ("majority", "likert", "'majority' aggregates nominal labels.*mean, median"),
    ("mean", "nominal", "'mean' aggregates Likert scores, not nominal labels.*majority, "
                        "dawid_skene, mace, glad"),
    ("median", "nominal", "'median' aggregates Likert scores"),
    ("wisdom", "nominal", "unknown aggregation model 'wisdom'"),
    ("majority", "ordinal", "unknown label kind 'ordinal'"),
])
def test_model_that_does_not_fit_the_kind_is_refused(model, kind, message):
    with pytest.raises(ValueError, match=message):
        aggregate_items([("w", "i", 3)], model=model, kind=kind)


def test_project_setting_resolves_defaults_and_names_bad_values():
    assert resolve_aggregation("likert", "") == "mean"
    assert resolve_aggregation("ab", "") == "majority"
    assert resolve_aggregation("mc", "mace") == "mace"
    with pytest.raises(ValueError, match="'glad' is not allowed for Likert projects.*"
                                         "allowed: mean, median"):
        resolve_aggregation("likert", "glad")
    with pytest.raises(ValueError, match="unknown aggregation 'vote'; allowed for A/B projects: "
                                         "majority, dawid_skene, mace, glad"):
        resolve_aggregation("ab", "vote")
