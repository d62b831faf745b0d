"""A redelivered training task (reject-on-worker-lost, visibility timeout) for a version in
training: resume when its worker on this host is dead, retry later when another host holds
it, do nothing when its worker here is alive."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from django.utils import timezone

from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import (
    TrainingElsewhere,
    model_version_create,
    model_version_train,
)
from metrics_app.services.lerc import training as lerc_training
from tests.support.lerc import likert_project_from_toy

pytestmark = pytest.mark.django_db


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def mark_training(version, worker: str) -> None:
    ModelVersion.objects.filter(pk=version.pk).update(
        status=ModelStatus.TRAINING, started_at=timezone.now(), heartbeat_at=timezone.now(),
        lease=worker, progress={"phase": "train"})


def test_killed_pool_child_on_this_host_resumes_at_once_from_its_checkpoint(
        lerc_settings, monkeypatch):
    project, _ = likert_project_from_toy(6)
    version = model_version_create(projects=[project], train_options={"epochs": 4})
    real_call = lerc_training._ProgressReporter.__call__

    def killed_in_epoch_three(self, info, force=False):
        if info.get("epoch") == 3:
            raise KeyboardInterrupt("pool child killed")  # not an Exception: no cleanup runs
        return real_call(self, info, force)

    monkeypatch.setattr(lerc_training._ProgressReporter, "__call__", killed_in_epoch_three)
    with pytest.raises(KeyboardInterrupt):
        model_version_train(model_version=version)
    monkeypatch.setattr(lerc_training._ProgressReporter, "__call__", real_call)
    # The heartbeat is seconds old, but its process is gone.
    mark_training(version, f"{socket.gethostname()}:{dead_pid()}")

    version = model_version_train(model_version=version)
    assert version.status == ModelStatus.PROMOTED, version.error
    assert version.metrics["training"]["resumed_from_epoch"] == 2
    assert version.events.filter(event="resumed", detail__contains="is gone").exists()


def test_fresh_heartbeat_on_another_host_asks_for_a_retry(lerc_settings):
    project, _ = likert_project_from_toy(6)
    version = model_version_create(projects=[project])
    mark_training(version, "gpu-other-machine:4242")
    with pytest.raises(TrainingElsewhere) as raised:
        model_version_train(model_version=version)
    # Look again about when the heartbeat could be stale (QAJ_JOB_STALE_AFTER_SECONDS).
    stale_after = lerc_settings.QAJ_JOB_STALE_AFTER_SECONDS
    assert stale_after - 60 <= raised.value.countdown <= stale_after + 120
    version.refresh_from_db()
    assert version.status == ModelStatus.TRAINING
    assert not version.events.filter(event="resumed").exists()


def test_live_worker_on_this_host_is_left_alone(lerc_settings):
    project, _ = likert_project_from_toy(6)
    version = model_version_create(projects=[project])
    mark_training(version, f"{socket.gethostname()}:{os.getppid()}")
    assert model_version_train(model_version=version).status == ModelStatus.TRAINING
    assert not version.events.filter(event="resumed").exists()


def test_train_task_retries_instead_of_acking(lerc_settings, monkeypatch):
    from celery.exceptions import Retry

    from worker.tasks.lerc import lerc_train

    project, _ = likert_project_from_toy(6)
    version = model_version_create(projects=[project])
    mark_training(version, "gpu-other-machine:4242")
    asked = {}

    def fake_retry(*args, **kwargs):
        asked.update(kwargs)
        return Retry("later")

    monkeypatch.setattr(lerc_train, "retry", fake_retry)
    with pytest.raises(Retry):
        lerc_train.run(version.id)
    assert asked["countdown"] >= 60


def test_a_run_whose_lease_was_taken_stops_and_writes_nothing(lerc_settings, monkeypatch):
    """A worker that lost its lease (its heartbeat went stale, a redelivery resumed the
    version on another host) stops at its next progress report instead of training on beside
    the new run, and never writes its result or a failure over the new run's row."""
    project, _ = likert_project_from_toy(6)
    version = model_version_create(projects=[project])
    reached = []

    def taken_while_training(version_, reporter):
        ModelVersion.objects.filter(pk=version_.pk).update(
            lease="gpu-other-machine:4242:abcd", heartbeat_at=timezone.now())
        reporter({"phase": "train", "epoch": 1, "step": 1}, force=True)
        reached.append("trained on after losing the lease")
        raise RuntimeError("the work went on outside the lease")

    monkeypatch.setattr(lerc_training, "_train_and_evaluate", taken_while_training)
    result = model_version_train(model_version=version)

    assert reached == []
    result.refresh_from_db()
    assert result.status == ModelStatus.TRAINING
    assert result.lease == "gpu-other-machine:4242:abcd"
    assert result.error == ""
    assert not result.events.filter(event="failed").exists()
