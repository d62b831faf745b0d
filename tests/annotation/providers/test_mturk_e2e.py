"""Qualification → trial → review on a local MTurk-protocol server through a real boto3 client
(JSON 1.1 over HTTP on 127.0.0.1, signed with dummy credentials), with throttling and lost
responses injected: no duplicate HIT, no double payment, every submission accounted for."""
from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.models import (
    Assignment,
    AssignmentStatus,
    HitStatus,
    ProviderCall,
    StageStatus,
    Worker,
    WorkerQualification,
    WorkerStatus,
)
from annotation.services.review import assignment_bonus_pay, stage_sync_and_review
from annotation.services.stages import stage_publish
from annotation.stage_errors import GuardFailed
from testing.mturk_server import MTurkError
from testing.workers_sim import (
    gold_score,
    gold_then_wrong,
    mturk_worker_submits,
    scores_cycle,
    wrong_score,
)
from tests.support.providers import make_stages, open_to_every_worker

pytestmark = [pytest.mark.mturk, pytest.mark.django_db]

LOCAL_TO_MTURK = {
    AssignmentStatus.APPROVED: "Approved",
    AssignmentStatus.REJECTED: "Rejected",
    AssignmentStatus.FLAGGED: "Submitted",
    AssignmentStatus.SUBMITTED: "Submitted",
}


def assert_local_matches_server(server, stage):
    """Every submission on the server has a local assignment in the matching state."""
    state = server.state
    local = {a.external_id: a for a in Assignment.objects.filter(stage=stage)}
    hit_ids = set(stage.hits.values_list("external_id", flat=True))
    remote = {aid: a for aid, a in state.assignments.items()
              if a["HITId"] in hit_ids and a["AssignmentStatus"] != "Accepted"}
    assert set(remote) <= set(local), "a submission on MTurk is missing locally"
    for aid, row in remote.items():
        assert LOCAL_TO_MTURK[local[aid].status] == row["AssignmentStatus"], aid
        assert local[aid].worker.external_id == row["WorkerId"]


def test_qualification_trial_review_on_the_mturk_protocol(mturk_server, likert_study,
                                                          researcher, client):
    server, state = mturk_server, mturk_server.state
    project, _gold, _items = likert_study
    qualification, trial, full = make_stages(project, "mturk")
    trial.settings.update({"review": {"auto_reject": True, "block_after_rejections": 1,
                                      "min_seconds_per_item": 2.0}})
    trial.save()

    # --- qualification: one HIT, guarded so nobody takes it twice ------------------------------
    result = stage_publish(stage=qualification, user=researcher)
    assert result.report.created == 1 and result.stage.status == StageStatus.COLLECTING
    qual_hit = qualification.hits.get()
    assert qual_hit.external_id in state.hits
    qualification.refresh_from_db()
    qual_type = qualification.settings["mturk_qualification_type_id"]
    assert qual_type in state.qualification_types

    answers = {"WPASS1": gold_score, "WPASS2": gold_score, "WPASS3": gold_then_wrong(8),
               "WFAIL": wrong_score}
    for worker_id, answer_for in answers.items():
        # The worker accepts the HIT on MTurk, which opens our ExternalQuestion page.
        assignment_id = state.worker_accept(qual_hit.external_id, worker_id)
        mturk_worker_submits(client, stage=qualification, hit_id=qual_hit.external_id,
                             worker_id=worker_id, assignment_id=assignment_id,
                             answer_for=answer_for)
        state.worker_submit(assignment_id)  # the page posts to turkSubmitTo
    # Graded on submit, so a passing worker can go on at once; granted on MTurk by the sync.
    assert WorkerQualification.objects.filter(stage=qualification, passed=True).count() == 3
    # A worker whose answers never reached us (submitted on MTurk only): flagged, never approved.
    lost_id = state.worker_accept(qual_hit.external_id, "WLOST")
    state.worker_submit(lost_id)

    sync, review = stage_sync_and_review(stage=qualification)
    assert (sync.listed, sync.flagged) == (5, 1)
    assert (review.graded, review.granted, review.approved) == (0, 4, 4)
    results = dict(WorkerQualification.objects.filter(stage=qualification)
                   .values_list("worker__external_id", "passed"))
    assert results == {"WPASS1": True, "WPASS2": True, "WPASS3": True, "WFAIL": False}
    assert state.scores[(qual_type, "WPASS3")] == 80 and state.scores[(qual_type, "WFAIL")] == 0
    lost = Assignment.objects.get(external_id=lost_id)
    assert lost.status == AssignmentStatus.FLAGGED and "no local assignment" in lost.review_note
    assert state.assignments[lost_id]["AssignmentStatus"] == "Submitted"
    # The failing worker cannot retake the qualification.
    with pytest.raises(MTurkError, match="qualification requirements"):
        state.worker_accept(qual_hit.external_id, "WFAIL")
    assert_local_matches_server(server, qualification)

    # --- trial: throttled and a lost CreateHIT response; only qualified workers ----------------
    server.throttle_next["CreateHITWithHITType"] = 3
    server.lose_response_next["CreateHITWithHITType"] = 1
    result = stage_publish(stage=trial, user=researcher)
    hits = list(trial.hits.all())
    assert result.report.failed == 0 and all(h.status == HitStatus.OPEN for h in hits)
    assert server.stats["throttled"] == 3 and server.stats["lost_responses"] == 1
    trial_hit_ids = [h.external_id for h in hits]
    on_server = [h for h in state.hits.values() if h["HITTypeId"] == trial.settings[
        "mturk_hit_type_id"]]
    assert len(on_server) == len(hits) == len(set(trial_hit_ids))  # no duplicate HIT
    assert sorted(h["HITId"] for h in on_server) == sorted(trial_hit_ids)
    first = hits[0].external_id
    assert state.requirements_met("WPASS1", first)
    assert not state.requirements_met("WFAIL", first)
    assert not state.requirements_met("WNEW", first)  # never took the qualification

    done = {}
    for worker_id, answer_for, seconds in [
        ("WPASS1", scores_cycle([3, 4, 2, 5, 1]), 8.0),
        ("WPASS3", scores_cycle([2, 4, 3, 5, 1]), 6.0),
        ("WPASS2", scores_cycle([3]), 0.5),  # too fast (and straight-lining)
    ]:
        assignment_id = state.worker_accept(first, worker_id)
        done[worker_id] = mturk_worker_submits(
            client, stage=trial, hit_id=first, worker_id=worker_id,
            assignment_id=assignment_id, answer_for=answer_for, seconds=seconds)
        state.worker_submit(assignment_id)
    # Our page refuses the failed worker too, whatever the provider let through.
    from django.urls import reverse

    refused = client.get(reverse("annotation:task-mturk", kwargs={"stage_id": trial.pk}),
                         {"assignmentId": "FORGED", "hitId": first, "workerId": "WFAIL"})
    assert refused.status_code == 403
    sync, review = stage_sync_and_review(stage=trial)
    assert (sync.listed, sync.matched, sync.flagged) == (3, 3, 0)
    assert (review.approved, review.rejected, review.blocked) == (2, 1, 1)
    rejected = done["WPASS2"]
    rejected.refresh_from_db()
    assert rejected.status == AssignmentStatus.REJECTED
    feedback = state.assignments[rejected.external_id]["RequesterFeedback"]
    assert "s per item is below the minimum" in feedback
    assert "WPASS2" in state.blocks
    hits[0].refresh_from_db()
    # 3 of 3 decided, but the rejected one never counts: its slot is re-offered as a fourth
    # assignment (MTurk does not give it back), so the HIT is open again.
    assert (hits[0].status, hits[0].max_assignments) == (HitStatus.OPEN, 4)
    assert sync.reoffered == 1 and state.hits[first]["MaxAssignments"] == 4
    assert all(h.status == HitStatus.OPEN for h in hits[1:])
    assert Worker.objects.get(external_id="WPASS2").status == WorkerStatus.BLOCKED

    # --- a bonus, retried after a lost response: paid once ----------------------------------------
    good = done["WPASS1"]
    good.refresh_from_db()
    server.lose_response_next["SendBonus"] = 1
    assignment_bonus_pay(assignment=good, amount=Decimal("0.30"), reason="careful work",
                         key="careful")
    assignment_bonus_pay(assignment=good, amount=Decimal("0.30"), reason="careful work",
                         key="careful")  # a redelivered task / double click
    paid = [b for b in state.bonuses if b["AssignmentId"] == good.external_id]
    assert [b["BonusAmount"] for b in paid] == ["0.30"]
    good.refresh_from_db()
    assert good.bonus_paid == Decimal("0.30")
    assert server.stats["requests:SendBonus"] == 2  # the retry reached MTurk and was deduplicated

    # A second sync changes nothing and calls no side effect again.
    calls_before = ProviderCall.objects.count()
    sync, review = stage_sync_and_review(stage=trial)
    assert (review.approved, review.rejected, review.bonuses) == (0, 0, 0)
    assert ProviderCall.objects.count() == calls_before
    assert_local_matches_server(server, trial)
    assert_local_matches_server(server, qualification)
    assert_money_matches_server(state, project)

    # --- full collection: held back by the trial's agreement until overridden (logged) -------
    full.agreement_threshold = 0.99
    full.save()
    with pytest.raises(GuardFailed, match="below the required 0.99"):
        stage_publish(stage=full, user=researcher)
    result = stage_publish(stage=full, user=researcher, override_reason="trial was tiny")
    assert result.report.failed == 0 and result.stage.status == StageStatus.COLLECTING
    assert "OVERRIDDEN" in full.transitions.get(to_status="published").reason
    full_items = set(full.items.values_list("pk", flat=True))
    trial_items = set(trial.items.values_list("pk", flat=True))
    assert not full_items & trial_items
    assert full_items | trial_items == {i.pk for i in _items}
    requirement = {"QualificationTypeId": qual_type, "Comparator": "GreaterThanOrEqualTo",
                   "IntegerValues": [80], "ActionsGuarded": "DiscoverPreviewAndAccept"}
    for hit in full.hits.all():
        assert requirement in state.hits[hit.external_id]["QualificationRequirements"]
        assert state.hits[hit.external_id]["MaxAssignments"] == project.redundancy_for(
            hit.items.first().split)


def test_mturk_auto_approval_is_mirrored_and_missing_judgments_flagged(mturk_server, likert_study,
                                                                       researcher, client):
    state = mturk_server.state
    project, _gold, _items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    open_to_every_worker(trial)
    trial.save()
    stage_publish(stage=trial, user=researcher)
    hit = trial.hits.first()
    approved_id = state.worker_accept(hit.external_id, "W1")
    mturk_worker_submits(client, stage=trial, hit_id=hit.external_id, worker_id="W1",
                         assignment_id=approved_id, answer_for=scores_cycle([1, 2, 3, 4, 5]))
    state.worker_submit(approved_id)
    state.assignments[approved_id]["AssignmentStatus"] = "Approved"  # MTurk's auto-approval
    empty_id = state.worker_accept(hit.external_id, "W2")
    state.worker_submit(empty_id)
    state.assignments[empty_id]["AssignmentStatus"] = "Approved"
    from annotation.services.review import provider_sync

    report = provider_sync(stage=trial)
    assert (report.mirrored, report.flagged) == (1, 1)
    assert Assignment.objects.get(external_id=approved_id).status == AssignmentStatus.APPROVED
    empty = Assignment.objects.get(external_id=empty_id)
    assert empty.status == AssignmentStatus.FLAGGED
    assert "already marked it approved" in empty.review_note


def assert_money_matches_server(state, project) -> None:
    """What the cockpit says was spent is what MTurk took from the account (rewards approved
    and bonuses sent, as the server's balance fell) plus MTurk's fees on each (20%, 40% for a
    HIT of 10+ assignments, at least $0.01 per assignment and per bonus payment); what it says
    is committed is what the budget guards count."""
    from annotation.cockpit_selectors import study_cockpit
    from annotation.cost_selectors import project_committed_cost

    cent = Decimal("0.01")
    fees = Decimal("0")
    for assignment in state.assignments.values():
        if assignment["AssignmentStatus"] == "Approved":
            hit = state.hits[assignment["HITId"]]
            rate = Decimal("0.40") if hit["MaxAssignments"] >= 10 else Decimal("0.20")
            fees += max(cent, Decimal(hit["Reward"]) * rate)
    fees += sum((max(cent, Decimal(b["BonusAmount"]) * Decimal("0.20"))
                 for b in state.bonuses), Decimal("0"))
    taken = Decimal("10000.00") - state.balance
    assert taken > 0
    cockpit = study_cockpit(project=project)
    assert cockpit.spent == (taken + fees).quantize(cent)
    assert cockpit.committed == project_committed_cost(project=project)
