"""MTurk does not give back the slot of an assignment rejected after submission: the sync buys a
replacement (CreateAdditionalAssignmentsForHIT) once per rejection or blocked worker, on the
local MTurk-protocol server through a real boto3 client, and through botocore's Stubber for the
call's parameters (checked against the real service model)."""
from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

import pytest

from annotation.cost_selectors import project_committed_cost
from annotation.models import (
    AssignmentStatus,
    HitStatus,
    ProviderCall,
    StageStatus,
)
from annotation.selectors import REOFFER_OPERATION, stage_progress
from annotation.services.replacements import stage_replacements_offer
from annotation.services.review import stage_sync_and_review
from annotation.services.stages import stage_publish
from annotation.services.workers import worker_block
from testing.mturk_server import MTurkError
from testing.workers_sim import mturk_worker_submits, scores_cycle
from tests.support.providers import make_stages, open_to_every_worker

pytestmark = [pytest.mark.mturk, pytest.mark.django_db]


def _trial(project, researcher, *, review=None):
    _q, trial, _f = make_stages(project, "mturk")
    open_to_every_worker(trial)
    trial.settings.update({"review": review or {}})
    trial.save()
    stage_publish(stage=trial, user=researcher)
    trial.refresh_from_db()
    return trial


def _work(server, client, trial, hit, worker_id, seconds=8.0):
    assignment_id = server.state.worker_accept(hit.external_id, worker_id)
    done = mturk_worker_submits(client, stage=trial, hit_id=hit.external_id,
                                worker_id=worker_id, assignment_id=assignment_id,
                                answer_for=scores_cycle([3, 4, 2, 5, 1]), seconds=seconds)
    server.state.worker_submit(assignment_id)
    return done


def _reoffer_calls(stage) -> int:
    return ProviderCall.objects.filter(stage=stage, operation=REOFFER_OPERATION).count()


@pytest.mark.reliability
def test_a_rejected_assignment_is_replaced_on_mturk_once(mturk_server, likert_study, researcher,
                                                         client):
    """Three judgments per item; the review rejects a too-fast worker: the same sync adds one
    assignment to that HIT (was: the HIT ended done with two that count, nothing re-offered);
    the lost answer of the call is retried with its token, a second sync adds none, the rejected
    worker cannot take the HIT again and a new worker can."""
    server, state = mturk_server, mturk_server.state
    project, _gold, _items = likert_study
    trial = _trial(project, researcher, review={"auto_reject": True,
                                                "min_seconds_per_item": 2.0})
    hit = trial.hits.order_by("pk").first()
    assert hit.max_assignments == 3
    _work(server, client, trial, hit, "W1")
    _work(server, client, trial, hit, "W2")
    rejected = _work(server, client, trial, hit, "WFAST", seconds=0.5)
    server.lose_response_next[REOFFER_OPERATION] = 1
    sync, review = stage_sync_and_review(stage=trial)
    assert (review.approved, review.rejected) == (2, 1)
    rejected.refresh_from_db()
    assert rejected.status == AssignmentStatus.REJECTED
    assert sync.reoffered == 1 and not sync.reoffer_waiting
    assert server.stats[f"requests:{REOFFER_OPERATION}"] == 2  # the retry was deduplicated
    assert state.hits[hit.external_id]["MaxAssignments"] == 4
    hit.refresh_from_db()
    assert (hit.max_assignments, hit.status) == (4, HitStatus.OPEN)
    # In judgments: one for each regular item of the HIT the extra assignment holds.
    assert stage_progress(stages=[trial])[trial.pk].reoffered == hit.items.filter(
        is_gold_check=False, is_practice=False).count()

    sync, _review = stage_sync_and_review(stage=trial)  # a repeated sync
    assert sync.reoffered == 0 and _reoffer_calls(trial) == 1
    assert state.hits[hit.external_id]["MaxAssignments"] == 4
    with pytest.raises(MTurkError, match="only once"):
        state.worker_accept(hit.external_id, "WFAST")
    _work(server, client, trial, hit, "W4")
    sync, review = stage_sync_and_review(stage=trial)
    assert review.approved == 1 and sync.reoffered == 0
    hit.refresh_from_db()
    assert hit.status == HitStatus.DONE  # 4 of 4 decided, three count


def test_a_hit_expired_on_mturks_site_gets_no_replacement_until_the_stage_is_extended(
        mturk_server, likert_study, researcher, client):
    """The researcher expired the HIT early on MTurk's requester site, then the review rejects
    a too-fast worker. Before, the sync bought a replacement on the expired HIT (counted in the
    budget, never taken by anyone) and said nothing; now it asks MTurk first, records the HIT
    expired, says why in the sync's "not re-offered yet", and re-offers once the stage is
    extended."""
    import time

    from annotation.services.stages import stage_extend

    server, state = mturk_server, mturk_server.state
    project, _gold, _items = likert_study
    trial = _trial(project, researcher, review={"auto_reject": True,
                                                "min_seconds_per_item": 2.0})
    hit = trial.hits.order_by("pk").first()
    _work(server, client, trial, hit, "W1")
    _work(server, client, trial, hit, "WFAST", seconds=0.5)
    state.hits[hit.external_id]["Expiration"] = time.time() - 60  # "Expire" on the site

    sync, review = stage_sync_and_review(stage=trial)
    assert review.rejected == 1
    assert sync.reoffered == 0 and _reoffer_calls(trial) == 0
    assert state.hits[hit.external_id]["MaxAssignments"] == 3
    assert any("was expired on MTurk" in why and "extend the stage" in why
               for why in sync.reoffer_waiting)
    hit.refresh_from_db()
    assert hit.status == HitStatus.EXPIRED

    stage_extend(stage=trial, seconds=86400, user=researcher)
    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.reoffered == 1 and not sync.reoffer_waiting
    assert state.hits[hit.external_id]["MaxAssignments"] == 4


@pytest.mark.reliability
def test_a_blocked_workers_approved_work_is_replaced(mturk_server, likert_study, researcher,
                                                     client):
    server = mturk_server
    project, _gold, _items = likert_study
    trial = _trial(project, researcher)
    hit = trial.hits.order_by("pk").first()
    spam = _work(server, client, trial, hit, "WSPAM")
    stage_sync_and_review(stage=trial)
    spam.refresh_from_db()
    assert spam.status == AssignmentStatus.APPROVED
    worker_block(worker=spam.worker, reason="copied answers", by=project.owner)
    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.reoffered == 1
    assert server.state.hits[hit.external_id]["MaxAssignments"] == 4


@pytest.mark.reliability
def test_the_slots_reoffered_on_mturk_are_counted_in_judgments_like_what_does_not_count(
        mturk_server, likert_study, researcher, client):
    """Rehearsal: a blocked worker's 2 assignments of 3 items each read "6 collected but not
    counted; 2 slots of work that does not count re-offered": one extra assignment re-offers
    a judgment of each item of its HIT, so the page now says as many slots as it lost."""
    project, _gold, _items = likert_study
    trial = _trial(project, researcher)

    def regular_items(hit):
        return hit.items.filter(is_gold_check=False, is_practice=False).count()

    # The HIT with the most regular items: how gold checks fall into HITs varies between runs,
    # and a HIT with one regular item could not tell judgments from assignments.
    hit = max(trial.hits.order_by("pk"), key=regular_items)
    spam = _work(mturk_server, client, trial, hit, "WSPAM")
    stage_sync_and_review(stage=trial)
    worker_block(worker=spam.worker, reason="copied answers", by=project.owner)
    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.reoffered == 1  # one assignment bought
    progress = stage_progress(stages=[trial])[trial.pk]
    regular = regular_items(hit)
    assert regular > 1
    assert progress.not_counted == spam.judgments.count() == regular
    assert progress.reoffered == regular
    assert f"{regular} slots of work that does not count" in progress.reoffered_text()


def test_a_closed_stage_or_a_full_budget_reoffers_nothing(mturk_server, likert_study,
                                                          researcher, client):
    server = mturk_server
    project, _gold, _items = likert_study
    trial = _trial(project, researcher, review={"auto_reject": True,
                                                "min_seconds_per_item": 2.0})
    hit = trial.hits.order_by("pk").first()
    _work(server, client, trial, hit, "WFAST", seconds=0.5)
    project.budget_cap = project_committed_cost(project=project)  # nothing left to spend
    project.save()
    sync, review = stage_sync_and_review(stage=trial)
    assert review.rejected == 1 and sync.reoffered == 0
    assert "budget cap" in sync.reoffer_waiting[0]
    assert _reoffer_calls(trial) == 0
    project.budget_cap = None
    project.save()
    trial.status = StageStatus.CLOSED
    trial.save()
    assert stage_replacements_offer(stage=trial).reoffered == 0
    assert _reoffer_calls(trial) == 0
    assert server.state.hits[hit.external_id]["MaxAssignments"] == 3
    trial.status = StageStatus.COLLECTING  # reopened: the slot is still owed, bought once
    trial.save()
    assert stage_replacements_offer(stage=trial).reoffered == 1
    assert stage_replacements_offer(stage=trial).reoffered == 0


def test_a_hit_mturk_cannot_grow_past_nine_waits(mturk_server, likert_study, researcher, client):
    server = mturk_server
    project, _gold, _items = likert_study
    trial = _trial(project, researcher, review={"auto_reject": True,
                                                "min_seconds_per_item": 2.0})
    hit = trial.hits.order_by("pk").first()
    _work(server, client, trial, hit, "WFAST", seconds=0.5)
    hit.max_assignments = 9
    hit.save()
    server.state.hits[hit.external_id]["MaxAssignments"] = 9
    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.reoffered == 0 and "fewer than 10" in sync.reoffer_waiting[0]
    with pytest.raises(MTurkError, match="InvalidMaximumAssignmentsIncrease"):
        server.state.CreateAdditionalAssignmentsForHIT(
            {"HITId": hit.external_id, "NumberOfAdditionalAssignments": 1})


def test_the_call_matches_the_mturk_service_model(stubbed):
    provider, stubber = stubbed
    stubber.add_response("create_additional_assignments_for_hit", {}, expected_params={
        "HITId": "3HIT", "NumberOfAdditionalAssignments": 1, "UniqueRequestToken": "tok-1"})
    stubber.add_client_error(
        "create_additional_assignments_for_hit", service_error_code="RequestError",
        service_message="The extend HIT request with ID R1 already exists. "
                        "(UniqueRequestToken was already used)")
    hit = SimpleNamespace(external_id="3HIT")
    assert provider.assignments_add(hit=hit, count=1, token="tok-1") == {"added": 1}
    assert provider.assignments_add(hit=hit, count=1, token="tok-1") == {
        "added": 1, "duplicate": True}


def test_the_fake_refuses_a_repeated_token_and_adds_nothing(mturk_server, likert_study,
                                                           researcher):
    project, _gold, _items = likert_study
    trial = _trial(project, researcher)
    hit = trial.hits.order_by("pk").first()
    state = mturk_server.state
    params = {"HITId": hit.external_id, "NumberOfAdditionalAssignments": 2,
              "UniqueRequestToken": "t"}
    state.CreateAdditionalAssignmentsForHIT(params)
    with pytest.raises(MTurkError, match="already"):
        state.CreateAdditionalAssignmentsForHIT(params)
    assert state.hits[hit.external_id]["MaxAssignments"] == 5
    assert Decimal(state.hits[hit.external_id]["Reward"]) > 0
