"""The model card of a version (`MODEL_CARD.md`, `model_card.json`): data, training, validation
and test numbers against the baselines, and the promotion decision."""
from __future__ import annotations

import json

from metrics_app.models import ModelVersion


def model_card(version: ModelVersion) -> str:
    """A Markdown model card: data, options, timings and every number against the baselines."""
    metrics = version.metrics or {}
    lines = [f"# {version.name} v{version.number}", "",
             f"- status: {version.status}; backbone: {version.backbone}",
             f"- projects: {', '.join(p.slug for p in version.projects.order_by('slug'))}",
             f"- examples: {json.dumps(metrics.get('examples', {}))}",
             f"- training options: {json.dumps(version.config.get('train', {}), sort_keys=True)}",
             f"- data options: {json.dumps(version.config.get('data', {}), sort_keys=True)}",
             f"- timings: {json.dumps(metrics.get('timings', {}))}",
             f"- calibration: {json.dumps((metrics.get('training') or {}).get('calibration'))}",
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
        lines += [f"Baselines not measured: {json.dumps(comparison['unavailable'])}", ""]
    decision = metrics.get("promotion_decision")
    if decision:
        lines += ["## Promotion decision", "", "```", json.dumps(decision, indent=2), "```", ""]
    return "\n".join(lines)


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def write_model_card(folder, version: ModelVersion, metrics: dict, snapshot: dict) -> None:
    """MODEL_CARD.md and model_card.json beside the weights, so an artifact describes itself
    (the admin renders the same card from the database, with the promotion decision)."""
    from pathlib import Path

    folder = Path(folder)
    shown = ModelVersion(name=version.name, number=version.number, kind=version.kind,
                         backbone=version.backbone, config=version.config, metrics=metrics,
                         status=version.status, id=version.id)
    (folder / "MODEL_CARD.md").write_text(model_card(shown))
    (folder / "model_card.json").write_text(json.dumps(
        {"name": version.name, "number": version.number, "config": version.config,
         "data_snapshot": snapshot, "metrics": metrics}, indent=2, default=str))
