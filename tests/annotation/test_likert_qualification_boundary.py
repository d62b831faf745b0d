"""The brief's Likert qualification (MOCHA appendix D): 10 gold items, a worker passes with at
least 80% correct, correct meaning within the project's tolerance of the gold score. At the
boundary: 8 of 10 passes and 7 of 10 fails, tolerance 0 against 1 (`qualification_grade`, the
one grading every door reaches: the task page's submit, the provider sync, the admin)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentStatus,
    StageKind,
    StageStatus,
    TaskKind,
    WorkerQualification,
)
from annotation.services.access import inhouse_link_create
from annotation.services.assignments import assignment_release_abandoned
from annotation.services.qualification import qualification_grade
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)
from tests.support.tasks import api, page_config

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("right,off_by,tolerance,passed", [
    (8, 1, 0, True),    # 8 of 10 exactly right: the pass mark itself
    (7, 1, 0, False),   # 7 of 10: one short
    (7, 1, 1, True),    # the three off by one are right within tolerance 1
    (7, 2, 1, False),   # off by two is wrong within tolerance 1
    (8, 2, 1, True),
])
def test_ten_gold_items_pass_at_eighty_percent_within_the_tolerance(right, off_by, tolerance,
                                                                     passed):
    project = make_project(TaskKind.LIKERT, qualification_threshold=0.8,
                           qualification_tolerance=tolerance)
    stage = make_stage(project, kind=StageKind.QUALIFICATION)
    items = [make_item(project, gold={"score": 3}) for _ in range(10)]
    worker = make_worker()
    assignment = make_assignment(stage, worker=worker, items=items,
                                 status=AssignmentStatus.SUBMITTED)
    for n, item in enumerate(items):
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                      score=3 if n < right else 3 + off_by)
    result = qualification_grade(assignment=assignment)
    expected_score = (right + (10 - right) * (off_by <= tolerance)) / 10
    assert (result.passed, result.n_items) == (passed, 10)
    assert result.score == pytest.approx(expected_score)


def test_answers_confirmed_on_a_page_that_timed_out_are_graded_with_the_rest(client):
    """A qualification is graded on every check item the worker was given, whichever of their
    pages answered it (`graded_assignments`): the answers a page confirmed one by one before
    it timed out stay theirs, and the page the link opens next serves only the rest, so grading
    that page alone passed a worker on the items they chose to leave for it."""
    project = make_project(TaskKind.LIKERT, owner=make_user(), items_per_hit=4,
                           qualification_threshold=0.8)
    items = [make_item(project, gold={"score": 4}, group_key="one passage") for _ in range(4)]
    stage = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.COLLECTING)
    stage.items.set(items)
    _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
    first = page_config(client.get(path))
    for item in first["items"][:2]:  # the two it is least sure of, answered and left
        assert api(client, "task-confirm", first["token"],
                   {"item": item, "answer": {"score": 1}}).status_code == 200
    Assignment.objects.update(last_seen_at=timezone.now() - timedelta(days=2))
    assert assignment_release_abandoned() == 1
    second = page_config(client.get(path))
    assert second["items"] == first["items"][2:]
    submitted = api(client, "task-submit", second["token"],
                    {"answers": [{"item": item, "score": 4} for item in second["items"]]})
    assert submitted.status_code == 200

    result = WorkerQualification.objects.get()
    assert (result.n_items, result.score, result.passed) == (4, 0.5, False)
