"""Per-stage summary: judgments, agreement, and whether each gated stage's agreement guard
would pass (the trial → full decision at a glance)."""
from __future__ import annotations

import numpy as np

from annotation.domain.agreement import NO_JUDGMENTS
from annotation.judgment_selectors import (
    JudgmentFrame,
    agreement_gate,
    stage_alpha_with_reason,
    stage_mask,
)
from annotation.models import Project, Stage


def stages_report(frame: JudgmentFrame, *, project: Project,
                  narrowed_to: Stage | None = None) -> list[dict]:
    """One row per stage of the project: its judgments, items and workers in `frame`, its α
    (or why it has none), and its agreement gate. A report narrowed to one stage holds no
    other stage's judgments: their rows say so instead of "no judgments"."""

    alphas: dict[int, tuple[float | None, str | None]] = {}

    def alpha_of(stage: Stage) -> tuple[float | None, str | None]:
        # The α the stage's gate checks (`stage_alpha`: its data, at its agreement level), read
        # from the frame when it holds the stage (a stage-narrowed report: from the database),
        # and why it is undefined when it is.
        if stage.pk not in alphas:
            alphas[stage.pk] = stage_alpha_with_reason(stage=stage, frame=frame)
        return alphas[stage.pk]

    rows = []
    for stage in project.stages.all().order_by("order", "pk"):
        mask = stage_mask(frame, stage)
        row = {
            "id": stage.pk,
            "name": stage.name,
            "kind": stage.kind,
            "status": stage.status,
            "n_judgments": int(mask.sum()),
            "n_items": int(len(np.unique(frame.item_id[mask]))),
            "n_workers": int(len(np.unique(frame.worker_id[mask]))),
            "krippendorff_alpha": None,
            "alpha_undefined": NO_JUDGMENTS,
            "gate": None,
        }
        if mask.any():
            row["krippendorff_alpha"], row["alpha_undefined"] = alpha_of(stage)
        elif narrowed_to is not None and stage.pk != narrowed_to.pk:
            row["alpha_undefined"] = f"this report reads stage “{narrowed_to.name}” only"
        if (gate := agreement_gate(stage, alpha_of=alpha_of)) is not None:
            row["gate"] = {
                "stage": gate.gating.name if gate.gating is not None else None,
                "alpha": gate.alpha,
                "alpha_undefined": gate.undefined,
                "threshold": gate.threshold,
                "passes": gate.passes,
                # Published past a failing gate: say so rather than "blocked".
                "overridden": gate.overridden,
            }
        rows.append(row)
    return rows
