"""The calibrated judge: the encoder's score is an input only when it helps on held-out
systems; probabilities are calibrated; the fit survives a save and load."""
from __future__ import annotations

import random

import pytest

from metrics_app.lerc.calibration import Calibrator, fit_calibrator

SYSTEMS = ["fid", "gpt35", "chatgpt", "gpt4", "newbing"]


def _judgments(n: int = 400, *, informative_encoder: bool, seed: int = 0):
    """Answers that contain the reference (correct) or name something else (wrong), from five
    systems; the encoder score either tracks the label or is noise."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        correct = rng.random() < 0.6
        # Lexical evidence is right 75% of the time: paraphrases and hedges fool it.
        states_reference = correct if rng.random() < 0.75 else not correct
        candidate = (f"I believe the answer is Paris {i}" if states_reference
                     else f"It is probably Lyon {i}")
        raw = (4.5 if correct else 1.5) + rng.gauss(0, 0.3) if informative_encoder \
            else rng.gauss(3, 1)
        rows.append((raw, candidate, (f"Paris {i}",), 5.0 if correct else 1.0,
                     f"q{i % 80}", SYSTEMS[i % 5]))
    return rows


def _fit(rows, **kwargs):
    raw, candidates, references, gold, groups, sources = zip(*rows, strict=True)
    return fit_calibrator(raw, candidates, references, gold, groups, sources=sources, **kwargs)


def test_an_informative_encoder_is_kept_and_beats_the_lexical_features():
    calibrator, report = _fit(_judgments(informative_encoder=True))
    assert report["uses_encoder"] is True and report["cv_held_out"] == "system"
    by_inputs = report["cv_accuracy_by_inputs"]
    assert by_inputs["lexical+encoder"] > by_inputs["lexical"]
    assert report["cv_accuracy"] > 0.9


def test_an_encoder_that_does_not_help_on_held_out_systems_is_left_out():
    calibrator, report = _fit(_judgments(informative_encoder=False))
    assert report["uses_encoder"] is False
    assert calibrator.coef[0] == 0.0  # the encoder's score has no weight at all
    # Its probabilities then ignore the encoder's score entirely.
    a = calibrator.probabilities([1.0], ["It is Paris 1"], [("Paris 1",)])
    b = calibrator.probabilities([5.0], ["It is Paris 1"], [("Paris 1",)])
    assert a == b


def test_probabilities_are_calibrated_and_survive_a_save(tmp_path):
    rows = _judgments(informative_encoder=True, seed=1)
    calibrator, report = _fit(rows)
    cv = report["cv_probabilities"]
    labels = [row[3] >= 3 for row in rows]
    # Mean predicted probability matches the share of correct answers (cross-fitted).
    assert sum(cv) / len(cv) == pytest.approx(sum(labels) / len(labels), abs=0.05)
    calibrator.save(tmp_path)
    again = Calibrator.load(tmp_path)
    args = ([4.4, 1.6], ["I believe the answer is Paris 1", "Lyon"], [("Paris 1",), ("Paris 2",)])
    assert again.probabilities(*args) == pytest.approx(calibrator.probabilities(*args))
    high, low = again.probabilities(*args)
    assert high > 0.5 > low
    assert again.scores(*args) == pytest.approx([1 + 4 * high, 1 + 4 * low])


def test_too_few_of_a_class_gives_no_calibrator():
    rows = [(4.0, "Paris", ("Paris",), 5.0, "q", "fid")] * 50
    calibrator, report = _fit(rows)
    assert calibrator is None and "at least" in report["skipped"]


def test_character_overlap_forgives_spelling_variants_that_token_f1_counts_as_misses():
    from metrics_app.lerc.features import LEXICAL_FEATURE_NAMES, lexical_features

    def named(candidate, references, question=""):
        return dict(zip(LEXICAL_FEATURE_NAMES,
                        lexical_features(candidate, references, question, LEXICAL_FEATURE_NAMES),
                        strict=True))

    variant = named("Tchaikovski", ["Tchaikovsky"], "who composed swan lake")
    unrelated = named("Rachmaninoff", ["Tchaikovsky"], "who composed swan lake")
    assert variant["f1"] == unrelated["f1"] == 0.0
    assert variant["char3_f1"] > 0.6 > 0.1 > unrelated["char3_f1"]
    assert variant["char4_recall"] > unrelated["char4_recall"]


def test_words_taken_from_the_question_earn_no_overlap():
    from metrics_app.lerc.features import LEXICAL_FEATURE_NAMES, lexical_features

    def named(candidate, references, question):
        return dict(zip(LEXICAL_FEATURE_NAMES,
                        lexical_features(candidate, references, question, LEXICAL_FEATURE_NAMES),
                        strict=True))

    question = "which river flows through the city of Paris"
    echo = named("the river through Paris", ["the Seine river"], question)
    assert echo["f1"] > 0  # "river" is in the reference, so plain F1 counts it
    # "river" stays (the reference holds it), "through" and "Paris" do not count for precision.
    assert echo["precision_without_question_words"] == pytest.approx(1.0)
    assert echo["echoes_question"] == 1.0
    answer = named("the Seine", ["the Seine river"], question)
    assert answer["echoes_question"] == 0.0
    assert named("1969", ["1969"], "When did Apollo 11 land?")["numeric_question"] == 1.0
    assert named("Armstrong", ["Armstrong"], "Who walked first?")["numeric_question"] == 0.0


def test_a_calibrator_saved_with_fewer_features_reads_only_those(tmp_path):
    """Models trained before the question-aware features were added keep scoring the same."""
    from metrics_app.lerc.features import BASE_FEATURES, LEXICAL_FEATURE_NAMES

    old_names = ["raw_score", *BASE_FEATURES]
    old = Calibrator(input_names=old_names, mean=[0.0] * len(old_names),
                     scale=[1.0] * len(old_names), coef=[0.0, 2.0] + [0.0] * (len(old_names) - 2),
                     intercept=-1.0, raw_fill=0.0, c=1.0)
    old.save(tmp_path)
    loaded = Calibrator.load(tmp_path)
    assert len(LEXICAL_FEATURE_NAMES) > len(BASE_FEATURES)
    # Only token F1 carries weight: P = sigmoid(2·F1 − 1), with or without a question.
    right, wrong = loaded.probabilities([None, None], ["Paris", "Lyon"], [("Paris",), ("Paris",)])
    assert right == pytest.approx(0.7310585786)  # sigmoid(1)
    assert wrong == pytest.approx(0.2689414214)  # sigmoid(-1)
    assert loaded.probabilities([None], ["Paris"], [("Paris",)], ["where?"]) == [right]


def test_the_fitted_calibrator_names_every_default_feature_and_reads_the_question():
    calibrator, _report = _fit(_judgments(informative_encoder=False))
    from metrics_app.lerc.features import DEFAULT_FEATURES

    assert calibrator.input_names == ["raw_score", *DEFAULT_FEATURES]
    assert len(calibrator.coef) == len(calibrator.mean) == 1 + len(DEFAULT_FEATURES)
