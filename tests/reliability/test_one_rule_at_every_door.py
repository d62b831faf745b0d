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
    mine = make_project(TaskKind.LIKERT, owner=stranger, slug="strangers-study")
    make_judgment(item=make_item(mine), stage=make_stage(mine))
    users = {"owner": owner, "colleague": colleague, "stranger": stranger,
             "revoked": revoked, "annotator": annotator, "anonymous": None}
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


def _admin_ids():
    return [model._meta.model_name for model, _ in _admins()]


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
    model, model_admin = next((m, a) for m, a in _admins() if m._meta.model_name == model_name)
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
@pytest.mark.parametrize("model_name", _admin_ids())
def test_an_object_page_answers_a_blind_actor_as_a_missing_object(world, actor, view,
                                                                  model_name):
    model = next(m for m, _a in _admins() if m._meta.model_name == model_name)
    obj = world["objects"].get(model_name)
    if obj is None:
        return  # no row of this kind in the world (the list test still walks its admin)
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
    text = _text(response)
    if actor in BLIND:
        assert SECRET not in text, text[:500]


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
    model = next(m for m, _a in _admins() if m._meta.model_name == model_name)
    obj = world["objects"].get(model_name)
    if obj is None:
        return
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
@pytest.mark.parametrize("model_name", _admin_ids())
def test_a_change_form_posted_after_the_share_is_gone_stores_nothing(world, actor, model_name):
    model = next(m for m, _a in _admins() if m._meta.model_name == model_name)
    obj = world["objects"].get(model_name)
    if obj is None:
        return
    client = _client(world, actor)
    before = _fingerprint()
    response = client.post(_url(model, "change", obj.pk), {"note": "mine", "name": "mine",
                                                           "title": "mine"})
    assert response.status_code in (302, 403)
    assert _fingerprint() == before
