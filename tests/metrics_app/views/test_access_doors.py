"""Every door a researcher opens a project's objects through (pages and REST API of both apps):
a researcher the project is not shared with gets exactly the answer a missing slug gets (the
same 404, not a 403 that would tell them the slug exists); its owner, a researcher it is shared
with and a superuser get through. One door is one line in DOORS.

The doors go through annotation/access_selectors.py and metrics_app/access_selectors.py; this
test holds them to it from the outside."""
from __future__ import annotations

import contextlib
from unittest import mock

import pytest
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import TaskKind
from metrics_app.models import ItemScoringJob, ModelStatus, ModelVersion
from testing.factories import make_item, make_judgment, make_project, make_stage, make_user

pytestmark = pytest.mark.django_db

SLUG = "door-project"
MISSING = "no-such-project"

# (method, URL with {slug}/{stage}/{item}/{worker} placeholders, body, status once through).
# A body the door's view refuses after the door (400, or a page's redirect with a message) is
# enough to tell "through the door" from "not found".
DOORS = [
    # annotation REST API
    ("get", "/api/projects/{slug}/", None, 200),
    ("patch", "/api/projects/{slug}/", {}, 200),
    ("get", "/api/projects/{slug}/items/", None, 200),
    ("post", "/api/projects/{slug}/items/", {}, 400),
    ("post", "/api/projects/{slug}/items/bulk/", {}, 400),
    ("get", "/api/projects/{slug}/items/{item}/", None, 200),
    ("get", "/api/projects/{slug}/stages/", None, 200),
    ("post", "/api/projects/{slug}/stages/", {}, 400),
    ("get", "/api/projects/{slug}/stages/{stage}/", None, 200),
    ("patch", "/api/projects/{slug}/stages/{stage}/", {}, 200),
    ("get", "/api/projects/{slug}/stages/{stage}/release-preview/", None, 200),
    ("get", "/api/projects/{slug}/judgments/", None, 200),
    # metrics_app REST API
    ("get", "/api/metrics/projects/{slug}/report/", None, 200),
    ("get", "/api/metrics/projects/{slug}/report/?stage={stage}", None, 200),
    ("get", "/api/metrics/projects/{slug}/leaderboard/", None, 400),  # A/B projects only
    ("get", "/api/metrics/projects/{slug}/metric-report/?n_resamples=0", None, 200),
    ("get", "/api/metrics/projects/{slug}/scoring-jobs/", None, 200),
    ("post", "/api/metrics/projects/{slug}/scoring-jobs/", {}, 400),
    ("get", "/api/metrics/projects/{slug}/judges/report/?resamples=0", None, 200),
    ("get", "/api/metrics/projects/{slug}/judges/plan/", None, 400),  # budget, label_cost
    ("get", "/api/metrics/projects/{slug}/judge-jobs/", None, 200),
    ("post", "/api/metrics/projects/{slug}/judge-jobs/", {}, 400),
    # pages
    ("get", "/metrics/{slug}/cockpit/", None, 200),
    ("get", "/metrics/{slug}/dashboard/", None, 200),
    ("get", "/metrics/{slug}/dashboard/?stage={stage}", None, 200),
    ("get", "/metrics/{slug}/dashboard/workers/{worker}/block/", None, 200),
    ("post", "/metrics/{slug}/dashboard/workers/{worker}/unblock/", {}, 302),
    ("get", "/metrics/{slug}/metrics/", None, 200),
    ("post", "/metrics/{slug}/metrics/compute/", {}, 302),
    ("get", "/metrics/{slug}/metrics/scatter/f1.png", None, 200),
    ("get", "/metrics/{slug}/metrics/roc.png", None, 200),
    ("get", "/metrics/{slug}/judges/", None, 200),
    ("get", "/metrics/{slug}/judges/reliability/judge.png", None, 200),
    ("get", "/metrics/{slug}/adjudicate/", None, 200),
    ("post", "/metrics/{slug}/adjudicate/record/", {}, 302),
]

# The charts draw what their readers return; a project this small has nothing to draw, so the
# readers are stood in for: the door in front of them is what is tested.
CHART_READERS = {
    "metrics_app.views.metrics_page.scatter_points": ([0.5, 0.7], [3, 4], 2),
    "metrics_app.views.metrics_page.roc_curves": (
        {"f1": {"fpr": [0, 1], "tpr": [0, 1], "auc": 0.5, "n": 2}}, False),
    "metrics_app.views.judges_page.cached_judge_alignment_report": {"judges": {"judge": {
        "reliability": [{"mean_probability": 0.5, "observed": 0.5, "n": 2}], "ece": 0.1,
        "ci": {}}}},
}


@pytest.fixture(autouse=True)
def chart_readers():
    with contextlib.ExitStack() as stack:
        for target, answer in CHART_READERS.items():
            stack.enter_context(mock.patch(target, return_value=answer))
        yield


@pytest.fixture
def owner():
    return make_user("owner")


@pytest.fixture
def colleague():
    return make_user("colleague")


@pytest.fixture
def ids(owner, colleague):
    project = make_project(TaskKind.LIKERT, owner=owner, shared_with=[colleague], slug=SLUG)
    item = make_item(project)
    stage = make_stage(project)
    judgment = make_judgment(item=item, stage=stage)
    return {"item": item.pk, "stage": stage.pk, "worker": judgment.worker_id}


def _client(url: str, user):
    client = APIClient() if url.startswith("/api/") else Client()
    if user is not None:  # None: anonymous
        client.force_login(user)
    return client


def _request(method: str, url: str, body, user):
    client = _client(url, user)
    if body is None:
        return getattr(client, method)(url)
    if url.startswith("/api/"):
        return getattr(client, method)(url, body, format="json")
    return getattr(client, method)(url, body)


def _fill(url: str, ids: dict, slug: str) -> str:
    return url.format(slug=slug, **ids)


@pytest.mark.reliability
@pytest.mark.parametrize(("method", "url", "body", "through"), DOORS,
                         ids=[f"{m} {u}" for m, u, _b, _s in DOORS])
def test_a_stranger_gets_what_a_missing_slug_gets(method, url, body, through, ids, owner):
    stranger = make_user("stranger")
    hidden = _request(method, _fill(url, ids, SLUG), body, stranger)
    missing = _request(method, _fill(url, ids, MISSING), body, owner)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.content == missing.content
    if url.startswith("/api/"):
        assert hidden.json() == {"detail": "No such project."}


@pytest.mark.reliability
@pytest.mark.parametrize("who", ["revoked", "annotator", "anonymous"])
@pytest.mark.parametrize(("method", "url", "body", "through"), DOORS,
                         ids=[f"{m} {u}" for m, u, _b, _s in DOORS])
def test_a_revoked_share_an_annotator_and_anonymous_get_what_a_missing_slug_gets(
        method, url, body, through, who, ids, owner, colleague):
    """The other actors of the rule (`projects_visible_to`): a researcher whose share was
    revoked after they opened the project's pages (signed in still), a non-staff account and
    anonymous get at each door what they get for a slug that does not exist: a page's 404 or
    its login redirect, the API's 403 or 401, never a sign that the slug exists."""
    from annotation.models import Project

    user = {"revoked": colleague, "annotator": make_user("annotator", staff=False),
            "anonymous": None}[who]
    if who == "revoked":
        opened = _request("get", f"/metrics/{SLUG}/dashboard/", None, colleague)
        assert opened.status_code == 200
        Project.objects.get(slug=SLUG).shared_with.remove(colleague)
    hidden = _request(method, _fill(url, ids, SLUG), body, user)
    missing = _request(method, _fill(url, ids, MISSING), body, user)
    assert hidden.status_code == missing.status_code
    assert hidden.status_code in (401, 403, 404) or "/login/" in hidden["Location"]
    assert hidden.content.replace(SLUG.encode(), MISSING.encode()) == missing.content
    assert hidden.get("Location", "").replace(SLUG, MISSING) == missing.get("Location", "")


@pytest.mark.parametrize("who", ["owner", "colleague", "superuser"])
@pytest.mark.parametrize(("method", "url", "body", "through"), DOORS,
                         ids=[f"{m} {u}" for m, u, _b, _s in DOORS])
def test_owner_colleague_and_superuser_get_through(method, url, body, through, who, ids, owner,
                                                   colleague):
    user = {"owner": owner, "colleague": colleague,
            "superuser": make_user("root", superuser=True)}[who]
    response = _request(method, _fill(url, ids, SLUG), body, user)
    assert response.status_code == through, response.content[:300]


# --- Doors to objects of no project, or of several ----------------------------------------------


def test_a_model_version_door_answers_a_stranger_as_a_missing_version(owner, colleague):
    project = make_project(TaskKind.LIKERT, owner=owner, shared_with=[colleague], slug=SLUG)
    version = ModelVersion.objects.create(name="lerc", number=1, backbone="b",
                                          status=ModelStatus.TRAINING)
    version.projects.add(project)
    hidden = _request("get", f"/metrics/models/{version.pk}/", None, make_user("stranger"))
    missing = _request("get", f"/metrics/models/{version.pk + 1000}/", None, owner)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.content == missing.content
    for user in (owner, colleague, make_user("root", superuser=True)):
        assert _request("get", f"/metrics/models/{version.pk}/", None, user).status_code == 200


def test_an_item_scoring_job_is_its_requesters_and_a_superusers(owner):
    job = ItemScoringJob.objects.create(metrics=["f1"], items=[], requested_by=owner)
    url = f"/api/metrics/score-jobs/{job.pk}/"
    hidden = _request("get", url, None, make_user("stranger"))
    missing = _request("get", f"/api/metrics/score-jobs/{job.pk + 1000}/", None, owner)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json() == {"detail": "No such scoring job."}
    assert _request("get", url, None, owner).status_code == 200
    assert _request("get", url, None, make_user("root", superuser=True)).status_code == 200
