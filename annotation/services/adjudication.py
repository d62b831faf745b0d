"""Adjudication: the items annotators disagree on most, and a researcher's decision on them.

The queue ranks items with at least two judgments that count (the counting rule of every
report) by disagreement: for Likert items the spread of the scores (population standard
deviation), for A/B and multiple-choice items the entropy of the answers (bits). A recorded
adjudication becomes the item's label at every door that reads one (the rule:
`annotation.judgment_selectors.with_adjudications`); it is append-only, so a second decision
on the same item replaces the first and both stay.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from statistics import pstdev

from annotation.domain.control_characters import MAX_NOTE_CHARS, note_problem
from annotation.domain.numbers import ascii_whole_number
from annotation.judgment_selectors import latest_adjudications
from annotation.models import Adjudication, Item, Project, TaskKind
from annotation.selectors import judgments_that_count
from core.vocabulary import AB_CHOICES, MC_ROLES


class AdjudicationInvalid(ValueError):
    """The decision does not fit the item (wrong value for its kind, a note too long)."""


@dataclass
class QueueItem:
    item_id: int
    external_id: str
    content: dict
    disagreement: float
    answers: list[tuple[str, str]] = field(default_factory=list)  # (worker, answer)
    adjudicated: Adjudication | None = None


def _answer(kind: str, score, choice: str) -> str | None:
    if kind == TaskKind.LIKERT:
        return None if score is None else format(score, "g")
    return choice or None


def _disagreement(kind: str, answers: list[str]) -> float:
    if kind == TaskKind.LIKERT:
        return pstdev(float(a) for a in answers)
    counts = Counter(answers)
    total = len(answers)
    return -sum(n / total * math.log2(n / total) for n in counts.values()) + 0.0


def adjudication_queue(*, project: Project, limit: int = 50,
                       include_decided: bool = False) -> list[QueueItem]:
    """The `limit` items with the most disagreement, most first (ties: item order). Items
    already adjudicated are left out unless `include_decided`."""
    rows = (judgments_that_count(project=project)
            .values_list("item_id", "worker__external_id", "score", "choice").order_by("id"))
    answers: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for item_id, worker, score, choice in rows:
        answer = _answer(project.kind, score, choice)
        if answer is not None:
            answers[item_id].append((worker, answer))
    decided = latest_adjudications(project=project)
    ranked = sorted(
        ((-_disagreement(project.kind, [a for _, a in given]), item_id)
         for item_id, given in answers.items()
         if len(given) >= 2 and (include_decided or item_id not in decided)))
    ranked = [(score, item_id) for score, item_id in ranked if score < 0][:limit]
    items = Item.objects.in_bulk([item_id for _, item_id in ranked])
    return [QueueItem(item_id=item_id, external_id=items[item_id].external_id,
                      content=items[item_id].content or {}, disagreement=-score,
                      answers=answers[item_id], adjudicated=decided.get(item_id))
            for score, item_id in ranked]


def adjudication_choices(project) -> list[str]:
    """The labels a researcher may record on the project's items: every point of its Likert
    scale (`Project.scale_top`), the A/B sides, or the STARC roles."""
    if project.kind == TaskKind.LIKERT:
        return [str(score) for score in range(1, project.scale_top + 1)]
    return list(AB_CHOICES if project.kind == TaskKind.AB else MC_ROLES)


def adjudication_record(*, item: Item, value, note: str = "", user=None) -> Adjudication:
    """Store a decision on `item`: a score of the project's Likert scale, or an A/B choice,
    or a STARC role A-D. AdjudicationInvalid names what is wrong; nothing is stored then."""
    kind = item.project.kind
    text = str(value).strip() if value is not None else ""
    if kind == TaskKind.LIKERT:
        score = ascii_whole_number(text)
        top = item.project.scale_top
        if score is None or not 1 <= score <= top:
            raise AdjudicationInvalid(f"the label must be a score from 1 to {top}")
        fields = {"score": float(score)}
    else:
        allowed = AB_CHOICES if kind == TaskKind.AB else MC_ROLES
        if text.upper() not in allowed:
            raise AdjudicationInvalid(f"the label must be one of {', '.join(allowed)}")
        fields = {"choice": text.upper()}
    note = (note or "").strip()
    problem = note_problem(note, MAX_NOTE_CHARS)
    if problem:
        raise AdjudicationInvalid(problem)
    return Adjudication.objects.create(item=item, note=note, decided_by=user, **fields)


def adjudicated_labels(*, project: Project) -> dict[int, dict]:
    """item id → {"label", "note", "by", "at"} of its latest adjudication (for exports)."""
    return {item_id: {"label": a.label, "note": a.note,
                      "by": a.decided_by.get_username() if a.decided_by else "",
                      "at": a.created_at.isoformat()}
            for item_id, a in latest_adjudications(project=project).items()}
