"""annotation/access_selectors.py: the visibility rule and the doors built on it. The doors as the
pages and APIs use them: tests/metrics_app/views/test_access_doors.py."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import Http404

from annotation.access_selectors import (
    access_item,
    access_project,
    access_project_by_pk,
    access_project_worker,
    access_stage,
    projects_visible_to,
    workers_visible_to,
)
from annotation.models import TaskKind
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return make_user("owner")


@pytest.fixture
def colleague():
    return make_user("colleague")


@pytest.fixture
def project(owner, colleague):
    return make_project(TaskKind.LIKERT, owner=owner, shared_with=[colleague], slug="mine")


def test_the_rule_owner_sharer_superuser_and_nobody_else(project, owner, colleague):
    other = make_project(TaskKind.AB, owner=make_user("else"), slug="theirs")
    inactive = make_user("gone", superuser=True, is_active=False)
    assert set(projects_visible_to(owner)) == {project}
    assert set(projects_visible_to(colleague)) == {project}
    assert set(projects_visible_to(make_user("root", superuser=True))) == {project, other}
    assert not projects_visible_to(make_user("stranger")).exists()
    assert not projects_visible_to(AnonymousUser()).exists()
    assert not projects_visible_to(inactive).exists()
    assert not projects_visible_to(None).exists()


def test_a_project_shared_twice_is_listed_once(project, owner):
    project.shared_with.add(owner)  # owner and sharer: still one row, no distinct() needed
    assert projects_visible_to(owner).count() == 1


def test_workers_visible_are_those_of_visible_projects(project, colleague):
    mine = make_judgment(item=make_item(project)).worker
    other = make_project(TaskKind.LIKERT, owner=make_user("else"))
    theirs = make_judgment(item=make_item(other)).worker
    assert set(workers_visible_to(colleague)) == {mine}
    assert set(workers_visible_to(make_user("root", superuser=True))) >= {mine, theirs}


def test_a_hidden_project_and_a_missing_one_raise_the_same_404(project, owner):
    stranger = make_user("stranger")
    with pytest.raises(Http404) as hidden:
        access_project(stranger, "mine")
    with pytest.raises(Http404) as missing:
        access_project(owner, "nothing-here")
    assert str(hidden.value) == str(missing.value) == "No such project."
    assert access_project(owner, "mine") == project
    with pytest.raises(Http404) as by_pk:
        access_project_by_pk(stranger, project.pk)
    assert str(by_pk.value) == "No such project."
    assert access_project_by_pk(owner, str(project.pk)) == project
    with pytest.raises(Http404):
        access_project_by_pk(owner, "not-a-number")


def test_a_stage_by_id_in_paths_and_by_id_or_name_in_queries(project):
    stage = make_stage(project, name="trial")
    named_like_an_id = make_stage(project, name=str(stage.pk + 1000))
    elsewhere = make_stage(make_project(TaskKind.LIKERT))
    assert access_stage(project, stage.pk) == stage
    assert access_stage(project, "trial") == stage
    assert access_stage(project, str(stage.pk)) == stage
    assert access_stage(project, str(stage.pk + 1000)) == named_like_an_id
    with pytest.raises(Http404, match="No such stage."):
        access_stage(project, stage.pk + 1000)  # a path's id is an id, never a name
    for ref in (elsewhere.pk, str(elsewhere.pk), elsewhere.name):
        with pytest.raises(Http404, match="No such stage."):
            access_stage(project, ref)


def test_an_item_and_a_worker_belong_to_the_project(project):
    item = make_item(project)
    worker = make_judgment(item=item).worker
    other_item = make_item(make_project(TaskKind.LIKERT))
    assert access_item(project, item.pk) == item
    with pytest.raises(Http404, match="No such item."):
        access_item(project, other_item.pk)
    assert access_project_worker(project, worker.pk) == worker
    for worker_id in (make_worker().pk, worker.pk + 1000):
        with pytest.raises(Http404, match="No such worker in this project."):
            access_project_worker(project, worker_id)
