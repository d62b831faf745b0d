"""The schema served at /api/schema/ tells the truth about real answers: with a realistic
project of each kind (Likert, A/B, STARC multiple choice), every GET operation and the main
POSTs (a valid and an invalid body each) are called as a researcher, and each answer's status
must be documented for that path and method and its body must validate against the documented
schema (jsonschema, $refs resolved inside the served schema). Objects are read as closed: a
field an answer carries that the schema does not name fails, since clients generated from the
schema would drop it. The fuzz (test_api_fuzz.py) meets mostly unknown slugs; this walk meets
full reports, pages and jobs."""
from __future__ import annotations

import json
import re

import jsonschema
import pytest
from rest_framework.test import APIClient

from annotation.models import Judgment, SpotCheck, TaskKind
from metrics_app.services.judges.versions import judge_version_create
from metrics_app.services.scoring import project_score_metrics
from testing.factories import (
    item_content,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

KINDS = [(TaskKind.LIKERT, ""), (TaskKind.AB, ""), (TaskKind.MC, "qa")]


def judged_project(kind: str, owner, slug: str, mode: str = ""):
    """Items from two systems, three judges' judgments on each, and automatic metric scores
    (STARC multiple-choice projects have none): every report section filled in."""
    extra = {"experiment_mode": mode} if mode else {}
    project = make_project(kind, owner=owner, slug=slug, **extra)
    stage = make_stage(project)
    judges = [make_worker() for _ in range(3)]
    for n in range(6):
        item = make_item(project, content=item_content(kind, n), source=f"system-{n % 2}")
        for j, judge in enumerate(judges):
            answer = ({"score": 1 + (n + j) % 5} if kind == TaskKind.LIKERT
                      else {"choice": "AB"[(n + j) % 2]} if kind == TaskKind.AB
                      else {"choice": "ABCD"[(n * j) % 4]})
            make_judgment(item=item, stage=stage, worker=judge, **answer)
    if kind != TaskKind.MC:
        project_score_metrics(project=project, metric_names=["em", "f1", "length"])
    # Two spot checks: one by the owner, one whose researcher's account is gone (null).
    first, second = Judgment.objects.filter(item__project=project).order_by("pk")[:2]
    SpotCheck.objects.create(judgment=first, verdict="ok", checked_by=owner)
    SpotCheck.objects.create(judgment=second, verdict="problem", note="off by one")
    return project


def _as_json_schema(node, *, in_properties=False):
    """OpenAPI 3.0 schema objects as JSON Schema: `nullable` becomes a null alternative, and an
    object that lists its properties admits no others."""
    if isinstance(node, list):
        return [_as_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    if in_properties:  # names of properties, each a schema
        return {name: _as_json_schema(value) for name, value in node.items()}
    out = {key: _as_json_schema(value, in_properties=key == "properties")
           for key, value in node.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if out.pop("nullable", False):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


class SchemaChecker:
    def __init__(self, schema: dict):
        self.schema = schema
        self.components = _as_json_schema(schema["components"])
        self.mismatches: list[str] = []
        self.called: set[tuple[str, str]] = set()

    def check(self, method: str, url: str, response) -> None:
        """Every mismatch is kept, so one run lists them all."""
        try:
            self._check(method, url, response)
        except AssertionError as exc:
            self.mismatches.append(str(exc))

    def assert_all_matched(self) -> None:
        assert not self.mismatches, "\n".join(self.mismatches)

    def operation(self, method: str, url: str) -> tuple[str, dict]:
        path = url.split("?", 1)[0]
        for template, operations in self.schema["paths"].items():
            pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
            if re.match(pattern, path) and method.lower() in operations:
                return template, operations[method.lower()]
        raise AssertionError(f"{method} {path} is served but not in the schema")

    def errors_of_400(self, method: str, url: str, body) -> list:
        _, operation = self.operation(method, url)
        schema = operation["responses"]["400"]["content"]["application/json"]["schema"]
        validator = jsonschema.Draft4Validator(
            {**_as_json_schema(schema), "components": self.components})
        return list(validator.iter_errors(body))

    def _check(self, method: str, url: str, response) -> None:
        template, operation = self.operation(method, url)
        self.called.add((method, template))
        where = f"{method} {url} -> {response.status_code}"
        documented = operation["responses"]
        assert str(response.status_code) in documented, (
            f"{where}: status not documented (only {sorted(documented)}): "
            f"{response.content[:300]!r}")
        content = documented[str(response.status_code)].get("content")
        if not content:
            assert not response.content, f"{where}: a body the schema does not document"
            return
        media = response["Content-Type"].split(";")[0]
        assert media in content, f"{where}: {media} not documented (only {sorted(content)})"
        schema = content[media].get("schema")
        if media != "application/json" or schema is None:
            return
        validator = jsonschema.Draft4Validator(
            {**_as_json_schema(schema), "components": self.components})
        errors = sorted(validator.iter_errors(response.json()), key=lambda e: list(e.path))
        assert not errors, f"{where}: body does not match the schema:\n" + "\n".join(
            f"  at {list(e.path)}: {e.message[:300]}" for e in errors[:10])


@pytest.fixture
def researcher_api():
    user = make_user("schema-reader")
    api = APIClient()
    api.force_authenticate(user)
    return user, api


def _served_schema(api) -> dict:
    response = api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return json.loads(response.content)


def _calls(project) -> list[tuple[str, str, object, int | None]]:
    """(method, url, JSON body, expected status or None for 'any documented one')."""
    p, m = f"/api/projects/{project.slug}", f"/api/metrics/projects/{project.slug}"
    item = project.items.order_by("pk").first()
    stage = project.stages.order_by("pk").first()
    gets = [f"{p}/", f"{p}/items/", f"{p}/items/{item.pk}/", f"{p}/judgments/",
            f"{p}/judgments/?include_rejected=true&worker=1", f"{p}/stages/",
            f"{p}/stages/{stage.pk}/", f"{p}/stages/{stage.pk}/release-preview/",
            f"{m}/report/", f"{m}/report/?group_by=source", f"{m}/metric-report/?n_resamples=20",
            f"{m}/judges/report/",
            f"{m}/judge-jobs/", f"{m}/scoring-jobs/", f"{p}/spot-checks/"]
    calls = [("GET", url, None, 200) for url in gets + ["/api/projects/"]]
    # The leaderboard ranks A/B systems; another kind's is an explained 400.
    calls.append(("GET", f"{m}/leaderboard/", None, 200 if project.kind == TaskKind.AB else 400))
    if project.kind == TaskKind.AB:
        calls.append(("GET", f"{m}/leaderboard/?output=csv", None, 200))
    calls.append(("GET", f"{m}/judges/plan/", None, 400))  # budget and label_cost missing
    calls += [("GET", url, None, 400) for url in (f"{p}/items/?limit=abc",
                                                   f"{p}/judgments/?offset=-1",
                                                   f"{p}/spot-checks/?limit=abc",
                                                   f"{m}/metric-report/?n_resamples=x",
                                                   f"{m}/metric-report/?znormalize=maybe",
                                                   f"{m}/report/?group_by=nonsense",
                                                   f"{p}/judgments/?after_id=x",
                                                   f"{m}/judges/report/?judge=j&resamples=-1")]
    calls += [("GET", url, None, 404) for url in (f"{p}/items/999999/", f"{p}/stages/999999/",
                                                   "/api/projects/no-such/",
                                                   f"/api/metrics/score-jobs/{10**9}/",
                                                   "/api/metrics/projects/no-such/report/",
                                                   f"{m}/report/?stage=no-such-stage")]
    # An unknown judge is reported beside the others (`errors`), not refused.
    calls.append(("GET", f"{m}/judges/report/?judge=nobody", None, 200))
    calls += [
        ("PATCH", f"{p}/", {"title": "Renamed"}, 200),
        ("PATCH", f"{p}/", {"title": ""}, 400),
        ("POST", f"{p}/items/", {"external_id": "new", "content": {"nonsense": 1}}, 400),
        ("POST", f"{p}/items/bulk/", {"items": [{"external_id": "x"}]}, 400),
        ("POST", f"{p}/stages/", {"name": "extra", "kind": "full", "provider": "inhouse"}, 201),
        ("POST", f"{p}/stages/", {"name": "bad", "kind": "nonsense"}, 400),
        ("PATCH", f"{p}/stages/{stage.pk}/", {"status": "draft"}, 400),
        ("POST", f"{m}/scoring-jobs/", {"metrics": ["nonsense"]}, 400),
        ("POST", f"{m}/judge-jobs/", {}, 400),
        ("POST", f"{m}/judges/verdicts/", {"verdicts": [{"item_id": "nope"}]}, 400),
        ("POST", f"{m}/judges/verdicts/", {"judge": "j", "version": "1", "verdicts": [
            {"item_id": i.external_id, "verdict": {"likert": "correct", "ab": "A"}.get(
                project.kind, "B")} for i in project.items.all()]}, 201),
        # STARC verdicts (A-D) match no pilot label of this project: an explained 400.
        ("GET", f"{m}/judges/plan/?judge=j&budget=10&label_cost=0.5", None,
         400 if project.kind == TaskKind.MC else 200),
        ("GET", f"{m}/judges/report/?judge=j&resamples=20", None, 200),
        ("POST", f"{m}/scoring-jobs/{10**9}/cancel/", None, 404),
        ("POST", f"{m}/judge-jobs/{10**9}/cancel/", None, 404),
    ]
    if project.kind != TaskKind.MC:
        calls.append(("POST", f"{m}/scoring-jobs/", {"metrics": ["em"]}, 202))
    return calls


@pytest.mark.parametrize("kind,mode", KINDS)
def test_every_answer_of_a_real_project_matches_the_served_schema(researcher_api, kind, mode):
    user, api = researcher_api
    checker = SchemaChecker(_served_schema(api))
    project = judged_project(kind, user, slug=f"schema-{kind}", mode=mode)
    for method, url, body, expected in _calls(project):
        response = _send(api, method, url, body)
        if expected is not None:
            if response.status_code != expected:
                checker.mismatches.append(f"{method} {url}: {response.status_code}, expected "
                                          f"{expected}: {response.content[:300]!r}")
        checker.check(method, url, response)
        if response.status_code == 200 and method == "GET":
            _assert_filled_in(project, url, response)
    if project.kind != TaskKind.MC:  # a queued scoring job, cancelled, then cancelled again
        queued = api.post(f"/api/metrics/projects/{project.slug}/scoring-jobs/",
                          {"metrics": ["f1"]}, format="json")
        cancel = f"/api/metrics/projects/{project.slug}/scoring-jobs/{queued.json()[0]['id']}/cancel/"
        for expected in (200, 409):
            response = api.post(cancel)
            assert response.status_code == expected, response.content[:300]
            checker.check("POST", cancel, response)
    # A judge run queued (202), the same POST again answering the run in flight (200), listed,
    # cancelled, then refused as cancelled (409). Nothing is sent: the run is never started.
    judge_version_create(name=f"llm-{project.kind}", config={
        "base_url": "http://127.0.0.1:9", "model": "never-called", "task": project.kind,
        "price": {"prompt_per_million": 1, "completion_per_million": 1}})
    jobs = f"/api/metrics/projects/{project.slug}/judge-jobs/"
    for expected in (202, 200):
        response = api.post(jobs, {"judge": f"llm-{project.kind}", "budget": 1}, format="json")
        assert response.status_code == expected, response.content[:300]
        checker.check("POST", jobs, response)
    checker.check("GET", jobs, api.get(jobs))
    cancel = f"{jobs}{response.json()['id']}/cancel/"
    for expected in (200, 409):
        response = api.post(cancel)
        assert response.status_code == expected, response.content[:300]
        checker.check("POST", cancel, response)
    checker.assert_all_matched()
    # Every GET operation the schema lists was called: a new endpoint is not left out unseen.
    listed = {("GET", path) for path, operations in checker.schema["paths"].items()
              if "get" in operations}
    assert listed - checker.called == set()


def _send(api, method: str, url: str, body):
    """`body` as JSON, or no body at all (None)."""
    send = getattr(api, method.lower())
    return send(url) if body is None else send(url, body, format="json")


def _assert_filled_in(project, url, response) -> None:
    """The answers checked are the full ones: reports name the project and carry their
    kind's sections, the leaderboard ranks the items' systems."""
    if "/leaderboard/" in url:
        assert "system-0" in response.content.decode()
    elif "/spot-checks/" in url:
        assert [row["checked_by"] for row in response.json()["results"]] == [
            project.owner.username, None]
    elif "/report/" in url and "/judges/" not in url:
        assert response.json()["project"] == project.slug
    elif "/metric-report/" in url:
        report = response.json()["report"]
        if project.kind == TaskKind.LIKERT:
            assert set(report["correlations"]) == {"em", "f1", "length"}
        if project.kind == TaskKind.AB:
            assert report["pairwise"]["groups"][0] == "overall"


def test_project_list_creation_scoring_and_bad_requests_match_the_served_schema(researcher_api):
    user, api = researcher_api
    checker = SchemaChecker(_served_schema(api))
    judged_project(TaskKind.LIKERT, user, slug="listed")
    item = {"id": "q1", "question": "Who?", "candidate": "Ann", "references": ["Ann"]}
    calls = [
        ("get", "/api/projects/", None, 200),
        ("get", "/api/projects/?limit=1&offset=1", None, 200),
        ("get", "/api/projects/?limit=0", None, 400),
        ("post", "/api/projects/", {"slug": "new", "title": "New", "kind": "likert"}, 201),
        ("post", "/api/projects/", {"slug": "new", "title": "Again", "kind": "likert"}, 400),
        ("post", "/api/projects/", {"slug": "x", "kind": "nonsense"}, 400),
        ("post", "/api/metrics/score/", {"metrics": ["em", "f1"], "items": [item]}, 200),
        ("post", "/api/metrics/score/", {"metrics": ["nonsense"], "items": [item]}, 400),
        ("post", "/api/metrics/score/", {"metrics": ["em"]}, 400),
        ("get", f"/api/metrics/score-jobs/{10**9}/", None, 404),
        ("post", "/api/projects/listed/items/", {"external_id": "added", "content": item_content(
            TaskKind.LIKERT, 99)}, 201),
        ("post", "/api/projects/listed/items/bulk/", {"items": [
            {"external_id": f"bulk-{n}", "content": item_content(TaskKind.LIKERT, 100 + n)}
            for n in range(2)]}, 201),
    ]
    for method, url, body, expected in calls:
        response = _send(api, method, url, body)
        assert response.status_code == expected, (
            f"{method} {url}: {response.status_code} {response.content[:300]!r}")
        checker.check(method.upper(), url, response)
    # A metric that is not cheap is a job, read back by its id.
    queued = api.post("/api/metrics/score/", {"metrics": ["meteor"], "items": [item]},
                      format="json")
    assert queued.status_code == 202, queued.content[:300]
    checker.check("POST", "/api/metrics/score/", queued)
    job = f"/api/metrics/score-jobs/{queued.json()['id']}/"
    checker.check("GET", job, api.get(job))
    # A body that is not JSON, or not JSON at all: 415 and 400, each documented.
    for data, content_type, expected in ((b"a=1", "application/x-www-form-urlencoded", 415),
                                         (b"{not json", "application/json", 400)):
        response = api.post("/api/projects/", data, content_type=content_type)
        assert response.status_code == expected
        checker.check("POST", "/api/projects/", response)
    # Every 400 has one documented shape: keys mapping to a message, messages or a bulk item's
    # errors; a number or an empty object is no error body.
    assert checker.errors_of_400("POST", "/api/projects/", {"slug": ["taken"]}) == []
    assert checker.errors_of_400("POST", "/api/projects/", {"detail": "JSON parse error"}) == []
    assert checker.errors_of_400("POST", "/api/projects/", {"slug": 1})
    assert checker.errors_of_400("POST", "/api/projects/", {})
    # Without credentials, and as an account that is no researcher.
    for client, expected in ((APIClient(), 401), (_non_researcher(), 403)):
        response = client.get("/api/projects/")
        assert response.status_code == expected
        checker.check("GET", "/api/projects/", response)
    checker.assert_all_matched()


def _non_researcher():
    api = APIClient()
    api.force_authenticate(make_user("plain", staff=False))
    return api


def test_closed_objects_catch_an_undocumented_field():
    """The checker itself: a field the schema does not name fails, a null where the schema
    does not allow one fails, a documented nullable null passes."""
    component = {"type": "object", "properties": {"a": {"type": "integer", "nullable": True}},
                 "required": ["a"]}
    validator = jsonschema.Draft4Validator(_as_json_schema(component))
    assert validator.is_valid({"a": None})
    assert not validator.is_valid({"a": 1, "b": 2})
    assert not validator.is_valid({"a": "1"})


def _ab_project(owner, slug: str, systems, n_items: int = 12):
    """An A/B project of `n_items` items, answer n's systems `systems(n)` (None: no `system`,
    the answer reads as "human"), three workers' votes on each."""
    project = make_project(TaskKind.AB, owner=owner, slug=slug)
    stage = make_stage(project)
    workers = [make_worker() for _ in range(3)]
    items = []
    for n in range(n_items):
        content = {"question": f"q{n}", "evidence": [], "answer_a": {"text": f"one {n}"},
                   "answer_b": {"text": f"two {n}"}}
        for side, system in zip(("answer_a", "answer_b"), systems(n), strict=True):
            if system:
                content[side]["system"] = system
        items.append(make_item(project, domain=f"D{n % 2}", content=content))
        for i, worker in enumerate(workers):
            make_judgment(item=items[-1], stage=stage, worker=worker, choice="AB"[(n + i) % 2])
    return project, items


def test_every_shape_of_leaderboard_matches_the_served_schema(researcher_api, tmp_path):
    """The leaderboard a real project answers besides a full board: no vote between two
    systems (`overall` is {error}), more systems than a board ranks ({error} overall and per
    domain), and an imported judge's `combined` board (humans + judge, with `voters`). The
    schema named none of them: a generated client refused each answer."""
    from metrics_app.services.judges.imports import verdicts_import

    user, api = researcher_api
    checker = SchemaChecker(_served_schema(api))
    unnamed, _ = _ab_project(user, "lb-unnamed", lambda n: (None, None))
    many, _ = _ab_project(user, "lb-many", lambda n: (f"s{n}", f"s{n + 1}"), n_items=110)
    judged, items = _ab_project(user, "lb-judged", lambda n: ("xyz"[n % 3], "yzx"[n % 3]))
    path = tmp_path / "verdicts.jsonl"
    path.write_text("\n".join(json.dumps({"item_id": item.external_id, "verdict": "AB"[n % 2]})
                              for n, item in enumerate(items)), encoding="utf-8")
    verdicts_import(project=judged, path=path, judge="file-judge", version="1")
    seen = set()
    for project in (unnamed, many, judged):
        for url in (f"/api/metrics/projects/{project.slug}/leaderboard/",
                    f"/api/metrics/projects/{project.slug}/report/"):
            response = api.get(url)
            assert response.status_code == 200
            board = response.json().get("leaderboard", response.json())
            seen |= {key for key in ("combined",) if key in board}
            seen |= {"error" for b in (board["overall"], *(board.get("by_domain") or {}).values())
                     if b and "error" in b}
            checker.check("GET", url, response)
    assert seen == {"combined", "error"}
    checker.assert_all_matched()
