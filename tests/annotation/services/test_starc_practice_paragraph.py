"""A STARC practice item is a reading of its paragraph (the previous audit's finding, on the
real OneStopQA data): with one real item, os1_1_1_Ele, made the practice item, every participant
was served paragraph os1_1 again as data (one got the very question again at Intermediate),
because picking left practice items out of the paragraphs a participant had read. Now the one
rule (`annotation/services/assignments/design.py:units_read`) counts the stage's practice items
at every door that picks items, and publishing refuses a STARC stage whose data items share a
paragraph with one of its practice items (`practice_overlap_error`), naming it and what to do;
the demo's practice item has a paragraph of its own, so its STARC stage still finishes."""
from __future__ import annotations

from collections import Counter
from urllib.parse import urlencode

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.domain.answers import MC_SHOWN
from annotation.domain.design import design_violations
from annotation.importers import onestopqa
from annotation.models import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    ExperimentMode,
    Item,
    Judgment,
    Provider,
    Stage,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.services.access import inhouse_link_create
from annotation.services.imports import import_records
from annotation.services.stages import stage_publish
from annotation.stage_errors import StageError
from testing.factories import make_hit, make_project, make_stage, make_user, make_worker
from tests.support.starc import ONESTOPQA
from tests.support.starc import exposures as _exposures
from tests.support.starc import mturk_page as _mturk
from tests.support.starc import natural_unit as _natural
from tests.support.starc import shown_items as _shown
from tests.support.tasks import api, page_config

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

PRACTICE = "os1_1_1_Ele"
N_PARAGRAPHS = 9


@pytest.fixture
def starc(db):
    """The real OneStopQA items of the first nine paragraphs (articles 1 and 2), os1_1 among
    them; its first question at Elementary is the project's practice item."""
    owner = make_user(staff=True)
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.QA, owner=owner,
                           items_per_hit=N_PARAGRAPHS + 1, redundancy={"default": 1})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    units = sorted(set(Item.objects.filter(project=project, metadata__article__in=[1, 2])
                       .values_list("design_unit", flat=True)), key=_natural)[:N_PARAGRAPHS]
    assert "os1_1" in units
    Item.objects.filter(project=project).exclude(design_unit__in=units).update(excluded=True)
    Item.objects.filter(project=project, external_id=PRACTICE).update(is_practice=True)
    data = list(Item.objects.filter(project=project, excluded=False, is_practice=False)
                .order_by("pk"))
    assert len(data) == N_PARAGRAPHS * 9 - 1
    return project, data


def _answer_all(client, config):
    """Every item answered (the practice item rightly: Prolific's comprehension check)."""
    rows = AssignmentItem.objects.filter(item_id__in=config["items"],
                                         assignment__status=AssignmentStatus.IN_PROGRESS)
    right = {row.item_id: MC_SHOWN[row.presented_order.index("A")] for row in rows
             if row.item.is_practice and row.presented_order}
    response = api(client, "task-submit", config["token"], {"answers": [
        {"item": item_id, "shown_choice": right.get(item_id, "a")}
        for item_id in config["items"]]})
    assert response.status_code == 200, response.content


def test_a_practice_paragraph_is_never_served_again_as_data_at_any_picking_door(client, starc):
    """A stage opened with the overlap anyway (before the refusal, or by hand): in-house links
    and Prolific serve the practice item first and then no item of its paragraph, at any
    level."""
    project, data = starc
    practice = Item.objects.get(project=project, external_id=PRACTICE)
    stage = make_stage(project, status=StageStatus.PUBLISHED)
    stage.items.set(data)
    shown = []
    for n in range(4):
        _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
        config = page_config(client.get(path))
        items = _shown(config)
        assert practice in items
        shown += [(f"in-house {n}", item) for item in items]
        _answer_all(client, config)
    prolific = make_stage(project, provider=Provider.PROLIFIC, status=StageStatus.PUBLISHED,
                          settings={"items_per_assignment": N_PARAGRAPHS + 1})
    prolific.items.set(data)
    base = reverse("annotation:task-prolific", kwargs={"stage_id": prolific.pk})
    for n in range(2):
        config = page_config(client.get(base + "?" + urlencode(
            {"PROLIFIC_PID": f"P{n}", "STUDY_ID": "S1", "SESSION_ID": f"S{n}"})))
        shown += [(f"prolific {n}", item) for item in _shown(config)]
        _answer_all(client, config)
    # Each participant: the practice item, then one item of each other paragraph.
    per_participant = Counter(who for who, _item in shown)
    assert set(per_participant.values()) == {N_PARAGRAPHS}, per_participant
    assert [(who, i.external_id) for who, i in shown
            if i.design_unit == "os1_1" and not i.is_practice] == []
    assert design_violations(_exposures(shown)) == []


def test_an_mturk_hit_holding_a_practice_paragraph_is_refused_at_accept(client, starc):
    """MTurk: W1 did the practice in a practice stage's HIT, then accepts a data HIT holding
    os1_1_2_Int; a hand-made HIT holding the practice item and another level of its paragraph
    is refused to everyone. Nothing is created."""
    project, data = starc
    practice = Item.objects.get(project=project, external_id=PRACTICE)
    practice_stage = make_stage(project, kind=StageKind.PRACTICE, provider=Provider.MTURK,
                                status=StageStatus.PUBLISHED)
    practice_stage.items.set([practice])
    make_hit(practice_stage, items=[practice], external_id="HIT-P", max_assignments=5)
    _answer_all(client, page_config(_mturk(client, practice_stage, "HIT-P", "W1", "A1")))
    mturk = make_stage(project, provider=Provider.MTURK, status=StageStatus.PUBLISHED)
    mturk.items.set(data)
    again = Item.objects.get(project=project, external_id="os1_1_2_Int")
    other = Item.objects.get(project=project, external_id="os1_2_1_Ele")
    make_hit(mturk, items=[again, other], external_id="HIT-D", max_assignments=2)
    refused = _mturk(client, mturk, "HIT-D", "W1", "A2")
    assert b"already read in another version" in refused.content
    assert not Assignment.objects.filter(external_id="A2").exists()
    # A hand-made HIT holding the practice item and another level of its paragraph.
    make_hit(mturk, items=[practice, again], external_id="HIT-X", max_assignments=1)
    refused = _mturk(client, mturk, "HIT-X", "W9", "A9")
    assert b"the same text twice" in refused.content
    assert not Assignment.objects.filter(external_id="A9").exists()


def test_returned_work_of_a_practice_paragraph_is_never_given_to_the_next_arrival(client,
                                                                                 starc):
    """A participant returns their page (the practice item and eight paragraphs): the
    arrivals after them, who take the conditions left short, never get os1_1's."""
    project, data = starc
    stage = make_stage(project, status=StageStatus.PUBLISHED)
    stage.items.set(data)
    _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
    page_config(client.get(path))
    Assignment.objects.filter(stage=stage).update(status=AssignmentStatus.RETURNED)
    for _n in range(3):
        _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
        config = page_config(client.get(path))
        assert not [i.external_id for i in _shown(config)
                    if i.design_unit == "os1_1" and not i.is_practice]
        _answer_all(client, config)


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_a_stage_sharing_a_paragraph_with_its_practice_item_is_refused_at_every_door(client,
                                                                                     starc):
    """Publishing (the function, the admin's action), the release preview (API and the stage
    page) and the cockpit name the paragraph, its practice item and what to do; the stage
    stays a draft. Without os1_1's data items it publishes, and every participant reads the
    practice paragraph once."""
    project, data = starc
    stage = make_stage(project, status=StageStatus.DRAFT)
    stage.items.set(data)
    named = f"os1_1 (practice {PRACTICE})"
    with pytest.raises(StageError, match=r"share a text with its practice items: os1_1 "
                                         rf"\(practice {PRACTICE}\)") as refused:
        stage_publish(stage=stage, user=None)
    assert "practice items from paragraphs (or articles) that are not in the study" in str(
        refused.value)
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.hits.exists()
    assert named in stage.publish_problem
    # The admin's publish action.
    client.force_login(project.owner)
    response = client.post(reverse("admin:annotation_stage_changelist"), {
        "action": "publish_stages", "_selected_action": [str(stage.pk)], "index": "0"},
        follow=True)
    assert any(named in message for message in _messages(response)), _messages(response)
    assert Stage.objects.get(pk=stage.pk).status == StageStatus.DRAFT
    # The release preview: the API and the stage page, then the cockpit's readiness line.
    Stage.objects.filter(pk=stage.pk).update(publish_problem="")
    api_client = APIClient()
    api_client.force_authenticate(project.owner)
    preview = api_client.get(reverse("annotation-api:stage-release-preview",
                                     args=[project.slug, stage.pk])).json()
    assert named in preview["error"], preview
    page = client.get(reverse("admin:annotation_stage_change", args=[stage.pk])).content
    assert named.encode() in page
    cockpit = client.get(reverse("metrics:project-cockpit", args=[project.slug])).content
    assert named.encode() in cockpit

    # The paragraph's data items left out: published, and served without a second reading.
    stage.items.set([item for item in data if item.design_unit != "os1_1"])
    stage_publish(stage=stage, user=None)
    stage.refresh_from_db()
    assert stage.status in (StageStatus.PUBLISHED, StageStatus.COLLECTING)
    _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
    config = page_config(client.get(path))
    assert Counter(i.design_unit for i in _shown(config)) == Counter(
        sorted({i.design_unit for i in data}))


def test_the_demo_starc_stage_is_completed_by_its_participants_each_text_read_once(client):
    """The demo's practice item was the garden paragraph's first question, its second a data
    item: counted as a reading, garden q2 could never be served and the stage never finished.
    Now its practice paragraph is its own: each demo participant completes their batch (the
    practice item, then one item of each paragraph), each text once."""
    from annotation.services.demo import demo_data_load, demo_links

    demo_data_load()
    practice = Item.objects.get(project__slug="demo-mc-qa", is_practice=True)
    data_units = set(Item.objects.filter(project__slug="demo-mc-qa", is_practice=False)
                     .values_list("design_unit", flat=True))
    stage = Stage.objects.get(project__slug="demo-mc-qa", kind=StageKind.FULL)
    links = [link for link in demo_links() if link[0].slug == "demo-mc-qa"]
    assert len(links) == 3
    for _project, worker, path in links:
        shown = []
        for _page in range(5):
            response = client.get(path, follow=True)
            if b"task-config" not in response.content:
                assert b"Nothing more to do" in response.content
                break
            config = page_config(response)
            shown += _shown(config)
            _answer_all(client, config)
        # The practice item, then one data item of every paragraph of the stage.
        assert [i.pk for i in shown if i.is_practice] == [practice.pk], worker
        data_read = [i.design_unit for i in shown if not i.is_practice]
        assert sorted(data_read) == sorted(data_units), worker
        assert len({i.design_unit for i in shown}) == len(shown), worker
        assert Judgment.objects.filter(stage=stage, worker=worker).count() == len(shown)
    assert practice.design_unit not in data_units


def test_an_item_becomes_a_practice_item_only_while_no_open_stage_serves_its_paragraph(
        client, starc):
    """The item form (the one door that sets the flag on a stored item): os1_1_1_Ele made a
    practice item while an open stage serves os1_1's other items would leave those items
    unservable to everyone who did the practice, so the stage would never finish. Refused,
    naming the stage and the paragraph; free once the stage is closed."""
    import json

    project, data = starc
    Item.objects.filter(project=project, external_id=PRACTICE).update(is_practice=False)
    item = Item.objects.get(project=project, external_id=PRACTICE)
    stage = make_stage(project, status=StageStatus.COLLECTING, name="full")
    stage.items.set(data)  # os1_1's eight other conditions, not this item
    client.force_login(make_user("root", superuser=True))
    form = {name: getattr(item, name) or "" for name in (
        "external_id", "dataset", "source", "split", "domain", "text_level", "group_key",
        "design_unit", "exclusion_reason")}
    form.update(project=project.pk, content=json.dumps(item.content), gold=json.dumps(item.gold),
                metadata=json.dumps(item.metadata or {}), is_practice="on")
    url = reverse("admin:annotation_item_change", args=[item.pk])
    response = client.post(url, form)
    assert response.status_code == 200
    error = response.context["adminform"].form.errors["is_practice"][0]
    assert "open stage" in error and "full" in error and "os1_1" in error
    assert not Item.objects.get(pk=item.pk).is_practice
    Stage.objects.filter(pk=stage.pk).update(status=StageStatus.CLOSED)
    assert client.post(url, form).status_code == 302
    assert Item.objects.get(pk=item.pk).is_practice
