"""The same verdict file imported twice at once (a double click on the judges page's upload,
an API client retrying a request that timed out): one import stores it, the other finds it
stored and answers `unchanged`, as it does when the file comes again later. Meaningful on
PostgreSQL (row locks); on SQLite writers queue for the database and the test checks that
stays correct."""
from __future__ import annotations

import json
import threading
import traceback

import pytest
from django.db import connections

from annotation.models import TaskKind
from metrics_app.models import JudgeVerdict
from metrics_app.services.judges import imports
from testing.factories import make_item, make_project
from tests.support.paths import require_shared_database

pytestmark = [pytest.mark.reliability, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _shared_database():
    require_shared_database()


def test_the_same_file_imported_twice_at_once_is_stored_once_and_neither_fails(
        tmp_path, monkeypatch):
    # The judge version exists already (its verdicts on another project of the study).
    earlier, project = make_project(TaskKind.LIKERT), make_project(TaskKind.LIKERT)
    for n in range(5):
        make_item(earlier, external_id=f"i{n}")
        make_item(project, external_id=f"i{n}")
    path = tmp_path / "verdicts.jsonl"
    path.write_text("\n".join(json.dumps({"item_id": f"i{n}", "verdict": "correct"})
                              for n in range(5)), encoding="utf-8")
    imports.verdicts_import(project=earlier, path=path, judge="twice", version="1")
    real_create = imports.judge_version_create
    created = threading.Barrier(2)

    def slow_create(**kwargs):
        # Both imports past the version's creation before either reads what is stored, when
        # nothing makes them take turns (a second that waits for the first never meets it).
        found = real_create(**kwargs)
        try:
            created.wait(timeout=3)
        except threading.BrokenBarrierError:
            pass
        return found

    monkeypatch.setattr(imports, "judge_version_create", slow_create)
    barrier = threading.Barrier(2)
    results, errors = [], {}

    def run(name):
        try:
            barrier.wait(timeout=30)
            results.append(imports.verdicts_import(project=project, path=path, judge="twice",
                                                   version="1"))
        except Exception:  # noqa: BLE001 - reported to the test, which fails on any
            errors[name] = traceback.format_exc()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(name,)) for name in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert sorted((r["imported"], r["unchanged"]) for r in results) == [(0, 5), (5, 0)]
    assert JudgeVerdict.objects.filter(item__project=project).count() == 5
