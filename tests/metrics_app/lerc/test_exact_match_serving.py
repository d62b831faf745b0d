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


def test_answers_scored_once_serve_the_next_metric_of_the_run(trained_model_dir, monkeypatch):
    """`score --metric lerc,lerc_prob` asks the same scorer for the same answers twice: the
    second asks for nothing new; other options, new answers and forgotten ones are scored."""
    from dataclasses import replace

    import metrics_app.lerc.inference as inference

    scorer = LercScorer(trained_model_dir, device="cpu")
    computed = []
    original = scorer._computed_details

    def counting(examples, **options):
        computed.append(len(examples))
        return original(examples, **options)

    monkeypatch.setattr(scorer, "_computed_details", counting)
    first = scorer.score_details(EXAMPLES)
    again = scorer.score_details([*EXAMPLES[::-1], EXAMPLES[0]])
    assert computed == [4]
    assert again == [*first[::-1], first[0]]
    again[0]["score"] = -1.0  # the caller's copy, not the kept one
    assert scorer.score_details(EXAMPLES)[3]["score"] == first[3]["score"]

    assert scorer.score_details(EXAMPLES, exact_match_score=None)[1]["score"] != EXACT_MATCH_SCORE
    assert computed == [4, 4]
    scorer.score_details([replace(EXAMPLES[0], candidate="azure"), *EXAMPLES])
    assert computed == [4, 4, 1]

    monkeypatch.setattr(inference, "DETAILS_KEPT", 2)
    scorer.score_details(EXAMPLES)  # keeps the last two
    scorer.score_details(EXAMPLES[:2])
    assert computed == [4, 4, 1, 2]
