"""What may happen to an item once it has judgments or a collecting stage serves it
(`annotation.services.items.item_edit_errors` / `item_delete_error`): its content, gold answer
key, project and external id are fixed, and it is not deleted; the flags (practice, gold check,
excluded) stay free. Every admin door that writes an item calls the rule: the change form, the
delete page, the bulk "delete selected" action."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotation.models import (
    AssignmentStatus,
    Item,
    Judgment,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.services.items import item_edit_errors
from core.vocabulary import Provider
from metrics_app.models import MetricScore
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client):
    client.force_login(make_user(superuser=True))
    return client


def _form(item: Item, **changes) -> dict:
    data = {name: getattr(item, name) or "" for name in (
        "external_id", "dataset", "source", "split", "domain", "text_level", "group_key",
        "design_unit", "exclusion_reason")}
    data.update(project=item.project_id, content=json.dumps(item.content),
                gold=json.dumps(item.gold), metadata=json.dumps(item.metadata or {}))
    for flag in ("is_gold_check", "is_practice", "excluded"):
        if getattr(item, flag):
            data[flag] = "on"
    data.update(changes)
    return data


def _post(client, item, **changes):
    return client.post(reverse("admin:annotation_item_change", args=[item.pk]),
                       _form(item, **changes))


@pytest.mark.reliability
def test_a_judged_items_shown_content_and_gold_cannot_change_on_the_form(admin_client_):
    """Was: the passage an annotator judged, and the qualification's answer key, were rewritten
    in place under the judgments (saved, 302)."""
    project = make_project(TaskKind.LIKERT)
    item = make_item(project, gold={"score": 4})
    make_judgment(item=item, stage=make_stage(project, status=StageStatus.CLOSED))
    content = dict(item.content, passage="An entirely different passage.")
    response = _post(admin_client_, item, content=json.dumps(content),
                     gold=json.dumps({"score": 1}))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "it has 1 judgment" in errors["content"][0]
    assert "new external id" in errors["content"][0]
    assert "graded" in errors["gold"][0]
    item.refresh_from_db()
    assert item.content["passage"] != "An entirely different passage."
    assert item.gold == {"score": 4}


def test_a_judged_item_cannot_move_project_or_be_renamed(admin_client_):
    project, other = make_project(TaskKind.LIKERT), make_project(TaskKind.LIKERT)
    item = make_item(project)
    make_judgment(item=item)
    response = _post(admin_client_, item, project=other.pk, external_id="renamed")
    errors = response.context["adminform"].form.errors
    assert set(errors) == {"project", "external_id"}
    assert Item.objects.get(pk=item.pk).project_id == project.pk


def test_the_flags_stay_free_and_an_unchanged_save_passes(admin_client_):
    project = make_project(TaskKind.LIKERT)
    item = make_item(project)
    make_judgment(item=item)
    assert _post(admin_client_, item).status_code == 302
    assert _post(admin_client_, item, excluded="on", exclusion_reason="typo in the question",
                 is_practice="on").status_code == 302
    item.refresh_from_db()
    assert item.excluded and item.is_practice


def test_an_item_a_collecting_stage_serves_is_fixed_before_its_first_judgment():
    project = make_project(TaskKind.LIKERT)
    item, free = make_item(project), make_item(project)
    stage = make_stage(project, status=StageStatus.COLLECTING)
    changes = {"content": dict(item.content, question="Another question?")}
    # A stage that lists no items serves its whole project.
    assert "is collecting and serves it" in item_edit_errors(item=item, changes=changes)["content"]
    stage.items.set([item])
    assert item_edit_errors(item=item, changes=changes)
    assert item_edit_errors(item=free, changes={"content": changes["content"]}) == {}
    stage.status = StageStatus.CLOSED  # serves nobody any more; nobody judged it
    stage.save()
    assert item_edit_errors(item=item, changes=changes) == {}
    draft = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT)
    make_assignment(draft, items=[item], status=AssignmentStatus.RETURNED)
    assert item_edit_errors(item=item, changes=changes) == {}
    # A worker who accepted before the stage closed may still be answering it.
    make_assignment(stage, items=[item])
    assert "in progress" in item_edit_errors(item=item, changes=changes)["content"]


def test_deleting_an_item_in_use_is_refused_on_the_page_and_in_bulk(admin_client_):
    """Was: an item a collecting stage had built into a worker's assignment was deleted, and the
    assignment silently lost it (AssignmentItem cascades)."""
    project = make_project(TaskKind.LIKERT)
    served, judged, unused = make_item(project), make_item(project), make_item(project)
    stage = make_stage(project, status=StageStatus.COLLECTING)
    stage.items.set([served])
    assignment = make_assignment(stage, items=[served])
    make_judgment(item=judged, stage=make_stage(project, status=StageStatus.CLOSED))
    page = admin_client_.post(reverse("admin:annotation_item_delete", args=[served.pk]),
                              {"post": "yes"})
    assert "is collecting and serves it" in page.content.decode()
    assert assignment.items.filter(pk=served.pk).exists()
    response = admin_client_.post(reverse("admin:annotation_item_changelist"), {
        "action": "delete_selected", "post": "yes",
        "_selected_action": [served.pk, judged.pk, unused.pk]})
    assert "mark it excluded instead" in response.content.decode()
    assert Item.objects.filter(pk__in=[served.pk, judged.pk, unused.pk]).count() == 3
    assert Judgment.objects.filter(item=judged).exists()
    admin_client_.post(reverse("admin:annotation_item_delete", args=[unused.pk]), {"post": "yes"})
    assert not Item.objects.filter(pk=unused.pk).exists()


def test_a_scored_items_content_cannot_change_under_its_cached_metric_scores(admin_client_):
    """Was: the candidate of an unjudged item was edited, its cached metric scores stayed, and
    rescoring skipped it (already scored at the metric's version): the estimates read a score
    of a text that no longer exists."""
    project = make_project(TaskKind.LIKERT)
    item = make_item(project)
    MetricScore.objects.create(item=item, metric="bleu1", version="1", value=0.5)
    content = dict(item.content, candidate="A corrected candidate answer.")
    response = _post(admin_client_, item, content=json.dumps(content))
    assert "metric scores (bleu1)" in response.context["adminform"].form.errors["content"][0]
    assert _post(admin_client_, item, excluded="on").status_code == 302  # flags stay free
    MetricScore.objects.filter(item=item).delete()  # a fresh start: no score to go stale
    assert _post(admin_client_, item, content=json.dumps(content)).status_code == 302
    item.refresh_from_db()
    assert item.content["candidate"] == "A corrected candidate answer."


@pytest.mark.reliability
def test_an_answer_key_is_added_to_items_judged_only_by_imported_experts(admin_client_):
    """Was: a researcher who imported expert A/B labels and marked the unanimous pairs as the
    qualification's gold was refused, item by item, with "workers were graded (qualification,
    gold checks) against this answer key" — there was no key, nobody was graded — and told to
    re-add each pair under a new id, which left the experts' judgments outside the counts."""
    project = make_project(TaskKind.AB)
    imported = make_stage(project, kind=StageKind.IMPORTED, status=StageStatus.CLOSED,
                          provider=Provider.IMPORT)
    item = make_item(project)
    make_judgment(item=item, stage=imported, choice="B")
    assert _post(admin_client_, item, gold=json.dumps({"choice": "B"})).status_code == 302
    item.refresh_from_db()
    assert item.gold == {"choice": "B"}
    # Once given, the key is fixed like any other: a qualification may have graded on it.
    response = _post(admin_client_, item, gold=json.dumps({"choice": "A"}))
    assert "graded" in response.context["adminform"].form.errors["gold"][0]
    # Decided work (approved or rejected) is not graded again either.
    decided = make_item(project)
    trial = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.CLOSED)
    make_judgment(item=decided, stage=trial, assignment=make_assignment(
        trial, items=[decided], status=AssignmentStatus.APPROVED))
    assert item_edit_errors(item=decided, changes={"gold": {"choice": "A"}}) == {}


@pytest.mark.reliability
def test_a_first_answer_key_waits_for_the_work_it_would_grade():
    """A key given while work on the item awaits review, or while a live stage serves it,
    would grade that work unlike the work before it: refused, naming which."""
    project = make_project(TaskKind.AB)
    waiting = make_item(project)
    closed = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.CLOSED)
    make_judgment(item=waiting, stage=closed, assignment=make_assignment(
        closed, items=[waiting], status=AssignmentStatus.SUBMITTED))
    error = item_edit_errors(item=waiting, changes={"gold": {"choice": "A"}})["gold"]
    assert "1 of its judgments await review" in error
    assert "cannot add an answer key now" in error
    served = make_item(project)
    make_judgment(item=served, stage=make_stage(project, kind=StageKind.IMPORTED,
                                                 status=StageStatus.CLOSED,
                                                 provider=Provider.IMPORT))
    live = make_stage(project, kind=StageKind.FULL, status=StageStatus.COLLECTING)
    live.items.set([served])
    error = item_edit_errors(item=served, changes={"gold": {"choice": "A"}})["gold"]
    assert f"stage {live.name!r} is collecting and serves it" in error
    # The content stays fixed by the judgments whatever the key does.
    changes = {"gold": {"choice": "A"}, "content": dict(waiting.content, question="Other?")}
    assert set(item_edit_errors(item=waiting, changes=changes)) == {"gold", "content"}


@pytest.mark.reliability
def test_an_item_becomes_or_stops_being_a_check_only_once_its_work_is_reviewed(
        admin_client_):
    """Review grades submitted work on its gold checks (`min_gold_accuracy`): ticking "gold
    check" on a data item whose judgments await review would reject the workers who read it
    as an ordinary item and disagreed with its reference score (unpaid), and unticking one
    would approve those who failed it. Refused while work on it awaits review or a live stage
    serves it, as a first answer key is (`item_graded_flag_error`); so is "practice item"
    (Prolific's comprehension checks hold a participant who failed one); free once reviewed."""
    project = make_project(TaskKind.LIKERT)
    item = make_item(project, gold={"score": 5})
    trial = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.CLOSED)
    work = make_assignment(trial, items=[item], status=AssignmentStatus.SUBMITTED)
    make_judgment(item=item, stage=trial, assignment=work, score=1)

    response = _post(admin_client_, item, is_gold_check="on")
    assert response.status_code == 200
    error = response.context["adminform"].form.errors["is_gold_check"][0]
    assert "1 of its judgments await review" in error and "gold check" in error
    item.refresh_from_db()
    assert not item.is_gold_check

    check = make_item(project, gold={"score": 5}, is_gold_check=True)
    make_judgment(item=check, stage=trial, assignment=work, score=1)
    assert "is_gold_check" in item_edit_errors(item=check, changes={"is_gold_check": False})
    assert "cannot become a practice item now: 1 of its judgments await review" in (
        item_edit_errors(item=item, changes={"is_practice": True})["is_practice"])
    # Exclusion stays free, and so do the flags once the work is decided.
    assert item_edit_errors(item=item, changes={"is_gold_check": False, "excluded": True}) == {}
    work.status = AssignmentStatus.APPROVED
    work.save(update_fields=["status"])
    assert _post(admin_client_, item, is_gold_check="on").status_code == 302
    item.refresh_from_db()
    assert item.is_gold_check
