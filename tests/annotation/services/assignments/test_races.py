"""Races: many workers asking for items at once never exceed an item's redundancy nor get an
item twice; concurrent double submits (real concurrent HTTP requests) create one set of
judgments. Meaningful on PostgreSQL (row locks with SKIP LOCKED); on SQLite the same code
serialises writers and the tests check that it stays correct."""
from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection, connections
from django.urls import reverse

from annotation.models import AssignmentItem, Judgment, TaskKind
from annotation.services.access import assignment_token_make
from annotation.services.assignments import NoItemsAvailable, assignment_start
from testing.factories import make_worker
from tests.support.paths import require_shared_database
from tests.support.tasks import make_task

pytestmark = [pytest.mark.reliability, pytest.mark.django_db(transaction=True)]

N_WORKERS = 8


@pytest.fixture(autouse=True)
def _shared_database():
    # Threads and the live server need one database they all see; in-memory SQLite is private.
    require_shared_database()


def _race(fn, n: int) -> list:
    barrier = threading.Barrier(n)

    def run(i):
        try:
            barrier.wait(timeout=30)
            return fn(i)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def test_workers_racing_for_the_last_slots_never_overshoot():
    # 6 items wanting 2 judgments each = 12 slots; 8 workers want 3 items each = 24 requests.
    project, stage, items = make_task(TaskKind.AB, n_items=6, items_per_hit=3,
                                      redundancy={"default": 2})
    workers = [make_worker() for _ in range(N_WORKERS)]

    def start(i):
        try:
            return [item.pk for item in assignment_start(stage=stage, worker=workers[i]).items.all()]
        except NoItemsAvailable:
            return []

    results = _race(start, N_WORKERS)
    held = Counter(AssignmentItem.objects.filter(assignment__stage=stage)
                   .values_list("item_id", flat=True))
    assert max(held.values()) <= 2, held
    for got in results:
        assert len(got) == len(set(got))  # never the same item twice in one assignment
    if connection.vendor == "postgresql":
        # Skip-locked allocators still fill every slot eventually: ask again one by one.
        for worker in workers:
            try:
                assignment_start(stage=stage, worker=worker)
            except NoItemsAvailable:
                pass
    per_worker = Counter(AssignmentItem.objects.filter(assignment__stage=stage)
                         .values_list("assignment__worker_id", "item_id"))
    assert max(per_worker.values()) == 1


def test_concurrent_double_submits_over_http_store_one_set_of_judgments(live_server):
    project, stage, items = make_task(TaskKind.LIKERT, n_items=3)
    assignment = assignment_start(stage=stage, worker=make_worker())
    token = assignment_token_make(assignment=assignment)
    url = live_server.url + reverse("annotation:task-submit")
    body = {"answers": [{"item": item.pk, "score": 2} for item in items]}

    def submit(_i):
        response = httpx.post(url, json=body, headers={"X-Assignment-Token": token}, timeout=60)
        return response.status_code, response.json()

    results = _race(submit, 6)
    assert all(status == 200 and data["ok"] for status, data in results), results
    assert Judgment.objects.filter(assignment=assignment).count() == 3
    assert Judgment.objects.count() == 3


def test_concurrent_page_requests_never_overshoot_redundancy(live_server):
    from annotation.services.access import inhouse_link_create

    project, stage, items = make_task(TaskKind.LIKERT, n_items=6, items_per_hit=3,
                                      redundancy={"default": 1}, group="")
    paths = [inhouse_link_create(worker=make_worker(), project=project)[1]
             for _ in range(N_WORKERS)]

    def open_page(i):
        return httpx.get(live_server.url + paths[i], timeout=60).status_code

    statuses = _race(open_page, N_WORKERS)
    assert set(statuses) <= {200}, statuses  # a task page, or the "nothing more" page
    held = Counter(AssignmentItem.objects.filter(assignment__stage=stage)
                   .values_list("item_id", flat=True))
    assert max(held.values()) == 1, held
    assert sum(held.values()) <= len(items)


def test_one_worker_opening_two_stages_at_once_never_gets_a_paragraph_twice(monkeypatch):
    """The STARC paragraph rule under a race: the same participant starts assignments in two
    stages of one project at the same moment (two tabs, two Prolific studies); the worker's row
    lock makes the second allocation see the first one's paragraphs."""
    from annotation.models import ExperimentMode, StageStatus
    from testing.factories import make_item, make_stage

    project, first, _ = make_task(TaskKind.MC, n_items=0, mode=ExperimentMode.QA,
                                  items_per_hit=4, redundancy={"default": 2})
    items = {(p, q, level): make_item(project, text_level=level, metadata={
        "article": 1, "paragraph": p, "question": q})
        for p in range(4) for q in (1, 2) for level in ("Ele", "Int", "Adv")}
    # Two stages with different items (question 1, question 2) of the same four paragraphs.
    first.items.set([item for (_p, q, _l), item in items.items() if q == 1])
    second = make_stage(project, status=StageStatus.PUBLISHED)
    second.items.set([item for (_p, q, _l), item in items.items() if q == 2])
    worker = make_worker()
    from annotation.services.assignments import design

    read = design.units_seen

    def slow_read(**kwargs):  # both allocations overlap after reading what the worker read
        seen = read(**kwargs)
        time.sleep(0.5)
        return seen

    monkeypatch.setattr(design, "units_seen", slow_read)
    stages = [first, second]

    def start(i):
        try:
            return list(assignment_start(stage=stages[i], worker=worker).items.all())
        except NoItemsAvailable:
            return []

    got = [item for items in _race(start, 2) for item in items]
    paragraphs = Counter(item.metadata["paragraph"] for item in got)
    assert paragraphs and max(paragraphs.values()) == 1, paragraphs
    assert sum(paragraphs.values()) == 4  # between them, each paragraph once


def test_one_worker_opening_a_stage_in_two_tabs_at_once_gets_one_page(monkeypatch):
    """Two tabs (a restored session, a double click on the link) opening the same in-house
    stage at the same moment: both read that the annotator holds no page, and each made one,
    with the same practice item (items nobody else's allocation locks). The first submit
    stored it; the other page, which the link then opened again and again, could never be
    submitted ("already judged by you in this stage"). The worker's row lock, taken before
    the unfinished page is looked for, makes the second request find the first one's page."""
    from testing.factories import make_item

    project, stage, items = make_task(TaskKind.AB, n_items=12, items_per_hit=2,
                                      redundancy={"default": 1})
    make_item(project, is_practice=True, gold=items[0].gold)
    worker = make_worker()
    from annotation.services.assignments import picking

    pick = picking.items_pick_next

    def slow_pick(**kwargs):  # both requests overlap after looking for an unfinished page
        time.sleep(0.5)
        return pick(**kwargs)

    monkeypatch.setattr("annotation.services.assignments.lifecycle.items_pick_next", slow_pick)

    def start(_i):
        try:
            return assignment_start(stage=stage, worker=worker).pk
        except NoItemsAvailable:  # "Nothing more to do" with ten items left: wrong too
            return None

    pages = _race(start, 2)
    assert pages[0] == pages[1], pages
    held = Counter(AssignmentItem.objects.filter(assignment__worker=worker)
                   .values_list("item_id", flat=True))
    assert max(held.values()) == 1, held
