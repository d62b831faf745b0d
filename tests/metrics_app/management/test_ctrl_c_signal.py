"""A real Ctrl-C (SIGINT) to `score_project` as a researcher runs it, in its own process:
exit status 1, one line on stderr saying what was kept, no traceback, and a rerun that scores
only the rest."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.support.imports import LIKERT_ROW, write_jsonl
from tests.support.paths import REPO_ROOT

pytestmark = [pytest.mark.reliability, pytest.mark.slow, pytest.mark.integration]

N_ITEMS = 3000


def _stored_scores(database) -> int:
    try:
        with sqlite3.connect(database, timeout=5) as connection:
            return connection.execute("SELECT count(*) FROM metrics_app_metricscore").fetchone()[0]
    except sqlite3.OperationalError:  # locked by a write at that instant
        return 0


def test_sigint_to_score_project_keeps_the_stored_batches(tmp_path):
    database = tmp_path / "cli.sqlite3"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.dev",
           "DATABASE_URL": f"sqlite:///{database}", "QAJ_VAR_DIR": str(tmp_path / "var")}

    def manage(*args, **kwargs):
        return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=300, **kwargs)

    assert manage("migrate", "-v", "0").returncode == 0
    rows = [{**LIKERT_ROW, "external_id": f"i{n}", "judgments": [],
             "content": {**LIKERT_ROW["content"], "candidate": f"on a mat number {n}"}}
            for n in range(N_ITEMS)]
    imported = manage("import_data", "jsonl", str(write_jsonl(tmp_path / "items.jsonl", rows)),
                      "--project", "study", "--create", "--kind", "likert", "--no-progress",
                      "--no-report")
    assert imported.returncode == 0, imported.stderr
    scoring = subprocess.Popen(
        [sys.executable, "manage.py", "score_project", "study", "--metric", "bleu1,rougeL",
         "--batch-size", "8", "--no-progress"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while _stored_scores(database) == 0:
        assert scoring.poll() is None and time.monotonic() < deadline, scoring.stderr.read()
        time.sleep(0.05)
    scoring.send_signal(signal.SIGINT)  # Ctrl-C in the terminal
    _out, err = scoring.communicate(timeout=60)
    assert scoring.returncode == 1
    assert err.strip() == ("CommandError: interrupted (Ctrl-C): the scores stored before the "
                           "stop are kept (they are stored batch by batch) and this run's "
                           "scoring job is marked failed; run the same command again to score "
                           "the rest")
    kept = _stored_scores(database)
    assert 0 < kept < 2 * N_ITEMS
    rerun = manage("score_project", "study", "--metric", "bleu1,rougeL", "--no-progress")
    assert rerun.returncode == 0, rerun.stderr
    assert _stored_scores(database) == 2 * N_ITEMS
    done = [line for line in rerun.stdout.splitlines() if " already stored" in line]
    assert sum(int(line.split(", ")[1].split()[0]) for line in done) == kept
