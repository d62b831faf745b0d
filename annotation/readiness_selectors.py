"""Is a stage's provider ready to act? Checked before any remote call that creates or spends
anything: on the publish path (`stage_publish`, every door), and shown on the stage page and the
cockpit.

Local checks (no network): the credentials are there, the endpoint is a URL, the public base URL
workers are sent to is https where real workers must reach it, the stage is one that can be
published at all. The probe (publish, and the admin's "Check provider readiness" action) adds
one read-only call: MTurk GetAccountBalance (credentials, endpoint and the balance in one go),
Prolific GET users/me/ (the token and the API are reachable) and the workspace's currency and
balance (`currency_code` of GET workspaces/<id>/balance/: anything but `AMOUNTS_CURRENCY` is
refused; its `available_balance` in dollars is the balance), each tried once with a short timeout — never the publish path's long retries. Each problem is named; a stage with a blocking
problem stays a draft and says why (`Stage.publish_problem`).
"""
from __future__ import annotations

import dataclasses
from decimal import Decimal

from annotation.models import Provider, Stage, StageKind
from annotation.providers.base import ReadinessProblem


@dataclasses.dataclass
class StageReadiness:
    provider: str
    problems: list[ReadinessProblem]
    probed: bool = False
    balance: Decimal | None = None
    balance_error: str = ""

    @property
    def ready(self) -> bool:
        return not any(p.blocking for p in self.problems)

    @property
    def blocking(self) -> list[ReadinessProblem]:
        return [p for p in self.problems if p.blocking]

    @property
    def warnings(self) -> list[ReadinessProblem]:
        return [p for p in self.problems if not p.blocking]

    def as_text(self) -> str:
        if self.ready:
            checked = "checked with the provider" if self.probed else "settings present"
            extra = "; ".join(str(p) for p in self.warnings)
            return f"ready ({checked})" + (f"; note: {extra}" if extra else "")
        return "not ready: " + "; ".join(str(p) for p in self.blocking)


def stage_readiness(*, stage: Stage, probe: bool = False, provider=None) -> StageReadiness:
    """Everything that stops the stage's provider from acting for it; `probe=True` adds the
    provider's read-only call (and its balance, where it has one)."""
    from annotation.providers import get_provider

    problems: list[ReadinessProblem] = []
    if stage.kind == StageKind.IMPORTED or stage.provider == Provider.IMPORT:
        problems.append(ReadinessProblem(
            "stage", "an imported stage holds judgments collected elsewhere; it is never "
                     "published (create a stage with the MTurk, Prolific or in-house provider)"))
        return StageReadiness(provider=stage.provider, problems=problems)
    provider = provider or get_provider(stage.provider)
    problems += provider.readiness_problems(stage=stage)
    readiness = StageReadiness(provider=stage.provider, problems=problems)
    if probe and readiness.ready:
        result = provider.readiness_probe(stage=stage)
        readiness.probed = True
        readiness.balance, readiness.balance_error = result.balance, result.balance_error
        readiness.problems += result.problems
    return readiness
