"""Registry of named automatic metrics (baselines, BERTScore, the learned LERC metric).

A metric is registered under a name with a factory; the factory runs on first use, so heavy
imports (torch, transformers, Java) happen only in the process that scores. Every score the
platform stores carries the metric's name and `version`.

`sync_ok=True` marks a metric cheap enough to compute inside a web request (pure-Python string
work, no model load, no subprocess); every other metric is scored only in Celery jobs.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class MetricInput:
    """One candidate to score. `references` holds one or more reference answers."""

    id: str
    question: str
    references: list[str]
    candidate: str
    passage: str = ""


class MetricUnavailable(RuntimeError):
    """The metric cannot run here (e.g. METEOR without Java); the message says why."""


class Metric(Protocol):
    name: str
    version: str

    def score_batch(self, inputs: Sequence[MetricInput]) -> list[float | None]:
        """Scores in input order; None where an input cannot be scored."""


@dataclass
class _Entry:
    factory: Callable[..., Metric]
    description: str
    sync_ok: bool = False
    instance: Metric | None = field(default=None)


_REGISTRY: dict[str, _Entry] = {}


def register_metric(name: str, description: str = "", *, sync_ok: bool = False) -> Callable:
    """Decorator for a factory `() -> Metric` (or `(**options) -> Metric`)."""

    def decorator(factory: Callable[..., Metric]) -> Callable[..., Metric]:
        _REGISTRY[name] = _Entry(factory=factory, description=description, sync_ok=sync_ok)
        return factory

    return decorator


def metric_names() -> list[str]:
    _load_builtin_metrics()
    return sorted(_REGISTRY)


def metric_description(name: str) -> str:
    _load_builtin_metrics()
    return _REGISTRY[name].description


def metric_sync_ok(name: str) -> bool:
    """Whether `name` may be computed synchronously in a web request (see module docstring)."""
    _load_builtin_metrics()
    entry = _REGISTRY.get(name)
    return bool(entry and entry.sync_ok)


def get_metric(name: str, **options) -> Metric:
    """The metric named `name`; options (e.g. a model version) build a fresh instance."""
    _load_builtin_metrics()
    if name not in _REGISTRY:
        raise KeyError(f"unknown metric {name!r}; known metrics: {', '.join(sorted(_REGISTRY))}")
    entry = _REGISTRY[name]
    if options:
        return entry.factory(**options)
    if entry.instance is None:
        entry.instance = entry.factory()
    return entry.instance


def metric_accepts_option(name: str, option: str) -> bool:
    """Whether the factory of `name` takes the keyword `option` (e.g. `model` for LERC), so
    callers pass a command-line option only to the metrics that understand it."""
    import inspect

    _load_builtin_metrics()
    if name not in _REGISTRY:
        return False
    parameters = inspect.signature(_REGISTRY[name].factory).parameters
    return option in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


_BUILTIN_MODULES = ("metrics_app.metrics.baselines", "metrics_app.metrics.learned")


def _load_builtin_metrics() -> None:
    """Import the modules that register the built-in metrics (a missing one is skipped
    only while that area is not built yet)."""
    import importlib

    for module in _BUILTIN_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
