"""Agreement per group (dataset, split, source, domain, text level, stage) of a project."""
from __future__ import annotations

import numpy as np

from annotation.domain.agreement import (
    agreement_undefined_reason,
    fleiss_kappa_ci,
    fleiss_kappa_from_counts,
    krippendorff_alpha_ci,
    krippendorff_alpha_from_counts,
    percent_agreement_from_counts,
)
from annotation.judgment_selectors import GROUP_FIELDS, JudgmentFrame
from annotation.models import TaskKind

N_RESAMPLES = 1000


def group_agreement(frame: JudgmentFrame, mask: np.ndarray, *, with_ci: bool = True) -> dict:
    """Agreement of the judgments in `mask` at the level(s) fitting the project's kind.

    Likert: Krippendorff's α interval (the headline number, as in MOCHA) and ordinal.
    A/B and multiple choice: α nominal and Fleiss' κ (over the items with the most common
    number of judgments; the others are counted in `fleiss_items_skipped`). `alpha_undefined`:
    why α is null (no judgments, no item judged twice, one answer only), else null."""
    counts, domain = frame.counts(mask)
    n_items = int(len(counts))
    per_item = counts.sum(axis=1)
    row: dict = {
        "n_items": n_items,
        "n_judgments": int(per_item.sum()),
        "n_items_pairable": int((per_item >= 2).sum()),
        "percent_agreement": percent_agreement_from_counts(counts),
    }
    # Why α (and κ over the same items) has no value, when it has none: the statement every
    # door shows instead of a blank (`agreement_undefined_reason`).
    row["alpha_undefined"] = agreement_undefined_reason(counts, frame.value_labels())
    if frame.kind == TaskKind.LIKERT:
        row["level"] = "interval"
        row["krippendorff_alpha"] = krippendorff_alpha_from_counts(counts, domain, "interval")
        row["krippendorff_alpha_ordinal"] = krippendorff_alpha_from_counts(
            counts, domain, "ordinal"
        )
        row["fleiss_kappa"] = None  # nominal statistic; not meaningful for 1–5 scores
        if with_ci:
            row["alpha_ci"] = krippendorff_alpha_ci(
                counts, domain, "interval", n_resamples=N_RESAMPLES
            ).as_dict()
    else:
        row["level"] = "nominal"
        row["krippendorff_alpha"] = krippendorff_alpha_from_counts(counts, domain, "nominal")
        fleiss = fleiss_kappa_from_counts(counts)
        row["fleiss_kappa"] = fleiss.kappa
        row["fleiss_n_items"] = fleiss.n_items
        row["fleiss_n_raters"] = fleiss.n_raters
        row["fleiss_items_skipped"] = fleiss.n_items_skipped
        if with_ci:
            row["alpha_ci"] = krippendorff_alpha_ci(
                counts, domain, "nominal", n_resamples=N_RESAMPLES
            ).as_dict()
            row["fleiss_ci"] = fleiss_kappa_ci(counts, n_resamples=N_RESAMPLES).as_dict()
    return row


def agreement_report(
    frame: JudgmentFrame, *, group_by: str | None = None, base_mask: np.ndarray | None = None
) -> dict[str, dict]:
    """{"all": {...}, "<field>=<value>": {...}} for every group field with more than one value
    (or only `group_by`). Items without a value in the field are grouped under "(none)"."""
    if group_by is not None and group_by not in GROUP_FIELDS:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_FIELDS)}")
    base = frame.data_mask() if base_mask is None else base_mask
    report = {"all": group_agreement(frame, base)}
    fields = [group_by] if group_by else list(GROUP_FIELDS)
    for field in fields:
        labels, codes = frame.codes(field)
        present = np.unique(codes[base]) if len(frame) else np.array([], dtype=np.int64)
        if group_by is None and len(present) < 2:
            continue  # one group equals "all"
        for code in present:
            report[f"{field}={labels[code] or '(none)'}"] = group_agreement(
                frame, base & (codes == code)
            )
    return report
