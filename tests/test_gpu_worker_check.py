"""scripts/gpu_worker_check.py (the end-to-end check of a GPU machine's Celery `gpu` worker,
docs/DEPLOYMENT.md) refuses a data folder without both EVOUNA files before it creates anything,
naming the missing file. The full check trains a real version (minutes on CPU), so it runs on
GPU machines, not in the suite."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_folder_without_the_evouna_files_is_refused_naming_the_file(tmp_path):
    (tmp_path / "evouna_nq.json").write_text("{}")
    var = tmp_path / "var"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_worker_check.py"), "--data", str(tmp_path),
         "--var", str(var)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "evouna_tq.json is missing" in done.stderr
    assert not var.exists()


def test_options_train_lerc_would_refuse_are_refused_before_anything_is_created(tmp_path):
    for name in ("evouna_nq.json", "evouna_tq.json"):
        (tmp_path / name).write_text("{}")
    for options, said in (("{epochs: 2}", "not JSON"), ('{"epochs": 0}', "epochs"),
                          ('{"epoch": 2}', "unknown training options: epoch"),
                          ("[2]", "an object of TrainConfig fields")):
        var = tmp_path / "var"
        done = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "gpu_worker_check.py"), "--data",
             str(tmp_path), "--var", str(var), "--options", options],
            capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, options
        assert "--options: " in done.stderr and said in done.stderr, (options, done.stderr)
        assert not var.exists()
