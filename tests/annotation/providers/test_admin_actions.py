"""Provider actions in the admin: cost, publish, sync, close; approve, reject, bonus; block on
the provider; the production banner; the worker history."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.models import AssignmentStatus, StageStatus, TaskKind, WorkerStatus
from testing.factories import (
    make_assignment,
    make_hit,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client):
    client.force_login(make_user(superuser=True))
    return client


def act(client, model: str, action: str, ids, **fields):
    url = reverse(f"admin:annotation_{model}_changelist")
    data = {"action": action, "_selected_action": [str(i) for i in ids], "index": "0", **fields}
    return client.post(url, data, follow=True)


def send(message: str, subject: str = "Message from the researchers") -> dict:
    """What the message actions' compose page posts when "Send the message" is pressed."""
    return {"confirm_send": "yes", "message_subject": subject, "message_body": message}


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_production_banner_only_when_production(admin_client_, settings):
    url = reverse("admin:annotation_stage_changelist")
    settings.MTURK_ENDPOINT_URL = ""
    settings.MTURK_PRODUCTION = False
    assert b"MTurk PRODUCTION is ON" not in admin_client_.get(url).content
    settings.MTURK_PRODUCTION = True
    assert b"MTurk PRODUCTION is ON" in admin_client_.get(url).content
    stage = make_stage(make_project())
    change = reverse("admin:annotation_stage_change", args=[stage.pk])
    assert b"MTurk PRODUCTION is ON" in admin_client_.get(change).content


def test_estimate_publish_sync_close_from_the_admin(admin_client_):
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 2},
                           reward_per_hit=Decimal("0.50"), budget_cap=Decimal("100"))
    for _ in range(4):
        make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT)
    response = act(admin_client_, "stage", "estimate_cost", [stage.pk])
    assert any("rewards $2.00" in m and "budget cap $100" in m for m in messages_of(response))
    response = act(admin_client_, "stage", "publish_stages", [stage.pk])
    assert any("2 HITs created" in m for m in messages_of(response))
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING and stage.hits.count() == 2
    response = act(admin_client_, "stage", "sync_stages", [stage.pk])
    # Messages that start with a stage keep its slug's case (Django's capfirst made "Project-1").
    assert f"<li class=\"success\">{stage}: " in response.content.decode()
    # In-house: no platform to sync with ("0 submissions … approved 4" read as a contradiction).
    assert not any("submissions" in m for m in messages_of(response))
    assert any("In-house link has no platform to sync with" in m
               and "decided 0 submitted assignment(s)" in m for m in messages_of(response))
    response = act(admin_client_, "stage", "close_stages", [stage.pk], reason="enough")
    stage.refresh_from_db()
    assert stage.status == StageStatus.CLOSED
    assert stage.transitions.last().reason == "enough"
    response = act(admin_client_, "stage", "sync_stages", [stage.pk])
    assert any("Closed stage fully reconciled" in m for m in messages_of(response))
    stage.refresh_from_db()
    assert stage.reconciled_at is not None


def test_publish_refusal_is_shown(admin_client_):
    project = make_project(TaskKind.LIKERT, budget_cap=Decimal("0.10"))
    make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT)
    response = act(admin_client_, "stage", "publish_stages", [stage.pk])
    assert any("not published" in m and "budget cap" in m for m in messages_of(response))
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT


def _two_submitted():
    """Two submitted assignments of one item; the first holds a judgment."""
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    item = make_item(project)
    ok, bad = (make_assignment(stage, items=[item], status=AssignmentStatus.SUBMITTED)
               for _ in range(2))
    make_judgment(item=item, stage=stage, worker=ok.worker, assignment=ok)
    return ok, bad


def test_approve_reject_bonus_actions(admin_client_):
    ok, bad = _two_submitted()
    response = act(admin_client_, "assignment", "reject_assignments", [bad.pk])
    assert any("Type a reason" in m for m in messages_of(response))
    act(admin_client_, "assignment", "reject_assignments", [bad.pk], reason="off-topic")
    act(admin_client_, "assignment", "approve_assignments", [ok.pk])
    for _ in range(2):  # a double click pays once
        act(admin_client_, "assignment", "bonus_assignments", [ok.pk], amount="0.25",
            reason="thanks")
    ok.refresh_from_db()
    bad.refresh_from_db()
    assert (ok.status, bad.status) == (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED)
    assert ok.bonus_paid == Decimal("0.25")
    page = admin_client_.get(reverse("admin:annotation_worker_change", args=[ok.worker.pk]))
    assert b"Bonuses paid: $0.25" in page.content and b"Approved: 1" in page.content


@pytest.mark.mturk
def test_block_on_mturk_from_the_admin(admin_client_, mturk_server, celery_app):
    celery_app.conf.task_always_eager = True  # the provider's calls run here, not on a worker
    worker = make_worker(provider="mturk", external_id="A1WORKER")
    act(admin_client_, "worker", "block_on_provider", [worker.pk], reason="copy-paste answers")
    worker.refresh_from_db()
    assert worker.status == WorkerStatus.BLOCKED
    assert mturk_server.state.blocks == {"A1WORKER": "copy-paste answers"}
    act(admin_client_, "worker", "unblock_on_provider", [worker.pk])
    worker.refresh_from_db()
    assert worker.status == WorkerStatus.ACTIVE and mturk_server.state.blocks == {}
    act(admin_client_, "worker", "notify_workers", [worker.pk], **send("New HITs are up"))
    assert mturk_server.state.notifications[0]["WorkerIds"] == ["A1WORKER"]


def test_stage_page_shows_cost_and_status_is_not_editable(admin_client_):
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 3},
                           reward_per_hit=Decimal("1.00"))
    for _ in range(4):
        make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT, provider="mturk")
    url = reverse("admin:annotation_stage_change", args=[stage.pk])
    page = admin_client_.get(url).content.decode()
    assert "rewards $6.00" in page and "fees $1.20" in page  # 2 HITs × 3 × $1 + 20%
    assert not stage.items.exists()  # looking does not choose the stage's items
    assert 'name="status"' not in page
    assert f'/dashboard/?stage={stage.pk}"' in page  # the agreement report of this stage
    calls = admin_client_.get(reverse("admin:annotation_providercall_changelist"))
    assert calls.status_code == 200


def test_provider_calls_are_listed_read_only(admin_client_):
    from annotation.models import ProviderCall

    call = ProviderCall.objects.create(provider="mturk", operation="SendBonus", key="k1",
                                       token="t1", amount=Decimal("0.10"))
    listing = admin_client_.get(reverse("admin:annotation_providercall_changelist"))
    assert b"SendBonus" in listing.content
    change = admin_client_.get(reverse("admin:annotation_providercall_change", args=[call.pk]))
    assert change.status_code == 200 and b'name="token"' not in change.content


def _csv_rows(response) -> list[dict]:
    import csv
    import io

    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    return list(csv.DictReader(io.StringIO(response.content.decode("utf-8"))))


def test_inhouse_annotators_and_links_from_the_admin(admin_client_, client, settings):
    settings.QAJ_PUBLIC_BASE_URL = "https://qaj.example.org"
    project = make_project(TaskKind.LIKERT, items_per_hit=2)
    for _ in range(2):
        make_item(project)
    stage = make_stage(project, status=StageStatus.COLLECTING)
    response = act(admin_client_, "stage", "create_inhouse_links", [stage.pk],
                   reason="Ada Lovelace, Alan Turing")
    rows = _csv_rows(response)
    assert [(r["project"], r["stage"], r["annotator"]) for r in rows] == [
        (project.slug, stage.name, "Ada Lovelace"), (project.slug, stage.name, "Alan Turing")]
    links = [r["link"] for r in rows]
    assert all(u.startswith("https://qaj.example.org/task/link/") for u in links)
    from annotation.models import Worker

    ada = Worker.objects.get(external_id="ada-lovelace")
    assert ada.display_name == "Ada Lovelace" and ada.provider == "inhouse"
    page = client.get(links[0].removeprefix("https://qaj.example.org"))
    assert page.status_code == 200


def test_a_lost_link_is_revoked_and_reissued_and_links_download_again(admin_client_, client,
                                                                      settings):
    from annotation.models import InhouseLink

    settings.QAJ_PUBLIC_BASE_URL = "https://qaj.example.org"
    project = make_project(TaskKind.LIKERT, items_per_hit=2)
    for _ in range(2):
        make_item(project)
    stage = make_stage(project, status=StageStatus.COLLECTING)
    first = _csv_rows(act(admin_client_, "stage", "create_inhouse_links", [stage.pk],
                          reason="Ada Lovelace, Alan Turing"))
    ada_old, alan = (r["link"].removeprefix("https://qaj.example.org") for r in first)
    # The same links, downloaded again later from In-house links.
    ids = list(InhouseLink.objects.order_by("pk").values_list("pk", flat=True))
    again = _csv_rows(act(admin_client_, "inhouselink", "download_links", ids))
    assert [r["link"] for r in again] == [r["link"] for r in first]

    reissued = _csv_rows(act(admin_client_, "inhouselink", "reissue_links", ids[:1]))
    assert [r["annotator"] for r in reissued] == ["Ada Lovelace"]
    ada_new = reissued[0]["link"].removeprefix("https://qaj.example.org")
    assert ada_new != ada_old
    assert client.get(ada_old).status_code != 200  # the lost link no longer opens the task
    assert b"revoked" in client.get(ada_old).content
    assert client.get(ada_new).status_code == 200
    assert client.get(alan).status_code == 200  # the others are untouched
    new_link = InhouseLink.objects.get(revoked=False, worker__external_id="ada-lovelace")
    assert (new_link.project, new_link.stage) == (project, stage)
    # Revoked links are left out of a download; the change page shows the live link only.
    listed = _csv_rows(act(admin_client_, "inhouselink", "download_links",
                           list(InhouseLink.objects.values_list("pk", flat=True))))
    assert sorted(r["annotator"] for r in listed) == ["Ada Lovelace", "Alan Turing"]
    page = admin_client_.get(reverse("admin:annotation_inhouselink_change", args=[new_link.pk]))
    assert ada_new.encode() in page.content and b'name="nonce"' not in page.content


def test_assignments_are_never_deleted_in_the_admin(admin_client_):
    """An assignment without judgments (a page in progress, a returned HIT) is still the record
    of who held which items and what the provider said: no delete page, no bulk delete."""
    from annotation.models import Assignment

    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project, status=StageStatus.COLLECTING)
    assignment = make_assignment(stage, worker=make_worker(), items=[make_item(project)])
    url = reverse("admin:annotation_assignment_delete", args=[assignment.pk])
    assert admin_client_.post(url, {"post": "yes"}).status_code == 403
    act(admin_client_, "assignment", "delete_selected", [assignment.pk], post="yes")
    assert Assignment.objects.filter(pk=assignment.pk).exists()


def test_hits_are_never_added_by_hand_in_the_admin(client):
    """A HIT is built by publishing (or a draft's stored plan) from the stage's items, and its
    stage, provider and reward are read-only: an "Add HIT" page saved a HIT with none of them
    (a 500: NOT NULL constraint failed: annotation_hit.reward). No add page, for a researcher
    or a superuser."""
    from annotation.models import Hit

    make_project(TaskKind.LIKERT, owner=make_user("alice"))
    add = reverse("admin:annotation_hit_add")
    for user in (make_user("alice2"), make_user("root", superuser=True)):
        client.force_login(user)
        assert client.get(add).status_code == 403
        assert client.post(add, {"hititem_set-TOTAL_FORMS": 0,
                                 "hititem_set-INITIAL_FORMS": 0}).status_code == 403
    assert not Hit.objects.exists()


def test_a_drafts_hit_takes_no_item_of_another_project_on_its_page(admin_client_):
    """A draft's HITs are published as they stand (`stage_hits_build` keeps them), so the HIT
    page's items are what its workers will be served: an item of another project (here an A/B
    pair in a Likert study) is refused naming both projects, as it would be judged in a stage
    of a project it does not belong to (its judgments then counted in neither study's way)."""
    from annotation.models import HitItem

    project, other = make_project(TaskKind.LIKERT, slug="mine"), make_project(TaskKind.AB,
                                                                            slug="theirs")
    items = [make_item(project) for _ in range(2)]
    foreign = make_item(other)
    hit = make_hit(make_stage(project, status=StageStatus.DRAFT), items=items)
    url = reverse("admin:annotation_hit_change", args=[hit.pk])
    prefix = admin_client_.get(url).context["inline_admin_formsets"][0].formset.prefix
    rows = list(HitItem.objects.filter(hit=hit).order_by("position"))
    data = {f"{prefix}-TOTAL_FORMS": 3, f"{prefix}-INITIAL_FORMS": 2,
            f"{prefix}-MIN_NUM_FORMS": 0, f"{prefix}-MAX_NUM_FORMS": 1000}
    for i, row in enumerate([*rows, HitItem(hit=hit, item=foreign, position=2)]):
        data.update({f"{prefix}-{i}-id": row.pk or "", f"{prefix}-{i}-hit": hit.pk,
                     f"{prefix}-{i}-item": row.item_id, f"{prefix}-{i}-position": row.position})
    response = admin_client_.post(url, data)
    assert response.status_code == 200  # the page again, with the error
    errors = " ".join(str(e) for form in response.context["inline_admin_formsets"][0].formset
                      for e in form.errors.get("item", []))
    assert "'theirs'" in errors and "'mine'" in errors
    assert list(HitItem.objects.filter(hit=hit).values_list("item__project__slug", flat=True)
                ) == ["mine", "mine"]


def test_a_link_added_by_hand_keeps_the_rules_of_the_actions(admin_client_):
    """The link admin's add form refuses a stage of another project (the rule of
    `inhouse_link_create`), and an issued link never changes whom it lets in or where."""
    from annotation.models import InhouseLink

    project, other = make_project(TaskKind.LIKERT), make_project(TaskKind.LIKERT)
    foreign = make_stage(other, status=StageStatus.COLLECTING)
    ada, alan = make_worker(external_id="ada"), make_worker(external_id="alan")
    add = reverse("admin:annotation_inhouselink_add")
    page = admin_client_.post(add, {"worker": ada.pk, "project": project.pk,
                                    "stage": foreign.pk})
    assert page.status_code == 200
    assert "The stage belongs to another project." in page.context["adminform"].form.errors[
        "stage"]
    assert not InhouseLink.objects.exists()

    stage = make_stage(project, status=StageStatus.COLLECTING)
    assert admin_client_.post(add, {"worker": ada.pk, "project": project.pk,
                                    "stage": stage.pk}).status_code == 302
    link = InhouseLink.objects.get()
    change = reverse("admin:annotation_inhouselink_change", args=[link.pk])
    fields = admin_client_.get(change).context["adminform"].form.fields
    assert not {"worker", "project", "stage"} & set(fields)
    admin_client_.post(change, {"worker": alan.pk, "project": other.pk, "stage": foreign.pk,
                                "revoked": ""})
    link.refresh_from_db()
    assert (link.worker, link.project, link.stage) == (ada, project, stage)


@pytest.mark.mturk
def test_qualified_workers_are_told_about_the_trial(admin_client_, mturk_server):
    from annotation.models import StageKind, WorkerQualification

    project = make_project(TaskKind.LIKERT)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, provider="mturk")
    trial = make_stage(project, kind=StageKind.TRIAL, provider="mturk",
                       requires_stage=qualification)
    for worker_id, passed in [("WP1", True), ("WP2", True), ("WF", False)]:
        WorkerQualification.objects.create(
            worker=make_worker(provider="mturk", external_id=worker_id), stage=qualification,
            passed=passed, score=1.0 if passed else 0.2)
    blocked = make_worker(provider="mturk", external_id="WB", status=WorkerStatus.BLOCKED)
    WorkerQualification.objects.create(worker=blocked, stage=qualification, passed=True,
                                       score=1.0)
    response = act(admin_client_, "stage", "notify_qualified_workers", [trial.pk],
                   **send("The trial is open: 200 answers to judge."))
    assert any("messaged 2 qualified" in m for m in messages_of(response))
    sent = mturk_server.state.notifications
    assert len(sent) == 1 and sorted(sent[0]["WorkerIds"]) == ["WP1", "WP2"]
    assert sent[0]["MessageText"] == "The trial is open: 200 answers to judge."


def test_publish_in_the_background_with_the_broker_down_says_so(admin_client_, celery_app):
    project = make_project(TaskKind.LIKERT, items_per_hit=2)
    for _ in range(2):
        make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT)
    celery_app.conf.broker_url = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens there
    response = act(admin_client_, "stage", "publish_stages_background", [stage.pk])
    assert response.status_code == 200
    shown = messages_of(response)
    assert any("not queued — the task broker is unreachable" in m and "Connection refused" in m
               and 'use "Publish" to publish now' in m for m in shown), shown
    assert not any(m.startswith("Queued") for m in shown)
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT


def test_publish_in_the_background_queues_the_task(admin_client_, celery_app):
    project = make_project(TaskKind.LIKERT, items_per_hit=2)
    for _ in range(2):
        make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT)
    celery_app.conf.task_always_eager = True  # the task runs here instead of on a worker
    response = act(admin_client_, "stage", "publish_stages_background", [stage.pk])
    assert any(m.startswith("Queued 1 stage(s)") for m in messages_of(response))
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING


def test_unknown_balance_is_a_warning_in_the_admin(admin_client_):
    from annotation.providers import override_provider
    from annotation.providers.inhouse import InhouseProvider

    class Unreachable(InhouseProvider):
        def balance(self, *, stage=None):
            raise ConnectionError("no route to the provider")

    project = make_project(TaskKind.LIKERT, items_per_hit=2)
    make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT)
    with override_provider("inhouse", Unreachable()):
        shown = messages_of(act(admin_client_, "stage", "estimate_cost", [stage.pk]))
        assert any("balance unknown: ConnectionError: no route to the provider" in m
                   and "was NOT checked" in m for m in shown), shown
        shown = messages_of(act(admin_client_, "stage", "publish_stages", [stage.pk]))
    assert any("balance unknown" in m and "was NOT checked" in m for m in shown), shown
    stage.refresh_from_db()
    assert stage.status == StageStatus.COLLECTING  # published all the same


@pytest.mark.mturk
def test_a_repeated_notify_is_not_sent_twice(admin_client_, mturk_server):
    workers = [make_worker(provider="mturk", external_id=f"WN{n}") for n in range(2)]
    ids = [w.pk for w in workers]
    act(admin_client_, "worker", "notify_workers", ids, **send("New HITs are up"))
    response = act(admin_client_, "worker", "notify_workers", ids, **send("New HITs are up"))
    assert len(mturk_server.state.notifications) == 1
    assert any("2 had this exact message already" in m for m in messages_of(response))
    act(admin_client_, "worker", "notify_workers", ids, **send("More HITs are up"))
    assert len(mturk_server.state.notifications) == 2


@pytest.mark.mturk
def test_a_notify_whose_answer_was_lost_is_not_sent_again(admin_client_, mturk_server):
    worker = make_worker(provider="mturk", external_id="WLOSTN")
    mturk_server.lose_response_next["NotifyWorkers"] = 1  # delivered, then the answer is lost
    response = act(admin_client_, "worker", "notify_workers", [worker.pk], **send("Hello"))
    shown = messages_of(response)
    assert any("failed or unconfirmed for some" in m for m in shown), shown
    response = act(admin_client_, "worker", "notify_workers", [worker.pk], **send("Hello"))
    assert any("may have it already" in m for m in messages_of(response))
    assert len(mturk_server.state.notifications) == 1
    assert mturk_server.stats["requests:NotifyWorkers"] == 1  # never repeated


@pytest.mark.reliability
def test_money_state_is_read_only_in_the_forms(admin_client_):
    """#13 point 9: status and bonus change only through the actions that call the provider."""
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    assignment = make_assignment(stage, items=[make_item(project)],
                                 status=AssignmentStatus.SUBMITTED)
    url = reverse("admin:annotation_assignment_change", args=[assignment.pk])
    page = admin_client_.get(url)
    assert page.status_code == 200
    assert b'name="status"' not in page.content and b'name="bonus_paid"' not in page.content
    import re

    data = {"status": AssignmentStatus.APPROVED, "bonus_paid": "5.00",
            "review_note": "looked fine"}
    # What the browser would send back: the formset's hidden fields as the page has them.
    for tag in re.findall(rb'<input type="hidden"[^>]*>', page.content):
        name, value = re.search(rb'name="([^"]+)"', tag), re.search(rb'value="([^"]*)"', tag)
        if name and value and b"__prefix__" not in name.group(1):
            data.setdefault(name.group(1).decode(), value.group(1).decode())
    saved = admin_client_.post(url, data)
    assert saved.status_code == 302, saved.content[:2000]  # saved: the form was valid
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert assignment.bonus_paid == 0
    assert assignment.review_note == "looked fine"  # the researcher's note is theirs to type
    hit_page = admin_client_.get(reverse("admin:annotation_hit_add"))
    assert b'name="reward"' not in hit_page.content or hit_page.status_code == 403


def test_repeated_actions_say_what_they_did_and_what_was_done_already(admin_client_):
    """#13 point 10: "Approved 7" / "Paid $0.25" are never claimed when nothing was sent."""
    from annotation.models import ProviderCall

    ok, bad = _two_submitted()
    first = messages_of(act(admin_client_, "assignment", "approve_assignments", [ok.pk]))
    again = messages_of(act(admin_client_, "assignment", "approve_assignments", [ok.pk]))
    assert "Approved 1 assignment(s)." in first
    assert "Approved no assignment; 1 already approved." in again
    bonus = [messages_of(act(admin_client_, "assignment", "bonus_assignments", [ok.pk],
                             amount="0.25", reason="thanks")) for _ in range(2)]
    assert "Paid a $0.25 bonus on 1 assignment(s)." in bonus[0]
    assert ("Paid a $0.25 bonus on no assignment; 1 had this bonus already (not paid again)."
            in bonus[1])
    assert ProviderCall.objects.filter(operation="SendBonus").count() == 1
    for _ in range(2):
        act(admin_client_, "assignment", "reject_assignments", [bad.pk], reason="off-topic")
    bad.refresh_from_db()
    assert bad.review_note.count("Rejected: off-topic") == 1
    assert ProviderCall.objects.filter(operation="RejectAssignment").count() == 1


def test_publishing_again_counts_the_hits_already_there(admin_client_):
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 1})
    for _ in range(2):
        make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT)
    act(admin_client_, "stage", "publish_stages", [stage.pk])
    again = messages_of(act(admin_client_, "stage", "publish_stages", [stage.pk]))
    assert any("0 HITs created, 1 already there" in m for m in again), again


def test_an_action_that_failed_is_not_reported_as_a_success(admin_client_):
    """A researcher's day: a bonus of -1 was refused for the assignment, and the page said
    "Paid a $-1 bonus on no assignment." with a success tick above the error."""
    from django.contrib import messages as django_messages

    ok, _bad = _two_submitted()
    act(admin_client_, "assignment", "approve_assignments", [ok.pk])
    response = act(admin_client_, "assignment", "bonus_assignments", [ok.pk], amount="-1",
                   reason="thanks")
    levels = {str(m): m.level for m in response.context["messages"]}
    # One refusal of the whole selection, no summary of work not done (`assignments_bonus_pay`).
    assert levels == {"No bonus was paid: a bonus must be positive.": django_messages.ERROR}
    ok.refresh_from_db()
    assert ok.bonus_paid == 0
    paid = act(admin_client_, "assignment", "bonus_assignments", [ok.pk], amount="0.25",
               reason="thanks")
    assert [m.level for m in paid.context["messages"]] == [django_messages.SUCCESS]


def test_publishing_a_stage_behind_a_qualification_nobody_passed_says_work_waits_for_it(
        admin_client_):
    """A trial that requires a qualification nobody has passed yet published with "1 HITs
    created" and nothing more, and the researcher waited for work no one could take."""
    from annotation.cockpit_selectors import study_cockpit
    from annotation.models import StageKind
    from annotation.selectors import stage_awaits_qualified_workers
    from testing.factories import make_qualification

    project = make_project(TaskKind.LIKERT)
    make_item(project)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.COLLECTING)
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial", order=2,
                       requires_stage=qualification, status=StageStatus.DRAFT)
    shown = messages_of(act(admin_client_, "stage", "publish_stages", [trial.pk]))
    assert any("HITs created" in m and "nobody has passed it yet" in m
               and "only workers who pass qual" in m for m in shown), shown
    # The cockpit's next step says the same, not "wait for submissions".
    steps = {row.stage.pk: row.next_step for row in study_cockpit(project=project).stages}
    assert "nobody has passed it yet" in steps[trial.pk]
    make_qualification(worker=make_worker(), stage=qualification, passed=True)
    assert stage_awaits_qualified_workers(trial) == ""  # a pass: work can arrive
    steps = {row.stage.pk: row.next_step for row in study_cockpit(project=project).stages}
    assert "nobody has passed" not in steps[trial.pk]


def test_a_bonus_is_paid_as_typed_or_refused_naming_what_is_wrong(admin_client_):
    """One rule for every bonus (`bonus_amount`): dollars in whole cents, above $0. "0.015"
    was paid as $0.02 while the message said "Paid a $0.015 bonus"; "0.001" was refused as
    not positive; "Infinity", "sNaN" and "1e100" ended the page in a server error; "NaN"
    read "[<class 'decimal.InvalidOperation'>]"."""
    from annotation.models import ProviderCall
    from annotation.services.review import ReviewError, assignment_bonus_pay

    ok, _bad = _two_submitted()
    act(admin_client_, "assignment", "approve_assignments", [ok.pk])
    for typed in ("Infinity", "sNaN", "NaN", "-Infinity", "abc", ""):
        shown = messages_of(act(admin_client_, "assignment", "bonus_assignments", [ok.pk],
                                amount=typed, reason="thanks"))
        assert shown == [f"No bonus was paid: the bonus amount {typed!r} is not a number of "
                         f"dollars (e.g. 0.50)."], shown
    refusals = {"0.015": "not a whole number of cents: the provider pays cents (type 0.01 or "
                         "0.02)",
                "0.001": "not a whole number of cents",
                "1e100": "is more than $999999.99"}
    for typed, why in refusals.items():
        shown = messages_of(act(admin_client_, "assignment", "bonus_assignments", [ok.pk],
                                amount=typed, reason="thanks"))
        assert len(shown) == 1 and shown[0].startswith("No bonus was paid: "), shown
        assert why in shown[0], (typed, shown)
    assert not ProviderCall.objects.filter(operation="SendBonus").exists()
    with pytest.raises(ReviewError, match="whole number of cents"):  # the Celery task's door
        assignment_bonus_pay(assignment=ok, amount=Decimal("0.125"), reason="thanks")
    shown = messages_of(act(admin_client_, "assignment", "bonus_assignments", [ok.pk],
                            amount="0.50", reason="thanks"))
    assert shown == ["Paid a $0.50 bonus on 1 assignment(s)."]
    ok.refresh_from_db()
    assert ok.bonus_paid == Decimal("0.50")


@pytest.mark.reliability
def test_unblock_on_the_provider_that_fails_names_the_worker_and_changes_nothing(admin_client_,
                                                                              celery_app):
    """A provider that cannot be reached (no credentials) was a 500 for the whole selection;
    the block action already reported each failure. Nothing changes for the failed worker; its
    call, queued and made in the background, names it and the provider's error."""
    from unittest import mock

    from annotation.models import ProviderCall, ProviderCallStatus
    from annotation.providers.mturk import MTurkProvider

    celery_app.conf.task_always_eager = True
    worker = make_worker(provider="mturk", external_id="A2WORKER", status=WorkerStatus.BLOCKED,
                         blocked_reason="fraud")
    with mock.patch.object(MTurkProvider, "unblock",
                           side_effect=RuntimeError("Unable to locate credentials")):
        response = act(admin_client_, "worker", "unblock_on_provider", [worker.pk])
    assert response.status_code == 200
    assert any("Queued the provider's unblocks of 1 worker(s)" in m
               for m in messages_of(response)), messages_of(response)
    call = ProviderCall.objects.get(worker=worker, operation="UnblockWorker")
    assert call.status == ProviderCallStatus.FAILED
    assert call.error == "RuntimeError: Unable to locate credentials"
    worker.refresh_from_db()
    assert (worker.status, worker.blocked_reason) == (WorkerStatus.BLOCKED, "fraud")
