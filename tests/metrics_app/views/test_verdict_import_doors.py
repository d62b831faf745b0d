"""A judge's verdicts imported at every door: the command, the API (a multipart file or a JSON
body) and the judges page's upload form. One service (`verdicts_import`), so one rule: the
same file is stored alike, refused alike with the same message naming its line and column,
stored once when sent again; only the project's researchers may import."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import TaskKind
from metrics_app.models import Judge, JudgeVerdict
from testing.factories import make_item, make_judgment, make_project, make_stage, make_user

pytestmark = pytest.mark.django_db

GOOD = [{"item_id": "q0", "verdict": "correct", "probability": 0.9, "reasoning": "same"},
        {"item_id": "q1", "verdict": "no", "score": 2}]


@pytest.fixture
def project():
    project = make_project(TaskKind.LIKERT, owner=make_user("verdict-owner"), slug="vimp")
    stage = make_stage(project)
    for n in range(4):
        make_judgment(item=make_item(project, external_id=f"q{n}"), stage=stage,
                      score=5 if n % 2 == 0 else 1)
    return project


def _jsonl(rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def _api(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def _url(project) -> str:
    return reverse("metrics-api:judge-verdicts", args=[project.slug])


def _command(project, name, text, tmp_path, judge="j", version="1"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    try:
        out = StringIO()
        call_command("import_verdicts", project.slug, str(path), "--judge", judge,
                     "--judge-version", version, stdout=out)
    except CommandError as exc:
        return False, str(exc)
    return True, out.getvalue()


def _api_file(project, name, text, tmp_path, judge="j", version="1"):
    response = _api(project.owner).post(
        _url(project), {"file": SimpleUploadedFile(name, text.encode()), "judge": judge,
                        "version": version}, format="multipart")
    body = response.json()
    return response.status_code in (200, 201), body.get("detail") or body


def _api_json(project, name, text, tmp_path, judge="j", version="1"):
    verdicts = [json.loads(line) for line in text.splitlines() if line.strip()]
    response = _api(project.owner).post(
        _url(project), {"verdicts": verdicts, "judge": judge, "version": version},
        format="json")
    body = response.json()
    return response.status_code in (200, 201), body.get("detail") or body


def _page(project, name, text, tmp_path, judge="j", version="1", client=None):
    from django.test import Client

    client = client or Client()
    client.force_login(project.owner)
    response = client.post(
        reverse("metrics:judge-verdicts-upload", args=[project.slug]),
        {"file": SimpleUploadedFile(name, text.encode()), "judge": judge, "version": version},
        follow=True)
    page = response.content.decode()
    return response.redirect_chain != [], page


DOORS = {"command": _command, "api-file": _api_file, "api-json": _api_json, "page": _page}


@pytest.mark.reliability
@pytest.mark.parametrize("door", sorted(DOORS))
@pytest.mark.parametrize("rows, message", [
    ([{"item_id": "nope", "verdict": "correct"}], "line 2: item_id 'nope' is not an item of vimp"),
    ([{"item_id": "q0", "score": 7}], "line 2: score 7 is outside 1..5"),
    ([{"item_id": "q0", "verdict": "correct", "probabilty": 0.9}],
     "line 2: unknown column(s) 'probabilty'"),
    (["q0"], "line 2: not a JSON object"),
    ([None], "line 2: not a JSON object"),
    # A 400-digit whole number is valid JSON that no float holds (an OverflowError: a
    # traceback from the command, a 500 from the API and the page).
    ([{"item_id": "q0", "score": 10 ** 400}], "line 2: score is too large to be a number"),
])
def test_one_rule_at_every_door(project, tmp_path, door, rows, message):
    """A file one door refuses, every door refuses, with the same message (its line and
    column), and nothing is stored: not even the good line before it."""
    ok, said = DOORS[door](project, "v.jsonl", _jsonl([GOOD[1], *rows]), tmp_path)
    assert not ok
    assert message in said.replace("&#x27;", "'")
    assert "nothing imported" in said
    assert not JudgeVerdict.objects.exists() and not Judge.objects.exists()


@pytest.mark.reliability
@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_door_stores_the_file_once(project, tmp_path, door):
    ok, said = DOORS[door](project, "v.jsonl", _jsonl(GOOD), tmp_path)
    assert ok and "j@1" in str(said)
    stored = sorted(JudgeVerdict.objects.values_list("item__external_id", "verdict", "score",
                                                     "probability", "reasoning"))
    assert stored == [("q0", "correct", None, 0.9, "same"), ("q1", "incorrect", 2.0, None, "")]
    ok, said = DOORS[door](project, "v.jsonl", _jsonl(GOOD), tmp_path)  # sent again
    assert ok and JudgeVerdict.objects.count() == 2
    ok, said = DOORS[door](project, "v.jsonl", _jsonl(GOOD[:1]), tmp_path)  # other verdicts
    assert not ok and "already holds other verdicts on vimp" in said
    assert JudgeVerdict.objects.count() == 2


def test_the_api_answers_what_was_stored_and_what_was_there(project):
    api = _api(project.owner)
    created = api.post(_url(project), {"judge": "gpt-paper", "version": "2024-05",
                                       "verdicts": GOOD}, format="json")
    assert created.status_code == 201
    assert created.json() == {"judge": "gpt-paper", "version": "2024-05",
                              "label": "gpt-paper@2024-05", "imported": 2, "unchanged": 0}
    again = api.post(_url(project), {"judge": "gpt-paper", "version": "2024-05",
                                     "verdicts": GOOD}, format="json")
    assert again.status_code == 200 and (again.json()["imported"], again.json()["unchanged"]) \
        == (0, 2)
    csv = "item_id,verdict,judge,judge_version\nq2,yes,ext,1\nq3,no,ext,1\n"
    from_columns = api.post(_url(project), {"file": SimpleUploadedFile("v.csv", csv.encode())},
                            format="multipart")
    assert from_columns.status_code == 201 and from_columns.json()["label"] == "ext@1"
    assert JudgeVerdict.objects.count() == 4


def test_the_api_names_each_problem_and_every_field_it_does_not_take(project):
    api = _api(project.owner)
    refused = api.post(_url(project), {"judge": "j", "version": "1", "verdicts": [
        {"item_id": "q0", "verdict": "maybe"}, {"item_id": "q1", "probability": 2}]},
        format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"] == [
        "line 1: verdict 'maybe' is not one of correct, incorrect",
        "line 1: no verdict, score or probability",
        "line 2: probability 2 is outside 0..1"]
    assert api.post(_url(project), {"judge": "j", "version": "1", "verdicts": GOOD,
                                    "budget": 1}, format="json").json() == \
        {"budget": ["unknown field"]}
    assert "verdicts" in api.post(_url(project), {"judge": "j", "version": "1"},
                                  format="json").json()
    no_version = api.post(_url(project), {"judge": "j", "verdicts": GOOD}, format="json")
    assert no_version.status_code == 400 and "no judge version" in no_version.json()["detail"]
    taken = api.post(_url(project), {"judge": "j@x", "version": "1", "verdicts": GOOD},
                     format="json")
    assert taken.status_code == 400 and "a judge name is letters" in taken.json()["detail"]
    form = api.post(_url(project), "judge=j", content_type="application/x-www-form-urlencoded")
    assert form.status_code == 415
    assert not JudgeVerdict.objects.exists()


def test_an_upload_over_the_limit_is_refused_naming_the_limit(project, settings):
    settings.QAJ_IMPORT_UPLOAD_MAX_MB = 0
    response = _api(project.owner).post(
        _url(project), {"file": SimpleUploadedFile("v.jsonl", _jsonl(GOOD).encode()),
                        "judge": "j", "version": "1"}, format="multipart")
    assert response.status_code == 400
    assert "an upload takes at most 0 MB (QAJ_IMPORT_UPLOAD_MAX_MB)" in response.json()["detail"]
    assert "manage.py import_verdicts" in response.json()["detail"]
    assert not JudgeVerdict.objects.exists()


@pytest.mark.reliability
def test_only_the_projects_researchers_may_import(project):
    body = {"judge": "j", "version": "1", "verdicts": GOOD}
    assert APIClient().post(_url(project), body, format="json").status_code == 401
    assert _api(make_user("stranger")).post(_url(project), body,
                                            format="json").status_code == 404
    assert _api(make_user("annotator", staff=False)).post(_url(project), body,
                                                          format="json").status_code == 403
    shared = make_user("colleague")
    project.shared_with.add(shared)
    assert _api(shared).post(_url(project), body, format="json").status_code == 201


@pytest.mark.reliability
def test_a_failure_while_storing_stores_nothing(project, monkeypatch):
    """Atomic: the judge version is created, then the verdicts fail to store; neither stays."""
    from metrics_app.services.judges import imports

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(imports.JudgeVerdict.objects, "bulk_create", broken)
    api = _api(project.owner)
    api.raise_request_exception = False
    response = api.post(_url(project), {"judge": "j", "version": "1", "verdicts": GOOD},
                        format="json")
    assert response.status_code == 500
    assert not Judge.objects.exists() and not JudgeVerdict.objects.exists()


def test_the_page_uploads_a_file_and_shows_the_judge_against_the_humans(client, project):
    client.force_login(project.owner)
    url = reverse("metrics:project-judges", args=[project.slug])
    page = client.get(url).content.decode()
    assert 'enctype="multipart/form-data"' in page and "csrfmiddlewaretoken" in page
    rows = [{"item_id": f"q{n}", "verdict": "correct" if n % 2 == 0 else "incorrect"}
            for n in range(4)]
    response = client.post(reverse("metrics:judge-verdicts-upload", args=[project.slug]),
                           {"file": SimpleUploadedFile("paper.jsonl", _jsonl(rows).encode()),
                            "judge": "gpt-paper", "version": "1"}, follow=True)
    assert response.redirect_chain == [(url, 302)]
    page = response.content.decode()
    assert "gpt-paper@1: 4 verdicts imported on vimp" in page
    row = next(r for r in response.context["rows"] if r["label"] == "gpt-paper@1")
    assert row["judge"]["accuracy"] == 1.0 and row["judge"]["judged_with_labels"] == 4


def test_the_page_shows_every_problem_and_keeps_the_form(client, project):
    client.force_login(project.owner)
    response = client.post(
        reverse("metrics:judge-verdicts-upload", args=[project.slug]),
        {"file": SimpleUploadedFile("v.csv", b"item_id,verdict\nq0,maybe\nq9,correct\n"),
         "judge": "j", "version": "1"})
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="verdict-import-error"' in page and "3 problem(s), nothing imported" in page
    assert "line 2: verdict &#x27;maybe&#x27; is not one of correct, incorrect" in page
    assert "line 3: item_id &#x27;q9&#x27; is not an item of vimp" in page
    assert 'value="j"' in page  # the judge typed stays in the form
    missing = client.post(reverse("metrics:judge-verdicts-upload", args=[project.slug]),
                          {"judge": "j"})
    assert missing.status_code == 400 and "This field is required" in missing.content.decode()
    assert not JudgeVerdict.objects.exists()


def test_strangers_cannot_upload_on_the_page(client, project):
    client.force_login(make_user("stranger"))
    response = client.post(
        reverse("metrics:judge-verdicts-upload", args=[project.slug]),
        {"file": SimpleUploadedFile("v.jsonl", _jsonl(GOOD).encode()), "judge": "j",
         "version": "1"})
    assert response.status_code == 404
    assert client.get(reverse("metrics:judge-verdicts-upload",
                              args=[project.slug])).status_code in (404, 405)
    assert not JudgeVerdict.objects.exists()
