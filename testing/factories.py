"""Plain factory functions for tests (no factory_boy): each creates one valid row with sensible
defaults; pass keyword arguments to override any field.

    project = make_project(kind="likert", owner=user)
    item = make_item(project, split="dev")
    stage = make_stage(project)
    judgment = make_judgment(item=item, stage=stage, score=4)
"""
from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

from annotation.domain.design import design_unit_for
from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    Hit,
    HitItem,
    InhouseLink,
    Item,
    Judgment,
    Project,
    Provider,
    Stage,
    StageKind,
    StageStatus,
    TaskKind,
    Worker,
    WorkerQualification,
)

_counter = itertools.count(1)


def _next() -> int:
    return next(_counter)


def item_content(kind: str, n: int = 0) -> dict[str, Any]:
    """Content that passes `validate_item_content` for `kind`."""
    if kind == TaskKind.LIKERT:
        return {
            "passage": f"Passage {n}: the cat sat on the mat.",
            "question": f"Where did the cat sit ({n})?",
            "references": ["on the mat"],
            "candidate": "on a mat",
        }
    if kind == TaskKind.AB:
        return {
            "question": f"Why is the sky blue ({n})?",
            "evidence": [],
            "answer_a": {"text": "Rayleigh scattering.", "kind": "human", "upvotes": 3},
            "answer_b": {"text": "Because of the sea.", "kind": "model", "upvotes": None},
            "setting": "HM",
        }
    if kind == TaskKind.MC:
        return {
            "paragraph": f"Paragraph {n}. Bees make honey from nectar.",
            "question": "What do bees make honey from?",
            "answers": ["Nectar", "Pollen", "Water", "Sugar cane"],
            "critical_span": [0, 10],
            "distractor_span": None,
        }
    raise ValueError(f"unknown kind {kind!r}")


def item_gold(kind: str) -> dict[str, Any]:
    return {TaskKind.LIKERT: {"score": 4}, TaskKind.AB: {"choice": "A"},
            TaskKind.MC: {"choice": "A"}}[kind]


def make_user(username: str | None = None, *, staff: bool = True, superuser: bool = False,
              password: str = "pw-test-12345", **fields):
    from django.contrib.auth import get_user_model

    User = get_user_model()
    username = username or f"user{_next()}"
    if superuser:
        return User.objects.create_superuser(username=username, password=password, **fields)
    return User.objects.create_user(
        username=username, password=password, is_staff=staff, **fields
    )


def make_project(kind: str = TaskKind.LIKERT, *, owner=None, shared_with=(), **fields) -> Project:
    n = _next()
    fields.setdefault("slug", f"project-{n}")
    fields.setdefault("title", f"Project {n}")
    project = Project.objects.create(kind=kind, owner=owner, **fields)
    if shared_with:
        project.shared_with.add(*shared_with)
    return project


def make_item(project: Project, **fields) -> Item:
    n = _next()
    fields.setdefault("external_id", f"item-{n}")
    fields.setdefault("content", item_content(project.kind, n))
    fields.setdefault("dataset", "demo")
    fields.setdefault("split", "dev")
    if not fields.get("design_unit"):  # as the importers and the items API derive it
        fields["design_unit"] = design_unit_for(external_id=fields["external_id"],
                                                metadata=fields.get("metadata"))
    return Item.objects.create(project=project, **fields)


def make_stage(project: Project, *, kind: str = StageKind.FULL, **fields) -> Stage:
    fields.setdefault("name", f"{kind} stage {_next()}")
    fields.setdefault("status", StageStatus.COLLECTING)
    fields.setdefault("provider", Provider.INHOUSE)
    return Stage.objects.create(project=project, kind=kind, **fields)


def make_worker(*, provider: str = Provider.INHOUSE, **fields) -> Worker:
    fields.setdefault("external_id", f"worker-{_next()}")
    return Worker.objects.create(provider=provider, **fields)


def make_hit(stage: Stage, *, items=(), **fields) -> Hit:
    fields.setdefault("provider", stage.provider)
    fields.setdefault("reward", Decimal("0.40"))
    hit = Hit.objects.create(stage=stage, **fields)
    for position, item in enumerate(items):
        HitItem.objects.create(hit=hit, item=item, position=position)
    return hit


def make_assignment(stage: Stage, *, worker: Worker | None = None, items=(),
                    status: str = AssignmentStatus.IN_PROGRESS, **fields) -> Assignment:
    worker = worker or make_worker(provider=stage.provider)
    assignment = Assignment.objects.create(stage=stage, worker=worker, status=status, **fields)
    for position, item in enumerate(items):
        AssignmentItem.objects.create(assignment=assignment, item=item, position=position)
    return assignment


def make_judgment(*, item: Item, stage: Stage | None = None, worker: Worker | None = None,
                  assignment: Assignment | None = None, **fields) -> Judgment:
    """A judgment with a kind-appropriate default value (score 3 / choice A)."""
    stage = stage or make_stage(item.project)
    worker = worker or make_worker()
    kind = item.project.kind
    if kind == TaskKind.LIKERT:
        fields.setdefault("score", 3)
    else:
        fields.setdefault("choice", "A")
    return Judgment.objects.create(
        item=item, stage=stage, worker=worker, assignment=assignment, **fields
    )


def make_qualification(*, worker: Worker, stage: Stage, passed: bool = True,
                       **fields) -> WorkerQualification:
    fields.setdefault("score", 1.0 if passed else 0.0)
    return WorkerQualification.objects.create(worker=worker, stage=stage, passed=passed, **fields)


def make_inhouse_link(*, worker: Worker, project: Project, **fields) -> InhouseLink:
    fields.setdefault("nonce", f"nonce-{_next()}")
    return InhouseLink.objects.create(worker=worker, project=project, **fields)
