"""One rule at every door of a stage's lifecycle: each transition and each change of what a live
stage was published with, tried through every door that offers it on one fixture — the REST
API, the stage admin form, the project page (its form and its stage rows), the admin's list
actions, the Celery tasks and the beat's sync — is allowed everywhere or refused everywhere,
with the same reason (the service's own words), and nothing is stored where it is refused.

The fixture is an MTurk trial published by `stage_publish` against the local MTurk server (a
real boto3 client), so "live" means HITs on the provider, not a status typed into a row."""
from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import (
    Hit,
    HitStatus,
    Provider,
    ProviderCall,
    Stage,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.services.stages import stage_close, stage_publish, stage_reopen_if_slots_free
from testing.factories import make_item, make_project, make_stage, make_user
from tests.support.admin_forms import admin_form_as_posted

pytestmark = [pytest.mark.django_db, pytest.mark.reliability, pytest.mark.mturk]


@pytest.fixture
def owner():
    return make_user("door-owner", superuser=True)


@pytest.fixture
def api(owner):
    client = APIClient()
    client.force_authenticate(owner)
    return client


@pytest.fixture
def admin(client, owner):
    client.force_login(owner)
    return client


def _open_to_all() -> dict:
    """The settings of a stage of the fixture's project, which has a qualification stage: open
    to every worker on purpose (`open_to_every_worker`), as the doors tried here do not gate."""
    return {"locales": [], "open_to_every_worker": True}


@pytest.fixture
def live(owner, mturk_server):
    """A Likert project ($0.40 a HIT of 2 items, 2 judgments an item, gold rate 0, budget cap
    $100) with a draft MTurk qualification and an MTurk trial of 4 items, open to every worker,
    published on the local MTurk server: collecting, its HITs there."""
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2,
                           redundancy={"default": 2}, reward_per_hit=Decimal("0.40"),
                           budget_cap=Decimal("100"), gold_rate=0.0)
    items = [make_item(project, group_key=f"p{n}") for n in range(4)]
    make_item(project, gold={"score": 5}, is_gold_check=True)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.DRAFT, provider=Provider.MTURK)
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial", status=StageStatus.DRAFT,
                       provider=Provider.MTURK, settings=_open_to_all())
    trial.items.set(items)
    stage_publish(stage=trial, user=owner)
    trial.refresh_from_db()
    assert trial.status == StageStatus.COLLECTING
    assert len(mturk_server.state.hits) == trial.hits.count() > 0
    return project, qualification, trial


def _form_errors(response) -> list[str]:
    """Every error of the admin page in `response` (the main form's and its inline rows'), a
    settings key's as "KEY: why" on the settings box or as why on its typed field."""
    if response.status_code == 302:
        return []
    errors = [why for messages in response.context["adminform"].form.errors.values()
              for why in messages]
    for inline in response.context.get("inline_admin_formsets", []):
        errors += [why for form in inline.formset.forms for messages in form.errors.values()
                   for why in messages]
        errors += list(inline.formset.non_form_errors())
    return errors


def _api_errors(response) -> list[str]:
    if response.status_code < 400:
        return []
    return [why for messages in response.json().values()
            for why in (messages if isinstance(messages, list) else [messages])]


def _reason(errors: list[str], key: str) -> str:
    """The one refusal of `errors`, the settings key `key` ("KEY: ") taken off its front."""
    assert len(errors) == 1, errors
    why = errors[0]
    return why[len(key) + 2:] if key and why.startswith(f"{key}: ") else why


# --- what a live stage was published with: the stage's own fields and settings ----------------

# name → (the API's body, the stage form's fields, the settings key or "") for the same change.
STAGE_CHANGES: dict[str, tuple[Callable, Callable, str]] = {
    "pay (reward per HIT)": (lambda q, s: {"reward_per_hit": "5.00"},
                             lambda q, s: {"reward_per_hit": "5.00"}, ""),
    "redundancy (judgments per item)": (lambda q, s: {"judgments_per_item": 5},
                                        lambda q, s: {"judgments_per_item": "5"}, ""),
    "qualification (required stage)": (lambda q, s: {"requires_stage": q.pk},
                                       lambda q, s: {"requires_stage": str(q.pk)}, ""),
    "agreement gate": (lambda q, s: {"agreement_threshold": 0.9},
                       lambda q, s: {"agreement_threshold": "0.9"}, ""),
    "gold rate": (lambda q, s: {"settings": {**s.settings, "gold_rate": 0.5}},
                  lambda q, s: {"setting__gold_rate": "0.5"}, "gold_rate"),
    "HIT lifetime (provider setting)": (
        lambda q, s: {"settings": {**s.settings, "lifetime_seconds": 60}},
        lambda q, s: {"setting__lifetime_seconds": "60"}, "lifetime_seconds"),
    "items": (lambda q, s: {"items": {"count": 1}},
              lambda q, s: {"item_choice": "filter", "item_count": "1"}, ""),
}


def _stored(stage: Stage) -> tuple:
    fresh = Stage.objects.get(pk=stage.pk)
    return (fresh.status, fresh.reward_per_hit, fresh.judgments_per_item,
            fresh.requires_stage_id, fresh.agreement_threshold, fresh.settings,
            sorted(fresh.items.values_list("pk", flat=True)))


@pytest.mark.parametrize("change", list(STAGE_CHANGES))
def test_a_live_stages_published_terms_are_refused_alike_at_every_door(api, admin, live,
                                                                      change):
    project, qualification, trial = live
    api_body, form_fields, key = STAGE_CHANGES[change]
    before = _stored(trial)
    reasons = {}
    response = api.patch(f"/api/projects/{project.slug}/stages/{trial.pk}/",
                         api_body(qualification, trial), format="json")
    reasons["api PATCH"] = _reason(_api_errors(response), key)
    url = reverse("admin:annotation_stage_change", args=[trial.pk])
    response = admin.post(url, admin_form_as_posted(admin.get(url),
                                                    **form_fields(qualification, trial)))
    reasons["stage form"] = _reason(_form_errors(response), key)
    if change == "redundancy (judgments per item)":  # the one such field the rows show
        url = reverse("admin:annotation_project_change", args=[project.pk])
        page = admin.get(url)
        row = next(n for n, form in enumerate(page.context["inline_admin_formsets"][0]
                                              .formset.forms) if form.instance.pk == trial.pk)
        response = admin.post(url, admin_form_as_posted(
            page, **{f"stages-{row}-judgments_per_item": "5"}))
        reasons["project page row"] = _reason(_form_errors(response), key)
    assert len(set(reasons.values())) == 1, reasons
    assert next(iter(reasons.values())).startswith("the stage is collecting"), reasons
    assert _stored(trial) == before


# --- what a live stage reads from its project ----------------------------------------------

PROJECT_CHANGES = {
    "pay (project reward)": ("reward_per_hit", "5.00", "5.00"),
    "redundancy (project)": ("redundancy", {"default": 5}, '{"default": 5}'),
    "gold rate (project)": ("gold_rate", 0.5, "0.5"),
    "items per HIT": ("items_per_hit", 4, "4"),
    "qualification tolerance": ("qualification_tolerance", 2, "2"),
}


@pytest.mark.parametrize("change", list(PROJECT_CHANGES))
def test_project_settings_a_live_stage_reads_are_refused_alike_at_every_door(api, admin, live,
                                                                            change):
    project, _qualification, _trial = live
    field, api_value, form_value = PROJECT_CHANGES[change]
    before = getattr(project, field)
    reasons = {}
    response = api.patch(f"/api/projects/{project.slug}/", {field: api_value}, format="json")
    reasons["api PATCH"] = _reason(_api_errors(response), "")
    url = reverse("admin:annotation_project_change", args=[project.pk])
    response = admin.post(url, admin_form_as_posted(admin.get(url), **{field: form_value}))
    reasons["project form"] = _reason(_form_errors(response), "")
    assert len(set(reasons.values())) == 1, reasons
    assert "stage 'trial' is collecting" in reasons["api PATCH"]
    project.refresh_from_db()
    assert getattr(project, field) == before


# --- status: only publish, close, extend and the sync's review move it ---------------------


def test_status_is_never_written_directly_at_any_door(api, admin, live):
    project, _qualification, trial = live
    response = api.patch(f"/api/projects/{project.slug}/stages/{trial.pk}/",
                         {"status": StageStatus.CLOSED}, format="json")
    assert response.status_code == 400 and "status" in response.json()
    response = api.post(f"/api/projects/{project.slug}/stages/",
                        {"name": "full", "kind": StageKind.FULL, "provider": Provider.MTURK,
                         "status": StageStatus.COLLECTING}, format="json")
    assert response.status_code == 400 and "status" in response.json()
    url = reverse("admin:annotation_stage_change", args=[trial.pk])
    response = admin.post(url, admin_form_as_posted(admin.get(url), status=StageStatus.DRAFT,
                                                    name="trial renamed"))
    assert response.status_code == 302  # saved, its status ignored (not a field)
    trial.refresh_from_db()
    assert (trial.name, trial.status) == ("trial renamed", StageStatus.COLLECTING)
    assert list(trial.transitions.values_list("to_status", flat=True)) == [
        StageStatus.PUBLISHED, StageStatus.COLLECTING]


def _admin_action(admin, action: str, stage: Stage) -> list[str]:
    response = admin.post(reverse("admin:annotation_stage_changelist"), {
        "action": action, "_selected_action": [str(stage.pk)], "index": "0"}, follow=True)
    return [str(m) for m in response.context["messages"]]


def _celery_publish(stage: Stage) -> str:
    from worker.tasks.providers import stage_publish as task

    try:
        task(stage.pk)
    except Exception as exc:  # noqa: BLE001 - the refusal is what is compared
        return str(exc)
    return ""


def _refusal_in(messages: list[str], stage: Stage, what: str) -> str:
    lines = [m for m in messages if m.startswith(f"{stage}: {what} — ")]
    assert len(lines) == 1, messages
    return lines[0].partition(" — ")[2]


def test_a_stage_with_nothing_to_release_is_published_at_no_door(admin, live, mturk_server):
    project, _qualification, _trial = live
    empty = make_project(TaskKind.LIKERT, owner=project.owner, items_per_hit=2)
    stage = make_stage(empty, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT,
                       provider=Provider.MTURK, settings={"locales": []})
    reasons = {"admin Publish": _refusal_in(_admin_action(admin, "publish_stages", stage),
                                            stage, "not published"),
               "Celery task": _celery_publish(stage)}
    assert len(set(reasons.values())) == 1 and "item" in reasons["Celery task"], reasons
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.hits.exists()
    assert stage.publish_problem == f"publish refused: {reasons['Celery task']}"
    assert len(mturk_server.state.hits) == Hit.objects.count()  # the fixture's, no more


def test_a_closed_stage_is_reopened_at_no_door(admin, live, mturk_server, owner):
    _project, _qualification, trial = live
    stage_close(stage=trial, user=owner, reason="done")
    reasons = {
        "admin Publish": _refusal_in(_admin_action(admin, "publish_stages", trial), trial,
                                     "not published"),
        "Celery task": _celery_publish(trial),
    }
    assert len(set(reasons.values())) == 1 and "closed" in reasons["Celery task"], reasons
    extended = _admin_action(admin, "extend_stages", trial)
    assert _refusal_in(extended, trial, "not extended").endswith(
        "only a live stage can be extended")
    # The sync's review reopens a reviewing stage only; a closed one stays closed.
    assert stage_reopen_if_slots_free(stage=trial, actor="sync", reoffered=2) is False
    trial.refresh_from_db()
    assert trial.status == StageStatus.CLOSED
    assert trial.transitions.order_by("-pk").first().to_status == StageStatus.CLOSED


def test_publishing_from_two_doors_creates_the_hits_once(admin, live, mturk_server):
    """The admin's Publish, then the Celery task (a background publish queued before, or a
    retry): the second finds every HIT created (a resume) and creates nothing on MTurk."""
    project, _qualification, _trial = live
    full = make_stage(project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT,
                      provider=Provider.MTURK, settings=_open_to_all())
    full.items.set(make_item(project, group_key=f"f{n}") for n in range(2))
    shown = _admin_action(admin, "publish_stages", full)
    built = Hit.objects.filter(stage=full).count()
    assert any(m.startswith(f"{full}: Collecting; {built} HITs created, 0 already there")
               for m in shown), shown
    from worker.tasks.providers import stage_publish as task

    assert task(full.pk) == {"created": 0, "failed": 0, "status": StageStatus.COLLECTING}
    assert Hit.objects.filter(stage=full).count() == built
    assert ProviderCall.objects.filter(stage=full,
                                       operation="CreateHITWithHITType").count() == built
    assert len(mturk_server.state.hits) == Hit.objects.count()


def test_a_stage_closed_while_its_hits_are_being_created_keeps_none_open(admin, live,
                                                                        mturk_server,
                                                                        monkeypatch):
    """The admin's Close while the background publish (the Celery task) is creating the HITs on
    MTurk, between its first HIT and the rest: the close expired what was there, the publish
    went on creating the others, and the closed stage kept HITs open on MTurk, taking work
    nobody would review. The publish stops creating once the stage is closed and expires
    what it created; the close expires what was created while it closed."""
    project, _qualification, _trial = live
    full = make_stage(project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT,
                      provider=Provider.MTURK, settings=_open_to_all())
    full.items.set(make_item(project, group_key=f"f{n}") for n in range(6))
    provider, closed = mturk_server.provider, []
    publish_stage = provider.publish_stage

    def close_after_the_first_hit(*, stage):
        for outcome in publish_stage(stage=stage):
            yield outcome
            if not closed:
                closed.append(_admin_action(admin, "close_stages", full))

    monkeypatch.setattr(provider, "publish_stage", close_after_the_first_hit)
    from worker.tasks.providers import stage_publish as task

    result = task(full.pk)
    assert closed and closed[0] == [f"{full}: closed"], closed
    full.refresh_from_db()
    assert result["status"] == full.status == StageStatus.CLOSED
    on_mturk = [mturk_server.state.hits[hit.external_id] for hit in full.hits.all()
                if hit.external_id]
    assert on_mturk, "the first HIT was created"
    assert Hit.objects.filter(stage=full, status="open").count() == 0
    now = timezone.now().timestamp()
    assert all(float(hit["Expiration"]) <= now for hit in on_mturk), on_mturk


def test_a_stage_closed_while_it_is_being_extended_keeps_no_hit_open(admin, live, mturk_server,
                                                                    monkeypatch):
    """The admin's Close while "Extend by one day" (a second tab) is moving the HITs' expiry
    on MTurk: the extend went on with the HITs after the close expired them, and the closed
    stage had HITs open for another day. The extend expires again whatever it reopened on a
    stage closed meanwhile."""
    _project, _qualification, trial = live
    provider, closed = mturk_server.provider, []
    extend_stage = provider.extend_stage

    def close_after_the_first_hit(*, stage, seconds):
        for outcome in extend_stage(stage=stage, seconds=seconds):
            yield outcome
            if not closed:
                closed.append(_admin_action(admin, "close_stages", trial))

    monkeypatch.setattr(provider, "extend_stage", close_after_the_first_hit)
    shown = _admin_action(admin, "extend_stages", trial)
    assert closed and closed[0] == [f"{trial}: closed"], closed
    trial.refresh_from_db()
    assert trial.status == StageStatus.CLOSED, shown
    assert Hit.objects.filter(stage=trial, status="open").count() == 0
    now = timezone.now().timestamp()
    on_mturk = [mturk_server.state.hits[hit.external_id] for hit in trial.hits.all()]
    assert len(on_mturk) > 1 and all(float(hit["Expiration"]) <= now for hit in on_mturk)


def test_closing_twice_closes_once_and_says_so(admin, live, mturk_server, owner, monkeypatch):
    """Close clicked twice (two tabs, a double click whose second request ran while the first
    was expiring the HITs on MTurk): the second answered in red "cannot go from closed to
    closed; allowed: none" although the stage was closed as asked. One close is logged, the
    second sends nothing and says the stage is already closed (`stage_close`)."""
    _project, _qualification, trial = live
    assert _admin_action(admin, "close_stages", trial) == [f"{trial}: closed"]
    calls = ProviderCall.objects.count()
    assert _admin_action(admin, "close_stages", trial) == [f"{trial}: already closed"]
    assert ProviderCall.objects.count() == calls

    # The second close arrives while the first is expiring the HITs on the provider.
    full = make_stage(trial.project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT,
                      provider=Provider.MTURK, settings=_open_to_all())
    full.items.set(make_item(trial.project, group_key=f"f{n}") for n in range(4))
    stage_publish(stage=full, user=owner)
    provider, inner = mturk_server.provider, []
    expire_stage = provider.expire_stage

    def second_close_meanwhile(*, stage):
        yield from expire_stage(stage=stage)
        if not inner:
            inner.append("second tab")
            stage_close(stage=Stage.objects.get(pk=stage.pk), user=owner, reason="second tab")

    monkeypatch.setattr(provider, "expire_stage", second_close_meanwhile)
    assert _admin_action(admin, "close_stages", full) == [f"{full}: closed"]
    full.refresh_from_db()
    assert full.status == StageStatus.CLOSED
    assert full.transitions.filter(to_status=StageStatus.CLOSED).count() == 1
    assert Hit.objects.filter(stage=full, status="open").count() == 0


def test_closing_again_expires_a_hit_the_first_close_left_open(admin, live, mturk_server,
                                                               monkeypatch):
    """The close's second expire (of a HIT a background publish created meanwhile) refused by
    MTurk ("Rate exceeded"): the stage is closed with one HIT still open on MTurk, and Close
    clicked again answered "already closed" and sent nothing, so the HIT stayed open for
    good (nothing else expires a closed stage's HITs). Close asked again expires it and says
    so; the stage's close is logged once, and a third click sends nothing (`stage_close`)."""
    _project, _qualification, trial = live
    provider = mturk_server.provider
    expire_stage, calls = provider.expire_stage, []

    def throttled_second_expire(*, stage):
        calls.append(stage.pk)
        if len(calls) == 2:  # the close's `_hits_opened_meanwhile_expire`
            raise RuntimeError("Rate exceeded")
        yield from expire_stage(stage=stage)
        if len(calls) == 1:  # a background publish opened one more HIT meanwhile
            reopened = trial.hits.first()
            mturk_server.state.hits[reopened.external_id]["Expiration"] = (
                timezone.now().timestamp() + 3600)
            Hit.objects.filter(pk=reopened.pk).update(status=HitStatus.OPEN)

    monkeypatch.setattr(provider, "expire_stage", throttled_second_expire)
    shown = _admin_action(admin, "close_stages", trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.CLOSED, shown
    left_open = trial.hits.get(status=HitStatus.OPEN)

    assert _admin_action(admin, "close_stages", trial) == [
        f"{trial}: already closed; expired 1 HIT(s) left open"]
    assert not trial.hits.filter(status=HitStatus.OPEN).exists()
    on_mturk = mturk_server.state.hits[left_open.external_id]
    assert float(on_mturk["Expiration"]) <= timezone.now().timestamp()
    assert trial.transitions.filter(to_status=StageStatus.CLOSED).count() == 1

    sent = ProviderCall.objects.count()
    assert _admin_action(admin, "close_stages", trial) == [f"{trial}: already closed"]
    assert ProviderCall.objects.count() == sent
    assert len(calls) == 3
    assert trial.transitions.filter(to_status=StageStatus.CLOSED).count() == 1


def test_extending_twice_at_once_reopens_a_reviewing_stage_once(admin, live, mturk_server,
                                                                owner, monkeypatch):
    """"Extend by one day" on a reviewing stage, clicked in a second tab while the first was
    moving the HITs' expiry on MTurk: both extended the HITs, the first took the stage back to
    collecting, and the second answered in red "not extended — cannot go from collecting to
    collecting" although its day was added. The move back to collecting is made under the
    stage's row lock, once (`stage_extend`)."""
    from annotation.services.stages import stage_extend, stage_transition

    _project, _qualification, trial = live
    stage_transition(stage=trial, to_status=StageStatus.REVIEWING, actor="test",
                     reason="collection complete")
    provider, inner = mturk_server.provider, []
    extend_stage = provider.extend_stage

    def second_extend_meanwhile(*, stage, seconds):
        yield from extend_stage(stage=stage, seconds=seconds)
        if not inner:
            inner.append("second tab")
            stage_extend(stage=Stage.objects.get(pk=stage.pk), seconds=seconds, user=owner)

    monkeypatch.setattr(provider, "extend_stage", second_extend_meanwhile)
    shown = _admin_action(admin, "extend_stages", trial)
    assert shown == [f"Extended 1 stage(s) by one day: {trial}."], shown
    trial.refresh_from_db()
    assert trial.status == StageStatus.COLLECTING
    assert trial.transitions.filter(from_status=StageStatus.REVIEWING,
                                    to_status=StageStatus.COLLECTING).count() == 1
