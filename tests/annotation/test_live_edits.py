"""What a researcher may change once a stage is published, at every door (the stage form used to
skip publishing): one rule, `annotation.services.stages.stage_edit_errors` for a stage and
`project_edit_errors` for the project settings live stages read, called by the API's PATCH,
the stage admin form, the project page's stage rows and the project admin form.

Before: PATCH judgments_per_item 3 → 10 on a collecting MTurk stage answered 200 and progress
read "0 of 100 judgments" against HITs of 3 assignments (30 at most, never reached); a reward
of $5 showed beside $0.40 HITs; the STARC Latin square could be switched off mid-collection;
a Prolific completion code changed after the study was created; the budget cap went below
the money the published stages commit."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.cost_selectors import project_committed_cost
from annotation.domain.stage_settings import (
    MTURK_AUTO_APPROVAL_DELAY_SECONDS,
    review_window_problem,
)
from annotation.models import Provider, ProviderCall, Stage, StageKind, StageStatus, TaskKind
from annotation.selectors import stage_progress
from annotation.services.stages import settings_guard, stage_publish, stage_settings_problems
from annotation.stage_errors import GuardFailed
from testing.factories import (
    make_hit,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
)
from tests.support.admin_forms import admin_form_as_posted

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.fixture
def owner():
    return make_user("live-owner", superuser=True)


@pytest.fixture
def api(owner):
    client = APIClient()
    client.force_authenticate(owner)
    return client


@pytest.fixture
def study(owner):
    """A Likert project with a collecting qualification (one HIT of 2 gold items for 6 takers)
    and a collecting MTurk trial: 10 items in 5 HITs of 3 assignments at $0.40 (judgments_per_item 3), budget cap $100."""
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2,
                           budget_cap=Decimal("100"), reward_per_hit=Decimal("0.40"))
    items = [make_item(project, group_key=f"p{n // 2}") for n in range(10)]
    gold = [make_item(project, gold={"score": 5}, is_gold_check=True) for _ in range(2)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               provider=Provider.MTURK, status=StageStatus.COLLECTING)
    qualification.items.set(gold)
    make_hit(qualification, items=gold, max_assignments=6, reward=Decimal("0.40"))
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial", provider=Provider.MTURK,
                       judgments_per_item=3, requires_stage=qualification,
                       settings={"n_items": 10, "mturk_hit_type_id": "HT1"})
    trial.items.set(items)
    for n in range(5):
        make_hit(trial, items=items[2 * n:2 * n + 2], max_assignments=3,
                 reward=Decimal("0.40"))
    return project, qualification, trial


def _url(stage: Stage) -> str:
    return f"/api/projects/{stage.project.slug}/stages/{stage.pk}/"


@pytest.mark.parametrize("body,field", [
    ({"judgments_per_item": 10}, "judgments_per_item"),
    ({"reward_per_hit": "5.00"}, "reward_per_hit"),
    ({"requires_stage": None}, "requires_stage"),
    ({"agreement_threshold": 0.9}, "agreement_threshold"),
])
def test_the_api_refuses_what_the_hits_were_built_with_once_published(api, study, body, field):
    _project, _qualification, trial = study
    before = stage_progress(stages=[trial])[trial.pk].wanted
    response = api.patch(_url(trial), body, format="json")
    assert response.status_code == 400
    assert "the stage is collecting" in response.json()[field][0]
    fresh = Stage.objects.get(pk=trial.pk)
    assert (fresh.judgments_per_item, fresh.reward_per_hit, fresh.requires_stage_id,
            fresh.agreement_threshold) == (3, None, trial.requires_stage_id, None)
    assert stage_progress(stages=[fresh])[fresh.pk].wanted == before == 30


def test_a_draft_changes_freely_and_a_live_stage_keeps_its_free_fields(api, study):
    project, qualification, trial = study
    draft = make_stage(project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT,
                       provider=Provider.MTURK)
    response = api.patch(_url(draft), {"judgments_per_item": 10, "reward_per_hit": "0.60",
                                       "agreement_threshold": 0.5,
                                       "requires_stage": qualification.pk,
                                       "settings": {"latin_square": False}}, format="json")
    assert response.status_code == 200, response.json()
    # Name, order, review rules, the pay assumption and unknown keys stay free once live
    # (a settings PATCH replaces the object: the fixed keys are sent back as they are).
    response = api.patch(_url(trial), {
        "name": "trial v2", "order": 7,
        "settings": {"n_items": 10, "seconds_per_item": 30, "note": "typo fixed",
                     "review": {"min_gold_accuracy": 0.8, "auto_reject": True}}},
        format="json")
    assert response.status_code == 200, response.json()
    trial.refresh_from_db()
    assert trial.name == "trial v2" and trial.settings["review"]["auto_reject"] is True
    assert trial.settings["mturk_hit_type_id"] == "HT1"


@pytest.mark.parametrize("settings,key", [
    ({"n_items": 10, "lifetime_seconds": 60}, "lifetime_seconds"),
    ({"n_items": 10, "allow_40pct_fee_tier": True}, "allow_40pct_fee_tier"),
    ({"n_items": 10, "redundancy": {"min": 2}}, "redundancy.min"),
    ({"n_items": 10, "gold_rate": 0.5}, "gold_rate"),
    ({}, "n_items"),  # removing a key is a change too
])
def test_the_api_refuses_settings_the_stage_was_published_with(api, study, settings, key):
    _project, _qualification, trial = study
    response = api.patch(_url(trial), {"settings": settings}, format="json")
    assert response.status_code == 400
    assert any(message.startswith(f"{key}: the stage is collecting")
               for message in response.json()["settings"]), response.json()
    assert Stage.objects.get(pk=trial.pk).settings == {"n_items": 10,
                                                       "mturk_hit_type_id": "HT1"}


def test_the_starc_design_and_the_prolific_code_are_fixed_once_published(api, owner):
    project = make_project(TaskKind.MC, owner=owner)
    for level in ("Ele", "Int", "Adv"):
        make_item(project, design_unit="para-1", text_level=level)
    stage = make_stage(project, kind=StageKind.FULL, provider=Provider.PROLIFIC,
                       settings={"prolific_study_id": "S1", "prolific_completion_code": "C0DE"})
    refused = api.patch(_url(stage), {"settings": {"prolific_completion_code": "C0DE",
                                                   "latin_square": False}}, format="json")
    assert refused.status_code == 400
    assert any("paragraph at several levels" in m for m in refused.json()["settings"])
    refused = api.patch(_url(stage), {"settings": {"prolific_completion_code": "NEW"}},
                        format="json")
    assert refused.status_code == 400
    assert "cannot complete" in refused.json()["settings"][0]
    assert Stage.objects.get(pk=stage.pk).settings == {"prolific_study_id": "S1",
                                                       "prolific_completion_code": "C0DE"}


def test_the_bonus_budget_of_a_live_stage_stays_within_the_cap(api, study):
    project, _qualification, trial = study
    committed = project_committed_cost(project=project)
    over = api.patch(_url(trial), {"settings": {"n_items": 10, "bonus_budget": "500"}},
                     format="json")
    assert over.status_code == 400
    assert "budget cap of $100" in over.json()["settings"][0]
    assert project_committed_cost(project=project) == committed
    within = api.patch(_url(trial), {"settings": {"n_items": 10, "bonus_budget": "5"}},
                       format="json")
    assert within.status_code == 200, within.json()


def test_the_service_refuses_for_any_caller(study):
    from annotation.services.stages import stage_edit_errors, stage_update
    from annotation.stage_errors import StageError

    _project, _qualification, trial = study
    assert set(stage_edit_errors(stage=trial, changes={"judgments_per_item": 10,
                                                       "kind": StageKind.FULL,
                                                       "name": "x"})) == {"judgments_per_item",
                                                                          "kind"}
    with pytest.raises(StageError, match="judgments_per_item"):
        stage_update(stage=trial, data={"judgments_per_item": 10})
    assert Stage.objects.get(pk=trial.pk).judgments_per_item == 3


# --- the project's settings that live stages read --------------------------------------------


def _project_url(project) -> str:
    return f"/api/projects/{project.slug}/"


@pytest.mark.parametrize("body,field", [
    ({"reward_per_hit": "3.00"}, "reward_per_hit"),
    ({"redundancy": {"default": 9}}, "redundancy"),
    ({"items_per_hit": 5}, "items_per_hit"),
    ({"qualification_threshold": 0.2}, "qualification_threshold"),
])
def test_the_api_refuses_project_settings_a_live_stage_reads(api, study, body, field):
    project, _qualification, _trial = study
    response = api.patch(_project_url(project), body, format="json")
    assert response.status_code == 400
    assert "from the project" in response.json()[field][0]
    assert api.patch(_project_url(project), {"title": "Renamed", "instructions": "Read twice."},
                     format="json").status_code == 200


def test_a_project_reward_is_free_when_no_live_stage_takes_it(api, study):
    project, qualification, trial = study
    Stage.objects.filter(pk__in=[qualification.pk, trial.pk]).update(
        reward_per_hit=Decimal("0.40"))
    response = api.patch(_project_url(project), {"reward_per_hit": "0.50"}, format="json")
    assert response.status_code == 200, response.json()


def test_the_budget_cap_never_goes_below_what_is_committed(api, study):
    project, _qualification, _trial = study
    committed = project_committed_cost(project=project)
    assert committed > Decimal("1")
    response = api.patch(_project_url(project), {"budget_cap": "1.00"}, format="json")
    assert response.status_code == 400
    assert f"commit ${committed}" in response.json()["budget_cap"][0]
    project.refresh_from_db()
    assert project.budget_cap == Decimal("100")
    assert api.patch(_project_url(project), {"budget_cap": str(committed)},
                     format="json").status_code == 200
    assert api.patch(_project_url(project), {"budget_cap": None},
                     format="json").status_code == 200


def test_a_starc_bonus_per_correct_answer_stays_within_the_cap(api, owner):
    project = make_project(TaskKind.MC, owner=owner, budget_cap=Decimal("20"))
    items = [make_item(project) for _ in range(4)]
    stage = make_stage(project, kind=StageKind.FULL, provider=Provider.MTURK,
                       reward_per_hit=Decimal("1.00"))
    make_hit(stage, items=items, max_assignments=3, reward=Decimal("1.00"))
    response = api.patch(_project_url(project), {"bonus_per_correct": "5.00"}, format="json")
    assert response.status_code == 400
    assert "budget cap of $20" in response.json()["bonus_per_correct"][0]
    assert api.patch(_project_url(project), {"bonus_per_correct": "0.10"},
                     format="json").status_code == 200
    # The STARC mode a live stage's participants answer in is fixed meanwhile.
    response = api.patch(_project_url(project), {"experiment_mode": "guessing"}, format="json")
    assert response.status_code == 400 and "two protocols" in response.json()[
        "experiment_mode"][0]


# --- the admin doors --------------------------------------------------------------------------


@pytest.fixture
def admin_client_(client, owner):
    client.force_login(owner)
    return client


def test_the_stage_form_refuses_the_same_changes(admin_client_, study):
    _project, _qualification, trial = study
    url = reverse("admin:annotation_stage_change", args=[trial.pk])
    page = admin_client_.get(url)
    refused = admin_client_.post(url, admin_form_as_posted(
        page, judgments_per_item="10", reward_per_hit="5.00", setting__lifetime_seconds="60"))
    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors
    assert "the stage is collecting" in errors["judgments_per_item"][0]
    assert "reward_per_hit" in errors and "setting__lifetime_seconds" in errors
    fresh = Stage.objects.get(pk=trial.pk)
    assert (fresh.judgments_per_item, fresh.reward_per_hit) == (3, None)
    assert "lifetime_seconds" not in fresh.settings
    saved = admin_client_.post(url, admin_form_as_posted(
        page, name="trial renamed", setting__review__min_gold_accuracy="0.8"))
    assert saved.status_code == 302
    fresh.refresh_from_db()
    assert fresh.name == "trial renamed" and fresh.settings["review"] == {
        "min_gold_accuracy": 0.8}


def test_the_starc_design_field_is_refused_on_a_live_stage(admin_client_, owner):
    project = make_project(TaskKind.MC, owner=owner)
    for level in ("Ele", "Int", "Adv"):
        make_item(project, design_unit="para-1", text_level=level)
    stage = make_stage(project, kind=StageKind.FULL)
    url = reverse("admin:annotation_stage_change", args=[stage.pk])
    page = admin_client_.get(url)
    refused = admin_client_.post(url, admin_form_as_posted(page, setting__latin_square="false"))
    assert refused.status_code == 200
    assert "several levels" in refused.context["adminform"].form.errors[
        "setting__latin_square"][0]
    assert Stage.objects.get(pk=stage.pk).settings == {}


def test_the_project_page_refuses_live_changes_in_its_stage_rows_and_settings(admin_client_,
                                                                            study):
    project, _qualification, trial = study
    url = reverse("admin:annotation_project_change", args=[project.pk])
    page = admin_client_.get(url)
    forms_ = page.context["inline_admin_formsets"][0].formset.forms
    row = next(n for n, form in enumerate(forms_) if form.instance.pk == trial.pk)
    for change in ({f"stages-{row}-judgments_per_item": "10"},
                   {f"stages-{row}-kind": StageKind.FULL},
                   {f"stages-{row}-provider": Provider.INHOUSE},
                   {"budget_cap": "1.00"}, {"reward_per_hit": "3.00"}):
        response = admin_client_.post(url, admin_form_as_posted(page, **change))
        assert response.status_code == 200, change
    fresh = Stage.objects.get(pk=trial.pk)
    assert (fresh.judgments_per_item, fresh.kind, fresh.provider) == (3, StageKind.TRIAL,
                                                                      Provider.MTURK)
    project.refresh_from_db()
    assert (project.budget_cap, project.reward_per_hit) == (Decimal("100"), Decimal("0.40"))
    saved = admin_client_.post(url, admin_form_as_posted(
        page, title="Renamed", **{f"stages-{row}-name": "trial 2"}))
    assert saved.status_code == 302
    assert Stage.objects.get(pk=trial.pk).name == "trial 2"


def test_a_published_stage_is_never_deleted_only_closed(admin_client_, study):
    """Deleting a collecting MTurk stage took its HITs' rows, assignments and payment ledger
    with it while the HITs stayed open on MTurk, and dropped its money from the budget."""
    project, qualification, trial = study
    committed = project_committed_cost(project=project)
    delete_url = reverse("admin:annotation_stage_delete", args=[trial.pk])
    assert admin_client_.post(delete_url, {"post": "yes"}).status_code == 403
    bulk = admin_client_.post(reverse("admin:annotation_stage_changelist"), {
        "action": "delete_selected", "_selected_action": [trial.pk, qualification.pk],
        "post": "yes"})
    assert bulk.status_code in (200, 403)
    url = reverse("admin:annotation_project_change", args=[project.pk])
    page = admin_client_.get(url)
    forms_ = page.context["inline_admin_formsets"][0].formset.forms
    row = next(n for n, form in enumerate(forms_) if form.instance.pk == trial.pk)
    response = admin_client_.post(url, admin_form_as_posted(page, **{f"stages-{row}-DELETE":
                                                                     "on"}))
    assert response.status_code == 200
    assert "close it instead" in response.content.decode()
    assert admin_client_.post(reverse("admin:annotation_project_delete", args=[project.pk]),
                              {"post": "yes"}).status_code == 403
    assert Stage.objects.filter(pk__in=[trial.pk, qualification.pk]).count() == 2
    assert trial.hits.count() == 5 and project_committed_cost(project=project) == committed
    draft = make_stage(project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT)
    assert admin_client_.post(reverse("admin:annotation_stage_delete", args=[draft.pk]),
                              {"post": "yes"}).status_code == 302
    assert not Stage.objects.filter(pk=draft.pk).exists()


def test_a_stage_never_moves_to_another_project(admin_client_, study, owner):
    """The API takes a stage's project from its URL, but the stage form let it be picked: a
    collecting MTurk qualification posted with another project moved there, its items, HITs
    and committed money with it (the first project's budget forgot them)."""
    from annotation.services.stages import stage_edit_errors

    project, qualification, trial = study
    other = make_project(TaskKind.LIKERT, owner=owner)
    committed = project_committed_cost(project=project)
    url = reverse("admin:annotation_stage_change", args=[qualification.pk])
    page = admin_client_.get(url)
    admin_client_.post(url, admin_form_as_posted(page, project=str(other.pk), name="moved"))
    fresh = Stage.objects.get(pk=qualification.pk)
    assert (fresh.project_id, fresh.name) == (project.pk, "moved")
    assert project_committed_cost(project=project) == committed
    for stage in (trial, make_stage(project, kind=StageKind.FULL, name="full")):
        assert stage_edit_errors(stage=stage, changes={"project": other}) == {
            "project": "cannot be changed after the stage is created"}


def test_a_live_stages_items_are_refused_with_one_message_at_every_door(admin_client_, api,
                                                                        study):
    """The API said "the stage is collecting", the stage form "the stage is Collecting" and
    the service "<project> / trial is collecting" for one rule."""
    from annotation.services.stage_plans import stage_items_select
    from annotation.stage_errors import StageError

    _project, _qualification, trial = study
    expected = "the stage is collecting: its items are fixed once it is published"
    response = api.patch(_url(trial), {"items": {"count": 2}}, format="json")
    assert response.status_code == 400 and response.json()["items"] == [expected]
    url = reverse("admin:annotation_stage_change", args=[trial.pk])
    refused = admin_client_.post(url, admin_form_as_posted(
        admin_client_.get(url), item_choice="filter", item_count="2"))
    assert refused.context["adminform"].form.errors["item_choice"] == [expected]
    with pytest.raises(StageError) as error:
        stage_items_select(stage=trial, count=2)
    assert str(error.value) == expected
    assert trial.items.count() == 10


def test_a_published_stages_hits_are_never_deleted_nor_their_items_changed(admin_client_,
                                                                           study):
    """The stage was kept from deletion, but its HITs were not: the HIT page deleted a
    collecting MTurk stage's HIT (open on MTurk, nobody reviewing it) and the committed money
    went with it; its item rows could be swapped or removed after publish."""
    project, _qualification, trial = study
    hit = trial.hits.order_by("pk").first()
    committed = project_committed_cost(project=project)
    assert admin_client_.post(reverse("admin:annotation_hit_delete", args=[hit.pk]),
                              {"post": "yes"}).status_code == 403
    admin_client_.post(reverse("admin:annotation_hit_changelist"), {
        "action": "delete_selected", "_selected_action": [hit.pk], "post": "yes"})
    assert trial.hits.count() == 5 and project_committed_cost(project=project) == committed
    url = reverse("admin:annotation_hit_change", args=[hit.pk])
    page = admin_client_.get(url)
    before = list(hit.hititem_set.order_by("position").values_list("item_id", flat=True))
    other = trial.items.exclude(pk__in=before).first()
    admin_client_.post(url, admin_form_as_posted(page, **{
        "hititem_set-0-item": str(other.pk), "hititem_set-1-DELETE": "on"}))
    assert list(hit.hititem_set.order_by("position").values_list("item_id", flat=True)) \
        == before


def test_the_number_of_likert_labels_is_fixed_while_a_stage_collects(api, study):
    project, _qualification, _trial = study
    five = list(project.scale_labels)
    reworded = [f"{label}!" for label in five]
    assert api.patch(_project_url(project), {"scale_labels": reworded},
                     format="json").status_code == 200
    response = api.patch(_project_url(project), {"scale_labels": reworded[:3]}, format="json")
    assert response.status_code == 400
    assert "scale of 1 to 5" in response.json()["scale_labels"][0]
    project.refresh_from_db()
    assert project.scale_labels == reworded


def test_the_project_page_makes_no_imported_stage_by_hand(admin_client_, study):
    project, _qualification, _trial = study
    url = reverse("admin:annotation_project_change", args=[project.pk])
    page = admin_client_.get(url)
    formset = page.context["inline_admin_formsets"][0].formset
    n = formset.total_form_count()
    data = admin_form_as_posted(page, **{
        "stages-TOTAL_FORMS": str(n + 1), f"stages-{n}-name": "sneaky",
        f"stages-{n}-kind": StageKind.IMPORTED, f"stages-{n}-provider": Provider.IMPORT,
        f"stages-{n}-order": "9", f"stages-{n}-judgments_per_item": "",
        f"stages-{n}-project": str(project.pk)})
    response = admin_client_.post(url, data)
    assert response.status_code == 200
    assert not project.stages.filter(name="sneaky").exists()


def test_stages_that_never_built_hits_commit_only_what_they_paid(api, owner):
    """An imported stage of 30 judged items committed $3.60 of phantom HITs; a qualification
    closed as a draft made every budget check raise (a 500 on the budget cap, a confusing
    refusal when publishing another stage)."""
    project = make_project(TaskKind.LIKERT, owner=owner, budget_cap=Decimal("100"))
    imported = make_stage(project, kind=StageKind.IMPORTED, provider=Provider.IMPORT,
                          status=StageStatus.CLOSED)
    for _ in range(30):
        make_judgment(item=make_item(project), stage=imported)
    assert project_committed_cost(project=project) == Decimal("0")
    make_stage(project, kind=StageKind.QUALIFICATION, provider=Provider.MTURK,
               status=StageStatus.CLOSED)
    assert project_committed_cost(project=project) == Decimal("0")
    response = api.patch(_project_url(project), {"budget_cap": "10"}, format="json")
    assert response.status_code == 200, response.content


def test_a_live_prolific_stage_saves_unchanged_whatever_the_order_of_its_filters(
        admin_client_, owner):
    """The page rebuilds prolific_filters (screeners after the others): a save that changes
    nothing must not read as a change of the study's filters."""
    screener = {"filter_id": "approval_rate", "selected_range": {"lower": 95, "upper": 100}}
    other = {"filter_id": "handedness", "selected_values": ["1"]}
    stage = make_stage(make_project(TaskKind.LIKERT, owner=owner), provider=Provider.PROLIFIC,
                       settings={"prolific_study_id": "S1", "prolific_filters": [screener,
                                                                                 other]})
    url = reverse("admin:annotation_stage_change", args=[stage.pk])
    page = admin_client_.get(url)
    response = admin_client_.post(url, admin_form_as_posted(page, name="renamed",
                                                           setting__devices=[]))
    assert response.status_code == 302, response.context["adminform"].form.errors
    changed = admin_client_.post(url, admin_form_as_posted(
        page, screener__approval_rate_min="99", setting__devices=[]))
    assert changed.status_code == 200
    assert "prolific_filters" in str(changed.context["adminform"].form.errors)


def _new_rows(page, project, rows: list[dict]) -> dict:
    formset = page.context["inline_admin_formsets"][0].formset
    n = formset.total_form_count()
    changes = {"stages-TOTAL_FORMS": str(n + len(rows))}
    for offset, row in enumerate(rows):
        k = n + offset
        changes.update({f"stages-{k}-name": row["name"], f"stages-{k}-kind": row["kind"],
                        f"stages-{k}-provider": Provider.INHOUSE, f"stages-{k}-order": "9",
                        f"stages-{k}-judgments_per_item": "",
                        f"stages-{k}-project": str(project.pk)})
    return admin_form_as_posted(page, **changes)


@pytest.mark.parametrize("rows,message", [
    ([{"name": "trial", "kind": StageKind.FULL}], "already has a stage named"),
    ([{"name": "second qual", "kind": StageKind.QUALIFICATION}], "qualification stage"),
    ([{"name": "full", "kind": StageKind.FULL}, {"name": "full", "kind": StageKind.FULL}],
     "already has a stage named"),
])
def test_the_project_pages_stage_rows_keep_the_stage_rules_of_every_door(admin_client_, study,
                                                                         rows, message):
    """A stage's name is unique in its project and a project has one qualification stage: the
    API and the stage form refused these, the project page's stage rows saved them (also two
    new rows of one name in a single save)."""
    project, _qualification, _trial = study
    url = reverse("admin:annotation_project_change", args=[project.pk])
    page = admin_client_.get(url)
    n_before = project.stages.count()
    response = admin_client_.post(url, _new_rows(page, project, rows))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert project.stages.count() == n_before
    api = APIClient()
    api.force_authenticate(project.owner)
    refused = api.post(f"/api/projects/{project.slug}/stages/",
                       {"name": rows[0]["name"], "kind": rows[0]["kind"],
                        "provider": Provider.INHOUSE}, format="json")
    if len(rows) == 1:  # the same rule at the API
        assert refused.status_code == 400 and message in str(refused.json())


@pytest.mark.reliability
def test_a_draft_stage_that_a_published_stage_requires_is_not_deleted(admin_client_, owner):
    """A live stage's requirement was one delete away: deleting the draft qualification it
    requires set `requires_stage` to null, and the stage then served workers who never
    passed. The delete button, the bulk delete and the project page's rows refuse it."""
    from annotation.services.stages import stage_delete_refusal

    project = make_project(TaskKind.LIKERT, owner=owner)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.DRAFT)
    gated = make_stage(project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT)
    gated.requires_stage = qualification
    gated.save(update_fields=["requires_stage"])
    assert stage_delete_refusal(qualification) == ""  # both drafts: nothing is open yet
    Stage.objects.filter(pk=gated.pk).update(status=StageStatus.COLLECTING)
    why = stage_delete_refusal(qualification)
    assert why == ("stage 'qual' is required by collecting stage 'full': deleting it would "
                   "open that stage to workers who never passed it")
    delete_url = reverse("admin:annotation_stage_delete", args=[qualification.pk])
    assert admin_client_.post(delete_url, {"post": "yes"}).status_code == 403
    admin_client_.post(reverse("admin:annotation_stage_changelist"), {
        "action": "delete_selected", "_selected_action": [qualification.pk], "post": "yes"})
    url = reverse("admin:annotation_project_change", args=[project.pk])
    page = admin_client_.get(url)
    forms_ = page.context["inline_admin_formsets"][0].formset.forms
    row = next(n for n, form in enumerate(forms_) if form.instance.pk == qualification.pk)
    response = admin_client_.post(url, admin_form_as_posted(page, **{f"stages-{row}-DELETE":
                                                                     "on"}))
    assert "deleting it would open that stage" in response.content.decode()
    assert Stage.objects.get(pk=gated.pk).requires_stage_id == qualification.pk


# --- the review window: MTurk's auto-approval must not overtake the review -----------------
# MTurk approves and pays whatever is still undecided `auto_approval_delay_seconds` after it was
# submitted (3 days by default), and the review decides nothing before
# `review.approve_after_seconds` (it neither holds nor rejects sooner). A wait as long as the delay
# left every submission to MTurk's approval, which the sync mirrors: gold-failing work paid,
# counted in the data and no longer rejectable. One rule
# (`annotation/domain/stage_settings.py:review_window_problem`, through `stage_settings_errors`
# with the stage's provider) at every door that sets a stage's settings — the API's create and
# PATCH, the stage form (a draft, and a live stage's review rules, which stay editable) — and at
# publishing, for settings saved through the shell.
#
# Before: an MTurk trial with `"review": {"approve_after_seconds": 300000}` (a bit more than
# three days, "time for my spot checks") saved at every door and published; MTurk approved every
# submission before the review's first decision.

THREE_DAYS = MTURK_AUTO_APPROVAL_DELAY_SECONDS


def _live_mturk_trial(owner, **settings):
    """A collecting MTurk trial of 2 items in one HIT of 3 assignments, with `settings`."""
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2,
                           reward_per_hit=Decimal("0.40"))
    items = [make_item(project, group_key="p0") for _ in range(2)]
    stage = make_stage(project, kind=StageKind.TRIAL, name="trial", provider=Provider.MTURK,
                       status=StageStatus.COLLECTING, judgments_per_item=3,
                       settings={"n_items": 2, "mturk_hit_type_id": "HT1", **settings})
    stage.items.set(items)
    make_hit(stage, items=items, max_assignments=3, reward=Decimal("0.40"))
    return stage


@pytest.fixture
def mturk_trial(owner):
    """A collecting MTurk trial (its HIT type created with the default 3-day auto-approval)."""
    return _live_mturk_trial(owner, review={"approve_after_seconds": 3600})


SYNC = 300  # the provider sync's period the rule is given (QAJ_PROVIDER_SYNC_SECONDS)


@pytest.mark.parametrize("settings,provider,refused", [
    ({"review": {"approve_after_seconds": THREE_DAYS}}, Provider.MTURK, True),
    ({"review": {"approve_after_seconds": THREE_DAYS - SYNC}}, Provider.MTURK, True),
    ({"review": {"approve_after_seconds": THREE_DAYS - SYNC - 1}}, Provider.MTURK, False),
    ({"review": {"approve_after_seconds": 10**6},
      "auto_approval_delay_seconds": 2592000}, Provider.MTURK, False),
    ({"review": {"approve_after_seconds": 60}, "auto_approval_delay_seconds": 60},
     Provider.MTURK, True),
    # MTurk pays before the review's first run (it runs with the sync): no wait is no help.
    ({"review": {"approve_after_seconds": 0}, "auto_approval_delay_seconds": 0},
     Provider.MTURK, True),
    ({"review": {"auto_reject": True}, "auto_approval_delay_seconds": 0}, Provider.MTURK, True),
    ({"auto_approval_delay_seconds": SYNC}, Provider.MTURK, True),
    ({"auto_approval_delay_seconds": SYNC + 1}, Provider.MTURK, False),
    ({"review": {"approve_after_seconds": 30}, "auto_approval_delay_seconds": 60},
     Provider.MTURK, True),
    ({"review": {"approve_after_seconds": 30}, "auto_approval_delay_seconds": SYNC + 31},
     Provider.MTURK, False),
    ({"auto_approval_delay_seconds": 0}, Provider.PROLIFIC, False),
    ({"review": {"approve_after_seconds": 10**6}}, Provider.PROLIFIC, False),
    ({"review": {"approve_after_seconds": 10**6}}, Provider.INHOUSE, False),
    ({"review": {"approve_after_seconds": "soon"}}, Provider.MTURK, False),  # the field's own
])
def test_the_review_window_rule(settings, provider, refused):
    assert bool(review_window_problem(settings, provider=provider,
                                      sync_seconds=SYNC)) is refused


@pytest.mark.django_db
@pytest.mark.parametrize("period,refused", [(300.0, True), (30.0, False)])
def test_every_door_reads_the_sync_period_from_the_settings(settings, owner, api, period,
                                                            refused):
    """A 60 s auto-approval delay with a 10 s review wait: MTurk pays before a sync run every
    300 s reviews anything, so the API, the stage form's rule and publishing refuse it; with
    the sync every 30 s the review runs in time (`stage_settings_problems`)."""
    settings.QAJ_PROVIDER_SYNC_SECONDS = period
    window = {"review": {"approve_after_seconds": 10}, "auto_approval_delay_seconds": 60}
    assert bool(stage_settings_problems(window, provider=Provider.MTURK)) is refused
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2,
                           reward_per_hit=Decimal("0.40"))
    created = api.post(f"/api/projects/{project.slug}/stages/",
                       {"name": "full", "kind": "full", "provider": "mturk",
                        "settings": window}, format="json")
    assert (created.status_code == 400) is refused, created.json()
    for _ in range(2):
        make_item(project, group_key="p0")
    draft = make_stage(project, kind=StageKind.TRIAL, name="trial", provider=Provider.MTURK,
                       status=StageStatus.DRAFT, settings={"n_items": 2, "locales": [], **window})
    if refused:
        with pytest.raises(GuardFailed, match="QAJ_PROVIDER_SYNC_SECONDS"):
            settings_guard(stage=draft)
    else:
        settings_guard(stage=draft)


def test_the_api_refuses_a_wait_mturk_approval_overtakes_on_create_and_on_a_live_stage(
        api, mturk_trial):
    trial = mturk_trial
    url = f"/api/projects/{trial.project.slug}/stages/"
    created = api.post(url, {"name": "full", "kind": "full", "provider": "mturk",
                             "settings": {"review": {"approve_after_seconds": 300000}}},
                       format="json")
    assert created.status_code == 400
    assert "auto_approval_delay_seconds" in " ".join(created.json()["settings"])
    assert not Stage.objects.filter(project=trial.project, name="full").exists()
    # The same wait under a longer auto-approval delay, or on Prolific, is fine.
    assert api.post(url, {"name": "full", "kind": "full", "provider": "mturk",
                          "settings": {"review": {"approve_after_seconds": 300000},
                                       "auto_approval_delay_seconds": 600000}},
                    format="json").status_code == 201
    assert api.post(url, {"name": "pilot", "kind": "pilot", "provider": "prolific",
                          "settings": {"review": {"approve_after_seconds": 300000}}},
                    format="json").status_code == 201
    # A live stage's review rules stay editable, within the window its HIT type was made with.
    live = f"{url}{trial.pk}/"
    refused = api.patch(live, {"settings": {"n_items": 2, "review": {
        "approve_after_seconds": THREE_DAYS}}}, format="json")
    assert refused.status_code == 400, refused.json()
    assert Stage.objects.get(pk=trial.pk).settings["review"] == {"approve_after_seconds": 3600}
    assert api.patch(live, {"settings": {"n_items": 2, "review": {
        "approve_after_seconds": 7200}}}, format="json").status_code == 200


def test_the_stage_form_refuses_a_review_wait_mturk_approval_overtakes(admin_client_,
                                                                       mturk_trial):
    client, trial = admin_client_, mturk_trial
    url = reverse("admin:annotation_stage_change", args=[trial.pk])
    page = client.get(url)
    refused = client.post(url, admin_form_as_posted(
        page, setting__review__approve_after_seconds=str(THREE_DAYS + 1)))
    assert refused.status_code == 200
    form = refused.context["adminform"].form
    assert "auto_approval_delay_seconds" in str(form.errors), form.errors
    assert Stage.objects.get(pk=trial.pk).settings["review"] == {"approve_after_seconds": 3600}
    saved = client.post(url, admin_form_as_posted(
        page, setting__review__approve_after_seconds="7200"))
    assert saved.status_code == 302
    assert Stage.objects.get(pk=trial.pk).settings["review"] == {"approve_after_seconds": 7200}


def test_publishing_refuses_a_review_wait_mturk_approval_overtakes(owner):
    project = make_project(TaskKind.LIKERT, owner=owner, items_per_hit=2,
                           reward_per_hit=Decimal("0.40"))
    for _ in range(2):
        make_item(project, group_key="p0")
    stage = make_stage(project, kind=StageKind.TRIAL, name="trial", provider=Provider.MTURK,
                       status=StageStatus.DRAFT,
                       settings={"n_items": 2, "locales": [],
                                 "review": {"approve_after_seconds": 10**6}})
    with pytest.raises(GuardFailed, match="auto_approval_delay_seconds"):
        stage_publish(stage=stage, user=owner)
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.hits.exists()
    assert "approve_after_seconds" in stage.publish_problem
    assert not ProviderCall.objects.filter(stage=stage).exists()


def test_a_live_stage_published_under_an_older_window_rule_can_still_be_edited(
        admin_client_, api, owner):
    """From the review: a collecting MTurk stage published with a 240 s auto-approval delay
    (valid before the sync period joined the rule, or under a shorter sync period) could be
    saved no more: renaming it on the form, or changing its review's other rules through the
    API, was refused with the window's error, and the delay that would fix it is fixed once
    published. The window is asked again only when an edit changes the wait or the delay."""
    live = _live_mturk_trial(owner, auto_approval_delay_seconds=240)
    url = reverse("admin:annotation_stage_change", args=[live.pk])
    renamed = admin_client_.post(url, admin_form_as_posted(admin_client_.get(url),
                                                           name="renamed"))
    assert renamed.status_code == 302, renamed.context["adminform"].form.errors
    base = {"n_items": 2, "auto_approval_delay_seconds": 240}
    edited = api.patch(_url(live), {"settings": {**base, "review": {"min_gold_accuracy": 0.8}}},
                       format="json")
    assert edited.status_code == 200, edited.json()
    # A wait the delay cannot cover is refused all the same.
    waited = api.patch(_url(live), {"settings": {**base, "review": {
        "approve_after_seconds": 60}}}, format="json")
    assert waited.status_code == 400 and "Shorten the wait" in str(waited.json())
