"""Serving: a candidate equal to a reference after SQuAD normalization scores the top of the
scale without the model (MOCHA's protocol treats such candidates as correct and never has them
judged, so a LERC trained from it has not learned them); everything else is the model's score,
in input order."""
from __future__ import annotations

from metrics_app.lerc.data import LercExample
from metrics_app.lerc.inference import EXACT_MATCH_SCORE, LercScorer, predict_scores

EXAMPLES = [
    LercExample(question="What color is the sky?", references=("blue",), candidate="green"),
    LercExample(question="Who wrote it?", references=("the Bard", "William Shakespeare"),
                candidate="william shakespeare!"),
    LercExample(question="Where is it?", references=("Paris",), candidate="in Paris, France"),
    LercExample(question="Which one?", references=("The red one",), candidate="red one."),
]


def test_exact_matches_score_the_top_of_the_scale_and_the_rest_the_model(trained_model_dir):
    scorer = LercScorer(trained_model_dir, device="cpu")
    model_only = predict_scores(scorer.model, scorer.tokenizer, EXAMPLES,
                                max_length=scorer.max_length,
                                reference_mode=scorer.reference_mode)
    served = scorer.score(EXAMPLES)
    assert served[1] == served[3] == EXACT_MATCH_SCORE
    assert served[0] == model_only[0] and served[2] == model_only[2]
    assert model_only[1] != EXACT_MATCH_SCORE and model_only[3] != EXACT_MATCH_SCORE
    # Asked for, the model scores exact matches too.
    assert scorer.score(EXAMPLES, exact_match_score=None) == model_only
    # Only the references the caller scores against count.
    assert scorer.score(EXAMPLES[1:2], max_references=1)[0] != EXACT_MATCH_SCORE
