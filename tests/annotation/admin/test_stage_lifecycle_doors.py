"""One owner of a stage's lifecycle (issue #32): no admin door writes `status` (the add form, the
change form, the project's stage inline, list editing), a new stage is a draft, an item filter
that matches nothing is refused on the form instead of falling back to "chosen by kind", and
the stage page previews exactly the items publishing releases."""
from __future__ import annotations

import csv
import io

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse

from annotation.models import Item, Project, Stage, StageKind, StageStatus, TaskKind
from annotation.services.stages import stage_hits_build
from testing.factories import make_item, make_project, make_stage, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.fixture
def superuser():
    return make_user(superuser=True)


@pytest.fixture
def admin_client_(client, superuser):
    client.force_login(superuser)
    return client


def _add_form(project: Project, **changes) -> dict:
    data = {"project": project.pk, "kind": StageKind.FULL, "name": "full", "order": "1",
            "provider": "inhouse", "settings": "{}", "judgments_per_item": "",
            "requires_stage": "", "agreement_threshold": "", "reward_per_hit": "",
            "item_choice": "keep", "item_dataset": "", "item_split": "", "item_source": "",
            "item_count": ""}
    data.update(changes)
    return data


def _add(client, project, **changes):
    return client.post(reverse("admin:annotation_stage_add"), _add_form(project, **changes),
                       follow=True)


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_the_add_form_makes_a_draft_whatever_status_is_posted(admin_client_):
    """The issue's first door: a full stage added as Collecting with a 0.999 agreement gate
    served items at once (no gate, no budget check, no logged transition)."""
    project = make_project(TaskKind.LIKERT)
    for _ in range(4):
        make_item(project)
    page = admin_client_.get(reverse("admin:annotation_stage_add") + f"?project={project.pk}")
    assert 'name="status"' not in page.content.decode()  # not a field: read-only
    _add(admin_client_, project, status=StageStatus.COLLECTING, agreement_threshold="0.999")
    stage = Stage.objects.get(project=project, name="full")
    assert stage.status == StageStatus.DRAFT
    assert not stage.transitions.exists() and not stage.hits.exists()
    # The pilot of the issue: "Published" posted, its estimate had nothing to release.
    empty = make_project(TaskKind.LIKERT)
    _add(admin_client_, empty, kind=StageKind.PILOT, name="pilot",
         status=StageStatus.PUBLISHED)
    pilot = Stage.objects.get(project=empty, name="pilot")
    assert pilot.status == StageStatus.DRAFT


def test_the_change_form_never_writes_status(admin_client_):
    project = make_project(TaskKind.LIKERT)
    make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT, name="trial", kind=StageKind.TRIAL)
    form = _add_form(project, kind=StageKind.TRIAL, name="trial", status="collecting",
                     agreement_threshold="0.5")
    response = admin_client_.post(reverse("admin:annotation_stage_change", args=[stage.pk]),
                                  form, follow=True)
    assert response.status_code == 200
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and stage.agreement_threshold == 0.5
    assert not stage.transitions.exists()


def test_no_admin_form_inline_or_list_edit_has_a_status_field(superuser):
    """Every admin door that edits stages: the stage admin's form (add and change), its list
    editing, and any inline of stages (the project page)."""
    request = RequestFactory().get("/")
    request.user = superuser
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project, status=StageStatus.DRAFT)
    checked = 0
    for model, model_admin in admin.site._registry.items():
        if model is Stage:
            for obj in (None, stage):
                assert "status" not in model_admin.get_form(request, obj).base_fields
                assert "status" in model_admin.get_readonly_fields(request, obj)
            assert "status" not in (model_admin.list_editable or ())
            checked += 1
        for inline in model_admin.get_inline_instances(request, project if model is Project
                                                       else None):
            if inline.model is Stage:
                formset = inline.get_formset(request, project)
                assert "status" not in formset.form.base_fields, inline
                checked += 1
    assert checked >= 2  # the stage admin and the project's stage inline


def test_an_item_filter_matching_nothing_refuses_the_save_and_names_it(admin_client_):
    """The issue's third door: "Items not changed" in red, "added successfully" in green, and
    publishing then released the remaining items (burned for the real full stage)."""
    project = make_project(TaskKind.LIKERT)
    for n in range(6):
        make_item(project, dataset="nq" if n % 2 else "tq")
    response = _add(admin_client_, project, kind=StageKind.PILOT, name="pilot",
                    item_choice="filter", item_dataset="squad")
    page = response.content.decode()
    assert "no data items of the project match dataset=&#x27;squad&#x27;" in page
    assert "nothing would be released" in page and "dataset values: nq, tq" in page
    assert not Stage.objects.filter(project=project).exists()  # nothing saved
    assert not any("added successfully" in m for m in _messages(response))
    # Two filters that each match but not together: the combination is named.
    make_item(project, dataset="nq", split="holdout")
    response = _add(admin_client_, project, kind=StageKind.PILOT, name="pilot",
                    item_choice="filter", item_dataset="tq", item_split="holdout")
    assert "No item has all of these" in response.content.decode()
    assert not Stage.objects.filter(project=project).exists()
    # A filter that matches saves the stage with exactly those items.
    _add(admin_client_, project, kind=StageKind.PILOT, name="pilot", item_choice="filter",
         item_dataset="nq")
    stage = Stage.objects.get(project=project, name="pilot")
    assert set(stage.items.values_list("dataset", flat=True)) == {"nq"}


def test_a_stage_whose_listed_items_are_all_excluded_is_refused_not_refilled(admin_client_):
    project = make_project(TaskKind.LIKERT)
    chosen = [make_item(project, dataset="nq") for _ in range(2)]
    others = [make_item(project, dataset="tq") for _ in range(3)]
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT)
    stage.items.set(chosen)
    Item.objects.filter(pk__in=[i.pk for i in chosen]).update(excluded=True)
    response = admin_client_.post(reverse("admin:annotation_stage_changelist"), {
        "action": "publish_stages", "_selected_action": [str(stage.pk)], "index": "0"},
        follow=True)
    shown = _messages(response)
    assert any("every one is excluded now" in m for m in shown), shown
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.hits.exists()
    assert set(stage.items.values_list("pk", flat=True)) == {i.pk for i in chosen}
    assert not Item.objects.filter(pk__in=[i.pk for i in others], stages__isnull=False).exists()


def test_the_stage_page_previews_exactly_the_items_publishing_releases(admin_client_):
    from annotation.stage_plan_selectors import stage_release_preview

    project = make_project(TaskKind.LIKERT, items_per_hit=2)
    items = [make_item(project, dataset="nq" if n < 8 else "tq", group_key=f"p{n}")
             for n in range(12)]
    gold = make_item(project, is_gold_check=True, gold={"score": 5})
    trial = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       settings={"n_items": 5})
    preview = stage_release_preview(stage=trial)
    assert len(preview.items) == 5 and not preview.error
    assert not trial.items.exists()  # previewing stores nothing
    page = admin_client_.get(reverse("admin:annotation_stage_change", args=[trial.pk]))
    assert "Items it will release" in page.content.decode()
    assert "5 items (" in page.content.decode()
    rows = list(csv.DictReader(io.StringIO(admin_client_.get(reverse(
        "admin:annotation_stage_release_preview", args=[trial.pk])).content.decode())))
    assert [int(r["item_id"]) for r in rows if r["role"] == "item"] == \
        [i.pk for i in preview.items]
    # Publishing builds HITs of exactly these items (the same seeded choice).
    stage_hits_build(stage=trial)
    built = set(trial.items.values_list("pk", flat=True))
    assert built == {i.pk for i in preview.items} and built <= {i.pk for i in items}
    assert gold.pk not in built
    # A stage with nothing to release says so before publishing.
    empty = make_stage(make_project(TaskKind.LIKERT), kind=StageKind.FULL,
                       status=StageStatus.DRAFT)
    page = admin_client_.get(reverse("admin:annotation_stage_change", args=[empty.pk]))
    assert "Nothing to release" in page.content.decode()
