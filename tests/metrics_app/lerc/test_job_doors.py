"""The learned metric's background jobs at every door: what makes a scheduled retrain due, and
how a promotion decision holds when another promotion of the same scope lands meanwhile."""
from __future__ import annotations

import pytest

from annotation.models import AssignmentStatus, TaskKind
from metrics_app.services.lerc import lerc_refresh_due
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)

pytestmark = pytest.mark.django_db


def test_refresh_counts_only_judgments_that_count(lerc_settings):
    """Judgments of rejected or returned assignments and of blocked workers never reach the
    training data (the counting rule), so they must not make a retrain due either."""
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    items = [make_item(project) for _ in range(6)]
    rejected = make_assignment(stage, status=AssignmentStatus.REJECTED)
    for item in items[:3]:
        make_judgment(item=item, stage=stage, assignment=rejected, worker=rejected.worker,
                      score=1)
    spammer = make_worker(status="blocked")
    for item in items[3:]:
        make_judgment(item=item, stage=stage, worker=spammer, score=1)
    assert lerc_refresh_due(min_new_judgments=1) == []
    good = make_assignment(stage, status=AssignmentStatus.APPROVED)
    make_judgment(item=items[0], stage=stage, assignment=good, worker=good.worker, score=4)
    assert [(p.pk, n) for p, _kind, n in lerc_refresh_due(min_new_judgments=1)] == [
        (project.pk, 1)]
