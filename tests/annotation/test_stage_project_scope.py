"""A stage's doors answer only from the projects the user may see: the admin's add page builds
its settings fields from a project the user may see (another's would show its kind), and the
API's `requires_stage` names only this project's stages, a missing id and another project's
stage answering alike."""
from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Stage, TaskKind
from testing.factories import make_project, make_stage, make_user

pytestmark = pytest.mark.django_db


def _setting_fields(response) -> set[str]:
    return {name for name in response.context["adminform"].form.fields
            if name.startswith("setting__")}


def test_the_add_page_does_not_show_the_kind_of_a_project_the_user_cannot_see(client):
    alice, bob = make_user("alice"), make_user("bob")
    bobs = make_project(TaskKind.MC, owner=bob)
    alices = make_project(TaskKind.MC, owner=alice)
    add = reverse("admin:annotation_stage_add")
    client.force_login(alice)
    mine = _setting_fields(client.get(f"{add}?project={alices.pk}"))
    assert "setting__latin_square" in mine  # a multiple-choice setting, for her own project
    theirs = _setting_fields(client.get(f"{add}?project={bobs.pk}"))
    assert theirs == _setting_fields(client.get(add))  # as if no project were named
    assert "setting__latin_square" not in theirs


def test_requires_stage_of_another_project_or_missing_answers_the_same(db):
    alice, bob = make_user("alice"), make_user("bob")
    project = make_project(TaskKind.LIKERT, owner=alice, slug="mine")
    other_own = make_stage(make_project(TaskKind.LIKERT, owner=alice))
    bobs = make_stage(make_project(TaskKind.LIKERT, owner=bob))
    own = make_stage(project, name="qual", kind="qualification")
    api = APIClient()
    api.force_authenticate(alice)
    answers = []
    for pk in (99999, other_own.pk, bobs.pk):
        response = api.post("/api/projects/mine/stages/", {
            "name": "full", "kind": "full", "requires_stage": pk}, format="json")
        assert response.status_code == 400
        answers.append(response.json()["requires_stage"])
    assert answers == [[f"must be a stage of the same project; mine has no stage {pk}"]
                       for pk in (99999, other_own.pk, bobs.pk)]
    assert not Stage.objects.filter(name="full").exists()
    response = api.post("/api/projects/mine/stages/", {
        "name": "full", "kind": "full", "requires_stage": own.pk}, format="json")
    assert response.status_code == 201
    assert Stage.objects.get(name="full").requires_stage == own


def test_a_stage_may_require_only_its_projects_qualification_at_every_door(client):
    """Only grading a qualification passes workers: a stage requiring a trial, a full stage or
    itself would refuse every worker, so the API and the stage form refuse it when it is set,
    with the message publishing gives."""
    alice = make_user("alice")
    project = make_project(TaskKind.LIKERT, owner=alice, slug="mine")
    trial = make_stage(project, name="trial", kind="trial")
    qual = make_stage(project, name="qual", kind="qualification")
    api = APIClient()
    api.force_authenticate(alice)
    response = api.post("/api/projects/mine/stages/", {
        "name": "full", "kind": "full", "requires_stage": trial.pk}, format="json")
    assert response.status_code == 400
    assert "only a qualification passes workers" in response.json()["requires_stage"][0]
    assert not Stage.objects.filter(name="full").exists()
    response = api.patch(f"/api/projects/mine/stages/{trial.pk}/",
                         {"requires_stage": trial.pk}, format="json")
    assert response.status_code == 400
    assert "cannot require itself" in response.json()["requires_stage"][0]

    client.force_login(alice)
    response = client.post(reverse("admin:annotation_stage_change", args=[trial.pk]), {
        "project": project.pk, "kind": "trial", "name": "trial", "order": 0,
        "provider": trial.provider, "settings": "{}", "requires_stage": trial.pk})
    assert response.status_code == 200
    assert "cannot require itself" in response.context["adminform"].form.errors[
        "requires_stage"][0]
    trial.refresh_from_db()
    assert trial.requires_stage is None
    response = api.post("/api/projects/mine/stages/", {
        "name": "full", "kind": "full", "requires_stage": qual.pk}, format="json")
    assert response.status_code == 201


def test_a_stage_may_require_only_a_qualification_on_its_own_provider_at_every_door(client):
    """A worker is one provider's id: an in-house (or Prolific) qualification qualifies nobody
    on MTurk, whose HITs would then require a qualification type nobody holds — a paid stage
    published that no worker could accept. The API, the stage form and publishing refuse it."""
    from annotation.models import StageStatus
    from annotation.services.stages import stage_publish
    from annotation.stage_errors import GuardFailed

    alice = make_user("alice")
    project = make_project(TaskKind.LIKERT, owner=alice, slug="mine")
    qual = make_stage(project, name="qual", kind="qualification", provider="inhouse")
    api = APIClient()
    api.force_authenticate(alice)
    response = api.post("/api/projects/mine/stages/", {
        "name": "trial", "kind": "trial", "provider": "mturk", "requires_stage": qual.pk},
        format="json")
    assert response.status_code == 400
    assert "a qualification on In-house link: only the workers who took it there qualify, so " \
        "nobody on Mechanical Turk could work here" in response.json()["requires_stage"][0]
    assert not Stage.objects.filter(name="trial").exists()
    trial = make_stage(project, name="trial", kind="trial", provider="mturk",
                       status=StageStatus.DRAFT)
    response = api.patch(f"/api/projects/mine/stages/{trial.pk}/",
                         {"requires_stage": qual.pk}, format="json")
    assert response.status_code == 400 and "nobody on Mechanical Turk" in \
        response.json()["requires_stage"][0]

    client.force_login(alice)
    response = client.post(reverse("admin:annotation_stage_change", args=[trial.pk]), {
        "project": project.pk, "kind": "trial", "name": "trial", "order": 0,
        "provider": "mturk", "settings": "{}", "requires_stage": qual.pk})
    assert response.status_code == 200
    assert "nobody on Mechanical Turk could work here" in response.context[
        "adminform"].form.errors["requires_stage"][0]

    # Saved before the rule (or through the shell): publishing refuses it before any call.
    Stage.objects.filter(pk=trial.pk).update(requires_stage=qual)
    with pytest.raises(GuardFailed, match="nobody on Mechanical Turk could work here"):
        stage_publish(stage=trial, user=alice)
    trial.refresh_from_db()
    assert trial.status == StageStatus.DRAFT and not trial.hits.exists()
