"""The calibrated judge: the encoder's score enters as the mean of the calibrators fitted with
and without it (or, by the "choose" rule, only when it helps on held-out systems);
probabilities are calibrated; the fit survives a save and load."""
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
    assert report["encoder"] == "averaged" and report["encoder_rule"] == "average"
    by_inputs = report["cv_accuracy_by_inputs"]
    assert by_inputs["lexical+encoder"] > by_inputs["lexical"]
    assert report["cv_accuracy"] == by_inputs["averaged"] > 0.9
    _chosen, chosen = _fit(_judgments(informative_encoder=True), encoder_rule="choose")
    assert chosen["encoder"] == "used" and chosen["uses_encoder"] is True


def test_the_default_judge_is_the_mean_logit_of_the_fits_with_and_without_the_encoder():
    """One logistic model with the mean coefficients: its logit is the mean of the two fits'
    logits on any answer, and its 1–5 map (graded gold) the mean of their maps."""
    import math

    rows = _judgments(informative_encoder=False, seed=2)
    # Graded gold (a mean of Likert scores), so the linear 1–5 map is averaged too.
    rows = [(*row[:3], (4.0 if row[3] >= 3 else 1.0) + 0.5 * (i % 3), *row[4:])
            for i, row in enumerate(rows)]
    averaged, report = _fit(rows)
    with_encoder, _ = _fit(rows, use_encoder=True)
    without, _ = _fit(rows, use_encoder=False)
    assert report["encoder"] == "averaged" and averaged.uses_encoder
    assert with_encoder.coef[0] != 0.0 and without.coef[0] == 0.0
    assert averaged.coef[0] == pytest.approx(with_encoder.coef[0] / 2)
    assert averaged.fitted_on["c_by_inputs"] == {"lexical+encoder": with_encoder.c,
                                                 "lexical": without.c}

    def logit(p):
        return math.log(p / (1 - p))

    answers = ([1.0, 5.0, 3.2], ["It is Paris 1", "Lyon", "I believe the answer is Paris 3"],
               [("Paris 1",), ("Paris 2",), ("Paris 3",)])
    for p, a, b in zip(averaged.probabilities(*answers), with_encoder.probabilities(*answers),
                       without.probabilities(*answers), strict=True):
        assert logit(p) == pytest.approx((logit(a) + logit(b)) / 2)
    assert averaged.score_map == "linear"

    def unclipped(calibrator):
        rows_ = calibrator._rows(*answers, None)
        return [calibrator.linear_intercept + sum(w * x for w, x in zip(
            calibrator.linear_coef, row, strict=True)) for row in rows_]

    for mean, a, b in zip(unclipped(averaged), unclipped(with_encoder), unclipped(without),
                          strict=True):
        assert mean == pytest.approx((a + b) / 2)


def test_an_encoder_that_does_not_help_on_held_out_systems_is_left_out_by_the_choose_rule():
    calibrator, report = _fit(_judgments(informative_encoder=False), encoder_rule="choose")
    assert report["uses_encoder"] is False and report["encoder"] == "left out"
    assert calibrator.coef[0] == 0.0  # the encoder's score has no weight at all
    # Its probabilities then ignore the encoder's score entirely.
    a = calibrator.probabilities([1.0], ["It is Paris 1"], [("Paris 1",)])
    b = calibrator.probabilities([5.0], ["It is Paris 1"], [("Paris 1",)])
    assert a == b


def test_a_noise_encoder_weighs_little_in_the_averaged_judge():
    calibrator, _report = _fit(_judgments(informative_encoder=False))
    lexical = max(abs(w) for w in calibrator.coef[1:])
    assert abs(calibrator.coef[0]) < lexical / 5
    low, high = (calibrator.probabilities([raw], ["It is Paris 1"], [("Paris 1",)])[0]
                 for raw in (1.0, 5.0))
    assert abs(high - low) < 0.1


def test_an_unknown_encoder_rule_is_refused_by_name():
    with pytest.raises(ValueError, match="encoder_rule: one of average, choose, not 'vote'"):
        _fit(_judgments(informative_encoder=True), encoder_rule="vote")
    from metrics_app.lerc.config import TrainConfig

    assert TrainConfig().calibration_encoder == "average"
    with pytest.raises(ValueError, match="calibration_encoder: one of average, choose"):
        TrainConfig.from_dict({"calibration_encoder": "vote"})


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


# ---- distillation: a trusted judge's verdicts on answers no human judged -------------------

def _distilled(rows, *, teacher_accuracy: float, seed: int = 0, **kwargs):
    """`rows` (not judged by humans) labelled by a teacher right `teacher_accuracy` of the time."""
    from metrics_app.lerc.calibration import DistilledInputs

    rng = random.Random(seed)
    raw, candidates, references, gold, groups, sources = zip(*rows, strict=True)
    probabilities = [float((g >= 3) == (rng.random() < teacher_accuracy)) for g in gold]
    return DistilledInputs(raw=raw, candidates=candidates, references=references,
                           questions=[""] * len(rows), probabilities=probabilities,
                           sources=sources, groups=groups, **kwargs)


def _few_judged_many_unjudged(seed: int = 0, judged: int = 30):
    """`judged` human judgments and 800 answers nobody judged, from five systems: the lexical
    evidence right 75% of the time, the encoder's score a noisy signal."""
    rng = random.Random(seed)
    rows = []
    for i in range(judged + 800):
        correct = rng.random() < 0.6
        states_reference = correct if rng.random() < 0.75 else not correct
        candidate = (f"I believe the answer is Paris {i}" if states_reference
                     else f"It is probably Lyon {i}")
        raw = (4.0 if correct else 2.0) + rng.gauss(0, 1.2)
        rows.append((raw, candidate, (f"Paris {i}",), 5.0 if correct else 1.0, f"q{i % 80}",
                     SYSTEMS[i % 5]))
    return rows[:judged], rows[judged:]


def test_a_reliable_judge_on_unjudged_answers_is_weighed_in_when_it_helps_held_out_systems():
    judged, unjudged = _few_judged_many_unjudged()
    _alone, without = _fit(judged)
    calibrator, report = _fit(judged, distilled=_distilled(unjudged, teacher_accuracy=0.95))
    distillation = report["distillation"]
    assert distillation["answers"] == 800 and distillation["weights_tried"] == [0.0, 0.25, 0.5]
    assert 0 < distillation["weight"] < 1  # weighed, and below a human judgment
    by_weight = distillation["cv_accuracy_by_weight"]
    assert by_weight[f"{distillation['weight']:g}"] > by_weight["0"]
    assert report["cv_accuracy"] > without["cv_accuracy"]
    assert calibrator.fitted_on["distilled"] == 800


def test_a_judge_that_contradicts_the_humans_gets_no_weight():
    judged, unjudged = _few_judged_many_unjudged(seed=3)
    alone, _report = _fit(judged)
    calibrator, report = _fit(judged, distilled=_distilled(unjudged, teacher_accuracy=0.1))
    assert report["distillation"]["weight"] == 0.0
    assert calibrator.fitted_on["distilled"] == 0
    assert calibrator.coef == pytest.approx(alone.coef)  # the same fit as without the judge


def test_distillation_weights_stay_below_a_human_judgment():
    judged, unjudged = _few_judged_many_unjudged()
    with pytest.raises(ValueError, match="weighs less than a human"):
        _fit(judged, distilled=_distilled(unjudged, teacher_accuracy=0.9, weights=(1.0,)))


def test_a_held_out_systems_distilled_answers_are_not_fitted_while_it_is_predicted():
    """Cross-validation holds out a system: the judge's verdicts on that system's answers would
    tell the fold what the humans said about its style, so they leave the fit with it."""
    import numpy as np

    from metrics_app.lerc.calibration import _ExtraRows

    fold_keys = np.asarray(["fid", "fid", "gpt4", "gpt4", "newbing"], dtype=object)
    rows = _ExtraRows(x=None, labels=None, weight=0.5,
                      fold_key=np.asarray(["gpt4", "fid", "bing-new", "newbing"], dtype=object))
    # Fitting on fid and newbing (gpt4 held out): gpt4's distilled answer is left out; a system
    # no judged answer comes from is always fitted.
    assert rows.fitted_with(np.array([0, 1, 4]), fold_keys).tolist() == [False, True, True, True]


def test_a_distillation_weight_must_lower_the_log_loss_as_well_as_raise_accuracy():
    """The rule chosen on EVOUNA validation (docs/LERC.md, "Distillation"): a judge's rows are
    kept only when the cross-fitted verdicts on the human judgments get more accurate and
    better calibrated; buying right verdicts with barely-right probabilities is refused."""
    import numpy as np

    from metrics_app.lerc.calibration import _distill_weight, _EncoderUse, _log_loss

    labels = np.array([1, 1, 0, 0, 1])

    def entry(cv):
        cv = np.asarray(cv)
        return _EncoderUse({False: 1.0}, cv, float(((cv >= 0.5) == labels).mean()), {})

    def chosen(by_weight):
        return _distill_weight(by_weight, {w: None if e.cv is None else _log_loss(e.cv, labels)
                                           for w, e in by_weight.items()})

    alone = entry([0.8, 0.7, 0.3, 0.2, 0.4])  # 4 of 5 right
    sharper = entry([0.9, 0.8, 0.2, 0.1, 0.6])  # 5 of 5, lower log loss
    barely = entry([0.55, 0.55, 0.45, 0.45, 0.51])  # 5 of 5, higher log loss
    no_gain = entry([0.99, 0.99, 0.01, 0.99, 0.6])  # 4 of 5 again
    assert chosen({0.0: alone, 0.25: sharper, 0.5: sharper}) == 0.25
    assert chosen({0.0: alone, 0.25: barely, 0.5: sharper}) == 0.5
    assert chosen({0.0: alone, 0.5: barely}) == 0.0
    assert chosen({0.0: alone, 0.5: no_gain}) == 0.0
    assert chosen({0.0: _EncoderUse({False: 1.0}, None, None, {}), 0.5: sharper}) == 0.0
