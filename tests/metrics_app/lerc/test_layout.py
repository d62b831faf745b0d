"""The learned-metric code's layout holds: model / data / training / inference apart, each model
kind a class found by its kind, and stored training options parsed in one place."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import metrics_app.lerc
import metrics_app.services.lerc
from metrics_app.lerc import inference
from metrics_app.lerc.config import KIND_PAIRWISE, KIND_REGRESSION, TrainConfig
from metrics_app.lerc.model import MODEL_CLASSES, MODEL_KINDS, model_for_kind
from metrics_app.lerc.validation import VALIDATION_METRIC
from metrics_app.services.lerc import LercError, model_version_create
from metrics_app.services.lerc.options import (
    PACKAGED_BACKBONE,
    train_config_parse,
    version_train_config,
)
from tests.support.lerc import likert_project_from_toy
from tests.support.paths import REPO_ROOT

LERC = Path(metrics_app.lerc.__file__).parent
SERVICES = Path(metrics_app.services.lerc.__file__).parent
# Function-local imports the core keeps on purpose, each with its reason in a comment there.
LAZY_ON_PURPOSE = {("model.py", "transformers")}
# Modules j37-long's long-answer work reshapes; their lazy numpy/sklearn imports are theirs.
NOT_REARRANGED = {"calibration.py", "evaluation.py", "features.py"}


def _imports(path: Path) -> list[tuple[ast.ImportFrom | ast.Import, bool]]:
    """Every import of a module, with whether it sits inside a function."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    return [(node, id(node) not in top) for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)]


def test_training_takes_only_public_names_from_inference_and_devices_from_device():
    imported = {alias.name for node, _local in _imports(LERC / "training.py")
                if isinstance(node, ast.ImportFrom) and node.module == "inference"
                for alias in node.names}
    assert imported == {"evaluate", "predict_scores"}
    assert not {name for name in imported if name.startswith("_")}
    for path in LERC.glob("*.py"):
        for node, _local in _imports(path):
            if isinstance(node, ast.ImportFrom) and node.module == "inference":
                names = {alias.name for alias in node.names}
                assert not names & {"pick_device", "autocast_context"}, path.name


def test_no_function_local_imports_in_the_core_but_the_lazy_ones():
    local = {(path.name, node.module if isinstance(node, ast.ImportFrom) else node.names[0].name)
             for path in LERC.glob("*.py") if path.name not in NOT_REARRANGED
             for node, is_local in _imports(path) if is_local}
    assert local == LAZY_ON_PURPOSE


def test_every_kind_is_a_class_found_by_its_kind_and_saved_by_its_name():
    assert set(MODEL_KINDS) == {KIND_REGRESSION, KIND_PAIRWISE} == set(VALIDATION_METRIC)
    for kind, cls in MODEL_KINDS.items():
        assert cls.kind == kind
        assert MODEL_CLASSES[cls.__name__] is cls
        assert kind in inference.VALIDATION_BY_KIND
    assert model_for_kind(KIND_REGRESSION).calibrates
    assert not model_for_kind(KIND_PAIRWISE).calibrates
    with pytest.raises(ValueError, match="unknown kind"):
        model_for_kind("ranking")


def test_stored_options_become_a_train_config_in_one_place():
    builders = [path.name for path in SERVICES.glob("*.py")
                if "TrainConfig(" in path.read_text() or "TrainConfig.from_dict" in path.read_text()]
    assert builders == ["options.py"]
    cfg = train_config_parse({"epochs": 2, "kind": KIND_PAIRWISE}, backbone="/m", output_dir="/o")
    assert cfg == TrainConfig(epochs=2, kind=KIND_PAIRWISE, backbone="/m", output_dir="/o")
    with pytest.raises(ValueError, match="unknown training options: epoch"):
        train_config_parse({"epoch": 2})


@pytest.mark.django_db
def test_a_version_trains_with_the_options_it_was_created_with(settings, tmp_path):
    settings.QAJ_LERC_TRAIN_OPTIONS = {"epochs": 2, "batch_size": 4}
    settings.QAJ_LERC_BACKBONE = ""
    project, *_ = likert_project_from_toy()
    version = model_version_create(projects=[project], train_options={"learning_rate": 1e-3})
    assert version.backbone == PACKAGED_BACKBONE
    cfg = version_train_config(version, str(tmp_path / "v1"))
    assert (cfg.epochs, cfg.batch_size, cfg.learning_rate) == (2, 4, 1e-3)
    assert (cfg.kind, cfg.backbone, cfg.output_dir) == (KIND_REGRESSION, "", str(tmp_path / "v1"))
    with pytest.raises(LercError, match="unknown training options"):
        model_version_create(projects=[project], train_options={"learning_rat": 1e-3})


@pytest.mark.django_db
def test_more_frozen_layers_than_the_backbone_has_are_refused_when_the_version_is_created(
        settings, tmp_path):
    """The packaged MiniLM has 6 layers: 7 is refused at the door, not later on the worker; a
    backbone folder this machine cannot read (it may live only on the GPU worker) is left to
    the worker to check."""
    settings.QAJ_LERC_BACKBONE = ""
    project, *_ = likert_project_from_toy()
    assert model_version_create(projects=[project], train_options={"frozen_layers": 6})
    with pytest.raises(LercError, match="frozen_layers: 7, but the backbone has 6 layers"):
        model_version_create(projects=[project], train_options={"frozen_layers": 7})
    elsewhere = model_version_create(projects=[project], backbone=str(tmp_path / "on-the-gpu-host"),
                                     train_options={"frozen_layers": 12})
    assert elsewhere.config["train"]["frozen_layers"] == 12
    small = tmp_path / "two-layers"
    small.mkdir()
    (small / "config.json").write_text('{"num_hidden_layers": 2}')
    with pytest.raises(LercError, match="frozen_layers: 3, but the backbone has 2 layers"):
        model_version_create(projects=[project], backbone=str(small),
                             train_options={"frozen_layers": 3})


# One option out of range each (the rest the defaults): (options, the error's start).
OUT_OF_RANGE = [
    ({"epochs": -1}, "epochs: "), ({"epochs": 0}, "epochs: "),
    ({"epochs": 99999999999}, "epochs: "), ({"epochs": "abc"}, "epochs: "),
    ({"epochs": True}, "epochs: "), ({"epochs": 2.5}, "epochs: "),
    ({"batch_size": 0}, "batch_size: "), ({"eval_batch_size": -1}, "eval_batch_size: "),
    ({"learning_rate": -1}, "learning_rate: "), ({"learning_rate": 0}, "learning_rate: "),
    ({"learning_rate": float("nan")}, "learning_rate: "),
    ({"learning_rate": float("inf")}, "learning_rate: "),
    ({"learning_rate": "2e-5"}, "learning_rate: "),
    ({"pretrain_learning_rate": -1e-5}, "pretrain_learning_rate: "),
    ({"max_train_examples": -5}, "max_train_examples: "),
    ({"max_train_examples": 0}, "max_train_examples: "),
    ({"max_val_examples": -1}, "max_val_examples: "),
    ({"max_test_examples": 1.5}, "max_test_examples: "),
    ({"max_length": 0}, "max_length: "), ({"max_length": 8}, "max_length: "),
    ({"max_length": 4096}, "max_length: "),
    ({"grad_accumulation": 0}, "grad_accumulation: "),
    ({"pretrain_epochs": -1}, "pretrain_epochs: "),
    ({"warmup_ratio": 1}, "warmup_ratio: "), ({"warmup_ratio": -0.1}, "warmup_ratio: "),
    ({"weight_decay": -0.01}, "weight_decay: "),
    ({"max_grad_norm": 0}, "max_grad_norm: "),
    ({"seed": -1}, "seed: "), ({"seed": 2**40}, "seed: "),
    ({"progress_every": 0}, "progress_every: "),
    ({"heartbeat_seconds": -1}, "heartbeat_seconds: "),
    ({"max_references": 0}, "max_references: "),
    ({"max_reference_tokens": 0}, "max_reference_tokens: "),
    ({"bf16": "yes"}, "bf16: "), ({"calibrate": 1}, "calibrate: "),
    ({"tune_learning_rate": "false"}, "tune_learning_rate: "),
    ({"group_by_length": None}, "group_by_length: "),
    ({"reference_mode": "all"}, "reference_mode: "), ({"kind": "ranking"}, "kind: "),
    ({"backbone_config": [1]}, "backbone_config: "), ({"device": ""}, "device: "),
    ({"extra": []}, "extra: "), ({"calibration_augment": 5}, "calibration_augment: "),
]


@pytest.mark.parametrize(("options", "message"), OUT_OF_RANGE,
                         ids=[f"{next(iter(o))}={next(iter(o.values()))!r}" for o, _ in OUT_OF_RANGE])
def test_every_option_is_type_and_range_checked_and_the_error_names_it(options, message):
    with pytest.raises(ValueError) as refused:
        TrainConfig.from_dict(options)
    assert str(refused.value).startswith(message), refused.value


def test_options_at_the_edges_of_their_ranges_are_kept():
    edges = {"epochs": 1000, "batch_size": 1, "learning_rate": 1, "max_length": 16,
             "max_train_examples": 1, "max_val_examples": None, "grad_accumulation": 1,
             "pretrain_epochs": 0, "warmup_ratio": 0.0, "weight_decay": 0, "seed": 0,
             "max_references": None, "reference_mode": "each", "heartbeat_seconds": 0.0}
    cfg = TrainConfig.from_dict(edges)
    assert {name: getattr(cfg, name) for name in edges} == edges
    with pytest.raises(ValueError, match="^training options: an object of TrainConfig fields"):
        TrainConfig.from_dict([1])


@pytest.mark.django_db
def test_a_max_length_beyond_the_backbones_positions_is_refused_when_the_version_is_created(
        settings):
    settings.QAJ_LERC_BACKBONE = ""
    project, *_ = likert_project_from_toy(2)
    with pytest.raises(LercError, match="max_length: 256, but the backbone reads at most 128"):
        model_version_create(projects=[project], train_options={
            "backbone_config": {"max_position_embeddings": 128}, "max_length": 256})
    assert model_version_create(projects=[project], train_options={
        "backbone_config": {"max_position_embeddings": 128}, "max_length": 128})


@pytest.mark.parametrize(("value", "message"), [
    ("[1]", "QAJ_LERC_TRAIN_OPTIONS must be a JSON object such as {\"epochs\": 2}, not a list"),
    ("{epochs:1}", "QAJ_LERC_TRAIN_OPTIONS is not JSON"),
])
def test_train_options_that_are_not_a_json_object_stop_the_settings_naming_the_variable(
        value, message):
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings.dev",
             "QAJ_LERC_TRAIN_OPTIONS": value, "HOME": str(REPO_ROOT)},
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"django.core.exceptions.ImproperlyConfigured: {message}" in result.stderr
