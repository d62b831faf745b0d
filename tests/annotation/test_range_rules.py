"""Ranges a project's and a stage's numbers must keep, and the stages only an import makes:
one rule at both doors (model field validators, which the API's serializers and the admin's
forms both take; `stage_by_hand_errors`). Each refusal names the field; nothing is stored."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Project, Stage, StageKind, StageStatus, TaskKind
from testing.factories import make_project, make_stage, make_user
from tests.support.admin_forms import admin_form_as_posted

pytestmark = pytest.mark.django_db

PROJECT_OUT_OF_RANGE = [
    ("reward_per_hit", "-1"), ("budget_cap", "-5"), ("bonus_per_correct", "-3"),
    ("qualification_tolerance", -1), ("qualification_tolerance", 5),
    ("assignment_timeout_minutes", 0), ("gold_rate", 1.5), ("qualification_threshold", -0.1),
]
STAGE_OUT_OF_RANGE = [
    ("agreement_threshold", 5), ("agreement_threshold", -2), ("judgments_per_item", 0),
    ("judgments_per_item", 1001), ("reward_per_hit", "-1"),
]


@pytest.fixture
def alice():
    return make_user("alice")


@pytest.fixture
def api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


@pytest.fixture
def project(alice):
    return make_project(TaskKind.LIKERT, owner=alice, slug="study")


@pytest.mark.parametrize(("field", "value"), PROJECT_OUT_OF_RANGE)
def test_the_api_refuses_project_numbers_out_of_range(api, project, field, value):
    response = api.post("/api/projects/", {"slug": "new", "title": "New", "kind": "likert",
                                           field: value}, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Project.objects.filter(slug="new").exists()
    response = api.patch("/api/projects/study/", {field: value}, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert Project.objects.get(pk=project.pk).reward_per_hit == Decimal("0.40")


@pytest.mark.parametrize(("field", "value"), PROJECT_OUT_OF_RANGE)
def test_the_admin_refuses_project_numbers_out_of_range(client, alice, project, field, value):
    client.force_login(alice)
    url = reverse("admin:annotation_project_change", args=[project.pk])
    response = client.post(url, admin_form_as_posted(client.get(url), **{field: str(value)}))
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    fresh = Project.objects.get(pk=project.pk)
    assert getattr(fresh, field) == getattr(project, field)


@pytest.mark.parametrize(("field", "value"), STAGE_OUT_OF_RANGE)
def test_the_api_refuses_stage_numbers_out_of_range(api, project, field, value):
    response = api.post("/api/projects/study/stages/", {"name": "s", "kind": "full",
                                                        field: value}, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Stage.objects.filter(name="s").exists()


@pytest.mark.parametrize(("field", "value"), STAGE_OUT_OF_RANGE)
def test_the_admin_refuses_stage_numbers_out_of_range(client, alice, project, field, value):
    stage = make_stage(project, status=StageStatus.DRAFT)
    client.force_login(alice)
    url = reverse("admin:annotation_stage_change", args=[stage.pk])
    response = client.post(url, admin_form_as_posted(client.get(url), **{field: str(value)}))
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    fresh = Stage.objects.get(pk=stage.pk)
    assert getattr(fresh, field) == getattr(stage, field)


@pytest.mark.parametrize(("kind", "provider", "field", "why"), [
    ("imported", "inhouse", "kind", "an imported stage holds judgments collected elsewhere"),
    ("full", "import", "provider", "the import provider recruits nobody"),
])
def test_only_an_import_makes_an_imported_stage(api, client, alice, project, kind, provider,
                                                field, why):
    response = api.post("/api/projects/study/stages/", {"name": "s", "kind": kind,
                                                        "provider": provider}, format="json")
    assert response.status_code == 400 and why in response.json()[field][0]
    client.force_login(alice)
    add = reverse("admin:annotation_stage_add")
    data = admin_form_as_posted(client.get(f"{add}?project={project.pk}"), project=project.pk,
                                name="s", kind=kind, provider=provider, order=0)
    response = client.post(add, data)
    assert response.status_code == 200
    assert why in response.context["adminform"].form.errors[field][0]
    assert not Stage.objects.filter(name="s").exists()


def test_a_stages_kind_and_provider_are_read_only_once_it_exists(client, alice, project):
    stage = make_stage(project, status=StageStatus.DRAFT, kind=StageKind.FULL,
                       provider="inhouse")
    client.force_login(alice)
    url = reverse("admin:annotation_stage_change", args=[stage.pk])
    page = client.get(url)
    assert "kind" not in page.context["adminform"].form.fields
    assert "provider" not in page.context["adminform"].form.fields
    response = client.post(url, admin_form_as_posted(page, kind="imported", provider="import"))
    assert response.status_code == 302
    stage.refresh_from_db()
    assert (stage.kind, stage.provider) == (StageKind.FULL, "inhouse")
