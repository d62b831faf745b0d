"""Bodies a careless or hostile client sends, answered with a JSON error that names the problem
(never a 5xx, an HTML page or a silent 200), with nothing stored: JSON nested thousands of
levels deep (API and autosave), a body over the size limit, read-only project fields in a
PATCH, a guess step on a task that has none, a busy SQLite database; and in answers to the task
API, at every door: validity answers that are not labels, item ids and scores no column holds,
NaN and Infinity (not JSON). A client start time past the calendar's ends is left out."""
from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Assignment, ExperimentMode, Item, Judgment, Project, TaskKind
from annotation.services.access import inhouse_link_create
from core.json_limits import MAX_JSON_DEPTH, json_depth, json_loads_limited
from testing.factories import item_content, make_project, make_user, make_worker
from tests.support.tasks import api, make_task, page_config

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.fixture
def researcher_api():
    client = APIClient()
    user = make_user("alice")
    client.force_authenticate(user)
    make_project(TaskKind.LIKERT, slug="mine", owner=user, title="Mine")
    return client


def test_json_depth_is_measured_without_recursion():
    assert json_depth(json.loads(nested(900))) == 900
    assert json_depth({"a": [1, {"b": []}]}) == 4 and json_depth("x") == 0
    with pytest.raises(ValueError, match=f"nested more than {MAX_JSON_DEPTH} levels"):
        json_loads_limited(nested(5000))
    with pytest.raises(ValueError, match="nested more than"):
        json_loads_limited(nested(MAX_JSON_DEPTH + 1))
    assert json_loads_limited(nested(MAX_JSON_DEPTH)) is not None


@pytest.mark.parametrize("levels", [3000, MAX_JSON_DEPTH + 1])
def test_deeply_nested_json_to_the_bulk_items_api_is_a_400_that_says_so(researcher_api, levels):
    body = '{"items": [{"external_id": "q1", "content": ' + nested(levels) + "}]}"
    response = researcher_api.post("/api/projects/mine/items/bulk/", data=body,
                                   content_type="application/json")
    assert response.status_code == 400, response.content[:200]
    assert "nested more than" in response.json()["detail"]
    assert not Item.objects.exists()


def test_deeply_nested_json_to_autosave_is_a_400_that_says_so(client):
    project, _, _ = make_task(TaskKind.LIKERT)
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    token = page_config(client.get(path))["token"]
    response = client.post(reverse("annotation:task-autosave"),
                           data='{"draft": ' + nested(3000) + "}",
                           content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=token)
    assert response.status_code == 400
    assert "nested more than" in response.json()["message"]
    assert not (Assignment.objects.get().draft or {}).get("draft")


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
def test_a_body_over_the_size_limit_is_a_json_413(researcher_api):
    items = [{"external_id": f"q{n}", "content": item_content(TaskKind.LIKERT, n)}
             for n in range(200)]
    response = researcher_api.post("/api/projects/mine/items/bulk/", {"items": items},
                                   format="json")
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert "larger than 10,000 bytes" in response.json()["detail"]
    assert not Item.objects.exists()


@pytest.mark.parametrize("field,message", [
    ("kind", "cannot be changed after the project is created"),
    ("slug", "cannot be changed after the project is created"),
    ("titel", "unknown field"),
])
def test_patching_a_fixed_or_unknown_project_field_is_refused_by_name(researcher_api, field,
                                                                      message):
    make_user("mallory")
    response = researcher_api.patch("/api/projects/mine/",
                                    {field: "ab", "title": "Renamed"}, format="json")
    assert response.status_code == 400
    assert response.json() == {field: [message]}
    project = Project.objects.get(slug="mine")
    assert (project.title, project.kind, project.owner.username) == ("Mine", "likert", "alice")


def test_only_a_superuser_changes_a_projects_owner(researcher_api, client):
    make_user("mallory")
    refused = researcher_api.patch("/api/projects/mine/", {"owner": "mallory",
                                                           "title": "Renamed"}, format="json")
    assert refused.status_code == 403
    assert "only a superuser" in refused.json()["detail"]
    # Naming the current owner is not a change, so the owner may send the project back as read.
    same = researcher_api.patch("/api/projects/mine/", {"owner": "alice"}, format="json")
    assert same.status_code == 200
    project = Project.objects.get(slug="mine")
    assert (project.title, project.owner.username) == ("Mine", "alice")

    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("root", password="pw-for-tests-only")
    client.force_login(admin)
    unknown = client.patch("/api/projects/mine/", {"owner": "nobody"},
                           content_type="application/json")
    assert unknown.status_code == 400 and unknown.json() == {"owner": ["unknown user: nobody"]}
    moved = client.patch("/api/projects/mine/", {"owner": "mallory"},
                         content_type="application/json")
    assert moved.status_code == 200 and moved.json()["owner"] == "mallory"
    assert Project.objects.get(slug="mine").owner.username == "mallory"


def test_a_guess_step_on_a_likert_task_is_refused(client):
    project, _, items = make_task(TaskKind.LIKERT)
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    token = page_config(client.get(path))["token"]
    response = api(client, "task-confirm", token,
                   {"item": items[0].pk, "step": "guess", "answer": {"shown_guess": "a"}})
    assert response.status_code == 400
    assert "no guess step" in json.dumps(response.json())
    assert "guesses" not in json.dumps(Assignment.objects.get().draft or {})


def test_a_busy_database_is_a_503_with_advice_not_a_500(researcher_api, monkeypatch, tmp_path):
    def locked(*_args, **_kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr("annotation.apis.project_list", locked)
    response = researcher_api.get("/api/projects/")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert "use PostgreSQL" in response.json()["detail"]

    monkeypatch.setattr("annotation.services.import_files.import_records", locked)
    source = tmp_path / "items.jsonl"
    source.write_text(json.dumps({"external_id": "q1", "content": item_content(TaskKind.LIKERT)})
                      + "\n")
    with pytest.raises(CommandError, match="nothing imported: .*database is busy"):
        call_command("import_data", "jsonl", str(source), "--project", "mine", "--no-progress")


def test_fields_an_endpoint_does_not_take_are_refused_not_dropped(researcher_api):
    """Posting an export row (with its judgments) to the items API would otherwise store the
    item and silently lose the judgments."""
    row = {"external_id": "q1", "content": item_content(TaskKind.LIKERT),
           "judgments": [{"worker": "w1", "score": 4}]}
    response = researcher_api.post("/api/projects/mine/items/bulk/", {"items": [row]},
                                   format="json")
    assert response.status_code == 400
    assert "import_data jsonl" in json.dumps(response.json())
    one = researcher_api.post("/api/projects/mine/items/", {**row, "judgments": None,
                                                             "colour": "red"}, format="json")
    assert one.status_code == 400
    assert one.json() == {"colour": ["unknown field"], "judgments": [
        "not taken by the API; import judgments with `manage.py import_data jsonl`"]}
    assert not Item.objects.exists()
    created = researcher_api.post("/api/projects/", {"slug": "p2", "title": "P2",
                                                     "kind": "likert", "owner": "mallory"},
                                  format="json")
    assert created.status_code == 400
    assert created.json() == {"owner": ["set by who creates the project"]}
    assert not Project.objects.filter(slug="p2").exists()


@pytest.mark.parametrize("url,body,where", [
    ("/api/projects/mine/items/bulk/",
     {"items": [{"external_id": "q1", "content": item_content(TaskKind.LIKERT)}],
      "dry_run": True}, ["dry_run"]),
    ("/api/metrics/projects/mine/scoring-jobs/", {"metrics": ["f1"], "modle": "v2"}, ["modle"]),
    ("/api/metrics/score/", {"metrics": ["f1"], "items": [
        {"id": "a", "question": "q", "references": ["r"], "candidate": "c", "pasage": "p"}]},
     ["items", "0", "pasage"]),
    ("/api/metrics/score/", {"metrics": ["f1"], "modle": "v2", "items": [
        {"id": "a", "question": "q", "references": ["r"], "candidate": "c"}]}, ["modle"]),
    ("/api/metrics/projects/mine/judge-jobs/", {"judge": "llm", "budgte": 1}, ["budgte"]),
])
def test_a_misspelt_field_of_the_metrics_and_bulk_apis_is_refused_not_dropped(
        researcher_api, url, body, where):
    """Dropped, a misspelt key changed the answer without a word: a judge job queued with no
    budget cap (`budgte`), a batch scored without its passage or pinned model, items stored
    as if an option the bulk endpoint does not have had been applied. Nothing is stored."""
    from metrics_app.models import ItemScoringJob, JudgeJob, ScoringJob
    from metrics_app.services.judges.versions import judge_version_create

    judge_version_create(name="llm", config={"base_url": "http://127.0.0.1:9/v1",
                                             "model": "fake-judge"})
    response = researcher_api.post(url, body, format="json")
    assert response.status_code == 400, response.content[:300]
    detail = response.json()
    for key in where:
        detail = detail[key]
    assert detail == ["unknown field"]
    assert not (Item.objects.exists() or ScoringJob.objects.exists()
                or ItemScoringJob.objects.exists() or JudgeJob.objects.exists())


# --- Answers to the task API: one rule at every door (confirm, guess, submit, autosave) ---------


def task_token(client, kind: str, mode: str = "") -> tuple[str, list[Item]]:
    project, _, items = make_task(kind, mode=mode)
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    return page_config(client.get(path))["token"], items


def post_answer(client, door: str, token: str, item_id, answer: dict):
    """One answer through one door: confirm and guess take it alone, submit in a list."""
    if door == "submit":
        return api(client, "task-submit", token, {"answers": [{"item": item_id, **answer}]})
    body = {"item": item_id, "answer": answer}
    return api(client, "task-confirm", token, {**body, "step": "guess"} if door == "guess"
               else body)


def nothing_stored() -> bool:
    draft = json.dumps(Assignment.objects.get().draft or {})
    return not Judgment.objects.exists() and "guesses" not in draft


@pytest.mark.parametrize("shown", [[["a"], ["b"]], [{"label": "a"}, "b"]])
def test_validity_answers_that_are_not_labels_are_a_400_naming_the_item(client, shown):
    # Submit only: a validity page submits its answers together, and the confirm door refuses
    # it whatever the answer (`test_confirm_scope.py`).
    token, items = task_token(client, TaskKind.MC, ExperimentMode.VALIDITY)
    response = post_answer(client, "submit", token, items[0].pk,
                           {"validity": "several", "shown_choices": shown})
    assert response.status_code == 400
    assert response.json()["errors"][str(items[0].pk)] == [
        "The correct answers must be a list of the labels shown (a, b, c or d)."]
    assert nothing_stored()


@pytest.mark.parametrize("started", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
def test_a_client_start_time_past_the_calendars_ends_is_left_out_not_a_500(client, started):
    """Client metadata, handled like any unreadable client_started_at: the answer is stored
    without it."""
    token, items = task_token(client, TaskKind.MC, ExperimentMode.QA)
    timing = {"time_spent_ms": 1200, "client_started_at": started}
    confirmed = post_answer(client, "confirm", token, items[0].pk,
                            {"shown_choice": "a", **timing})
    assert confirmed.status_code == 200 and confirmed.json()["ok"]
    submitted = api(client, "task-submit", token, {"answers": [
        {"item": item.pk, "shown_choice": "b", **timing} for item in items[1:]]})
    assert submitted.status_code == 200 and submitted.json()["ok"]
    stored = list(Judgment.objects.values_list("client_started_at", "time_spent_ms"))
    assert stored == [(None, 1200)] * len(items)


@pytest.mark.parametrize("door", ["confirm", "guess", "submit"])
@pytest.mark.parametrize("item_id", [
    pytest.param("1" * 5000, id="5000-digits"), pytest.param(2**63, id="2**63"),
    pytest.param(str(2**63), id="'2**63'"), pytest.param(-(2**63) - 1, id="-2**63-1"),
])
def test_an_item_id_no_id_column_holds_is_a_400_not_a_500(client, door, item_id):
    token, _ = task_token(client, TaskKind.MC, ExperimentMode.PILOT)
    response = post_answer(client, door, token, item_id,
                           {"shown_choice": "a", "shown_guess": "b"})
    assert response.status_code == 400
    message = "An answer names no item." if door == "submit" else "Unknown item."
    assert message in response.json()["errors"]["__all__"]
    assert nothing_stored()


def test_a_likert_score_of_5000_digits_is_a_400_naming_the_item(client):
    token, items = task_token(client, TaskKind.LIKERT)
    response = api(client, "task-submit", token, {"answers": [
        {"item": item.pk, "score": "1" * 5000 if item == items[0] else 3} for item in items]})
    assert response.status_code == 400
    assert response.json()["errors"] == {str(items[0].pk): ["Pick a score from 1 to 5."]}
    assert nothing_stored()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("door", ["autosave", "confirm", "guess", "submit"])
def test_nan_and_infinity_are_not_json_at_any_door(client, door, constant):
    """Python's parser reads them; the database refused them only when storing: a 500 from
    autosave, and "already judged" from confirm and submit, though nothing had been judged."""
    token, items = task_token(client, TaskKind.MC, ExperimentMode.PILOT)
    meta = f'"client_meta": {{"width": {constant}}}'
    answer = {"shown_choice": "a", "shown_guess": "a"}
    valid = {
        "autosave": {"draft": {"answers": {}}},
        "confirm": {"item": items[0].pk, "answer": answer},
        "guess": {"item": items[0].pk, "step": "guess", "answer": answer},
        "submit": {"answers": [{"item": item.pk, **answer} for item in items]},
    }[door]
    if door == "autosave":
        body = json.dumps(valid)[:-1] + f', "draft": {{"width": {constant}}}}}'
    else:
        body = json.dumps(valid)[:-1] + ", " + meta + "}"
    response = client.post(reverse(f"annotation:task-{door if door != 'guess' else 'confirm'}"),
                           data=body, content_type="application/json",
                           HTTP_X_ASSIGNMENT_TOKEN=token)
    assert response.status_code == 400
    assert response.json()["message"] == (
        f"The request body is not valid JSON: {constant} is not a JSON value.")
    assert nothing_stored()
    assert not (Assignment.objects.get().draft or {}).get("width")


def test_nan_is_not_json_to_the_researcher_api_either(researcher_api):
    body = ('{"external_id": "q1", "content": '
            + json.dumps(item_content(TaskKind.LIKERT))[:-1] + ', "score": NaN}}')
    response = researcher_api.post("/api/projects/mine/items/", data=body,
                                   content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"] == "JSON parse error - NaN is not a JSON value"
    assert not Item.objects.exists()


def test_a_key_given_twice_is_refused_by_the_bulk_api_as_by_the_import_files(researcher_api):
    # The import doors refuse a JSON key given twice (JSON keeps the last one); the bulk API
    # kept the last "content" without a word.
    first = json.dumps(item_content(TaskKind.LIKERT, 1))
    second = json.dumps(item_content(TaskKind.LIKERT, 2))
    body = ('{"items": [{"external_id": "q1", "content": ' + first
            + ', "content": ' + second + '}]}')
    response = researcher_api.post("/api/projects/mine/items/bulk/", data=body,
                                   content_type="application/json")
    assert response.status_code == 400
    assert "key 'content' appears twice" in response.json()["detail"]
    assert not Item.objects.exists()


@pytest.mark.parametrize("size", [1_200_000, 3_000_000])
def test_a_task_request_too_large_says_what_to_shorten_and_is_not_retried_as_lost(client, size):
    """A text of a megabyte or more pasted into a justification: the autosave and the submit
    are refused with the task API's own JSON (`ok`, `message`) saying what to shorten, whatever
    the size, so the page shows it instead of retrying the same body every few seconds as if
    the server could not be reached. Was: "Request too large." naming nothing, and past
    Django's upload limit an answer without `ok` or `message` (the page showed "undefined")."""
    project, _, items = make_task(TaskKind.AB)
    _, path = inhouse_link_create(worker=make_worker(), project=project)
    token = page_config(client.get(path))["token"]
    text = "A is better because " + "x" * size
    for name, body in (("task-autosave", {"draft": {"answers": {str(items[0].pk): {
                            "justification": text}}}}),
                       ("task-submit", {"answers": [{"item": items[0].pk, "shown_choice": "A",
                                                     "difficult": False,
                                                     "justification": text}]})):
        response = api(client, name, token, body)
        assert response.status_code == 413, (name, response.content[:200])
        answer = response.json()
        assert answer["ok"] is False, name
        assert "shorten the longest text" in answer["message"], name
        assert "10,000 characters" in answer["message"], name
    assert not Judgment.objects.exists()
    assert not (Assignment.objects.get().draft or {}).get("answers")
