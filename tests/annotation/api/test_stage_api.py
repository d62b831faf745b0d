"""Stages through the REST API (issue #32): a stage is created as a draft, `status` is refused by
name on create and update (it changes only through publish, close and extend), an item filter
that matches nothing is a 400 naming the field, and the release preview lists exactly the items
publishing releases."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotation.models import Stage, StageKind, StageStatus, TaskKind
from annotation.services.stages import stage_hits_build
from testing.factories import make_item, make_project, make_stage, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.fixture
def owner():
    return make_user("stage-owner")


@pytest.fixture
def api(owner):
    client = APIClient()
    client.force_authenticate(owner)
    return client


@pytest.fixture
def project(owner):
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2)
    for n in range(6):
        make_item(project, dataset="nq" if n % 2 else "tq", group_key=f"p{n}")
    return project


def _stages_url(project) -> str:
    return f"/api/projects/{project.slug}/stages/"


def test_a_stage_posted_with_a_status_is_refused_by_name(api, project):
    response = api.post(_stages_url(project), {"name": "full", "kind": "full",
                                               "status": "collecting",
                                               "agreement_threshold": 0.999}, format="json")
    assert response.status_code == 400
    assert "Publish" in response.json()["status"][0]
    assert not Stage.objects.filter(project=project).exists()
    created = api.post(_stages_url(project), {"name": "full", "kind": "full",
                                              "agreement_threshold": 0.999}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["status"] == "draft"
    stage = Stage.objects.get(pk=created.json()["id"])
    assert stage.status == StageStatus.DRAFT and not stage.transitions.exists()


def test_status_kind_and_provider_cannot_be_patched(api, project):
    stage = make_stage(project, status=StageStatus.DRAFT, name="trial", kind=StageKind.TRIAL)
    url = f"{_stages_url(project)}{stage.pk}/"
    for body in ({"status": "collecting"}, {"status": "closed"}, {"kind": "full"},
                 {"provider": "mturk"}):
        response = api.patch(url, body, format="json")
        assert response.status_code == 400 and set(response.json()) == set(body), body
    response = api.patch(url, {"agreement_threshold": 0.6}, format="json")
    assert response.status_code == 200 and response.json()["agreement_threshold"] == 0.6
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and stage.kind == StageKind.TRIAL


def test_an_item_filter_matching_nothing_is_a_400_naming_the_field(api, project):
    response = api.post(_stages_url(project), {"name": "pilot", "kind": "pilot",
                                               "items": {"dataset": "squad"}}, format="json")
    assert response.status_code == 400
    message = response.json()["items"]["dataset"][0]
    assert "dataset='squad'" in message and "nq, tq" in message
    assert not Stage.objects.filter(project=project).exists()
    created = api.post(_stages_url(project), {"name": "pilot", "kind": "pilot",
                                              "items": {"dataset": "nq", "count": 2}},
                       format="json")
    assert created.status_code == 201
    stage = Stage.objects.get(pk=created.json()["id"])
    assert stage.items.count() == 2 and set(stage.items.values_list("dataset", flat=True)) \
        == {"nq"}
    url = f"{_stages_url(project)}{stage.pk}/"
    refused = api.patch(url, {"items": {"source": "nosuchsystem"}}, format="json")
    assert refused.status_code == 400 and "source" in refused.json()["items"]
    assert stage.items.count() == 2  # unchanged


def test_items_of_a_published_stage_are_fixed(api, project):
    stage = make_stage(project, status=StageStatus.COLLECTING)
    response = api.patch(f"{_stages_url(project)}{stage.pk}/", {"items": {"dataset": "nq"}},
                         format="json")
    assert response.status_code == 400
    assert "fixed once it is published" in response.json()["items"][0]


def test_the_release_preview_is_what_publishing_releases(api, project):
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       settings={"n_items": 3})
    url = f"{_stages_url(project)}{stage.pk}/release-preview/"
    preview = api.get(url).json()
    assert len(preview["items"]) == 3 and preview["error"] == ""
    stage_hits_build(stage=stage)
    assert {i["id"] for i in preview["items"]} == set(stage.items.values_list("pk", flat=True))
    assert {i["id"] for i in api.get(url).json()["items"]} == \
        {i["id"] for i in preview["items"]}
    other = make_project(TaskKind.LIKERT)
    hidden = make_stage(other, status=StageStatus.DRAFT)
    assert api.get(f"/api/projects/{other.slug}/stages/{hidden.pk}/release-preview/") \
        .status_code == 404


def test_a_settings_patch_keeps_the_providers_ids_and_refuses_to_change_them(api, project):
    stage = make_stage(project, status=StageStatus.COLLECTING, provider="prolific",
                       settings={"prolific_study_id": "S1", "n_items": 4})
    url = f"{_stages_url(project)}{stage.pk}/"
    response = api.patch(url, {"settings": {"n_items": 4, "seconds_per_item": 20}},
                         format="json")
    assert response.status_code == 200
    stage.refresh_from_db()
    assert stage.settings == {"n_items": 4, "seconds_per_item": 20, "prolific_study_id": "S1"}
    refused = api.patch(url, {"settings": {"prolific_study_id": "S2"}}, format="json")
    assert refused.status_code == 400 and "prolific_study_id" in refused.json()["settings"][0]
    stage.refresh_from_db()
    assert stage.settings["prolific_study_id"] == "S1"


def test_a_new_stage_cannot_bring_the_providers_ids(api, project):
    response = api.post(_stages_url(project), {
        "name": "sneaky", "kind": "full", "provider": "mturk",
        "settings": {"prolific_study_id": "evil", "mturk_hit_type_id": "HT1"}}, format="json")
    assert response.status_code == 400
    assert response.json()["settings"] == [
        "mturk_hit_type_id, prolific_study_id: written by the provider at publish, never by hand"]
    assert not project.stages.filter(name="sneaky").exists()
