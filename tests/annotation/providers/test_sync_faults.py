"""Provider faults during the sync: throttled and lost pages while paging through many
assignments; every submission is reconciled exactly once."""
from __future__ import annotations

import pytest

from annotation.models import Assignment, AssignmentStatus, StageKind, StageStatus
from annotation.services.review import provider_sync, stage_sync_and_review
from annotation.services.stages import stage_publish
from testing.factories import make_stage
from testing.workers_sim import mturk_worker_submits, scores_cycle

pytestmark = [pytest.mark.mturk, pytest.mark.reliability, pytest.mark.django_db]


def test_sync_pages_through_throttled_and_lost_pages(mturk_server, likert_study, researcher,
                                                     client):
    server, state = mturk_server, mturk_server.state
    project, _gold, _items = likert_study
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="mturk", judgments_per_item=7,
                       settings={"n_items": 5, "locales": []})
    stage_publish(stage=stage, user=researcher)
    hit = stage.hits.first()
    ids = []
    for n in range(7):
        assignment_id = state.worker_accept(hit.external_id, f"W{n}")
        if n < 6:  # the seventh worker's answers never reached us
            mturk_worker_submits(client, stage=stage, hit_id=hit.external_id,
                                 worker_id=f"W{n}", assignment_id=assignment_id,
                                 answer_for=scores_cycle([1, 2, 3, 4, 5]))
        state.worker_submit(assignment_id)
        ids.append(assignment_id)
    state.page_limit = 2  # 4 pages
    server.throttle_next["ListAssignmentsForHIT"] = 2
    server.lose_response_next["ListAssignmentsForHIT"] = 1
    report = provider_sync(stage=stage)
    assert (report.listed, report.matched, report.flagged) == (7, 6, 1)
    assert server.stats["requests:ListAssignmentsForHIT"] >= 4 + 3
    assert Assignment.objects.filter(stage=stage).count() == 7  # nothing created twice
    assert Assignment.objects.get(external_id=ids[-1]).status == AssignmentStatus.FLAGGED
    # Review over the same data: six approvals on MTurk, the flagged one left alone.
    _sync, review = stage_sync_and_review(stage=stage)
    assert review.approved == 6
    approved = {aid for aid, a in state.assignments.items() if a["AssignmentStatus"] == "Approved"}
    assert approved == set(ids[:6])
    assert state.assignments[ids[-1]]["AssignmentStatus"] == "Submitted"


def test_create_hit_timing_out_is_retried_without_a_duplicate(mturk_server, likert_study,
                                                              researcher, settings):
    import threading

    server, state = mturk_server, mturk_server.state
    settings.MTURK_READ_TIMEOUT = 1
    from annotation.providers import override_provider
    from annotation.providers.mturk import MTurkProvider

    project, _gold, _items = likert_study
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="mturk", judgments_per_item=2,
                       settings={"n_items": 4, "locales": []})
    release = threading.Event()
    server.stall_after["CreateHITWithHITType"] = release  # made, but answered too late
    try:
        with override_provider("mturk", MTurkProvider()):  # a client with the 1 s timeout
            result = stage_publish(stage=stage, user=researcher)
    finally:
        release.set()
    hits = list(stage.hits.all())
    assert result.report.failed == 0 and result.report.already_created == 1
    remote = [h for h in state.hits.values()
              if h["HITTypeId"] == stage.settings["mturk_hit_type_id"]]
    assert len(remote) == len(hits) and {h["HITId"] for h in remote} == {
        h.external_id for h in hits}
