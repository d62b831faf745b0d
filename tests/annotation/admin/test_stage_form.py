"""The stage change page at scale: items are chosen by filter and count, never posted as a list
(a stage of 1,458 items used to answer 400 TooManyFieldsSent on save), and names and
qualification stages are not duplicated silently."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Item, Stage, StageKind, StageStatus, TaskKind
from testing.factories import make_item, make_project, make_stage, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client):
    client.force_login(make_user(superuser=True))
    return client


def _form(stage: Stage, **changes) -> dict:
    data = {"project": stage.project_id, "kind": stage.kind, "name": stage.name,
            "order": stage.order, "provider": stage.provider, "settings": "{}",
            "judgments_per_item": "", "requires_stage": "", "agreement_threshold": "",
            "reward_per_hit": "", "item_choice": "keep", "item_dataset": "", "item_split": "",
            "item_source": "", "item_count": ""}
    data.update(changes)
    return data


def _save(client, stage, **changes):
    return client.post(reverse("admin:annotation_stage_change", args=[stage.pk]),
                       _form(stage, **changes), follow=True)


def test_a_published_stage_of_1500_items_saves_a_new_setting(admin_client_):
    project = make_project(TaskKind.LIKERT)
    Item.objects.bulk_create([Item(project=project, external_id=f"q{n}", dataset="nq",
                                   split="test", content=make_item(project).content)
                              for n in range(1500)])
    stage = make_stage(project, status=StageStatus.COLLECTING)
    stage.items.set(Item.objects.filter(project=project, dataset="nq"))
    page = admin_client_.get(reverse("admin:annotation_stage_change", args=[stage.pk]))
    assert page.status_code == 200 and "1500 items (nq: 1500)" in page.content.decode()
    assert page.content.decode().count("<option") < 100  # no widget listing every item
    # A setting a live stage may still change (one nobody declared, kept as typed).
    response = _save(admin_client_, stage, settings='{"note": "v2"}', name="renamed")
    assert response.status_code == 200
    stage.refresh_from_db()
    assert stage.settings == {"note": "v2"} and stage.name == "renamed"
    assert stage.items.count() == 1500  # kept
    # Its items are fixed once published: a filter is refused on the form, nothing is saved.
    refused = _save(admin_client_, stage, item_choice="filter", item_count="10",
                    name="again")
    assert "its items are fixed once it is published" in refused.content.decode()
    stage.refresh_from_db()
    assert stage.items.count() == 1500 and stage.name == "renamed"


def test_a_draft_stage_takes_its_items_by_filter_and_count(admin_client_):
    project = make_project(TaskKind.LIKERT)
    for n in range(30):
        make_item(project, dataset="nq" if n % 2 else "tq", source=f"sys{n % 3}")
    make_item(project, dataset="nq", is_gold_check=True)  # gold checks are not data items
    stage = make_stage(project, status=StageStatus.DRAFT, kind=StageKind.FULL)
    _save(admin_client_, stage, item_choice="filter", item_dataset="nq", item_count="5")
    first = set(stage.items.values_list("pk", flat=True))
    assert len(first) == 5
    assert set(stage.items.values_list("dataset", flat=True)) == {"nq"}
    assert not stage.items.filter(is_gold_check=True).exists()
    _save(admin_client_, stage, item_choice="filter", item_dataset="nq", item_count="5")
    assert set(stage.items.values_list("pk", flat=True)) == first  # same sample every time
    _save(admin_client_, stage, item_choice="filter", item_source="sys0")
    assert set(stage.items.values_list("source", flat=True)) == {"sys0"}
    assert stage.items.count() == 10
    nothing = _save(admin_client_, stage, item_choice="filter", item_dataset="squad")
    assert "no data items of the project match dataset=&#x27;squad&#x27;" in \
        nothing.content.decode()
    assert stage.items.count() == 10
    empty = _save(admin_client_, stage, item_choice="filter")
    assert "give a dataset, split, source or number of items" in empty.content.decode()
    _save(admin_client_, stage, item_choice="kind")
    assert stage.items.count() == 0


def test_duplicate_stage_names_and_a_second_qualification_are_refused(admin_client_):
    project = make_project(TaskKind.LIKERT)
    make_stage(project, name="trial", kind=StageKind.TRIAL)
    make_stage(project, name="qual", kind=StageKind.QUALIFICATION)
    other = make_stage(project, name="full", kind=StageKind.FULL, status=StageStatus.DRAFT)
    response = _save(admin_client_, other, name="trial")
    assert "already has a stage named &#x27;trial&#x27;" in response.content.decode()
    # A stage's kind is fixed once it exists (the API's rule): a second qualification can
    # only be tried on the add page, where it is refused.
    _save(admin_client_, other, kind=StageKind.QUALIFICATION)
    other.refresh_from_db()
    assert (other.name, other.kind) == ("full", StageKind.FULL)
    response = admin_client_.post(reverse("admin:annotation_stage_add"), _form(
        other, name="qual-2", kind=StageKind.QUALIFICATION))
    assert "already has a qualification stage" in response.content.decode()
    assert not project.stages.filter(name="qual-2").exists()
    # Another project may use the same names.
    elsewhere = make_stage(make_project(TaskKind.LIKERT), name="x", status=StageStatus.DRAFT)
    _save(admin_client_, elsewhere, name="trial")
    elsewhere.refresh_from_db()
    assert elsewhere.name == "trial"


def test_bad_adaptive_redundancy_and_routing_settings_are_refused_on_the_form(admin_client_):
    stage = make_stage(make_project(TaskKind.LIKERT), status=StageStatus.DRAFT)
    page = _save(admin_client_, stage,
                 settings='{"redundancy": {"min": 5, "max": 2}}').content.decode()
    assert "1 ≤ min ≤ max" in page
    page = _save(admin_client_, stage, settings='{"routing": "smart"}').content.decode()
    assert "routing &#x27;smart&#x27; is not one of random, uncertainty" in page
    stage.refresh_from_db()
    assert stage.settings == {}
    _save(admin_client_, stage, settings='{"redundancy": {"min": 2, "max": 4}}')
    stage.refresh_from_db()
    assert stage.settings == {"redundancy": {"min": 2, "max": 4}}


@pytest.mark.reliability
def test_a_filter_typed_under_a_choice_that_does_not_read_it_is_refused(admin_client_):
    """A trial stage saved with "…how many" 5 and Items left at "Keep the current choice":
    the admin said "added successfully" and the stage page then previewed every item."""
    project = make_project(TaskKind.LIKERT)
    for n in range(9):
        make_item(project, dataset="nq" if n % 2 else "tq")
    stage = make_stage(project, status=StageStatus.DRAFT, kind=StageKind.TRIAL)
    kept = _save(admin_client_, stage, item_count="5", name="renamed")
    page = kept.content.decode()
    assert "…how many given, but “Keep the current choice” does not read it" in page
    stage.refresh_from_db()
    assert stage.name != "renamed" and stage.items.count() == 0  # nothing saved

    by_kind = _save(admin_client_, stage, item_choice="kind", item_dataset="nq",
                    item_split="dev", item_count="5")
    assert "…dataset, …split given, but “Chosen by the stage&#x27;s kind" in \
        by_kind.content.decode()

    _save(admin_client_, stage, item_choice="filter", item_count="5")  # the advice works
    assert stage.items.count() == 5
    by_kind = _save(admin_client_, stage, item_choice="kind", item_count="4")
    assert "does not read" not in by_kind.content.decode()  # "by kind" reads a count
    assert stage.items.count() == 4
