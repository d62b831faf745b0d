"""Two imports of the same file at once — Confirm clicked twice in the admin, `import_data` run
while the browser import runs, two projects importing data by the same annotators — end as if
they had run one after the other: one creates, the other finds everything there (or, on SQLite,
is told the database is busy). Never a unique-constraint error (a 500 in the admin), never a
row twice."""
from __future__ import annotations

import json
import threading
import traceback

import pytest
from django.db import connection, connections

from annotation.models import Item, Judgment, Project, Worker
from annotation.services.import_files import ImportRefused, import_file
from core.db_busy import BUSY_MESSAGE
from tests.support.imports import LIKERT_ROW, write_jsonl
from tests.support.paths import require_shared_database

pytestmark = [pytest.mark.reliability, pytest.mark.django_db(transaction=True)]

N_ITEMS = 4000  # enough rows that the two transactions overlap


@pytest.fixture(autouse=True)
def _shared_database():
    require_shared_database()


def _file(tmp_path):
    rows = []
    for number in range(N_ITEMS):
        row = json.loads(json.dumps(LIKERT_ROW))
        row["external_id"] = f"q{number}"
        row["judgments"] = [{"worker": "shared-annotator-1", "score": 4},
                            {"worker": "shared-annotator-2", "score": 5}]
        rows.append(row)
    return write_jsonl(tmp_path / "items.jsonl", rows)


def _race(path, slugs: list[str]) -> list[tuple[str, str]]:
    barrier = threading.Barrier(len(slugs))
    results: list[tuple[str, str]] = []

    def run(slug: str) -> None:
        try:
            project = Project.objects.get(slug=slug)
            barrier.wait()
            outcome = import_file(format_name="jsonl", path=path, project=project)
            results.append(("imported", outcome.summary.as_text()))
        except ImportRefused as exc:
            results.append(("refused", str(exc)))
        except Exception as exc:  # noqa: BLE001 - the point: nothing else may escape
            results.append(("crashed", "".join(traceback.format_exception_only(exc))))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(slug,)) for slug in slugs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _acceptable(results, *, both_import: bool) -> None:
    assert not [r for r in results if r[0] == "crashed"], results
    for status, message in results:
        if status == "refused":  # SQLite: one writer at a time
            assert connection.vendor == "sqlite" and BUSY_MESSAGE in message, results
    if connection.vendor == "postgresql":
        assert [r[0] for r in results] == ["imported", "imported"], results
        if not both_import:
            assert sum("nothing new" in r[1] for r in results) == 1, results


def test_the_same_file_twice_at_once_into_one_project(tmp_path):
    Project.objects.create(slug="twice", title="twice", kind="likert")
    results = _race(_file(tmp_path), ["twice", "twice"])
    _acceptable(results, both_import=False)
    assert Item.objects.filter(project__slug="twice").count() == N_ITEMS
    assert Judgment.objects.filter(item__project__slug="twice").count() == 2 * N_ITEMS


def test_two_projects_at_once_with_the_same_new_annotators(tmp_path):
    for slug in ("left", "right"):
        Project.objects.create(slug=slug, title=slug, kind="likert")
    results = _race(_file(tmp_path), ["left", "right"])
    _acceptable(results, both_import=True)
    assert set(Worker.objects.values_list("external_id", flat=True)) == {
        "shared-annotator-1", "shared-annotator-2"}
    imported = [slug for slug in ("left", "right")
                if Item.objects.filter(project__slug=slug).exists()]
    for slug in imported:
        assert Judgment.objects.filter(item__project__slug=slug).count() == 2 * N_ITEMS
