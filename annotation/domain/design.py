"""The STARC design (BRIEF, STARC paper §4.3 and appendix A): the design unit is the text a
participant reads — a OneStopQA paragraph (at any of its levels), a RACE article — and a
participant never gets two items of one unit, at any level, in any assignment or stage of a
project, or in another project holding the same text (a study's experiment modes are one project
each). The conditions of a unit are its items (question x text level); participant lists
rotate through them in a Latin square. Pure functions, no database: the picking code, the MTurk
HIT plans and the tests all use these.

Design unit of an item (`Item.design_unit`, stored; `design_unit_for` is the one derivation):
the unit given by the importer or the API; else from the external id of the OneStopQA/in-lab
conventions (`os21_1_2_Int` -> `os21_1`, RACE `r3919_1_Middle` -> `r3919`); else from
metadata (`article` and `paragraph`, or `article` alone); else none, and the item is a unit of
its own (`unit_key`).

The square: units are ranked within their dataset, the articles interleaved (`spread_by_article`:
each article's paragraphs spread evenly over the ranking, in article order, so consecutive units
are paragraphs of different articles and any run of up to ~N/n units — N units, n the most
paragraphs of one article — holds one paragraph per article; a RACE article is its own); unit j
with k conditions, ordered question-major and level-minor (q1 Ele, q1 Int, q1 Adv, q2 Ele …),
shows condition (j + p) mod k to participant p. Consecutive units of a dataset therefore rotate
the levels, so each participant's items are balanced over levels (and every participant gets
every dataset's units), and participants 0 … k-1 see each condition of a unit exactly once.
Picking pages (in-house, Prolific) use p = the participant's arrival order in the stage and take
a run of consecutive units (`LatinSquare.position`); MTurk HIT plans use fixed lists
L = 0 … K-1 (K the largest k), list L holding unit j at condition (j + L) mod k when L < k:
every condition in exactly one list, each HIT a run of it. A run of consecutive units is what
keeps a participant's batch to one paragraph per article: in the guessing and pilot modes the
paragraph shown after an item would otherwise help with the next question of its article, and
the paper draws a participant's trials from different articles.
"""
from __future__ import annotations

import dataclasses
import heapq
import re
from collections import Counter, defaultdict, deque
from collections.abc import Hashable, Iterable, Mapping, Sequence

LEVEL_ORDER = ("Ele", "Int", "Adv", "Middle", "High")
ONESTOPQA_ID = re.compile(r"^(os\d+_\d+)_\d+_[A-Za-z]+$")  # os<article>_<paragraph>_<q>_<level>
RACE_ID = re.compile(r"^(r\d+)_\d+_[A-Za-z]+$")  # r<article file>_<q>_<level>
MAX_UNIT_LENGTH = 100


def ordered_levels(levels: Iterable[str]) -> list[str]:
    """OneStopQA's order (Ele, Int, Adv), then RACE's (Middle, High), any other level after
    them alphabetically."""
    return sorted(set(levels), key=lambda v: (LEVEL_ORDER.index(v) if v in LEVEL_ORDER else 99,
                                              v))


def design_unit_for(*, external_id: str = "", metadata: Mapping | None = None) -> str:
    """The design unit of an item that was not given one (see the module docstring); "" when
    none can be told (the item is then its own unit)."""
    for pattern in (ONESTOPQA_ID, RACE_ID):
        match = pattern.match(external_id or "")
        if match:
            return match.group(1)
    metadata = metadata if isinstance(metadata, Mapping) else {}
    article, paragraph = metadata.get("article"), metadata.get("paragraph")
    if article in (None, ""):
        return ""
    unit = f"article {article}" if paragraph in (None, "") else \
        f"article {article} paragraph {paragraph}"
    return unit[:MAX_UNIT_LENGTH]


def unit_key(*, item_id: int, design_unit: str) -> str:
    """The unit an item belongs to in the design: its design unit, or itself."""
    return design_unit or f"item:{item_id}"


def _natural(text: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


ONESTOPQA_UNIT = re.compile(r"^(os\d+)_\d+$")  # os<article>_<paragraph>
METADATA_UNIT = re.compile(r"^(article .+) paragraph [^ ]+$")  # `design_unit_for`'s metadata unit


def article_of(unit: str) -> str:
    """The article a design unit is a paragraph of (`os21_1` -> `os21`, `article 7 paragraph
    2` -> `article 7`); any other unit (a RACE article, a unit named by hand, an item of its
    own) is an article of its own."""
    for pattern in (ONESTOPQA_UNIT, METADATA_UNIT):
        match = pattern.match(unit)
        if match:
            return match.group(1)
    return unit


def spread_order(articles: Sequence[str]) -> list[int]:
    """A permutation of the indexes of `articles` (the article of each unit, in a preferred
    order) that spreads each article's units evenly over the order: its i-th of n aims at
    (i + 1/2) / n, ties in the order of the articles' first appearance, each article's own units
    kept in the given order. Never two of one article in a row while another can come between
    (an article that the others could only just keep apart goes next), so consecutive units
    are of different articles wherever the mix allows (where it does not, each unit at its aim,
    the repeats spread); an order whose units are all of different articles stays as it is.
    Heaps, their stale entries skipped: O(n log n)."""
    queues: dict[str, deque[int]] = defaultdict(deque)
    for n, article in enumerate(articles):
        queues[article].append(n)
    total = {article: len(queue) for article, queue in queues.items()}
    rank = {article: r for r, article in enumerate(queues)}

    def aim(article: str) -> tuple[float, int]:
        placed = total[article] - len(queues[article])
        return (2 * placed + 1) / (2 * total[article]), rank[article]

    by_aim = [(aim(a), a) for a in queues]
    by_left = [(-total[a], rank[a], a) for a in queues]
    heapq.heapify(by_aim)
    heapq.heapify(by_left)
    order: list[int] = []
    last = None
    while len(order) < len(articles):
        left = len(articles) - len(order)
        while by_left and -by_left[0][0] != len(queues[by_left[0][2]]):
            heapq.heappop(by_left)  # stale
        most = by_left[0][2]
        if 2 * len(queues[most]) > left + 1:
            last = None  # too many of one article to keep apart: each unit at its aim
        if most != last and 2 * len(queues[most]) == left + 1:
            chosen = most  # later, the others could no longer keep it apart
        else:
            skipped, chosen = [], None
            while by_aim:
                key, article = heapq.heappop(by_aim)
                if not queues[article] or key != aim(article):
                    continue  # stale
                skipped.append((key, article))
                if article != last:
                    chosen = article
                    break
            chosen = chosen or skipped[0][1]  # only `last` is left
            for entry in skipped:
                heapq.heappush(by_aim, entry)
        order.append(queues[chosen].popleft())
        last = chosen
        if queues[chosen]:
            heapq.heappush(by_aim, (aim(chosen), chosen))
            heapq.heappush(by_left, (-len(queues[chosen]), rank[chosen], chosen))
    return order


def spread_by_article(units: Sequence[str]) -> list[str]:
    """`units` reordered by `spread_order` of their articles (`article_of`)."""
    return [units[n] for n in spread_order([article_of(unit) for unit in units])]


@dataclasses.dataclass(frozen=True)
class Condition:
    """One item as a condition of the design."""

    item_id: int
    unit: str
    level: str = ""
    dataset: str = ""
    question: Hashable = None  # orders a unit's conditions; the item id when None


class LatinSquare:
    """The square over `conditions` (one per item; see the module docstring)."""

    def __init__(self, conditions: Iterable[Condition]):
        by_unit: dict[str, list[Condition]] = defaultdict(list)
        for condition in conditions:
            by_unit[condition.unit].append(condition)
        levels = ordered_levels(c.level for group in by_unit.values() for c in group)
        self.units: dict[str, list[Condition]] = {}
        for unit, group in by_unit.items():
            # Question-major, level-minor: the position of an item among the unit's items of
            # its level is its question rank, so a unit with a missing item still rotates.
            rank: dict[int, int] = {}
            for level in {c.level for c in group}:
                same = sorted((c for c in group if c.level == level),
                              key=lambda c: (_natural(str(c.question)) if c.question is not None
                                             else (), c.item_id))
                rank.update({c.item_id: n for n, c in enumerate(same)})
            self.units[unit] = sorted(group, key=lambda c: (rank[c.item_id],
                                                            levels.index(c.level), c.item_id))
        self.index: dict[str, int] = {}
        by_dataset: dict[str, list[str]] = defaultdict(list)
        for unit, group in self.units.items():
            by_dataset[group[0].dataset].append(unit)
        for units in by_dataset.values():
            for j, unit in enumerate(spread_by_article(sorted(units, key=_natural))):
                self.index[unit] = j
        self.n_lists = max((len(group) for group in self.units.values()), default=0)
        self.unit_of = {c.item_id: unit for unit, group in self.units.items() for c in group}

    def position(self, item_id: int) -> tuple:
        """Sort key that alternates the datasets: each dataset's first unit, then the second …
        (within a dataset, the interleaved articles of the ranking)."""
        unit = self.unit_of[item_id]
        return self.index[unit], self.units[unit][0].dataset, _natural(unit)

    def condition_for(self, unit: str, participant: int) -> Condition:
        """What participant `participant` (0, 1, … in arrival order) sees of `unit`."""
        group = self.units[unit]
        return group[(self.index[unit] + participant) % len(group)]

    def preference(self, unit: str, participant: int) -> list[Condition]:
        """The unit's conditions in the order `participant` should get them: theirs first, then
        the following ones (used when theirs is already full)."""
        group = self.units[unit]
        start = (self.index[unit] + participant) % len(group)
        return group[start:] + group[:start]

    def list_items(self, list_index: int) -> list[int]:
        """The items of fixed list `list_index` (0 … n_lists-1): one per unit with more than
        `list_index` conditions, so that the lists hold every condition exactly once."""
        return [self.condition_for(unit, list_index).item_id
                for unit, group in self.units.items() if list_index < len(group)]


def design_violations(exposures: Iterable[tuple[Hashable, Hashable, Hashable]], *,
                      conditions: Mapping[Hashable, Iterable[Hashable]] | None = None
                      ) -> list[str]:
    """What breaks the design in (participant, unit, condition) exposures — what pages showed or
    judgments recorded: a participant who got two items of one unit (two questions, or one at two
    levels, or the same twice), and a unit whose conditions are unevenly covered across
    participants (counts differing by more than one; `conditions` names each unit's full set, so
    that a condition nobody got counts as 0). Empty when the design holds."""
    problems = []
    seen: dict[Hashable, Counter] = defaultdict(Counter)
    per_unit: dict[Hashable, Counter] = defaultdict(Counter)
    for participant, unit, condition in exposures:
        seen[participant][unit] += 1
        per_unit[unit][condition] += 1
    for participant, units in seen.items():
        repeated = [u for u, n in units.items() if n > 1]
        if repeated:
            problems.append(f"participant {participant} got {len(repeated)} unit(s) more than "
                            f"once: {repeated[:3]}")
    for unit, counts in per_unit.items():
        full = set((conditions or {}).get(unit, ())) | set(counts)
        values = [counts.get(c, 0) for c in full]
        if values and max(values) - min(values) > 1:
            problems.append(f"unit {unit}: conditions unevenly covered {dict(counts)}")
    return problems


def balance_violations(exposures: Iterable[tuple[Hashable, Hashable]], *, slack: int = 1,
                       values: Sequence[Hashable] | None = None) -> list[str]:
    """(participant, value) exposures — value a text level or a dataset: participants whose
    counts over the values differ by more than `slack`."""
    per: dict[Hashable, Counter] = defaultdict(Counter)
    every = set(values or ())
    for participant, value in exposures:
        per[participant][value] += 1
        every.add(value)
    problems = []
    for participant, counts in per.items():
        numbers = [counts.get(v, 0) for v in every]
        if max(numbers) - min(numbers) > slack:
            problems.append(f"participant {participant}: unbalanced {dict(counts)}")
    return problems
