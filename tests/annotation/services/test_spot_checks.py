"""Random spot checks: the sample is reproducible by seed, of the size asked, drawn only from
submitted or approved work that counts and nobody checked yet; a decision is stored once."""
from __future__ import annotations

import pytest

from annotation.models import AssignmentStatus, Judgment, SpotCheck, StageKind, TaskKind
from annotation.services.spot_checks import SpotCheckInvalid, spot_check_record
from annotation.spot_check_selectors import spot_check_counts, spot_check_sample
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    owner = make_user("spot-owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="spot-study")
    stage = make_stage(project)
    items = [make_item(project, external_id=f"q{n}") for n in range(12)]
    worker = make_worker(external_id="w-good")
    done = make_assignment(stage, worker=worker, items=items,
                           status=AssignmentStatus.SUBMITTED)
    counting = [make_judgment(item=item, stage=stage, worker=worker, assignment=done)
                for item in items]
    return project, owner, stage, items, counting


def test_sample_is_reproducible_sized_and_differs_by_seed(study):
    project, _owner, _stage, _items, counting = study
    first = [j.pk for j in spot_check_sample(project=project, seed="abc", size=5)]
    assert len(first) == 5 and len(set(first)) == 5
    assert first == [j.pk for j in spot_check_sample(project=project, seed="abc", size=5)]
    assert set(first) <= {j.pk for j in counting}
    others = [[j.pk for j in spot_check_sample(project=project, seed=s, size=5)]
              for s in ("x", "y", "z")]
    assert any(o != first for o in others)
    assert len(spot_check_sample(project=project, seed="abc", size=500)) == 12   # capped by pool
    # Deciding one judgment replaces it by the next in the seed's order; the rest stay.
    spot_check_record(judgment=Judgment.objects.get(pk=first[0]), verdict="ok")
    after = [j.pk for j in spot_check_sample(project=project, seed="abc", size=5)]
    assert first[0] not in after and after[:4] == first[1:]


def test_sample_leaves_out_checked_and_non_counting_work(study):
    project, _owner, stage, items, counting = study
    practice = make_stage(project, kind=StageKind.PRACTICE)
    practice_work = make_judgment(item=items[0], stage=practice, worker=make_worker())
    rejected = make_assignment(stage, items=items[:1], status=AssignmentStatus.REJECTED)
    rejected_work = make_judgment(item=items[0], stage=stage, worker=rejected.worker,
                                  assignment=rejected)
    open_ = make_assignment(stage, items=items[:1], status=AssignmentStatus.IN_PROGRESS)
    unsubmitted = make_judgment(item=items[0], stage=stage, worker=open_.worker,
                                assignment=open_)
    spot_check_record(judgment=counting[3], verdict="problem", note="no")
    drawn = {j.pk for j in spot_check_sample(project=project, seed="s", size=100)}
    assert drawn == {j.pk for j in counting} - {counting[3].pk}
    assert not drawn & {practice_work.pk, rejected_work.pk, unsubmitted.pk}
    # A practice stage asked for by name is drawn from (and only it).
    assert {j.pk for j in spot_check_sample(project=project, seed="s", stage=practice)} == {
        practice_work.pk}


def test_a_decision_is_stored_once_and_counted_per_worker(study):
    project, owner, _stage, _items, counting = study
    with pytest.raises(SpotCheckInvalid, match="the verdict must be one of ok, problem"):
        spot_check_record(judgment=counting[0], verdict="maybe")
    with pytest.raises(SpotCheckInvalid, match="control character"):
        spot_check_record(judgment=counting[0], verdict="ok", note="a\x00b")
    check, created = spot_check_record(judgment=counting[0], verdict="problem", note="wrong",
                                       user=owner)
    again, created_again = spot_check_record(judgment=counting[0], verdict="ok", user=owner)
    assert created and not created_again and again.pk == check.pk
    assert SpotCheck.objects.get().verdict == "problem"
    spot_check_record(judgment=counting[1], verdict="ok")
    worker_id = counting[0].worker_id
    assert spot_check_counts(project=project) == {
        worker_id: {"spot_checked": 2, "spot_problems": 1}}
