"""A version's options, written once when it is created and parsed in one place when it is
trained, re-decided or rebuilt: `version.config = {"train": TrainConfig fields, "data": data
options}` and `version.backbone` (a label; PACKAGED_BACKBONE for the packaged MiniLM).

`train_config_parse` is the only place where stored options become a `TrainConfig`; creating a
version validates its options through it too, so what was accepted is what trains."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from metrics_app.lerc.backbone import (
    backbone_layer_count,
    backbone_max_positions,
    frozen_layers_check,
    max_length_check,
)
from metrics_app.lerc.config import KIND_PAIRWISE, KIND_REGRESSION, TrainConfig
from metrics_app.models import ModelKind, ModelVersion

from .common import LercError

# The backbone label of a version trained from the packaged MiniLM (TrainConfig.backbone "").
PACKAGED_BACKBONE = "packaged MiniLM"


@dataclass(frozen=True)
class DataOptions:
    """How a version's examples are built from its projects' judgments."""

    holdout_dataset: str = ""
    split_mode: str = "auto"
    znormalize: bool = False
    pretrain_projects: tuple[str, ...] = ()  # slugs of multiple-choice projects
    # A judge the researcher trusts (`name@version` or `metric:NAME`, judge_selectors): its
    # verdicts on the items no human judged join the calibrated judge's fit, weighed below a
    # human judgment (TrainConfig.calibration_distill_weights).
    distill_judge: str = ""


def default_train_options() -> dict[str, Any]:
    """Training options every new version starts from (QAJ_LERC_TRAIN_OPTIONS)."""
    return dict(getattr(settings, "QAJ_LERC_TRAIN_OPTIONS", {}) or {})


def train_config_parse(options: dict, *, backbone: str = "", output_dir="") -> TrainConfig:
    """The one parser of stored training options (TypeError or ValueError when they do not
    fit)."""
    return TrainConfig.from_dict({**options, "backbone": backbone, "output_dir": str(output_dir)})


def version_config_build(*, kind: str, backbone: str, train_options: dict | None,
                         data: DataOptions) -> tuple[dict, str]:
    """(the `config` to store on a new version, its backbone label): the defaults overlaid with
    `train_options`, the kind set from the model kind, validated by `train_config_parse`."""
    options = {**default_train_options(), **(train_options or {})}
    options["kind"] = KIND_PAIRWISE if kind == ModelKind.PAIRWISE else KIND_REGRESSION
    backbone = backbone or options.pop("backbone", "") or getattr(settings, "QAJ_LERC_BACKBONE", "")
    options.pop("backbone", None)
    options.pop("output_dir", None)
    try:
        parsed = train_config_parse(options, backbone=backbone)
        # Also checked when the model is built; here too, so a bad value is refused now and
        # not on the worker, wherever this machine can read the backbone's config.
        layers = backbone_layer_count(backbone)
        if layers is not None:
            frozen_layers_check(parsed.frozen_layers, layers)
        positions = backbone_max_positions(backbone, parsed.backbone_config)
        if positions is not None:
            max_length_check(parsed.max_length, positions)
    except (TypeError, ValueError) as exc:
        raise LercError(str(exc)) from exc
    if data.pretrain_projects and not options.get("pretrain_epochs"):
        options["pretrain_epochs"] = 1
    config = {
        "train": options,
        "data": {"holdout_dataset": data.holdout_dataset, "split_mode": data.split_mode,
                 "znormalize": data.znormalize,
                 "pretrain_projects": list(data.pretrain_projects),
                 "distill_judge": data.distill_judge},
    }
    return config, backbone or PACKAGED_BACKBONE


def default_train_options_check() -> None:
    """LercError naming QAJ_LERC_TRAIN_OPTIONS when the options every new version starts from
    cannot train (the scheduled refresh creates versions with exactly these)."""
    try:
        version_config_build(kind=ModelKind.REGRESSION, backbone="", train_options=None,
                             data=DataOptions())
    except LercError as exc:
        raise LercError(f"QAJ_LERC_TRAIN_OPTIONS: {exc}") from exc


def version_train_config(model_version: ModelVersion, output_dir="") -> TrainConfig:
    """The TrainConfig a version trains (and is re-decided) with."""
    backbone = "" if model_version.backbone == PACKAGED_BACKBONE else model_version.backbone
    # The calibrator is fitted at the precision this deployment serves at (QAJ_LERC_PRECISION).
    options = {**model_version.config.get("train", {}),
               "scoring_precision": settings.QAJ_LERC_PRECISION}
    return train_config_parse(options, backbone=backbone, output_dir=output_dir)


def version_data_options(model_version: ModelVersion) -> DataOptions:
    data = model_version.config.get("data", {})
    return DataOptions(holdout_dataset=data.get("holdout_dataset", ""),
                       split_mode=data.get("split_mode", "auto"),
                       znormalize=data.get("znormalize", False),
                       pretrain_projects=tuple(data.get("pretrain_projects") or ()),
                       distill_judge=data.get("distill_judge", ""))
