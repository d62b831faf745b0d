"""One item, one stored row, whichever door brings it: `import_data`, the admin's browser import
and the items API store its names and labels the same way (spaces around them trimmed, as the
API's and the admin's form fields always did), so a file imported after the same items were
posted, or the other way round, creates nothing and every per-dataset table has one row."""
from __future__ import annotations

import copy
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Item, Project, TaskKind
from testing.factories import make_project, make_user
from tests.support.imports import LIKERT_ROW, run_import, write_jsonl

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

COLUMNS = ("external_id", "dataset", "source", "split", "domain", "text_level", "group_key",
           "design_unit", "exclusion_reason", "content", "gold", "excluded")


def padded_row() -> dict:
    row = copy.deepcopy(LIKERT_ROW)
    del row["judgments"]
    row.update(external_id=" q1-c1 ", dataset="narrativeqa ", source="\tgpt2",
               split=" dev", domain=" fiction ", text_level="", group_key=" passage-1 ",
               design_unit=" unit-1 ", exclusion_reason="")
    return row


def stored(project) -> dict:
    return Item.objects.filter(project=project).values(*COLUMNS).get()


@pytest.fixture
def alice():
    return make_user("alice")


def via_command(project, tmp_path) -> None:
    run_import("jsonl", str(write_jsonl(tmp_path / "items.jsonl", [padded_row()])),
               "--project", project.slug, "--no-report")


def via_admin(project, client, settings, tmp_path) -> None:
    settings.VAR_DIR = tmp_path
    url = reverse("admin:annotation_project_import", args=[project.pk])
    body = (json.dumps(padded_row()) + "\n").encode()
    response = client.post(url, {"format": "jsonl", "split": "", "file": SimpleUploadedFile(
        "items.jsonl", body, content_type="application/jsonl")})
    token = re.search(r'name="token" value="([^"]+)"', response.content.decode()).group(1)
    assert client.post(url, {"confirm": "1", "token": token}).status_code == 302


def via_api(project, alice) -> None:
    api = APIClient()
    api.force_authenticate(alice)
    response = api.post(f"/api/projects/{project.slug}/items/", padded_row(), format="json")
    assert response.status_code == 201, response.json()


def test_every_door_stores_the_same_item(alice, client, settings, tmp_path):
    client.force_login(alice)
    command, admin_, api = (make_project(TaskKind.LIKERT, owner=alice, slug=slug)
                            for slug in ("by-command", "by-admin", "by-api"))
    via_command(command, tmp_path)
    via_admin(admin_, client, settings, tmp_path)
    via_api(api, alice)
    rows = [stored(project) for project in (command, admin_, api)]
    assert rows[0] == rows[1] == rows[2]
    assert rows[0]["external_id"] == "q1-c1" and rows[0]["dataset"] == "narrativeqa"
    assert rows[0]["source"] == "gpt2" and rows[0]["domain"] == "fiction"


def test_a_file_of_items_posted_before_imports_nothing_new(alice, tmp_path):
    project = make_project(TaskKind.LIKERT, owner=alice, slug="study")
    via_api(project, alice)
    output = run_import("jsonl", str(write_jsonl(tmp_path / "items.jsonl", [padded_row()])),
                        "--project", project.slug, "--no-report")
    assert "items: 0 created, 1 already present" in output
    assert Item.objects.filter(project=project).count() == 1


def test_a_body_saved_with_a_byte_order_mark_is_read_as_the_file_doors_read_it(alice, tmp_path):
    """Notepad, Excel and PowerShell save UTF-8 with a byte-order mark: `import_data` and the
    admin's upload drop it; posting the same bytes to the API was a 400 "Unexpected UTF-8 BOM"."""
    by_file, by_api = (make_project(TaskKind.LIKERT, owner=alice, slug=slug)
                       for slug in ("by-file", "by-api"))
    (tmp_path / "items.jsonl").write_bytes(
        ("\ufeff" + json.dumps(padded_row()) + "\n").encode("utf-8"))
    run_import("jsonl", str(tmp_path / "items.jsonl"), "--project", by_file.slug,
               "--no-report")
    api = APIClient()
    api.force_authenticate(alice)
    for url, body in ((f"/api/projects/{by_api.slug}/items/bulk/", {"items": [padded_row()]}),
                      (f"/api/projects/{by_api.slug}/items/", padded_row())):
        response = api.post(url, ("\ufeff" + json.dumps(body)).encode("utf-8"),
                            content_type="application/json")
        assert response.status_code in (200, 201), response.json()
    assert stored(by_file) == stored(by_api)


def test_a_stage_named_with_spaces_in_a_file_is_the_stage_of_that_name(alice, tmp_path):
    """The stage API and form store "trial" for " trial "; a file's judgments of "trial " are
    the platform's stage "trial" (refused: its judgments are already here), not a second
    stage beside it that counts them twice."""
    project = make_project(TaskKind.LIKERT, owner=alice, slug="study")
    api = APIClient()
    api.force_authenticate(alice)
    assert api.post(f"/api/projects/{project.slug}/stages/", {"name": " trial ", "kind": "trial"},
                    format="json").status_code == 201
    row = copy.deepcopy(LIKERT_ROW)
    row["judgments"] = [{"worker": "w1", "score": 4, "stage": "trial "}]
    path = write_jsonl(tmp_path / "items.jsonl", [row])
    with pytest.raises(CommandError, match="collected on the platform"):
        run_import("jsonl", str(path), "--project", project.slug, "--no-report")
    assert list(project.stages.values_list("name", flat=True)) == ["trial"]


def test_one_worker_written_with_spaces_is_one_worker(alice, tmp_path):
    project = make_project(TaskKind.LIKERT, owner=alice, slug="study")
    row = copy.deepcopy(LIKERT_ROW)
    row["judgments"] = [{"worker": "w1", "score": 4}, {"worker": " w1 ", "score": 5}]
    with pytest.raises(CommandError, match="judges this item twice"):
        run_import("jsonl", str(write_jsonl(tmp_path / "items.jsonl", [row])),
                   "--project", project.slug, "--no-report")
    assert not Item.objects.filter(project=project).exists()


def _create_by_admin(client, settings, tmp_path, slug: str, title: str) -> Project:
    settings.VAR_DIR = tmp_path
    url = reverse("admin:annotation_project_import_new")
    response = client.post(url, {
        "format": "jsonl", "split": "", "slug": slug, "title": title, "kind": "likert",
        "file": SimpleUploadedFile("items.jsonl", (json.dumps(padded_row()) + "\n").encode())})
    token = re.search(r'name="token" value="([^"]+)"', response.content.decode()).group(1)
    assert client.post(url, {"confirm": "1", "token": token}).status_code == 302
    return Project.objects.get(slug=slug)


def _create_by_command(tmp_path, slug: str, *title: str) -> Project:
    run_import("jsonl", str(write_jsonl(tmp_path / "items.jsonl", [padded_row()])),
               "--project", slug, "--create", "--kind", "likert", *title, "--no-report")
    return Project.objects.get(slug=slug)


def test_a_project_created_from_a_file_is_titled_alike_at_both_doors(alice, client, settings,
                                                                      tmp_path):
    """No title given: the browser import titled the project with its bare slug ("rita-dev"),
    `import_data --create` with a sentence ("Rita dev: answer correctness"); a title given with
    spaces around it kept them at the command, the form trimmed them."""
    client.force_login(alice)
    assert (_create_by_admin(client, settings, tmp_path, "rita-dev", "").title
            == _create_by_command(tmp_path, "rita-dev2").title.replace("dev2", "dev")
            == "Rita dev: answer correctness")
    assert (_create_by_admin(client, settings, tmp_path, "bio", "  Bio study ").title
            == _create_by_command(tmp_path, "bio2", "--title", "  Bio study ").title
            == "Bio study")
