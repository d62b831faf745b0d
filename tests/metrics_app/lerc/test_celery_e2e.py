"""The whole loop with a real Celery worker process on Redis (not eager):

judgments arrive → the refresh task fires → a version trains (tiny BERT), evaluates and is
promoted or rejected by the rule → `manage.py score --metric lerc` scores with it. And a worker
SIGKILLed mid-training leaves no version stuck in "training".

The worker shares the test database (a file with SQLite, the test database with PostgreSQL) and
uses Redis db QAJ_TEST_REDIS_DB (default 13) under a key prefix of its own.
"""
from __future__ import annotations

import json
import signal
import time

import pytest
from django.conf import settings
from django.core.management import call_command

from annotation.models import TaskKind
from metrics_app.lerc.data import LercExample
from metrics_app.lerc.inference import LercScorer
from metrics_app.models import ModelStatus, ModelVersion
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker
from tests.support.celery_workers import send, wait_for
from tests.support.lerc import TINY_TRAIN_OPTIONS, toy_examples

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FINISHED = (ModelStatus.PROMOTED, ModelStatus.REJECTED, ModelStatus.FAILED,
            ModelStatus.CANCELLED)


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
    # At the precision the service scores at (the test settings: fp32), whatever this CPU has.
    expected = LercScorer(served.artifact_uri, precision=settings.QAJ_LERC_PRECISION).score(
        [LercExample(question=e.question, references=e.references, candidate=e.candidate,
                     passage=e.passage) for e in examples])
    assert [row["lerc"] for row in rows] == pytest.approx(expected, abs=1e-4)
    call_command("score", "--metric", "lerc", "--model", "v1", "--input", str(source),
                 "--output", str(target), "--no-progress")
    pinned = [json.loads(line)["lerc"] for line in target.read_text().splitlines()]
    assert pinned == pytest.approx(LercScorer(
        v1.artifact_uri, precision=settings.QAJ_LERC_PRECISION).score(
            [LercExample(question=e.question, references=e.references, candidate=e.candidate,
                         passage=e.passage) for e in examples]), abs=1e-4)


@pytest.mark.reliability
def test_killed_worker_leaves_no_version_training(workers, redis_url):
    from metrics_app.services.lerc import model_version_create
    from worker.tasks.lerc import lerc_train
    from worker.tasks.metrics import recover_stale_jobs

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
    sweeper = workers(QAJ_JOB_STALE_AFTER_SECONDS="2")
    time.sleep(3)
    send(recover_stale_jobs, redis_url)
    wait_for(lambda: ModelVersion.objects.get(pk=version.pk).status != ModelStatus.TRAINING,
             sweeper, 120, "the stale version to be failed")
    version.refresh_from_db()
    assert version.status == ModelStatus.FAILED
    assert "worker lost" in version.error
    assert not ModelVersion.objects.filter(status=ModelStatus.TRAINING).exists()


@pytest.mark.reliability
def test_a_decision_lost_with_its_worker_is_sent_again_by_the_sweep(workers, redis_url):
    """A version whose model was stored but whose promotion decision never ran (its worker
    killed in between, the message lost): the beat's sweep, on a real worker, sends its
    `lerc_evaluate` again through the broker, and the version is decided (no incumbent:
    promoted) once."""
    from datetime import timedelta

    from django.utils import timezone

    from metrics_app.services.lerc import model_version_create
    from worker.tasks.metrics import recover_stale_jobs

    project = make_project(kind=TaskKind.LIKERT)
    version = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=version.pk).update(
        status=ModelStatus.EVALUATED, artifact_uri="stub-model",
        metrics={"validation": {"pearson": 0.6}},
        finished_at=timezone.now() - timedelta(hours=1))
    sweeper = workers(QAJ_JOB_STALE_AFTER_SECONDS="2")
    send(recover_stale_jobs, redis_url)
    decided = wait_for(lambda: ModelVersion.objects.filter(
        pk=version.pk, status=ModelStatus.PROMOTED).first(), sweeper, 120,
        "the undecided version to be decided")
    assert decided.events.filter(event="decision sent again").count() == 1
    assert decided.events.filter(event="promoted").count() == 1
    assert decided.metrics["promotion_decision"]["promoted"] is True


@pytest.mark.reliability
def test_a_training_on_answers_all_judged_alike_fails_on_the_worker_saying_why(
        workers, redis_url):
    """Sent to a real worker, a version whose training answers all carry one score ends
    failed with the reason, before the training loop, and is not trained later by a copy."""
    from metrics_app.services.lerc import model_version_create
    from worker.tasks.lerc import lerc_train

    project = make_project(kind=TaskKind.LIKERT)
    stage, annotator = make_stage(project), make_worker()
    same = [LercExample(question=e.question, references=e.references, candidate=e.candidate,
                        passage=e.passage, score=5.0, id=e.id) for e in toy_examples(24)]
    add_judged_items(project, stage, annotator, same, "train")
    add_judged_items(project, stage, annotator, same[:6], "dev")
    version = model_version_create(projects=[project], train_options=dict(TINY_TRAIN_OPTIONS))
    worker = workers()
    send(lerc_train, redis_url, version.id)
    failed = wait_for(lambda: ModelVersion.objects.filter(
        pk=version.pk, status__in=FINISHED).first(), worker, 120, "the version to finish")
    assert failed.status == ModelStatus.FAILED, worker.tail()
    assert "not trained: all 16 training answers have the same score (5)" in failed.error
    assert not failed.artifact_uri and "global_step" not in (failed.progress or {})
    assert not failed.events.filter(event="evaluated").exists()
