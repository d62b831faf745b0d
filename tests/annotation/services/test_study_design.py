"""The STARC design on every door (issue #32 point 5; #13 points 6 and 7), on the real OneStopQA
data: the design unit is the paragraph (OneStopQA) or the article (RACE), and no participant
ever gets two items of one unit — two questions of a paragraph, or one question at two levels —
on in-house links, Prolific and MTurk HITs, across several assignments of a stage and across
the stages of a project; each participant's items are balanced over levels (and datasets), and
across participants every condition (question x level) of a paragraph is covered equally. Items
a worker answered in an earlier stage never come back to them."""
from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.domain.design import balance_violations, design_violations
from annotation.importers import jsonl, onestopqa, onestopqa_responses
from annotation.importers.base import ImportFormatError
from annotation.models import (
    Assignment,
    AssignmentItem,
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
from annotation.services.assignments import (
    NoItemsAvailable,
    assignment_start,
    assignment_submit,
)
from annotation.services.imports import import_records
from annotation.services.stage_plans import stage_hit_plan, stage_items_choose
from annotation.services.stages import stage_publish
from annotation.stage_errors import GuardFailed
from testing.factories import (
    make_hit,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)
from tests.support.paths import shared_data_path
from tests.support.starc import ONESTOPQA
from tests.support.starc import exposures as _exposures
from tests.support.starc import mturk_page as _mturk
from tests.support.starc import natural_unit as _natural
from tests.support.starc import shown_items as _shown
from tests.support.tasks import api, page_config

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

IN_LAB = shared_data_path() / "onestopqa" / "in_lab_qa.tsv"
LEVELS = ["Ele", "Int", "Adv"]
N_PARAGRAPHS = 9  # 9 paragraphs x 3 questions x 3 levels = 81 conditions, 9 per paragraph


@pytest.fixture
def starc(db):
    """A STARC QA project with the real OneStopQA items; the stages release the first nine
    paragraphs (articles 1 and 2): 81 items, nine conditions per paragraph."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.QA,
                           items_per_hit=N_PARAGRAPHS, redundancy={"default": 1})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    units = sorted(set(Item.objects.filter(project=project, metadata__article__in=[1, 2])
                       .values_list("design_unit", flat=True)), key=_natural)[:N_PARAGRAPHS]
    items = list(Item.objects.filter(project=project, design_unit__in=units).order_by("pk"))
    assert len(items) == N_PARAGRAPHS * 9
    return project, items


def _conditions(items) -> dict[str, set]:
    """Each paragraph's full set of conditions (question, level)."""
    full: dict[str, set] = {}
    for item in items:
        full.setdefault(item.design_unit, set()).add((item.metadata["question"], item.text_level))
    return full


def _stored(stage):
    rows = Judgment.objects.filter(stage=stage).select_related("item")
    return _exposures((j.worker_id, j.item) for j in rows)


def _answer_all(client, config):
    response = api(client, "task-submit", config["token"], {"answers": [
        {"item": item_id, "shown_choice": "a"} for item_id in config["items"]]})
    assert response.status_code == 200, response.content


def _assert_balanced(exposures, *, per_participant: int):
    """Every participant: `per_participant` items, as many at each level and of each question."""
    by_participant = Counter(who for who, _unit, _condition in exposures)
    assert set(by_participant.values()) == {per_participant}
    levels = [(who, condition[1]) for who, _unit, condition in exposures]
    questions = [(who, condition[0]) for who, _unit, condition in exposures]
    assert balance_violations(levels, slack=0, values=LEVELS) == []
    assert balance_violations(questions, slack=0, values=[1, 2, 3]) == []


# --- the stored design unit -----------------------------------------------------------------


def test_the_design_unit_is_stored_by_the_importers_and_the_items_api(client, starc,
                                                                      admin_user):
    project, items = starc
    # OneStopQA: the paragraph, at every level and for its three questions.
    item = Item.objects.get(project=project, external_id="os21_1_2_Int")
    assert item.design_unit == "os21_1"
    assert set(Item.objects.filter(project=project, design_unit="os21_1")
               .values_list("external_id", flat=True)) == {
        f"os21_1_{q}_{level}" for q in (1, 2, 3) for level in LEVELS}
    # The in-lab experiment file: OneStopQA paragraphs and RACE articles, from the item ids.
    lab = make_project(TaskKind.MC)
    import_records(project=lab, records=onestopqa_responses.parse(IN_LAB), progress=False)
    units = dict(Item.objects.filter(project=lab).values_list("external_id", "design_unit"))
    assert units["os2_3_3_Adv"] == "os2_3" and units["r3919_1_Middle"] == "r3919"
    assert all(unit for unit in units.values())
    # The items API: given, derived from metadata, or none (the item is its own unit).
    api_client = APIClient()
    api_client.force_authenticate(admin_user)
    url = f"/api/projects/{project.slug}/items/"
    content = {"paragraph": "Some text.", "question": "Why?", "answers": ["a", "b", "c", "d"],
               "critical_span": None, "distractor_span": None}
    for external_id, extra, unit in [
        ("mine-1", {"design_unit": "lesson-4"}, "lesson-4"),
        ("mine-2", {"metadata": {"article": 7, "paragraph": 2}}, "article 7 paragraph 2"),
        ("mine-3", {}, ""),
    ]:
        response = api_client.post(url, {"external_id": external_id, "content": content,
                                         **extra}, format="json")
        assert response.status_code == 201, response.content
        assert response.json()["design_unit"] == unit
        assert Item.objects.get(project=project, external_id=external_id).design_unit == unit
    # Bad input is refused naming the field.
    response = api_client.post(url, {"external_id": "long", "content": content,
                                     "design_unit": "x" * 101}, format="json")
    assert response.status_code == 400 and "design_unit" in response.json()
    with pytest.raises(ImportFormatError, match="design_unit"):
        jsonl.parse_line({"external_id": "bad", "content": content, "design_unit": 5},
                         kind=TaskKind.MC, path=Path("items.jsonl"), line=2, split=None)
    # JSONL rows may name it; the admin's item form derives it when left blank.
    row = jsonl.parse_line({"external_id": "line-1", "content": content, "design_unit": "x-1"},
                           kind=TaskKind.MC, path=Path("items.jsonl"), line=1, split=None)
    assert row.columns()["design_unit"] == "x-1"
    form = {"project": project.pk, "external_id": "admin-1", "content": json.dumps(content),
            "gold": "null", "metadata": json.dumps({"article": 8, "paragraph": 1}),
            "design_unit": "", "dataset": "", "source": "", "split": "", "domain": "",
            "text_level": "", "group_key": "", "exclusion_reason": ""}
    client.force_login(admin_user)
    response = client.post(reverse("admin:annotation_item_add"), form)
    assert response.status_code == 302, response.content[:2000]
    assert Item.objects.get(external_id="admin-1").design_unit == "article 8 paragraph 1"


# --- in-house links ---------------------------------------------------------------------------


def test_nine_inhouse_annotators_read_each_paragraph_once_balanced(client, starc):
    """The six in-house annotators of #32 saw one paragraph at every level: now each of nine
    annotators gets one item of each paragraph, three at each level and three of each question
    rank, and the nine together cover each of the 81 conditions exactly once."""
    project, items = starc
    stage = make_stage(project, status=StageStatus.PUBLISHED)  # no latin_square setting: default
    stage.items.set(items)
    shown = []
    for n in range(9):
        _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
        config = page_config(client.get(path))
        shown += [(n, item) for item in _shown(config)]
        _answer_all(client, config)
    conditions = _conditions(items)
    assert design_violations(_exposures(shown), conditions=conditions) == []
    stored = _stored(stage)
    assert design_violations(stored, conditions=conditions) == []
    _assert_balanced(stored, per_participant=N_PARAGRAPHS)
    assert Counter((unit, condition) for _w, unit, condition in stored) == {
        (unit, c): 1 for unit, cs in conditions.items() for c in cs}


def test_several_assignments_and_later_stages_never_repeat_a_paragraph(client, starc):
    """A link serves one assignment after another (three items each here); across them, and in
    a later stage of the project — even one that reuses earlier items — an annotator never gets
    a paragraph again."""
    project, items = starc
    project.items_per_hit = 3
    project.save(update_fields=["items_per_hit"])
    trial = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.PUBLISHED)
    trial.items.set(items[:45])  # the first five paragraphs
    full = make_stage(project, kind=StageKind.FULL, status=StageStatus.PUBLISHED,
                      settings={"reuse_earlier_items": True})
    full.items.set(items)
    workers = [make_worker() for _ in range(3)]
    got = []
    for stage in (trial, full):
        for worker in workers:
            _link, path = inhouse_link_create(worker=worker, project=project, stage=stage)
            while True:
                response = client.get(path)
                if b"task-config" not in response.content:
                    assert b"Nothing more to do" in response.content
                    break
                config = page_config(response)
                assert len(config["items"]) <= 3
                got += [(worker.pk, item) for item in _shown(config)]
                _answer_all(client, config)
    assert Assignment.objects.filter(stage=trial).count() >= 6  # several per annotator
    assert design_violations(_exposures(got)) == []
    per_worker = Counter(who for who, _item in got)
    assert set(per_worker.values()) == {N_PARAGRAPHS}  # each read all nine paragraphs once
    trial_units = {i.design_unit for i in items[:45]}
    for worker in workers:
        in_full = {item.design_unit for who, item in got
                   if who == worker.pk and Judgment.objects.filter(
                       stage=full, worker=worker, item=item).exists()}
        assert in_full == {i.design_unit for i in items} - trial_units


def test_mixed_datasets_each_participant_gets_every_paragraph_and_article_once(client, db):
    """OneStopQA paragraphs and RACE articles (the in-lab file) in one stage, as the in-lab
    experiment: each participant's items are half OneStopQA, half RACE, one per text."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.QA, items_per_hit=12,
                           redundancy={"default": 2})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    race = [r for r in onestopqa_responses.parse(IN_LAB) if r.dataset == "race"]
    for record in race:
        record.judgments = []
    import_records(project=project, records=race, progress=False)
    race_units = Counter(Item.objects.filter(project=project, dataset="race")
                         .values_list("design_unit", flat=True))
    several = sorted(unit for unit, n in race_units.items() if n > 1)[:6]
    os_units = ["os1_1", "os1_2", "os1_3", "os1_4", "os1_5", "os1_6"]
    items = list(Item.objects.filter(project=project, design_unit__in=[*several, *os_units]))
    stage = make_stage(project, status=StageStatus.PUBLISHED)
    stage.items.set(items)
    shown = []
    for n in range(4):
        _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
        config = page_config(client.get(path))
        shown += [(n, item) for item in _shown(config)]
        _answer_all(client, config)
    conditions: dict[str, set] = {}
    for item in items:
        conditions.setdefault(item.design_unit, set()).add(item.pk)
    # Each RACE article's questions are dealt in turn (2 or 3 questions, four participants).
    assert design_violations([(n, i.design_unit, i.pk) for n, i in shown],
                             conditions=conditions) == []
    assert balance_violations([(n, i.dataset) for n, i in shown], slack=0) == []
    assert Counter(n for n, _i in shown) == {n: 12 for n in range(4)}
    # MTurk HIT plans of the same items: one item per text in each HIT, every condition in
    # exactly one HIT; the lists that hold RACE articles alternate the datasets.
    mturk = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT)
    mturk.items.set(items)
    plans = stage_hit_plan(stage=mturk, store=False)
    assert Counter(i.pk for plan in plans for i in plan.items) == {i.pk: 1 for i in items}
    for plan in plans:
        assert len({i.design_unit for i in plan.items}) == len(plan.items)
        datasets = [i.dataset for i in plan.items]
        if "race" in datasets:
            assert datasets[:2] in (["onestopqa", "race"], ["race", "onestopqa"])


# --- articles: one paragraph of an article per batch ------------------------------------------


def _article(item) -> str:
    return item.design_unit.split("_")[0]  # os21_1 -> os21


def test_a_participants_batches_interleave_articles_at_every_door(client, db):
    """A browser walk of a real STARC study: in-house participant Ann got os21_1 … os21_6, one
    article's paragraphs in article order. In the guessing and pilot modes the paragraph shown
    after each item helps with the next question of the same article, and the paper draws a
    participant's trials from different articles. With the whole OneStopQA (30 articles) each
    participant's batches hold one paragraph per article, consecutive items of different
    articles, across their batches too (in-house, Prolific, MTurk HIT plans), and the square
    still gives every participant each paragraph once, levels and questions balanced."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.GUESSING,
                           items_per_hit=N_PARAGRAPHS, redundancy={"default": 1})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    items = list(Item.objects.filter(project=project))
    assert len({_article(i) for i in items}) == 30
    by_pk = {item.pk: item for item in items}
    inhouse = make_stage(project, status=StageStatus.PUBLISHED)
    inhouse.items.set(items)
    shown = []
    for n in range(9):
        _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=inhouse)
        mine = []
        for _batch in range(2):
            config = page_config(client.get(path))
            mine += [by_pk[pk] for pk in config["items"]]  # in page order
            _answer_all(client, config)
        assert len(mine) == 2 * N_PARAGRAPHS
        assert len({_article(i) for i in mine}) == len(mine), [i.design_unit for i in mine]
        shown += [(n, item) for item in mine]
    conditions = _conditions(items)
    assert design_violations(_exposures(shown), conditions=conditions) == []
    _assert_balanced(_exposures(shown), per_participant=2 * N_PARAGRAPHS)
    # Prolific: the same picking, another stage and its own participants.
    prolific = make_stage(project, provider=Provider.PROLIFIC, status=StageStatus.PUBLISHED,
                          settings={"items_per_assignment": 6})
    prolific.items.set(items)
    for n in range(3):
        config = page_config(_prolific(client, prolific, f"P{n}", f"S{n}"))
        got = [by_pk[pk] for pk in config["items"]]
        assert len(got) == 6 and len({_article(i) for i in got}) == 6
        _answer_all(client, config)
    # MTurk: each Latin-square HIT holds one paragraph per article, every condition once.
    mturk = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT)
    mturk.items.set(items)
    plans = stage_hit_plan(stage=mturk, store=False)
    assert Counter(i.pk for plan in plans for i in plan.items) == {i.pk: 1 for i in items}
    for plan in plans:
        assert len({_article(i) for i in plan.items}) == len(plan.items) == N_PARAGRAPHS, \
            [i.design_unit for i in plan.items]
    # A qualification chosen by kind (every taker the same items): ten articles, not os21's
    # six paragraphs and four of the next article's.
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                               settings={"n_items": 10})
    stage_publish(stage=qualification, user=None)
    _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=qualification)
    got = [by_pk[pk] for pk in page_config(client.get(path))["items"]]
    assert len(got) == 10 and len({_article(i) for i in got}) == 10, [i.design_unit for i in got]


def test_gold_items_come_from_another_article_than_the_batchs_items(client, db):
    """A gold check is a text read too: beside the rule that it is never a paragraph the
    worker reads, it comes from an article none of the batch's items is from, when the pool
    has one (here one gold item of 28: os4_1's; the others are paragraphs 2 of the batch's
    three articles), in-house and in MTurk HIT plans."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.GUESSING,
                           items_per_hit=4, gold_rate=0.25, redundancy={"default": 9})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    regular = list(Item.objects.filter(project=project,
                                       design_unit__in=["os1_1", "os2_1", "os3_1"]))
    Item.objects.filter(project=project, design_unit__in=["os1_2", "os2_2", "os3_2"]) \
        .update(is_gold_check=True)
    other = Item.objects.filter(project=project, design_unit="os4_1").order_by("pk").first()
    Item.objects.filter(pk=other.pk).update(is_gold_check=True)
    stage = make_stage(project, status=StageStatus.PUBLISHED)
    stage.items.set(regular)
    for _n in range(4):
        _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
        got = list(Item.objects.filter(pk__in=page_config(client.get(path))["items"]))
        assert len(got) == 4 and len({_article(i) for i in got}) == 4, \
            [i.design_unit for i in got]
        assert [i.pk for i in got if i.is_gold_check] == [other.pk]
    mturk = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT)
    mturk.items.set(regular)
    for plan in stage_hit_plan(stage=mturk, store=False):
        assert [i.pk for i in plan.items if i.is_gold_check] == [other.pk]
        assert len({_article(i) for i in plan.items}) == 4


# --- Prolific ---------------------------------------------------------------------------------


def _prolific(client, stage, pid, session):
    base = reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
    return client.get(base + "?" + urlencode(
        {"PROLIFIC_PID": pid, "STUDY_ID": f"STUDY{stage.pk}", "SESSION_ID": session}))


def test_prolific_participants_get_the_same_design_across_studies(client, starc):
    project, items = starc
    first = make_stage(project, provider=Provider.PROLIFIC, status=StageStatus.PUBLISHED,
                       settings={"items_per_assignment": 4})
    first.items.set(items[:36])  # paragraphs 1-4
    second = make_stage(project, provider=Provider.PROLIFIC, status=StageStatus.PUBLISHED)
    second.items.set(items)
    shown = []
    for n in range(9):
        config = page_config(_prolific(client, first, f"P{n}", f"S1-{n}"))
        shown += [(f"P{n}", item) for item in _shown(config)]
        _answer_all(client, config)
    conditions = _conditions(items[:36])
    assert design_violations(_exposures(shown), conditions=conditions) == []
    # Four paragraphs each: levels as even as four items allow; every condition once.
    assert balance_violations([(who, item.text_level) for who, item in shown], slack=1,
                              values=LEVELS) == []
    assert Counter((i.design_unit, i.metadata["question"], i.text_level) for _w, i in shown) \
        == {(unit, q, level): 1 for unit, cs in conditions.items() for q, level in cs}
    # A second study of the same project: the same participants get only the other paragraphs.
    for n in range(9):
        config = page_config(_prolific(client, second, f"P{n}", f"S2-{n}"))
        got = _shown(config)
        assert {i.design_unit for i in got} == {i.design_unit for i in items[36:]}
        shown += [(f"P{n}", item) for item in got]
        _answer_all(client, config)
    assert design_violations(_exposures(shown)) == []
    assert Counter(who for who, _i in shown) == {f"P{n}": N_PARAGRAPHS for n in range(9)}


def test_one_participant_in_two_modes_of_a_study_never_reads_a_paragraph_twice(client, starc):
    """A STARC study's experiment modes are one project each: the researcher invites the same
    in-house annotators to the QA project and to the guessing project. Before, the square gave
    each of them in the guessing project the very items they had just read in the QA project
    (their arrival number is the same in both), so the "guesses" were made after reading. The
    MTurk accept and a qualification read the same rule (`units_seen`). A project of other
    texts that reuses the unit names (another dataset) is not touched."""
    qa_project, items = starc
    qa = make_stage(qa_project, status=StageStatus.PUBLISHED)
    qa.items.set(items)
    guessing = make_project(TaskKind.MC, experiment_mode=ExperimentMode.GUESSING,
                            items_per_hit=3, redundancy={"default": 1})
    import_records(project=guessing, records=onestopqa.parse(ONESTOPQA), progress=False)
    units = {item.design_unit for item in items}
    guess = make_stage(guessing, status=StageStatus.PUBLISHED)
    guess.items.set(Item.objects.filter(project=guessing, design_unit__in=units))
    other = make_project(TaskKind.MC, items_per_hit=3, redundancy={"default": 1})
    import_records(project=other, records=[
        jsonl.parse_line({"external_id": f"mine-{n}", "dataset": "mine", "design_unit": unit,
                          "content": {"paragraph": "Some text.", "question": "Why?",
                                      "answers": ["a", "b", "c", "d"], "critical_span": None,
                                      "distractor_span": None}},
                         kind=TaskKind.MC, path=Path("items.jsonl"), line=n, split=None)
        for n, unit in enumerate(sorted(units)[:3], start=1)], progress=False)
    elsewhere = make_stage(other, status=StageStatus.PUBLISHED)
    elsewhere.items.set(Item.objects.filter(project=other))
    workers = [make_worker() for _ in range(3)]
    read: dict[int, set] = {}
    for worker in workers:
        _link, path = inhouse_link_create(worker=worker, project=qa_project, stage=qa)
        config = page_config(client.get(path))
        read[worker.pk] = {item.design_unit for item in _shown(config)}
        _answer_all(client, config)
    assert all(len(units_read) == N_PARAGRAPHS for units_read in read.values())
    # Each has read all nine paragraphs in the QA project: nothing of them to guess on.
    for worker in workers:
        _link, path = inhouse_link_create(worker=worker, project=guessing, stage=guess)
        response = client.get(path)
        assert b"task-config" not in response.content
        assert not Judgment.objects.filter(stage=guess, worker=worker).exists()
    # A newcomer guesses; a worker who read only some paragraphs gets the others.
    newcomer = make_worker()
    _link, path = inhouse_link_create(worker=newcomer, project=guessing, stage=guess)
    assert len(_shown(page_config(client.get(path)))) == 3
    partial = make_worker()
    _link, path = inhouse_link_create(worker=partial, project=qa_project, stage=qa)
    qa_project.items_per_hit = 3
    qa_project.save(update_fields=["items_per_hit"])
    config = page_config(client.get(path))
    first = {item.design_unit for item in _shown(config)}
    _answer_all(client, config)
    _link, path = inhouse_link_create(worker=partial, project=guessing, stage=guess)
    guessed = {item.design_unit for item in _shown(page_config(client.get(path)))}
    assert guessed and not guessed & first
    # Unit names of another dataset are other texts: served as usual.
    _link, path = inhouse_link_create(worker=workers[0], project=other, stage=elsewhere)
    assert len(_shown(page_config(client.get(path)))) == 3


# --- MTurk ------------------------------------------------------------------------------------


def test_mturk_hit_plans_are_latin_square_lists_and_accept_keeps_the_design(client, starc):
    project, items = starc
    project.redundancy = {"default": 2}
    project.save(update_fields=["redundancy"])
    stage = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT)
    stage.items.set(items)
    plans = stage_hit_plan(stage=stage, store=False)
    # Nine lists of nine paragraphs; each HIT one list: every paragraph once, three items per
    # level and per question; the nine HITs hold every condition exactly once.
    assert len(plans) == 9 and all(plan.max_assignments == 2 for plan in plans)
    exposures = []
    for n, plan in enumerate(plans):
        assert len({i.design_unit for i in plan.items}) == len(plan.items) == N_PARAGRAPHS
        exposures += _exposures((f"{n}-{k}", i) for k in range(plan.max_assignments)
                                for i in plan.items)
    assert Counter(i.pk for plan in plans for i in plan.items) == {i.pk: 1 for i in items}
    assert design_violations(exposures, conditions=_conditions(items)) == []
    _assert_balanced(exposures, per_participant=N_PARAGRAPHS)
    # Workers come through the ExternalQuestion URL. One who took one list's HIT cannot take
    # another list's (the same paragraphs in other conditions): refused, nothing created.
    stage.status = StageStatus.PUBLISHED
    stage.save(update_fields=["status"])
    for n, plan in enumerate(plans):
        make_hit(stage, items=plan.items, external_id=f"HIT{n}", max_assignments=2)
    config = page_config(_mturk(client, stage, "HIT0", "W1", "A1"))
    _answer_all(client, config)
    refused = _mturk(client, stage, "HIT1", "W1", "A2")
    assert refused.status_code == 200 and b"task-config" not in refused.content
    assert b"already read in another version" in refused.content
    assert not Assignment.objects.filter(external_id="A2").exists()
    # Another worker takes it; the stored judgments keep the design.
    _answer_all(client, page_config(_mturk(client, stage, "HIT1", "W2", "A3")))
    assert design_violations(_stored(stage)) == []
    # A later stage of the project: its HIT with a paragraph W1 read is refused too.
    later = make_stage(project, provider=Provider.MTURK, status=StageStatus.PUBLISHED,
                       settings={"reuse_earlier_items": True})
    later.items.set(items)
    make_hit(later, items=plans[2].items, external_id="HIT-LATER", max_assignments=2)
    refused = _mturk(client, later, "HIT-LATER", "W1", "A4")
    assert b"already read in another version" in refused.content
    assert not Assignment.objects.filter(external_id="A4").exists()


def test_a_hand_made_hit_with_two_items_of_one_paragraph_is_refused(client, starc):
    project, items = starc
    stage = make_stage(project, provider=Provider.MTURK, status=StageStatus.PUBLISHED)
    stage.items.set(items)
    make_hit(stage, items=items[:2], external_id="HITX", max_assignments=1)  # q1 Ele, q1 Int
    refused = _mturk(client, stage, "HITX", "W9", "A9")
    assert b"the same text twice" in refused.content
    assert not AssignmentItem.objects.exists()


# --- a text shown in an assignment that ended without judgments -------------------------------


def test_a_paragraph_shown_in_a_returned_assignment_is_never_served_at_another_level(client,
                                                                                     starc):
    """The text was on the worker's screen: returning the assignment (or letting it expire)
    does not make another level of it a first reading, at the in-house page or a HIT accept."""
    project, items = starc
    project.items_per_hit = 3
    project.save(update_fields=["items_per_hit"])
    stage = make_stage(project, status=StageStatus.PUBLISHED)
    stage.items.set(items)
    worker = make_worker()
    _link, path = inhouse_link_create(worker=worker, project=project, stage=stage)
    first = _shown(page_config(client.get(path)))
    read = {item.design_unit for item in first}
    assert len(read) == 3
    Assignment.objects.filter(worker=worker).update(status=AssignmentStatus.RETURNED)
    # Someone else judges what the worker was shown: those conditions are full, and the
    # square's fallback would be the same paragraphs at other levels.
    for item in first:
        make_judgment(item=item, stage=stage, choice="a")
    again = []
    while True:
        response = client.get(path)
        if b"task-config" not in response.content:
            break
        config = page_config(response)
        again += _shown(config)
        _answer_all(client, config)
    assert again and not {item.design_unit for item in again} & read
    # A HIT of those paragraphs at other levels is refused at accept.
    mturk = make_stage(project, provider=Provider.MTURK, status=StageStatus.PUBLISHED,
                       settings={"reuse_earlier_items": True})
    mturk.items.set(items)
    def one_per_paragraph(level):
        return list({i.design_unit: i for i in items
                     if i.design_unit in read and i.text_level == level}.values())

    shown_hit, other_hit = one_per_paragraph("Ele"), one_per_paragraph("Adv")
    make_hit(mturk, items=shown_hit, external_id="HIT-SHOWN", max_assignments=1)
    make_hit(mturk, items=other_hit, external_id="HIT-OTHER", max_assignments=1)
    page_config(_mturk(client, mturk, "HIT-SHOWN", "WR", "AR1"))
    Assignment.objects.filter(external_id="AR1").update(status=AssignmentStatus.RETURNED)
    refused = _mturk(client, mturk, "HIT-OTHER", "WR", "AR2")
    assert b"already read in another version" in refused.content
    assert not Assignment.objects.filter(external_id="AR2").exists()


# --- the qualification ----------------------------------------------------------------------


def test_a_starc_qualification_takes_one_item_per_paragraph_and_each_page_reads_each_once(
        client, starc):
    project, items = starc
    project.items_per_hit = 4  # smaller than the qualification: it is still one assignment
    project.save(update_fields=["items_per_hit"])
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                               settings={"n_items": 6})
    stage_publish(stage=qualification, user=None)
    released = list(qualification.items.all())
    assert len(released) == 6 and len({i.design_unit for i in released}) == 6
    worker = make_worker()
    _link, path = inhouse_link_create(worker=worker, project=project, stage=qualification)
    config = page_config(client.get(path))
    assert sorted(config["items"]) == sorted(i.pk for i in released)
    _answer_all(client, config)
    # Graded once, on all six: nothing more to take in the qualification.
    assert worker.qualifications.get(stage=qualification).n_items == 6
    assert b"task-config" not in client.get(path).content


def test_a_qualification_listing_one_paragraph_at_two_levels_is_refused_and_never_served_twice(
        client, starc):
    project, items = starc
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT)
    two_levels = [i for i in items if i.design_unit == items[0].design_unit][:3]
    qualification.items.set(two_levels + [items[9], items[18]])
    with pytest.raises(GuardFailed, match=rf"{items[0].design_unit} \(3 items\)"):
        stage_publish(stage=qualification, user=None)
    qualification.refresh_from_db()
    assert qualification.status == StageStatus.DRAFT
    assert items[0].design_unit in qualification.publish_problem
    # A stage opened before the check (or by hand): the page serves the first item of each
    # text only, and none of a text the worker read in another stage.
    qualification.status = StageStatus.PUBLISHED
    qualification.save(update_fields=["status"])
    worker = make_worker()
    trial = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.PUBLISHED,
                       settings={"latin_square": True})
    trial.items.set([items[18]])
    assignment_submit(assignment=assignment_start(stage=trial, worker=worker, shown=True),
                      answers=[{"item": items[18].pk, "shown_choice": "a"}])
    _link, path = inhouse_link_create(worker=worker, project=project, stage=qualification)
    shown = _shown(page_config(client.get(path)))
    assert sorted(i.pk for i in shown) == sorted([two_levels[0].pk, items[9].pk])


def test_a_likert_qualification_is_one_assignment_of_all_its_items_whatever_the_page_size():
    project, items = _likert_project()  # three items per HIT
    qualification = make_stage(project, kind=StageKind.QUALIFICATION,
                               status=StageStatus.PUBLISHED)
    qualification.items.set(items[:5])
    worker = make_worker()
    assignment = assignment_start(stage=qualification, worker=worker)
    assert assignment.items.count() == 5
    assignment_submit(assignment=assignment, answers=[{"item": i.pk, "score": 5}
                                                      for i in assignment.items.all()])
    assert worker.qualifications.get(stage=qualification).n_items == 5
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=qualification, worker=worker)


# --- the researcher's choice, and gold items ----------------------------------------------------


def test_latin_square_can_be_turned_off_explicitly(starc):
    project, items = starc
    stage = make_stage(project, status=StageStatus.PUBLISHED, settings={"latin_square": False})
    stage.items.set(items[:18])
    project.items_per_hit = 18
    project.save(update_fields=["items_per_hit"])
    assignment = assignment_start(stage=stage, worker=make_worker())
    assert assignment.items.count() == 18  # two paragraphs, nine items each: the researcher's call


def test_gold_items_never_come_from_a_paragraph_the_worker_reads(starc):
    project, items = starc
    project.gold_rate = 0.5
    project.items_per_hit = 6
    project.save(update_fields=["gold_rate", "items_per_hit"])
    # Gold checks of the same nine paragraphs (questions 1 of each at Ele, marked as gold).
    gold = [i for i in items if i.metadata["question"] == 1 and i.text_level == "Ele"]
    Item.objects.filter(pk__in=[g.pk for g in gold]).update(is_gold_check=True)
    stage = make_stage(project, status=StageStatus.PUBLISHED)
    stage.items.set([i for i in items if i not in gold])
    for _ in range(4):
        worker = make_worker()
        for _ in range(3):
            try:
                assignment = assignment_start(stage=stage, worker=worker)
            except NoItemsAvailable:
                break
            assignment_submit(assignment=assignment, answers=[
                {"item": i.pk, "shown_choice": "a"} for i in assignment.items.all()])
    stored = [(j.worker_id, j.item.design_unit, j.item_id)
              for j in Judgment.objects.select_related("item")]
    assert any(item_id in {g.pk for g in gold} for _w, _u, item_id in stored)
    # No repeat per participant (gold items have no redundancy target, so no balance check).
    assert design_violations([(w, unit, unit) for w, unit, _i in stored]) == []


# --- items of earlier stages --------------------------------------------------------------------


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



def test_mturk_previews_never_show_a_paragraph_so_none_is_seen_at_several_levels(client, starc):
    """A preview names no worker, so it cannot be checked against what they read; the first
    items of the Latin-square HITs are one paragraph at each level, so previews that show the
    paragraph show it at every level before the worker accepts any HIT. The paragraph comes
    with the accepted HIT only; the preview keeps the question and its answers."""
    project, items = starc
    stage = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT)
    stage.items.set(items)
    plans = stage_hit_plan(stage=stage, store=False)
    stage.status = StageStatus.PUBLISHED
    stage.save(update_fields=["status"])
    previews = []
    for n, plan in enumerate(plans):
        make_hit(stage, items=plan.items, external_id=f"HIT{n}", max_assignments=2)
        response = _mturk(client, stage, f"HIT{n}", "", "ASSIGNMENT_ID_NOT_AVAILABLE")
        assert response.status_code == 200
        previews.append((plan.items[0], response.content.decode()))
    assert len({first.text_level for first, _page in previews}) > 1  # the case that leaked
    for first, page in previews:
        assert html.escape(first.content["question"]) in page
        for item in items:
            assert html.escape(item.content["paragraph"][:80]) not in page
    # Accepting a HIT shows its paragraphs, as before.
    accepted = _mturk(client, stage, "HIT0", "W1", "A1").content.decode()
    assert html.escape(plans[0].items[0].content["paragraph"][:80]) in accepted
