"""What a LERC training run is given, and how it talks back: `TrainConfig`, the model kinds,
the progress and cancel callbacks, and `TrainingCancelled`.

Built once at the edge (`TrainConfig.from_dict` on a version's options, or a script's flags) and
passed down unchanged to data, model, training and inference. No torch here: the web processes
import this module to validate options without loading the learning stack.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields

PAPER_LEARNING_RATES = (1e-5, 2e-5, 3e-5)
# The model kinds (`model.MODEL_KINDS` maps each to its class). The only definition in LERC's
# code: every other module imports them from here.
KIND_REGRESSION = "regression"
KIND_PAIRWISE = "pairwise"


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
    dropout: float | None = None  # None keeps the backbone's
    seed: int = 42
    eval_batch_size: int = 64
    device: str = "auto"
    bf16: bool = True
    pretrain_epochs: int = 0  # multiple-choice pre-training epochs (0 = none)
    pretrain_learning_rate: float = 2e-5
    max_train_examples: int | None = None  # seeded random subset (benchmarks on small machines)
    max_val_examples: int | None = None  # the same for validation (epoch choice, calibration)
    max_test_examples: int | None = None  # the same for the test split the service reports
    calibrate: bool = True  # fit the calibrated judge on validation (regression models)
    group_by_length: bool = True  # batches of similar length (less padding), in random order
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

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown training options: {', '.join(sorted(unknown))}")
        return cls(**data)
