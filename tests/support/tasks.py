"""Published annotation tasks of each kind, and what a task page sends and shows."""
from __future__ import annotations

import json
import re

from django.urls import reverse

from annotation.models import ExperimentMode, Provider, StageStatus, TaskKind
from testing.factories import (
    item_content,
    item_gold,
    make_item,
    make_project,
    make_stage,
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


def page_config(response) -> dict:
    match = re.search(rb'<script id="task-config" type="application/json">(.*?)</script>',
                      response.content, re.S)
    assert match, "the task page carries its JSON config"
    return json.loads(match.group(1))


def api(client, name: str, token: str, body: dict, **headers):
    return client.post(reverse(f"annotation:{name}"), data=json.dumps(body),
                       content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=token, **headers)


def shown_label(row_order: list[str], role: str, labels: str) -> str:
    return labels[row_order.index(role)]


def ab_answer(assignment, item, *, role="A", text="Answer A explains the cause much better."):
    order = assignment.assignmentitem_set.get(item=item).presented_order
    return {"item": item.pk, "shown_choice": shown_label(order, role, "AB"), "difficult": False,
            "justification": text, "aspects": ["factuality"], "time_spent_ms": 1234,
            "client_started_at": "2026-01-01T10:00:00Z"}
