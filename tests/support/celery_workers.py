"""Real Celery worker processes on Redis for integration tests (a pytest plugin: the root
conftest loads it, so `workers` and `redis_url` are fixtures everywhere).

The worker shares the test database (a file with SQLite, the test database with PostgreSQL) and
uses Redis db QAJ_TEST_REDIS_DB (default 13) under a key prefix of its own."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from tests.support.lerc import TINY_TRAIN_OPTIONS
from tests.support.paths import IN_CI, REPO_ROOT

# Every run gets its own key prefix, so concurrent runs (SQLite and PostgreSQL passes, other
# developers) sharing one Redis never consume each other's tasks.
KEY_PREFIX = f"qaj-lerc-test-{uuid.uuid4().hex[:10]}:"


@pytest.fixture
def redis_url():
    import redis

    url = f"redis://127.0.0.1:6379/{os.environ.get('QAJ_TEST_REDIS_DB', '13')}"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        client.ping()
    except redis.RedisError as exc:
        if IN_CI:
            pytest.fail(f"Redis at {url} is required in CI: {exc}")
        pytest.skip(f"Redis at {url} is not reachable: {exc}")

    def clean():
        for key in client.scan_iter(f"{KEY_PREFIX}*"):
            client.delete(key)

    clean()
    yield url
    clean()


def _database_url() -> str:
    data = connection.settings_dict
    name = str(data["NAME"])
    if connection.vendor == "sqlite":
        if name == ":memory:" or name.startswith("file:"):
            pytest.skip("an in-memory SQLite test database cannot be shared with a worker "
                        "process; set QAJ_TEST_DB_NAME to a file (scripts/test.sh does)")
        return f"sqlite:///{Path(name).resolve()}"
    from urllib.parse import quote

    auth = quote(data.get("USER") or "")
    if data.get("PASSWORD"):
        auth += ":" + quote(data["PASSWORD"])
    host = data.get("HOST") or "127.0.0.1"
    port = f":{data['PORT']}" if data.get("PORT") else ""
    return f"postgres://{auth}@{host}{port}/{name}"


class WorkerProcess:
    """`celery -A worker worker -Q gpu` (or `queue`) in its own process group, logging to a
    file. `broker_url` is Redis (under this run's key prefix) or RabbitMQ."""

    def __init__(self, tmp_path: Path, broker_url: str, queue: str = "gpu", **env):
        self.queue = queue
        self.log = tmp_path / f"worker-{uuid.uuid4().hex[:6]}.log"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": _database_url(),
            "CELERY_BROKER_URL": broker_url,
            "QAJ_BROKER_KEY_PREFIX": KEY_PREFIX,
            "QAJ_ARTIFACT_ROOT": str(tmp_path / "artifacts"),
            "QAJ_LERC_TRAIN_OPTIONS": json.dumps({**TINY_TRAIN_OPTIONS, "epochs": 10}),
            "OMP_NUM_THREADS": "1",
            # A real worker works on committed rows: it beats as in production (the test
            # settings' long interval is for jobs run inside a test's transaction).
            "QAJ_JOB_HEARTBEAT_SECONDS": "15",
            **env,
        }
        self.process = None

    def start(self) -> WorkerProcess:
        handle = self.log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "worker", "worker", "-Q", self.queue,
             "-c", "1", "-n", f"lerc-test-{uuid.uuid4().hex[:8]}@%h", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
            cwd=REPO_ROOT, env=self.env, stdout=handle, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # Redis routes a message only once the worker has declared its queue binding: publish
        # after "ready", or the message is dropped.
        deadline = time.monotonic() + 180
        while " ready." not in self.log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the worker did not start:\n{self.tail()}")
            time.sleep(0.3)
        return self

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])


@pytest.fixture
def workers(tmp_path, redis_url, transactional_db):
    started: list[WorkerProcess] = []

    def start(broker_url: str | None = None, queue: str = "gpu", **env) -> WorkerProcess:
        worker = WorkerProcess(tmp_path, broker_url or redis_url, queue, **env).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def send(task, broker_url, *args, queue: str = "gpu"):
    """Publish through `broker_url` explicitly (this process's Celery app keeps its own
    broker); on Redis under this run's key prefix."""
    from worker.celery import app

    options = {"global_keyprefix": KEY_PREFIX} if broker_url.startswith("redis") else {}
    with app.connection_for_write(broker_url, transport_options=options) as conn:
        task.apply_async(args=list(args), connection=conn, queue=queue)


def wait_for(predicate, worker: WorkerProcess, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if worker.process.poll() is not None:
            pytest.fail(f"worker exited while waiting for {what}:\n{worker.tail()}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}:\n{worker.tail()}")
