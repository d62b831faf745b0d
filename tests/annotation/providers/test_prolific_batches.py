"""A Prolific study has a place for every batch its pages hand out, and no more. The pages pick
items themselves, furthest from their target first (one Likert passage per batch), so a batch
fills across the HIT plan's boundaries: 5 items × 2 judgments in batches of 2 are 5 batches,
not the 6 assignments of HITs of 2, 2 and 1. Places, the cost estimate and
`stage_collection_complete` read one count (`places_for_plans`); MTurk keeps its HITs'
assignments. On the local Prolific fake."""
from __future__ import annotations

from decimal import Decimal
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from annotation.cost_selectors import stage_cost_estimate
from annotation.models import Judgment, Provider, StageStatus, TaskKind
from annotation.services.review import stage_sync_and_review
from annotation.services.stages import stage_publish
from annotation.stage_plan_selectors import stage_hits_planned
from testing.factories import make_item, make_project
from testing.workers_sim import page_config, spend_time
from tests.support.providers import make_stages

pytestmark = [pytest.mark.prolific, pytest.mark.django_db]

ANSWERS = {
    TaskKind.LIKERT: {"score": 3},
    TaskKind.AB: {"shown_choice": "A", "difficult": False, "aspects": ["factuality"],
                  "justification": "Answer A explains the cause much better."},
    TaskKind.MC: {"shown_choice": "a"},
}


def _trial(kind, passages: list[int], provider: str = "prolific"):
    """A trial of `passages` (Likert: one passage per size; otherwise one pool of their sum)
    × 2 judgments, in batches of 2, without gold."""
    project = make_project(kind, reward_per_hit=Decimal("0.40"), items_per_hit=2,
                           redundancy={"default": 2}, justification_min_length=20)
    items = [make_item(project, group_key=f"p{g}" if kind == TaskKind.LIKERT else "")
             for g, size in enumerate(passages) for _ in range(size)]
    _q, trial, _f = make_stages(project, provider)
    trial.requires_stage = None
    trial.judgments_per_item = 2
    trial.settings.update({"gold_rate": 0})
    trial.save()
    trial.items.set(items)
    return trial, items


def _take_part(server, client, stage, study_id: str, pid: str) -> int:
    """A participant opens the page and submits what it hands out: the batch's size (0: the
    page had nothing to do)."""
    session = server.state.participant_start(study_id, pid)
    query = urlencode({"PROLIFIC_PID": pid, "STUDY_ID": study_id, "SESSION_ID": session})
    page = client.get(reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
                      + "?" + query)
    assert page.status_code == 200
    if b'id="task-config"' not in page.content:
        return 0
    config = page_config(page)
    spend_time(config, 6.0)
    answers = [{"item": pk, "time_spent_ms": 6000, **ANSWERS[stage.project.kind]}
               for pk in config["items"]]
    done = client.post(reverse("annotation:task-submit"), data={"answers": answers},
                       content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=config["token"])
    assert done.status_code == 200, done.content[:300]
    server.state.participant_complete(session, stage.settings["prolific_completion_code"])
    return len(config["items"])


@pytest.mark.reliability
@pytest.mark.parametrize("kind,passages,batches", [
    (TaskKind.LIKERT, [3, 2, 1, 4], 3 + 2 + 2 + 4),  # HITs 2+1, 2, 1, 2+2: 12 assignments
    (TaskKind.AB, [5], 5),  # HITs 2+2+1: 6 assignments
    (TaskKind.MC, [5], 5),
])
def test_a_study_has_a_place_per_batch_its_pages_hand_out(
        prolific_server, researcher, client, kind, passages, batches):
    """Every place gets a full batch, every item its 2 judgments, and the stage reaches
    reviewing by itself (was: places summed the HITs' assignments, one more per passage or
    pool whose last HIT was short; the last participant read "nothing more to do" on a paid
    place, and the stage, counting places, never completed)."""
    trial, items = _trial(kind, passages)
    plans = stage_hits_planned(stage=trial)
    assert sum(plan.max_assignments for plan in plans) > batches
    assert stage_cost_estimate(stage=trial, plans=plans).n_assignments == batches
    result = stage_publish(stage=trial, user=researcher)
    assert result.report.failed == 0, result.report.errors
    trial.refresh_from_db()
    study = prolific_server.state.studies[trial.settings["prolific_study_id"]]
    assert study["total_available_places"] == batches
    estimate = stage_cost_estimate(stage=trial)
    assert estimate.n_assignments == batches and estimate.rewards == Decimal("0.40") * batches

    handed = [_take_part(prolific_server, client, trial, study["id"], f"P{n}")
              for n in range(batches)]
    assert 0 not in handed  # no place without work
    assert Judgment.objects.filter(stage=trial).count() == 2 * len(items)
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING


def test_mturk_hits_keep_their_assignments(db):
    trial, _items = _trial(TaskKind.AB, [5], provider=Provider.MTURK)
    assert stage_cost_estimate(stage=trial).n_assignments == 6  # HITs of 2, 2 and 1, × 2
