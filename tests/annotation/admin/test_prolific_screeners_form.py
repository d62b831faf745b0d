"""Prolific screeners on the stage admin page as typed fields (approval rate, approved
submissions, countries, first languages), stored as entries of `prolific_filters` (the list the
study is created with); other filters kept; bad values refused with what is wrong."""
from __future__ import annotations

import pytest
from django import forms
from django.urls import reverse

from annotation.models import Provider, StageStatus, TaskKind
from annotation.providers.prolific import ProlificProvider
from testing.factories import make_project, make_stage, make_user

pytestmark = pytest.mark.django_db

OTHER_FILTER = {"filter_id": "handedness", "selected_values": ["1"]}


@pytest.fixture
def admin_client_(client):
    client.force_login(make_user(superuser=True))
    return client


def _url(stage):
    return reverse("admin:annotation_stage_change", args=[stage.pk])


def _posted(client, stage, **screeners) -> dict:
    """What a browser posts for the page as rendered, with the screener fields changed."""
    response = client.get(_url(stage))
    assert response.status_code == 200
    data = {}
    for bound in response.context["adminform"].form:
        value = bound.value()
        if isinstance(bound.field.widget, forms.NullBooleanSelect):
            value = {True: "true", False: "false"}.get(value, "unknown")
        if value is None and isinstance(bound.field.widget, forms.CheckboxSelectMultiple):
            continue  # no box ticked: the browser posts nothing
        if isinstance(value, list | tuple):
            data[bound.html_name] = [str(v) for v in value]
        else:
            data[bound.html_name] = "" if value is None else str(value)
    data.update({f"screener__{name}": value for name, value in screeners.items()})
    return data


def test_screeners_are_fields_stored_as_prolific_filters(admin_client_):
    stage = make_stage(make_project(TaskKind.LIKERT), provider=Provider.PROLIFIC,
                       status=StageStatus.DRAFT, settings={"prolific_filters": [OTHER_FILTER]})
    page = admin_client_.get(_url(stage)).content.decode()
    assert "Prolific screeners" in page and 'name="screener__approval_rate_min"' in page
    assert "Minimum approved submissions" in page and 'name="screener__countries"' in page

    response = admin_client_.post(_url(stage), _posted(
        admin_client_, stage, approval_rate_min="95", approvals_min="50", countries="1, 45",
        languages="19"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    stage.refresh_from_db()
    assert stage.settings["prolific_filters"] == [
        OTHER_FILTER,
        {"filter_id": "approval_rate", "selected_range": {"lower": 95, "upper": 100}},
        {"filter_id": "approval_numbers", "selected_range": {"lower": 50, "upper": None}},
        {"filter_id": "current-country-of-residence", "selected_values": ["1", "45"]},
        {"filter_id": "first-language", "selected_values": ["19"]},
    ]
    # The page shows them back in their fields, not in the JSON box; a save as posted keeps all.
    form = admin_client_.get(_url(stage)).context["adminform"].form
    assert form.initial["screener__approval_rate_min"] == 95
    assert form.initial["screener__countries"] == "1, 45"
    assert form.initial["settings"]["prolific_filters"] == [OTHER_FILTER]
    before = dict(stage.settings)
    assert admin_client_.post(_url(stage), _posted(admin_client_, stage)).status_code == 302
    stage.refresh_from_db()
    assert stage.settings == before

    # Emptied fields drop their screeners; the study is created with what is stored.
    admin_client_.post(_url(stage), _posted(admin_client_, stage, approval_rate_min="",
                                            countries="", languages=""))
    stage.refresh_from_db()
    assert stage.settings["prolific_filters"] == [
        OTHER_FILTER,
        {"filter_id": "approval_numbers", "selected_range": {"lower": 50, "upper": None}}]
    stage.settings["prolific_completion_code"] = "C0DE"
    payload = ProlificProvider(client=object()).study_payload(stage=stage, places=3,
                                                              internal_name="x")
    assert payload["filters"] == stage.settings["prolific_filters"]


def test_bad_screeners_are_refused_with_what_is_wrong(admin_client_):
    stage = make_stage(make_project(TaskKind.LIKERT), provider=Provider.PROLIFIC,
                       status=StageStatus.DRAFT, settings={"estimated_minutes": 7})
    cases = [
        ({"approval_rate_min": "101"}, "Ensure this value is less than or equal to 100."),
        ({"approval_rate_min": "-1"}, "Ensure this value is greater than or equal to 0."),
        ({"approvals_min": "many"}, "Enter a whole number."),
        ({"countries": "UK; US"}, "&#x27;UK; US&#x27; is not a Prolific choice id"),
        ({"languages": "19, 19"}, "First languages (Prolific ids): an id is given twice"),
    ]
    for changes, message in cases:
        response = admin_client_.post(_url(stage), _posted(admin_client_, stage, **changes))
        assert response.status_code == 200, changes
        assert message in response.content.decode(), (changes, message)
    data = _posted(admin_client_, stage)
    data["settings"] = '{"prolific_filters": [{"filter_id": "approval_rate", "selected_range": ' \
                       '{"lower": 90}}]}'
    response = admin_client_.post(_url(stage), data)
    assert response.status_code == 200
    assert "prolific_filters: approval_rate has its own field (Prolific screeners)" in \
        response.content.decode()
    stage.refresh_from_db()
    assert stage.settings == {"estimated_minutes": 7}


def test_other_providers_have_no_screener_fields(admin_client_):
    stage = make_stage(make_project(TaskKind.LIKERT), provider=Provider.MTURK,
                       status=StageStatus.DRAFT)
    page = admin_client_.get(_url(stage)).content.decode()
    assert "screener__" not in page and "Prolific screeners" not in page


def test_a_malformed_stored_filter_list_is_shown_not_dropped(admin_client_):
    stage = make_stage(make_project(TaskKind.LIKERT), provider=Provider.PROLIFIC,
                       status=StageStatus.DRAFT, settings={"prolific_filters": "oops"})
    form = admin_client_.get(_url(stage)).context["adminform"].form
    assert form.initial["settings"] == {"prolific_filters": "oops"}
    response = admin_client_.post(_url(stage), _posted(admin_client_, stage,
                                                       approval_rate_min="90"))
    assert response.status_code == 200
    assert "prolific_filters must be a list of objects" in response.content.decode()
    stage.refresh_from_db()
    assert stage.settings == {"prolific_filters": "oops"}
