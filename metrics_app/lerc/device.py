"""Where a model runs and at what precision; and the seeds. Used by the trainer and the scorer
alike, so neither reaches into the other for them."""
from __future__ import annotations

import functools
import random
from pathlib import Path

import numpy as np
import torch

from .config import SCORING_PRECISIONS


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def autocast_context(device: torch.device, bf16: bool):
    """bf16 autocast for scoring on CUDA (when the GPU supports it); full precision on CPU,
    where a scorer that wants bf16 holds bf16 weights instead (`inference_dtype`)."""
    enabled = bool(bf16 and device.type == "cuda" and torch.cuda.is_bf16_supported())
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def training_autocast(device: torch.device, bf16: bool):
    """bf16 autocast for training steps: on CUDA as `autocast_context`, and on a CPU with bf16
    matrix units (AMX), where a MiniLM step of 32 inputs took 1.65 s instead of 2.45 s; the
    weights, gradients and optimizer stay fp32. Elsewhere on CPU, fp32."""
    enabled = bool(bf16 and ((device.type == "cuda" and torch.cuda.is_bf16_supported())
                             or (device.type == "cpu" and cpu_has_bf16_matrix_units())))
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


@functools.lru_cache(maxsize=1)
def cpu_has_bf16_matrix_units() -> bool:
    """Whether this CPU has AMX bf16 tiles (Intel Sapphire Rapids and later). There, oneDNN
    multiplies bf16 matrices ~8x faster than fp32 (2,348 vs 300 GFLOP/s measured on 2 cores at
    the encoder's 4,096 x 384 x 1,536); without them (AVX2 or AVX-512 only, e.g. AMD Zen 3) bf16
    is converted on the fly and no faster than fp32. Read from /proc/cpuinfo: Linux, where the
    workers run; False elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return "amx_bf16" in line.split()
    return False


def inference_dtype(device: torch.device, precision: str = "auto") -> torch.dtype:
    """The dtype a scorer keeps its weights in (no gradients, so nothing accumulates in bf16
    across steps). On CPU, "auto" is bf16 only with bf16 matrix units; CUDA keeps fp32 weights
    and runs bf16 under `autocast_context`, as training does. bf16 moves a served probability by
    a few thousandths (docs/LERC.md, "bf16 serving"); "fp32" gives the same numbers on every
    machine."""
    if precision not in SCORING_PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(SCORING_PRECISIONS)}, "
                         f"not {precision!r}")
    if device.type != "cpu" or precision == "fp32":
        return torch.float32
    if precision == "bf16" or cpu_has_bf16_matrix_units():
        return torch.bfloat16
    return torch.float32


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
