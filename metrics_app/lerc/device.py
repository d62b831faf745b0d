"""Where a model runs and at what precision; and the seeds. Used by the trainer and the scorer
alike, so neither reaches into the other for them."""
from __future__ import annotations

import random

import numpy as np
import torch


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def autocast_context(device: torch.device, bf16: bool):
    """bf16 autocast on CUDA (when the GPU supports it); full precision on CPU, where bf16
    matmuls are slow on most machines."""
    enabled = bool(bf16 and device.type == "cuda" and torch.cuda.is_bf16_supported())
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
