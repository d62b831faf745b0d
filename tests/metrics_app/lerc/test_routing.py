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
                                       "worker.tasks.lerc.lerc_evaluate"])
def test_model_work_stays_on_gpu(task_name):
    assert _queue(task_name) == "gpu"


def test_a_leftover_lerc_score_project_message_is_still_consumed_on_gpu():
    """Nothing sends `lerc_score_project` now, but a message still in the gpu queue must meet a
    task that turns it into a scoring job (worker/tasks/lerc.py), not an unknown-task error."""
    from worker.tasks.lerc import lerc_score_project

    assert lerc_score_project.name == "worker.tasks.lerc.lerc_score_project"
    assert _queue("worker.tasks.lerc.lerc_score_project") == "gpu"
