"""The long-answer features (`metrics_app.lerc.spans`): a long answer is read by its
best-matching part, and a calibrator fitted on them names them, survives a save and load, and a
default calibrator never computes them."""
from __future__ import annotations

import pytest

from metrics_app.lerc import spans
from metrics_app.lerc.calibration import Calibrator, fit_calibrator
from metrics_app.lerc.features import (
    DEFAULT_FEATURES,
    FEATURE_SETS,
    LEXICAL_FEATURE_NAMES,
    lexical_features,
)

QUESTION = "who got the first nobel prize in physics"
LONG_RIGHT = ("The first Nobel Prize in Physics was awarded in 1901. It went to Wilhelm "
              "Röntgen for his discovery of X-rays, which changed medicine.")
LONG_WRONG = ("The first Nobel Prize in Physics was awarded in 1901. It went to Marie Curie, "
              "or possibly Wilhelm Wien, for work on radiation.")


def _named(candidate, references, question=QUESTION):
    return dict(zip(LEXICAL_FEATURE_NAMES, lexical_features(candidate, references, question,
                                                    LEXICAL_FEATURE_NAMES), strict=True))


def test_a_long_answer_is_read_by_its_best_sentence_and_window():
    right, wrong = _named(LONG_RIGHT, ["Wilhelm Röntgen"]), _named(LONG_WRONG, ["Wilhelm Röntgen"])
    # Whole-answer F1 is low for both: the answer is long.
    assert right["f1"] < 0.2
    # The window as long as the reference is the reference itself in the right answer only.
    assert right["best_window_f1"] == pytest.approx(1.0)
    assert wrong["best_window_f1"] == pytest.approx(0.5)  # "Wilhelm Wien"
    assert right["best_sentence_f1"] > wrong["best_sentence_f1"] > 0.0
    assert right["long_answer_contains_reference"] == 1.0
    assert wrong["long_answer_contains_reference"] == 0.0
    assert wrong["alternatives"] == 2.0 and right["alternatives"] == 0.0  # "or", "possibly"
    assert right["person_question"] == 1.0 and right["date_question"] == 0.0


def test_where_the_reference_appears_and_its_numbers_in_the_best_sentence():
    early = _named("Paris is the capital, not Lyon or Marseille", ["Paris"], "capital of France?")
    late = _named("Not Lyon, not Marseille: it is Paris", ["Paris"], "capital of France?")
    absent = _named("Lyon", ["Paris"], "capital of France?")
    assert early["reference_position"] == 0.0
    assert late["reference_position"] == 1.0  # the last word
    assert absent["reference_position"] == 1.0
    dated = _named("He was born in Ulm. That was in 1879, a Friday.", ["14 March 1879"],
                   "when was Einstein born")
    assert dated["date_question"] == 1.0
    assert dated["reference_numbers_in_best_sentence"] == 0.0  # 14 is not there
    assert _named("Born 14 March 1879 in Ulm.", ["14 March 1879"])[
        "reference_numbers_in_best_sentence"] == 1.0


def test_a_short_answer_is_its_own_best_part_and_empty_inputs_score_zero():
    short = _named("Röntgen", ["Wilhelm Röntgen"])
    assert short["best_window_f1"] == pytest.approx(short["f1"])
    assert short["long_answer_contains_reference"] == 0.0  # short answers have their own
    assert spans.long_answer_features("", ["Paris"])[:3] == [0.0, 0.0, 0.0]
    assert spans.sentences_of("One. Two?  Three") == ["One.", "Two?", "Three"]


def _rows(n=300):
    rows = []
    for i in range(n):
        correct = i % 3 != 0
        candidate = (f"The answer you want is Paris {i}, the capital of France." if correct
                     else f"It could be Lyon {i} or maybe Marseille.")
        rows.append((0.0, candidate, (f"Paris {i}",), 5.0 if correct else 1.0, f"q{i % 60}",
                     ["fid", "gpt35", "chatgpt", "gpt4", "newbing"][i % 5]))
    return rows


def test_a_calibrator_fitted_on_the_long_answer_set_names_it_and_survives_a_reload(tmp_path):
    raw, candidates, references, gold, groups, sources = zip(*_rows(), strict=True)
    names = FEATURE_SETS["long-answer"]
    calibrator, report = fit_calibrator(raw, candidates, references, gold, groups,
                                        sources=sources, feature_names=names)
    assert calibrator.input_names == ["raw_score", *names]
    assert report["cv_accuracy"] > 0.95
    calibrator.save(tmp_path)
    loaded = Calibrator.load(tmp_path)
    probabilities = loaded.probabilities(list(raw[:6]), list(candidates[:6]),
                                         list(references[:6]))
    assert probabilities == pytest.approx(calibrator.probabilities(
        list(raw[:6]), list(candidates[:6]), list(references[:6])))
    assert [p >= 0.5 for p in probabilities] == [g >= 3 for g in gold[:6]]


def test_a_default_calibrator_never_computes_the_long_answer_features(monkeypatch):
    raw, candidates, references, gold, groups, sources = zip(*_rows(), strict=True)
    calibrator, _report = fit_calibrator(raw, candidates, references, gold, groups,
                                         sources=sources)
    assert calibrator.input_names == ["raw_score", *DEFAULT_FEATURES]

    def refuse(*_args, **_kwargs):
        raise AssertionError("long-answer features computed for a default calibrator")

    monkeypatch.setattr("metrics_app.lerc.features.long_answer_features", refuse)
    assert len(calibrator.probabilities([0.0], ["Paris 1"], [("Paris 1",)])) == 1


def test_an_unknown_feature_name_is_refused():
    raw, candidates, references, gold, groups, sources = zip(*_rows(), strict=True)
    with pytest.raises(ValueError, match="no_such_feature"):
        fit_calibrator(raw, candidates, references, gold, groups, sources=sources,
                       feature_names=[*DEFAULT_FEATURES, "no_such_feature"])
