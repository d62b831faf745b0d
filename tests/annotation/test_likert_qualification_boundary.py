"""The brief's Likert qualification (MOCHA appendix D): 10 gold items, a worker passes with at
least 80% correct, correct meaning within the project's tolerance of the gold score. At the
boundary: 8 of 10 passes and 7 of 10 fails, tolerance 0 against 1 (`qualification_grade`, the
one grading every door reaches: the task page's submit, the provider sync, the admin)."""
from __future__ import annotations

import pytest

from annotation.models import AssignmentStatus, StageKind, TaskKind
from annotation.services.qualification import qualification_grade
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)

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
