"""What a LERC training run is given, and how it talks back: `TrainConfig`, the model kinds,
the progress and cancel callbacks, and `TrainingCancelled`.

Built once at the edge (`TrainConfig.from_dict` on a version's options, or a script's flags) and
passed down unchanged to data, model, training and inference. No torch here: the web processes
import this module to validate options without loading the learning stack.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields

from core.vocabulary import ModelKind

# How a trained model scores (served, and when its calibrator is fitted): "auto" holds the
# weights in bf16 on a CPU with native bf16 instructions and in fp32 elsewhere
# (`device.inference_dtype`); "fp32" gives the same numbers on every machine; "bf16" always
# halves.
SCORING_PRECISIONS = ("auto", "fp32", "bf16")

PAPER_LEARNING_RATES = (1e-5, 2e-5, 3e-5)
# The rewrite rules of `augmentation.py` (spelled here so options are checked without it), and
# those the calibrated judge is fitted with by default.
AUGMENT_RULES = ("embed", "alias", "number")
DEFAULT_AUGMENT: tuple[str, ...] = ()
# The calibrator input sets a version may name (`features.FEATURE_SETS`' keys, spelled here for
# the same reason; a test keeps the two equal).
CALIBRATION_FEATURE_SETS = ("default", "long-answer", "all", "semantic", "semantic-length")
# How the encoder's score enters the calibrated judge when the caller leaves it open
# (`calibration.fit_calibrator(use_encoder=None)`): "average", the mean logit of the
# calibrators fitted with and without it; "choose", the one of the two with the higher
# held-out-system accuracy (the rule until 2026-11-29). On the protocol's validation answers,
# each rule fitted on the other systems and measured on the held-out one, "average" made 869
# errors on the eight runs against 879 (fewer or as many on 7 of 8 runs), at a lower log loss
# on 5 (docs/LERC.md, "Averaging the calibrator with and without the encoder").
CALIBRATION_ENCODER_RULES = ("average", "choose")
DEFAULT_CALIBRATION_ENCODER = "average"
# The model kinds (`model.MODEL_KINDS` maps each to its class), spelled once in the vocabulary;
# LERC's modules take them from here as plain strings (TrainConfig is JSON).
KIND_REGRESSION = ModelKind.REGRESSION.value
KIND_PAIRWISE = ModelKind.PAIRWISE.value
MODEL_KINDS = (KIND_REGRESSION, KIND_PAIRWISE)
# How a candidate's references are read: all in one input, or one input per alias.
REFERENCE_MODES = ("joined", "each")

# The ranges a version's options are checked against when it is created (every door: the
# commands, the admin, the Celery refresh, through `TrainConfig.__post_init__`), so a value
# that cannot train is refused there and not on the worker hours later.
MAX_EPOCHS = 1000  # per run, and for multiple-choice pre-training
MAX_BATCH_SIZE = 4096  # examples per micro-batch (training and evaluation)
MAX_GRAD_ACCUMULATION = 1024
# Tokens per input: the [CLS] p [SEP] q [SEP] a [SEP] â [SEP] layout needs room for its
# five special tokens and some text; BERT-style backbones (the packaged MiniLM among them) have
# 512 positions, and a backbone with fewer is checked against its config.json
# (`backbone.max_length_check`).
MIN_MAX_LENGTH, MAX_MAX_LENGTH = 16, 512
MAX_SEED = 2**32 - 1  # numpy's seed range


def _is_number(value) -> bool:
    """A real, finite number (a bool is not one; NaN and infinity never train, and the
    database's JSON refuses them)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_whole(name: str, value, low: int, high: int | None, what: str, *,
                 none_means: str = "") -> None:
    """ValueError naming the option unless `value` is a whole number in [low, high] (or None
    when `none_means` says what None stands for)."""
    if value is None and none_means:
        return
    if _is_whole(value) and value >= low and (high is None or value <= high):
        return
    bounds = f"from {low} to {high}" if high is not None else f"{low} or more"
    raise ValueError(f"{name}: {what}, a whole number {bounds}"
                     + (f", or null for {none_means}" if none_means else "")
                     + f", not {value!r}")


def _check_number(name: str, value, what: str, *, low: float, high: float | None = None,
                  low_open: bool = False, high_open: bool = False) -> None:
    """ValueError naming the option unless `value` is a finite number in the range."""
    if _is_number(value) and (value > low if low_open else value >= low) and (
            high is None or (value < high if high_open else value <= high)):
        return
    bounds = f"above {low:g}" if low_open else f"at least {low:g}"
    if high is not None:
        bounds += f" and below {high:g}" if high_open else f" and at most {high:g}"
    raise ValueError(f"{name}: {what}, a finite number {bounds}, not {value!r}")


class TrainingCancelled(Exception):
    """The cancel check asked training to stop."""


ProgressCallback = Callable[[dict], None]
CancelCheck = Callable[[], bool]


@dataclass
class TrainConfig:
    """Hyperparameters; the defaults are the paper's (batch 32, 3 epochs, lr in
    {1e-5, 2e-5, 3e-5})."""

    output_dir: str = ""
    kind: str = KIND_REGRESSION
    backbone: str = ""  # a local Hugging Face folder; "" = the packaged MiniLM
    backbone_config: dict | None = None  # random init from this config (tiny test models)
    batch_size: int = 32
    epochs: int = 3
    learning_rate: float = 2e-5
    tune_learning_rate: bool = False  # try every PAPER_LEARNING_RATES, keep the best on val
    max_length: int = 512
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_accumulation: int = 1
    max_grad_norm: float = 1.0
    # Every dropout of the backbone and the head at this rate. None: the model kind's
    # (`ClsHeadModel.training_dropout`): none for the regression judge, whose validation
    # Pearson rose from 0.727 to 0.738 without it, at 10% less time a CPU step (docs/LERC.md,
    # "No dropout"); the backbone's own for the pairwise scorer (not measured).
    dropout: float | None = None
    seed: int = 42
    eval_batch_size: int = 64
    device: str = "auto"
    bf16: bool = True
    # The precision the calibrator is fitted at: the one the judge will be served at (the
    # services set it from QAJ_LERC_PRECISION), so it learns the scores it will be given.
    scoring_precision: str = "auto"
    pretrain_epochs: int = 0  # multiple-choice pre-training epochs (0 = none)
    pretrain_learning_rate: float = 2e-5
    max_train_examples: int | None = None  # seeded random subset (benchmarks on small machines)
    max_val_examples: int | None = None  # the same for validation (epoch choice, calibration)
    max_test_examples: int | None = None  # the same for the test split the service reports
    calibrate: bool = True  # fit the calibrated judge on validation (regression models)
    # Label-preserving rewrites of the validation answers the calibrated judge is also fitted
    # on (`augmentation.RULES`; [] for none), each weighing `calibration_augment_weight`
    # against a judged answer. None by default: on the protocol's validation answers every
    # rule moved the held-out-system accuracy by −0.7 to +0.5 points (mean +0.05), because the
    # judge already decided the rewrites as it decided their originals (docs/LERC.md,
    # "Semantic inputs, rewrites, and where the judge still lost").
    calibration_augment: list[str] = field(default_factory=lambda: list(DEFAULT_AUGMENT))
    calibration_augment_weight: float = 0.5
    # Distillation: when a version names a judge the researcher trusts (its data option
    # `distill_judge`), that judge's verdicts on the answers no human judged join the
    # calibrated judge's fit at one of these weights (each below a human judgment's 1), or at
    # none when no weight makes the held-out-system cross-validation on the human judgments
    # both more accurate and lower in log loss (`calibration._distill_weight`).
    calibration_distill_weights: list[float] = field(default_factory=lambda: [0.25, 0.5])
    # At most this many of the judge's answers (a seeded sample): each costs an encoder pass.
    calibration_distill_max: int = 5000
    # The calibrated judge's inputs, a `features.FEATURE_SETS` name ("semantic" reads the
    # reference's meaning in the answer with the packaged sentence encoder; "default" is the
    # lexical set served before it).
    calibration_features: str = "semantic"
    # How the encoder's score enters the calibrated judge (`CALIBRATION_ENCODER_RULES`).
    calibration_encoder: str = DEFAULT_CALIBRATION_ENCODER
    group_by_length: bool = True  # batches of similar length (less padding), in random order
    # Keep the backbone's word-embedding matrix as pre-trained (half of MiniLM's weights): its
    # dense gradient and AdamW update cost 12-16% of a CPU training step, and words the training
    # answers never use keep their place beside the ones they do. None: the model kind's
    # default, frozen for the regression judge (chosen on EVOUNA validation, docs/LERC.md,
    # "Frozen word embeddings") and trained for the pairwise scorer (not measured there).
    freeze_word_embeddings: bool | None = None
    # Keep the whole embedding layer and the lowest N transformer layers as pre-trained; the
    # backward pass then stops above them. 0 (the default) trains every layer: on EVOUNA, 3 of
    # MiniLM's 6 frozen saved only 17% a CPU step and cost 0.16 of validation Pearson
    # (docs/LERC.md, "No dropout"); it is for a backbone too large to fine-tune whole.
    frozen_layers: int = 0
    max_references: int | None = None  # train on the first N references only (None = all)
    # "joined": all reference aliases in one input (one input per candidate; the default);
    # "each": one input per alias, the maximum over aliases when scoring (the paper's layout).
    reference_mode: str = "joined"
    max_reference_tokens: int = 64  # "joined": aliases after this many tokens are left out
    progress_every: int = 10  # optimizer steps between progress reports
    # ...and at most this many seconds between reports (checked every micro-batch), so slow
    # steps (big batches, accumulation, CPU) still send the heartbeat the stale check reads.
    heartbeat_seconds: float = 60.0
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def __post_init__(self):
        self._check_types_and_ranges()
        if not isinstance(self.calibration_augment, (list, tuple)):
            raise ValueError("calibration_augment: a list of rules, e.g. [\"embed\"]")
        unknown = [rule for rule in self.calibration_augment if rule not in AUGMENT_RULES]
        if unknown:
            raise ValueError(f"calibration_augment: unknown rules {', '.join(map(str, unknown))}"
                             f" (known: {', '.join(AUGMENT_RULES)})")
        self.calibration_augment = list(self.calibration_augment)
        if self.scoring_precision not in SCORING_PRECISIONS:
            raise ValueError(f"scoring_precision: one of {', '.join(SCORING_PRECISIONS)}, "
                             f"not {self.scoring_precision!r}")
        if self.calibration_encoder not in CALIBRATION_ENCODER_RULES:
            raise ValueError(f"calibration_encoder: one of {', '.join(CALIBRATION_ENCODER_RULES)}"
                             f", not {self.calibration_encoder!r}")
        if self.calibration_features not in CALIBRATION_FEATURE_SETS:
            raise ValueError(f"calibration_features: one of {', '.join(CALIBRATION_FEATURE_SETS)}"
                             f", not {self.calibration_features!r}")
        weight = self.calibration_augment_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (
                0 <= weight <= 1):
            raise ValueError("calibration_augment_weight: a number from 0 to 1 (a rewrite "
                             "weighs at most what a judged answer does)")
        weights = self.calibration_distill_weights
        if isinstance(weights, (str, bytes)) or not isinstance(weights, (list, tuple)) or any(
                isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w < 1
                for w in weights):
            raise ValueError("calibration_distill_weights: a list of numbers between 0 and 1 "
                             "(a judge's verdict weighs less than a human judgment)")
        self.calibration_distill_weights = [float(w) for w in weights]
        cap = self.calibration_distill_max
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError("calibration_distill_max: a whole number of answers, at least 1")
        if not (self.freeze_word_embeddings is None
                or isinstance(self.freeze_word_embeddings, bool)):
            raise ValueError("freeze_word_embeddings: true, false, or null for the model "
                             f"kind's default, not {self.freeze_word_embeddings!r}")
        if self.dropout is not None and (
                isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float))
                or not 0 <= self.dropout < 1):
            raise ValueError("dropout: a rate from 0 up to (not including) 1, or null for the "
                             f"model kind's default, not {self.dropout!r}")
        if isinstance(self.frozen_layers, bool) or not isinstance(self.frozen_layers, int) or (
                self.frozen_layers < 0):
            raise ValueError("frozen_layers: a whole number of the backbone's lowest layers "
                             f"to keep as pre-trained, 0 or more, not {self.frozen_layers!r}")

    def _check_types_and_ranges(self) -> None:
        """Every numeric and boolean option: its type (a bool is not a number, a whole number
        is an int), finite, and in the range training can use; the error names the option."""
        if self.kind not in MODEL_KINDS:
            raise ValueError(f"kind: one of {', '.join(MODEL_KINDS)}, not {self.kind!r}")
        if not isinstance(self.output_dir, (str, os.PathLike)):
            raise ValueError(f"output_dir: a folder path, not {self.output_dir!r}")
        if not isinstance(self.backbone, (str, os.PathLike)):
            raise ValueError(f"backbone: a local model folder (\"\" for the packaged MiniLM), "
                             f"not {self.backbone!r}")
        if self.backbone_config is not None and not isinstance(self.backbone_config, dict):
            raise ValueError("backbone_config: an object of config.json fields, or null, "
                             f"not {self.backbone_config!r}")
        if not isinstance(self.device, str) or not self.device.strip():
            raise ValueError(f"device: \"auto\", \"cpu\", \"cuda\" or another torch device name, "
                             f"not {self.device!r}")
        if self.reference_mode not in REFERENCE_MODES:
            raise ValueError(f"reference_mode: one of {', '.join(REFERENCE_MODES)}, "
                             f"not {self.reference_mode!r}")
        if not isinstance(self.extra, dict):
            raise ValueError(f"extra: an object, not {self.extra!r}")
        for name in ("tune_learning_rate", "bf16", "calibrate", "group_by_length"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: true or false, not {getattr(self, name)!r}")
        _check_whole("epochs", self.epochs, 1, MAX_EPOCHS, "passes over the training data")
        _check_whole("pretrain_epochs", self.pretrain_epochs, 0, MAX_EPOCHS,
                     "multiple-choice pre-training epochs (0: none)")
        _check_whole("batch_size", self.batch_size, 1, MAX_BATCH_SIZE, "examples per batch")
        _check_whole("eval_batch_size", self.eval_batch_size, 1, MAX_BATCH_SIZE,
                     "examples per evaluation batch")
        _check_whole("grad_accumulation", self.grad_accumulation, 1, MAX_GRAD_ACCUMULATION,
                     "batches per optimizer step")
        _check_whole("max_length", self.max_length, MIN_MAX_LENGTH, MAX_MAX_LENGTH,
                     "tokens per input")
        _check_whole("max_reference_tokens", self.max_reference_tokens, 1, MAX_MAX_LENGTH,
                     "tokens the joined references may take")
        for name in ("max_train_examples", "max_val_examples", "max_test_examples"):
            _check_whole(name, getattr(self, name), 1, None, "examples kept (a seeded subset)",
                         none_means="all of them")
        _check_whole("max_references", self.max_references, 1, None, "references per answer",
                     none_means="all of them")
        _check_whole("seed", self.seed, 0, MAX_SEED, "random seed")
        _check_whole("progress_every", self.progress_every, 1, None,
                     "optimizer steps between progress reports")
        _check_number("learning_rate", self.learning_rate, "the optimizer's step size",
                      low=0, high=1, low_open=True)
        _check_number("pretrain_learning_rate", self.pretrain_learning_rate,
                      "the pre-training optimizer's step size", low=0, high=1, low_open=True)
        _check_number("warmup_ratio", self.warmup_ratio, "the share of steps spent warming up",
                      low=0, high=1, high_open=True)
        _check_number("weight_decay", self.weight_decay, "AdamW's decoupled weight decay",
                      low=0, high=1)
        _check_number("max_grad_norm", self.max_grad_norm, "the gradient norm clipped to",
                      low=0, low_open=True)
        _check_number("heartbeat_seconds", self.heartbeat_seconds,
                      "most seconds between progress reports (0: every batch)", low=0)

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        if not isinstance(data, dict):
            raise ValueError("training options: an object of TrainConfig fields, not "
                             f"{type(data).__name__} {data!r}")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown training options: {', '.join(sorted(unknown))}")
        return cls(**data)
