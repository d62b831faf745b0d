"""One provider sync of a stage at a time, whichever door starts it (the beat's task, a
redelivered message, the admin's "Sync now"): two at once paid a STARC per-correct bonus twice
through Prolific (each set up its own bonus). The lease is `StageSync` (core.leases)."""
from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connections
from django.utils import timezone

from annotation.models import AssignmentStatus, StageSync, TaskKind
from annotation.providers import CrowdProvider, override_provider
from annotation.services.review import SyncAlreadyRunning, stage_sync_and_review
from core.leases import owner_id
from testing.factories import make_assignment, make_item, make_judgment, make_project, make_stage
from tests.support.paths import require_shared_database

pytestmark = [pytest.mark.reliability, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _shared_database():
    require_shared_database()


class SlowBonusProvider(CrowdProvider):
    """Approves at once; a bonus waits until the test lets it go (a slow provider call)."""

    name = "inhouse"

    def __init__(self):
        self.inside = threading.Event()
        self.go = threading.Event()
        self.bonuses = []

    def publish_stage(self, *, stage):
        return iter(())

    def list_submissions(self, *, stage):
        return iter(())

    def approve(self, *, assignment, feedback=""):
        return {}

    def reject(self, *, assignment, reason):
        return {}

    def block(self, *, worker, reason):
        return {}

    def notify(self, *, workers, subject, message):
        return {}

    def bonus(self, *, assignment, amount, reason, token):
        self.inside.set()
        assert self.go.wait(timeout=30)
        self.bonuses.append((assignment.pk, str(amount)))
        return {}


def _starc_submission():
    project = make_project(TaskKind.MC, bonus_per_correct=Decimal("0.50"))
    stage = make_stage(project)
    items = [make_item(project, gold={"choice": "A"}) for _ in range(3)]
    assignment = make_assignment(stage, items=items, status=AssignmentStatus.SUBMITTED)
    for item in items:
        make_judgment(item=item, stage=stage, worker=assignment.worker, assignment=assignment,
                      choice="A", time_spent_ms=9000)
    assignment.submitted_at = assignment.started_at
    assignment.save()
    return stage, assignment


def test_a_second_sync_while_one_runs_does_nothing_and_the_bonus_is_paid_once():
    stage, assignment = _starc_submission()
    provider = SlowBonusProvider()
    results = {}

    def first():
        try:
            results["first"] = stage_sync_and_review(stage=stage)[1]
        finally:
            connections.close_all()

    with override_provider("inhouse", provider):
        thread = threading.Thread(target=first)
        thread.start()
        assert provider.inside.wait(timeout=30)  # the first run is paying
        with pytest.raises(SyncAlreadyRunning, match="running in another worker"):
            stage_sync_and_review(stage=stage)
        provider.go.set()
        thread.join(timeout=60)
        assert results["first"].bonuses == 1
        assert provider.bonuses == [(assignment.pk, "1.50")]
        # The lease is free again: the next run works (and has nothing left to pay).
        again = stage_sync_and_review(stage=stage)[1]
    assert again.bonuses == 0 and provider.bonuses == [(assignment.pk, "1.50")]
    lease = StageSync.objects.get(stage=stage)
    assert lease.status == StageSync.IDLE and lease.finished_at is not None


def test_a_lease_held_by_a_lost_worker_is_taken_over_once_stale(settings):
    stage, _assignment = _starc_submission()
    settings.QAJ_JOB_STALE_AFTER_SECONDS = 60
    provider = SlowBonusProvider()
    provider.go.set()
    now = timezone.now()
    StageSync.objects.create(stage=stage, status=StageSync.RUNNING, lease=owner_id(),
                             started_at=now, heartbeat_at=now)
    with override_provider("inhouse", provider):
        with pytest.raises(SyncAlreadyRunning):
            stage_sync_and_review(stage=stage)
        assert provider.bonuses == []
        StageSync.objects.filter(stage=stage).update(heartbeat_at=now - timedelta(minutes=5))
        review = stage_sync_and_review(stage=stage)[1]
    assert review.bonuses == 1 and len(provider.bonuses) == 1


def test_a_failed_sync_releases_the_lease_and_says_why():
    stage, _assignment = _starc_submission()

    class Broken(SlowBonusProvider):
        def list_submissions(self, *, stage):
            raise ConnectionError("provider down")

    with override_provider("inhouse", Broken()):
        with pytest.raises(ConnectionError):
            stage_sync_and_review(stage=stage)
    lease = StageSync.objects.get(stage=stage)
    assert lease.status == StageSync.FAILED and "provider down" in lease.error
    provider = SlowBonusProvider()
    provider.go.set()
    with override_provider("inhouse", provider):
        assert stage_sync_and_review(stage=stage)[1].bonuses == 1


def test_a_lease_of_a_killed_process_on_this_host_is_taken_over_at_once():
    """A worker killed mid-sync leaves a fresh heartbeat; its redelivered task on the same host
    sees the holder's process is gone and goes on without waiting for the stale limit."""
    import socket
    import subprocess
    import sys

    stage, _assignment = _starc_submission()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    now = timezone.now()
    StageSync.objects.create(stage=stage, status=StageSync.RUNNING,
                             lease=f"{socket.gethostname()}:{gone.pid}:dead0000",
                             started_at=now, heartbeat_at=now)
    provider = SlowBonusProvider()
    provider.go.set()
    with override_provider("inhouse", provider):
        assert stage_sync_and_review(stage=stage)[1].bonuses == 1
