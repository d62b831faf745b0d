"""Where the checkout and the shared real data are, and whether this is CI."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


IN_CI = os.environ.get("CI", "").lower() == "true"


def shared_data_path() -> Path:
    return Path(os.environ.get("QAJ_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def require_shared_database() -> None:
    """For tests whose threads, processes or live server must all see one database: in-memory
    SQLite is private to a connection, so they need a file database (QAJ_TEST_DB_NAME, as the
    test command sets) or PostgreSQL. Skipped elsewhere; a failure in CI, which never skips."""
    import pytest
    from django.db import connection

    if connection.vendor == "sqlite" and not os.environ.get("QAJ_TEST_DB_NAME"):
        (pytest.fail if IN_CI else pytest.skip)(
            "needs a file-based SQLite test database (QAJ_TEST_DB_NAME) or PostgreSQL")
