"""Each baseline metric against its reference implementation or hand-computed values."""
from __future__ import annotations

import pytest

from core import text_match
from metrics_app.metrics import baselines
from metrics_app.registry import MetricInput, MetricUnavailable, get_metric, metric_names
from metrics_app.services.scoring import score_inputs


def mi(candidate, references, question="q", passage="", id="x"):
    return MetricInput(id=id, question=question, references=list(references),
                       candidate=candidate, passage=passage)


def test_all_baselines_are_registered_with_versions():
    for name in ("bleu1", "bleu4", "meteor", "rougeL", "em", "f1", "bertscore",
                 "conditional_bertscore", "length"):
        assert name in metric_names()
        assert get_metric(name).version


def test_squad_normalization():
    assert text_match.squad_normalize("The  Cat, sat!") == "cat sat"
    assert text_match.squad_normalize("an Apple a day") == "apple day"
    assert text_match.squad_normalize("Wilhelm Röntgen.") == "wilhelm röntgen"


def test_squad_normalization_matches_the_squad_scripts_character_loop():
    # The SQuAD v1.1 script's own definition, kept here as the oracle for the translate table.
    import re
    import string

    def squad_script(text):
        text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
        return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())

    long_answer = "The answer, as the text says, is: a (long) one. " * 40  # not remembered
    for text in ("Don't stop—the \"A-Team\" (1983)!", "U.S.A.", "an  apple; a pie", "ñ~`@#$%^&*",
                 long_answer):
        assert text_match.squad_normalize(text) == squad_script(text)


@pytest.mark.parametrize("candidate,reference", [
    ("a a b c", "a b b"), ("x", "x y z z z"), ("", "a"), ("p q r", "s t")])
def test_multiset_overlap_counts_shared_units_with_multiplicity(candidate, reference):
    from collections import Counter

    cand, ref = candidate.split(), reference.split()
    shared = sum((Counter(cand) & Counter(ref)).values())
    expected = ((0.0, 0.0, 0.0) if not shared else
                (shared / len(cand), shared / len(ref),
                 2 * shared / (len(cand) + len(ref))))
    assert text_match.multiset_prf(cand, ref) == pytest.approx(expected)
    # Counted once for all aliases (the lexical features' use): the same numbers.
    assert text_match.multiset_prf(Counter(cand), ref) == pytest.approx(expected)
    assert text_match.multiset_prf(cand, Counter(ref)) == pytest.approx(expected)


@pytest.mark.parametrize(
    "candidate,references,em,f1",
    [
        ("on a mat", ["on the mat"], 1.0, 1.0),          # articles are dropped
        ("Wilhelm Röntgen", ["Wilhelm Conrad Röntgen"], 0.0, 0.8),  # P=1, R=2/3
        ("Röntgen", ["Wilhelm Conrad Röntgen", "Röntgen!"], 1.0, 1.0),  # max over references
        ("the cat", ["dog"], 0.0, 0.0),
        ("", ["dog"], 0.0, 0.0),
        ("", ["the"], 1.0, 1.0),   # both normalize to empty: SQuAD v2 counts a match
        ("a b c d", ["a b x y z"], 0.0, 2 * (1 / 3) * (1 / 4) / (1 / 3 + 1 / 4)),  # "a" dropped
    ],
)
def test_em_f1_hand_computed(candidate, references, em, f1):
    inputs = [mi(candidate, references)]
    assert get_metric("em").score_batch(inputs) == [pytest.approx(em)]
    assert get_metric("f1").score_batch(inputs) == [pytest.approx(f1)]


def test_no_reference_is_unscorable_but_length_is_not():
    inputs = [mi("some answer here", [])]
    for name in ("em", "f1", "bleu1", "rougeL"):
        assert get_metric(name).score_batch(inputs) == [None]
    assert get_metric("length").score_batch(inputs) == [3.0]


def test_length_counts_whitespace_tokens():
    assert get_metric("length").score_batch(
        [mi("  Hello   wörld \n again ", ["x"]), mi("", ["x"])]) == [3.0, 0.0]


def _coco_reference(scorer, cand, ref):
    clean = baselines.remove_mocha_punctuation
    return scorer.compute_score({0: [clean(ref)]}, {0: [clean(cand)]})


EXAMPLES = [
    ("a fencing master who kidnapped Richard", "a fencing master who kidnapped Norman."),
    ("Her ears have cotton!", "She puts cotton in her ears."),
    ("Quinn will be mad at Skylar", "be angry"),
    ("the big red dog ran home quickly", "the big red dog ran home"),
]


def test_bleu_matches_pycocoevalcap_after_mocha_punctuation_removal():
    from pycocoevalcap.bleu.bleu import Bleu

    inputs = [mi(c, [r]) for c, r in EXAMPLES]
    ours1 = get_metric("bleu1").score_batch(inputs)
    ours4 = get_metric("bleu4").score_batch(inputs)
    for (cand, ref), b1, b4 in zip(EXAMPLES, ours1, ours4, strict=True):
        _, per_n = _coco_reference(Bleu(4), cand, ref)
        assert b1 == pytest.approx(per_n[0][0])
        assert b4 == pytest.approx(per_n[3][0])
        assert 0.0 <= b4 <= b1 <= 1.0


def test_bleu1_and_rougeL_hand_computed():
    inputs = [mi("on a mat!", ["on the mat."])]
    # 2 of 3 unigrams match, equal lengths (no brevity penalty); LCS 2 of 3 both ways.
    assert get_metric("bleu1").score_batch(inputs)[0] == pytest.approx(2 / 3, abs=1e-6)
    assert get_metric("rougeL").score_batch(inputs)[0] == pytest.approx(2 / 3)


def test_rougeL_matches_pycocoevalcap():
    from pycocoevalcap.rouge.rouge import Rouge

    inputs = [mi(c, [r]) for c, r in EXAMPLES]
    ours = get_metric("rougeL").score_batch(inputs)
    for (cand, ref), value in zip(EXAMPLES, ours, strict=True):
        assert value == pytest.approx(_coco_reference(Rouge(), cand, ref)[1][0])


@pytest.mark.parametrize("name", ["bleu1", "bleu4", "rougeL", "f1", "em"])
def test_several_references_take_the_maximum(name):
    metric = get_metric(name)
    refs = ["a fencing master", "the kidnapper of Norman", "someone else entirely"]
    cand = "a fencing master who kidnapped Norman"
    together = metric.score_batch([mi(cand, refs)])[0]
    separately = metric.score_batch([mi(cand, [r]) for r in refs])
    assert together == pytest.approx(max(separately))


@pytest.mark.parametrize("name", ["bleu1", "bleu4", "rougeL"])
def test_empty_and_punctuation_only_candidates_score_zero(name):
    values = get_metric(name).score_batch([mi("", ["a b"]), mi("?!.", ["a b"]), mi("w x y z", ["w x y z."])])
    assert values[0] == 0.0 and values[1] == 0.0
    assert values[2] > 0.9


@pytest.mark.slow
def test_meteor_matches_pycocoevalcap_and_handles_unicode_and_empty():
    from pycocoevalcap.meteor.meteor import Meteor

    metric = baselines.CocoMeteor()
    inputs = [mi(c, [r]) for c, r in EXAMPLES] + [
        mi("Wilhelm Röntgen", ["Wilhelm Conrad Röntgen", "Röntgen"]),
        mi("Wilhelm Rontgen", ["Wilhelm Conrad Rontgen", "Rontgen"]),
        mi("", ["anything"]),
        mi("same words here", ["same words here."]),
    ]
    try:
        ours = metric.score_batch(inputs)
    finally:
        metric.close()
    reference = Meteor()
    try:
        for (cand, ref), value in zip(EXAMPLES, ours[: len(EXAMPLES)], strict=True):
            assert value == pytest.approx(_coco_reference(reference, cand, ref)[1][0], abs=1e-9)
    finally:
        del reference
    # non-ASCII text scores exactly like its ASCII twin (UTF-8 reaches the jar intact)
    assert ours[-4] == pytest.approx(ours[-3]) and 0.0 < ours[-4] < 1.0
    assert ours[-2] == 0.0
    assert ours[-1] == pytest.approx(1.0)
    assert all(0.0 <= v <= 1.0 for v in ours)


def test_meteor_without_java_is_unavailable_and_the_batch_continues(monkeypatch):
    monkeypatch.setattr(baselines.shutil, "which", lambda name: None)
    meteor = baselines.CocoMeteor()
    with pytest.raises(MetricUnavailable, match="Java"):
        meteor.score_batch([mi("a", ["a"])])
    runs = score_inputs(metric_names=["meteor", "f1"], inputs=[mi("a b", ["a b"])])
    assert "Java" in runs["meteor"].error and runs["meteor"].values == [None]
    assert runs["f1"].values == [1.0] and not runs["f1"].error


def test_greedy_match_f1_hand_computed():
    import torch

    cand = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    ref = torch.tensor([[1.0, 0.0]])
    # precision: (1 + 0) / 2 = 0.5; recall: 1 → F1 = 2/3
    assert baselines.greedy_match_f1(cand, ref) == pytest.approx(2 / 3)
    assert baselines.greedy_match_f1(cand, torch.zeros((0, 2))) == 0.0


@pytest.mark.slow
def test_bertscore_matches_bert_score_package_with_the_local_minilm():
    from bert_score import score as bert_score

    model_dir = baselines.default_model_dir()
    assert model_dir.is_dir() and "site-packages" in str(model_dir)
    cands = ["a fencing master who kidnapped Richard", "Röntgen", ""]
    refs = ["a fencing master who kidnapped Norman", "Wilhelm Conrad Röntgen", "x"]
    ours = get_metric("bertscore").score_batch([mi(c, [r]) for c, r in zip(cands, refs, strict=False)])
    _, _, expected = bert_score(cands[:2], refs[:2], model_type=str(model_dir),
                                num_layers=baselines.DEFAULT_BERTSCORE_LAYER)
    assert ours[:2] == pytest.approx(expected.tolist(), abs=1e-5)
    assert ours[2] == 0.0
    same = get_metric("bertscore").score_batch([mi("the same answer", ["the same answer"])])
    assert same[0] == pytest.approx(1.0, abs=1e-4)


@pytest.mark.slow
def test_bertscore_equals_bert_score_on_each_pair_alone():
    """Our encoder path (distinct texts, length-sorted batches, fast tokenizer) gives each pair
    the score bert-score's own scorer gives that pair in a call of its own (no padding)."""
    pairs = [
        ("The first Nobel Prize in Physics was awarded to Wilhelm Röntgen in 1901.", "Röntgen"),
        ("röntgen", "W. C. Röntgen"),
        ("?!", "Röntgen"),
        ("In 1969, Apollo 11 — crewed by Armstrong, Aldrin & Collins — landed.", "July 20, 1969"),
        ("東京 (Tokyo)", "Tokyo"),
        ("I'm not sure; it might be 42 or 43.", "forty-two"),
    ]
    metric = get_metric("bertscore")
    ours = metric.pair_scores([c for c, _ in pairs], [r for _, r in pairs], [None] * len(pairs))
    scorer = baselines.shared_bert_scorer(metric.model_dir, metric.num_layers)
    for (cand, ref), value in zip(pairs, ours, strict=True):
        _, _, expected = scorer.score([cand], [ref])
        assert value == pytest.approx(expected.item(), abs=1e-5), (cand, ref)


@pytest.mark.slow
def test_conditional_bertscore_is_conditioned_on_context_and_question():
    metric = get_metric("conditional_bertscore")
    base = dict(question="Who is the Frenchman de Vac?")
    values = metric.score_batch([
        mi("the same answer", ["the same answer"], passage="Some passage.", **base),
        mi("kidnapped Richard", ["kidnapped Norman"], passage="Norman is Richard.", **base),
        mi("kidnapped Richard", ["kidnapped Norman"], passage="Bees make honey.", **base),
        mi("", ["kidnapped Norman"], passage="Norman is Richard.", **base),
        mi("Röntgen ünïcode", ["Röntgen"], passage="x" * 5000, **base),  # truncated context
    ])
    assert values[0] == pytest.approx(1.0, abs=1e-5)
    assert values[1] != pytest.approx(values[2], abs=1e-4)   # the context changes the vectors
    assert values[3] == 0.0
    assert all(0.0 <= v <= 1.0 + 1e-6 for v in values)
