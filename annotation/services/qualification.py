"""Grading the qualification stage (MOCHA appendix D).

A worker answers N items with known answers; an answer is correct when the multiple-choice or
A/B choice equals the gold choice, or the Likert score is within `project.qualification_tolerance`
of the gold score. Passing needs at least `project.qualification_threshold` of the N correct
(unanswered items count as wrong). The result is stored once per worker and stage — a failing
worker cannot retake — and granted on the provider (`qualification_grant`), where MTurk's
qualification value (the score in percent) also keeps failing workers out of the trial.
"""
from __future__ import annotations

from django.db import IntegrityError, transaction

from annotation.models import (
    Assignment,
    Item,
    Judgment,
    StageKind,
    TaskKind,
    WorkerQualification,
)
from annotation.services.provider_calls import provider_call_run


def answer_is_correct(*, item: Item, judgment: Judgment, tolerance: float = 0.0) -> bool | None:
    """Whether a judgment matches the item's gold answer (None: the item has no gold)."""
    gold = item.gold
    if not gold:
        return None
    if item.project.kind == TaskKind.LIKERT:
        if judgment.score is None or gold.get("score") is None:
            return False
        return abs(float(judgment.score) - float(gold["score"])) <= tolerance + 1e-9
    return bool(judgment.choice) and judgment.choice == gold.get("choice")


def qualification_grade(*, assignment: Assignment) -> WorkerQualification:
    """Grade a submitted qualification assignment (local only; no provider call).

    Idempotent: a worker's first result stands, so grading again (a redelivered task, a second
    qualification assignment) returns it unchanged.
    """
    stage = assignment.stage
    if stage.kind != StageKind.QUALIFICATION:
        raise ValueError(f"{stage} is not a qualification stage")
    existing = WorkerQualification.objects.filter(worker=assignment.worker, stage=stage).first()
    if existing is not None:
        return existing
    project = stage.project
    items = [item for item in assignment.items.select_related("project") if item.gold]
    judgments = {j.item_id: j for j in assignment.judgments.all()}
    correct = sum(
        1 for item in items
        if item.pk in judgments and answer_is_correct(
            item=item, judgment=judgments[item.pk], tolerance=project.qualification_tolerance)
    )
    score = correct / len(items) if items else 0.0
    passed = bool(items) and score >= project.qualification_threshold - 1e-9
    try:
        with transaction.atomic():
            return WorkerQualification.objects.create(
                worker=assignment.worker, stage=stage, passed=passed, score=score,
                n_items=len(items),
            )
    except IntegrityError:  # graded concurrently: the first result stands
        return WorkerQualification.objects.get(worker=assignment.worker, stage=stage)


def qualification_grant(*, qualification: WorkerQualification) -> WorkerQualification:
    """Record the result on the provider (MTurk: AssociateQualificationWithWorker with the
    score in percent; Prolific: passing participants join the allow-list group). Once only."""
    from annotation.providers import get_provider

    if qualification.granted_externally:
        return qualification
    stage = qualification.stage
    provider = get_provider(stage.provider)
    value = round(qualification.score * 100)
    provider_call_run(
        provider=stage.provider,
        operation="GrantQualification",
        key=f"{stage.provider}:qualification-grant:{qualification.pk}",
        call_fn=lambda _token: provider.grant_qualification(
            stage=stage, worker=qualification.worker, value=value, passed=qualification.passed
        ),
        stage=stage,
        worker=qualification.worker,
        request={"value": value, "passed": qualification.passed},
    )
    qualification.granted_externally = True
    qualification.save(update_fields=["granted_externally"])
    return qualification


def qualification_grade_on_submit(*, assignment: Assignment) -> WorkerQualification | None:
    """Called by `assignment_submit` for qualification stages: grade at once, so a passing
    worker can start the trial on our pages right away. The provider-side grant is a network
    call and is left to the periodic sync (`stage_auto_review`), keeping the submit request
    free of provider and broker calls."""
    if assignment.stage.kind != StageKind.QUALIFICATION:
        return None
    return qualification_grade(assignment=assignment)
