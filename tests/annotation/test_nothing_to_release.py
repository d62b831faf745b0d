"""A researcher's day: nine MOCHA items, a qualification of five and a trial of four; the full
stage then has nothing left. Publishing, the stage page and the cockpit said only "full has no
items to release" and "fix what the problem says": the message now says why (the other stages
released every item, each item goes out once) and what gives the stage items."""
from __future__ import annotations

import pytest

from annotation.models import StageKind, StageStatus, TaskKind
from annotation.stage_errors import StageError
from annotation.stage_plan_selectors import stage_items_by_kind
from testing.factories import make_item, make_project, make_stage

pytestmark = pytest.mark.django_db


def test_a_full_stage_left_without_items_says_why_and_what_to_do():
    project = make_project(TaskKind.LIKERT)
    items = [make_item(project, gold={"score": 5}) for _ in range(9)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.COLLECTING, order=1)
    qualification.items.set(items[:5])
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial",
                       status=StageStatus.COLLECTING, order=2)
    trial.items.set(items[5:])
    full = make_stage(project, kind=StageKind.FULL, name="full", order=3)
    with pytest.raises(StageError) as refused:
        stage_items_by_kind(stage=full)
    message = str(refused.value)
    assert message.startswith(f"{full} has no items to release: ")
    assert "released all 9 of the project's items" in message
    assert "import more items" in message
    assert "reuse_earlier_items" in message and "release the 5 the qualification used" in message

    full.settings = {"reuse_earlier_items": True}
    full.save(update_fields=["settings"])
    assert len(stage_items_by_kind(stage=full)) == 5  # the advice works

    trial.settings = {"reuse_earlier_items": True}
    trial.items.set(items)
    with pytest.raises(StageError) as refused:
        stage_items_by_kind(stage=full)
    assert "reuse_earlier_items" not in str(refused.value), "already set: not advised again"


def test_a_project_without_items_says_to_import_them():
    project = make_project(TaskKind.LIKERT)
    make_item(project, is_practice=True)
    full = make_stage(project, kind=StageKind.FULL, name="full")
    with pytest.raises(StageError, match="the project has no items .*import items first"):
        stage_items_by_kind(stage=full)
    practice = make_stage(project, kind=StageKind.PRACTICE, name="warm-up")
    assert len(stage_items_by_kind(stage=practice)) == 1


def test_the_release_preview_says_which_items_each_kind_chooses_from():
    """The stage page said "chosen … from the items no earlier stage released" for a
    qualification (its gold items, released or not) and for a pilot that reuses the
    qualification's items (which the qualification released)."""
    from annotation.stage_plan_selectors import stage_release_preview

    project = make_project(TaskKind.LIKERT)
    items = [make_item(project, gold={"score": 5}) for _ in range(4)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               settings={"n_items": 2})
    assert stage_release_preview(stage=qualification).how.endswith(
        "from the project's items with gold answers")
    qualification.items.set(items[:2])
    pilot = make_stage(project, kind=StageKind.PILOT, name="pilot",
                       settings={"reuse_earlier_items": True})
    preview = stage_release_preview(stage=pilot)
    assert "the qualification's included" in preview.how
    assert {i.pk for i in preview.items} == {i.pk for i in items}
    full = make_stage(project, kind=StageKind.FULL, name="full")
    preview = stage_release_preview(stage=full)
    assert preview.how.endswith("from the items no other stage released")
    assert {i.pk for i in preview.items} == {i.pk for i in items[2:]}


def test_a_qualification_short_of_gold_items_says_how_to_release_it():
    """A researcher's first import (MOCHA's nine dev examples) and a qualification stage: the
    stage page read "a qualification needs 10 items with gold answers; the project has 9",
    naming neither the setting that asks for 10 nor what to set it to."""
    project = make_project(TaskKind.LIKERT)
    for _ in range(9):
        make_item(project, gold={"score": 4})
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual")
    with pytest.raises(StageError) as refused:
        stage_items_by_kind(stage=qualification)
    message = str(refused.value)
    assert "needs 10 items with gold answers; the project has 9" in message
    assert "set “Number of items” (n_items) to 9 or fewer" in message

    qualification.settings = {"n_items": 9}
    qualification.save(update_fields=["settings"])
    assert len(stage_items_by_kind(stage=qualification)) == 9  # the advice works

    empty = make_stage(make_project(TaskKind.LIKERT), kind=StageKind.QUALIFICATION, name="q")
    with pytest.raises(StageError) as refused:
        stage_items_by_kind(stage=empty)
    assert "n_items" not in str(refused.value) and "import items with gold answers" in str(
        refused.value)


def test_the_cockpit_says_a_draft_has_nothing_to_release_once(client):
    """The cockpit read "releases nothing to release: … has no items to release" beside a
    trial left without items; a draft with items still reads "releases 3 items …"."""
    from django.urls import reverse

    from testing.factories import make_user

    owner = make_user(staff=True)
    client.force_login(owner)
    project = make_project(TaskKind.LIKERT, owner=owner)
    items = [make_item(project, gold={"score": 5}) for _ in range(3)]
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial", order=2,
                       status=StageStatus.DRAFT)
    page = client.get(reverse("metrics:project-cockpit", args=[project.slug])).content.decode()
    assert "releases 3 items" in page
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.COLLECTING, order=1)
    qualification.items.set(items)
    page = client.get(reverse("metrics:project-cockpit", args=[project.slug])).content.decode()
    assert f"cannot be published yet: {trial} has no items to release" in page
    assert "releases nothing" not in page
