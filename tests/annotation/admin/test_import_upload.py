"""The browser import on the Project admin: upload → preview (a rolled-back dry run of the
import_data service) → confirm; all or nothing, idempotent, and only into visible projects."""
from __future__ import annotations

import copy
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Item, Judgment, Project, TaskKind
from testing.factories import make_project, make_user
from tests.support.imports import LIKERT_ROW, db_state

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def uploads_in_tmp(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path / "import-uploads"


def rows(n: int = 3) -> list[dict]:
    out = []
    for i in range(n):
        row = copy.deepcopy(LIKERT_ROW)
        row["external_id"] = f"q{i}"
        row["split"] = "dev" if i else "test"
        out.append(row)
    return out


def upload(rows_, name="items.jsonl") -> SimpleUploadedFile:
    body = "".join(json.dumps(r) + "\n" for r in rows_).encode()
    return SimpleUploadedFile(name, body, content_type="application/jsonl")


def import_url(project) -> str:
    return reverse("admin:annotation_project_import", args=[project.pk])


def preview(client, url, file, **extra):
    return client.post(url, {"format": "jsonl", "file": file, "split": "", **extra})


def token_of(response) -> str:
    return re.search(r'name="token" value="([^"]+)"', response.content.decode()).group(1)


@pytest.fixture
def alice():
    return make_user("alice")


@pytest.fixture
def project(alice):
    return make_project(TaskKind.LIKERT, owner=alice, slug="study")


def test_preview_counts_everything_and_stores_nothing_until_confirmed(client, alice, project):
    client.force_login(alice)
    assert "Import items" in client.get(
        reverse("admin:annotation_project_change", args=[project.pk])).content.decode()
    before = db_state()
    response = preview(client, import_url(project), upload(rows(3)))
    assert response.status_code == 200
    page = response.content.decode()
    assert db_state() == before, "the preview must write nothing"
    assert "items: 3 created, 0 already present; judgments: 6 created" in page
    assert "workers: 2 created" in page
    assert "<strong>3</strong> items, <strong>6</strong> judgments by <strong>2</strong>" in page
    # One row per (split, dataset, source) and the first items rendered.
    assert re.search(r"<td>dev</td><td>toy</td><td>–</td><td>2</td><td>4</td>", page)
    assert re.search(r"<td>test</td><td>toy</td><td>–</td><td>1</td><td>2</td>", page)
    assert "Where did the cat sit?" in page
    # Lists read as text, not as Python's repr; one worker is one worker.
    assert "<strong>references</strong>: on the mat" in page and "[&#x27;" not in page
    one = preview(client, import_url(project), upload([{**rows(1)[0], "judgments": rows(1)[0][
        "judgments"][:1]}], name="one.jsonl")).content.decode()
    assert ("<strong>1</strong> item, <strong>1</strong> judgment by <strong>1</strong> worker "
            in one)

    response_page = response
    response = client.post(import_url(project), {"confirm": "1", "token": token_of(response)})
    assert response.status_code == 302
    assert Item.objects.filter(project=project).count() == 3
    assert Judgment.objects.filter(item__project=project).count() == 6
    # The same confirmation again (back button, double click): the upload is gone.
    state = db_state()
    again = client.post(import_url(project), {"confirm": "1", "token": token_of(response_page)})
    assert again.status_code == 400 and "expired" in again.content.decode()
    assert db_state() == state


def test_reimporting_the_same_file_creates_nothing_and_the_preview_says_so(client, alice,
                                                                            project):
    client.force_login(alice)
    first = preview(client, import_url(project), upload(rows(2)))
    client.post(import_url(project), {"confirm": "1", "token": token_of(first)})
    state = db_state()
    again = preview(client, import_url(project), upload(rows(2)))
    page = again.content.decode()
    assert "Nothing new" in page
    assert "2 item(s) already in the project" in page
    client.post(import_url(project), {"confirm": "1", "token": token_of(again)})
    assert db_state() == state


def test_a_bad_record_names_file_record_and_field_and_stores_nothing(client, alice, project):
    client.force_login(alice)
    bad = rows(3)
    del bad[2]["content"]["question"]
    before = db_state()
    response = preview(client, import_url(project), upload(bad, name="dev.jsonl"))
    assert response.status_code == 400
    error = re.search(r'id="import-error"[^>]*>([^<]+)<', response.content.decode()).group(1)
    assert "dev.jsonl" in error and "line 3 (q2)" in error and "content.question" in error
    assert "import-uploads" not in error, "the server's folder stays private"
    assert db_state() == before


@pytest.mark.parametrize(("format_name", "body", "expected"), [
    ("mocha", b"{}", "format mocha holds likert items"),  # wrong kind for an ab project
    # (FF FE would be UTF-16's byte-order mark, read as UTF-16: not binary)
    ("jsonl", b"\xff\xff not text", "not UTF-8 text"),
    ("jsonl", b'{"external_id": "x"\n', "line 1"),
])
def test_wrong_format_binary_or_malformed_files_are_refused(client, alice, format_name, body,
                                                            expected, uploads_in_tmp):
    project = make_project(TaskKind.AB, owner=alice, slug="ab-study")
    client.force_login(alice)
    file = SimpleUploadedFile("my file (1).jsonl", body)
    before = db_state()
    response = client.post(import_url(project), {"format": format_name, "file": file})
    assert response.status_code == 400
    assert expected in response.content.decode()
    assert db_state() == before
    assert not any(uploads_in_tmp.iterdir()), "a refused upload is not kept"


def test_a_conflict_found_at_confirm_time_rolls_everything_back(client, alice, project):
    """Between preview and confirm someone imported a different version of one item."""
    client.force_login(alice)
    response = preview(client, import_url(project), upload(rows(3)))
    changed = rows(1)
    changed[0]["content"]["candidate"] = "under the table"
    changed[0]["judgments"] = []
    other = preview(client, import_url(project), upload(changed))
    client.post(import_url(project), {"confirm": "1", "token": token_of(other)})
    before = db_state()
    response = client.post(import_url(project), {"confirm": "1", "token": token_of(response)})
    assert response.status_code == 400
    assert "record q0" in response.content.decode()
    assert db_state() == before


@pytest.mark.reliability
def test_another_researchers_project_is_out_of_reach(client, project, uploads_in_tmp):
    bob = make_user("bob")
    client.force_login(bob)
    assert client.get(import_url(project)).status_code == 404
    before = db_state()
    assert preview(client, import_url(project), upload(rows(1))).status_code == 404
    assert db_state() == before
    assert not uploads_in_tmp.exists() or not any(uploads_in_tmp.iterdir())


@pytest.mark.reliability
def test_a_preview_token_is_bound_to_its_user_and_project(client, alice, project):
    client.force_login(alice)
    token = token_of(preview(client, import_url(project), upload(rows(1))))
    # Alice's other project: the token names the first one.
    other = make_project(TaskKind.LIKERT, owner=alice, slug="other")
    response = client.post(import_url(other), {"confirm": "1", "token": token})
    assert response.status_code == 400 and "expired" in response.content.decode()
    # A collaborator who sees the project cannot confirm alice's upload.
    carol = make_user("carol")
    project.shared_with.add(carol)
    client.force_login(carol)
    response = client.post(import_url(project), {"confirm": "1", "token": token})
    assert response.status_code == 400
    response = client.post(import_url(project), {"confirm": "1", "token": token + "x"})
    assert response.status_code == 400
    assert Item.objects.count() == 0


def test_a_file_over_the_size_limit_is_refused_with_the_limit(client, alice, project, settings):
    settings.QAJ_IMPORT_UPLOAD_MAX_MB = 0
    client.force_login(alice)
    response = preview(client, import_url(project), upload(rows(1)))
    page = response.content.decode()
    assert "an upload takes at most 0 MB" in page
    assert "manage.py import_data" in page
    assert Item.objects.count() == 0


def test_create_project_from_file_owned_by_the_uploader(client, alice):
    client.force_login(alice)
    url = reverse("admin:annotation_project_import_new")
    assert "Create project from file" in client.get(
        reverse("admin:annotation_project_changelist")).content.decode()
    response = preview(client, url, upload(rows(2)), slug="fresh", title="Fresh", kind="")
    assert response.status_code == 400
    assert "choose the task kind" in response.content.decode()
    response = preview(client, url, upload(rows(2)), slug="fresh", title="Fresh", kind="likert")
    assert "A new project <strong>fresh</strong>" in response.content.decode()
    assert not Project.objects.filter(slug="fresh").exists()
    response = client.post(url, {"confirm": "1", "token": token_of(response)})
    project = Project.objects.get(slug="fresh")
    assert response.status_code == 302 and project.owner == alice
    assert project.items.count() == 2
    # The same slug again: refused, nothing written.
    response = preview(client, url, upload(rows(2)), slug="fresh", kind="likert")
    assert "already exists" in response.content.decode()


def test_a_file_nested_past_the_limit_is_refused_and_its_upload_removed(client, alice,
                                                                        uploads_in_tmp):
    client.force_login(alice)
    deep = b'{"external_id": "x", "content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    before = db_state()
    response = client.post(reverse("admin:annotation_project_import_new"), {
        "format": "jsonl", "file": SimpleUploadedFile("deep.jsonl", deep), "slug": "deep",
        "kind": "likert"})
    assert response.status_code == 400
    text = response.content.decode()
    assert "deep.jsonl" in text and "line 1" in text and "nested more than 64 levels" in text
    assert db_state() == before and not Project.objects.filter(slug="deep").exists()
    assert not any(uploads_in_tmp.iterdir())


def test_an_unforeseen_failure_of_the_preview_leaves_no_upload_behind(client, alice, project,
                                                                      uploads_in_tmp,
                                                                      monkeypatch):
    from annotation.admin import imports

    def broken(**_kwargs):
        raise RuntimeError("a failure nobody foresaw")

    monkeypatch.setattr(imports, "import_file", broken)
    client.force_login(alice)
    with pytest.raises(RuntimeError):
        preview(client, import_url(project), upload(rows(1)))
    assert not any(uploads_in_tmp.iterdir())


@pytest.mark.reliability
def test_an_empty_file_is_refused_on_the_import_and_create_pages(client, alice, project):
    """A file of blank lines is refused at the preview, as `import_data` and the items API
    refuse one, and nothing is stored: the page previewed "The file holds no records." with
    a Confirm button, and the create-from-file page then asked for the project's kind."""
    client.force_login(alice)
    before = db_state()
    response = preview(client, import_url(project), SimpleUploadedFile("items.jsonl", b"\r\n"))
    page = response.content.decode()
    assert "the file is empty: nothing to import" in page and 'name="confirm"' not in page
    created = preview(client, reverse("admin:annotation_project_import_new"),
                      SimpleUploadedFile("items.jsonl", b"\n\n"), slug="from-empty",
                      title="From empty", kind="")
    assert created.status_code == 400
    page = created.content.decode()
    assert "the file is empty: nothing to import" in page, page
    assert db_state() == before
    assert not Project.objects.filter(slug="from-empty").exists()


def test_the_preview_counts_gold_practice_and_excluded_items(client, alice, project):
    """Walking a first study: the preview of an items file with four gold answers said only
    "30 items, 0 judgments by 0 workers"; the researcher learned how many items a
    qualification could release only after creating the stage."""
    marked = [{**row, "gold": None} for row in rows(5)]
    marked[0]["gold"] = {"score": 5}
    marked[1]["gold"] = {"score": 1}
    marked[1]["is_gold_check"] = True
    marked[2]["is_practice"] = True
    marked[3]["excluded"] = True
    marked[3]["exclusion_reason"] = "duplicate"
    client.force_login(alice)
    page = preview(client, import_url(project), upload(marked)).content.decode()
    roles = re.search(r'<span id="import-roles">(.*?)</span>', page, re.S).group(1)
    assert "<strong>2</strong> carry a gold answer" in roles
    assert "1 practice, 1 gold check, 1 excluded" in roles
    plain = [{**row, "external_id": f"plain-{n}", "gold": None} for n, row in enumerate(rows(2))]
    none = preview(client, import_url(project), upload(plain, name="plain.jsonl"))
    assert "none, so a qualification would have nothing to give" in none.content.decode()


@pytest.mark.reliability
@pytest.mark.parametrize(("name", "data", "said"), [
    ("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "a PNG image"),
    ("dev.xlsx", b"PK\x03\x04\x14\x00\x06\x00" + bytes(range(128, 256)),
     "a ZIP archive (an .xlsx or .docx file is one)"),
    ("dev.bin", b"\x00\x01\x02\xff\xfe" * 50, "a binary file, not text"),
])
def test_a_file_that_is_not_text_is_named_as_such_not_sent_to_be_re_encoded(
        client, alice, uploads_in_tmp, name, data, said):
    """A researcher picking an image or a workbook by mistake read "not UTF-8 text: line 1,
    byte 1 … save the file as UTF-8 (it may be Latin-1 or Windows-1252)"."""
    client.force_login(alice)
    before = db_state()
    response = client.post(reverse("admin:annotation_project_import_new"), {
        "format": "mocha", "file": SimpleUploadedFile(name, data), "slug": "bio-study",
        "title": "Bio study"})
    assert response.status_code == 400
    text = response.content.decode()
    assert f"{name}: not a text file: it looks like {said}; choose the data file itself" in text
    assert "Latin-1" not in text
    assert db_state() == before and not any(uploads_in_tmp.iterdir())
