"""A qualification attempt whose work was rejected qualifies no one, whatever its answers
scored (`annotation.selectors.qualification_results_that_count`, the rule of
`judgments_that_count`): the task pages' gate, the link readiness check and the message to
qualified workers all refuse it. The provider grant: tests/annotation/providers/
test_rejected_qualification_grants.py."""
from __future__ import annotations

import pytest

from annotation.models import AssignmentStatus, StageKind, StageStatus, TaskKind
from annotation.services.access import stage_link_problem
from annotation.services.assignments import (
    QualificationRequired,
    assignment_start,
    more_work_for,
)
from annotation.services.review import assignment_reject
from annotation.services.review.decisions import stage_qualified_workers
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_qualification,
    make_stage,
    make_worker,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _gated_study(slug: str):
    """A qualification of one gold item and a collecting trial that requires it."""
    project = make_project(TaskKind.LIKERT, slug=slug)
    gold = make_item(project, gold={"score": 4})
    make_item(project)
    qual = make_stage(project, kind=StageKind.QUALIFICATION, name="qual", order=0)
    qual.items.set([gold])
    trial = make_stage(project, kind=StageKind.FULL, name="trial", order=1,
                       status=StageStatus.COLLECTING, requires_stage=qual)
    return gold, qual, trial


def _passed(*, gold, qual, worker, verification: str = ""):
    """`worker`'s submitted qualification work on `gold`, graded a pass."""
    assignment = make_assignment(qual, worker=worker, items=[gold],
                                 status=AssignmentStatus.SUBMITTED)
    if verification:
        assignment.verification = verification
        assignment.save(update_fields=["verification"])
    make_judgment(item=gold, stage=qual, worker=worker, assignment=assignment, score=4)
    make_qualification(worker=worker, stage=qual, passed=True, assignment=assignment)
    return assignment


def test_a_pass_graded_from_rejected_work_opens_no_gate():
    gold, qual, trial = _gated_study("rejected-gate")
    spammer, honest = make_worker(), make_worker()
    for worker in (spammer, honest):
        assignment = _passed(gold=gold, qual=qual, worker=worker)
        if worker is spammer:
            assignment_reject(assignment=assignment, reason="copied answers")

    assert more_work_for(stage=trial, worker=honest)
    assert not more_work_for(stage=trial, worker=spammer)
    with pytest.raises(QualificationRequired, match="qualification work was rejected"):
        assignment_start(stage=trial, worker=spammer)
    assert "was rejected" in stage_link_problem(stage=trial, worker=spammer)
    assert stage_link_problem(stage=trial, worker=honest) == ""
    assert stage_qualified_workers(stage=trial) == [honest]


def test_a_result_stored_before_results_named_their_assignment_reads_the_workers_rejection():
    project = make_project(TaskKind.LIKERT, slug="rejected-legacy")
    gold = make_item(project, gold={"score": 4})
    qual = make_stage(project, kind=StageKind.QUALIFICATION, name="qual", order=0)
    trial = make_stage(project, kind=StageKind.FULL, name="trial", order=1,
                       status=StageStatus.COLLECTING, requires_stage=qual)
    worker = make_worker()
    make_assignment(qual, worker=worker, items=[gold], status=AssignmentStatus.REJECTED)
    make_qualification(worker=worker, stage=qual, passed=True)  # no assignment named
    assert not more_work_for(stage=trial, worker=worker)
    assert stage_qualified_workers(stage=trial) == []


def test_a_pass_graded_from_work_the_provider_has_not_vouched_for_waits_for_it():
    """A pass graded from work the provider has not listed or verified yet (an MTurk
    assignment admitted over its HIT's local count, a Prolific session not verified) opens
    no gate until it does, as such work counts for nothing in `judgments_that_count`; the
    worker reads that it waits, not that it was rejected."""
    from annotation.models import ParticipantVerification

    gold, qual, trial = _gated_study("pending-gate")
    worker = make_worker()
    assignment = _passed(gold=gold, qual=qual, worker=worker,
                         verification=ParticipantVerification.PENDING)

    assert not more_work_for(stage=trial, worker=worker)
    with pytest.raises(QualificationRequired, match="waiting for the platform to confirm"):
        assignment_start(stage=trial, worker=worker)
    assert "waits for the provider" in stage_link_problem(stage=trial, worker=worker)
    assert stage_qualified_workers(stage=trial) == []

    assignment.verification = ParticipantVerification.VERIFIED
    assignment.save(update_fields=["verification"])
    assert more_work_for(stage=trial, worker=worker)
    assert stage_link_problem(stage=trial, worker=worker) == ""
    assert stage_qualified_workers(stage=trial) == [worker]
