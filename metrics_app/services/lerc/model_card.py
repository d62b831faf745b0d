"""The model card of a version (`MODEL_CARD.md`, `model_card.json`): data, training, validation
and test numbers against the baselines, and the promotion decision."""
from __future__ import annotations

import re

from core.json_limits import json_dumps_strict
from metrics_app.model_selectors import LEARNED_METRIC_MODELS, learned_metric_seen_items
from metrics_app.models import ModelVersion

HIDDEN_PROJECT = "(a project you do not see)"


def _pairs(mapping) -> str:
    """{"a": 1, "b": {"c": 2}} as "a 1 · b.c 2" (readable in Markdown and on the admin page)."""
    if not isinstance(mapping, dict) or not mapping:
        return "–" if mapping in (None, {}, "") else _fmt(mapping)

    def flat(prefix: str, value):
        if isinstance(value, dict):
            for key, inner in sorted(value.items()):  # PostgreSQL's JSON reorders keys
                yield from flat(f"{prefix}.{key}" if prefix else str(key), inner)
        else:
            yield f"{prefix} {_fmt(value)}"

    return " · ".join(flat("", mapping))


def model_card(version: ModelVersion) -> str:
    """A Markdown model card: data, options, timings and every number against the baselines,
    and the promotion decision; the status as of when it was written (the card on disk is
    rewritten at every status change, `model_card_refresh`)."""
    metrics = version.metrics or {}
    when = next((getattr(version, field) for field in ("promoted_at", "finished_at",
                                                       "started_at", "created_at")
                 if getattr(version, field, None)), None)
    status = f"**{version.status}**" + (f" (as of {when:%Y-%m-%d %H:%M} UTC)" if when else "")
    calibration = (metrics.get("training") or {}).get("calibration")
    lines = [f"# {version.name} v{version.number}", "",
             f"- status: {status}",
             f"- backbone: {version.backbone}",
             f"- projects: {', '.join(p.slug for p in version.projects.order_by('slug')) or '–'}",
             f"- examples: {_pairs(metrics.get('examples', {}))}",
             f"- training options: {_pairs(version.config.get('train', {}))}",
             f"- data options: {_pairs(version.config.get('data', {}))}",
             f"- timings (s): {_pairs(metrics.get('timings', {}))}",
             f"- calibration: {_pairs(calibration) if calibration else 'none'}",
             ""]
    comparison = metrics.get("baselines") or {}
    for split in ("validation", "test"):
        rows = comparison.get(split) or {}
        if not rows:
            continue
        lines += [f"## {split.capitalize()}: {version.name} against the baselines", "",
                  "| metric | threshold | accuracy | κ | ROC AUC | Pearson | n |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for name, row in rows.items():
            cells = [_fmt(comparison.get("thresholds", {}).get(name))] + [
                _fmt(row.get(key)) for key in ("accuracy", "kappa", "roc_auc", "pearson")]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {row.get('n')} |")
        lines.append("")
    if comparison.get("unavailable"):
        lines += [f"Baselines not measured: {_pairs(comparison['unavailable'])}", ""]
    decision = metrics.get("promotion_decision")
    if decision:
        verdict = "promoted" if decision.get("promoted") else "not promoted"
        lines += ["## Promotion decision", "", f"- decision: **{verdict}**"]
        lines += [f"- {key.replace('_', ' ')}: {_pairs(value) if isinstance(value, dict) else _fmt(value)}"
                  for key, value in decision.items() if key != "promoted"]
        lines.append("")
    return "\n".join(lines)


def model_version_summary(version: ModelVersion) -> dict:
    """What a finished version recorded, for a terminal: its numbers against the baselines, the
    promotion decision, the counts it trained on, its timings and the data it pinned
    (`train_lerc --sync`, `scripts/gpu_worker_check.py`)."""
    metrics = version.metrics or {}
    return {
        "validation": metrics.get("validation"),
        "test": metrics.get("test"),
        "baselines": (metrics.get("baselines") or {}).get("test"),
        "promotion": metrics.get("promotion_decision"),
        # The counts actually trained, validated and tested (after the caps).
        "examples": metrics.get("examples"),
        "timings": metrics.get("timings"),
        "distillation": ((metrics.get("training") or {}).get("calibration")
                         or {}).get("distillation"),
        "data": {k: version.data_snapshot.get(k) for k in
                 ("judgment_count", "max_judgment_id", "judgment_ids_sha256")},
        "artifact": version.artifact_uri,
    }


def model_card_refresh(version: ModelVersion) -> bool:
    """Rewrite MODEL_CARD.md in the version's local model folder from the database, so the
    card on disk follows the status (it was written while training and still said "status:
    training" after promotion). Runs after the surrounding transaction commits; a model kept
    on S3 is left alone (the admin renders the current card). True when a card was written."""
    from pathlib import Path

    from django.db import transaction

    from metrics_app.services.lerc_artifacts import is_s3

    uri = version.artifact_uri
    if not uri or is_s3(uri) or not Path(uri).is_dir():
        return False

    def write() -> None:
        fresh = ModelVersion.objects.filter(pk=version.pk).first()
        if fresh is not None:
            try:
                (Path(uri) / "MODEL_CARD.md").write_text(model_card(fresh))
            except OSError:  # a read-only artifact folder: the admin still shows the card
                pass

    transaction.on_commit(write)
    return True


def _fmt(value) -> str:
    if isinstance(value, list | tuple) and any(isinstance(v, dict) for v in value):
        # Records (a decision's comparisons per project, `takeovers`): one after another.
        return "; ".join(_pairs(v) if isinstance(v, dict) else _fmt(v) for v in value)
    if isinstance(value, list | tuple):
        return ", ".join(_fmt(v) for v in value) or "–"
    if isinstance(value, float) and value and abs(value) < 0.001:
        return f"{value:.3g}"  # a learning rate of 2e-05 read "0.000"
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _seconds(value) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_seconds(v) for v in value) or "–"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:.1f}"
    return _fmt(value)


def write_model_card(folder, version: ModelVersion, metrics: dict, snapshot: dict) -> None:
    """MODEL_CARD.md and model_card.json beside the weights, so an artifact describes itself
    (the admin renders the same card from the database, with the promotion decision)."""
    from pathlib import Path

    folder = Path(folder)
    shown = ModelVersion(name=version.name, number=version.number, kind=version.kind,
                         backbone=version.backbone, config=version.config, metrics=metrics,
                         status=version.status, id=version.id)
    (folder / "MODEL_CARD.md").write_text(model_card(shown))
    (folder / "model_card.json").write_text(json_dumps_strict(
        {"name": version.name, "number": version.number, "config": version.config,
         "data_snapshot": snapshot, "metrics": metrics}, indent=2, default=str))


CARD_MEASURES = ("accuracy", "kappa", "roc_auc", "pearson")
SPLIT_ORDER = {"train": 0, "val": 1, "validation": 1, "test": 2}
CHART_MEASURES = ("pearson", "accuracy", "roc_auc", "kappa")  # the first one measured is drawn


def model_card_page(version: ModelVersion, *, visible_project_ids: set[int] | None) -> dict:
    """What the model card page shows (metrics/models/<id>/): the card's numbers as tables and
    a chart per split, the data it saw per project, options, timings, the promotion decision
    and the version's log. `visible_project_ids` (None: all) limits the projects named; the
    others are counted, not named."""
    from metrics_app.reports.charts import baseline_bars

    metrics = version.metrics or {}
    snapshot = version.data_snapshot or {}
    per_project = snapshot.get("projects") or {}
    hidden_slugs = hidden_project_slugs(version, visible_project_ids)
    events = list(version.events.select_related("user"))
    for event in events:  # shown, never saved: "created: projects: a, b" names them all
        event.detail = _redact(event.detail, hidden_slugs)
    projects, hidden = [], 0
    # The metric its scores are stored under (the rule is the same for lerc and lerc_prob).
    scored_metric = next((metric for metric, model in LEARNED_METRIC_MODELS.items()
                          if model == version.name), version.name)
    for project in version.projects.order_by("slug"):
        if visible_project_ids is not None and project.pk not in visible_project_ids:
            hidden += 1
            continue
        seen = per_project.get(project.slug) or {}
        projects.append({"project": project, "judgments": seen.get("judgments"),
                         "items": seen.get("items"), "watermark": seen.get("watermark"),
                         # The answers the project's pages never measure this version on.
                         "left_out": len(learned_metric_seen_items(
                             project, scored_metric, f"v{version.number}"))})
    comparison = metrics.get("baselines") or {}
    thresholds = comparison.get("thresholds") or {}
    splits = []
    for split in ("validation", "test"):
        rows = comparison.get(split) or {}
        if not rows:
            continue
        measure = next((m for m in CHART_MEASURES
                        if any(isinstance(r, dict) and r.get(m) is not None
                               for r in rows.values())), None)
        splits.append({
            "name": split,
            "rows": [{"name": name, "is_model": name == "lerc",
                      "threshold": thresholds.get(name),
                      "cells": [{"value": row.get(key), "ci": row.get(f"{key}_ci")}
                                for key in CARD_MEASURES],
                      "n": row.get("n")}
                     for name, row in sorted(rows.items(), key=lambda r: (r[0] != "lerc", r[0]))],
            "measure": measure,
            "chart": baseline_bars(rows, measure=measure) if measure else None,
        })
    decision = metrics.get("promotion_decision") or {}
    training = metrics.get("training") or {}
    return {
        "version": version,
        "projects": projects,
        "hidden_projects": hidden,
        # PostgreSQL's JSON reorders keys: splits in their order, timings by name.
        # Display-ready: a split's count may itself be a mapping ("available": per split).
        "examples": {split: _pairs(n) for split, n in sorted(
            (metrics.get("examples") or snapshot.get("examples") or {}).items(),
            key=lambda kv: (SPLIT_ORDER.get(kv[0], 9), kv[0]))},
        "snapshot": {key.replace("_", " "): _fmt(snapshot.get(key)) for key in (
            "judgment_count", "max_judgment_id", "judgment_ids_sha256", "split_mode",
            "holdout_dataset", "znormalize") if snapshot.get(key) not in (None, "")},
        "dropped_items": _pairs(snapshot.get("dropped_items")) if snapshot.get(
            "dropped_items") else "",
        "options": {"training": _pairs((version.config or {}).get("train", {})),
                    "data": _redact(_pairs((version.config or {}).get("data", {})),
                                    hidden_slugs)},
        # Seconds, one decimal; a phase timed per epoch is a list of them.
        "timings": {phase: _seconds(value)
                    for phase, value in sorted((metrics.get("timings") or {}).items())},
        "calibration": _pairs(training["calibration"]) if training.get("calibration")
        else "none",
        "measures": CARD_MEASURES,
        "splits": splits,
        "unavailable": comparison.get("unavailable") or {},
        "decision": ({"promoted": bool(decision.get("promoted")),
                      "details": [(key.replace("_", " "),
                                   _pairs(value) if isinstance(value, dict) else _fmt(value))
                                  for key, value in decision.items() if key != "promoted"]}
                     if decision else None),
        "events": events,
    }


def hidden_project_slugs(version: ModelVersion, visible_project_ids: set[int] | None) -> list[str]:
    """The slugs of the projects a version names (trained on, pre-trained on) that the viewer
    may not see (`visible_project_ids`; None: a superuser, who sees all)."""
    if visible_project_ids is None:
        return []
    from annotation.models import Project

    named = {p.slug for p in version.projects.all()}
    named |= set(((version.config or {}).get("data") or {}).get("pretrain_projects") or [])
    return list(Project.objects.filter(slug__in=named).exclude(pk__in=visible_project_ids)
                .values_list("slug", flat=True))


def _redact(text: str, slugs: list[str]) -> str:
    """`text` with each of `slugs` (as a whole slug, not inside a longer one) replaced by
    HIDDEN_PROJECT."""
    for slug in sorted(slugs, key=len, reverse=True):
        text = re.sub(rf"(?<![\w-]){re.escape(slug)}(?![\w-])", HIDDEN_PROJECT, text or "")
    return text
