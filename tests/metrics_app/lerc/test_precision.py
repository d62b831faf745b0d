"""The precision a judge scores at (`device.inference_dtype`, QAJ_LERC_PRECISION): "auto" holds
the weights in bf16 only on a CPU with native bf16 instructions (AMX, AVX-512 BF16), where it
scores about 1.4-2x as fast; "fp32" is the same everywhere; bf16 scores stay within a small
distance of fp32's, and the calibrator is fitted at the precision the deployment serves at."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from metrics_app.lerc.config import TrainConfig
from metrics_app.lerc.device import cpu_has_native_bf16, inference_dtype
from tests.support.lerc import toy_examples
from tests.support.paths import REPO_ROOT

CPU = torch.device("cpu")


def test_auto_is_bf16_only_with_native_bf16_and_the_others_are_what_they_say():
    expected = torch.bfloat16 if cpu_has_native_bf16() else torch.float32
    assert inference_dtype(CPU, "auto") is expected
    assert inference_dtype(CPU, "fp32") is torch.float32
    assert inference_dtype(CPU, "bf16") is torch.bfloat16
    # CUDA keeps fp32 weights and autocasts (as training does).
    assert inference_dtype(torch.device("cuda"), "bf16") is torch.float32
    with pytest.raises(ValueError, match="precision must be one of auto, fp32, bf16"):
        inference_dtype(CPU, "half")
    with pytest.raises(ValueError, match="scoring_precision: one of auto, fp32, bf16"):
        TrainConfig.from_dict({"scoring_precision": "fp16"})


def test_the_cpu_flag_is_read_from_cpuinfo(tmp_path, monkeypatch):
    from pathlib import Path

    from metrics_app.lerc import device

    native = {"amx": "flags\t\t: fpu avx512f amx_bf16 amx_tile\n",
              "avx512_bf16": "flags\t\t: fpu avx2 avx512f avx512_bf16\n",
              "both": "flags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile\n"}
    without = {"avx512 alone": "flags\t\t: fpu avx2 avx512f avx512_vnni\n",
               "avx2": "flags\t\t: fpu avx2 fma\n", "no flags line": "processor\t: 0\n"}
    real_read = Path.read_text
    for name, text in {**native, **without}.items():
        monkeypatch.setattr(Path, "read_text", lambda self, *a, _t=text, **k: (
            _t if str(self) == "/proc/cpuinfo" else real_read(self, *a, **k)))
        device.cpu_has_native_bf16.cache_clear()
        assert device.cpu_has_native_bf16() is (name in native), name
    monkeypatch.undo()
    device.cpu_has_native_bf16.cache_clear()


def test_a_bf16_scorer_scores_close_to_fp32_and_keeps_the_served_rules(trained_model_dir):
    from metrics_app.lerc.inference import LercScorer

    examples = toy_examples(24)
    full = LercScorer(trained_model_dir, device="cpu", precision="fp32")
    half = LercScorer(trained_model_dir, device="cpu", precision="bf16")
    assert next(full.model.parameters()).dtype == torch.float32
    assert next(half.model.parameters()).dtype == torch.bfloat16
    a, b = full.score_details(examples), half.score_details(examples)
    assert any(x["raw"] is not None for x in a) and any(x["raw"] is None for x in a)
    for x, y in zip(a, b, strict=True):
        assert (x["raw"] is None) == (y["raw"] is None)
        if x["raw"] is None:  # the exact-match rule, no model
            assert y == x
        else:
            assert abs(x["score"] - y["score"]) < 0.05


def test_the_calibrator_is_fitted_at_the_deployments_precision(settings):
    from metrics_app.services.lerc.options import version_train_config

    class Version:  # the two fields version_train_config reads
        backbone = ""
        config = {"train": {"epochs": 1, "scoring_precision": "bf16"}}

    settings.QAJ_LERC_PRECISION = "fp32"
    assert version_train_config(Version()).scoring_precision == "fp32"
    settings.QAJ_LERC_PRECISION = "auto"
    assert version_train_config(Version()).scoring_precision == "auto"


def test_a_wrong_precision_setting_stops_the_process_with_its_name():
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings.dev",
             "QAJ_LERC_PRECISION": "fp16", "HOME": str(REPO_ROOT)},
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "QAJ_LERC_PRECISION must be auto, fp32 or bf16, not 'fp16'" in result.stderr


def test_training_autocasts_to_bf16_on_cpu_only_with_native_bf16(monkeypatch):
    from metrics_app.lerc import device

    for has_units in (True, False):
        monkeypatch.setattr(device, "cpu_has_native_bf16", lambda _h=has_units: _h)
        with device.training_autocast(CPU, True):
            assert torch.is_autocast_enabled("cpu") is has_units
            product = torch.ones(2, 2) @ torch.ones(2, 2)
            assert product.dtype is (torch.bfloat16 if has_units else torch.float32)
        with device.training_autocast(CPU, False):  # TrainConfig(bf16=False): never
            assert not torch.is_autocast_enabled("cpu")
        # Scoring never autocasts on CPU: a bf16 scorer holds bf16 weights instead.
        with device.autocast_context(CPU, True):
            assert not torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("name, message", [
    ("banana", "device: 'banana' is not a torch device"),
    ("cuda", "device: 'cuda', but this machine has no CUDA device"),
    ("cuda:3", "device: 'cuda:3', but this machine has no CUDA device"),
])
def test_a_device_this_machine_lacks_is_refused_naming_the_option(monkeypatch, name, message):
    """A version asking for CUDA trained by a worker without it (or a typo) fails with the
    option named, not with torch's assertion from inside the first step; "auto" and "cpu"
    always run."""
    from metrics_app.lerc import device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=message):
        device.pick_device(name)
    assert device.pick_device("auto") == CPU and device.pick_device("cpu") == CPU


def test_a_cuda_index_beyond_the_machines_devices_is_refused(monkeypatch):
    from metrics_app.lerc import device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert device.pick_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ValueError, match=r"has 1 CUDA device\(s\), cuda:0 to cuda:0"):
        device.pick_device("cuda:3")
