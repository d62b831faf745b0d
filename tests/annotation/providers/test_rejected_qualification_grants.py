"""On MTurk a qualification pass is the value the trial's HITs require: a pass graded from
work the researcher then rejects (spam) must not keep that value. A pass granted before the
rejection is taken back (the value set below the pass mark, once), and a result rejected
before its grant is granted as a fail (`annotation.services.qualification`)."""
from __future__ import annotations

import pytest

from annotation.domain.qualification_scores import percent_threshold
from annotation.models import (
    AssignmentStatus,
    ProviderCall,
    WorkerQualification,
)
from annotation.services.review import assignment_reject, stage_auto_review
from annotation.services.review.auto_review import stage_sync_and_review
from annotation.services.review.sync import provider_sync
from tests.support.providers import mturk_qualification_hand_reviewed

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.mark.mturk
def test_a_rejected_qualification_keeps_no_passing_value_on_mturk(mturk_server, likert_study,
                                                                   researcher, client):
    state = mturk_server.state
    project = likert_study[0]
    stage, submits = mturk_qualification_hand_reviewed(state, likert_study, researcher, client)
    mark = percent_threshold(project.qualification_threshold)

    # Granted a pass, then the work is rejected as spam: the pass is taken back, once.
    first = submits("WSPAM1")
    _sync, review = stage_sync_and_review(stage=stage)
    qual_type = stage.__class__.objects.get(pk=stage.pk).settings["mturk_qualification_type_id"]
    assert review.granted == 1 and state.scores[(qual_type, "WSPAM1")] == 100
    first.refresh_from_db()
    assignment_reject(assignment=first, reason="copied answers")
    assert state.scores[(qual_type, "WSPAM1")] < mark
    withdrawn = ProviderCall.objects.filter(operation="WithdrawQualification")
    assert withdrawn.count() == 1
    stage_auto_review(stage=stage)  # the periodic review sends nothing again
    assert withdrawn.get().attempts == 1

    # Rejected before the review granted it: granted as a fail.
    second = submits("WSPAM2")
    provider_sync(stage=stage)
    second.refresh_from_db()
    assignment_reject(assignment=second, reason="copied answers")
    stage_auto_review(stage=stage)
    result = WorkerQualification.objects.get(worker=second.worker, stage=stage)
    assert result.passed and result.granted_externally  # the record keeps its grade
    assert state.scores[(qual_type, "WSPAM2")] < mark
    assert second.status == AssignmentStatus.REJECTED
