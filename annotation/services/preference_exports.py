"""Preference pairs for training ({prompt, chosen, rejected}, as DPO and reward-model trainers
read them) from an A/B project's judgments.

One row per item with a clear human preference: the item's label (a researcher's adjudication
when recorded, else the project's aggregation model, `aggregate_rows`) names the chosen answer.
Left out unless asked: ties (the label is a tie choice, `AB_TIE_CHOICES`) and contested items
(no strict majority between the answers, or agreement — the share of the item's judgments that
chose the label — below `min_agreement`; an adjudicated item is never contested). Never: an
item whose two answers are one text (`answers_identical`: the pick was a guess). Each row's metadata carries the votes, the agreement,
the aggregation model and where the label came from, and the systems of both answers.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from annotation.domain.answers import AB_TIE_CHOICES
from annotation.domain.item_content import answer_system, answers_identical
from annotation.models import Judgment, Project, Stage, TaskKind
from annotation.selectors import judgments_that_count
from core.json_limits import json_dumps_strict
from core.vocabulary import AB_CHOICES

from .exports import aggregate_rows, non_data_stage_error


class PreferenceExportError(ValueError):
    """A preference export that cannot be made; the message says why."""


def _votes(project: Project, stage: Stage | None) -> dict[str, dict[str, int]]:
    """item external id → votes per choice, ties included (`choice_counts` of the aggregate
    rows counts A and B only)."""
    queryset = judgments_that_count(Judgment.objects.filter(item__project=project),
                                    project=project, data_stages_only=True)
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    counts: dict[str, dict[str, int]] = {}
    for item, choice in queryset.values_list("item__external_id", "choice").iterator(
            chunk_size=2000):
        if choice:
            votes = counts.setdefault(item, {})
            votes[choice] = votes.get(choice, 0) + 1
    return counts


def preference_rows(*, project: Project, stage: Stage | None = None,
                    min_agreement: float = 0.0, include_ties: bool = False,
                    include_contested: bool = False,
                    aggregation: str | None = None) -> Iterator[dict[str, Any]]:
    """{prompt, chosen, rejected, metadata} per item (see the module docstring). A tie row,
    when asked for, has `chosen`/`rejected` set to answers A/B and `metadata.tie` true."""
    if project.kind != TaskKind.AB:
        raise PreferenceExportError(
            f"{project.slug} is a {project.kind} project: preference pairs come from A/B items")
    if not 0 <= min_agreement <= 1:
        raise PreferenceExportError(f"min_agreement must be between 0 and 1, got {min_agreement}")
    if why := non_data_stage_error(stage):
        # Its votes were counted and its labels read from the data stages: an empty file.
        raise PreferenceExportError(f"{why}; preference pairs come from data stages")
    votes_by_item = _votes(project, stage)
    for row in aggregate_rows(project=project, stage=stage, aggregation=aggregation,
                              progress=False):
        if not row["n_judgments"]:
            continue
        content = row["content"] or {}
        if answers_identical(content):
            continue  # chosen and rejected would be one text: nothing to learn from the pick
        votes = votes_by_item.get(row["external_id"]) or {}
        label = row["label"]
        total = sum(votes.values())
        a, b = votes.get("A", 0), votes.get("B", 0)
        tie = label in AB_TIE_CHOICES
        adjudicated = row["adjudicated"] is not None
        # Contested: no label (the votes split evenly), A and B equally often, or too few
        # judgments chose the label; a researcher's adjudication settles it.
        contested = not tie and not adjudicated and (
            label not in AB_CHOICES or a == b
            or votes.get(label, 0) / max(total, 1) < min_agreement)
        if (tie and not include_ties) or (contested and not include_contested):
            continue
        chosen_side = label if label in AB_CHOICES else ("A" if a >= b else "B")
        rejected_side = "B" if chosen_side == "A" else "A"
        systems = {side: answer_system(content, side, source=row["source"] or "",
                                       metadata=row["metadata"]) for side in AB_CHOICES}
        yield {
            "prompt": content.get("question", ""),
            "chosen": (content.get(f"answer_{chosen_side.lower()}") or {}).get("text", ""),
            "rejected": (content.get(f"answer_{rejected_side.lower()}") or {}).get("text", ""),
            "metadata": {
                "project": project.slug, "item": row["external_id"],
                "dataset": row["dataset"], "domain": row["domain"],
                "chosen_side": chosen_side, "rejected_side": rejected_side,
                "chosen_system": systems[chosen_side],
                "rejected_system": systems[rejected_side],
                "votes": votes, "n_judgments": total,
                "agreement": round(votes.get(label, 0) / total, 6) if total and label else None,
                "aggregation": row["aggregation"],
                "label_source": "adjudication" if adjudicated else "aggregation",
                "confidence": row["confidence"],
                "tie": bool(tie), "contested": bool(contested),
                "evidence": content.get("evidence") or [],
            },
        }


def preference_write(*, project: Project, out: IO[str], **options) -> int:
    """Write the preference pairs as JSON Lines; returns the number of rows."""
    count = 0
    for row in preference_rows(project=project, **options):
        out.write(json_dumps_strict(row, ensure_ascii=False) + "\n")
        count += 1
    return count
