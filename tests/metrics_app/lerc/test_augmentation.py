"""Rewrites that must not change a verdict (`metrics_app.lerc.augmentation`), and the calibrated
judge fitted with them: an answer in a longer sentence, another alias, a number written another
way keep their label; a judge that learned "long means wrong" from its validation answers stops
judging a correct sentence wrong once it is fitted with the rewrites too."""
from __future__ import annotations

import random

import pytest

from metrics_app.lerc.augmentation import RULES, rewrites
from metrics_app.lerc.calibration import AugmentedInputs, fit_calibrator
from metrics_app.lerc.config import TrainConfig

SYSTEMS = ["fid", "gpt35", "chatgpt", "gpt4", "newbing"]


def test_an_embedded_answer_keeps_every_word_and_grows_longer():
    made = rewrites(["Dolly Parton"] * 40, [("Dolly Parton",)] * 40,
                    ["who sang i will always love you first?"] * 40, rules=["embed"])
    assert len(made) == 40 and {r.rule for r in made} == {"embed"}
    assert all("Dolly Parton" in r.candidate for r in made)
    assert all(len(r.candidate.split()) > 2 for r in made)
    assert max(len(r.candidate.split()) for r in made) > 8  # reaches the long buckets
    # A sentence-long answer keeps its own words in order, with neutral sentences beside it.
    sentence = "Dolly Parton wrote and first recorded the song in 1973"
    [long] = rewrites([sentence], [("Dolly Parton",)], rules=["embed"])
    assert sentence in long.candidate and len(long.candidate) > len(sentence)


def test_an_alias_the_answer_states_is_swapped_for_another_alias():
    [swap] = rewrites(["It was painted by da Vinci in Milan"],
                      [("Leonardo", "da Vinci", "DA VINCI")], rules=["alias"])
    assert swap.candidate == "It was painted by Leonardo in Milan" and swap.rule == "alias"
    # No alias stated, or a single alias: nothing to swap.
    assert rewrites(["Michelangelo"], [("Leonardo", "da Vinci")], rules=["alias"]) == []
    assert rewrites(["Leonardo"], [("Leonardo",)], rules=["alias"]) == []


@pytest.mark.parametrize(("answer", "expected"), [
    ("on September 5, 2016", "on 5 September 2016"),
    ("on 5 September 2016", "on September 5, 2016"),
    ("about 1,500 people", "about 1500 people"),
    ("about 23000 people", "about 23,000 people"),
    ("7 seasons", "seven seasons"),
    ("seven seasons", "7 seasons"),
])
def test_a_number_is_written_another_way(answer, expected):
    [made] = rewrites([answer], [("x",)], rules=["number"])
    assert made.candidate == expected


def test_what_reads_as_a_year_or_a_pronoun_is_left_alone():
    assert rewrites(["in 1998"], [("1998",)], rules=["number"]) == []
    assert rewrites(["the one who sang it"], [("x",)], rules=["number"]) == []


def test_every_date_and_every_large_number_of_a_text_is_rewritten_once():
    from metrics_app.lerc.augmentation import dates_reordered, thousands_regrouped

    text = "Born July 4, 1776, died 4 July 1826; 1,500 came, then 23000, in 1999 (3.5000)."
    assert dates_reordered(text) == ("Born 4 July 1776, died July 4, 1826; 1,500 came, then "
                                     "23000, in 1999 (3.5000).")
    assert thousands_regrouped(text) == ("Born July 4, 1776, died 4 July 1826; 1500 came, "
                                         "then 23,000, in 1999 (3.5000).")
    assert dates_reordered(dates_reordered(text)) == text


def test_rewrites_are_seeded_skip_empty_answers_and_refuse_unknown_rules():
    args = (["Paris", "", "7 hills"], [("Paris",), ("x",), ("7",)], ["q?", "q?", "q?"])
    assert rewrites(*args, seed=3) == rewrites(*args, seed=3)
    assert all(r.origin != 1 for r in rewrites(*args))  # the empty answer is judged by rule
    with pytest.raises(ValueError, match="unknown augmentation rules: shout"):
        rewrites(*args, rules=["embed", "shout"])
    assert set(RULES) == {"embed", "alias", "number"}


def _short_correct_long_wrong(n: int = 400, seed: int = 0):
    """Validation answers where every correct answer is a bare entity and every wrong one a
    sentence naming another: the lexical evidence says "long means wrong"."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        correct = rng.random() < 0.5
        reference = f"Paris{i}"
        if correct:
            candidate = reference if rng.random() < 0.8 else f"Paris{i} France"
        else:  # a wrong sentence names the reference too, as a place to compare with
            candidate = (f"It is Lyon{i}, a city some distance from Paris{i} in the south"
                         if rng.random() < 0.7 else f"Lyon{i}")
        rows.append((0.0, candidate, (reference,), 5.0 if correct else 1.0, f"q{i}",
                     SYSTEMS[i % 5], f"which city is it {i}?"))
    return rows


def _fit(rows, **kwargs):
    raw, candidates, references, gold, groups, sources, questions = zip(*rows, strict=True)
    return fit_calibrator(list(raw), candidates, references, gold, groups, sources=sources,
                          questions=questions, use_encoder=False, **kwargs)


def _embedded(rows, weight):
    made = rewrites([r[1] for r in rows], [r[2] for r in rows], [r[6] for r in rows],
                    rules=["embed"])
    return AugmentedInputs(made, [None] * len(made), weight)


def test_fitted_with_embedded_rewrites_a_correct_sentence_is_no_longer_judged_wrong():
    rows = _short_correct_long_wrong()
    plain, plain_report = _fit(rows, augmented=_embedded(rows, 0.0))  # measured, not fitted
    taught, taught_report = _fit(rows, augmented=_embedded(rows, 1.0))
    # Held out by system, the plain judge fails the rewrites of its correct answers; the judge
    # fitted with the other systems' rewrites keeps them.
    assert plain_report["cv_accuracy_rewrites"]["embed"] < 0.8
    assert taught_report["cv_accuracy_rewrites"]["embed"] > \
        plain_report["cv_accuracy_rewrites"]["embed"] + 0.1
    # ...while its accuracy on the judged answers themselves stays where it was.
    assert taught_report["cv_accuracy"] >= plain_report["cv_accuracy"] - 0.02
    sentence = ["The correct answer to this question is Paris7. Sources generally agree on "
                "this point. This information comes from commonly cited references."]
    [p_plain] = plain.probabilities([0.0], sentence, [("Paris7",)], ["which city is it 7?"])
    [p_taught] = taught.probabilities([0.0], sentence, [("Paris7",)], ["which city is it 7?"])
    assert p_plain < 0.5 < p_taught
    assert taught.fitted_on["rewrites"] == len(_embedded(rows, 1.0).rewrites)
    assert taught_report["augmented"]["by_rule"] == {"embed": taught.fitted_on["rewrites"]}


def test_weight_zero_rewrites_change_nothing_that_is_fitted():
    rows = _short_correct_long_wrong(seed=1)
    without, _ = _fit(rows)
    measured_only, report = _fit(rows, augmented=_embedded(rows, 0.0))
    assert measured_only.coef == pytest.approx(without.coef)
    assert measured_only.intercept == pytest.approx(without.intercept)
    assert 0.0 <= report["cv_accuracy_rewrites"]["all"] <= 1.0


def test_training_options_name_known_rules_and_a_weight_up_to_one():
    assert TrainConfig().calibration_augment == []  # chosen on validation: docs/LERC.md
    assert TrainConfig.from_dict({"calibration_augment": ["embed", "alias"]}
                                 ).calibration_augment == ["embed", "alias"]
    with pytest.raises(ValueError, match="unknown rules shout"):
        TrainConfig.from_dict({"calibration_augment": ["shout"]})
    with pytest.raises(ValueError, match="a list of rules"):
        TrainConfig.from_dict({"calibration_augment": "embed"})
    for weight in (1.5, -0.1, "half", True):
        with pytest.raises(ValueError, match="calibration_augment_weight"):
            TrainConfig.from_dict({"calibration_augment_weight": weight})
