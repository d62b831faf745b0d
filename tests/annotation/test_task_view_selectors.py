"""The reads the annotator task views make through annotation/task_selectors.py: which stage an
entry URL opens, an MTurk preview, the label a worker saw for an answer role, and where an
in-house annotator goes on from the completion page."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import AssignmentItem, Provider, StageKind, TaskKind
from annotation.task_selectors import (
    guess_label_shown,
    hit_preview,
    inhouse_completion,
    provider_task_stage,
)
from testing.factories import (
    make_assignment,
    make_hit,
    make_inhouse_link,
    make_item,
    make_project,
    make_qualification,
    make_stage,
    make_worker,
)

pytestmark = pytest.mark.django_db


def test_an_entry_url_opens_only_its_own_providers_stage():
    stage = make_stage(make_project(TaskKind.LIKERT), provider=Provider.MTURK)
    assert provider_task_stage(stage_id=stage.pk, provider=Provider.MTURK) == stage
    assert provider_task_stage(stage_id=stage.pk, provider=Provider.PROLIFIC) is None
    assert provider_task_stage(stage_id=stage.pk + 1000, provider=Provider.MTURK) is None


def test_a_preview_shows_the_first_item_and_counts_them_all():
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project, provider=Provider.MTURK)
    first, second = make_item(project), make_item(project)
    preview = hit_preview(hit=make_hit(stage, items=[first, second], external_id="H1"),
                          stage=stage)
    assert [item["id"] for item in preview.items] == [first.pk]
    assert preview.total == 2
    empty = hit_preview(hit=make_hit(stage, external_id="H2"), stage=stage)
    assert (empty.items, empty.total) == ([], 0)


def test_the_label_shown_follows_the_assignments_shuffled_order():
    project = make_project(TaskKind.MC)
    stage = make_stage(project)
    shuffled, unshuffled = make_item(project), make_item(project)
    assignment = make_assignment(stage, items=[shuffled, unshuffled])
    AssignmentItem.objects.filter(assignment=assignment, item=shuffled).update(
        presented_order=["C", "A", "D", "B"])
    assert guess_label_shown(assignment=assignment, item_id=shuffled.pk, role="A") == "b"
    assert guess_label_shown(assignment=assignment, item_id=shuffled.pk, role="C") == "a"
    # No recorded order: the roles in their own order.
    AssignmentItem.objects.filter(assignment=assignment, item=unshuffled).update(
        presented_order=[])
    assert guess_label_shown(assignment=assignment, item_id=unshuffled.pk, role="D") == "d"


def test_completion_goes_on_with_the_newest_live_link_and_shows_a_qualification_result():
    project = make_project(TaskKind.LIKERT)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION)
    worker = make_worker()
    assignment = make_assignment(qualification, worker=worker)
    assert inhouse_completion(assignment=assignment).link is None
    older = make_inhouse_link(worker=worker, project=project)
    newest = make_inhouse_link(worker=worker, project=project, stage=qualification)
    make_inhouse_link(worker=worker, project=project, revoked=True)
    make_inhouse_link(worker=worker, project=make_project(TaskKind.LIKERT))
    assert inhouse_completion(assignment=assignment).link == newest
    newest.expires_at = timezone.now() - timedelta(minutes=1)
    newest.save()
    # The newest link expired: none to go on with (an older one is not dug out).
    assert inhouse_completion(assignment=assignment).link is None
    assert older.pk < newest.pk
    assert inhouse_completion(assignment=assignment).qualification is None
    result = make_qualification(worker=worker, stage=qualification, passed=False)
    assert inhouse_completion(assignment=assignment).qualification == result
    full = make_stage(project)
    make_qualification(worker=worker, stage=full)
    assert inhouse_completion(
        assignment=make_assignment(full, worker=worker)).qualification is None
