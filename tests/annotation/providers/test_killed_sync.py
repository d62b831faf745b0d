"""A sync process killed (SIGKILL) in the middle of provider calls, then run again — what a
Celery worker dying and its task being redelivered looks like to the database and MTurk:
no second approval, no second bonus, nothing lost."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from decimal import Decimal

import pytest
from django.db import connection

from annotation.models import (
    AssignmentStatus,
    ProviderCall,
    ProviderCallStatus,
    StageKind,
    StageStatus,
)
from annotation.services.review import stage_sync_and_review
from annotation.services.stages import stage_publish
from testing.factories import make_stage
from testing.workers_sim import gold_score, mturk_worker_submits
from tests.support.paths import REPO_ROOT, require_shared_database

pytestmark = [pytest.mark.mturk, pytest.mark.reliability, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

REPO = REPO_ROOT
SYNC_SCRIPT = """
import faulthandler, os, sys, django
faulthandler.dump_traceback_later(45, exit=True)  # a hung sync shows where it hangs
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
django.setup()
from worker.tasks.providers import stage_sync
stage_sync.run(int(sys.argv[1]))
"""


def _database_url() -> str:
    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings_dict['NAME']}"


def _start_sync(stage_id: int, server_url: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": _database_url(), "MTURK_ENDPOINT_URL": server_url,
           "MTURK_RETRY_BASE_SECONDS": "0.001", "AWS_ACCESS_KEY_ID": "AKIDTEST",
           "AWS_SECRET_ACCESS_KEY": "test", "QAJ_LOG_LEVEL": "WARNING"}
    return subprocess.Popen([sys.executable, "-c", SYNC_SCRIPT, str(stage_id)], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _kill_when_stalled(server, operation: str, stage_id: int) -> None:
    release = threading.Event()
    server.stalled.clear()
    server.stall_after[operation] = release
    process = _start_sync(stage_id, server.url)
    try:
        if not server.stalled.wait(60):
            if process.poll() is None:
                process.kill()
            out = process.communicate(timeout=10)[0]
            pytest.fail(f"the sync never reached {operation}: {out[-3000:]!r}")
        process.kill()  # SIGKILL while MTurk has done the call but not answered
        process.wait(timeout=30)
    finally:
        release.set()
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture(autouse=True)
def _shared_database():
    require_shared_database()


def test_sync_killed_during_approval_and_bonus_repeats_nothing(mturk_server, likert_study,
                                                               researcher, client):
    server, state = mturk_server, mturk_server.state
    project, _gold, _items = likert_study
    project.bonus_per_correct = Decimal("0.05")
    project.save()
    stage = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                       provider="mturk", settings={"max_workers": 2})
    stage_publish(stage=stage, user=researcher)
    hit = stage.hits.get()
    assignment_id = state.worker_accept(hit.external_id, "W1")
    assignment = mturk_worker_submits(client, stage=stage, hit_id=hit.external_id,
                                      worker_id="W1", assignment_id=assignment_id,
                                      answer_for=gold_score)
    state.worker_submit(assignment_id)

    # 1. Killed while ApproveAssignment's answer is on its way.
    _kill_when_stalled(server, "ApproveAssignment", stage.pk)
    assert state.assignments[assignment_id]["AssignmentStatus"] == "Approved"
    approve = ProviderCall.objects.get(operation="ApproveAssignment")
    assert approve.status == ProviderCallStatus.PENDING  # committed before the call
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED

    # 2. Redelivered: the sync finds the assignment approved on MTurk and confirms our pending
    #    call (no second ApproveAssignment); then it is killed during SendBonus.
    _kill_when_stalled(server, "SendBonus", stage.pk)
    assert len(state.bonuses) == 1
    bonus = ProviderCall.objects.get(operation="SendBonus")
    assert bonus.status == ProviderCallStatus.PENDING

    # 3. Redelivered again, to the end.
    sync, review = stage_sync_and_review(stage=stage)
    assert state.calls.count("ApproveAssignment") == 1
    assert [b["BonusAmount"] for b in state.bonuses] == ["0.50"]  # 10 correct × $0.05, once
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED
    assert assignment.bonus_paid == Decimal("0.50")
    approve.refresh_from_db()
    assert approve.status == ProviderCallStatus.SUCCEEDED
    assert approve.response == {"confirmed_by_sync": "approved"}
    bonus.refresh_from_db()
    assert bonus.status == ProviderCallStatus.SUCCEEDED and bonus.attempts == 2
    assert server.stats["requests:SendBonus"] == 2  # the repeat carried the same token
    # And once more: nothing new happens.
    stage_sync_and_review(stage=stage)
    assert state.calls.count("ApproveAssignment") == 1 and len(state.bonuses) == 1
