"""The STARC design: each participant sees each question at one text level only, and the levels
of a question are balanced across participants (a Latin square). Pure functions, no database:
the picking code, the MTurk HIT plans and the tests all use these.

A "question" is a STARC question across its text versions (OneStopQA's article, paragraph and
question numbers; items without them are their own question). With n levels in a fixed order,
participant list L (0 … n-1) sees question i at level (i + L) mod n: every list sees every
question once, and n participants on n lists see every (question, level) once.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence

LEVEL_ORDER = ("Ele", "Int", "Adv")


def ordered_levels(levels: Iterable[str]) -> list[str]:
    """OneStopQA's order (Ele, Int, Adv), any other level after them alphabetically."""
    return sorted(set(levels), key=lambda v: (LEVEL_ORDER.index(v) if v in LEVEL_ORDER else 99,
                                              v))


def question_key(*, item_id: int, article, paragraph, question) -> tuple:
    return (article, paragraph, question) if question is not None else ("item", item_id)


def latin_square_list(*, question_index: int, level_index: int, n_levels: int) -> int:
    """The participant list that sees question `question_index` at level `level_index`."""
    return (level_index - question_index) % n_levels


def level_for(*, question_index: int, list_index: int, n_levels: int) -> int:
    """The level index list `list_index` sees question `question_index` at."""
    return (question_index + list_index) % n_levels


def design_violations(exposures: Iterable[tuple[Hashable, Hashable, str]], *,
                      levels: Sequence[str] | None = None) -> list[str]:
    """What breaks the design in (participant, question, level) exposures — what pages showed or
    judgments recorded: a participant who saw a question at two levels (or twice), and a
    question whose levels are unbalanced across participants (counts differing by more than
    one). Empty when the design holds."""
    problems = []
    seen: dict[Hashable, Counter] = defaultdict(Counter)
    per_question: dict[Hashable, Counter] = defaultdict(Counter)
    all_levels = set(levels or ())
    for participant, question, level in exposures:
        seen[participant][question] += 1
        per_question[question][level] += 1
        all_levels.add(level)
    for participant, questions in seen.items():
        repeated = [q for q, n in questions.items() if n > 1]
        if repeated:
            problems.append(f"participant {participant} saw {len(repeated)} question(s) more "
                            f"than once (at several levels): {repeated[:3]}")
    for question, counts in per_question.items():
        values = [counts.get(level, 0) for level in all_levels]
        if values and max(values) - min(values) > 1:
            problems.append(f"question {question}: levels unbalanced {dict(counts)}")
    return problems
