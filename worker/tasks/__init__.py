"""Celery tasks, one module per area (imported here so every worker registers them all)."""
from . import assignments  # noqa: E402,F401
from . import metrics  # noqa: E402,F401
from . import lerc  # noqa: E402,F401
from . import providers  # noqa: E402,F401
from . import reports  # noqa: E402,F401
