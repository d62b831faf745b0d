"""Sending work to Celery by task name, so services never import task modules.

Tasks (worker/tasks/) sit on top of the services they call; a service that needs background
work names the task instead of importing it, which keeps the layers one-way (docs/ARCHITECTURE.md).
The task object is looked up in the configured Celery app, so routing, eager mode in tests and
`apply_async` options behave exactly as if the task had been imported.
"""
from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from kombu.exceptions import OperationalError


class BrokerUnreachable(Exception):
    """The task could not be handed to the broker; nothing was sent."""


def _task(name: str):
    app = current_app
    if name not in app.tasks:
        # The worker imports every task module at start; a web process does it on first use.
        app.loader.import_default_modules()
    try:
        return app.tasks[name]
    except KeyError:
        raise LookupError(f"no Celery task is registered as {name!r}") from None


def task_send(name: str, *, args: list | tuple = (), kwargs: dict | None = None,
              **options: Any):
    """Queue the task called `name` (its registered name, e.g. "metrics.score_project");
    returns Celery's AsyncResult. Options go to `apply_async` (queue, task_id, countdown ...)."""
    if kwargs:
        options["kwargs"] = kwargs
    return _task(name).apply_async(args=list(args), **options)


def task_run_here(name: str, *, args: list | tuple = ()):
    """Run the task called `name` in this process and return its result (raises what it
    raises): for a command that changed the data and should leave the precomputed views ready,
    without needing a worker."""
    trace = logging.getLogger("celery.app.trace")
    level = trace.level
    trace.setLevel(logging.WARNING)  # no "Task ... succeeded" line in the command's output
    try:
        return _task(name).apply(args=list(args), throw=True).get()
    finally:
        trace.setLevel(level)


def task_send_or_fail_fast(name: str, *, args: list | tuple = (), **options: Any):
    """Queue the task with one broker connection attempt and one retry, no publish retries:
    for a researcher's click, where a down broker must be reported within seconds instead of
    hanging the request. Raises BrokerUnreachable."""
    task = _task(name)
    try:
        with task.app.connection_for_write() as connection:
            connection.transport_options = {**(connection.transport_options or {}),
                                            "max_retries": 1}
            return task.apply_async(args=list(args), connection=connection, retry=False,
                                    **options)
    except (OperationalError, OSError) as exc:
        raise BrokerUnreachable(str(exc)) from exc
