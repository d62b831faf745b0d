"""The calibrator's length interactions (`features.LENGTH_INTERACTION_FEATURES`): a ramp from
short to long answers, and the named features times that ramp."""
import pytest

from metrics_app.lerc.calibration import Calibrator, fit_calibrator
from metrics_app.lerc.features import (
    FEATURE_SETS,
    LENGTH_INTERACTION_BASES,
    LENGTH_INTERACTION_FEATURES,
    SEMANTIC_FEATURES,
    lexical_features,
    reads_semantic,
)

NAMES = FEATURE_SETS["semantic-length"]
MEANING = [0.9, 0.3, 0.45, 0.6]


def _values(candidate, references=("Paris",), question="what is the capital of france"):
    return dict(zip(NAMES, lexical_features(candidate, list(references), question, NAMES,
                                            MEANING), strict=True))


def test_the_ramp_is_zero_up_to_three_words_one_from_twenty_and_rises_between():
    short = _values("capital city called Paris")
    assert _values("Paris")["long_answer"] == 0.0
    assert _values("it is Paris")["long_answer"] == 0.0
    assert 0.0 < short["long_answer"] < 1.0
    eight = _values("the capital of France is the city Paris")
    assert short["long_answer"] < eight["long_answer"] < 1.0
    assert _values(" ".join(["Paris"] + ["word"] * 19))["long_answer"] == 1.0
    assert _values(" ".join(["Paris"] + ["word"] * 60))["long_answer"] == 1.0


def test_each_interaction_is_the_ramp_times_its_feature_and_short_answers_get_zero():
    long = _values("Yes, the capital of France is Paris, a large city in the north of the country.")
    assert 0.5 < long["long_answer"] < 1.0
    for name in LENGTH_INTERACTION_BASES:
        assert long[f"long_x_{name}"] == pytest.approx(long["long_answer"] * long[name])
    assert long["long_x_semantic_recall"] == pytest.approx(long["long_answer"] * MEANING[0])
    short = _values("Paris")
    assert all(short[name] == 0.0 for name in LENGTH_INTERACTION_FEATURES)


def test_semantic_interactions_need_the_semantic_values_and_lexical_ones_do_not():
    assert reads_semantic(["long_x_semantic_cosine"])
    assert not reads_semantic(["long_answer", "long_x_recall"])
    assert set(SEMANTIC_FEATURES) <= set(NAMES)
    with pytest.raises(ValueError, match="semantic features"):
        lexical_features("Paris is the answer", ["Paris"], "", ["long_x_semantic_recall"])
    assert lexical_features("a b c d e f g h i j k l m n o p q r s t Paris", ["Paris"], "",
                            ["long_answer", "long_x_recall"]) == [1.0, 1.0]


def test_a_calibrator_can_learn_that_long_answers_holding_the_reference_are_right(tmp_path):
    # Short answers are right exactly when they match; long ones are wrong when they hold the
    # reference but hedge. A calibrator fitted on the interaction inputs names them, keeps
    # them when it is saved and reads them back when it scores.
    candidates, references, gold, groups = [], [], [], []
    for i in range(40):
        candidates += [f"Paris{i}", f"Lyon{i}",
                       f"I think it may be Paris{i} but I am not sure of that at all really",
                       f"The answer to this question is clearly Paris{i}, the capital city."]
        references += [[f"Paris{i}"]] * 4
        gold += [5.0, 1.0, 1.0, 5.0]
        groups += [f"q{i}"] * 4
    semantic = [MEANING] * len(candidates)
    calibrator, report = fit_calibrator([0.0] * len(candidates), candidates, references, gold,
                                        groups, use_encoder=False, feature_names=NAMES,
                                        semantic=semantic)
    calibrator.save(tmp_path)
    calibrator = Calibrator.load(tmp_path)
    assert calibrator.input_names[1:] == list(NAMES)
    assert calibrator.reads_semantic
    p = calibrator.probabilities([0.0] * 4, candidates[:4], references[:4], semantic=semantic[:4])
    assert p[0] > 0.5 and p[1] < 0.5 and p[2] < 0.5 and p[3] > 0.5
    assert report["cv_accuracy"] >= 0.95
