"""The STARC Latin square as pure functions (annotation.domain.design): the design unit of an
item, and the square's properties for any shape of units (paragraphs of 3 questions x 3 levels,
RACE articles with a varying number of questions, units with a missing item)."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.domain.design import (
    Condition,
    LatinSquare,
    article_of,
    balance_violations,
    design_unit_for,
    design_violations,
    spread_by_article,
    spread_order,
    unit_key,
)

LEVELS = ("Ele", "Int", "Adv")


@pytest.mark.parametrize(("external_id", "metadata", "unit"), [
    ("os21_1_2_Int", {}, "os21_1"),  # OneStopQA / in-lab: article 21, paragraph 1
    ("os2_3_3_Adv", {"article": 99, "paragraph": 9}, "os2_3"),  # the id's convention first
    ("r3919_1_Middle", {}, "r3919"),  # RACE: the article
    ("mine-1", {"article": 7, "paragraph": 2}, "article 7 paragraph 2"),
    ("mine-2", {"article": "guardian-4"}, "article guardian-4"),
    ("mine-3", {"paragraph": 2}, ""),  # a paragraph number alone names no text
    ("os21_1", {}, ""),  # not the full convention
    ("mine-4", None, ""),
])
def test_design_unit_for(external_id, metadata, unit):
    assert design_unit_for(external_id=external_id, metadata=metadata) == unit


def test_an_item_without_a_unit_is_its_own_unit():
    assert unit_key(item_id=5, design_unit="") == "item:5"
    assert unit_key(item_id=5, design_unit="os1_1") == "os1_1"


def _onestopqa(n_paragraphs: int, levels=LEVELS) -> list[Condition]:
    return [Condition(item_id=p * 100 + q * 10 + n, unit=f"os1_{p}", level=level,
                      dataset="onestopqa", question=q)
            for p in range(1, n_paragraphs + 1) for q in (1, 2, 3)
            for n, level in enumerate(levels)]


def test_a_participant_gets_each_paragraph_once_levels_and_questions_balanced():
    square = LatinSquare(_onestopqa(9))
    assert square.n_lists == 9
    for participant in range(12):
        got = [square.condition_for(unit, participant) for unit in square.units]
        assert len({c.unit for c in got}) == 9
        assert Counter(c.level for c in got) == {level: 3 for level in LEVELS}
        assert Counter(c.question for c in got) == {1: 3, 2: 3, 3: 3}
    every = Counter(square.condition_for(unit, p).item_id for unit in square.units
                    for p in range(9))
    assert set(every.values()) == {1} and len(every) == 81


def test_two_levels_as_the_prolific_pilot_six_lists():
    """The STARC pilot: Ele and Adv only, 3 questions: six conditions, six lists."""
    square = LatinSquare(_onestopqa(6, levels=("Ele", "Adv")))
    assert square.n_lists == 6
    for list_index in range(6):
        got = [square.unit_of[i] for i in square.list_items(list_index)]
        assert sorted(got) == sorted(square.units)
    levels = Counter(c.level for unit in square.units for c in [square.condition_for(unit, 0)])
    assert levels == {"Ele": 3, "Adv": 3}


units = st.lists(st.tuples(st.sampled_from(["onestopqa", "race"]),
                           st.integers(min_value=1, max_value=5),
                           st.lists(st.sampled_from(LEVELS), min_size=1, max_size=3,
                                    unique=True)),
                 min_size=1, max_size=8)


def _conditions(shape) -> list[Condition]:
    conditions, item_id = [], 0
    for n, (dataset, n_questions, levels) in enumerate(shape):
        for q in range(n_questions):
            for level in levels:
                item_id += 1
                conditions.append(Condition(item_id=item_id, unit=f"{dataset}-{n}",
                                            level=level, dataset=dataset, question=q))
    return conditions


@settings(max_examples=60, deadline=None)
@given(units, st.integers(min_value=1, max_value=40))
def test_any_shape_keeps_the_design(shape, n_participants):
    conditions = _conditions(shape)
    square = LatinSquare(conditions)
    full = {}
    for c in conditions:
        full.setdefault(c.unit, set()).add(c.item_id)
    # Picking pages: participant p gets every unit once; conditions within one of each other.
    exposures = [(p, unit, square.condition_for(unit, p).item_id)
                 for p in range(n_participants) for unit in square.units]
    assert design_violations(exposures, conditions=full) == []
    # HIT plans: the lists hold every condition exactly once, one item per unit per list.
    listed = [(L, square.unit_of[i], i) for L in range(square.n_lists)
              for i in square.list_items(L)]
    assert Counter(i for _L, _u, i in listed) == {c.item_id: 1 for c in conditions}
    assert design_violations(listed, conditions=full) == []
    # The fallback order starts with the participant's own condition and holds all of them.
    for unit in square.units:
        order = square.preference(unit, n_participants)
        assert order[0] == square.condition_for(unit, n_participants)
        assert sorted(c.item_id for c in order) == sorted(full[unit])


@pytest.mark.parametrize(("unit", "article"), [
    ("os21_1", "os21"), ("os2_13", "os2"),
    ("article 7 paragraph 2", "article 7"), ("article guardian-4", "article guardian-4"),
    ("r3919", "r3919"), ("lesson-4", "lesson-4"), ("item:5", "item:5"),
])
def test_article_of(unit, article):
    assert article_of(unit) == article


def test_the_ranking_interleaves_articles_so_a_run_of_units_is_one_paragraph_per_article():
    """OneStopQA's shape (articles of 4 to 7 paragraphs): consecutive units of the square are
    paragraphs of different articles, any run of N / n of them too (N units, n the most
    paragraphs of one article: 55 / 7 here), each article's paragraphs in order; the square
    keeps giving a participant a run of nine balanced over levels and questions."""
    shape = [4, 5, 6, 7, 5, 6, 4, 7, 6, 5]
    conditions = [Condition(item_id=a * 1000 + p * 10 + q * 3 + n, unit=f"os{a}_{p}",
                            level=level, dataset="onestopqa", question=q)
                  for a, n_paragraphs in enumerate(shape, start=1)
                  for p in range(1, n_paragraphs + 1) for q in (1, 2, 3)
                  for n, level in enumerate(LEVELS)]
    square = LatinSquare(conditions)
    ranking = sorted(square.units, key=square.index.__getitem__)
    assert len(ranking) == sum(shape)
    spread = len(ranking) // max(shape)
    assert spread == 7
    for start in range(len(ranking) - spread + 1):
        run = ranking[start:start + spread]
        assert len({article_of(u) for u in run}) == spread, run
    for start in range(len(ranking) - 8):
        got = [square.condition_for(unit, 4) for unit in ranking[start:start + 9]]
        assert Counter(c.level for c in got) == {level: 3 for level in LEVELS}
        assert Counter(c.question for c in got) == {1: 3, 2: 3, 3: 3}
    for a, n_paragraphs in enumerate(shape, start=1):
        assert [u for u in ranking if article_of(u) == f"os{a}"] == \
            [f"os{a}_{p}" for p in range(1, n_paragraphs + 1)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("abcdef"), max_size=30))
def test_spread_order_is_a_permutation_keeping_each_articles_order(articles):
    order = spread_order(articles)
    assert sorted(order) == list(range(len(articles)))
    for article in set(articles):
        assert [n for n in order if articles[n] == article] == \
            [n for n, a in enumerate(articles) if a == article]
    # No two of one article in a row whenever the mix allows it (no article over half).
    most = max(Counter(articles).values(), default=0)
    if 2 * most <= len(articles) + 1:
        assert all(articles[a] != articles[b] for a, b in zip(order, order[1:], strict=False))
    if len(set(articles)) == len(articles):
        assert order == list(range(len(articles)))  # already one unit per article: unchanged


def test_spread_by_article_separates_an_articles_paragraphs():
    assert spread_by_article(["os1_1", "os1_2", "os1_3", "os2_1", "os2_2", "os3_1"]) == \
        ["os1_1", "os2_1", "os1_2", "os3_1", "os2_2", "os1_3"]
    assert spread_by_article(["r2", "r1", "os5_1"]) == ["r2", "r1", "os5_1"]
    # Three of one article among three others: kept apart, not at their aims side by side.
    assert spread_by_article(["os1_1", "os1_2", "os1_3", "r1", "r2", "r3"]) == \
        ["os1_1", "r1", "os1_2", "r2", "r3", "os1_3"]
    # Too many of one article to keep apart: the repeats spread, not piled at the end.
    spread = [article_of(u) for u in spread_by_article(
        [f"os1_{p}" for p in range(1, 7)] + ["os2_1", "os2_2", "os2_3"])]
    pairs = [a == b for a, b in zip(spread, spread[1:], strict=False)]
    assert sum(pairs) == 2 and not any(a and b for a, b in zip(pairs, pairs[1:], strict=False))


def test_violations_name_what_breaks():
    problems = design_violations([("ann", "os1_1", ("q1", "Ele")), ("ann", "os1_1", ("q2", "Adv")),
                                  ("bob", "os1_2", ("q1", "Ele"))],
                                 conditions={"os1_2": {("q1", "Ele"), ("q1", "Int"),
                                                       ("q1", "Adv")}})
    assert problems == ["participant ann got 1 unit(s) more than once: ['os1_1']"]
    problems = design_violations([(n, "os1_2", ("q1", "Ele")) for n in range(3)],
                                 conditions={"os1_2": {("q1", "Ele"), ("q1", "Int")}})
    assert len(problems) == 1 and "os1_2: conditions unevenly covered" in problems[0]
    assert balance_violations([("ann", "Ele"), ("ann", "Ele"), ("ann", "Adv")], slack=0) \
        == ["participant ann: unbalanced {'Ele': 2, 'Adv': 1}"]
    assert balance_violations([("ann", "Ele"), ("ann", "Adv")], slack=0) == []
