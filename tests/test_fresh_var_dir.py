"""A fresh QAJ_VAR_DIR works from the first command: the SQLite database's folder is made."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_var_dir_not_made_yet_opens_its_sqlite_database(tmp_path):
    """`QAJ_VAR_DIR=$PWD/var/tour manage.py migrate` in a folder not made yet failed with
    "unable to open database file" (SQLite makes the file, not its folder)."""
    var = tmp_path / "not" / "made" / "var"
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "QAJ_TEST_DB_NAME", "DJANGO_SETTINGS_MODULE")}
    env["QAJ_VAR_DIR"] = str(var)
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "from django.db import connection; connection.ensure_connection(); print('open')"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "open" in done.stdout
    assert (var / "qajudge.sqlite3").is_file()
