"""The researcher's admin at the scale of a real study: an action on "select all" of a whole
fleet runs a bounded number of queries, not a few per selected row (measured on the EVOUNA
import with 1,000 workers: blocking them all took 18.5 s and 8,932 queries, one
`worker_block` per worker; see bench/FINDINGS.md)."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Worker, WorkerBlock, WorkerStatus
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db

N_WORKERS = 15
MAX_QUERIES = 25  # the request's own (session, user, count, ...) plus a constant few writes


@pytest.fixture
def fleet():
    alice = make_user("alice")
    project = make_project(owner=alice)
    stage = make_stage(project)
    workers = []
    for _ in range(N_WORKERS):
        worker = make_worker()
        item = make_item(project)
        make_judgment(item=item, stage=stage, worker=worker,
                      assignment=make_assignment(stage, worker=worker, items=[item]))
        workers.append(worker)
    return {"alice": alice, "workers": workers}


def select_all(action: str, some_worker: Worker, **extra) -> dict:
    return {"action": action, "select_across": "1", "index": "0",
            "_selected_action": [some_worker.pk], **extra}


@pytest.mark.reliability
def test_researcher_blocks_and_unblocks_a_whole_fleet_in_constant_queries(
        client, fleet, django_assert_max_num_queries):
    alice, workers = fleet["alice"], fleet["workers"]
    client.force_login(alice)
    url = reverse("admin:annotation_worker_changelist")
    with django_assert_max_num_queries(MAX_QUERIES):
        response = client.post(url, select_all("block_workers", workers[0], reason="bots"))
    assert response.status_code == 302
    assert sorted(WorkerBlock.objects.filter(researcher=alice, reason="bots")
                  .values_list("worker_id", flat=True)) == sorted(w.pk for w in workers)
    assert not Worker.objects.filter(status=WorkerStatus.BLOCKED).exists()  # not global

    # Blocking again updates the reason of the one block each, never a second row.
    client.post(url, select_all("block_workers", workers[0], reason="bots, confirmed"))
    assert WorkerBlock.objects.filter(researcher=alice).count() == N_WORKERS
    assert set(WorkerBlock.objects.values_list("reason", flat=True)) == {"bots, confirmed"}

    with django_assert_max_num_queries(MAX_QUERIES):
        response = client.post(url, select_all("unblock_workers", workers[0]))
    assert response.status_code == 302
    assert not WorkerBlock.objects.exists()


@pytest.mark.reliability
def test_superuser_blocks_and_unblocks_a_whole_fleet_globally_in_constant_queries(
        client, fleet, django_assert_max_num_queries):
    client.force_login(make_user("root", superuser=True))
    url = reverse("admin:annotation_worker_changelist")
    with django_assert_max_num_queries(MAX_QUERIES):
        client.post(url, select_all("block_workers", fleet["workers"][0], reason="fraud"))
    assert Worker.objects.filter(status=WorkerStatus.BLOCKED,
                                 blocked_reason="fraud").count() == N_WORKERS
    with django_assert_max_num_queries(MAX_QUERIES):
        client.post(url, select_all("unblock_workers", fleet["workers"][0]))
    assert Worker.objects.filter(status=WorkerStatus.ACTIVE,
                                 blocked_reason="").count() == N_WORKERS
