"""Data safety: the documented backup and restore (docs/RELIABILITY.md) brings back every
project, item and judgment unchanged. PostgreSQL: pg_dump -Fc, then pg_restore into a fresh
throwaway database. SQLite: the online backup API (what `sqlite3 db ".backup file"` does)."""
from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import uuid

import pytest
from django.db import connection

from annotation.models import TaskKind
from annotation.services.assignments import assignment_start, assignment_submit
from testing.factories import make_worker
from tests.support.paths import IN_CI
from tests.support.tasks import make_task

pytestmark = [pytest.mark.reliability, pytest.mark.django_db(transaction=True)]

FINGERPRINT_SQL = [
    "SELECT id, slug, kind FROM annotation_project ORDER BY id",
    "SELECT id, project_id, external_id, CAST(content AS TEXT) FROM annotation_item ORDER BY id",
    "SELECT id, item_id, worker_id, stage_id, score, choice, justification "
    "FROM annotation_judgment ORDER BY id",
]


def _fingerprint(cursor) -> tuple[int, str]:
    digest, rows = hashlib.sha256(), 0
    for sql in FINGERPRINT_SQL:
        cursor.execute(sql)
        for row in cursor.fetchall():
            rows += 1
            digest.update(repr(tuple(str(v) for v in row)).encode())
    return rows, digest.hexdigest()


def _some_judgments():
    project, stage, items = make_task(TaskKind.LIKERT, n_items=3)
    for _ in range(2):
        assignment = assignment_start(stage=stage, worker=make_worker())
        assignment_submit(assignment=assignment, answers=[
            {"item": item.pk, "score": 4, "justification": "naïve <b>ok</b> ✓"}
            for item in assignment.items.all()])


def test_backup_and_restore_bring_back_every_judgment(tmp_path):
    _some_judgments()
    with connection.cursor() as cursor:
        before = _fingerprint(cursor)
    assert before[0] >= 1 + 3 + 6

    if connection.vendor == "sqlite":
        name = connection.settings_dict["NAME"]
        if name == ":memory:" or "mode=memory" in str(name):
            if IN_CI:
                pytest.fail("CI runs SQLite with a file database (QAJ_TEST_DB_NAME)")
            pytest.skip("needs a file-based SQLite test database (QAJ_TEST_DB_NAME)")
        backup = tmp_path / "backup.sqlite3"
        with sqlite3.connect(name) as source, sqlite3.connect(backup) as target:
            source.backup(target)
        with sqlite3.connect(backup) as restored:
            assert _fingerprint(restored.cursor()) == before
        return

    for tool in ("pg_dump", "pg_restore", "createdb", "dropdb"):
        assert shutil.which(tool), f"{tool} is needed for the documented backup"
    settings = connection.settings_dict
    env = {**os.environ, "PGHOST": settings["HOST"] or "127.0.0.1",
           "PGPORT": str(settings["PORT"] or 5432), "PGUSER": settings["USER"] or "postgres",
           "PGPASSWORD": settings["PASSWORD"] or ""}
    dump = tmp_path / "qajudge.dump"
    subprocess.run(["pg_dump", "-Fc", "--no-owner", "-f", str(dump), settings["NAME"]],
                   env=env, check=True, timeout=120)
    throwaway = f"{settings['NAME']}_restore_{uuid.uuid4().hex[:8]}"
    subprocess.run(["createdb", throwaway], env=env, check=True, timeout=60)
    try:
        subprocess.run(["pg_restore", "--no-owner", "--exit-on-error", "-d", throwaway,
                        str(dump)], env=env, check=True, timeout=120)
        import psycopg2

        restored = psycopg2.connect(**{**connection.get_connection_params(),
                                       "dbname": throwaway})
        try:
            assert _fingerprint(restored.cursor()) == before
        finally:
            restored.close()
    finally:
        subprocess.run(["dropdb", "--if-exists", throwaway], env=env, timeout=60)
