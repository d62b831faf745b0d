"""Crowd providers behind one interface (`base.CrowdProvider`): MTurk, Prolific, in-house.

    provider = get_provider(stage.provider)
    for update in provider.publish_stage(stage=stage):  # HitUpdate / HitFailure per HIT
        ...  # annotation.services.hits records them: providers write no rows

Tests replace a provider (for instance an MTurk provider holding a stubbed boto3 client) with
`override_provider`.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from .base import (
    CrowdProvider,
    HitFailure,
    HitUpdate,
    PublishReport,
    Submission,
    SubmissionStatus,
)

_FACTORIES: dict[str, Callable[[], CrowdProvider]] = {}
_OVERRIDES: dict[str, CrowdProvider] = {}


def register(name: str, factory: Callable[[], CrowdProvider]) -> None:
    _FACTORIES[name] = factory


def get_provider(name: str) -> CrowdProvider:
    if name in _OVERRIDES:
        return _OVERRIDES[name]
    if not _FACTORIES:
        _register_defaults()
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise ValueError(f"no crowd provider named {name!r}") from None


@contextlib.contextmanager
def override_provider(name: str, provider: CrowdProvider) -> Iterator[CrowdProvider]:
    previous = _OVERRIDES.get(name)
    _OVERRIDES[name] = provider
    try:
        yield provider
    finally:
        if previous is None:
            _OVERRIDES.pop(name, None)
        else:
            _OVERRIDES[name] = previous


def _register_defaults() -> None:
    from .inhouse import InhouseProvider
    from .mturk import MTurkProvider
    from .prolific import ProlificProvider

    register("mturk", MTurkProvider)
    register("prolific", ProlificProvider)
    register("inhouse", InhouseProvider)
    register("import", InhouseProvider)


__all__ = [
    "CrowdProvider",
    "HitFailure",
    "HitUpdate",
    "PublishReport",
    "Submission",
    "SubmissionStatus",
    "get_provider",
    "override_provider",
    "register",
]
