"""Control characters (issue #32, point 7): a NUL in an autosave draft was a 500 on PostgreSQL
and stored on SQLite, and control characters in item content passed the items API. Every door
where text enters refuses them (tab, line feed and carriage return excepted) with a 400, or a
form or command error, naming the field — the same on both databases, nothing stored."""
from __future__ import annotations

import copy
import json
import re

import pytest
from django.core.management.base import CommandError
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Assignment, Item, Judgment, TaskKind
from annotation.services.access import inhouse_link_create
from testing.factories import item_content, make_project, make_user, make_worker
from tests.support.imports import LIKERT_ROW, run_import, write_jsonl
from tests.support.tasks import ab_answer, api, make_task, page_config

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

BAD = ["\x00", "\x07", "\x0b", "\x1b", "\x7f"]


def _open(client, kind=TaskKind.AB):
    project, stage, items = make_task(kind)
    _link, path = inhouse_link_create(worker=make_worker(), project=project)
    token = page_config(client.get(path))["token"]
    return token, Assignment.objects.get(stage=stage), items


@pytest.mark.parametrize("character", BAD)
def test_autosave_refuses_control_characters_naming_the_field(client, character):
    token, assignment, items = _open(client)
    ok = api(client, "task-autosave", token,
             {"draft": {"answers": {str(items[0].pk): {"justification": "line\tone\r\ntwo"}}}})
    assert ok.status_code == 200
    response = api(client, "task-autosave", token, {"draft": {"answers": {
        str(items[0].pk): {"justification": f"bad{character}text"}}}})
    assert response.status_code == 400
    message = " ".join(response.json()["errors"]["__all__"])
    assert f"draft.answers.{items[0].pk}.justification" in message
    assert f"U+{ord(character):04X}" in message
    assignment.refresh_from_db()
    assert assignment.draft["answers"][str(items[0].pk)]["justification"] == "line\tone\r\ntwo"


def test_submissions_refuse_control_characters_naming_the_field(client):
    token, assignment, items = _open(client)
    answers = [ab_answer(assignment, item) for item in items]
    bad = copy.deepcopy(answers)
    bad[1]["justification"] = "Answer A is better\x00 because it is right."
    response = api(client, "task-submit", token, {"answers": bad})
    assert response.status_code == 400
    assert "U+0000" in " ".join(response.json()["errors"][str(items[1].pk)])
    response = api(client, "task-submit", token,
                   {"answers": answers, "client_meta": {"ua": "Mozilla\x00"}})
    assert response.status_code == 400
    assert "client_meta.ua" in " ".join(response.json()["errors"]["__all__"])
    assert not Judgment.objects.exists()
    response = api(client, "task-submit", token,
                   {"answers": answers, "client_meta": {"ua": "Mozilla\t5.0"}})
    assert response.status_code == 200 and Judgment.objects.count() == len(items)


@pytest.fixture
def rest():
    owner = make_user("owner")
    make_project(TaskKind.LIKERT, owner=owner, slug="ctl")
    client = APIClient()
    client.force_authenticate(owner)
    return client


@pytest.mark.parametrize("character", BAD)
def test_the_items_api_refuses_control_characters_naming_the_field(rest, character):
    url = "/api/projects/ctl/items/"
    content = {**item_content("likert"), "question": f"Why{character}?"}
    response = rest.post(url, {"external_id": "q1", "content": content}, format="json")
    assert response.status_code == 400
    assert "question" in str(response.json()["content"])
    assert f"U+{ord(character):04X}" in str(response.json()["content"])
    references = {**item_content("likert"), "references": ["fine", f"r{character}"]}
    response = rest.post(url, {"external_id": "q1", "content": references}, format="json")
    assert response.status_code == 400 and "references[1]" in str(response.json()["content"])
    response = rest.post(url, {"external_id": "q1", "content": item_content("likert"),
                               "metadata": {"note": f"n{character}"}}, format="json")
    assert response.status_code == 400 and "note" in str(response.json()["metadata"])
    response = rest.post(url, {"external_id": "q1", "content": item_content("likert"),
                               "dataset": f"d{character}x"}, format="json")
    assert response.status_code == 400 and "dataset" in response.json()
    bulk = [{"external_id": "ok", "content": item_content("likert")},
            {"external_id": "bad", "content": content}]
    response = rest.post(url + "bulk/", {"items": bulk}, format="json")
    assert response.status_code == 400
    assert "question" in json.dumps(response.json()["items"]["1"]["content"])
    assert not Item.objects.exists()
    multiline = {**item_content("likert"), "passage": "one\ttwo\r\nthree\n"}
    response = rest.post(url, {"external_id": "q1", "content": multiline}, format="json")
    assert response.status_code == 201


def test_the_admin_item_form_refuses_control_characters(client):
    owner = make_user("root", superuser=True)
    project = make_project(TaskKind.LIKERT, owner=owner)
    client.force_login(owner)
    content = {**item_content("likert"), "candidate": "c\x1b[31m"}
    response = client.post(reverse("admin:annotation_item_add"), {
        "project": project.pk, "external_id": "x1", "dataset": "d", "split": "dev",
        "content": json.dumps(content), "gold": "null", "metadata": "{}"})
    assert response.status_code == 200  # the form again, with the error
    assert "U+001B" in response.content.decode() and "candidate" in response.content.decode()
    assert not Item.objects.exists()


@pytest.mark.parametrize(("field", "where"), [("question", "content.question"),
                                              ("metadata", "metadata.note")])
def test_importers_refuse_control_characters_naming_the_field(tmp_path, field, where):
    row = copy.deepcopy(LIKERT_ROW)
    if field == "metadata":
        row["metadata"] = {"note": "bell\x07"}
    else:
        row["content"]["question"] = "Where\x0b?"
    with pytest.raises(CommandError, match=re.escape(where) + ".*control characters"):
        run_import("jsonl", str(write_jsonl(tmp_path / "items.jsonl", [row])),
                   "--project", "ctl-import", "--create", "--kind", "likert")
    assert not Item.objects.exists()
