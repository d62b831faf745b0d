"""Numbers in query strings, form fields and URLs that int() cannot read (more than 4,300
digits, or digits of another script) or that no id column holds, at the researcher's and the
admin's doors: answered as "no such ..." or a message naming the field, never a 500, with
nothing stored. The task API's doors: tests/reliability/test_bad_bodies.py."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Adjudication, AssignmentStatus, TaskKind
from testing.factories import make_assignment, make_item, make_project, make_stage, make_user

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

BAD_IDS = [pytest.param("1" * 5000, id="5000-digits"), pytest.param("²", id="superscript-2"),
           pytest.param(str(2**63), id="2**63")]


@pytest.fixture
def project():
    owner = make_user("alice")
    project = make_project(TaskKind.LIKERT, slug="mine", owner=owner, title="Mine")
    make_stage(project, name="main")
    return project


@pytest.mark.parametrize("ref", BAD_IDS)
def test_a_stage_named_by_an_unreadable_id_is_no_such_stage(client, project, ref):
    api = APIClient()
    api.force_authenticate(project.owner)
    report = api.get("/api/metrics/projects/mine/report/", {"stage": ref})
    assert report.status_code == 404 and report.json() == {"detail": "No such stage."}
    client.force_login(project.owner)
    dashboard = client.get(reverse("metrics:project-dashboard", args=["mine"]), {"stage": ref})
    assert dashboard.status_code == 404


@pytest.mark.parametrize("value", BAD_IDS)
def test_adjudicating_an_unreadable_item_or_label_says_what_is_wrong(client, project, value):
    item = make_item(project, external_id="q1")
    client.force_login(project.owner)
    record = reverse("metrics:adjudicate-record", args=["mine"])
    no_item = client.post(record, {"item": value, "label": "4"}, follow=True)
    assert "No such item in this project." in no_item.content.decode()
    bad_label = client.post(record, {"item": item.pk, "label": value}, follow=True)
    assert "q1: the label must be a score from 1 to 5." in bad_label.content.decode()
    assert not Adjudication.objects.exists()


@pytest.mark.parametrize("object_id", [*BAD_IDS, pytest.param("abc", id="abc")])
def test_the_admins_assignment_and_stage_pages_take_no_unreadable_id(client, project,
                                                                     object_id):
    assignment = make_assignment(project.stages.get())
    admin = get_user_model().objects.create_superuser("root", password="pw-for-tests-only")
    client.force_login(admin)
    change = client.get(reverse("admin:annotation_assignment_change", args=[object_id]))
    assert change.status_code == 302  # the admin's own "does not exist", back to the list
    decide = client.post(reverse("admin:annotation_assignment_decide", args=[object_id]),
                         {"decision": "approve"})
    assert decide.status_code == 404
    add_stage = client.get(reverse("admin:annotation_stage_add"), {"project": object_id})
    assert add_stage.status_code == 200
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.IN_PROGRESS and assignment.review_note == ""
