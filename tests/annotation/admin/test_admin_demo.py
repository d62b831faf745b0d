"""The demo data, as the run command loads it, is browsable in the admin and the API."""
from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Item, TaskKind
from annotation.services.demo import demo_data_load
from testing.factories import make_user

pytestmark = pytest.mark.django_db


def test_demo_projects_of_every_kind_in_admin_and_api(client):
    projects = demo_data_load()
    root = make_user("root", superuser=True)
    client.force_login(root)
    response = client.get(reverse("admin:annotation_project_changelist"))
    assert response.status_code == 200
    listed = response.context["cl"].result_list
    assert {p.kind for p in listed} == set(TaskKind.values)
    for project in listed:
        assert project.progress.items >= 8  # regular items: practice and gold checks apart
        assert project.progress.wanted >= project.progress.items
    for project in projects:
        item = Item.objects.filter(project=project).first()
        assert client.get(reverse("admin:annotation_item_change", args=[item.pk])).status_code == 200
        assert client.get(
            reverse("admin:annotation_project_change", args=[project.pk])
        ).status_code == 200

    api = APIClient()
    api.force_authenticate(root)
    body = api.get("/api/projects/").json()
    assert {p["kind"] for p in body["results"]} == set(TaskKind.values)
    slug = projects[0].slug
    assert api.get(f"/api/projects/{slug}/items/").json()["count"] >= 10
    assert api.get(f"/api/projects/{slug}/stages/").json()["results"][0]["progress"]["items"] >= 8
