"""One rule at every door: who may see and change a project's things
(`annotation/access_selectors.py:projects_visible_to`), held against every admin door for six
actors. The doors are enumerated from the admin site itself (every registered model's list,
change, delete and history pages, every list filter's choices, every autocomplete a foreign key
of a registered model can ask for, every selected-object action), so a door added later is
checked without a new line here.

Actors: the project's owner, a researcher it is shared with, a researcher it is not shared with
(who owns a project of their own), a researcher whose share was revoked after they opened the
pages, a non-staff account and anonymous. One who may not see the project gets what a missing
object gets (the admin's "does not exist" redirect for a page, no row in a list or a filter) and
never reads one of the project's names; the pages and the API are held to the same rule by
`tests/metrics_app/views/test_access_doors.py`.
"""
from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.test import Client
from django.urls import reverse

from annotation.models import (
    Adjudication,
    ProviderCall,
    SpotCheck,
    StageTransition,
    TaskKind,
    WorkerQualification,
)
from metrics_app.models import (
    MetricScore,
    ModelStatus,
    ModelVersion,
    Report,
    ScoringJob,
)
from testing.factories import (
    make_assignment,
    make_hit,
    make_inhouse_link,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

# Every name of the owner's project carries this marker: a page that shows it to an actor who
# may not see the project leaked it.
SECRET = "zqsecret"

# The stranger's own project (shared with the revoked researcher too): the doors below are
# opened through it with ids of the owner's things.
MINE = "strangers-study"

# The admins' models the world holds a row of (the others' lists and filters are walked).
WORLD_MODELS = ("project", "item", "stage", "worker", "hit", "assignment", "judgment",
                "workerqualification", "inhouselink", "adjudication", "spotcheck",
                "providercall", "stagetransition", "metricscore", "report", "scoringjob",
                "modelversion")

SEES = ("owner", "colleague")
BLIND = ("stranger", "revoked")
OUTSIDERS = ("annotator", "anonymous")


@pytest.fixture
def world():
    owner, colleague = make_user("owner"), make_user("colleague")
    stranger, revoked = make_user("stranger"), make_user("revoked")
    annotator = make_user("annotator", staff=False)
    project = make_project(TaskKind.LIKERT, owner=owner, shared_with=[colleague, revoked],
                           slug=f"{SECRET}-study", title=f"{SECRET} study")
    item = make_item(project, external_id=f"{SECRET}-item", dataset=f"{SECRET}-dataset",
                     source=f"{SECRET}-source", domain=f"{SECRET}-domain")
    qualification = make_stage(project, kind="qualification", name=f"{SECRET} qualification")
    stage = make_stage(project, name=f"{SECRET} stage", requires_stage=qualification)
    worker = make_worker(external_id=f"{SECRET}-worker", display_name=f"{SECRET} Ann")
    assignment = make_assignment(stage, worker=worker, items=[item],
                                 external_id=f"{SECRET}-assignment")
    hit = make_hit(stage, items=[item], external_id=f"{SECRET}-hit")
    judgment = make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                             justification=f"{SECRET} justification")
    objects = {
        "project": project, "item": item, "stage": stage, "worker": worker, "hit": hit,
        "assignment": assignment, "judgment": judgment,
        "workerqualification": WorkerQualification.objects.create(
            worker=worker, stage=qualification, passed=True, score=1.0),
        "inhouselink": make_inhouse_link(worker=worker, project=project, stage=stage),
        "adjudication": Adjudication.objects.create(item=item, score=3,
                                                    note=f"{SECRET} note", decided_by=owner),
        "spotcheck": SpotCheck.objects.create(judgment=judgment, verdict="ok",
                                              note=f"{SECRET} check", checked_by=owner),
        "providercall": ProviderCall.objects.create(
            provider=stage.provider, operation="approve", key=f"{SECRET}-call",
            token=f"{SECRET}-token", stage=stage, assignment=assignment, worker=worker),
        "stagetransition": StageTransition.objects.create(
            stage=stage, from_status="draft", to_status="collecting", reason=f"{SECRET} why"),
        "metricscore": MetricScore.objects.create(item=item, metric="f1", version=SECRET,
                                                  value=0.5),
        "report": Report.objects.create(project=project, kind="project", data={}),
        "scoringjob": ScoringJob.objects.create(project=project, metrics=["f1"],
                                                task_id=f"{SECRET}-task"),
        "modelversion": ModelVersion.objects.create(name="lerc", number=1,
                                                    backbone=f"{SECRET}-backbone",
                                                    status=ModelStatus.TRAINING),
    }
    objects["modelversion"].projects.add(project)
    # A change message in the history, written as the admin writes one.
    LogEntry.objects.log_actions(
        user_id=owner.pk, queryset=[stage], action_flag=CHANGE,
        change_message=f"Changed name to {SECRET} stage.", single_object=True)
    # The stranger's own project, so their pages are not empty by construction.
    mine = make_project(TaskKind.LIKERT, owner=stranger, slug=MINE, shared_with=[revoked])
    my_item, my_stage = make_item(mine), make_stage(mine)
    my_worker = make_worker()
    make_judgment(item=my_item, stage=my_stage, worker=my_worker,
                  assignment=make_assignment(my_stage, worker=my_worker, items=[my_item]))
    make_hit(make_stage(mine, status="draft"), items=[my_item])
    make_inhouse_link(worker=my_worker, project=mine, stage=my_stage)
    users = {"owner": owner, "colleague": colleague, "stranger": stranger,
             "revoked": revoked, "annotator": annotator, "anonymous": None}
    assert set(objects) == set(WORLD_MODELS)
    return {"users": users, "objects": objects, "project": project}


def _client(world, actor: str, *, revoke: bool = True) -> Client:
    client = Client()
    user = world["users"][actor]
    if user is not None:
        client.force_login(user)
    if actor == "revoked" and revoke:
        # The share is revoked after they opened the pages: the session stays signed in.
        assert client.get(reverse("admin:annotation_project_changelist")).status_code == 200
        world["project"].shared_with.remove(user)
    return client


def _admins():
    return [(model, model_admin) for model, model_admin in admin.site._registry.items()
            if model._meta.app_label in ("annotation", "metrics_app")]


def _admin_ids(*, with_object: bool = False):
    """The registered admins' model names; `with_object`: those the world holds a row of."""
    return [model._meta.model_name for model, _ in _admins()
            if not with_object or model._meta.model_name in WORLD_MODELS]


def _admin_of(model_name: str):
    return next((m, a) for m, a in _admins() if m._meta.model_name == model_name)


def _url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _text(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


def _login_redirect(response) -> bool:
    return response.status_code == 302 and "/login/" in response["Location"]


# --- Lists and their filters --------------------------------------------------------------------


@pytest.mark.parametrize("actor", [*SEES, *BLIND, *OUTSIDERS])
@pytest.mark.parametrize("model_name", _admin_ids())
def test_a_changelist_and_its_filters_name_only_visible_projects(world, actor, model_name):
    model, model_admin = _admin_of(model_name)
    client = _client(world, actor)
    response = client.get(_url(model, "changelist"), {"_facets": "1"})
    if actor in OUTSIDERS:
        assert _login_redirect(response), response.status_code
        return
    assert response.status_code == 200
    text = _text(response)
    if actor in BLIND:
        assert SECRET not in text, _around(text)
        return
    obj = world["objects"].get(model_name)
    if obj is not None and model_admin.has_view_permission(_request_of(world, actor)):
        assert obj.pk in {row.pk for row in response.context["cl"].result_list}


def _request_of(world, actor):
    from django.test import RequestFactory

    request = RequestFactory().get("/")
    request.user = world["users"][actor]
    return request


def _around(text: str) -> str:
    at = text.find(SECRET)
    return text[max(0, at - 300):at + 100]


# --- Object pages -------------------------------------------------------------------------------


OBJECT_VIEWS = ("change", "delete", "history")


@pytest.mark.parametrize("actor", [*BLIND, *OUTSIDERS])
@pytest.mark.parametrize("view", OBJECT_VIEWS)
@pytest.mark.parametrize("model_name", _admin_ids(with_object=True))
def test_an_object_page_answers_a_blind_actor_as_a_missing_object(world, actor, view,
                                                                  model_name):
    model, _model_admin = _admin_of(model_name)
    obj = world["objects"][model_name]
    client = _client(world, actor)
    hidden = client.get(_url(model, view, obj.pk))
    missing = client.get(_url(model, view, obj.pk + 10_000))
    assert hidden.status_code == missing.status_code, (hidden.status_code, missing.status_code)
    if actor in OUTSIDERS:
        assert _login_redirect(hidden)
        return
    # The admin's "does not exist" redirect, or its 403 where the page is no one's to open.
    assert hidden.status_code in (302, 403)
    if hidden.status_code == 302:
        assert hidden["Location"] == missing["Location"]
        hidden = client.get(hidden["Location"])
    assert SECRET not in _text(hidden), _around(_text(hidden))


# --- Autocomplete -------------------------------------------------------------------------------


def _autocomplete_doors():
    """Every (source admin, relation) the autocomplete view answers: a foreign key or many-to-
    many of a registered model whose target has a registered admin with search fields."""
    doors = []
    for model, _model_admin in _admins():
        for field in model._meta.get_fields():
            if not (field.is_relation and field.concrete and (field.many_to_one
                                                              or field.many_to_many)):
                continue
            target_admin = admin.site._registry.get(field.related_model)
            if target_admin is None or not target_admin.search_fields:
                continue
            doors.append((model._meta.app_label, model._meta.model_name, field.name))
    return doors


@pytest.mark.parametrize("actor", [*SEES, *BLIND, *OUTSIDERS])
@pytest.mark.parametrize(("app_label", "model_name", "field_name"), _autocomplete_doors(),
                         ids=["-".join(d) for d in _autocomplete_doors()])
def test_an_autocomplete_offers_only_visible_projects_things(world, actor, app_label,
                                                             model_name, field_name):
    client = _client(world, actor)
    response = client.get("/admin/autocomplete/", {
        "app_label": app_label, "model_name": model_name, "field_name": field_name,
        "term": ""})
    if actor in OUTSIDERS:
        assert _login_redirect(response), response.status_code
        return
    model = apps.get_model(app_label, model_name)
    target = model._meta.get_field(field_name).related_model
    if not admin.site._registry[target].has_view_permission(_request_of(world, actor)):
        assert response.status_code == 403  # accounts: a superuser's to list
        return
    assert response.status_code == 200
    text = _text(response)
    if actor in BLIND:
        assert SECRET not in text, text[:500]
        return
    secret = next((obj for obj in world["objects"].values() if type(obj) is target), None)
    if secret is not None:
        assert str(secret.pk) in {row["id"] for row in response.json()["results"]}


# --- Writes: actions and change forms ------------------------------------------------------------


def _fingerprint() -> dict:
    """Every stored row of both apps and the admin's log: what a refused write left alone."""
    models = [*apps.get_app_config("annotation").get_models(),
              *apps.get_app_config("metrics_app").get_models(), LogEntry]
    return {model._meta.label: sorted(map(repr, model._default_manager.values_list()))
            for model in models}


def _action_doors():
    from django.test import RequestFactory

    doors = []
    for model, model_admin in _admins():
        request = RequestFactory().get("/")
        request.user = _SuperuserStandIn()
        if model._meta.model_name not in WORLD_MODELS:
            continue
        for name in model_admin.get_actions(request):
            doors.append((model._meta.model_name, name))
    return doors


class _SuperuserStandIn:
    """Who lists the actions at collection time (no database yet): every action a superuser
    is offered, so none is left out."""

    is_active = is_staff = is_superuser = is_authenticated = True
    pk = id = None

    def has_perm(self, *args, **kwargs):
        return True


@pytest.mark.parametrize("actor", BLIND)
@pytest.mark.parametrize(("model_name", "action"), _action_doors(),
                         ids=["-".join(d) for d in _action_doors()])
def test_an_action_on_another_researchers_object_does_nothing_and_names_nothing(
        world, actor, model_name, action):
    model, _model_admin = _admin_of(model_name)
    obj = world["objects"][model_name]
    client = _client(world, actor)
    before = _fingerprint()
    response = client.post(_url(model, "changelist"), {
        "action": action, "_selected_action": [obj.pk], "index": 0, "reason": f"{SECRET}x",
        "amount": "1.00", "publish_confirmed": "yes", "confirm_send": "yes",
        "message_subject": "s", "message_body": "b"}, follow=True)
    assert response.status_code in (200, 403)
    assert SECRET not in _text(response).replace(f"{SECRET}x", ""), _around(_text(response))
    assert _fingerprint() == before


@pytest.mark.parametrize("actor", BLIND)
@pytest.mark.parametrize("model_name", _admin_ids(with_object=True))
def test_a_change_form_posted_after_the_share_is_gone_stores_nothing(world, actor, model_name):
    model, _model_admin = _admin_of(model_name)
    obj = world["objects"][model_name]
    client = _client(world, actor)
    before = _fingerprint()
    response = client.post(_url(model, "change", obj.pk), {"note": "mine", "name": "mine",
                                                           "title": "mine"})
    assert response.status_code in (302, 403)
    assert _fingerprint() == before


# --- Objects named by id in a posted form --------------------------------------------------------


def _choice_fields(model_admin, request, obj):
    """(where, field) for every model choice of the admin's form and its inlines' forms: what a
    posted id is checked against."""
    from django.forms import ModelChoiceField

    forms = [("form", model_admin.get_form(request, obj))]
    forms += [(type(inline).__name__, inline.get_formset(request, obj).form)
              for inline in model_admin.get_inline_instances(request, obj)]
    return [(f"{where}.{name}", field) for where, form in forms
            for name, field in form.base_fields.items() if isinstance(field, ModelChoiceField)]


@pytest.mark.parametrize("actor", BLIND)
@pytest.mark.parametrize("model_name", _admin_ids())
def test_a_form_accepts_no_id_of_another_researchers_object(world, actor, model_name, rf):
    """Every foreign key a researcher's add or change form takes (the admin's own or an
    inline's) is checked against the rows they may see: an id of the owner's stage, item,
    worker or project posted by hand is "not one of the available choices"."""
    model, model_admin = _admin_of(model_name)
    _client(world, actor)  # the revoked share is gone
    request = rf.get("/")
    request.user = world["users"][actor]
    secret = {type(obj): obj for obj in world["objects"].values()}
    own = model_admin.get_queryset(request).first()
    pages = [None] if model_admin.has_add_permission(request) else []
    if own is not None and model_admin.has_change_permission(request, own):
        pages.append(own)
    for obj in pages:
        for where, field in _choice_fields(model_admin, request, obj):
            hidden = secret.get(field.queryset.model)
            if hidden is not None:
                assert not field.queryset.filter(pk=hidden.pk).exists(), (obj, where)


# --- The admin's own views and "view on site" ----------------------------------------------------


STANDARD_VIEWS = ("changelist", "add", "history", "delete", "change")


def _custom_object_views():
    """(model name, URL name, method) of every view an admin adds under one object's id."""
    doors = []
    for model, model_admin in _admins():
        for pattern in model_admin.get_urls():
            name = pattern.name or ""
            if not name or any(name.endswith(f"_{view}") for view in STANDARD_VIEWS):
                continue
            if not pattern.pattern.converters:
                continue  # no object in the URL (a new project's import)
            for method in ("get", "post"):
                doors.append((model._meta.model_name, name, method))
    return doors


@pytest.mark.parametrize("actor", [*BLIND, *OUTSIDERS])
@pytest.mark.parametrize(("model_name", "url_name", "method"), _custom_object_views(),
                         ids=["-".join(d) for d in _custom_object_views()])
def test_an_admin_view_of_another_researchers_object_answers_as_a_missing_one(
        world, actor, model_name, url_name, method):
    obj = world["objects"][model_name]
    client = _client(world, actor)
    before = _fingerprint()
    body = {"decision": "approve", "confirm": "1"} if method == "post" else None
    hidden = getattr(client, method)(reverse(f"admin:{url_name}", args=[obj.pk]), body)
    missing = getattr(client, method)(reverse(f"admin:{url_name}", args=[obj.pk + 10_000]),
                                      body)
    assert _fingerprint() == before
    if actor in OUTSIDERS:
        assert _login_redirect(hidden) and _login_redirect(missing)
        return
    assert hidden.status_code == missing.status_code == 404
    assert _text(hidden) == _text(missing)


@pytest.mark.parametrize("actor", [*BLIND, *OUTSIDERS])
@pytest.mark.parametrize("model_name", _admin_ids(with_object=True))
def test_view_on_site_tells_nothing_of_another_researchers_object(world, actor, model_name):
    obj = world["objects"][model_name]
    from django.contrib.contenttypes.models import ContentType

    type_id = ContentType.objects.get_for_model(type(obj)).pk
    client = _client(world, actor)
    hidden = client.get(reverse("admin:view_on_site", args=[type_id, obj.pk]))
    missing = client.get(reverse("admin:view_on_site", args=[type_id, obj.pk + 10_000]))
    assert hidden.status_code == missing.status_code
    assert _text(hidden) == _text(missing)
    assert SECRET not in _text(hidden) and SECRET not in hidden.get("Location", "")


# --- Pages and the API: another project's ids through a project one may see ----------------------


# (method, URL, body): {mine} is a project the actor sees, the other placeholders the owner's
# objects' ids. Each answers exactly as it does for an id that exists nowhere.
CROSS_DOORS = [
    ("get", "/api/projects/{mine}/items/{item}/", None),
    ("get", "/api/projects/{mine}/stages/{stage}/", None),
    ("patch", "/api/projects/{mine}/stages/{stage}/", {"name": "x"}),
    ("get", "/api/projects/{mine}/stages/{stage}/release-preview/", None),
    ("post", "/api/projects/{mine}/stages/", {"name": "gated", "kind": "full",
                                             "requires_stage": "{stage}"}),
    ("get", "/api/projects/{mine}/judgments/?stage={stage}", None),
    ("get", "/api/metrics/projects/{mine}/report/?stage={stage}", None),
    ("post", "/api/metrics/projects/{mine}/scoring-jobs/{scoringjob}/cancel/", {}),
    ("get", "/metrics/{mine}/dashboard/?stage={stage}", None),
    ("get", "/metrics/{mine}/dashboard/workers/{worker}/block/", None),
    ("post", "/metrics/{mine}/dashboard/workers/{worker}/block/", {"confirm": "1"}),
    ("post", "/metrics/{mine}/dashboard/workers/{worker}/unblock/", {}),
    ("post", "/metrics/{mine}/adjudicate/record/", {"item": "{item}", "label": "3"}),
    ("get", "/metrics/{mine}/spot-check/?stage={stage}", None),
    ("post", "/metrics/{mine}/spot-check/record/", {"judgment": "{judgment}",
                                                   "verdict": "problem"}),
    ("post", "/metrics/{mine}/metrics/jobs/{scoringjob}/cancel/", {}),
]


def _fill(template, ids: dict):
    if isinstance(template, dict):
        return {key: _fill(value, ids) for key, value in template.items()}
    if not isinstance(template, str):
        return template
    filled = template.format(mine=MINE, **ids)
    return int(filled) if filled.isdigit() and template != filled and "/" not in filled else filled


def _send(client, method, url, body):
    if url.startswith("/api/"):
        return getattr(client, method)(url, body, content_type="application/json")
    return getattr(client, method)(url, body) if body is not None else getattr(client, method)(url)


@pytest.mark.parametrize("actor", BLIND)
@pytest.mark.parametrize(("method", "url", "body"), CROSS_DOORS,
                         ids=[f"{m} {u}" for m, u, _b in CROSS_DOORS])
def test_another_projects_id_through_ones_own_project_is_a_missing_id(world, actor, method,
                                                                     url, body):
    objects = world["objects"]
    hidden_ids = {name: obj.pk for name, obj in objects.items()}
    missing_ids = {name: pk + 10_000 for name, pk in hidden_ids.items()}
    client = _client(world, actor)
    before = _fingerprint()
    hidden = _send(client, method, _fill(url, hidden_ids), _fill(body, hidden_ids))
    after_hidden = _fingerprint()
    missing = _send(client, method, _fill(url, missing_ids), _fill(body, missing_ids))
    assert after_hidden == before
    assert hidden.status_code == missing.status_code, (hidden.status_code, _text(hidden)[:300])
    assert hidden.status_code in (400, 404)
    text = _text(hidden)
    assert SECRET not in text, _around(text)
    # The same answer, but for the id the request named.
    for name in re.findall(r"{(\w+)}", f"{url} {body}"):
        if name != "mine":
            text = re.sub(rf"\b{hidden_ids[name]}\b", str(missing_ids[name]), text)
    assert text == _text(missing)


# --- A worker both researchers' projects share ---------------------------------------------------


@pytest.mark.parametrize("actor", BLIND)
@pytest.mark.parametrize("view", ["change", "history", "changelist"])
def test_a_shared_worker_shows_a_blind_researcher_nothing_of_the_other_project(world, actor,
                                                                             view):
    """A crowd worker who judged in the owner's project and in the actor's own: the actor
    reaches the worker, and the page counts and names only their own project's work."""
    from annotation.models import Stage

    worker = make_worker(external_id="shared-worker")
    project = world["project"]
    make_judgment(item=world["objects"]["item"], stage=world["objects"]["stage"], worker=worker,
                  assignment=make_assignment(world["objects"]["stage"], worker=worker,
                                             items=[world["objects"]["item"]]))
    mine = Stage.objects.filter(project__slug=MINE).first()
    make_judgment(item=mine.project.items.first(), stage=mine, worker=worker)
    assert project.slug.startswith(SECRET)
    client = _client(world, actor)
    args = () if view == "changelist" else (worker.pk,)
    response = client.get(_url(worker._meta.model, view, *args))
    assert response.status_code == 200
    assert SECRET not in _text(response), _around(_text(response))


@pytest.mark.parametrize("actor", [*SEES, *BLIND, "superuser"])
def test_a_shared_workers_history_lists_only_the_entries_of_the_actors_fellow_researchers(
        world, actor):
    """A crowd worker of the owner's project and of the stranger's own: the worker's history
    page lists the entries written by the viewer and by the researchers of the projects they
    see (`researchers_beside`), never another study's researcher by name with what they
    changed (the whole log was listed before)."""
    from django.contrib.auth import get_user_model

    from annotation.models import Stage

    worker = make_worker(external_id="shared-worker")
    make_judgment(item=world["objects"]["item"], stage=world["objects"]["stage"], worker=worker)
    mine = Stage.objects.filter(project__slug=MINE).first()
    make_judgment(item=mine.project.items.first(), stage=mine, worker=worker)
    users = world["users"]
    for author, message in ((users["owner"], f"Changed email ({SECRET} study)."),
                            (users["stranger"], "Changed display name (strangers-entry).")):
        LogEntry.objects.log_actions(user_id=author.pk, queryset=[worker], action_flag=CHANGE,
                                     change_message=message, single_object=True)
    if actor == "superuser":
        client = Client()
        client.force_login(get_user_model().objects.create_superuser("root", password="x-pw"))
    else:
        client = _client(world, actor)
    response = client.get(_url(worker._meta.model, "history", worker.pk))
    assert response.status_code == 200
    text = _text(response)
    # The owner's colleague and a superuser read the owner's entry; the stranger, and the
    # researcher whose share of the owner's project was revoked, read the stranger's.
    assert (SECRET in text) == (actor in (*SEES, "superuser")), _around(text)
    assert ("strangers-entry" in text) == (actor in ("stranger", "revoked", "superuser"))
