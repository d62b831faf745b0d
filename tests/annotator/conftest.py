"""Fixtures for the annotator pages: a published stage of each kind with a few items."""
from __future__ import annotations

import pytest

from annotation.models import ExperimentMode, Provider, StageStatus, TaskKind
from tests.factories import (
    item_content,
    item_gold,
    make_item,
    make_project,
    make_stage,
    make_worker,
)

SHARED_PASSAGE = (
    "I got all of the ingredients I would need together to make the coffee and brought them "
    "to the company coffee machine. I filled the tank with water, put in a filter and two "
    "spoons of ground coffee, and pressed the button. Five minutes later the whole office "
    "smelled of fresh coffee."
)
LIKERT_QA = [
    ("How was the coffee made?", ["With a coffee machine"], "With a personal coffee machine"),
    ("What did the narrator put in the tank?", ["Water"], "ground coffee"),
    ("How long did the coffee take?", ["Five minutes"], "about five minutes"),
]


def make_task(kind: str, *, n_items: int = 3, mode: str = "", group: str = "",
              provider: str = Provider.INHOUSE, **project_fields):
    project_fields.setdefault("items_per_hit", n_items)
    if kind == TaskKind.MC:
        project_fields.setdefault("experiment_mode", mode or ExperimentMode.QA)
    if kind == TaskKind.AB:
        project_fields.setdefault("justification_min_length", 20)
    project = make_project(kind, **project_fields)
    items = []
    for n in range(n_items):
        content = item_content(kind, n)
        if kind == TaskKind.LIKERT:
            # One HIT shares one passage (MOCHA); questions differ.
            content["passage"] = SHARED_PASSAGE
            content["question"], content["references"], content["candidate"] = LIKERT_QA[n % 3]
        items.append(make_item(project, gold=item_gold(kind), group_key=group, content=content))
    stage = make_stage(project, status=StageStatus.PUBLISHED, provider=provider)
    return project, stage, items


@pytest.fixture
def likert_task(db):
    return make_task(TaskKind.LIKERT, group="passage-1")


@pytest.fixture
def ab_task(db):
    return make_task(TaskKind.AB)


@pytest.fixture
def worker(db):
    return make_worker()
