"""The Celery app. Tasks live in worker/tasks/ and stay thin: take ids, call a service.

Queues: `default` (provider sync, reports, cheap metric scoring) and `gpu` (LERC training and
model scoring). The demo worker consumes both; GPU machines run `celery -A worker worker -Q gpu`
(docs/DEPLOYMENT.md).
"""
from __future__ import annotations

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

app = Celery("qajudge")
# Every CELERY_* Django setting configures the app (CELERY_BROKER_URL -> broker_url ...).
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["worker"], related_name="tasks")


@app.on_after_configure.connect
def _prepare_filesystem_broker(sender: Celery, **kwargs) -> None:
    """kombu's filesystem transport needs its folders to exist before anyone sends."""
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
