"""Prolific calls outside the main flow (stop/restart, messages, block list, paging of studies)
and the in-house flow: an expert's signed link, local review and bonus."""
from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.models import (
    AssignmentStatus,
    HitStatus,
    ProviderCall,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.providers import get_provider
from annotation.services.access import inhouse_link_create
from annotation.services.review import (
    assignment_bonus_pay,
    stage_sync_and_review,
    worker_block_everywhere,
    workers_notify,
)
from annotation.services.stages import stage_close, stage_extend, stage_publish
from testing.factories import make_item, make_project, make_stage, make_worker
from testing.workers_sim import _submit, scores_cycle

pytestmark = pytest.mark.django_db


@pytest.mark.prolific
def test_prolific_stop_restart_message_block(prolific_server, likert_study, researcher,
                                             settings):
    state = prolific_server.state
    project, _gold, _items = likert_study
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="prolific", settings={"n_items": 4})
    for _ in range(3):  # other studies on the account: the lookup pages through them
        state.studies[state.new_id("st")] = {"id": "x", "internal_name": "other",
                                              "status": "ACTIVE"}
    stage_publish(stage=stage, user=researcher)
    stage.refresh_from_db()
    study = state.studies[stage.settings["prolific_study_id"]]
    assert study["status"] == "ACTIVE"
    stage_close(stage=stage, user=researcher, reason="budget")
    assert study["status"] == "COMPLETED"
    assert set(stage.hits.values_list("status", flat=True)) == {HitStatus.EXPIRED}
    get_provider("prolific").extend_stage(stage=stage, seconds=60)
    assert study["status"] == "ACTIVE"
    assert [c.request["action"] for c in ProviderCall.objects.filter(
        stage=stage, operation__startswith="StudyTransition").order_by("pk")] == ["STOP", "START"]
    workers = [make_worker(provider="prolific", external_id=f"P{n}") for n in range(2)]
    workers_notify(workers=workers, subject="Thanks", message="More soon")
    assert [m["recipient_id"] for m in state.messages] == ["P0", "P1"]
    # A retried notify (double click, redelivered task) sends nothing twice.
    prolific_server.lose_response_next["POST messages/"] = 1
    others = [make_worker(provider="prolific", external_id=f"Q{n}") for n in range(2)]
    first = workers_notify(workers=others, subject="Thanks", message="More soon")["prolific"]
    assert (first["sent"], len(first["errors"])) == (1, 1)  # Q0's answer was lost, Q1 sent
    again = workers_notify(workers=workers + others, subject="Thanks", message="More soon")
    assert again == {"prolific": {"sent": 0, "already_sent": 3, "in_doubt": 1, "errors": []}}
    assert [m["recipient_id"] for m in state.messages] == ["P0", "P1", "Q0", "Q1"]
    worker_block_everywhere(worker=workers[0], reason="bot")  # no block list configured
    call = ProviderCall.objects.get(operation="BlockWorker")
    assert call.response == {"local_only": True}
    group = state.create_group(query={}, body={})["id"]
    settings.PROLIFIC_BLOCKLIST_GROUP_ID = group
    worker_block_everywhere(worker=workers[1], reason="bot")
    assert state.groups[group] == {"P1"}


def test_inhouse_expert_link_review_and_bonus(client, researcher):
    project = make_project(TaskKind.LIKERT, items_per_hit=3, redundancy={"default": 1})
    for n in range(3):
        make_item(project, group_key="p1", split="test", external_id=f"i{n}")
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT)
    result = stage_publish(stage=stage, user=researcher)
    assert result.stage.status == StageStatus.COLLECTING
    expert = make_worker(display_name="Dr. Expert")
    _link, path = inhouse_link_create(worker=expert, project=project, stage=stage)
    response = client.get(path)
    assert response.status_code == 200
    _submit(client, response, scores_cycle([2, 4, 5]), seconds=20.0)
    assignment = expert.assignments.get()
    assert assignment.status == AssignmentStatus.SUBMITTED
    sync, review = stage_sync_and_review(stage=stage)
    assert (sync.listed, sync.flagged, review.approved) == (0, 0, 1)
    assert expert.assignments.count() == 1
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED
    assignment_bonus_pay(assignment=assignment, amount=Decimal("5.00"), reason="expert rate")
    assignment.refresh_from_db()
    assert assignment.bonus_paid == Decimal("5.00")
    stage.refresh_from_db()
    assert stage.status == StageStatus.REVIEWING  # every HIT's assignments are in
    stage_extend(stage=stage, seconds=3600, user=researcher)
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING
