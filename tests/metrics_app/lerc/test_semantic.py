"""The semantic inputs of the calibrated judge (`metrics_app.lerc.semantic`): the packaged
sentence encoder finds a reference's meaning inside a long answer that states it in other words;
a calibrator fitted on them names them, needs them, and a served judge computes them (and skips
the fine-tuned encoder when its score has no weight)."""
from __future__ import annotations

import random

import pytest
import torch

from metrics_app.lerc.calibration import Calibrator, fit_calibrator
from metrics_app.lerc.config import CALIBRATION_FEATURE_SETS, TrainConfig
from metrics_app.lerc.features import FEATURE_SETS, SEMANTIC_FEATURES, lexical_features


@pytest.fixture(scope="module")
def encoder():
    from metrics_app.lerc.semantic import SemanticEncoder

    # fp32: the properties below are exact there; bf16 is checked against it below.
    return SemanticEncoder(precision="fp32")


def _named(row):
    return dict(zip(SEMANTIC_FEATURES, row, strict=True))


def test_a_paraphrase_inside_a_long_answer_reads_closer_than_a_wrong_one(encoder):
    references = [("motor neuron disease",)] * 2
    right, wrong = (_named(row) for row in encoder.features([
        "Stephen Hawking had a rare early-onset, slow-progressing form of amyotrophic lateral "
        "sclerosis, also known as Lou Gehrig's disease.",
        "Stephen Hawking was a theoretical physicist who worked on black holes at Cambridge "
        "University for most of his career."], references))
    assert right["semantic_recall"] > wrong["semantic_recall"]
    assert right["semantic_cosine"] > wrong["semantic_cosine"]
    for row in (right, wrong):
        assert all(-1.0 <= value <= 1.0 + 1e-6 for value in row.values())
        assert row["semantic_f1"] == pytest.approx(
            2 * row["semantic_recall"] * row["semantic_precision"]
            / (row["semantic_recall"] + row["semantic_precision"]))


def test_each_value_is_the_best_alias_and_an_empty_answer_reads_nothing(encoder):
    [both] = encoder.features(["Paris"], [("Lyon", "Paris")])
    [lyon] = encoder.features(["Paris"], [("Lyon",)])
    [paris] = encoder.features(["Paris"], [("Paris",)])
    assert both == pytest.approx([max(a, b) for a, b in zip(lyon, paris, strict=True)])
    assert paris[SEMANTIC_FEATURES.index("semantic_cosine")] == pytest.approx(1.0, abs=1e-5)
    assert encoder.features(["", "Paris"], [("Paris",), ("",)]) == [[0.0] * 4, [0.0] * 4]
    # Aliases that differ only in case or spacing read alike (the tokenizer is uncased).
    [variants] = encoder.features(["the  City of Light"], [("PARIS", "paris", "Paris ")])
    [plain] = encoder.features(["The city of light"], [("Paris",)])
    assert variants == pytest.approx(plain)


def test_batching_under_the_token_budget_changes_no_value(encoder):
    # Long and short answers in one call are cut into several padded batches on CPU
    # (`batch_token_budget`); each answer's values are those it gets alone.
    words = "the river flows past the old city walls towards the sea".split()
    candidates = [" ".join(words[: 3 + i % 9] * (1 + i % 5)) for i in range(40)]
    references = [("the sea", "river")] * len(candidates)
    together = encoder.features(candidates, references)
    for candidate, row in zip(candidates[:8], together, strict=False):
        assert encoder.features([candidate], [("the sea", "river")])[0] == pytest.approx(
            row, abs=1e-5)


def test_bf16_values_stay_within_a_few_thousandths_of_fp32(encoder):
    """`precision="bf16"` (what "auto" picks on a CPU with AMX) holds the weights in bf16; the
    values move by a few thousandths and keep their order. Forced here, so the check runs on
    any CPU."""
    from metrics_app.lerc.semantic import SemanticEncoder

    half = SemanticEncoder(precision="bf16")
    assert next(half.model.parameters()).dtype == torch.bfloat16
    words = "the river flows past the old city walls towards the sea".split()
    candidates = ["Stephen Hawking had a rare form of amyotrophic lateral sclerosis.",
                  "He worked on black holes at Cambridge.", "Paris", "the city of light",
                  *(" ".join(words[: 3 + i]) for i in range(8))]
    references = [("motor neuron disease",)] * 2 + [("Paris", "Lutetia")] * 2 + \
        [("the sea", "river")] * 8
    full, halved = encoder.features(candidates, references), half.features(candidates, references)
    assert max(abs(a - b) for f, h in zip(full, halved, strict=True)
               for a, b in zip(f, h, strict=True)) < 0.02
    recall = SEMANTIC_FEATURES.index("semantic_recall")
    assert halved[0][recall] > halved[1][recall]


def test_semantic_inputs_need_their_values_and_the_option_names_a_known_set():
    with pytest.raises(ValueError, match="semantic features"):
        lexical_features("Paris", ["Paris"], "", FEATURE_SETS["semantic"])
    assert set(CALIBRATION_FEATURE_SETS) == set(FEATURE_SETS)
    assert TrainConfig().calibration_features == "semantic"
    with pytest.raises(ValueError, match="calibration_features: one of"):
        TrainConfig.from_dict({"calibration_features": "everything"})


def _paraphrased(n=300, seed=0):
    """Correct answers state the reference only in other words (a meaning the lexical features
    cannot see); wrong ones name something unrelated. Five systems."""
    rng = random.Random(seed)
    pairs = [("automobile", "a car"), ("physician", "a doctor"), ("ocean", "the sea"),
             ("infant", "a baby"), ("purchase", "a buy"), ("attorney", "a lawyer")]
    rows = []
    for i in range(n):
        reference, paraphrase = pairs[i % len(pairs)]
        correct = rng.random() < 0.5
        candidate = (f"It is {paraphrase}, as most sources say" if correct
                     else f"It is {rng.choice(['a mountain', 'a violin', 'a planet'])}, as "
                          "most sources say")
        rows.append((candidate, (reference,), 5.0 if correct else 1.0, f"q{i}",
                     ["fid", "gpt35", "chatgpt", "gpt4", "newbing"][i % 5]))
    return rows


def test_fitted_on_semantic_inputs_the_judge_accepts_a_paraphrase(encoder):
    rows = _paraphrased()
    candidates, references, gold, groups, sources = zip(*rows, strict=True)
    semantic = encoder.features(candidates, references)
    lexical, lexical_report = fit_calibrator([0.0] * len(rows), candidates, references, gold,
                                             groups, sources=sources, use_encoder=False)
    judge, report = fit_calibrator([0.0] * len(rows), candidates, references, gold, groups,
                                   sources=sources, use_encoder=False,
                                   feature_names=FEATURE_SETS["semantic"], semantic=semantic)
    assert report["cv_accuracy"] > lexical_report["cv_accuracy"] + 0.2
    assert judge.reads_semantic and not lexical.reads_semantic
    assert judge.input_names[-4:] == list(SEMANTIC_FEATURES)
    answer, refs = ["It is a doctor, as most sources say"], [("physician",)]
    with pytest.raises(ValueError, match="semantic features"):
        judge.probabilities([None], answer, refs)
    [p] = judge.probabilities([None], answer, refs,
                              semantic=encoder.features(answer, refs))
    assert p > 0.5


def test_a_served_judge_reads_semantic_values_and_skips_an_unweighted_encoder(
        trained_model_dir, tmp_path, encoder):
    import shutil

    from metrics_app.lerc.data import LercExample
    from metrics_app.lerc.inference import LercScorer

    folder = tmp_path / "model"
    shutil.copytree(trained_model_dir, folder)
    names = ["raw_score", *FEATURE_SETS["semantic"]]
    weights = [0.0] * len(names)
    weights[names.index("semantic_recall")] = 8.0  # only the meaning counts
    Calibrator(input_names=names, mean=[0.0] * len(names), scale=[1.0] * len(names),
               coef=weights, intercept=-6.0, raw_fill=0.0, c=1.0).save(folder)
    scorer = LercScorer(folder, device="cpu", precision="fp32")  # the fixture's precision
    examples = [LercExample(question="what is it?", references=("physician",),
                            candidate="It is a doctor."),
                LercExample(question="what is it?", references=("physician",),
                            candidate="Mount Everest in the Himalayas"),
                LercExample(question="what is it?", references=("physician",),
                            candidate="Physician")]
    details = scorer.score_details(examples)
    assert [d["raw"] for d in details] == [None, None, None]  # the encoder never ran
    assert details[0]["probability"] > details[1]["probability"]
    assert details[2] == {"score": 5.0, "probability": 1.0, "raw": None}  # exact match rule
    recall = [_named(row)["semantic_recall"] for row in encoder.features(
        [e.candidate for e in examples[:2]], [e.references for e in examples[:2]])]
    assert details[0]["probability"] == pytest.approx(1 / (1 + pow(2.718281828459045,
                                                                   -(8 * recall[0] - 6))))
    # Uncalibrated scoring still runs the encoder (what the raw-score inspection reads).
    raw = scorer.score_details(examples[:1], calibrated=False)
    assert raw[0]["raw"] is not None and raw[0]["probability"] is None


def test_an_alias_block_and_its_mask_stay_on_the_encoders_device(encoder):
    # On a GPU worker the token vectors are CUDA tensors: a mask made on the CPU beside them
    # failed the first real GPU run ("Expected all tensors to be on the same device"). The meta
    # device stands in for CUDA here, where no GPU is present.
    meta = torch.device("meta")
    vectors = {"paris": (torch.empty(2, 384, device=meta), torch.empty(384, device=meta)),
               "city of light": (torch.empty(4, 384, device=meta), torch.empty(384, device=meta))}
    block, mask, sentence_vectors = encoder._stack(("city of light", "paris"), vectors)
    assert block.device == mask.device == sentence_vectors.device == meta
    assert tuple(mask.shape) == (2, 4)
