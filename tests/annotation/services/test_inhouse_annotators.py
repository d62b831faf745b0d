"""An in-house annotator is a researcher's own: two researchers who each invite an "Ann" have
two annotators, so one Ann's reading (STARC never serves a paragraph twice to one person, in
any project holding the same text) does not keep the other from it, and one researcher's
contact details or links never reach the other's. One researcher's "Ann" is one annotator
across their projects, and an annotator from before names were scoped keeps her history."""
from __future__ import annotations

from io import StringIO

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotation.importers import onestopqa
from annotation.models import ExperimentMode, Item, Provider, StageStatus, TaskKind, Worker
from annotation.services.access import (
    inhouse_annotator,
    inhouse_annotators_invite,
    inhouse_home_links,
    inhouse_link_create,
)
from annotation.services.imports import import_records
from testing.factories import make_assignment, make_project, make_stage, make_worker
from tests.support.paths import shared_data_path
from tests.support.tasks import api, page_config

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

ONESTOPQA = shared_data_path() / "onestopqa" / "onestop_qa.json"


def _researcher(name: str):
    return get_user_model().objects.create_user(username=name, password="pw-" + name * 3,
                                                is_staff=True)


def _starc_study(owner):
    """A STARC QA project of `owner` on the real OneStopQA items, its stage releasing three
    paragraphs at every level (27 items): a participant reads one item of each paragraph."""
    project = make_project(TaskKind.MC, owner=owner, experiment_mode=ExperimentMode.QA,
                           items_per_hit=3, redundancy={"default": 1})
    import_records(project=project, records=onestopqa.parse(ONESTOPQA), progress=False)
    units = sorted(set(Item.objects.filter(project=project, metadata__article=1)
                       .values_list("design_unit", flat=True)))[:3]
    stage = make_stage(project, status=StageStatus.PUBLISHED)
    stage.items.set(Item.objects.filter(project=project, design_unit__in=units))
    assert stage.items.count() == 27
    return project, stage


def _items_shown(client, path) -> list[int]:
    response = client.get(path)
    return page_config(response)["items"] if b"task-config" in response.content else []


def test_another_researchers_ann_is_another_annotator_and_reads_what_the_first_ann_read(client):
    """Before, both labs' "Ann" were one worker: the second lab's Ann got "nothing more to do",
    since every paragraph had been read (by the first lab's Ann)."""
    alice, bob = _researcher("alice"), _researcher("bob")
    (_, alice_stage), (_, bob_stage) = _starc_study(alice), _starc_study(bob)
    (_, alice_path, _), = inhouse_annotators_invite(stage=alice_stage, names=["Ann"])
    (_, bob_path, _), = inhouse_annotators_invite(stage=bob_stage, names=["Ann"])
    alice_ann = Worker.objects.get(provider=Provider.INHOUSE, researcher=alice)
    bob_ann = Worker.objects.get(provider=Provider.INHOUSE, researcher=bob)
    assert alice_ann != bob_ann and alice_ann.external_id == bob_ann.external_id == "ann"
    config = page_config(client.get(alice_path))
    assert len(config["items"]) == 3
    response = api(client, "task-submit", config["token"], {"answers": [
        {"item": item_id, "shown_choice": "a"} for item_id in config["items"]]})
    assert response.status_code == 200, response.content
    assert len(_items_shown(client, bob_path)) == 3
    # Alice's Ann has read every paragraph of these texts: none comes back to her, in any
    # of Alice's projects that holds them.
    _, alice_second = _starc_study(alice)
    (_, again, _), = inhouse_annotators_invite(stage=alice_second, names=["ann"])
    assert _items_shown(client, again) == []


def test_one_researchers_ann_is_one_annotator_across_their_projects_and_doors():
    alice = _researcher("alice")
    (first, first_stage), (second, _) = _starc_study(alice), _starc_study(alice)
    inhouse_annotators_invite(stage=first_stage, names=["Ann Lee"])
    inhouse_home_links(project=second, names=["ann lee"])
    ann = inhouse_annotator(project=first, name="ANN  LEE")
    assert Worker.objects.filter(provider=Provider.INHOUSE).count() == 1
    assert ann.researcher == alice and ann.links.count() == 2
    out = StringIO()
    call_command("task_links", project=[first.slug], worker="ann-lee", stdout=out)
    assert Worker.objects.filter(provider=Provider.INHOUSE).count() == 1
    assert ann.links.count() == 3


def test_task_links_gives_each_projects_owner_their_own_annotator():
    alice, bob = _researcher("alice"), _researcher("bob")
    (alice_project, _), (bob_project, _) = _starc_study(alice), _starc_study(bob)
    call_command("task_links", project=[alice_project.slug, bob_project.slug],
                 worker="rater-1", stdout=StringIO())
    raters = Worker.objects.filter(provider=Provider.INHOUSE, external_id="rater-1")
    assert {rater.researcher for rater in raters} == {alice, bob}
    assert all(rater.links.get().project.owner == rater.researcher for rater in raters)


def test_a_link_never_hands_one_researchers_annotator_to_anothers_project(admin_client):
    """Every door that issues a personal link: the service and the admin's add form."""
    alice, bob = _researcher("alice"), _researcher("bob")
    (_, alice_stage), (bob_project, bob_stage) = _starc_study(alice), _starc_study(bob)
    inhouse_annotators_invite(stage=alice_stage, names=["Ann"])
    alice_ann = Worker.objects.get(researcher=alice)
    with pytest.raises(ValueError, match="another researcher's in-house annotator"):
        inhouse_link_create(worker=alice_ann, project=bob_project, stage=bob_stage)
    response = admin_client.post("/admin/annotation/inhouselink/add/", {
        "worker": alice_ann.pk, "project": bob_project.pk, "stage": bob_stage.pk})
    assert response.status_code == 200
    assert "another researcher&#x27;s in-house annotator" in response.content.decode()
    assert not alice_ann.links.filter(project=bob_project).exists()


def test_an_annotator_from_before_names_were_scoped_keeps_her_history():
    """The migration makes an annotator seen by one researcher that researcher's; one seen by
    two stays unscoped, and each of them still reaches her by name, so her qualifications and
    the paragraphs she read stay hers (no history split)."""
    import importlib

    claim = importlib.import_module(
        "annotation.migrations.0019_inhouse_annotators_per_researcher").inhouse_annotators_claim
    alice, bob = _researcher("alice"), _researcher("bob")
    (alice_project, alice_stage), (bob_project, bob_stage) = _starc_study(alice), _starc_study(bob)
    only_alices = make_worker(external_id="ann")
    make_assignment(alice_stage, worker=only_alices, status="submitted")
    shared = make_worker(external_id="ben")
    make_assignment(alice_stage, worker=shared, status="submitted")
    inhouse_link_create(worker=shared, project=bob_project, stage=bob_stage)
    nobodys = make_worker(external_id="cy")
    claim(django_apps, None)
    for worker in (only_alices, shared, nobodys):
        worker.refresh_from_db()
    assert only_alices.researcher == alice
    assert shared.researcher is None and nobodys.researcher is None
    assert inhouse_annotator(project=alice_project, name="Ann") == only_alices
    assert inhouse_annotator(project=alice_project, name="Ben") == shared
    assert inhouse_annotator(project=bob_project, name="Ben") == shared
    # Bob never worked with an "Ann": his is a new annotator of his own.
    assert inhouse_annotator(project=bob_project, name="Ann").researcher == bob
