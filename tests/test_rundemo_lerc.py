"""`rundemo`'s first start queues one small LERC training run on the demo's EVOUNA judgments
for the background worker and says where to watch it; the second start queues nothing, unless
the demo was stopped mid-training (then that same version is sent again to resume). The web
server, worker and beat are replaced by processes that exit at once (tests/test_rundemo.py runs
the real ones)."""
from __future__ import annotations

import io
import os
import socket
import subprocess
import sys

import pytest
from django.core.management import call_command

from annotation.management.commands import rundemo
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import training
from metrics_app.services.lerc.demo import DEMO_TRAIN_OPTIONS

pytestmark = pytest.mark.django_db


class _ExitedProcess:
    def __init__(self, *args, **kwargs):
        pass

    def poll(self):
        return 0

    def wait(self, timeout=None):
        return 0


def _start(capture) -> str:
    out = io.StringIO()
    with capture(execute=True):
        call_command("rundemo", "--port", "8123", stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_first_start_queues_one_demo_training_run_and_the_second_none(
        monkeypatch, settings, tmp_path, django_capture_on_commit_callbacks):
    if not (settings.QAJ_DEMO_DATA_DIR / "open_qa_judgments" / "evouna_nq.json").exists():
        pytest.skip(f"no EVOUNA data under {settings.QAJ_DEMO_DATA_DIR}")
    settings.VAR_DIR = tmp_path
    gone = subprocess.Popen([sys.executable, "-c", "pass"])  # a worker process that ended
    gone.wait()
    monkeypatch.setattr(rundemo.subprocess, "Popen", _ExitedProcess)
    monkeypatch.setattr(rundemo.signal, "signal", lambda *args: None)  # keep pytest's SIGTERM
    sent = []
    monkeypatch.setattr(training, "task_send",
                        lambda name, **options: sent.append((name, options)))

    first = _start(django_capture_on_commit_callbacks)
    version = ModelVersion.objects.get()
    assert version.status == ModelStatus.QUEUED
    assert [p.slug for p in version.projects.all()] == ["demo-evouna-nq"]
    assert version.config["train"]["epochs"] == 1
    assert {k: version.config["train"][k] for k in DEMO_TRAIN_OPTIONS} == DEMO_TRAIN_OPTIONS
    assert version.data_snapshot["watermarks"]  # pinned to the judgments imported just now
    assert sent == [("worker.tasks.lerc.lerc_train",
                     {"args": [version.pk], "task_id": version.task_id})]
    assert ("LERC: lerc v1 is training in the background worker on demo-evouna-nq"
            in first)
    assert f"http://127.0.0.1:8123/admin/metrics_app/modelversion/{version.pk}/change/" in first

    second = _start(django_capture_on_commit_callbacks)
    assert ModelVersion.objects.count() == 1 and len(sent) == 1
    assert "LERC:" not in second

    # Stopped mid-training: the worker process that held it is gone, and the filesystem broker
    # handed its message out already. The next start sends the same version again (the task
    # resumes it); no second version.
    ModelVersion.objects.filter(pk=version.pk).update(
        status=ModelStatus.TRAINING,
        progress={"phase": "train"}, lease=f"{socket.gethostname()}:{gone.pid}:0")
    third = _start(django_capture_on_commit_callbacks)
    assert ModelVersion.objects.count() == 1
    assert [name for name, _ in sent] == ["worker.tasks.lerc.lerc_train"] * 2
    assert sent[1][1]["args"] == [version.pk]
    assert "LERC: lerc v1 resumes training (the last run stopped before it finished)" in third
    # A live worker's training (here: this process) is left to it.
    ModelVersion.objects.filter(pk=version.pk).update(
        progress={"phase": "train"}, lease=f"{socket.gethostname()}:{os.getpid()}:0")
    fourth = _start(django_capture_on_commit_callbacks)
    assert len(sent) == 2 and "LERC:" not in fourth
