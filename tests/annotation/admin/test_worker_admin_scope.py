"""A worker is shared by every project they worked in: a researcher's admin form never sets the
global block nor renames the worker, and a researcher's actions block or unblock only for their
own projects (`WorkerBlock`); the global `Worker.status` is a superuser's."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Worker, WorkerBlock, WorkerStatus
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared_worker():
    """A worker who worked for alice and for bob."""
    alice, bob = make_user("alice"), make_user("bob")
    worker = make_worker()
    for owner in (alice, bob):
        project = make_project(owner=owner)
        stage = make_stage(project)
        item = make_item(project)
        make_judgment(item=item, stage=stage, worker=worker,
                      assignment=make_assignment(stage, worker=worker, items=[item]))
    return {"alice": alice, "bob": bob, "worker": worker}


def change_url(worker: Worker) -> str:
    return reverse("admin:annotation_worker_change", args=[worker.pk])


def form_data(worker: Worker, **changes) -> dict:
    data = {"provider": worker.provider, "external_id": worker.external_id,
            "display_name": worker.display_name, "email": worker.email,
            "status": worker.status, "blocked_reason": worker.blocked_reason,
            "blocks-TOTAL_FORMS": 0, "blocks-INITIAL_FORMS": 0}
    data.update(changes)
    return data


def test_researcher_change_form_cannot_block_globally_or_rename(client, shared_worker):
    worker = shared_worker["worker"]
    client.force_login(shared_worker["alice"])
    page = client.get(change_url(worker))
    assert page.status_code == 200
    fields = page.context["adminform"].form.fields
    for name in ("status", "blocked_reason", "provider", "external_id"):
        assert name not in fields, f"{name} is editable by a researcher"

    response = client.post(change_url(worker), form_data(
        worker, status=WorkerStatus.BLOCKED, blocked_reason="mine now",
        external_id="renamed", provider="mturk", display_name="Annotator A"))
    assert response.status_code == 302
    worker.refresh_from_db()
    assert (worker.status, worker.blocked_reason, worker.external_id, worker.provider) == (
        WorkerStatus.ACTIVE, "", shared_worker["worker"].external_id, "inhouse")


def test_researcher_cannot_rename_a_worker_another_study_shares(client, shared_worker):
    worker = shared_worker["worker"]
    Worker.objects.filter(pk=worker.pk).update(display_name="P-17", email="p17@lab.example")
    worker.refresh_from_db()
    client.force_login(shared_worker["alice"])
    fields = client.get(change_url(worker)).context["adminform"].form.fields
    assert "display_name" not in fields and "email" not in fields

    response = client.post(change_url(worker), form_data(
        worker, display_name="Annotator A", email="mine@alice.example"))
    assert response.status_code == 302
    worker.refresh_from_db()
    assert (worker.display_name, worker.email) == ("P-17", "p17@lab.example")


def test_researcher_names_a_worker_only_their_projects_have(client, shared_worker):
    alice = shared_worker["alice"]
    worker = make_worker()
    project = make_project(owner=alice)
    stage, item = make_stage(project), make_item(project)
    make_judgment(item=item, stage=stage, worker=worker,
                  assignment=make_assignment(stage, worker=worker, items=[item]))
    client.force_login(alice)
    response = client.post(change_url(worker), form_data(
        worker, display_name="Annotator A", email="a@alice.example"))
    assert response.status_code == 302
    worker.refresh_from_db()
    assert (worker.display_name, worker.email) == ("Annotator A", "a@alice.example")


def test_superuser_renames_a_shared_worker(client, shared_worker):
    worker = shared_worker["worker"]
    client.force_login(make_user("root", superuser=True))
    response = client.post(change_url(worker), form_data(worker, display_name="Renamed"))
    assert response.status_code == 302
    worker.refresh_from_db()
    assert worker.display_name == "Renamed"


def test_superuser_still_sets_the_global_block(client, shared_worker):
    worker = shared_worker["worker"]
    client.force_login(make_user("root", superuser=True))
    response = client.post(change_url(worker), form_data(
        worker, status=WorkerStatus.BLOCKED, blocked_reason="fraud"))
    assert response.status_code == 302
    worker.refresh_from_db()
    assert (worker.status, worker.blocked_reason) == (WorkerStatus.BLOCKED, "fraud")


def test_researcher_add_form_cannot_create_a_globally_blocked_worker(client, shared_worker):
    client.force_login(shared_worker["alice"])
    fields = client.get(reverse("admin:annotation_worker_add")).context["adminform"].form.fields
    assert "status" not in fields and "blocked_reason" not in fields
    assert "external_id" in fields and "provider" in fields


def test_researcher_block_action_blocks_only_for_their_projects(client, shared_worker):
    worker = shared_worker["worker"]
    client.force_login(shared_worker["alice"])
    client.post(reverse("admin:annotation_worker_changelist"),
                {"action": "block_workers", "_selected_action": [worker.pk], "reason": "spam"})
    worker.refresh_from_db()
    assert worker.status == WorkerStatus.ACTIVE
    assert WorkerBlock.objects.filter(worker=worker, researcher=shared_worker["alice"],
                                      reason="spam").exists()


def test_researcher_cannot_lift_a_superusers_block_on_the_provider(client, shared_worker):
    worker = shared_worker["worker"]
    Worker.objects.filter(pk=worker.pk).update(status=WorkerStatus.BLOCKED,
                                               blocked_reason="fraud")
    client.force_login(shared_worker["alice"])
    response = client.post(reverse("admin:annotation_worker_changelist"),
                           {"action": "unblock_on_provider", "_selected_action": [worker.pk]},
                           follow=True)
    text = " ".join(str(m) for m in response.context["messages"])
    assert "only a superuser lifts that block" in text and str(worker) in text
    worker.refresh_from_db()
    assert (worker.status, worker.blocked_reason) == (WorkerStatus.BLOCKED, "fraud")


def test_researcher_cannot_lift_another_researchers_block_on_the_provider(client,
                                                                          shared_worker):
    worker = shared_worker["worker"]
    WorkerBlock.objects.create(worker=worker, researcher=shared_worker["bob"], reason="bob's")
    WorkerBlock.objects.create(worker=worker, researcher=shared_worker["alice"], reason="mine")
    client.force_login(shared_worker["alice"])
    response = client.post(reverse("admin:annotation_worker_changelist"),
                           {"action": "unblock_on_provider", "_selected_action": [worker.pk]},
                           follow=True)
    text = " ".join(str(m) for m in response.context["messages"])
    assert "also blocked by another researcher" in text
    assert set(WorkerBlock.objects.filter(worker=worker).values_list("reason", flat=True)) == {
        "bob's", "mine"}


# --- In-house annotators are named by their researcher ------------------------------------------


def _invite(client, model: str, pk: int, names: str):
    return client.post(reverse(f"admin:annotation_{model}_changelist"),
                       {"action": {"stage": "create_inhouse_links",
                                   "project": "create_home_links"}[model],
                        "_selected_action": [pk], "reason": names}, follow=True)


@pytest.mark.reliability
@pytest.mark.parametrize("model", ["stage", "project"])
def test_a_name_another_researcher_uses_gives_their_own_annotator_at_both_invite_actions(
        client, model):
    """Bob's annotator Ann Lee (her email typed in by Bob) is not handed to Alice, who types
    the same name in either invite action: Alice gets an Ann Lee of her own. Before, she got
    Bob's worker, whose page (with Bob's email) opened for her, and two people were one."""
    from annotation.models import InhouseLink, StageStatus
    from annotation.services.access import inhouse_annotators_invite

    alice, bob = make_user("alice"), make_user("bob")
    bobs_stage = make_stage(make_project(owner=bob), status=StageStatus.COLLECTING)
    inhouse_annotators_invite(stage=bobs_stage, names=["Ann Lee"])
    bobs_ann = Worker.objects.get(provider="inhouse", external_id="ann-lee")
    Worker.objects.filter(pk=bobs_ann.pk).update(email="ann@bob-lab.example")
    alices_stage = make_stage(make_project(owner=alice), status=StageStatus.COLLECTING)
    target = alices_stage if model == "stage" else alices_stage.project

    client.force_login(alice)
    response = _invite(client, model, target.pk, "ann lee")
    assert response["Content-Type"].startswith("text/csv")
    assert "ann@bob-lab.example" not in response.content.decode()
    alices_ann = InhouseLink.objects.get(project=alices_stage.project).worker
    assert alices_ann != bobs_ann and alices_ann.researcher == alice
    assert client.get(change_url(bobs_ann)).status_code == 302  # still not Alice's to open
    assert client.get(change_url(alices_ann)).status_code == 200
    assert not InhouseLink.objects.filter(project=alices_stage.project, worker=bobs_ann).exists()


def test_an_annotator_a_researcher_adds_by_hand_is_theirs_to_find_again(client):
    """An in-house annotator added on the worker admin before any link or work was saved and
    then hidden from the list that added it (no project of the researcher's had them)."""
    alice, bob = make_user("alice"), make_user("bob")
    client.force_login(alice)
    response = client.post(reverse("admin:annotation_worker_add"), {
        "provider": "inhouse", "external_id": "dana", "display_name": "Dana", "email": "",
        "blocks-TOTAL_FORMS": 0, "blocks-INITIAL_FORMS": 0})
    assert response.status_code == 302, response.content.decode()[:2000]
    dana = Worker.objects.get(external_id="dana")
    assert dana.researcher == alice
    listing = client.get(reverse("admin:annotation_worker_changelist")).content.decode()
    assert "Dana" in listing and client.get(change_url(dana)).status_code == 200
    client.force_login(bob)
    assert "Dana" not in client.get(reverse("admin:annotation_worker_changelist")).content.decode()
    assert client.get(change_url(dana)).status_code == 302


def _add_worker(client, provider: str, external_id: str):
    return client.post(reverse("admin:annotation_worker_add"), {
        "provider": provider, "external_id": external_id, "display_name": "", "email": "",
        "blocks-TOTAL_FORMS": 0, "blocks-INITIAL_FORMS": 0})


def _answer(response, external_id: str) -> tuple[int, str]:
    errors = (response.context["adminform"].form.errors.as_text()
              if response.status_code == 200 else "")
    return response.status_code, errors.replace(external_id, "ID")


@pytest.mark.reliability
def test_a_researcher_adds_by_hand_only_their_own_in_house_annotators(client,
                                                                      shared_worker):
    """A crowd worker's id another study holds was a 500 on the researcher's add page where a
    new id was saved (and then never listed to them: no researcher, no project of theirs), so
    the page told which crowd workers exist. A researcher now adds in-house annotators only,
    theirs; a crowd id, taken or not, gets one answer and nothing is stored."""
    client.raise_request_exception = False
    alice = shared_worker["alice"]
    taken = make_worker(provider="mturk", external_id="A1OTHERSTUDY")
    client.force_login(alice)
    before = set(Worker.objects.values_list("pk", flat=True))
    answers = [_answer(_add_worker(client, "mturk", ext), ext)
               for ext in (taken.external_id, "A1NOBODYYET")]
    assert answers[0] == answers[1] and answers[0][0] == 200, answers
    assert set(Worker.objects.values_list("pk", flat=True)) == before
    # In-house: hers, and an id she already gave one of hers is a form error, not a 500.
    assert _add_worker(client, "inhouse", "erin").status_code == 302
    again = _add_worker(client, "inhouse", "erin")
    assert again.status_code == 200 and "you already have" in _answer(again, "erin")[1]
    assert Worker.objects.get(external_id="erin").researcher == alice


def test_a_superuser_adding_a_taken_crowd_id_gets_a_form_error_not_a_500(client):
    client.raise_request_exception = False
    make_worker(provider="mturk", external_id="A1TAKEN")
    client.force_login(make_user("root", superuser=True))
    response = _add_worker(client, "mturk", "A1TAKEN")
    assert response.status_code == 200
    assert "already exists" in _answer(response, "A1TAKEN")[1]
    assert Worker.objects.filter(external_id="A1TAKEN").count() == 1
