"""Simulated workers for the provider end-to-end tests.

`submit_locally` writes what the task page writes when a worker submits (an assignment with the
HIT's items and one judgment per item); the end-to-end tests use the real task pages where they
exist (see test_mturk_e2e.py).
"""
from __future__ import annotations

from django.utils import timezone

from annotation.models import Assignment, AssignmentItem, AssignmentStatus, Judgment, Worker


def submit_locally(*, stage, hit, worker_external_id: str, external_id: str, scores=None,
                   choices=None, seconds_per_item: float = 6.0, items=None) -> Assignment:
    worker, _ = Worker.objects.get_or_create(provider=stage.provider,
                                             external_id=worker_external_id)
    if items is None:
        items = list(hit.items.order_by("hititem__position")) if hit is not None else list(
            stage.items.order_by("id")[: stage.project.items_per_hit])
    assignment = Assignment.objects.create(
        stage=stage, hit=hit, worker=worker, external_id=external_id,
        status=AssignmentStatus.SUBMITTED, submitted_at=timezone.now(),
    )
    for position, item in enumerate(items):
        AssignmentItem.objects.create(assignment=assignment, item=item, position=position)
        value = {}
        if scores is not None:
            value["score"] = scores[position % len(scores)]
        if choices is not None:
            value["choice"] = choices[position % len(choices)]
        Judgment.objects.create(item=item, worker=worker, stage=stage, assignment=assignment,
                                time_spent_ms=int(seconds_per_item * 1000), **value)
    return assignment
