"""Preference pairs for training ({prompt, chosen, rejected}, as DPO and reward-model trainers
read them) from an A/B project's judgments.

One row per item with a clear human preference: the item's label (a researcher's adjudication
when recorded, else the project's aggregation model, `aggregate_rows`) names the chosen answer.
Left out unless asked: ties (the label is a tie choice, `AB_TIE_CHOICES`) and contested items
(no strict majority between the answers, or agreement — the share of the item's judgments that
chose the label — below `min_agreement`; an adjudicated item is never contested) and gold
checks (`Item.is_gold_check`: attention checks chosen for their known answer, not a sample of
the systems' answers), by the rule of the leaderboard (`items_measured_on`, which
`board_mask` reads): a reward model trained on the pairs would learn the attention checks.
Never: an item whose two answers are one text (`answers_identical`: the pick was a guess);
practice items, excluded items and practice or qualification work never count
(`judgments_that_count`). Each row's metadata carries the votes, the agreement, the
aggregation model and where the label came from, the systems of both answers, and whether the
item is a gold check (`gold_check`, true only with `include_gold_checks`). `preference_write`
returns what it left out, by reason (`LEFT_OUT_REASONS`), for the door to say.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO, Any

from annotation.domain.answers import AB_TIE_CHOICES
from annotation.domain.item_content import answer_system, answers_identical
from annotation.models import Judgment, Project, Stage, TaskKind
from annotation.selectors import items_measured_on, judgments_that_count
from core.json_limits import json_dumps_strict
from core.vocabulary import AB_CHOICES

from .exports import aggregate_rows, non_data_stage_error


class PreferenceExportError(ValueError):
    """A preference export that cannot be made; the message says why."""


# Why an item with judgments that count is not a pair, in the order the door says them, and
# the option that brings it back (None: nothing does).
LEFT_OUT_REASONS = {
    "gold_check": ("gold-check item", "gold-check items", "attention checks with a known "
                   "answer, not a comparison of systems", "include_gold_checks"),
    "tie": ("tie", "ties", "the label is a tie", "include_ties"),
    "contested": ("contested item", "contested items", "no clear majority, or agreement "
                  "below the minimum", "include_contested"),
    "identical_answers": ("item with identical answers", "items with identical answers",
                          "the two answers are one text: the pick was a guess", None),
}


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
                    include_contested: bool = False, include_gold_checks: bool = False,
                    aggregation: str | None = None,
                    left_out: dict[str, int] | None = None) -> Iterator[dict[str, Any]]:
    """{prompt, chosen, rejected, metadata} per item (see the module docstring). A tie row,
    when asked for, has `chosen`/`rejected` set to answers A/B and `metadata.tie` true.
    `left_out`, when given, is filled with the number of judged items left out per reason
    (`LEFT_OUT_REASONS`)."""
    if project.kind != TaskKind.AB:
        raise PreferenceExportError(
            f"{project.slug} is a {project.kind} project: preference pairs come from A/B items")
    if not 0 <= min_agreement <= 1:
        raise PreferenceExportError(f"min_agreement must be between 0 and 1, got {min_agreement}")
    if why := non_data_stage_error(stage):
        # Its votes were counted and its labels read from the data stages: an empty file.
        raise PreferenceExportError(f"{why}; preference pairs come from data stages")
    votes_by_item = _votes(project, stage)
    # The board's study items (`items_measured_on`): no gold check, practice or excluded item.
    study = set(items_measured_on(project).values_list("external_id", flat=True))
    left_out = {} if left_out is None else left_out

    def leave_out(reason: str) -> None:
        left_out[reason] = left_out.get(reason, 0) + 1

    for row in aggregate_rows(project=project, stage=stage, aggregation=aggregation,
                              progress=False):
        if not row["n_judgments"]:
            continue
        # Outside the study items with judgments that count: a gold check (practice and
        # excluded items have none, nor a qualification's own items).
        if row["external_id"] not in study and not (include_gold_checks
                                                    and row["is_gold_check"]):
            leave_out("gold_check")
            continue
        content = row["content"] or {}
        if answers_identical(content):
            leave_out("identical_answers")
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
        if tie and not include_ties:
            leave_out("tie")
            continue
        if contested and not include_contested:
            leave_out("contested")
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
                "gold_check": bool(row["is_gold_check"]),
                "evidence": content.get("evidence") or [],
            },
        }


def preference_write(*, project: Project, out: IO[str], **options
                     ) -> tuple[int, dict[str, int]]:
    """Write the preference pairs as JSON Lines; returns the number of rows and the judged
    items left out, per reason (`preference_left_out_note` says them)."""
    count, left_out = 0, {}
    for row in preference_rows(project=project, left_out=left_out, **options):
        out.write(json_dumps_strict(row, ensure_ascii=False) + "\n")
        count += 1
    return count, left_out


def preference_left_out_note(left_out: dict[str, int],
                             spell: Callable[[str], str] = str) -> str:
    """What a preference export left out, in words, with the option that brings each back:
    "left out: 3 gold-check items (attention checks …; --include-gold-checks brings them
    back)" (`spell` writes the option as the door takes it), or "nothing left out"."""
    parts = []
    for reason, (one, many, why, option) in LEFT_OUT_REASONS.items():
        if n := left_out.get(reason):
            back = (f"; {spell(option)} brings {'it' if n == 1 else 'them'} back" if option
                    else "")
            parts.append(f"{n} {one if n == 1 else many} ({why}{back})")
    return "left out: " + ", ".join(parts) if parts else "nothing left out"
