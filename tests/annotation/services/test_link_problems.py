"""Links issued where they cannot work: the researcher is told why when the link is made, and
the annotator who opens it reads why instead of "not open at the moment"."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import StageKind, StageStatus, TaskKind
from annotation.services.access import (
    inhouse_annotators_invite,
    inhouse_link_create,
    stage_link_problem,
)
from testing.factories import make_item, make_project, make_qualification, make_stage, make_worker

pytestmark = pytest.mark.django_db


def _study():
    project = make_project(TaskKind.LIKERT)
    make_item(project)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               settings={"max_workers": 2})
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial",
                       requires_stage=qualification)
    return project, qualification, trial


def test_a_trial_link_for_a_worker_who_failed_the_qualification_is_flagged(client):
    project, qualification, trial = _study()
    failed, passed = make_worker(external_id="failed"), make_worker(external_id="passed")
    make_qualification(worker=failed, stage=qualification, passed=False, score=0.4)
    make_qualification(worker=passed, stage=qualification, passed=True)
    assert "failed the qualification" in stage_link_problem(stage=trial, worker=failed)
    assert "score 40%" in stage_link_problem(stage=trial, worker=failed)
    assert stage_link_problem(stage=trial, worker=passed) == ""
    assert "already taken this qualification" in stage_link_problem(stage=qualification,
                                                                   worker=failed)
    (name, _path, problem), = inhouse_annotators_invite(stage=trial, names=["Failed"])
    assert name == "Failed" and "failed the qualification" in problem
    # The annotator reads why, not "needs a qualification you have not passed yet".
    _link, path = inhouse_link_create(worker=failed, project=project, stage=trial)
    page = client.get(path).content.decode()
    assert "below the pass mark" in page


def test_a_link_to_a_stage_that_closed_itself_says_how_to_collect_more_and_the_page_says_why(
        client):
    """It advised "raise max takers / the stage's redundancy, then Extend by one day": edits
    every door refuses once a stage is published (`stage_edit_errors`)."""
    from annotation.services.stages import stage_edit_errors

    project, qualification, _trial = _study()
    qualification.status = StageStatus.REVIEWING  # every HIT has all its assignments
    qualification.save(update_fields=["status"])
    worker = make_worker(external_id="late")
    problem = stage_link_problem(stage=qualification, worker=worker)
    assert "closed itself" in problem and "max takers" in problem
    assert "number of takers is fixed" in problem and "raise" not in problem
    assert "close it and publish another stage" in stage_link_problem(
        stage=make_stage(project, kind=StageKind.FULL, name="full",
                         status=StageStatus.REVIEWING), worker=worker)
    assert set(stage_edit_errors(stage=qualification, changes={
        "judgments_per_item": 9, "settings": {"max_workers": 9}})) == {
        "judgments_per_item", "settings.max_workers"}
    _link, path = inhouse_link_create(worker=worker, project=project, stage=qualification)
    page = client.get(path).content.decode()
    assert "paused while the researcher reviews them" in page
    assert "not open at the moment" not in page
    qualification.status = StageStatus.CLOSED
    qualification.save(update_fields=["status"])
    assert "has ended" in client.get(path).content.decode()


def test_the_admin_action_warns_about_links_that_cannot_work(client):
    from testing.factories import make_user

    _project, qualification, _trial = _study()
    qualification.status = StageStatus.REVIEWING
    qualification.save(update_fields=["status"])
    client.force_login(make_user(superuser=True))
    response = client.post(reverse("admin:annotation_stage_changelist"), {
        "action": "create_inhouse_links", "_selected_action": [str(qualification.pk)],
        "index": "0", "reason": "Ann"})
    assert response.status_code == 200
    rows = response.content.decode().splitlines()
    assert rows[0].endswith(",warning") and "closed itself" in rows[1]
    follow = client.get(reverse("admin:annotation_stage_changelist")).content.decode()
    assert "Link for Ann:" in follow and "closed itself" in follow
