"""The publish path's refusal when a stage's provider is not ready; what makes it ready or not
is read by `annotation.readiness_selectors.stage_readiness`."""
from __future__ import annotations

from annotation.stage_errors import StageError


class ProviderNotReady(StageError):
    """The provider cannot act for this stage; the message names every problem."""
