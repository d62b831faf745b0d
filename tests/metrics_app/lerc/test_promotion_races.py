"""Promotion races, with threads that each hold their own database connection: a rollback by
hand while a retrain's decision promotes, and two lease sweeps resending one undecided
decision. Every change of the served version takes the one lock of the model's versions
(`metrics_app/services/lerc/common.py:versions_locked`), so the outcome is that of one order
or the other, and one version of a project set is promoted. Meaningful on PostgreSQL (row
locks); on SQLite writers queue for the database and the test checks that stays correct."""
from __future__ import annotations

import threading
import time
import traceback
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from annotation.models import TaskKind
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import (
    model_version_create,
    model_version_decide,
    model_version_rollback,
)
from testing.factories import make_project
from tests.support.paths import require_shared_database

pytestmark = [pytest.mark.reliability, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _shared_database():
    require_shared_database()


def _version(project, pearson_value, status, promoted_hours_ago=None):
    version = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=version.pk).update(
        status=status, artifact_uri=f"stub-{version.number}",
        metrics={"validation": {"pearson": pearson_value}},
        finished_at=timezone.now() - timedelta(hours=3),
        promoted_at=(None if promoted_hours_ago is None
                     else timezone.now() - timedelta(hours=promoted_hours_ago)))
    return ModelVersion.objects.get(pk=version.pk)


def _run_threads(targets: dict) -> dict:
    """Run each named target in its own thread (its own connection); their errors by name."""
    errors: dict[str, str] = {}

    def run(name, target):
        try:
            target()
        except Exception:  # noqa: BLE001 - reported to the test, which fails on any
            errors[name] = traceback.format_exc()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(name, target), name=name)
               for name, target in targets.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


def test_a_rollback_during_a_promotion_decision_rolls_back_what_that_decision_promoted(
        lerc_settings, monkeypatch):
    """v1 then v2 were promoted; v3 is being decided (better than v2: it will be promoted)
    when a superuser rolls the set back. The decision holds the lock while it promotes; the
    rollback reads which version serves under the same lock, so it rolls back from v3 (the
    version serving once it may act) to v2. Before, it read v2 as the current one outside the
    lock, then promoted v1 over v3: v3 was demoted by a rollback "from v2" that never saw it."""
    from metrics_app.services.lerc import promotion

    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = []
    project = make_project(kind=TaskKind.LIKERT)
    v1 = _version(project, 0.5, ModelStatus.EVALUATED, promoted_hours_ago=2)
    v2 = _version(project, 0.7, ModelStatus.PROMOTED, promoted_hours_ago=1)
    v3 = _version(project, 0.9, ModelStatus.EVALUATED)
    monkeypatch.setattr(promotion, "model_version_scorer", lambda version: version)
    monkeypatch.setattr(promotion, "split_metrics", lambda scorer, kind, examples, scores=None:
                        {"pearson": scorer.metrics["validation"]["pearson"]})
    promoting = threading.Event()
    promote = promotion._promote  # what the decision (and a rollback) promotes through

    def promote_slowly(**kwargs):
        if threading.current_thread().name == "decide":
            promoting.set()  # the decision holds the lock now; the rollback comes meanwhile
            time.sleep(1.0)
        return promote(**kwargs)

    monkeypatch.setattr(promotion, "_promote", promote_slowly)
    rolled_back = []

    def rollback():
        assert promoting.wait(timeout=30)
        rolled_back.append(model_version_rollback(model_version=v1))

    errors = _run_threads({
        "decide": lambda: model_version_decide(model_version=v3, val_examples=[object()] * 3),
        "rollback": rollback,
    })
    assert not errors, errors
    for version in (v1, v2, v3):
        version.refresh_from_db()
    # Decide, then roll back: v3 promoted, then v2 served again.
    assert (v1.status, v2.status, v3.status) == (
        ModelStatus.EVALUATED, ModelStatus.PROMOTED, ModelStatus.EVALUATED)
    assert rolled_back[0].pk == v2.pk
    assert v3.events.filter(event="rolled back", detail=f"back to v{v2.number}").exists()
    assert not v2.events.filter(event="rolled back").exists()
    assert v2.events.filter(event="promoted", detail=f"rollback from v{v3.number}").exists()
    assert ModelVersion.objects.filter(name="lerc", status=ModelStatus.PROMOTED).count() == 1


def test_two_sweeps_at_once_send_an_undecided_decision_once(lerc_settings, monkeypatch):
    """Two lease sweeps (two beat processes, or one run outlasting its interval) find the same
    trained-but-undecided version at once: it is sent again once, counted once."""
    from metrics_app.services.job_leases import stale_jobs_recover_all
    from metrics_app.services.lerc import training
    from metrics_app.services.lerc.refresh import DECISION_RESENT

    lerc_settings.QAJ_JOB_STALE_AFTER_SECONDS = 60
    sent = []
    monkeypatch.setattr(training, "task_send",
                        lambda name, *, args, **_kw: sent.append((name, args[0])))
    version = _version(make_project(kind=TaskKind.LIKERT), 0.6, ModelStatus.EVALUATED)
    barrier = threading.Barrier(2)
    counts = []

    def sweep():
        barrier.wait(timeout=30)
        counts.append(stale_jobs_recover_all())

    errors = _run_threads({"sweep-1": sweep, "sweep-2": sweep})
    assert not errors, errors
    assert sorted(c["retried"] for c in counts) == [0, 1]
    assert sent == [("worker.tasks.lerc.lerc_evaluate", version.pk)]
    assert version.events.filter(event=DECISION_RESENT).count() == 1
