"""Redundancy per split (MOCHA: 1 judgment on train, 2-3 on dev/test) reads one spelling of a
split at every door: an item's split is stored as the file-name rule spells it
(`annotation.domain.item_content.normalize_split`: validation/val → dev, cases lowered) by the
JSON Lines importer, the items API and the item admin, and a project's redundancy typed under
another spelling ({"validation": 3}) is read under the same one, so a HIT plan and progress
give a dev item the dev redundancy whichever door stored it."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import AssignmentItem, Item, StageStatus, TaskKind
from annotation.services.assignments.errors import NoItemsAvailable
from annotation.services.assignments.lifecycle import assignment_start
from annotation.stage_plan_selectors import stage_hits_planned
from testing.factories import make_project, make_stage, make_user, make_worker

pytestmark = pytest.mark.django_db


def _item(external_id: str, split: str) -> dict:
    return {"external_id": external_id, "split": split,
            "content": {"passage": f"Passage of {external_id}.", "question": "Why?",
                        "references": ["because"], "candidate": "no idea"}}


@pytest.mark.reliability
def test_every_item_door_stores_one_spelling_of_a_split_and_redundancy_follows(tmp_path,
                                                                                client):
    owner = make_user("alice", superuser=True)
    project = make_project(TaskKind.LIKERT, slug="splits", owner=owner,
                           redundancy={"Train": 1, "validation": 3, "default": 2})
    api = APIClient()
    api.force_authenticate(owner)
    response = api.post("/api/projects/splits/items/bulk/",
                        {"items": [_item("api-dev", "Validation"), _item("api-train", "TRAIN")]},
                        format="json")
    assert response.status_code == 201, response.content
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(_item("jl-dev", "val")) + "\n")
    for _ in range(2):  # imported again: the same item, nothing refused
        call_command("import_data", "jsonl", str(path), "--project", "splits", "--no-report",
                     stdout=(tmp_path / "o.txt").open("w"))
    client.force_login(owner)
    response = client.post(reverse("admin:annotation_item_add"), {
        "project": project.pk, "external_id": "adm-dev", "split": " Dev ",
        "content": json.dumps(_item("adm-dev", "")["content"]), "gold": "null",
        "metadata": "{}"})
    assert response.status_code == 302, response.content[:3000]
    splits = dict(Item.objects.filter(project=project).values_list("external_id", "split"))
    assert splits == {"api-dev": "dev", "api-train": "train", "jl-dev": "dev",
                      "adm-dev": "dev"}
    plans = stage_hits_planned(stage=make_stage(project, status=StageStatus.DRAFT))
    assert sorted((plan.split, plan.max_assignments) for plan in plans) == \
        [("dev", 3), ("dev", 3), ("dev", 3), ("train", 1)]


@pytest.mark.reliability
def test_the_pages_picking_reads_the_redundancy_under_the_same_spelling():
    project = make_project(TaskKind.LIKERT, slug="pick",
                           redundancy={"train": 1, "Validation": 3, "default": 2})
    for external_id, split in (("d", "dev"), ("t", "train")):
        Item.objects.create(project=project, external_id=external_id, split=split,
                            content=_item(external_id, split)["content"])
    stage = make_stage(project, status=StageStatus.COLLECTING,
                       settings={"items_per_assignment": 1})
    held = Counter()
    for _ in range(6):
        try:
            assignment = assignment_start(stage=stage, worker=make_worker())
        except NoItemsAvailable:
            continue
        held.update(AssignmentItem.objects.filter(assignment=assignment)
                    .values_list("item__external_id", flat=True))
    assert held == {"d": 3, "t": 1}


@pytest.mark.reliability
@pytest.mark.parametrize("typed", ["validation", "Val", " dev "])
def test_every_door_that_filters_by_split_reads_the_same_spelling(typed):
    """Items imported from validation.json are stored with split `dev`; a researcher who
    filters by the dataset's own spelling found nothing: the items and judgments APIs
    answered `?split=validation` with an empty list, and a stage's item filter was refused
    ("no data items of the project match split='validation'"). Every filter reads the split
    as it is stored (`annotation.domain.item_content.item_filter_value`)."""
    from annotation.services.stage_plans import stage_item_filter_errors, stage_items_select
    from testing.factories import make_item, make_judgment

    owner = make_user("alice", superuser=True)
    project = make_project(TaskKind.LIKERT, slug="splits", owner=owner)
    stage = make_stage(project, status=StageStatus.DRAFT)
    dev = [make_item(project, external_id=f"dev{n}", split="dev") for n in range(3)]
    make_item(project, external_id="train0", split="train")
    for item in dev:
        make_judgment(item=item, stage=stage, worker=make_worker(), score=4)
    api = APIClient()
    api.force_authenticate(owner)
    items = api.get("/api/projects/splits/items/", {"split": typed}).json()["results"]
    assert sorted(row["external_id"] for row in items) == ["dev0", "dev1", "dev2"]
    judgments = api.get("/api/projects/splits/judgments/", {"split": typed}).json()["results"]
    assert len(judgments) == 3
    assert stage_item_filter_errors(project_id=project.pk, split=typed) == {}
    assert stage_items_select(stage=stage, split=typed) == 3
    assert sorted(stage.items.values_list("external_id", flat=True)) == ["dev0", "dev1", "dev2"]
