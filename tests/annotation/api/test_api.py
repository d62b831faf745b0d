"""REST API: authentication, per-researcher visibility, project CRUD, item creation with
validation naming the field, judgments and stages read-only, bounded query counts, and a schema
that validates."""
from __future__ import annotations

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import AssignmentStatus, Item, Project, StageKind, TaskKind
from testing.factories import (
    item_content,
    item_gold,
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return make_user("alice")


@pytest.fixture
def bob():
    return make_user("bob")


@pytest.fixture
def api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


@pytest.fixture
def project(alice):
    return make_project(TaskKind.LIKERT, owner=alice, slug="mocha-dev",
                        redundancy={"dev": 3, "default": 1})


# --- Authentication -----------------------------------------------------------------------------


@pytest.mark.parametrize("url", [
    "/api/projects/", "/api/projects/mocha-dev/", "/api/projects/mocha-dev/items/",
    "/api/projects/mocha-dev/judgments/", "/api/projects/mocha-dev/stages/",
])
@pytest.mark.reliability
def test_unauthenticated_requests_are_refused(project, url):
    response = APIClient().get(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert "credentials" in response.json()["detail"].lower()


def test_token_authentication(alice, project):
    token = Token.objects.create(user=alice)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    response = client.get("/api/projects/")
    assert response.status_code == 200
    assert [p["slug"] for p in response.json()["results"]] == ["mocha-dev"]
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get("/api/projects/").status_code == 401


def test_session_authentication(client, alice, project):
    client.force_login(alice)
    response = client.get("/api/projects/mocha-dev/")
    assert response.status_code == 200
    assert response.json()["owner"] == "alice"


@pytest.mark.reliability
def test_session_writes_need_csrf(alice):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post("/api/projects/", {"slug": "x", "title": "X", "kind": "ab"},
                           format="json")
    assert response.status_code == 403
    assert "csrf" in response.json()["detail"].lower()
    assert not Project.objects.filter(slug="x").exists()


# --- Visibility ---------------------------------------------------------------------------------


@pytest.mark.reliability
def test_lists_show_only_own_and_shared_projects(api, alice, bob, project):
    make_project(TaskKind.AB, owner=bob, slug="bobs")
    make_project(TaskKind.MC, owner=bob, slug="bobs-shared", shared_with=[alice])
    response = api.get("/api/projects/")
    assert {p["slug"] for p in response.json()["results"]} == {"mocha-dev", "bobs-shared"}


@pytest.mark.reliability
@pytest.mark.parametrize("suffix", ["", "items/", "items/bulk/", "judgments/", "stages/"])
def test_other_researchers_project_is_404(api, bob, suffix):
    other = make_project(TaskKind.LIKERT, owner=bob, slug="bobs")
    make_item(other)
    url = f"/api/projects/bobs/{suffix}"
    if suffix == "items/bulk/":
        response = api.post(url, {"items": []}, format="json")
    else:
        response = api.get(url)
    assert response.status_code == 404
    assert api.patch("/api/projects/bobs/", {"title": "mine now"}, format="json").status_code == 404
    other.refresh_from_db()
    assert other.title != "mine now"


@pytest.mark.reliability
def test_other_projects_items_and_stages_are_404_by_id(api, bob, project):
    other = make_project(TaskKind.LIKERT, owner=bob, slug="bobs")
    item = make_item(other)
    stage = make_stage(other)
    assert api.get(f"/api/projects/mocha-dev/items/{item.pk}/").status_code == 404
    assert api.get(f"/api/projects/mocha-dev/stages/{stage.pk}/").status_code == 404
    # Another project's stage as a filter is rejected, naming the field.
    response = api.get("/api/projects/mocha-dev/items/", {"stage": stage.pk})
    assert response.status_code == 400
    assert "stage" in response.json()


def test_superuser_sees_every_project(bob, project):
    make_project(TaskKind.AB, owner=bob, slug="bobs")
    client = APIClient()
    client.force_authenticate(make_user("root", superuser=True))
    slugs = {p["slug"] for p in client.get("/api/projects/").json()["results"]}
    assert {"mocha-dev", "bobs"} <= slugs


# --- Projects -----------------------------------------------------------------------------------


def test_create_project_sets_owner(api, alice, bob):
    response = api.post("/api/projects/", {
        "slug": "lfqa", "title": "LFQA", "kind": "ab", "justification_min_length": 20,
        "redundancy": {"default": 2}, "shared_with": ["bob"],
    }, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["owner"] == "alice"
    assert body["shared_with"] == ["bob"]
    assert body["aspects"]  # A/B default aspects filled in
    project = Project.objects.get(slug="lfqa")
    assert project.owner == alice and project.redundancy == {"default": 2}
    bob_client = APIClient()
    bob_client.force_authenticate(bob)
    assert bob_client.get("/api/projects/lfqa/").status_code == 200


@pytest.mark.parametrize("payload,field", [
    ({"slug": "a", "title": "A", "kind": "essay"}, "kind"),
    ({"slug": "not a slug!", "title": "A", "kind": "ab"}, "slug"),
    ({"slug": "mocha-dev", "title": "A", "kind": "ab"}, "slug"),
    ({"slug": "a", "kind": "ab"}, "title"),
    ({"slug": "a", "title": "A", "kind": "ab", "redundancy": {"dev": 0}}, "redundancy"),
    ({"slug": "a", "title": "A", "kind": "ab", "redundancy": [1]}, "redundancy"),
    # two names of one split: which number counts would depend on the keys' order
    ({"slug": "a", "title": "A", "kind": "ab", "redundancy": {"dev": 3, "Validation": 2}},
     "redundancy"),
    ({"slug": "a", "title": "A", "kind": "ab", "gold_rate": 2}, "gold_rate"),
    ({"slug": "a", "title": "A", "kind": "ab", "shared_with": ["nobody"]}, "shared_with"),
    ({"slug": "a", "title": "A", "kind": "likert", "scale_labels": "bad"}, "scale_labels"),
    # zero items per HIT would publish HITs that tell every worker there is nothing to do
    ({"slug": "a", "title": "A", "kind": "ab", "items_per_hit": 0}, "items_per_hit"),
])
def test_create_project_errors_name_the_field(api, project, payload, field):
    before = Project.objects.count()
    response = api.post("/api/projects/", payload, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert Project.objects.count() == before


def test_update_project(api, project):
    response = api.patch("/api/projects/mocha-dev/", {"title": "MOCHA dev"}, format="json")
    assert response.status_code == 200
    project.refresh_from_db()
    assert project.title == "MOCHA dev"
    # kind is not writable (items were validated by it): refused by name, not ignored
    response = api.patch("/api/projects/mocha-dev/", {"title": "x", "kind": "ab"}, format="json")
    assert response.status_code == 400 and "kind" in response.json()
    project.refresh_from_db()
    assert (project.title, project.kind) == ("MOCHA dev", TaskKind.LIKERT)
    response = api.patch("/api/projects/mocha-dev/", {"items_per_hit": -1}, format="json")
    assert response.status_code == 400 and "items_per_hit" in response.json()


def test_only_owner_changes_sharing(alice, bob, project):
    project.shared_with.add(bob)
    client = APIClient()
    client.force_authenticate(bob)
    response = client.patch("/api/projects/mocha-dev/", {"shared_with": []}, format="json")
    assert response.status_code == 403
    assert list(project.shared_with.all()) == [bob]
    # A collaborator may still edit the study itself.
    response = client.patch("/api/projects/mocha-dev/", {"instructions": "Read twice."},
                            format="json")
    assert response.status_code == 200
    project.refresh_from_db()
    assert project.instructions == "Read twice."


def test_project_progress_in_detail(api, project):
    items = [make_item(project, split="dev") for _ in range(2)]
    stage = make_stage(project)
    make_judgment(item=items[0], stage=stage)
    make_assignment(stage, status=AssignmentStatus.SUBMITTED)
    progress = api.get("/api/projects/mocha-dev/").json()["progress"]
    assert progress == {"items": 2, "judgments": 1, "not_counted": 0, "awaiting": 0, "wanted": 6,
                        "percent": 17, "takers": None, "passed": None, "max_takers": None,
                        "reoffered": 0, "places_added": 0, "imported": 0,
                        "text": "1 of 6 judgments counted (17%)",
                        "assignments": {"submitted": 1}}


# --- Items --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(TaskKind.values))
def test_create_item_for_each_kind(api, alice, kind):
    make_project(kind, owner=alice, slug=f"k-{kind}")
    response = api.post(f"/api/projects/k-{kind}/items/", {
        "external_id": "q1", "dataset": "demo", "split": "dev",
        "content": item_content(kind), "gold": item_gold(kind),
    }, format="json")
    assert response.status_code == 201, response.json()
    item = Item.objects.get(project__slug=f"k-{kind}", external_id="q1")
    assert item.content == item_content(kind)
    assert response.json()["id"] == item.pk
    assert api.get(f"/api/projects/k-{kind}/items/{item.pk}/").json()["gold"] == item_gold(kind)


@pytest.mark.parametrize("change,field,mentions", [
    ({"content": {"question": "q"}}, "content", "passage"),
    ({"content": {**item_content("likert"), "references": "on the mat"}}, "content", "references"),
    ({"content": {**item_content("likert"), "question": 7}}, "content", "question"),
    ({"content": "text"}, "content", "content"),
    ({"content": None}, "content", "null"),
    ({"gold": {"score": 9}}, "gold", "gold.score"),
    ({"external_id": ""}, "external_id", "blank"),
    ({"split": "x" * 30}, "split", "20"),
    ({"metadata": [1]}, "metadata", "object"),
])
def test_item_validation_errors_name_the_field(api, project, change, field, mentions):
    payload = {"external_id": "q1", "content": item_content("likert"), **change}
    response = api.post("/api/projects/mocha-dev/items/", payload, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert field in errors
    assert mentions in " ".join(errors[field])
    assert not project.items.exists()


def test_duplicate_external_id_is_refused(api, project):
    make_item(project, external_id="q1")
    response = api.post("/api/projects/mocha-dev/items/",
                        {"external_id": "q1", "content": item_content("likert")}, format="json")
    assert response.status_code == 400
    assert "already exists" in response.json()["content"][0]  # the field that differs
    assert project.items.count() == 1


def test_bulk_create_items(api, project):
    items = [{"external_id": f"q{i}", "split": "dev", "content": item_content("likert", i)}
             for i in range(25)]
    response = api.post("/api/projects/mocha-dev/items/bulk/", {"items": items}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["created"] == 25
    assert project.items.count() == 25
    assert set(project.items.values_list("external_id", flat=True)) == {f"q{i}" for i in range(25)}


@pytest.mark.parametrize("broken,index,field", [
    ({3: {"content": {"question": "q"}}}, 3, "content"),
    ({1: {"external_id": "q0"}}, 1, "external_id"),
    ({2: {"gold": {"score": "high"}}}, 2, "gold"),
])
def test_bulk_create_is_all_or_nothing_and_names_index_and_field(api, project, broken, index,
                                                                 field):
    items = [{"external_id": f"q{i}", "content": item_content("likert", i)} for i in range(5)]
    for i, change in broken.items():
        items[i].update(change)
    response = api.post("/api/projects/mocha-dev/items/bulk/", {"items": items}, format="json")
    assert response.status_code == 400
    errors = response.json()["items"]
    entry = errors[index] if isinstance(errors, list) else errors[str(index)]
    assert field in entry
    assert not project.items.exists()


def test_bulk_create_refuses_existing_external_id(api, project):
    make_item(project, external_id="q3")
    items = [{"external_id": f"q{i}", "content": item_content("likert", i)} for i in range(5)]
    response = api.post("/api/projects/mocha-dev/items/bulk/", {"items": items}, format="json")
    assert response.status_code == 400
    assert "already exists" in response.json()["items"]["3"]["content"][0]
    assert project.items.count() == 1


# --- Retries: a client whose response was lost sends the request again ---------------------


@pytest.mark.reliability
def test_a_repeated_bulk_request_answers_the_stored_items_and_creates_nothing(api, project):
    items = [{"external_id": f"q{i}", "split": "dev", "content": item_content("likert", i),
              "gold": {"score": 4}, "metadata": {"n": i}} for i in range(3)]
    first = api.post("/api/projects/mocha-dev/items/bulk/", {"items": items}, format="json")
    assert first.status_code == 201 and first.json()["created"] == 3
    again = api.post("/api/projects/mocha-dev/items/bulk/", {"items": items}, format="json")
    assert again.status_code == 200, again.json()
    assert again.json() == {"created": 0, "external_ids": ["q0", "q1", "q2"]}
    assert project.items.count() == 3


@pytest.mark.reliability
def test_a_repeated_bulk_request_with_large_floats_is_still_the_same_request(api, project):
    # PostgreSQL's jsonb gives 1e23 back as the whole number 100000000000000000000000, which
    # == never found equal to the float posted: the exact retry was a 400 "different metadata".
    items = [{"external_id": "q0", "content": {**item_content("likert"), "score": 2.5e30},
              "metadata": {"tokens": 1e23, "losses": [1.5e24, 0.1]}}]
    first = api.post("/api/projects/mocha-dev/items/bulk/", {"items": items}, format="json")
    assert first.status_code == 201
    again = api.post("/api/projects/mocha-dev/items/bulk/", {"items": items}, format="json")
    assert again.status_code == 200, again.json()
    changed = [{**items[0], "metadata": {"tokens": 2e23, "losses": [1.5e24, 0.1]}}]
    response = api.post("/api/projects/mocha-dev/items/bulk/", {"items": changed},
                        format="json")
    assert response.status_code == 400 and "different metadata" in str(response.json())
    assert project.items.count() == 1


@pytest.mark.reliability
def test_a_bulk_request_differing_from_the_stored_one_is_refused_naming_index_and_field(
        api, project):
    items = [{"external_id": f"q{i}", "content": item_content("likert", i)} for i in range(3)]
    api.post("/api/projects/mocha-dev/items/bulk/", {"items": items}, format="json")
    changed = [dict(item) for item in items]
    changed[1] = {**changed[1], "split": "test"}
    response = api.post("/api/projects/mocha-dev/items/bulk/", {"items": changed},
                        format="json")
    assert response.status_code == 400
    message = response.json()["items"]["1"]["split"][0]
    assert "'q1' already exists" in message and "different split" in message
    # Part of the batch stored, part new: not a retry; nothing of it is stored.
    grown = [*items, {"external_id": "q9", "content": item_content("likert", 9)}]
    response = api.post("/api/projects/mocha-dev/items/bulk/", {"items": grown}, format="json")
    assert response.status_code == 400
    message = response.json()["items"]["0"]["external_id"][0]
    assert "items[3] ('q9') does not" in message
    assert project.items.count() == 3


@pytest.mark.reliability
def test_a_repeated_single_item_request_answers_the_stored_item(api, project):
    body = {"external_id": "q1", "dataset": "mocha", "content": item_content("likert")}
    first = api.post("/api/projects/mocha-dev/items/", body, format="json")
    assert first.status_code == 201
    again = api.post("/api/projects/mocha-dev/items/", body, format="json")
    assert again.status_code == 200 and again.json() == first.json()
    response = api.post("/api/projects/mocha-dev/items/", {**body, "dataset": "other"},
                        format="json")
    assert response.status_code == 400 and "different dataset" in response.json()["dataset"][0]
    assert project.items.count() == 1


def test_bulk_create_rejects_empty_and_non_list(api, project):
    assert api.post("/api/projects/mocha-dev/items/bulk/", {"items": []},
                    format="json").status_code == 400
    response = api.post("/api/projects/mocha-dev/items/bulk/", {"items": {"a": 1}}, format="json")
    assert response.status_code == 400 and "items" in response.json()


def test_item_filters(api, project):
    dev = make_item(project, split="dev", dataset="cosmosqa", source="gpt2")
    make_item(project, split="train", dataset="cosmosqa", source="backtranslation")
    make_item(project, split="dev", dataset="narrativeqa", source="gpt2")
    stage = make_stage(project)
    stage.items.add(dev)

    def ids(**params):
        response = api.get("/api/projects/mocha-dev/items/", params)
        assert response.status_code == 200
        return [row["external_id"] for row in response.json()["results"]]

    assert len(ids()) == 3
    assert ids(split="dev", dataset="cosmosqa") == [dev.external_id]
    assert len(ids(source="gpt2")) == 2
    assert ids(stage=stage.pk) == [dev.external_id]
    assert api.get("/api/projects/mocha-dev/items/", {"stage": "x"}).status_code == 400


# --- Stages and judgments -----------------------------------------------------------------------


def test_stages_list_and_detail_with_progress(api, project):
    items = [make_item(project, split="dev") for _ in range(3)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, order=0,
                               judgments_per_item=1)
    qualification.items.add(items[0])
    full = make_stage(project, kind=StageKind.FULL, order=1)
    make_judgment(item=items[0], stage=full)
    response = api.get("/api/projects/mocha-dev/stages/")
    rows = response.json()["results"]
    assert [r["id"] for r in rows] == [qualification.pk, full.pk]
    # A qualification wants every item from each of its takers (50 by default).
    assert rows[0]["progress"]["items"] == 1 and rows[0]["progress"]["wanted"] == 50
    assert rows[0]["progress"]["text"] == "0 of 50 takers counted (0%); 0 passed"
    assert rows[0]["explicit_item_count"] == 1
    assert rows[1]["progress"] == {"items": 3, "judgments": 1, "not_counted": 0, "awaiting": 0, "wanted": 9,
                                   "percent": 11, "takers": None, "passed": None,
                                   "max_takers": None, "reoffered": 0, "places_added": 0,
                                   "imported": 0,
                                   "text": "1 of 9 judgments counted (11%)", "assignments": {}}
    detail = api.get(f"/api/projects/mocha-dev/stages/{full.pk}/").json()
    assert detail["progress"]["judgments"] == 1
    assert detail["reward"] == "0.40"


def test_judgments_list_and_filters(api, project):
    items = [make_item(project, split=s) for s in ("dev", "train")]
    stage, trial = make_stage(project), make_stage(project, kind=StageKind.TRIAL)
    w1, w2 = make_worker(external_id="W1"), make_worker(external_id="W2")
    j1 = make_judgment(item=items[0], stage=stage, worker=w1, score=5)
    j2 = make_judgment(item=items[1], stage=stage, worker=w2, score=2)
    j3 = make_judgment(item=items[0], stage=trial, worker=w2, score=4)

    def ids(**params):
        response = api.get("/api/projects/mocha-dev/judgments/", params)
        assert response.status_code == 200, response.json()
        return [row["id"] for row in response.json()["results"]]

    assert ids() == [j1.pk, j2.pk, j3.pk]
    assert ids(worker="W2") == [j2.pk, j3.pk]
    assert ids(stage=trial.pk) == [j3.pk]
    assert ids(split="train") == [j2.pk]
    assert ids(after_id=j1.pk) == [j2.pk, j3.pk]
    assert ids(item=items[0].external_id) == [j1.pk, j3.pk]
    row = api.get("/api/projects/mocha-dev/judgments/", {"worker": "W1"}).json()["results"][0]
    assert row["score"] == 5 and row["worker"] == "W1"
    assert row["item_external_id"] == items[0].external_id
    assert api.get("/api/projects/mocha-dev/judgments/", {"after_id": -1}).status_code == 400


def test_judgments_are_read_only(api, project):
    item = make_item(project)
    judgment = make_judgment(item=item)
    url = "/api/projects/mocha-dev/judgments/"
    assert api.post(url, {"item": item.pk, "score": 1}, format="json").status_code == 405
    assert api.delete(url).status_code == 405
    judgment.refresh_from_db()
    assert judgment.score == 3


def test_unsupported_content_type_is_415(api, project):
    response = api.post("/api/projects/mocha-dev/items/", {"external_id": "q1"})  # multipart
    assert response.status_code == 415


def test_hostile_input_is_a_400_not_a_500(api, project):
    content = {**item_content("likert"), "candidate": "nul \x00 here"}
    response = api.post("/api/projects/mocha-dev/items/",
                        {"external_id": "q1", "content": content}, format="json")
    assert response.status_code == 400 and "content" in response.json()
    response = api.post("/api/projects/mocha-dev/items/",
                        {"external_id": "q\x00", "content": item_content("likert")},
                        format="json")
    assert response.status_code == 400 and "external_id" in response.json()
    response = api.get("/api/projects/mocha-dev/judgments/", {"after_id": 2**70})
    assert response.status_code == 400 and "after_id" in response.json()
    response = api.post("/api/projects/", {"slug": "r", "title": "R", "kind": "ab",
                                           "redundancy": {"dev": 10**9}}, format="json")
    assert response.status_code == 400 and "redundancy" in response.json()
    response = api.post("/api/projects/mocha-dev/items/", data="{not json",
                        content_type="application/json")
    assert response.status_code == 400 and "JSON parse error" in response.json()["detail"]
    assert not project.items.exists()


def test_page_size_is_capped(api, project):
    for _ in range(3):
        make_item(project)
    response = api.get("/api/projects/mocha-dev/items/", {"limit": 10**30, "offset": 1})
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3 and len(body["results"]) == 2


# --- Query counts -------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [
    "/api/projects/", "/api/projects/mocha-dev/", "/api/projects/mocha-dev/items/",
    "/api/projects/mocha-dev/stages/", "/api/projects/mocha-dev/judgments/",
])
def test_query_counts_do_not_grow_with_rows(api, alice, project, url,
                                            django_assert_max_num_queries):
    def populate(n):
        for _ in range(n):
            other = make_project(TaskKind.LIKERT, owner=alice, shared_with=[make_user()])
            for target in (project, other):
                stage = make_stage(target)
                item = make_item(target)
                make_judgment(item=item, stage=stage)
                make_assignment(stage, items=[item])

    populate(2)
    with django_assert_max_num_queries(10):
        assert api.get(url).status_code == 200
    populate(10)
    with django_assert_max_num_queries(10):
        response = api.get(url)
    assert response.status_code == 200


# --- Schema -------------------------------------------------------------------------------------


def test_schema_validates_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    for path in ("/api/projects/{project_slug}/items/bulk/",
                 "/api/projects/{project_slug}/judgments/"):
        assert path in text
    import yaml

    schema = yaml.safe_load(text)
    content = schema["components"]["schemas"]["ItemInput"]["properties"]["content"]
    assert [branch["title"] for branch in content["anyOf"]] == ["likert", "ab", "mc"]
    item_post = schema["paths"]["/api/projects/{project_slug}/items/"]["post"]["responses"]
    assert {"200", "201", "400", "401", "403", "404", "415"} <= set(item_post)
    bulk_post = schema["paths"]["/api/projects/{project_slug}/items/bulk/"]["post"]
    assert {"200", "201"} <= set(bulk_post["responses"])
    assert "retry" in bulk_post["description"]


def test_the_schema_documents_pages_and_their_400_only_where_they_are_served(tmp_path, alice):
    """A bad `?limit=` is a 400 on every paginated GET, so each documents it; a POST answers
    unpaginated (scoring-jobs/ a bare list of the jobs it queued): no page envelope, no limit.
    The items of a score request are described by their fields (they were `{}`)."""
    import yaml

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    paged = set()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if "limit" in [p["name"] for p in operation.get("parameters", [])]:
                paged.add(f"{method.upper()} {path}")
                assert method == "get", path
                assert "400" in operation["responses"], f"{method} {path}"
    assert "GET /api/metrics/projects/{slug}/judge-jobs/" in paged
    scoring_jobs = "/api/metrics/projects/{slug}/scoring-jobs/"
    queued = schema["paths"][scoring_jobs]["post"]["responses"]["202"]
    assert queued["content"]["application/json"]["schema"]["type"] == "array"
    score_items = schema["components"]["schemas"]["MetricScoreInput"]["properties"]["items"]
    assert score_items["items"] == {"$ref": "#/components/schemas/ScoreItem"}
    assert set(schema["components"]["schemas"]["ScoreItem"]["required"]) == {
        "id", "question", "references", "candidate"}
    make_project(TaskKind.LIKERT, owner=alice, slug="scored")
    api = APIClient()
    api.force_authenticate(alice)
    assert isinstance(api.post(scoring_jobs.replace("{slug}", "scored"), {"metrics": ["f1"]},
                               format="json").json(), list)
    assert api.get("/api/metrics/projects/scored/judge-jobs/?limit=abc").status_code == 400


def test_schema_and_docs_are_served_to_researchers_only(client, alice):
    """Like every API endpoint: 401 without credentials, 403 for an account that is not a
    researcher, served to a researcher (the session of the admin, or a token)."""
    for path in ("/api/schema/", "/api/docs/", "/api/docs/?script="):
        response = client.get(path)
        assert response.status_code == 401, path
        assert b"openapi" not in response.content and b"/api/projects/" not in response.content
    client.force_login(make_user("annotator", staff=False))
    assert client.get("/api/schema/").status_code == 403
    assert client.get("/api/docs/").status_code == 403
    client.force_login(alice)
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200


def test_api_docs_load_nothing_from_a_cdn_and_no_inline_script(client, alice):
    """Swagger UI comes from the installed drf-spectacular-sidecar: the docs page works offline
    and under the production CSP (script-src 'self', so no inline script)."""
    import re

    from django.conf import settings
    from django.contrib.staticfiles import finders

    client.force_login(alice)
    page = client.get("/api/docs/").content.decode()
    sources = re.findall(r'<(?:script|link)[^>]+(?:src|href)="([^"]+)"', page)
    assert len(sources) >= 4  # css, favicon, bundle, preset (+ the init script)
    assert not any(src.startswith(("http:", "https:", "//")) for src in sources), sources
    assert "<script>" not in page
    static = [src for src in sources if src.startswith(settings.STATIC_URL)]
    assert {src.rsplit("/", 1)[-1] for src in static} >= {
        "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css"}
    for src in static:
        assert finders.find(src.removeprefix(settings.STATIC_URL)), f"{src} is not installed"
    init = next(src for src in sources if "script=" in src)
    script = client.get(init.replace("&amp;", "&"))
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert b"/api/schema/" in script.content


def test_unrouted_api_urls_answer_json_404(api, project):
    for url in ("/api/projects/not%20a%20slug/", "/api/projects/mocha-dev/stages/-1/",
                "/api/nothing-here/"):
        response = api.get(url)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"detail": "Not found."}
    response = APIClient().get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("query, parameter", [
    ("limit=abc", "limit"), ("limit=-1", "limit"), ("limit=2.5", "limit"),
    ("offset=abc", "offset"), ("offset=-3", "offset"), ("limit=%EF%BC%95", "limit"),
    ("limit=0", "limit"), ("limit=000", "limit"),
])
def test_bad_limit_or_offset_is_a_400_naming_it_not_a_silent_default(api, project, query,
                                                                     parameter):
    for url in ("/api/projects/", "/api/projects/mocha-dev/items/",
                "/api/projects/mocha-dev/stages/", "/api/projects/mocha-dev/judgments/"):
        response = api.get(f"{url}?{query}")
        assert response.status_code == 400, url
        assert parameter in response.json(), url


def test_limit_zero_is_refused_with_the_range_it_takes(api, project):
    """`?limit=0` answered the default 100 rows while the message said "0 or more"."""
    response = api.get("/api/projects/mocha-dev/items/?limit=0")
    assert response.status_code == 400
    assert response.json() == {"limit": ["must be a whole number (1 or more)"]}
    response = api.get("/api/projects/mocha-dev/items/?offset=-1")
    assert response.json() == {"offset": ["must be a whole number (0 or more)"]}
    assert api.get("/api/projects/mocha-dev/items/?offset=0&limit=1").status_code == 200
    huge = "9" * 5000  # never handed to int() whole; past every row
    body = api.get(f"/api/projects/mocha-dev/items/?offset={huge}&limit={huge}").json()
    assert body["results"] == []


def test_limit_and_offset_page_through_a_list(api, project):
    make_item(project)
    make_item(project)
    first = api.get("/api/projects/mocha-dev/items/?limit=1").json()
    second = api.get("/api/projects/mocha-dev/items/?limit=1&offset=1").json()
    assert len(first["results"]) == len(second["results"]) == 1
    assert first["results"][0]["id"] != second["results"][0]["id"]
    assert first["count"] == second["count"] >= 2

