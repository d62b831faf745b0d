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
    """The device `TrainConfig.device` (or a scorer's) names; "auto": CUDA when this machine has
    it, else the CPU. ValueError naming the option when the name is no torch device, or names a
    CUDA device this machine does not have (a version queued for a GPU worker and run by a CPU
    one), rather than torch's own assertion from deep inside the first step."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device: {name!r} is not a torch device (\"auto\", \"cpu\", "
                         f"\"cuda\", \"cuda:1\" ...): {exc}") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device: {name!r}, but this machine has no CUDA device (run it on "
                             "a GPU worker, queue gpu, or use device \"auto\" or \"cpu\")")
        if device.index is not None and device.index >= count:
            raise ValueError(f"device: {name!r}, but this machine has {count} CUDA "
                             f"device(s), cuda:0 to cuda:{count - 1}")
    return device


def autocast_context(device: torch.device, bf16: bool):
    """bf16 autocast for scoring on CUDA (when the GPU supports it); full precision on CPU,
    where a scorer that wants bf16 holds bf16 weights instead (`inference_dtype`)."""
    enabled = bool(bf16 and device.type == "cuda" and torch.cuda.is_bf16_supported())
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def training_autocast(device: torch.device, bf16: bool):
    """bf16 autocast for training steps: on CUDA as `autocast_context`, and on a CPU with native
    bf16 instructions (`cpu_has_native_bf16`), where a MiniLM step of 32 inputs took 1.65 s
    instead of 2.45 s (AMX) and 1.23 s instead of 1.91 s (AVX-512 BF16); the weights, gradients
    and optimizer stay fp32. Elsewhere on CPU, fp32."""
    enabled = bool(bf16 and ((device.type == "cuda" and torch.cuda.is_bf16_supported())
                             or (device.type == "cpu" and cpu_has_native_bf16())))
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


# The /proc/cpuinfo flags of instructions that multiply bf16 matrices natively.
NATIVE_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively: AMX tiles (Intel Sapphire Rapids and later)
    or AVX-512 BF16 dot products (AMD Zen 4 and later, Intel Cooper Lake). On 2 cores at the
    encoder's 4,096 x 384 x 1,536, oneDNN ran bf16 at 2,348 GFLOP/s against fp32's 300 (AMX)
    and 403 against 156 (AVX-512 BF16, a Zen 4 EPYC); without either (AVX2, AVX-512 alone)
    bf16 is converted on the fly and no faster than fp32. Read from /proc/cpuinfo: Linux, where
    the workers run; False elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return not NATIVE_BF16_FLAGS.isdisjoint(line.split())
    return False


def inference_dtype(device: torch.device, precision: str = "auto") -> torch.dtype:
    """The dtype a scorer keeps its weights in (no gradients, so nothing accumulates in bf16
    across steps). On CPU, "auto" is bf16 only with native bf16 instructions; CUDA keeps fp32
    weights and runs bf16 under `autocast_context`, as training does. bf16 moves a served probability by
    a few thousandths (docs/LERC.md, "bf16 serving"); "fp32" gives the same numbers on every
    machine."""
    if precision not in SCORING_PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(SCORING_PRECISIONS)}, "
                         f"not {precision!r}")
    if device.type != "cpu" or precision == "fp32":
        return torch.float32
    if precision == "bf16" or cpu_has_native_bf16():
        return torch.bfloat16
    return torch.float32


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
