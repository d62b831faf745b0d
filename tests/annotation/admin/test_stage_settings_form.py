"""Stage settings on the admin page as typed fields: only those of the project's kind and the
stage's provider, bad values refused with what is wrong, and a save as the browser posts it keeps
every key without a field (on a published stage of 1,458 items too)."""
from __future__ import annotations

import pytest
from django import forms
from django.urls import reverse

from annotation.models import Item, Provider, StageStatus, TaskKind
from testing.factories import make_item, make_project, make_stage, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client):
    client.force_login(make_user(superuser=True))
    return client


def _url(stage):
    return reverse("admin:annotation_stage_change", args=[stage.pk])


def _page_form(client, stage):
    response = client.get(_url(stage))
    assert response.status_code == 200
    return response, response.context["adminform"].form


def _as_posted(form, **changes) -> dict:
    """What a browser posts for the rendered form, with `changes` ("settings", the advanced
    box, or a setting's key without the setting__ prefix, dots as __)."""
    data = {}
    for bound in form:
        value = bound.value()
        if isinstance(bound.field.widget, forms.NullBooleanSelect):
            value = {True: "true", False: "false"}.get(value, "unknown")
        if isinstance(value, list | tuple):
            data[bound.html_name] = [str(v) for v in value]
        else:
            data[bound.html_name] = "" if value is None else str(value)
    for name, value in changes.items():
        data[name if name == "settings" else f"setting__{name}"] = value
    return data


def _fields(form) -> set[str]:
    return {name.removeprefix("setting__").replace("__", ".") for name in form.fields
            if name.startswith("setting__")}


def test_the_page_shows_the_settings_of_the_projects_kind_and_the_stages_provider(admin_client_):
    likert = make_stage(make_project(TaskKind.LIKERT), provider=Provider.MTURK,
                        status=StageStatus.DRAFT)
    page, form = _page_form(admin_client_, likert)
    shown = _fields(form)
    assert {"routing", "routing_budget", "min_approval_rate", "locales", "keywords",
            "redundancy.min", "review.auto_reject", "title"} <= shown
    assert not shown & {"latin_square", "estimated_minutes", "devices", "prolific_project_id"}
    html = page.content.decode()
    assert 'name="setting__min_approval_rate"' in html and "Minimum approval rate" in html
    assert "Workers need at least this approval rate" in html  # the help text
    assert 'name="setting__latin_square"' not in html and "Latin square" not in html

    starc = make_stage(make_project(TaskKind.MC), provider=Provider.PROLIFIC,
                       status=StageStatus.DRAFT)
    page, form = _page_form(admin_client_, starc)
    shown = _fields(form)
    assert {"latin_square", "estimated_minutes", "devices", "items_per_assignment"} <= shown
    assert not shown & {"routing", "min_approval_rate", "keywords", "allow_40pct_fee_tier"}
    assert 'name="setting__routing"' not in page.content.decode()

    ab = make_stage(make_project(TaskKind.AB), provider=Provider.INHOUSE,
                    status=StageStatus.DRAFT)
    shown = _fields(_page_form(admin_client_, ab)[1])
    assert "review.min_gold_accuracy" in shown
    assert not shown & {"routing", "latin_square", "title", "keywords", "estimated_minutes"}

    # The add page: what applies everywhere, or what the link's project and provider take.
    add = reverse("admin:annotation_stage_add")
    shown = _fields(admin_client_.get(add).context["adminform"].form)
    assert "gold_rate" in shown and not shown & {"routing", "latin_square", "keywords"}
    shown = _fields(admin_client_.get(
        f"{add}?project={likert.project_id}&provider=mturk").context["adminform"].form)
    assert {"routing", "keywords"} <= shown and "latin_square" not in shown


def test_bad_values_are_refused_with_what_is_wrong(admin_client_):
    stage = make_stage(make_project(TaskKind.LIKERT), provider=Provider.MTURK,
                       status=StageStatus.DRAFT, settings={"keywords": "qa"})
    _page, form = _page_form(admin_client_, stage)
    cases = [
        ({"min_approval_rate": "150"}, "Ensure this value is less than or equal to 100."),
        ({"min_approval_rate": "lots"}, "Enter a whole number."),
        ({"locales": "US, USA"}, "locales: &#x27;USA&#x27; are not two-letter country codes"),
        ({"routing": "smart"}, "Select a valid choice. smart is not one of the available"),
        ({"redundancy__min": "5", "redundancy__max": "2"}, "1 ≤ min ≤ max ≤ 20; got min 5"),
        ({"redundancy__agreement": "0.5"}, "redundancy.agreement must be &gt; 0.5, ≤ 1, not 0.5"),
        ({"settings": '{"keywords": "x"}'}, "keywords has its own field (Keywords)"),
        ({"settings": '{"gold_rate": 2}'}, "gold_rate has its own field"),
        ({"settings": "[1]"}, "must be a JSON object"),
    ]
    for changes, message in cases:
        response = admin_client_.post(_url(stage), _as_posted(form, **changes))
        assert response.status_code == 200, changes  # the form again, not a redirect
        assert message in response.content.decode(), (changes, message)
    stage.refresh_from_db()
    assert stage.settings == {"keywords": "qa"}


def test_a_save_as_posted_keeps_unknown_keys_and_writes_the_typed_ones(admin_client_):
    project = make_project(TaskKind.LIKERT)
    stored = {"custom_flag": {"a": [1, 2]}, "mturk_hit_type_id": "HT-1",
              "review": {"auto_reject": True, "house_rule": 3}, "min_approval_rate": 90,
              "locales": ["US", "CA"], "redundancy": {"min": 2, "max": 4},
              "latin_square": True}  # not a Likert field: kept as an unknown key
    stage = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT,
                       settings=stored)
    _page, form = _page_form(admin_client_, stage)
    assert form.initial["settings"] == {"custom_flag": {"a": [1, 2]}, "mturk_hit_type_id": "HT-1",
                                        "review": {"house_rule": 3}, "latin_square": True}
    response = admin_client_.post(_url(stage), _as_posted(form))
    assert response.status_code == 302
    stage.refresh_from_db()
    assert stage.settings == stored  # nothing lost, nothing added

    _page, form = _page_form(admin_client_, stage)
    admin_client_.post(_url(stage), _as_posted(
        form, min_approval_rate="", locales="none", review__auto_reject="false",
        redundancy__max="", gold_rate="0.2", bonus_budget="12.50", routing="uncertainty"))
    stage.refresh_from_db()
    assert stage.settings == {
        "custom_flag": {"a": [1, 2]}, "mturk_hit_type_id": "HT-1", "latin_square": True,
        "review": {"auto_reject": False, "house_rule": 3}, "locales": [],
        "redundancy": {"min": 2}, "gold_rate": 0.2, "bonus_budget": "12.50",
        "routing": "uncertainty"}


def test_a_published_stage_of_1458_items_saves_its_settings_form(admin_client_):
    project = make_project(TaskKind.LIKERT)
    Item.objects.bulk_create([Item(project=project, external_id=f"q{n}", dataset="nq",
                                   split="test", content=make_item(project).content)
                              for n in range(1458)])
    stage = make_stage(project, provider=Provider.PROLIFIC, status=StageStatus.COLLECTING,
                       settings={"prolific_study_id": "S1"})
    stage.items.set(Item.objects.filter(project=project, dataset="nq"))
    _page, form = _page_form(admin_client_, stage)
    # Settings a live stage may still change (the study's own are fixed once published).
    data = _as_posted(form, prolific_confirm_grace_seconds="3600",
                      review__min_gold_accuracy="0.8", devices=[])
    assert len(data) < 100  # a field per setting, never one per item
    response = admin_client_.post(_url(stage), data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    stage.refresh_from_db()
    assert stage.settings == {"prolific_study_id": "S1", "prolific_confirm_grace_seconds": 3600,
                              "review": {"min_gold_accuracy": 0.8}}
    assert stage.items.count() == 1458


def test_the_providers_ids_are_refused_when_typed_and_kept_when_left_as_shown(admin_client_):
    """The API's rule (`managed_keys_kept`): the ids a provider writes at publish are never
    added or changed by hand; left in the box as shown, or removed from it, they stay."""
    project = make_project(TaskKind.LIKERT)
    stored = {"mturk_hit_type_id": "HT-1", "keywords": "qa"}
    stage = make_stage(project, provider=Provider.MTURK, status=StageStatus.DRAFT,
                       settings=stored)
    _page, form = _page_form(admin_client_, stage)
    for box in ('{"prolific_study_id": "evil", "mturk_hit_type_id": "HT1"}',
                '{"mturk_hit_type_id": "HT-2"}'):
        response = admin_client_.post(_url(stage), _as_posted(form, settings=box))
        assert response.status_code == 200, box
        errors = response.context["adminform"].form.errors["settings"]
        assert any("written by the provider at publish, never by hand" in e for e in errors)
        assert any("mturk_hit_type_id" in e for e in errors)
        stage.refresh_from_db()
        assert stage.settings == stored

    response = admin_client_.post(_url(stage), _as_posted(form, keywords="qa, trivia"))
    assert response.status_code == 302  # the box posted as shown keeps the id
    response = admin_client_.post(_url(stage), _as_posted(_page_form(admin_client_, stage)[1],
                                                          settings="{}"))
    assert response.status_code == 302  # emptied box: the id still stays
    stage.refresh_from_db()
    assert stage.settings == {"mturk_hit_type_id": "HT-1", "keywords": "qa, trivia"}

    add = admin_client_.get(f"{reverse('admin:annotation_stage_add')}?project={project.pk}"
                            "&provider=prolific")
    data = _as_posted(add.context["adminform"].form,
                      settings='{"prolific_study_id": "evil"}')
    data.update({"project": str(project.pk), "name": "sneaky", "kind": "full",
                 "provider": "prolific", "order": "5", "judgments_per_item": "1"})
    response = admin_client_.post(reverse("admin:annotation_stage_add"), data)
    assert response.status_code == 200
    assert "prolific_study_id: written by the provider" in response.content.decode()
    assert not project.stages.filter(name="sneaky").exists()
