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


# --- In-house annotators are named, not picked: a name another study uses -----------------------


def _invite(client, model: str, pk: int, names: str):
    return client.post(reverse(f"admin:annotation_{model}_changelist"),
                       {"action": {"stage": "create_inhouse_links",
                                   "project": "create_home_links"}[model],
                        "_selected_action": [pk], "reason": names}, follow=True)


@pytest.mark.reliability
@pytest.mark.parametrize("model", ["stage", "project"])
def test_a_name_another_study_uses_never_hands_its_annotator_over(client, model):
    """In-house annotators are keyed by their name's slug, one person in every study that
    invites the name. Bob's annotator Ann Lee (her email typed in by Bob) is not given to
    Alice, who types the same name in either invite action: she would read Ann's name and
    email on the worker page, Bob could no longer edit them, and two people would be one
    (the STARC design would withhold from Alice's Ann the paragraphs Bob's Ann read)."""
    from annotation.models import InhouseLink, StageStatus
    from annotation.services.access import inhouse_annotators_invite

    alice, bob = make_user("alice"), make_user("bob")
    bobs_stage = make_stage(make_project(owner=bob), status=StageStatus.COLLECTING)
    inhouse_annotators_invite(stage=bobs_stage, names=["Ann Lee"], by=bob)
    ann = Worker.objects.get(provider="inhouse", external_id="ann-lee")
    Worker.objects.filter(pk=ann.pk).update(email="ann@bob-lab.example")
    alices_stage = make_stage(make_project(owner=alice), status=StageStatus.COLLECTING)
    target = alices_stage if model == "stage" else alices_stage.project

    client.force_login(alice)
    refused = _invite(client, model, target.pk, "Bo, ann lee")
    assert not refused["Content-Type"].startswith("text/csv")
    text = " ".join(str(m) for m in refused.context["messages"])
    assert "'ann lee'" in text and "a study you cannot see" in text
    assert "ann@bob-lab.example" not in refused.content.decode()
    # Nothing made: not Ann's link, nor Bo's (the names are checked before any is created).
    assert not InhouseLink.objects.filter(project=alices_stage.project).exists()
    assert not Worker.objects.filter(external_id="bo").exists()
    assert client.get(change_url(ann)).status_code == 302  # still not Alice's to open

    # Told apart by name, Alice's annotator is her own worker.
    taken = _invite(client, model, target.pk, "Ann Lee (Alice's lab)")
    assert taken["Content-Type"].startswith("text/csv")
    assert InhouseLink.objects.get(project=alices_stage.project).worker.external_id == (
        "ann-lee-alices-lab")

    # Bob, who sees every study Ann is in, invites her by name to his next study: one person.
    bobs_next = make_stage(make_project(owner=bob), status=StageStatus.COLLECTING)
    inhouse_annotators_invite(stage=bobs_next, names=["Ann Lee"], by=bob)
    assert InhouseLink.objects.get(project=bobs_next.project).worker == ann
    # So does a superuser, and the command line (no researcher: by=None).
    inhouse_annotators_invite(stage=alices_stage, names=["Ann Lee"],
                              by=make_user("root", superuser=True))
    assert InhouseLink.objects.filter(project=alices_stage.project, worker=ann).exists()


def test_an_annotator_a_researcher_already_sees_is_invited_again_by_name(client):
    """A name clash made before the rule (Ann in Alice's and Bob's studies) stays usable to
    both: Alice already sees Ann, so inviting her again shows nothing new."""
    from annotation.models import InhouseLink, StageStatus
    from annotation.services.access import inhouse_link_create

    alice, bob = make_user("alice"), make_user("bob")
    ann = make_worker(provider="inhouse", external_id="ann-lee")
    inhouse_link_create(worker=ann, project=make_project(owner=bob))
    inhouse_link_create(worker=ann, project=make_project(owner=alice))
    stage = make_stage(make_project(owner=alice), status=StageStatus.COLLECTING)
    client.force_login(alice)
    response = _invite(client, "stage", stage.pk, "Ann Lee")
    assert response["Content-Type"].startswith("text/csv")
    assert InhouseLink.objects.get(project=stage.project).worker == ann
