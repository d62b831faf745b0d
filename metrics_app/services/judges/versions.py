"""Creating judges and their versions. A version's config is frozen: the same config finds
the version it already has, a changed one (a prompt edit) makes the next version."""
from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.db import IntegrityError, transaction

from annotation.domain.control_characters import display_text_error
from annotation.domain.judge_refs import JUDGE_REF

from ...domain.judge_prompts import JudgeConfigError, validate_config
from ...models import Judge, JudgeKind, JudgeVersion

# USD per million tokens (prompt, completion) of some well-known models; a judge's config may
# give its own `price`, and QAJ_JUDGE_PRICES (JSON) adds or replaces entries. Local models
# (vLLM, Ollama, llama.cpp) cost nothing per token: give them a price of 0 to use a budget.
DEFAULT_PRICES = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "fake-judge": (1.00, 2.00),  # testing/openai_server.py
}


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def price_for(config: dict) -> dict | None:
    """{prompt_per_million, completion_per_million} for the judge's model, or None."""
    if config.get("price") is not None:
        return config["price"]
    table = {**DEFAULT_PRICES, **{k: tuple(v) for k, v in
                                  getattr(settings, "QAJ_JUDGE_PRICES", {}).items()}}
    if config.get("model") in table:
        prompt, completion = table[config["model"]]
        return {"prompt_per_million": prompt, "completion_per_million": completion}
    return None


def judge_label_error(name: str, version: str | None = None) -> str | None:
    """None when `name` (and `version`) can be referred to as NAME@VERSION wherever a judge is
    named (estimates_judge, routing_judge, --judge, ?judge=, the report's labels), else why
    not: a judge stored as "gpt 4" or "x@y" was kept but could never be named again."""
    if len(name or "") > Judge._meta.get_field("name").max_length \
            or not JUDGE_REF.match(f"{name}@{version or '1'}"):
        return (f"judge {name!r}" + (f" version {version!r}" if version else "")
                + ": a judge name is letters, digits, - and _ (at most 100), a version "
                  "1-50 characters without spaces or @")
    return None


def judge_version_create(*, name: str, kind: str = JudgeKind.LLM, config: dict | None = None,
                         description: str = "", version_name: str | None = None
                         ) -> tuple[JudgeVersion, bool]:
    """(version, created): the judge `name` (created on first use) at this config. LLM
    configs are validated and completed with defaults (JudgeConfigError names the field).
    Versions are numbered 1, 2, ... unless `version_name` names it (imported verdicts keep the
    version their file gives)."""
    if kind not in JudgeKind.values:
        raise JudgeConfigError(f"kind: {kind!r} is not one of {', '.join(JudgeKind.values)}")
    if error := judge_label_error(name, version_name):
        raise JudgeConfigError(error)
    if error := display_text_error(description, multiline=True):
        raise JudgeConfigError(f"description: {error}")
    config = validate_config(config or {}) if kind == JudgeKind.LLM else dict(config or {})
    digest = config_hash(config)
    for _ in range(3):
        try:
            with transaction.atomic():
                judge, _ = Judge.objects.get_or_create(
                    name=name, defaults={"kind": kind, "description": description})
                if judge.kind != kind:
                    raise JudgeConfigError(f"judge {name!r} is an {judge.kind} judge, not {kind}")
                existing = judge.versions.filter(config_hash=digest).first()
                if existing:
                    return existing, False
                number = version_name or str(judge.versions.count() + 1)
                if judge.versions.filter(version=number).exists():
                    raise JudgeConfigError(f"{name}@{number} exists with another config")
                return JudgeVersion.objects.create(judge=judge, version=number,
                                                   config=config, config_hash=digest), True
        except IntegrityError:
            continue  # a concurrent create took the number; read again
    raise JudgeConfigError(f"could not create a version of {name!r}: concurrent edits")
