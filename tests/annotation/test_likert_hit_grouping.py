"""One HIT holds candidates of one passage (MOCHA: up to 10 sharing a passage, read once),
whichever door stored the items: a Likert item given no group key is grouped by its passage
(`annotation.domain.design.likert_group_key`), as the MOCHA importer groups them, so HIT plans
(MTurk, every publish door) and the pages that pick items (in-house, Prolific) never mix
passages in one HIT or assignment. A passage with 23 candidates makes HITs of 10, 10 and 3."""
from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import AssignmentItem, Item, StageStatus, TaskKind
from annotation.services.assignments.lifecycle import assignment_start
from annotation.stage_plan_selectors import stage_hits_planned
from testing.factories import make_project, make_stage, make_user, make_worker

pytestmark = pytest.mark.django_db

PASSAGES = {"p1": ("Ann went to Paris in May.", 23), "p2": ("Bob stayed home all June.", 4)}


def _items() -> list[dict]:
    """The two passages' candidates interleaved (p1-0, p2-0, p1-1, ...), as a client posting
    them in another order would."""
    items = [{"external_id": f"{key}-{n}", "split": "dev",
              "content": {"passage": passage, "question": "Where, and when?",
                          "references": ["in May"], "candidate": f"answer {n}"}}
             for key, (passage, count) in PASSAGES.items() for n in range(count)]
    return sorted(items, key=lambda item: int(item["external_id"].split("-")[1]))


def _passages(items) -> set[str]:
    return {item.content["passage"] for item in items}


@pytest.fixture
def api_project():
    owner = make_user("alice")
    project = make_project(TaskKind.LIKERT, slug="groups", owner=owner, items_per_hit=10)
    client = APIClient()
    client.force_authenticate(owner)
    response = client.post("/api/projects/groups/items/bulk/", {"items": _items()},
                           format="json")
    assert response.status_code == 201, response.content
    return project


@pytest.mark.reliability
def test_api_items_without_a_group_key_make_hits_of_one_passage(api_project):
    plans = stage_hits_planned(stage=make_stage(api_project, status=StageStatus.DRAFT))
    assert all(len(_passages(plan.items)) == 1 for plan in plans)
    sizes = sorted((next(iter(_passages(p.items)))[:3], len(p.items)) for p in plans)
    assert sizes == [("Ann", 3), ("Ann", 10), ("Ann", 10), ("Bob", 4)]


@pytest.mark.reliability
def test_an_inhouse_page_gives_one_assignment_one_passage(api_project):
    stage = make_stage(api_project, status=StageStatus.COLLECTING,
                       settings={"items_per_assignment": 10})
    assignment = assignment_start(stage=stage, worker=make_worker())
    items = [link.item for link in AssignmentItem.objects.filter(assignment=assignment)]
    assert len(items) == 10 and len(_passages(items)) == 1


def test_an_imported_jsonl_item_and_an_admin_item_get_the_passage_key(tmp_path, client):
    project = make_project(TaskKind.LIKERT, slug="jl")
    path = tmp_path / "items.jsonl"
    first = [item for item in _items() if item["external_id"].startswith("p1-")]
    path.write_text("".join(json.dumps(item) + "\n" for item in first[:2]))
    call_command("import_data", "jsonl", str(path), "--project", "jl", "--no-report",
                 stdout=(tmp_path / "o.txt").open("w"))
    keys = set(Item.objects.filter(project=project).values_list("group_key", flat=True))
    assert len(keys) == 1 and "" not in keys
    client.force_login(make_user("root", superuser=True))
    item = first[5]
    response = client.post(reverse("admin:annotation_item_add"), {
        "project": project.pk, "external_id": "adm", "content": json.dumps(item["content"]),
        "gold": "null", "metadata": "{}"})
    assert response.status_code == 302, response.content[:3000]
    assert Item.objects.get(external_id="adm").group_key in keys


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_stored_keyless_likert_items_their_passage_key():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    node = ("annotation", "0020_likert_group_key_from_passage")
    parent = ("annotation", "0019_inhouse_annotators_per_researcher")
    executor = MigrationExecutor(connection)
    executor.migrate([parent])
    apps = executor.loader.project_state([parent]).apps
    Project = apps.get_model("annotation", "Project")
    OldItem = apps.get_model("annotation", "Item")
    likert = Project.objects.create(slug="old-likert", title="Old", kind="likert")
    mc = Project.objects.create(slug="old-mc", title="Old", kind="mc")
    for n, (key, (passage, _count)) in enumerate(PASSAGES.items()):
        OldItem.objects.create(project=likert, external_id=key, content={
            "passage": passage, "question": "q", "references": ["r"], "candidate": "c"})
        OldItem.objects.create(project=likert, external_id=f"given-{n}", group_key="mine",
                               content={"passage": passage, "question": "q",
                                        "references": ["r"], "candidate": "c"})
    OldItem.objects.create(project=mc, external_id="mc", content={
        "paragraph": "p", "question": "q", "answers": ["a", "b", "c", "d"]})
    executor = MigrationExecutor(connection)
    executor.migrate([node])
    keys = dict(Item.objects.values_list("external_id", "group_key"))
    assert keys["p1"] and keys["p2"] and keys["p1"] != keys["p2"]
    assert keys["given-0"] == keys["given-1"] == "mine"
    assert keys["mc"] == ""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
