"""The whole loop with a real Celery worker process on Redis (not eager):

judgments arrive → the refresh task fires → a version trains (tiny BERT), evaluates and is
promoted or rejected by the rule → `manage.py score --metric lerc` scores with it. And a worker
SIGKILLed mid-training leaves no version stuck in "training".

The worker shares the test database (a file with SQLite, the test database with PostgreSQL) and
uses Redis db QAJ_TEST_REDIS_DB (default 13) under a key prefix of its own.
"""
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
from django.core.management import call_command
from django.db import connection

from annotation.models import TaskKind
from metrics_app.lerc.data import LercExample
from metrics_app.lerc.infer import LercScorer
from metrics_app.models import ModelStatus, ModelVersion
from tests.conftest import IN_CI, REPO_ROOT
from tests.factories import make_item, make_judgment, make_project, make_stage, make_worker

from .conftest import TINY_TRAIN_OPTIONS, toy_examples

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FINISHED = (ModelStatus.PROMOTED, ModelStatus.REJECTED, ModelStatus.FAILED,
            ModelStatus.CANCELLED)


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
    """`celery -A worker worker -Q gpu` in its own process group, logging to a file."""

    def __init__(self, tmp_path: Path, redis_url: str, **env):
        self.log = tmp_path / f"worker-{uuid.uuid4().hex[:6]}.log"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": _database_url(),
            "CELERY_BROKER_URL": redis_url,
            "QAJ_BROKER_KEY_PREFIX": KEY_PREFIX,
            "QAJ_ARTIFACT_ROOT": str(tmp_path / "artifacts"),
            "QAJ_LERC_TRAIN_OPTIONS": json.dumps({**TINY_TRAIN_OPTIONS, "epochs": 10}),
            "OMP_NUM_THREADS": "1",
            **env,
        }
        self.process = None

    def start(self) -> WorkerProcess:
        handle = self.log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "worker", "worker", "-Q", "gpu",
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

    def start(**env) -> WorkerProcess:
        worker = WorkerProcess(tmp_path, redis_url, **env).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def send(task, redis_url, *args):
    """Publish through Redis explicitly (this process's Celery app keeps its own broker)."""
    from worker.celery import app

    with app.connection_for_write(
        redis_url, transport_options={"global_keyprefix": KEY_PREFIX}
    ) as conn:
        task.apply_async(args=list(args), connection=conn, queue="gpu")


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


def add_judged_items(project, stage, worker, examples, split):
    for example in examples:
        item = make_item(project, split=split, dataset="toy", content={
            "passage": example.passage, "question": example.question,
            "references": list(example.references), "candidate": example.candidate})
        make_judgment(item=item, stage=stage, worker=worker, score=example.score)


def test_judgments_refresh_train_promote_and_score(workers, redis_url, tmp_path):
    from worker.tasks.lerc import lerc_refresh

    project = make_project(kind=TaskKind.LIKERT, slug="e2e-lerc")
    stage, annotator = make_stage(project), make_worker()
    add_judged_items(project, stage, annotator, toy_examples(24), "train")
    add_judged_items(project, stage, annotator, toy_examples(24), "dev")
    worker = workers(QAJ_LERC_MIN_NEW_JUDGMENTS="20")

    send(lerc_refresh, redis_url)
    v1 = wait_for(lambda: ModelVersion.objects.filter(status__in=FINISHED).first(), worker,
                  180, "the first version to finish")
    assert v1.status == ModelStatus.PROMOTED, v1.error or worker.tail()
    assert list(v1.projects.all()) == [project]
    assert v1.metrics["validation"]["pearson"] > 0.5
    assert v1.data_snapshot["judgment_count"] == 32  # exact-match candidates dropped
    assert v1.events.filter(event="created", detail__contains="refresh").exists()

    # No new judgments: refreshing again queues nothing.
    send(lerc_refresh, redis_url)
    time.sleep(3)
    assert ModelVersion.objects.count() == 1

    # New judgments arrive → the next refresh trains v2, decided by the rule.
    add_judged_items(project, stage, annotator, toy_examples(24, offset=24), "train")
    send(lerc_refresh, redis_url)
    v2 = wait_for(lambda: ModelVersion.objects.filter(number=2, status__in=FINISHED).first(),
                  worker, 180, "the second version to finish")
    assert v2.status in (ModelStatus.PROMOTED, ModelStatus.REJECTED), v2.error
    decision = v2.metrics["promotion_decision"]
    assert decision["incumbent"] == "v1"
    assert decision["promoted"] == (decision["candidate"] >= decision["incumbent_value"])
    assert (v2.status == ModelStatus.PROMOTED) == decision["promoted"]
    served = ModelVersion.objects.get(name="lerc", status=ModelStatus.PROMOTED)

    # `score --metric lerc` uses the promoted version.
    examples = toy_examples(6)
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps({
        "id": i, "passage": e.passage, "question": e.question,
        "references": list(e.references), "candidate": e.candidate}) + "\n"
        for i, e in enumerate(examples)))
    call_command("score", "--metric", "lerc", "--input", str(source), "--output", str(target),
                 "--no-progress")
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    expected = LercScorer(served.artifact_uri).score(
        [LercExample(question=e.question, references=e.references, candidate=e.candidate,
                     passage=e.passage) for e in examples])
    assert [row["lerc"] for row in rows] == pytest.approx(expected, abs=1e-4)
    call_command("score", "--metric", "lerc", "--model", "v1", "--input", str(source),
                 "--output", str(target), "--no-progress")
    pinned = [json.loads(line)["lerc"] for line in target.read_text().splitlines()]
    assert pinned == pytest.approx(LercScorer(v1.artifact_uri).score(
        [LercExample(question=e.question, references=e.references, candidate=e.candidate,
                     passage=e.passage) for e in examples]), abs=1e-4)


@pytest.mark.reliability
def test_killed_worker_leaves_no_version_training(workers, redis_url):
    from metrics_app.services.lerc import model_version_create
    from worker.tasks.lerc import lerc_fail_stale, lerc_train

    project = make_project(kind=TaskKind.LIKERT)
    stage, annotator = make_stage(project), make_worker()
    add_judged_items(project, stage, annotator, toy_examples(24), "train")
    add_judged_items(project, stage, annotator, toy_examples(6), "dev")
    version = model_version_create(projects=[project],
                                   train_options={**TINY_TRAIN_OPTIONS, "epochs": 500})
    worker = workers()
    send(lerc_train, redis_url, version.id)
    wait_for(lambda: (ModelVersion.objects.get(pk=version.pk).progress or {})
             .get("global_step", 0) >= 2, worker, 180, "training to start")
    worker.kill(signal.SIGKILL)
    version.refresh_from_db()
    assert version.status == ModelStatus.TRAINING  # the dead worker could not clean up

    # The beat's sweeper (here on a fresh worker, heartbeat limit 2 s) fails it.
    sweeper = workers(QAJ_LERC_STALE_AFTER_SECONDS="2")
    time.sleep(3)
    send(lerc_fail_stale, redis_url)
    wait_for(lambda: ModelVersion.objects.get(pk=version.pk).status != ModelStatus.TRAINING,
             sweeper, 120, "the stale version to be failed")
    version.refresh_from_db()
    assert version.status == ModelStatus.FAILED
    assert "worker lost" in version.error
    assert not ModelVersion.objects.filter(status=ModelStatus.TRAINING).exists()
