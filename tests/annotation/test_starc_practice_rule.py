"""STARC's practice rule at every door: "participants who did not answer both practice trials
correctly were excluded from the analysis" (`annotation.selectors.practice_answers_wrong`). The
STARC analytics excluded them; the counting rule did not, so the same participants' answers
were in the exports, the judgments API, agreement, the per-worker table, progress, and earned
the bonus per correct answer (which also paid for the practice items themselves)."""
from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from annotation.models import AssignmentStatus, ExperimentMode, Judgment, StageKind, TaskKind
from annotation.selectors import judgments_releasing_slots, judgments_that_count
from annotation.services.review import correct_answer_bonus
from metrics_app.reports.project import project_report
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.fixture
def study():
    """A STARC QA study with a bonus of $0.10 per correct answer. `good` answers the practice
    item right and two of three items right; `bad` answers the practice item wrongly in the
    same assignment, then every item right; `late` failed the practice in an earlier practice
    stage and answers one item in the full stage."""
    owner = make_user("owner")
    project = make_project(TaskKind.MC, owner=owner, slug="starc",
                           experiment_mode=ExperimentMode.QA, bonus_per_correct=Decimal("0.10"))
    practice_stage = make_stage(project, kind=StageKind.PRACTICE, name="practice")
    full = make_stage(project, name="full")
    practice = make_item(project, external_id="practice", is_practice=True,
                         gold={"choice": "A"}, dataset="onestopqa")
    items = [make_item(project, external_id=f"os1_{n}_1_Ele", text_level="Ele",
                       dataset="onestopqa", gold={"choice": "A"}) for n in range(1, 4)]
    workers = {name: make_worker(external_id=name) for name in ("good", "bad", "late")}
    assignments = {}
    for name, answers in (("good", "AAAB"), ("bad", "CAAA")):
        assignment = make_assignment(full, worker=workers[name], items=[practice, *items],
                                     status=AssignmentStatus.APPROVED)
        for item, choice in zip([practice, *items], answers, strict=True):
            make_judgment(item=item, stage=full, worker=workers[name], choice=choice,
                          assignment=assignment)
        assignments[name] = assignment
    make_judgment(item=practice, stage=practice_stage, worker=workers["late"], choice="B")
    late = make_assignment(full, worker=workers["late"], items=items[:1],
                           status=AssignmentStatus.APPROVED)
    make_judgment(item=items[0], stage=full, worker=workers["late"], choice="D", assignment=late)
    return {"project": project, "full": full, "owner": owner, "workers": workers,
            "assignments": assignments}


def test_the_counting_rule_leaves_out_every_answer_of_a_worker_who_failed_practice(study):
    project, good = study["project"], study["workers"]["good"]
    for counted in (judgments_that_count(project=project),
                    judgments_that_count(Judgment.objects.filter(item__project=project))):
        assert {j.worker_id for j in counted} == {good.pk} and counted.count() == 3
    # Their practice answers stay where practice work is read (they show the failure).
    with_practice = judgments_that_count(project=project, data_stages_only=False)
    assert with_practice.count() == 3 + 3
    # Their items' slots are given back to other participants.
    for released in (judgments_releasing_slots(project=project),
                     judgments_releasing_slots(Judgment.objects.filter(item__project=project))):
        assert released.count() == 3 + 1
        assert good.pk not in {j.worker_id for j in released}


def test_a_worker_who_failed_practice_is_out_of_exports_api_and_reports(study):
    project = study["project"]
    out = io.StringIO()
    call_command("export_data", "starc", "--no-progress", stdout=out)
    judged = [r for r in map(json.loads, out.getvalue().splitlines()) if r["judgment"]]
    assert len(judged) == 3

    client = APIClient()
    client.force_authenticate(study["owner"])
    response = client.get("/api/projects/starc/judgments/", {"limit": 100})
    assert response.status_code == 200 and response.json()["count"] == 3

    report = project_report(project=project)
    assert report["n_judgments"] == 3
    assert report["agreement"]["all"]["n_judgments"] == 3
    rows = {row["external_id"]: row for row in report["workers"]}
    assert rows["bad"]["n_judgments"] == 0 and rows["late"]["n_judgments"] == 0
    starc = report["starc"]
    assert (starc["n_excluded_practice"], starc["n_judgments"]) == (2, 3)
    assert starc["accuracy"]["onestopqa"] == pytest.approx(2 / 3)
    # A report of the full stage alone excludes `late` too, whose practice was another stage.
    staged = project_report(project=project, stage=study["full"])["starc"]
    assert (staged["n_excluded_practice"], staged["n_judgments"]) == (2, 3)


def test_the_bonus_per_correct_answer_is_never_for_practice_nor_for_a_failed_worker(study):
    assignments = study["assignments"]
    # Two of three items right; the practice item answered right is no correct answer paid.
    assert correct_answer_bonus(assignment=assignments["good"]) == Decimal("0.20")
    assert correct_answer_bonus(assignment=assignments["bad"]) == Decimal("0")


def test_the_practice_rule_is_starcs_alone(study):
    """Likert and A/B projects read practice accuracy as a worker-quality number only."""
    project = make_project(TaskKind.AB)
    stage = make_stage(project)
    practice = make_item(project, is_practice=True, gold={"choice": "A"})
    worker = make_worker()
    make_judgment(item=practice, stage=stage, worker=worker, choice="B")
    make_judgment(item=make_item(project), stage=stage, worker=worker, choice="A")
    assert judgments_that_count(project=project).count() == 1
    assert judgments_that_count(Judgment.objects.filter(item__project=project)).count() == 1


def test_a_practice_items_own_gold_choice_decides(db):
    """Validity judging: a practice question with no correct answer (gold choice "") is passed
    by the judge who says so (choice "") and failed by one who picks A; role A decides only
    where the item names no gold choice."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.VALIDITY)
    stage = make_stage(project)
    practice = make_item(project, is_practice=True, gold={"choice": ""})
    item = make_item(project, gold={"choice": "A"})
    right, wrong = make_worker(), make_worker()
    make_judgment(item=practice, stage=stage, worker=right, choice="", choices=[])
    make_judgment(item=practice, stage=stage, worker=wrong, choice="A", choices=["A"])
    for worker in (right, wrong):
        make_judgment(item=item, stage=stage, worker=worker, choice="A", choices=["A"])
    for counted in (judgments_that_count(project=project),
                    judgments_that_count(Judgment.objects.filter(item__project=project))):
        assert [j.worker_id for j in counted] == [right.pk]
