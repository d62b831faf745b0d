"""Under CI=true, tests that need a shared database fail instead of skipping when they do not
get one (a skipped race or kill test in CI would look like a pass)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.reliability

SHARED_DATABASE_TESTS = ["tests/annotation/services/assignments/test_races.py", "tests/annotation/providers/test_killed_sync.py"]
MESSAGE = "needs a file-based SQLite test database"


def _run(*, ci: bool) -> subprocess.CompletedProcess:
    # In-memory SQLite: no QAJ_TEST_DB_NAME, no DATABASE_URL.
    env = {k: v for k, v in os.environ.items()
           if k not in ("QAJ_TEST_DB_NAME", "DATABASE_URL", "CI")}
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", *SHARED_DATABASE_TESTS, "-q", "-rs",
         "-p", "no:cacheprovider"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_shared_database_tests_fail_instead_of_skipping_in_ci():
    result = _run(ci=True)
    assert result.returncode != 0, result.stdout
    assert f"Failed: {MESSAGE}" in result.stdout
    assert "skipped" not in result.stdout


def test_shared_database_tests_skip_outside_ci():
    result = _run(ci=False)
    assert result.returncode == 0, result.stdout
    assert "skipped" in result.stdout and MESSAGE in result.stdout
