"""Queue routing of the LERC tasks, through the configured Celery app's router."""
from __future__ import annotations

import pytest

from worker.celery import app


def _queue(task_name: str) -> str:
    route = app.amqp.router.route({}, task_name, args=(), kwargs={})
    return route["queue"].name


@pytest.mark.parametrize("task_name", ["metrics.recover_stale_jobs",
                                       "worker.tasks.lerc.lerc_refresh"])
def test_beat_checks_run_on_default_so_they_work_with_every_gpu_worker_dead(task_name):
    assert _queue(task_name) == "default"


@pytest.mark.parametrize("task_name", ["worker.tasks.lerc.lerc_train",
                                       "worker.tasks.lerc.lerc_evaluate",
                                       "worker.tasks.lerc.lerc_score_project"])
def test_model_work_stays_on_gpu(task_name):
    assert _queue(task_name) == "gpu"
