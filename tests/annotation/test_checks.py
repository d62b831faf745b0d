"""`manage.py check --database default` names every stage whose status its logged transitions
could not produce (annotation.E001), and every path that changes a status logs who and why."""
from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.urls import reverse

from annotation.models import StageKind, StageStatus, StageTransition, TaskKind
from annotation.services.stages import stage_close, stage_publish, stage_transition
from testing.factories import make_item, make_project, make_stage, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _e001(databases=("default",)):
    from annotation.checks import stage_status_explained_by_transitions

    return [e for e in stage_status_explained_by_transitions(databases=list(databases))
            if e.id == "annotation.E001"]


def test_a_stage_set_live_around_the_services_is_named_by_the_check():
    project = make_project(TaskKind.LIKERT)
    make_item(project)
    bypassed = make_stage(project, name="created collecting", status=StageStatus.COLLECTING)
    proper = make_stage(project, name="published properly", status=StageStatus.DRAFT)
    stage_publish(stage=proper, user=make_user())
    errors = _e001()
    assert [e.obj for e in errors] == [f"annotation.Stage:{bypassed.pk}"]
    assert "created collecting" in errors[0].msg and "no transition was logged" in errors[0].msg
    with pytest.raises(SystemCheckError, match="annotation.E001.*created collecting"):
        call_command("check", databases=["default"])
    assert _e001(databases=()) == []  # a database check: only when a database is named
    assert not [e for e in run_checks() if e.id == "annotation.E001"]
    # Closing it through the service logs the move; the log still cannot explain how it
    # became collecting, so the check goes on naming it.
    stage_close(stage=bypassed, user=make_user(), reason="found by the check")
    assert "a logged move starts at collecting" in _e001()[0].msg


def test_the_log_must_start_at_draft_follow_legal_moves_and_end_at_the_status():
    from annotation.services.stages import transition_log_problem

    assert transition_log_problem("draft", []) == ""
    assert transition_log_problem("collecting", [("draft", "published", "a"),
                                                 ("published", "collecting", "a")]) == ""
    assert "not a move" in transition_log_problem("collecting", [("draft", "collecting", "a")])
    assert "its log ends at published" in transition_log_problem(
        "closed", [("draft", "published", "a")])
    # A row recorded on upgrade for an older stage is where that stage was.
    assert transition_log_problem("collecting", [
        ("draft", "collecting", "migration 0012_stage_lifecycle")]) == ""


def test_a_row_of_a_user_is_never_taken_for_an_upgrade_row():
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project, status=StageStatus.COLLECTING)
    StageTransition.objects.create(stage=stage, from_status="draft", to_status="collecting",
                                   actor="migration 0012_stage_lifecycle",
                                   user=make_user("migration-sneaky"))
    assert "draft → collecting is not a move" in _e001()[0].msg
    with pytest.raises(ValueError, match="reserved"):
        stage_transition(stage=stage, to_status=StageStatus.CLOSED,
                         actor="migration 0012_stage_lifecycle", reason="x")


def test_every_transition_needs_who_and_why():
    stage = make_stage(make_project(TaskKind.LIKERT), status=StageStatus.DRAFT)
    with pytest.raises(ValueError, match="needs who made it"):
        stage_transition(stage=stage, to_status=StageStatus.CLOSED, reason="no actor")
    with pytest.raises(ValueError, match="needs who made it"):
        stage_transition(stage=stage, to_status=StageStatus.CLOSED, actor="a job")
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.transitions.exists()


def test_admin_publish_and_close_log_the_user_and_a_reason(client):
    researcher = make_user("res1", superuser=True)
    client.force_login(researcher)
    project = make_project(TaskKind.LIKERT, items_per_hit=2)
    for _ in range(2):
        make_item(project)
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT)
    url = reverse("admin:annotation_stage_changelist")
    for action in ("publish_stages", "close_stages"):
        client.post(url, {"action": action, "_selected_action": [str(stage.pk)], "index": "0",
                          "reason": ""}, follow=True)
    log = list(stage.transitions.values_list("from_status", "to_status", "user_id", "actor"))
    assert log == [("draft", "published", researcher.pk, "res1"),
                   ("published", "collecting", researcher.pk, "res1"),
                   ("collecting", "closed", researcher.pk, "res1")]
    assert all(t.reason for t in stage.transitions.all())
    assert stage.transitions.last().reason == "closed (no reason given)"
    assert _e001() == []


def test_imported_stages_log_their_closing(tmp_path):
    from annotation.services.imports import import_stage_get_or_create

    project = make_project(TaskKind.LIKERT)
    stage, created = import_stage_get_or_create(project=project, name="mocha")
    assert created and stage.status == StageStatus.CLOSED
    row = stage.transitions.get()
    assert (row.from_status, row.to_status, row.actor) == ("draft", "closed", "import_data")
    assert _e001() == []
