"""Project configuration. The Celery app is loaded with Django (Celery's documented pattern),
so services can send tasks by name (annotation/services/background.py) in every process."""
from worker.celery import app as celery_app

__all__ = ["celery_app"]
