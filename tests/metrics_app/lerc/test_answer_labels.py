"""How an answer is written is not what it says: the judge reads an answer without a leading
label ("Answer:", "A:", "Final answer:") and without markdown emphasis, in training, calibration
and scoring alike (`data.answer_as_judged`), so a dataset or a generating system that writes its
answers that way is judged as one that does not (docs/LERC.md, the format probe)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from metrics_app.lerc.data import LercExample, answer_as_judged, examples_as_judged
from metrics_app.lerc.inference import EXACT_MATCH_SCORE, LercScorer


@pytest.mark.parametrize(("written", "judged"), [
    ("Answer: Paris", "Paris"),
    ("A: Paris", "Paris"),
    ("answer:Paris", "Paris"),
    ("Final answer: 42", "42"),
    ("The final answer: 42", "42"),
    ("ANSWER\uff1a Rome", "Rome"),
    ("**Paris** is the capital", "Paris is the capital"),
    ("Answer: **four symphonies**", "four symphonies"),
])
def test_a_label_and_emphasis_are_not_read(written, judged):
    assert answer_as_judged(written) == judged


@pytest.mark.parametrize("written", [
    "A Tale of Two Cities",      # "A" is the answer's first word, not a label
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
