"""A worker is never handed an item they already hold, at any door that hands out items: the
pages that pick items (`_not_seen_by`) and the MTurk accept of a HIT (fixed items), so that
no page is left that could never be submitted (one judgment per worker, item and stage)."""
from __future__ import annotations

import pytest

from annotation.importers import onestopqa
from annotation.models import (
    Assignment,
    AssignmentStatus,
    ExperimentMode,
    Item,
    Judgment,
    Provider,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.services.access import inhouse_link_create
from annotation.services.assignments import assignment_start
from annotation.services.imports import import_records
from annotation.services.stage_plans import stage_hit_plan
from testing.factories import make_hit, make_item, make_project, make_stage, make_worker
from tests.support.starc import ONESTOPQA, mturk_page, natural_unit
from tests.support.tasks import api, make_task, page_config

pytestmark = pytest.mark.django_db


def _submit(client, config):
    return api(client, "task-submit", config["token"], {
        "answers": [{"item": item_id, "score": 3} for item_id in config["items"]]})


def _two_hits_sharing_gold():
    """A collecting MTurk stage with two HITs, HIT0 and HIT1, that share its one gold item;
    returns (stage, gold)."""
    project = make_project(TaskKind.LIKERT, items_per_hit=2, gold_rate=0.5,
                           redundancy={"default": 1})
    passage = {"passage": "One passage.", "references": ["r"]}
    for n in range(4):
        make_item(project, group_key="p", content={**passage, "question": f"q{n}?",
                                                   "candidate": f"c{n}"})
    gold = make_item(project, group_key="p", is_gold_check=True, gold={"score": 5},
                     content={**passage, "question": "gold?", "candidate": "r"})
    stage = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT)
    plans = stage_hit_plan(stage=stage, store=False)
    shared = [plan for plan in plans if gold in plan.items]
    assert len(shared) >= 2  # the plan repeats the one gold item across HITs
    stage.status = StageStatus.COLLECTING
    stage.save(update_fields=["status"])
    for n, plan in enumerate(shared[:2]):
        make_hit(stage, items=plan.items, external_id=f"HIT{n}",
                 max_assignments=plan.max_assignments)
    return stage, gold


def test_an_mturk_hit_sharing_a_gold_item_with_a_hit_the_worker_holds_is_refused(client):
    """MTurk workers accept several HITs of a task at once. A stage mixing in gold repeats a
    gold item across its HITs (the pool is smaller than the HITs), so a worker holding two of
    them held the gold item twice: the first submit stored it, and the second HIT could then
    never be submitted ("Some of these items were already judged by you in this stage") — its
    work lost and unpaid. The accept now keeps the picking's rule: an item the worker holds
    in a live assignment of the stage is not handed out again."""
    stage, gold = _two_hits_sharing_gold()

    first = page_config(mturk_page(client, stage, "HIT0", "W1", "A1"))
    second = mturk_page(client, stage, "HIT1", "W1", "A2")
    assert second.status_code == 200 and b"task-config" not in second.content
    assert b"another HIT of this task" in second.content
    assert not Assignment.objects.filter(external_id="A2").exists()
    assert _submit(client, first).status_code == 200
    # Once submitted, the HIT holding the gold item they judged is still refused, and
    # another worker takes it and submits it.
    again = mturk_page(client, stage, "HIT1", "W1", "A3")
    assert b"task-config" not in again.content
    other = page_config(mturk_page(client, stage, "HIT1", "W2", "A4"))
    assert _submit(client, other).status_code == 200
    assert Judgment.objects.filter(item=gold).count() == 2
    # The refusal asks for the return only: submitting the other HIT first never opens it.
    assert b"submit the other one first" not in second.content


def test_an_item_held_in_a_page_of_another_stage_is_not_handed_out_again():
    """A trial page still open (its gold item held, not yet answered) and the full stage
    opened meanwhile (another tab, the annotator's home page): the full stage's page held the
    same gold item, so the worker answered it in both stages, where an item answered in an
    earlier stage is never served again. An item in hand counts as the answered one does."""
    project, trial, items = make_task(TaskKind.AB, n_items=6, items_per_hit=2, gold_rate=0.5,
                                      redundancy={"default": 1})
    gold = make_item(project, is_gold_check=True, gold=items[0].gold)
    trial.kind = StageKind.TRIAL
    trial.save(update_fields=["kind"])
    trial.items.set(items[:3])
    full = make_stage(project, status=StageStatus.COLLECTING)
    full.items.set(items[3:])
    worker = make_worker()
    open_trial = assignment_start(stage=trial, worker=worker)
    assert gold in open_trial.items.all()
    open_full = assignment_start(stage=full, worker=worker)
    assert gold not in open_full.items.all()
    assert open_full.items.filter(is_gold_check=False).exists()


@pytest.mark.parametrize("synced", [True, False], ids=["after-the-sync", "before-the-sync"])
def test_a_starc_hit_returned_and_accepted_again_opens_again(client, synced):
    """A worker who returned a HIT on MTurk and accepted it again (a slip of the button, the
    HIT taken back from the queue) gets the same items again, where they left (the rule
    every provider keeps for a page taken again: `_superseded_on_mturk`, `earlier_guesses`).
    Under the STARC Latin square the accept refused it ("a text you have already read in
    another version"): the paragraphs shown in the returned copy counted as read, though the
    HIT shows them at the very levels read, and every other HIT holds them at another level,
    so the worker could take nothing more. Another list's HIT stays refused."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.QA, items_per_hit=9,
                           redundancy={"default": 2})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    units = sorted(set(Item.objects.filter(project=project, metadata__article__in=[1, 2])
                       .values_list("design_unit", flat=True)), key=natural_unit)[:9]
    stage = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT)
    stage.items.set(Item.objects.filter(project=project, design_unit__in=units))
    plans = stage_hit_plan(stage=stage, store=False)
    stage.status = StageStatus.COLLECTING
    stage.save(update_fields=["status"])
    for n, plan in enumerate(plans[:2]):
        make_hit(stage, items=plan.items, external_id=f"HIT{n}", max_assignments=2)
    first = page_config(mturk_page(client, stage, "HIT0", "W1", "A1"))
    if synced:  # the sync lists it returned
        Assignment.objects.filter(external_id="A1").update(status=AssignmentStatus.RETURNED)
    again = mturk_page(client, stage, "HIT0", "W1", "A2")
    assert b"task-config" in again.content, again.content.decode()[-600:]
    assert page_config(again)["items"] == first["items"]
    assert _submit_mc(client, page_config(again)).status_code == 200
    other = mturk_page(client, stage, "HIT1", "W1", "A3")
    assert b"already read in another version" in other.content


def _submit_mc(client, config):
    return api(client, "task-submit", config["token"], {
        "answers": [{"item": item_id, "shown_choice": "a"} for item_id in config["items"]]})



def _starc_project(mode):
    project = make_project(TaskKind.MC, experiment_mode=mode, items_per_hit=3,
                           redundancy={"default": 1})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    return project


def _one_item_per_paragraph(project, level, n=3):
    """The first question of the first `n` paragraphs at `level`: a stage whose own items share
    no paragraph (so no Latin square over them), as a qualification chosen by kind is."""
    units = sorted(set(Item.objects.filter(project=project).values_list("design_unit",
                                                                        flat=True)),
                   key=natural_unit)[:n]
    return [Item.objects.filter(project=project, design_unit=unit, text_level=level)
            .order_by("pk").first() for unit in units]


@pytest.mark.parametrize("kind", [StageKind.QUALIFICATION, StageKind.FULL])
@pytest.mark.parametrize("provider", [Provider.MTURK, Provider.INHOUSE])
def test_a_paragraph_read_in_another_mode_is_not_served_by_a_stage_without_a_square(
        client, kind, provider):
    """A participant of two modes of a study (one project each) read paragraphs at the
    elementary level in the QA project; the guessing project's stage lists one item of each
    paragraph, at the advanced level (a qualification chosen by kind always does). Its items
    share no paragraph, so no Latin square is on, and the MTurk accept checked the design only
    under the square: the HIT was taken and the paragraphs read again at another level. The
    in-house page skips them (`one_item_per_unread_unit`), and so does the accept now: the
    paragraph rule binds wherever the design applies (`design_applies`)."""
    qa = _starc_project(ExperimentMode.QA)
    guessing = _starc_project(ExperimentMode.GUESSING)
    read_stage = make_stage(qa, provider=provider, status=StageStatus.COLLECTING)
    read_items = _one_item_per_paragraph(qa, "Ele")
    read_stage.items.set(read_items)
    stage = make_stage(guessing, kind=kind, provider=provider, status=StageStatus.COLLECTING)
    stage.items.set(_one_item_per_paragraph(guessing, "Adv", n=4))
    if provider == Provider.MTURK:
        make_hit(read_stage, items=read_items, external_id="READ", max_assignments=1)
        make_hit(stage, items=list(stage.items.order_by("pk")), external_id="GUESS",
                 max_assignments=1)
        assert b"task-config" in mturk_page(client, read_stage, "READ", "W1", "A1").content
        refused = mturk_page(client, stage, "GUESS", "W1", "A2")
        assert b"already read in another version" in refused.content
        assert not Assignment.objects.filter(external_id="A2").exists()
        return
    worker = make_worker()
    assignment_start(stage=read_stage, worker=worker)
    got = assignment_start(stage=stage, worker=worker).items.all()
    assert {item.design_unit for item in got} == \
        {item.design_unit for item in stage.items.all()} - {i.design_unit for i in read_items}


def test_an_inhouse_starc_page_that_timed_out_gives_its_own_items_again(client):
    """An annotator whose STARC page held every paragraph of the stage (a batch of nine) left
    it past the timeout (released unjudged: the sweep, a closed tab) and opened the link
    again: the paragraphs shown counted as read, so the square served none and the link said
    "Nothing more to do" for good (the qualification's page reopens for this very reason).
    The page's own items are no other version: they come again, each at the level shown."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.QA, items_per_hit=9,
                           redundancy={"default": 1})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    units = sorted(set(Item.objects.filter(project=project, metadata__article__in=[1, 2])
                       .values_list("design_unit", flat=True)), key=natural_unit)[:9]
    stage = make_stage(project, status=StageStatus.COLLECTING)
    stage.items.set(Item.objects.filter(project=project, design_unit__in=units))
    worker = make_worker()
    _link, path = inhouse_link_create(worker=worker, project=project, stage=stage)
    first = page_config(client.get(path))["items"]
    assert len(first) == 9
    Assignment.objects.filter(worker=worker).update(status=AssignmentStatus.RETURNED)
    again = client.get(path)
    assert b"task-config" in again.content, again.content.decode()[-500:]
    assert sorted(page_config(again)["items"]) == sorted(first)
