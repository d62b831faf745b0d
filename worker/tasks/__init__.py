"""Celery tasks, one module per area (imported here so every worker registers them all)."""
