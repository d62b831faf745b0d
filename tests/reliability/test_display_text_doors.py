"""Researcher-entered display text — a project's title and instructions, a stage's name, a
judge's description — is refused with control characters at every door that sets it (the
REST API, the admin's forms, `import_data --create --title`, stage imports, `create_judge`),
naming the field, the same on SQLite and PostgreSQL (a NUL reached PostgreSQL through the
import's --title: a 500-like DataError there). One rule (`annotation.validators`, the model
fields' validators): a title or name is one line; instructions and descriptions keep tab,
line feed and carriage return. Nothing is stored."""
from __future__ import annotations

import copy

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Project, Stage, StageStatus, TaskKind
from annotation.services.stages import StageEditRefused, stage_create
from metrics_app.models import Judge
from testing.factories import make_project, make_stage, make_user
from tests.support.admin_forms import admin_form_as_posted
from tests.support.imports import LIKERT_ROW, run_import, write_jsonl

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

BAD = ["\x00", "\x07", "\x1b", "\x7f"]
ONE_LINE_ONLY = ["\n", "\t", "\r"]


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
    return make_project(TaskKind.LIKERT, owner=alice, slug="study", title="Study")


@pytest.mark.parametrize("character", BAD + ONE_LINE_ONLY)
def test_the_api_refuses_control_characters_in_a_project_title(api, project, character):
    response = api.post("/api/projects/", {"slug": "new", "title": f"New{character}study",
                                           "kind": "likert"}, format="json")
    assert response.status_code == 400 and "title" in response.json(), response.json()
    response = api.patch("/api/projects/study/", {"title": f"A{character}B"}, format="json")
    assert response.status_code == 400 and "title" in response.json(), response.json()
    assert not Project.objects.filter(slug="new").exists()
    assert Project.objects.get(pk=project.pk).title == "Study"


@pytest.mark.parametrize("character", BAD)
def test_the_api_refuses_control_characters_in_instructions_but_keeps_lines(api, project,
                                                                             character):
    response = api.patch("/api/projects/study/", {"instructions": f"Read{character}"},
                         format="json")
    assert response.status_code == 400 and "instructions" in response.json()
    response = api.patch("/api/projects/study/", {"instructions": "Read.\r\n\tThen judge."},
                         format="json")
    assert response.status_code == 200
    assert Project.objects.get(pk=project.pk).instructions == "Read.\r\n\tThen judge."


@pytest.mark.parametrize("character", BAD + ONE_LINE_ONLY)
def test_the_api_refuses_control_characters_in_a_stage_name(api, project, character):
    response = api.post("/api/projects/study/stages/", {"name": f"s{character}x",
                                                        "kind": "full"}, format="json")
    assert response.status_code == 400 and "name" in response.json(), response.json()
    stage = make_stage(project, status=StageStatus.DRAFT, name="trial")
    response = api.patch(f"/api/projects/study/stages/{stage.pk}/", {"name": f"t{character}x"},
                         format="json")
    assert response.status_code == 400 and "name" in response.json(), response.json()
    assert list(Stage.objects.values_list("name", flat=True)) == ["trial"]


def test_the_stage_service_refuses_what_its_callers_did_not_check(project):
    with pytest.raises(StageEditRefused, match="name: must be one line"):
        stage_create(project=project, kind="full", name="two\nlines")
    assert not Stage.objects.exists()


@pytest.mark.parametrize(("field", "value"), [("title", "T\x07"), ("title", "T\nU"),
                                              ("instructions", "Read\x1b[31m")])
def test_the_admin_project_form_refuses_control_characters(client, alice, project, field,
                                                           value):
    client.force_login(alice)
    url = reverse("admin:annotation_project_change", args=[project.pk])
    response = client.post(url, admin_form_as_posted(client.get(url), **{field: value}))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors and "control characters" in str(errors[field])
    assert getattr(Project.objects.get(pk=project.pk), field) == getattr(project, field)


def test_the_admin_stage_form_refuses_control_characters(client, alice, project):
    stage = make_stage(project, status=StageStatus.DRAFT, name="trial")
    client.force_login(alice)
    url = reverse("admin:annotation_stage_change", args=[stage.pk])
    response = client.post(url, admin_form_as_posted(client.get(url), name="trial\x07"))
    assert response.status_code == 200
    assert "U+0007" in str(response.context["adminform"].form.errors["name"])
    assert Stage.objects.get(pk=stage.pk).name == "trial"


@pytest.mark.parametrize("title", ["Bell\x00study", "Two\nlines"])
def test_import_create_refuses_control_characters_in_the_title(tmp_path, title):
    path = write_jsonl(tmp_path / "items.jsonl", [copy.deepcopy(LIKERT_ROW)])
    with pytest.raises(CommandError, match="title: .*control characters"):
        run_import("jsonl", str(path), "--project", "new-study", "--create", "--kind", "likert",
                   "--title", title)
    assert not Project.objects.exists()


def test_an_imported_stage_name_must_be_one_line(tmp_path, project):
    row = copy.deepcopy(LIKERT_ROW)
    for judgment in row["judgments"]:
        judgment["stage"] = "pilot\tround"
    path = write_jsonl(tmp_path / "items.jsonl", [row])
    with pytest.raises(CommandError, match="stage 'pilot\\\\tround': its name must be one line"):
        run_import("jsonl", str(path), "--project", "study")
    assert not Stage.objects.exists() and not project.items.exists()


def test_create_judge_refuses_control_characters_in_the_description(tmp_path):
    config = tmp_path / "judge.json"
    config.write_text('{"model": "m", "base_url": "http://127.0.0.1:9/v1"}')
    with pytest.raises(CommandError, match="description: must not contain control"):
        call_command("create_judge", "my-judge", str(config), "--description", "A\x00judge")
    assert not Judge.objects.exists()
