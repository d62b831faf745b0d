"""How an answer is written is not what it says: the judge reads an answer without a leading
label ("Answer:", "A:", "Final answer:") and without markdown emphasis, in training, calibration
and scoring alike (`data.answer_as_judged`), so a dataset or a generating system that writes its
answers that way is judged as one that does not (docs/LERC.md, the format probe). So are its
typography and how it spells a small number (`data.text_as_judged`)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from metrics_app.lerc.data import LercExample, answer_as_judged, examples_as_judged, text_as_judged
from metrics_app.lerc.inference import EXACT_MATCH_SCORE, LercScorer


@pytest.mark.parametrize(("written", "judged"), [
    ("Answer: Paris", "Paris"),
    ("A: Paris", "Paris"),
    ("answer:Paris", "Paris"),
    ("Final answer: 42", "42"),
    ("The final answer: 42", "42"),
    ("ANSWER\uff1a Rome", "Rome"),
    ("**Paris** is the capital", "Paris is the capital"),
    ("Answer: **the Eroica symphony**", "the Eroica symphony"),
])
def test_a_label_and_emphasis_are_not_read(written, judged):
    assert answer_as_judged(written) == judged


@pytest.mark.parametrize("written", [
    "A Farewell to Arms",        # "A" is the answer's first word, not a label
    "Answers: none given",        # not one of the labels
    "Area: 5 km",
    "Answer:",                    # a label with nothing after it is all there is to judge
    "2 ** 3 ** 4",                # not emphasis
    "",
])
def test_words_that_only_look_like_a_label_stay(written):
    assert answer_as_judged(written) == written


def test_unchanged_examples_are_the_same_objects():
    plain = LercExample(question="q", references=("r",), candidate="Paris")
    labelled = replace(plain, candidate="Answer: Paris")
    judged = examples_as_judged([plain, labelled])
    assert judged[0] is plain
    assert judged[1] == plain


def test_a_served_version_reads_a_labelled_answer_as_the_answer(trained_model_dir, monkeypatch):
    import metrics_app.lerc.inference as inference

    scorer = LercScorer(trained_model_dir, device="cpu")
    read = []
    original = inference.predict_scores

    def recording(model, tokenizer, examples, **options):
        read.extend(e.candidate for e in examples)
        return original(model, tokenizer, examples, **options)

    monkeypatch.setattr(inference, "predict_scores", recording)
    plain = LercExample(question="Where is it?", references=("Paris",),
                        candidate="in Paris, France")
    written = [replace(plain, candidate="Answer: in Paris, France"),
               replace(plain, candidate="Final answer: **in Paris**, France")]
    scorer.score_details(written)
    assert read == ["in Paris, France"]  # both are one answer, scored once
    # A label in front of the reference itself is an exact match, served without the model.
    assert scorer.score([replace(plain, candidate="Answer: **Paris**")]) == [EXACT_MATCH_SCORE]


def test_training_reads_answers_without_their_labels(trained_model_dir, tmp_path, monkeypatch):
    """What `train` hands the encoder and the calibrated judge is the answer as judged."""
    import metrics_app.lerc.training as training
    from metrics_app.lerc.config import TrainConfig

    seen = []

    def recording(cfg, lr, run_dir, train_examples, val_examples, *rest):
        seen.extend(e.candidate for e in [*train_examples, *val_examples])
        raise RuntimeError("stop after reading the examples")

    monkeypatch.setattr(training, "_train_one", recording)
    example = LercExample(question="q", references=("r",), candidate="Answer: **r r**", score=5.0)
    with pytest.raises(RuntimeError, match="stop after"):
        training.train(TrainConfig(output_dir=str(tmp_path / "out")), [example], [example])
    assert seen == ["r r", "r r"]


# Typography: one word is one word however it was typeset (`data.text_as_judged`).

@pytest.mark.parametrize(("written", "judged"), [
    ("Guns N\u2019 Roses", "Guns N' Roses"),
    ("the 2001\u20132002 season", "the 2001-2002 season"),
    ("\u201cThriller\u201d", '"Thriller"'),
    ("\u2018Thriller\u2019", "'Thriller'"),
    ("10\u00a0km", "10 km"),
    ("5\u203211\u2033", "5'11\""),
    ("\u22125 \u00b0C", "-5 \u00b0C"),            # a minus sign; the degree sign is a word's part
    ("soft\u00adhyphen", "softhyphen"),
    ("zero\u200bwidth\u200e", "zerowidth"),
    ("\uff21\uff22\uff23 \uff11\uff12", "ABC 12"),  # full-width letters and digits
    ("and so on\u2026", "and so on..."),
    ("Jos\u00e9 M\u00fcller", "Jos\u00e9 M\u00fcller"),  # letters with accents are letters
    ("Jose\u0301", "Jos\u00e9"),                    # ... however they are composed
    ("plain ASCII - 'as is'", "plain ASCII - 'as is'"),
])
def test_typography_is_read_plain(written, judged):
    assert text_as_judged(written) == judged


def test_an_answer_is_read_plain_before_its_label_is_taken_off():
    # A full-width colon and curly quotes around the label's answer.
    assert answer_as_judged("Answer\uff1a \u201cGuns N\u2019 Roses\u201d") == '"Guns N\' Roses"'


def test_every_text_of_an_example_is_read_plain():
    written = LercExample(question="Who sang \u201cNovember Rain\u201d?",
                          references=("Guns N\u2019 Roses", "GNR"), candidate="Guns N\u2019 Roses",
                          passage="In\u00a01991\u2026", score=5.0, id="x")
    judged = examples_as_judged([written])[0]
    assert judged == replace(written, question='Who sang "November Rain"?',
                             references=("Guns N' Roses", "GNR"), candidate="Guns N' Roses",
                             passage="In 1991...")


def test_a_served_version_reads_typography_plain(trained_model_dir, monkeypatch):
    import metrics_app.lerc.inference as inference

    scorer = LercScorer(trained_model_dir, device="cpu")
    read = []
    original = inference.predict_scores

    def recording(model, tokenizer, examples, **options):
        read.extend((e.candidate, e.references) for e in examples)
        return original(model, tokenizer, examples, **options)

    monkeypatch.setattr(inference, "predict_scores", recording)
    plain = LercExample(question="Who sang it?", references=("Guns N' Roses",),
                        candidate="it was Guns N' Roses, in 1991")
    typeset = replace(plain, candidate="it was Guns N\u2019 Roses, in\u00a01991",
                      references=("Guns N\u2019 Roses",))
    assert scorer.score([plain]) == scorer.score([typeset])
    assert read == [("it was Guns N' Roses, in 1991", ("Guns N' Roses",))]  # scored once
    # The reference typeset one way and the answer the other is an exact match, served by rule.
    assert scorer.score([replace(plain, candidate="Guns N\u2019 Roses")]) == [EXACT_MATCH_SCORE]
    assert scorer.score([replace(typeset, candidate="guns n' roses")]) == [EXACT_MATCH_SCORE]


def test_training_reads_typography_plain(tmp_path, monkeypatch):
    import metrics_app.lerc.training as training
    from metrics_app.lerc.config import TrainConfig

    seen = []

    def recording(cfg, lr, run_dir, train_examples, val_examples, *rest):
        seen.extend((e.candidate, e.references) for e in [*train_examples, *val_examples])
        raise RuntimeError("stop after reading the examples")

    monkeypatch.setattr(training, "_train_one", recording)
    example = LercExample(question="q", references=("2001\u20132002",),
                          candidate="in 2001\u20132002", score=5.0)
    with pytest.raises(RuntimeError, match="stop after"):
        training.train(TrainConfig(output_dir=str(tmp_path / "out")), [example], [example])
    assert seen == [("in 2001-2002", ("2001-2002",))] * 2


# Small numbers: one number is one number however it was spelled (`data.text_as_judged`).

@pytest.mark.parametrize(("written", "judged"), [
    ("Season Six", "Season 6"),
    ("seven years old", "7 years old"),
    ("TWELVE", "12"),
    ("a seven-year-old", "a 7-year-old"),
    ("Ocean\u2019s Eleven", "Ocean's 11"),                # typography first, then the number
    ("the one who knocks", "the one who knocks"),         # "one" is a pronoun as often
    ("twenty-one pilots", "twenty-one pilots"),           # 21, not 20-1
    ("thirty-two", "thirty-two"),
    ("tenth often seventh", "tenth often seventh"),      # other words holding a number's letters
    ("6 and 1.5 and 3.5", "6 and 1.5 and 3.5"),            # digits stay as written
])
def test_small_numbers_are_read_as_digits(written, judged):
    assert text_as_judged(written) == judged


@pytest.mark.parametrize(("written", "judged"), [
    ("about 1,500 people", "about 1500 people"),
    ("2,000,000 or 45,000.", "2000000 or 45000."),
    ("in 1,999, twelve", "in 1999, 12"),
    ("3.1,000", "3.1,000"),                               # a decimal's tail, not thousands
    ("1,23,456", "1,23,456"),                             # not groups of three
    ("1,2,3", "1,2,3"),                                   # a list
])
def test_thousands_are_read_without_their_commas(written, judged):
    assert text_as_judged(written) == judged


def test_every_text_of_an_example_reads_small_numbers_as_digits():
    written = LercExample(question="How many seasons of Downton Abbey?", references=("six",),
                          candidate="It ran for six seasons", passage="Six seasons aired.",
                          score=5.0)
    assert examples_as_judged([written])[0] == replace(
        written, references=("6",), candidate="It ran for 6 seasons", passage="6 seasons aired.")


def test_a_served_version_reads_a_number_spelled_either_way_alike(trained_model_dir):
    scorer = LercScorer(trained_model_dir, device="cpu")
    digits = LercExample(question="How many seasons?", references=("six",),
                         candidate="it ran for 6 seasons on ITV")
    assert scorer.score([digits]) == scorer.score([replace(digits, candidate="it ran for six "
                                                                             "seasons on ITV")])
    # The answer in digits and the reference in words is an exact match, served by rule.
    assert scorer.score([replace(digits, candidate="6")]) == [EXACT_MATCH_SCORE]
    grouped = LercExample(question="How many stores?", references=("3000",),
                          candidate="about 1,500 stores in Canada")
    assert scorer.score([grouped]) == scorer.score([replace(grouped, candidate="about 1500 "
                                                                               "stores in "
                                                                               "Canada")])
