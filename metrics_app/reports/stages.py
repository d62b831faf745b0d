"""Per-stage summary: judgments, agreement, and whether each gated stage's agreement guard
would pass (the trial → full decision at a glance)."""
from __future__ import annotations

import numpy as np

from annotation.judgment_selectors import (
    JudgmentFrame,
    agreement_override_reason,
    agreement_stage_for,
    stage_alpha,
    stage_mask,
)
from annotation.models import Project, Stage


def stages_report(frame: JudgmentFrame, *, project: Project) -> list[dict]:

    alphas: dict[int, float | None] = {}

    def alpha_of(stage: Stage) -> float | None:
        # The α the stage's gate checks (`stage_alpha`: its data, at its agreement level), read
        # from the frame when it holds the stage (a stage-narrowed report: from the database).
        if stage.pk not in alphas:
            alphas[stage.pk] = stage_alpha(stage=stage, frame=frame)
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
            "krippendorff_alpha": alpha_of(stage) if mask.any() else None,
            "gate": None,
        }
        if stage.agreement_threshold is not None:
            gating = agreement_stage_for(stage)
            alpha = alpha_of(gating) if gating is not None else None
            row["gate"] = {
                "stage": gating.name if gating is not None else None,
                "alpha": alpha,
                "threshold": stage.agreement_threshold,
                "passes": alpha is not None and alpha >= stage.agreement_threshold,
                # Published past a failing gate: say so rather than "blocked".
                "overridden": agreement_override_reason(stage),
            }
        rows.append(row)
    return rows
