"""The design each participant sees (issue #13, points 6 and 7), on the real OneStopQA data:
every STARC participant sees each question at one text level only, levels balanced across
participants, on in-house links, Prolific and MTurk HIT plans; and items a worker answered in
an earlier stage (the qualification graded against gold) never come back to them."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.urls import reverse

from annotation.domain.design import design_violations
from annotation.importers import onestopqa
from annotation.models import (
    AssignmentItem,
    ExperimentMode,
    Item,
    Judgment,
    Provider,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.services.access import inhouse_link_create
from annotation.services.assignments import (
    NoItemsAvailable,
    assignment_start,
    assignment_submit,
)
from annotation.services.imports import import_records
from annotation.services.stage_plans import stage_hit_plan, stage_items_choose
from testing.factories import make_hit, make_item, make_project, make_stage, make_worker
from tests.support.paths import shared_data_path
from tests.support.tasks import api, page_config

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

ONESTOPQA = shared_data_path() / "onestopqa" / "onestop_qa.json"
N_PARTICIPANTS = 6


@pytest.fixture
def starc(db):
    """A STARC QA project with the real OneStopQA items; stages release the first two
    paragraphs of the first article: 6 questions x 3 levels = 18 conditions."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.QA, items_per_hit=6,
                           redundancy={"default": 2})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    first = Item.objects.filter(project=project, metadata__article=1,
                                metadata__paragraph__in=[1, 2]).order_by("pk")
    assert first.count() == 18
    return project, list(first)


def _exposures(stage):
    rows = AssignmentItem.objects.filter(assignment__stage=stage).values_list(
        "assignment__worker_id", "item__metadata__paragraph", "item__metadata__question",
        "item__text_level")
    return [(worker, (paragraph, question), level)
            for worker, paragraph, question, level in rows]


def _stored(stage):
    rows = Judgment.objects.filter(stage=stage).values_list(
        "worker_id", "item__metadata__paragraph", "item__metadata__question", "item__text_level")
    return [(worker, (paragraph, question), level) for worker, paragraph, question, level in rows]


def _answer_all(client, config):
    response = api(client, "task-submit", config["token"], {"answers": [
        {"item": item_id, "shown_choice": "a"} for item_id in config["items"]]})
    assert response.status_code == 200, response.content


def test_six_inhouse_annotators_see_each_question_at_one_level_balanced(client, starc):
    project, items = starc
    stage = make_stage(project, status=StageStatus.PUBLISHED)  # no latin_square setting: default
    stage.items.set(items)
    shown = []
    for n in range(N_PARTICIPANTS):
        _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
        config = page_config(client.get(path))
        page_items = Item.objects.filter(pk__in=config["items"])
        shown += [(n, (i.metadata["paragraph"], i.metadata["question"]), i.text_level)
                  for i in page_items]
        _answer_all(client, config)
    assert design_violations(shown, levels=["Ele", "Int", "Adv"]) == []
    assert design_violations(_stored(stage), levels=["Ele", "Int", "Adv"]) == []
    # Six participants on three lists: every condition judged exactly twice.
    per_condition = {}
    for _worker, question, level in _stored(stage):
        per_condition[question, level] = per_condition.get((question, level), 0) + 1
    assert len(per_condition) == 18 and set(per_condition.values()) == {2}


def test_prolific_participants_get_the_same_design(client, starc):
    project, items = starc
    stage = make_stage(project, provider=Provider.PROLIFIC, status=StageStatus.PUBLISHED)
    stage.items.set(items)
    base = reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
    for n in range(N_PARTICIPANTS):
        config = page_config(client.get(base + "?" + urlencode(
            {"PROLIFIC_PID": f"P{n}", "STUDY_ID": "S", "SESSION_ID": f"SESSION{n}"})))
        _answer_all(client, config)
    assert design_violations(_stored(stage), levels=["Ele", "Int", "Adv"]) == []
    assert len(_stored(stage)) == N_PARTICIPANTS * 6


def test_mturk_hit_plans_follow_the_latin_square_and_accept_keeps_it(client, starc):
    project, items = starc
    stage = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT)
    stage.items.set(items)
    plans = stage_hit_plan(stage=stage, store=False)
    assert len(plans) == 3 and all(plan.max_assignments == 2 for plan in plans)
    # Each HIT is one list: six different questions; the three HITs hold every condition once.
    exposures = []
    for n, plan in enumerate(plans):
        keys = [(i.metadata["paragraph"], i.metadata["question"]) for i in plan.items]
        assert len(keys) == len(set(keys)) == 6
        # Each HIT's assignments are two participants of that list.
        exposures += [(f"{n}-{k}", key, i.text_level) for k in range(plan.max_assignments)
                      for key, i in zip(keys, plan.items, strict=True)]
    assert design_violations(exposures, levels=["Ele", "Int", "Adv"]) == []
    # A worker who took one list's HIT cannot take another list's (same questions, other
    # levels): the accept is refused and nothing is created.
    stage.status = StageStatus.PUBLISHED
    stage.save(update_fields=["status"])
    hits = [make_hit(stage, items=plan.items, external_id=f"HIT{n}", max_assignments=2)
            for n, plan in enumerate(plans)]
    worker = make_worker(provider=Provider.MTURK)
    first = assignment_start(stage=stage, worker=worker, hit=hits[0], external_id="A1")
    assignment_submit(assignment=first, answers=[{"item": i.pk, "shown_choice": "a"}
                                                 for i in first.items.all()])
    with pytest.raises(NoItemsAvailable, match="another version"):
        assignment_start(stage=stage, worker=worker, hit=hits[1], external_id="A2")
    assert design_violations(_stored(stage)) == []


def test_latin_square_can_be_turned_off_explicitly(starc):
    project, items = starc
    stage = make_stage(project, status=StageStatus.PUBLISHED, settings={"latin_square": False})
    stage.items.set(items)
    project.items_per_hit = 18
    project.save(update_fields=["items_per_hit"])
    assignment = assignment_start(stage=stage, worker=make_worker())
    assert assignment.items.count() == 18  # every level of every question: the researcher's call


# --- 7. items of earlier stages ---------------------------------------------------------------


def _likert_project():
    project = make_project(TaskKind.LIKERT, items_per_hit=3, redundancy={"default": 1})
    items = [make_item(project, gold={"score": 5}, content={
        "passage": "p", "question": f"q{n}?", "references": ["r"], "candidate": f"c{n}"})
        for n in range(8)]
    return project, items


def test_qualification_items_are_not_released_again_in_later_stages():
    project, items = _likert_project()
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                               settings={"n_items": 3})
    released = stage_items_choose(stage=qualification)
    trial = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       requires_stage=qualification, settings={"n_items": 10})
    assert not set(released) & set(stage_items_choose(stage=trial))
    reuse = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                       settings={"reuse_earlier_items": True})
    assert set(released) <= set(stage_items_choose(stage=reuse, store=False))


def test_a_worker_never_gets_an_item_they_answered_in_an_earlier_stage():
    project, items = _likert_project()
    qualification = make_stage(project, kind=StageKind.QUALIFICATION,
                               status=StageStatus.PUBLISHED)
    qualification.items.set(items[:3])
    worker = make_worker()
    graded = assignment_start(stage=qualification, worker=worker)
    assignment_submit(assignment=graded, answers=[{"item": i.pk, "score": 5}
                                                  for i in graded.items.all()])
    full = make_stage(project, kind=StageKind.FULL, status=StageStatus.PUBLISHED)
    full.items.set(items)  # the researcher released every item, qualification ones included
    got = set()
    for _ in range(3):
        try:
            assignment = assignment_start(stage=full, worker=worker)
        except NoItemsAvailable:
            break
        got |= set(assignment.items.values_list("pk", flat=True))
        assignment_submit(assignment=assignment, answers=[{"item": i, "score": 4} for i in
                                                          assignment.items.values_list(
                                                              "pk", flat=True)])
    assert got == {i.pk for i in items[3:]}
