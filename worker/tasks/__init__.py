"""Celery tasks, one module per area (imported here so every worker registers them all)."""
from . import assignments, judges, lerc, metrics, providers, reports  # noqa: F401
