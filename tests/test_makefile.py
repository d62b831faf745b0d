"""`make run` takes the port and host of the demo's web server from the command line."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support.paths import REPO_ROOT


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_passes_port_and_host_to_rundemo():
    def dry_run(*variables: str) -> str:
        # -n prints the recipe without running it; the venv target is taken as up to date.
        return subprocess.run(["make", "-n", "-o", ".venv/.installed", "-o", "venv", "run",
                               *variables], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=True).stdout

    assert "rundemo --port 8001" in " ".join(dry_run("PORT=8001").split())
    assert "rundemo --host 0.0.0.0 --port 9000" in " ".join(
        dry_run("PORT=9000", "HOST=0.0.0.0").split())
    plain = " ".join(dry_run().split())
    assert "rundemo" in plain and "--port" not in plain
