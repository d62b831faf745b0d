"""Batched scoring gives the scores of one-at-a-time scoring (issue #19: the fast paths —
METEOR's pipelined jar, conditional BERTScore's length-sorted batches of distinct texts,
BERTScore's shared model — must not change a score)."""
from __future__ import annotations

import pytest

from metrics_app.metrics import baselines
from metrics_app.registry import MetricInput, get_metric

QUESTION = "who got the first nobel prize in physics"
ROWS = [
    ("Wilhelm Röntgen", ["Wilhelm Conrad Röntgen"]),
    ("The first Nobel Prize in Physics was awarded to Wilhelm Röntgen in 1901.",
     ["Wilhelm Conrad Röntgen", "Röntgen"]),
    ("Wilhelm Röntgen", ["Wilhelm Conrad Röntgen"]),  # a repeated pair
    ("Marie Curie", ["Wilhelm Conrad Röntgen", "Röntgen"]),
    ("", ["Röntgen"]),
    ("Albert Einstein, for the photoelectric effect, in 1921 (not the first)", ["Röntgen"]),
    ("?!", ["Röntgen"]),
    ("röntgen", ["Röntgen", "W. C. Röntgen", "Wilhelm Conrad Röntgen"]),
]


def inputs(question=QUESTION, passage=""):
    return [MetricInput(id=str(n), question=question, references=list(refs), candidate=cand,
                        passage=passage)
            for n, (cand, refs) in enumerate(ROWS)]


@pytest.mark.parametrize("name", ["em", "f1", "bleu1", "bleu4", "rougeL"])
def test_lexical_batch_equals_one_at_a_time(name):
    metric = get_metric(name)
    batch = inputs()
    assert metric.score_batch(batch) == [metric.score_batch([item])[0] for item in batch]


@pytest.mark.slow
def test_meteor_pipelined_batch_equals_one_at_a_time_and_pycocoevalcap():
    from pycocoevalcap.meteor.meteor import Meteor

    metric = baselines.CocoMeteor()
    batch = inputs()
    try:
        together = metric.score_batch(batch)
        alone = [metric.score_batch([item])[0] for item in batch]
        process = metric._process
        assert process is not None and process.poll() is None
        metric.score_batch(batch)
        assert metric._process is process  # one JVM serves every call until close()
    finally:
        metric.close()
    assert together == alone
    reference = Meteor()
    try:
        for item, value in zip(batch, together, strict=True):
            cand = baselines._coco_clean(item.candidate)
            pair_scores = [reference.compute_score({0: [baselines._coco_clean(r)]}, {0: [cand]})[1][0]
                           if cand else 0.0 for r in item.references]
            assert value == pytest.approx(max(pair_scores), abs=1e-12)
    finally:
        del reference


@pytest.mark.slow
def test_bertscore_batch_equals_one_at_a_time():
    metric = get_metric("bertscore")
    batch = inputs()
    together = metric.score_batch(batch)
    alone = [metric.score_batch([item])[0] for item in batch]
    assert together == pytest.approx(alone, abs=1e-5)
    assert together[4] == 0.0


def _conditional_by_hand(metric, context, question, answer):
    """The answer tokens' last-layer vectors of one unpadded sequence, built the way the
    metric documents it (no batching, no sharing)."""
    import torch

    tokenizer, model = metric._load()
    a = tokenizer.encode(answer, add_special_tokens=False)[:256]
    q = tokenizer.encode(question, add_special_tokens=False)[:128]
    c = tokenizer.encode(context, add_special_tokens=False)[: max(512 - 4 - len(q) - len(a), 0)]
    ids = ([tokenizer.cls_token_id] + c + [tokenizer.sep_token_id] + q + [tokenizer.sep_token_id]
           + a + [tokenizer.sep_token_id])
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    start = len(ids) - 1 - len(a)
    return out.hidden_states[metric.num_layers][0, start: start + len(a)]


@pytest.mark.slow
@pytest.mark.parametrize("passage", ["", "Wilhelm Röntgen discovered X-rays. " * 200])
def test_conditional_bertscore_batch_equals_one_at_a_time_and_the_definition(passage):
    metric = get_metric("conditional_bertscore")
    batch = inputs(passage=passage)
    together = metric.score_batch(batch)
    alone = [metric.score_batch([item])[0] for item in batch]
    assert together == pytest.approx(alone, abs=1e-5)
    for item, value in zip(batch, together, strict=True):
        if not item.candidate.strip():
            assert value == 0.0
            continue
        cand = _conditional_by_hand(metric, passage, item.question, item.candidate)
        expected = max(baselines.greedy_match_f1(
            cand, _conditional_by_hand(metric, passage, item.question, r))
            for r in item.references)
        assert value == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_bleu_equals_pycocoevalcap_exactly_on_many_pairs(n):
    """Our BLEU counts each text's n-grams once; pycocoevalcap's BleuScorer is the definition.
    Small vocabulary: repeated words (clipping), partial overlaps, length ratios both ways."""
    import random

    from pycocoevalcap.bleu.bleu import Bleu

    rng = random.Random(n)
    vocab = ["the", "a", "cat", "sat", "on", "mat", "Röntgen", "1901", "x"]
    pairs = [(" ".join(rng.choices(vocab, k=rng.randint(1, 12))),
              " ".join(rng.choices(vocab, k=rng.randint(1, 12)))) for _ in range(400)]
    batch = [MetricInput(id=str(i), question="q", references=[r], candidate=c)
             for i, (c, r) in enumerate(pairs)]
    ours = baselines.CocoBleu(n).score_batch(batch)
    _, per_n = Bleu(n).compute_score({i: [r] for i, (_, r) in enumerate(pairs)},
                                     {i: [c] for i, (c, _) in enumerate(pairs)}, verbose=0)
    assert ours == per_n[n - 1]
