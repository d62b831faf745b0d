"""Training without Django: a tiny random BERT overfits a fixture, round-trips through disk,
resumes from its checkpoint, learns a preference with the Bradley–Terry loss."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from annotation.domain.agreement import pearson
from metrics_app.lerc.config import TrainConfig, TrainingCancelled
from metrics_app.lerc.data import PairExample, mc_pretraining_examples
from metrics_app.lerc.inference import LercScorer
from metrics_app.lerc.model import read_meta
from metrics_app.lerc.training import optimizer_for, pretrain_backbone, train
from metrics_app.lerc.validation import pairwise_accuracy_of_labels
from tests.support.lerc import toy_examples


def test_tiny_bert_overfits_saves_reloads_and_scores_the_same(tmp_path, tiny_options):
    examples = toy_examples(24)
    seen = []
    cfg = TrainConfig.from_dict({**tiny_options, "output_dir": str(tmp_path)})
    metrics = train(cfg, examples, examples, progress=seen.append)

    assert metrics["val_pearson"] > 0.9
    assert metrics["best_epoch"] == max(
        metrics["history"], key=lambda h: h["val_pearson"] or -1)["epoch"]
    assert seen[0]["phase"] == "encoding"
    assert {"epoch", "step", "loss"} <= set(next(p for p in seen if p["phase"] == "train"))
    assert read_meta(metrics["model_dir"])["model_class"] == "LercRegressor"

    gold = [e.score for e in examples]
    # The encoder's own scores (serving gives exact copies the top score without it, and
    # passes the rest through the calibrated judge fitted on validation).
    raw = {"exact_match_score": None, "calibrated": False}
    first = LercScorer(metrics["model_dir"]).score(examples, **raw)
    again = LercScorer(metrics["model_dir"]).score(examples, **raw)
    assert pearson(first, gold) == pytest.approx(metrics["val_pearson"], abs=1e-4)
    assert again == pytest.approx(first, abs=1e-5)
    one_by_one = LercScorer(metrics["model_dir"]).score(examples, length_sorted=False,
                                                         batch_size=1, **raw)
    assert one_by_one == pytest.approx(first, abs=1e-4)  # sorting restores the input order


def test_multiple_references_score_with_the_maximum_in_the_each_layout(tmp_path, tiny_options):
    """The paper's layout (`reference_mode="each"`): one input per reference, the maximum."""
    examples = toy_examples(24)
    cfg = TrainConfig.from_dict({**tiny_options, "output_dir": str(tmp_path), "epochs": 2,
                                 "reference_mode": "each", "calibrate": False})
    scorer = LercScorer(train(cfg, examples, examples)["model_dir"])
    assert scorer.reference_mode == "each"
    from dataclasses import replace

    single = [replace(e, references=(r,)) for e in examples[:6] for r in (e.references[0], "zzz")]
    both = [replace(e, references=(e.references[0], "zzz")) for e in examples[:6]]
    separate = scorer.score(single)
    combined = scorer.score(both)
    for i, value in enumerate(combined):
        assert value == pytest.approx(max(separate[2 * i], separate[2 * i + 1]), abs=1e-5)
    assert scorer.score(both, max_references=1) == pytest.approx(separate[0::2], abs=1e-5)


def test_killed_training_resumes_from_its_last_epoch(tmp_path, tiny_options):
    examples = toy_examples(16)
    options = {**tiny_options, "output_dir": str(tmp_path), "epochs": 4}

    def die_in_epoch_three(info):
        if info.get("epoch") == 3:
            raise KeyboardInterrupt("worker killed")

    with pytest.raises(KeyboardInterrupt):
        train(TrainConfig.from_dict(options), examples, examples, progress=die_in_epoch_three)
    resumed = train(TrainConfig.from_dict(options), examples, examples)
    assert resumed["resumed_from_epoch"] == 2
    assert [h["epoch"] for h in resumed["history"]] == [1, 2, 3, 4]

    fresh = train(TrainConfig.from_dict({**options, "output_dir": str(tmp_path / "fresh")}),
                  examples, examples)
    # Same seeds and per-epoch shuffles: the resumed run ends where an uninterrupted one does.
    assert resumed["history"][-1]["train_loss"] == pytest.approx(
        fresh["history"][-1]["train_loss"], rel=1e-3)


def test_cancel_check_stops_training(tmp_path, tiny_options):
    cfg = TrainConfig.from_dict({**tiny_options, "output_dir": str(tmp_path)})
    with pytest.raises(TrainingCancelled):
        train(cfg, toy_examples(16), [], should_cancel=lambda: True)


def test_pairwise_bradley_terry_learns_a_preference(tmp_path, tiny_options):
    pairs = []
    for i in range(16):
        good, bad = f"because of reason {i} explained well", f"no idea {i}"
        # Alternate sides so the model cannot just learn "A wins".
        pairs.append(PairExample(question=f"Why {i}?", answer_a=good, answer_b=bad, label=1.0)
                     if i % 2 else
                     PairExample(question=f"Why {i}?", answer_a=bad, answer_b=good, label=0.0))
    cfg = TrainConfig.from_dict({**tiny_options, "output_dir": str(tmp_path), "kind": "pairwise",
                                 "epochs": 8})
    metrics = train(cfg, pairs, pairs)
    assert metrics["val_pairwise_accuracy"] == 1.0
    scorer = LercScorer(metrics["model_dir"])
    assert scorer.kind == "pairwise"
    scores = scorer.score_pairs(pairs)
    assert pairwise_accuracy_of_labels(scores, [p.label for p in pairs]) == 1.0


def test_no_weight_decay_on_bias_and_layernorm(tiny_options):
    from metrics_app.lerc.model import LercRegressor, build_encoder

    encoder, _ = build_encoder("", tiny_options["backbone_config"])
    model = LercRegressor(encoder)
    decayed, undecayed = optimizer_for(model, 1e-3, 0.01).param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(not names[id(p)].endswith("bias") and "LayerNorm" not in names[id(p)]
               for p in decayed["params"])
    assert any("LayerNorm" in names[id(p)] for p in undecayed["params"])
    assert undecayed["weight_decay"] == 0.0 and decayed["weight_decay"] == 0.01
    assert isinstance(decayed["params"][0], torch.nn.Parameter)


def test_pretrained_backbone_is_kept_once_and_later_runs_start_from_it(tmp_path, tiny_options):
    """MOCHA's multiple-choice pre-training done once (`pretrain_backbone`): the folder it
    writes is a backbone whose encoder is the pre-trained one, and a run started from it
    trains as usual without pre-training again."""
    from safetensors.torch import load_file

    from metrics_app.lerc.model import build_encoder

    mc = mc_pretraining_examples([
        (f"Thing {i} is {colour}.", f"What colour is thing {i}?", colour, ["grey", "pink"])
        for i, colour in enumerate(["red", "blue", "green", "black"])])
    cfg = TrainConfig.from_dict({**tiny_options, "pretrain_epochs": 2})
    folder = tmp_path / "pretrained"
    summary = pretrain_backbone(cfg, mc, folder)

    assert summary["pretrain_examples"] == len(mc) == 20
    assert summary["pretrain_epochs"] == 2 and summary["seconds"] >= 0
    assert (folder / "pretrain.json").is_file() and (folder / "config.json").is_file()
    encoder, _ = build_encoder(folder)
    saved = load_file(str(folder / "model.safetensors"))
    assert encoder.config.hidden_size == tiny_options["backbone_config"]["hidden_size"]
    loaded = encoder.state_dict()
    assert set(saved) <= set(loaded) and len(saved) > 10
    for name, value in saved.items():
        assert torch.equal(loaded[name], value), name
    torch.manual_seed(cfg.seed)
    fresh, _ = build_encoder("", tiny_options["backbone_config"])
    assert any(not torch.equal(value, fresh.state_dict()[name])
               for name, value in encoder.state_dict().items()), "pre-training changed nothing"

    options = {k: v for k, v in tiny_options.items() if k != "backbone_config"}
    run = TrainConfig.from_dict({**options, "epochs": 2, "backbone": str(folder),
                                 "output_dir": str(tmp_path / "run")})
    metrics = train(run, toy_examples(12), toy_examples(12))
    assert "pretrain_examples" not in metrics and metrics["val_pearson"] is not None
    with pytest.raises(ValueError, match="multiple-choice examples"):
        pretrain_backbone(TrainConfig.from_dict(tiny_options), mc, tmp_path / "none")


def test_frozen_word_embeddings_stay_as_built_while_the_rest_trains(tmp_path, tiny_options):
    """`freeze_word_embeddings`: the saved word-embedding matrix is the backbone's, bit for bit;
    the layers above it and the position embeddings moved; the optimizer never holds it."""
    from safetensors.torch import load_file

    from metrics_app.lerc.device import seed_everything
    from metrics_app.lerc.model import WEIGHTS_FILE, build_model

    cfg = TrainConfig.from_dict({**tiny_options, "output_dir": str(tmp_path), "epochs": 2,
                                 "freeze_word_embeddings": True, "calibrate": False})
    seed_everything(cfg.seed)  # as the run does before it builds its model
    built, _ = build_model(cfg, torch.device("cpu"))
    assert not built.encoder.get_input_embeddings().weight.requires_grad
    held = {id(p) for group in optimizer_for(built, 1e-3, 0.01).param_groups
            for p in group["params"]}
    assert id(built.encoder.get_input_embeddings().weight) not in held
    initial = {name: p.detach().clone() for name, p in built.named_parameters()}

    metrics = train(cfg, toy_examples(24), toy_examples(24))
    saved = load_file(str(Path(metrics["model_dir"]) / WEIGHTS_FILE))
    words = "encoder.embeddings.word_embeddings.weight"
    assert torch.equal(saved[words], initial[words])
    for moved in ("encoder.embeddings.position_embeddings.weight",
                  "encoder.encoder.layer.0.attention.self.query.weight", "head.weight"):
        assert not torch.equal(saved[moved], initial[moved]), moved


def test_frozen_lower_layers_stay_as_built_and_the_layers_above_train(tmp_path, tiny_options):
    """`frozen_layers`: the embeddings and the lowest layers are saved as built, bit for bit;
    the layers above and the head moved; no gradient reaches the frozen part."""
    from safetensors.torch import load_file

    from metrics_app.lerc.device import seed_everything
    from metrics_app.lerc.model import WEIGHTS_FILE, build_model

    cfg = TrainConfig.from_dict({**tiny_options, "output_dir": str(tmp_path), "epochs": 2,
                                 "frozen_layers": 1, "calibrate": False})
    seed_everything(cfg.seed)
    built, _ = build_model(cfg, torch.device("cpu"))
    layers = len(built.encoder.encoder.layer)
    assert layers >= 2
    initial = {name: p.detach().clone() for name, p in built.named_parameters()}
    frozen = [name for name, p in built.named_parameters() if not p.requires_grad]
    assert frozen and all(name.startswith(("encoder.embeddings.", "encoder.encoder.layer.0."))
                          for name in frozen)
    assert {n for n in initial if n.startswith(("encoder.embeddings.",
                                                "encoder.encoder.layer.0."))} == set(frozen)

    metrics = train(cfg, toy_examples(24), toy_examples(24))
    saved = load_file(str(Path(metrics["model_dir"]) / WEIGHTS_FILE))
    for name in frozen:
        assert torch.equal(saved[name], initial[name]), name
    for moved in ("encoder.encoder.layer.1.attention.self.query.weight", "head.weight"):
        assert not torch.equal(saved[moved], initial[moved]), moved
    with pytest.raises(ValueError, match=f"frozen_layers: {layers + 1}, but the backbone has "
                                         f"{layers} layers"):
        build_model(TrainConfig.from_dict({**tiny_options, "frozen_layers": layers + 1}),
                    torch.device("cpu"))
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="frozen_layers: a whole number"):
            TrainConfig.from_dict({"frozen_layers": bad})
    assert TrainConfig().frozen_layers == 0


def test_each_kind_has_its_own_frozen_default_and_a_bad_value_names_the_option(tiny_options):
    """None (the default) means the kind's choice: the regression judge freezes (chosen on
    EVOUNA validation), the pairwise scorer trains its word embeddings (never measured)."""
    from metrics_app.lerc.model import build_model

    options = {k: v for k, v in tiny_options.items() if k != "freeze_word_embeddings"}
    assert TrainConfig().freeze_word_embeddings is None
    for kind, frozen in (("regression", True), ("pairwise", False)):
        model, _ = build_model(TrainConfig.from_dict({**options, "kind": kind}),
                               torch.device("cpu"))
        assert model.encoder.get_input_embeddings().weight.requires_grad is not frozen, kind
    explicit, _ = build_model(TrainConfig.from_dict(
        {**options, "kind": "pairwise", "freeze_word_embeddings": True}), torch.device("cpu"))
    assert not explicit.encoder.get_input_embeddings().weight.requires_grad
    for bad in ("yes", 1):
        with pytest.raises(ValueError, match="freeze_word_embeddings: true, false, or null"):
            TrainConfig.from_dict({"freeze_word_embeddings": bad})


def test_dropout_defaults_to_the_kinds_rate_and_an_explicit_rate_wins(tiny_options):
    """None (the default) means the kind's choice: no dropout for the regression judge (chosen
    on EVOUNA validation), the backbone's own for the pairwise scorer (never measured)."""
    from torch import nn

    from metrics_app.lerc.model import build_model

    options = {k: v for k, v in tiny_options.items() if k != "dropout"}
    assert TrainConfig().dropout is None

    def rates(model):
        return {module.p for module in model.modules() if isinstance(module, nn.Dropout)}

    regression, _ = build_model(TrainConfig.from_dict(options), torch.device("cpu"))
    pairwise, _ = build_model(TrainConfig.from_dict({**options, "kind": "pairwise"}),
                              torch.device("cpu"))
    assert rates(regression) == {0.0}
    assert rates(pairwise) == {0.1}  # BERT's hidden and attention dropout, kept
    for kind in ("regression", "pairwise"):
        model, _ = build_model(TrainConfig.from_dict({**options, "kind": kind, "dropout": 0.2}),
                               torch.device("cpu"))
        assert rates(model) == {0.2}, kind
    for bad in (1.0, -0.1, True, "0.1"):
        with pytest.raises(ValueError, match="dropout: a rate from 0"):
            TrainConfig.from_dict({"dropout": bad})
