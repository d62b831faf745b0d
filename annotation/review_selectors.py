"""What a researcher reads before approving or rejecting one assignment: each of its items with
this worker's answer, the gold answer, the other workers' answers to the same item and the
times, so a review is not blind (annotation/admin/crowd.py shows it on the assignment page)."""
from __future__ import annotations

import dataclasses
import statistics
from collections import Counter

from annotation.domain.answers import ab_label_shown, answer_matches_gold
from annotation.models import Assignment, AssignmentItem, Judgment, TaskKind
from annotation.selectors import judgments_that_count


@dataclasses.dataclass(frozen=True)
class ReviewRow:
    position: int
    item_id: int
    external_id: str
    question: str
    judged: list[tuple[str, str]]  # what the worker judged: (label, text), e.g. the candidate
    answer: str  # this worker's, "" when the item was not answered
    gold: str  # "" when the item has no gold answer
    matches_gold: bool | None  # `answer_matches_gold`, the project's tolerance (as the dashboard)
    is_practice: bool
    others: list[tuple[str, int]]  # (answer, how many other workers gave it), most given first
    agrees_with_others: bool | None  # the answer equals the others' most given answer
    seconds: float | None  # as the server measured it, else as the browser reported it
    client_seconds: float | None  # as the browser reported it
    others_median_seconds: float | None
    justification: str = ""  # this worker's, in full (A/B; `answer` shows it shortened)


def _clip(text, limit: int = 300) -> str:
    text = str(text or "")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def judged_parts(kind: str, content: dict) -> list[tuple[str, str]]:
    """What a worker judged besides the question, as the researcher reads it: the candidate
    and the references (Likert), the two answers (A/B), the four choices (multiple choice)."""
    content = content or {}
    if kind == TaskKind.LIKERT:
        refs = content.get("references") or ([content["reference"]] if content.get("reference")
                                             else [])
        return [("candidate", _clip(content.get("candidate"))),
                *((("reference" if len(refs) == 1 else f"reference {n}"), _clip(ref))
                  for n, ref in enumerate(refs, 1))]
    if kind == TaskKind.AB:
        return [(f"answer {side.upper()}", _clip((content.get(f"answer_{side}") or {})
                                                 .get("text")))
                for side in ("a", "b")]
    return [(letter, _clip(text, 160)) for letter, text in zip(
        "ABCD", content.get("answers") or [], strict=False)]


def answer_text(kind: str, *, score=None, choice: str = "", choices=None, difficult=None,
                justification: str = "", shown: str = "") -> str:
    """A judgment (or a gold answer) as the researcher reads it. `shown`: A/B, the letter the
    worker saw their choice under, said when it is not the file's (their justification names
    the sides as they saw them: "A — 'B is better'" read as a contradiction)."""
    if kind == TaskKind.LIKERT:
        return "" if score is None else f"{score:g}"
    if kind == TaskKind.MC and not choice and choices is not None:
        return "valid: " + (", ".join(choices) if choices else "none")
    text = choice
    if kind == TaskKind.AB and shown and shown != choice:
        text += f" (shown to them as {shown}: the answers were swapped on their page)"
    if kind == TaskKind.AB and difficult:
        text += " (hard to choose)"
    if justification:
        short = justification if len(justification) <= 120 else justification[:117] + "…"
        text += f" — “{short}”"
    return text


def _judgment_text(kind: str, judgment: Judgment) -> str:
    return answer_text(kind, score=judgment.score, choice=judgment.choice,
                       choices=judgment.choices if kind == TaskKind.MC else None,
                       difficult=judgment.difficult, justification=judgment.justification,
                       shown=ab_label_shown(judgment.choice, judgment.presented_order))


def _core(kind: str, judgment: Judgment) -> str:
    """The part of an answer compared across workers (no justification)."""
    if kind == TaskKind.LIKERT:
        return "" if judgment.score is None else f"{judgment.score:g}"
    return judgment.choice or ",".join(judgment.choices or [])


def _seconds(judgment: Judgment | None) -> float | None:
    """Seconds on the item: the server's measure, else the browser's (what review rules read)."""
    if judgment is None:
        return None
    ms = judgment.server_time_ms if judgment.server_time_ms is not None \
        else judgment.time_spent_ms
    return None if ms is None else ms / 1000


def assignment_review(*, assignment: Assignment) -> list[ReviewRow]:
    project = assignment.stage.project
    kind = project.kind
    placed = list(AssignmentItem.objects.filter(assignment=assignment)
                  .select_related("item").order_by("position"))
    item_ids = [p.item_id for p in placed]
    own = {j.item_id: j for j in Judgment.objects.filter(assignment=assignment)}
    others_by_item: dict[int, list[Judgment]] = {}
    for judgment in (judgments_that_count(project=project)
                     .filter(item_id__in=item_ids).exclude(worker_id=assignment.worker_id)
                     .only("item_id", "score", "choice", "choices", "time_spent_ms",
                           "server_time_ms")):
        others_by_item.setdefault(judgment.item_id, []).append(judgment)
    rows = []
    for placement in placed:
        item = placement.item
        mine = own.get(item.pk)
        others = others_by_item.get(item.pk, [])
        counts = Counter(_core(kind, j) for j in others if _core(kind, j))
        gold = item.gold or {}
        gold_core = (f"{gold['score']:g}" if kind == TaskKind.LIKERT and "score" in gold
                     else gold.get("choice", ""))
        mine_core = _core(kind, mine) if mine else ""
        verdict = answer_matches_gold(
            kind, gold, score=mine.score, choice=mine.choice,
            tolerance=project.qualification_tolerance) if mine is not None else None
        times = [seconds for seconds in map(_seconds, others) if seconds is not None]
        rows.append(ReviewRow(
            position=placement.position + 1, item_id=item.pk, external_id=item.external_id,
            question=str((item.content or {}).get("question", ""))[:200],
            judged=judged_parts(kind, item.content),
            answer=_judgment_text(kind, mine) if mine else "",
            gold=gold_core,
            matches_gold=verdict, is_practice=item.is_practice,
            others=counts.most_common(),
            agrees_with_others=(mine_core == counts.most_common(1)[0][0])
            if (mine_core and counts) else None,
            seconds=_seconds(mine),
            client_seconds=(mine.time_spent_ms / 1000
                            if mine is not None and mine.time_spent_ms is not None else None),
            others_median_seconds=statistics.median(times) if times else None,
            justification=mine.justification if mine is not None else "",
        ))
    return rows
