"""The admin's "Block / unblock on the provider too" over a selection: the block here is written
at once, the provider's calls run in the background (one Celery task per click), and each
worker's outcome stays on their provider call, a failure naming the worker and the provider's
error. Calling the provider once per worker inside the request took 68 s for 1,000 workers
whose credentials failed."""
from __future__ import annotations

import re
from unittest import mock

import pytest
from django.urls import reverse

from annotation.models import ProviderCall, ProviderCallStatus, WorkerBlock, WorkerStatus
from annotation.providers.mturk import MTurkProvider
from core.background import task_run_here
from testing.factories import make_item, make_judgment, make_project, make_user, make_worker
from testing.mturk_server import MTurkError

pytestmark = pytest.mark.django_db


def act(client, action: str, workers, **fields):
    return client.post(reverse("admin:annotation_worker_changelist"),
                       {"action": action, "_selected_action": [str(w.pk) for w in workers],
                        "index": "0", **fields}, follow=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def _batch(shown: list[str]) -> str:
    return re.search(r"\(batch ([\w-]+)\)", " ".join(shown)).group(1)


@pytest.mark.reliability
@pytest.mark.mturk
def test_block_on_the_provider_is_queued_and_each_outcome_names_the_worker(client, mturk_server):
    """No provider call inside the request; the task makes them; a refused one is FAILED on
    its row, naming the worker and MTurk's error, the others succeed."""
    researcher = make_user("researcher-blocks")
    client.force_login(researcher)
    workers = [make_worker(provider="mturk", external_id=f"A{n}OK") for n in range(3)]
    bad = make_worker(provider="mturk", external_id="ABAD")
    item = make_item(make_project(owner=researcher))
    for worker in [*workers, bad]:  # a researcher acts on the workers of their projects
        make_judgment(item=item, worker=worker)
    create_block = mturk_server.state.CreateWorkerBlock

    def refuse_bad(p):
        if p["WorkerId"] == "ABAD":
            raise MTurkError("The worker ID ABAD is not valid.")
        return create_block(p)

    with mock.patch.object(MTurkProvider, "block",
                           side_effect=AssertionError("a provider call in the request")):
        shown = messages_of(act(client, "block_on_provider", [*workers, bad], reason="spam"))
    # The block here is written at once (the researcher's, for their projects).
    assert WorkerBlock.objects.filter(researcher=researcher, reason="spam").count() == 4
    assert mturk_server.state.blocks == {}
    batch = _batch(shown)
    assert any("Blocked 4 worker(s) here." == m for m in shown), shown
    assert any("Queued the provider's blocks of 4 worker(s)" in m and f"?q={batch}" in m
               and "failed with the provider's error" in m for m in shown), shown
    calls = ProviderCall.objects.filter(key__endswith=batch)
    assert set(calls.values_list("status", flat=True)) == {ProviderCallStatus.PENDING}

    # What the Celery worker runs.
    with mock.patch.object(mturk_server.state, "CreateWorkerBlock", side_effect=refuse_bad):
        outcome = task_run_here("worker.tasks.providers.worker_provider_calls_run", args=[batch])
    assert outcome == {"succeeded": 3, "failed": 1}
    assert mturk_server.state.blocks == {f"A{n}OK": "spam" for n in range(3)}
    failed = calls.get(status=ProviderCallStatus.FAILED)
    assert failed.worker == bad and "ABAD is not valid" in failed.error
    # The researcher who queued them sees each outcome under Provider calls.
    page = client.get(reverse("admin:annotation_providercall_changelist"), {"q": batch})
    text = page.content.decode()
    assert "ABAD" in text and "ABAD is not valid" in text and "A0OK" in text
    # A redelivered task repeats nothing.
    assert task_run_here("worker.tasks.providers.worker_provider_calls_run",
                         args=[batch]) == {"succeeded": 0, "failed": 0}


@pytest.mark.reliability
def test_block_on_the_provider_with_the_broker_down_blocks_here_and_says_so(client, celery_app):
    client.force_login(make_user(superuser=True))
    worker = make_worker(provider="mturk", external_id="ADOWN")
    celery_app.conf.broker_url = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens there
    shown = messages_of(act(client, "block_on_provider", [worker], reason="fraud"))
    worker.refresh_from_db()
    assert (worker.status, worker.blocked_reason) == (WorkerStatus.BLOCKED, "fraud")
    assert any("NOT queued: the task broker is unreachable" in m for m in shown), shown
    call = ProviderCall.objects.get(worker=worker)
    assert call.status == ProviderCallStatus.FAILED
    assert call.error.startswith("not sent: the task broker is unreachable")


@pytest.mark.reliability
def test_unblock_on_the_provider_unblocks_here_only_once_the_provider_has(client, celery_app):
    """Queued: still blocked here; the task unblocks on the provider, then here."""
    from annotation.providers import override_provider

    client.force_login(make_user(superuser=True))
    worker = make_worker(provider="mturk", external_id="AUNB", status=WorkerStatus.BLOCKED,
                         blocked_reason="fraud")
    shown = messages_of(act(client, "unblock_on_provider", [worker]))
    batch = _batch(shown)
    worker.refresh_from_db()
    assert worker.status == WorkerStatus.BLOCKED  # the provider has not been asked yet
    provider = mock.Mock(spec=MTurkProvider)
    provider.unblock.return_value = {"unblocked": "AUNB"}
    with override_provider("mturk", provider):
        task_run_here("worker.tasks.providers.worker_provider_calls_run", args=[batch])
    provider.unblock.assert_called_once()
    worker.refresh_from_db()
    assert worker.status == WorkerStatus.ACTIVE
    assert ProviderCall.objects.get(key__endswith=batch).status == ProviderCallStatus.SUCCEEDED


@pytest.mark.reliability
def test_a_block_undone_before_its_task_ran_is_not_sent_to_the_provider(client, celery_app):
    """Block by mistake, unblock at once: the unblock's task may run first, and the block's
    task then blocked the worker on the whole requester account while active here."""
    from annotation.providers import override_provider

    client.force_login(make_user(superuser=True))
    worker = make_worker(provider="mturk", external_id="AOOPS")
    batch = _batch(messages_of(act(client, "block_on_provider", [worker], reason="oops")))
    provider = mock.Mock(spec=MTurkProvider)
    provider.unblock.return_value = {"unblocked": "AOOPS"}
    undo = _batch(messages_of(act(client, "unblock_on_provider", [worker])))
    with override_provider("mturk", provider):
        task_run_here("worker.tasks.providers.worker_provider_calls_run", args=[undo])
        outcome = task_run_here("worker.tasks.providers.worker_provider_calls_run",
                                args=[batch])
    provider.block.assert_not_called()
    assert outcome == {"succeeded": 0, "failed": 1}
    worker.refresh_from_db()
    assert worker.status == WorkerStatus.ACTIVE
    call = ProviderCall.objects.get(key__endswith=batch)
    assert call.status == ProviderCallStatus.FAILED
    assert call.error.startswith("not sent: ") and "was unblocked here before" in call.error


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.mturk
def test_a_real_worker_makes_the_queued_blocks_on_the_mturk_fake(workers, redis_url, aws_env,
                                                                  celery_app):
    """Through Redis to a real Celery worker process, which calls the local MTurk server."""
    from annotation.services.review.provider_blocks import workers_block_on_provider_enqueue
    from testing.mturk_server import MTurkServer
    from tests.support.celery_workers import KEY_PREFIX, wait_for

    blocked = [make_worker(provider="mturk", external_id=f"AREAL{n}") for n in range(3)]
    with MTurkServer() as server:
        worker = workers(queue="default", MTURK_ENDPOINT_URL=server.url)
        celery_app.conf.broker_url = redis_url
        saved_options = celery_app.conf.broker_transport_options
        celery_app.conf.broker_transport_options = {"global_keyprefix": KEY_PREFIX}
        try:
            queued = workers_block_on_provider_enqueue(workers=blocked, reason="bots",
                                                       by=make_user(superuser=True))
        finally:
            celery_app.conf.broker_transport_options = saved_options
        assert queued.queued == 3 and not queued.not_queued
        calls = ProviderCall.objects.filter(key__endswith=queued.batch)
        wait_for(lambda: not calls.filter(status=ProviderCallStatus.PENDING).exists(), worker,
                 120, "the queued blocks")
        assert set(calls.values_list("status", flat=True)) == {ProviderCallStatus.SUCCEEDED}
        assert server.state.blocks == {f"AREAL{n}": "bots" for n in range(3)}


@pytest.mark.reliability
@pytest.mark.mturk
def test_a_queued_block_is_not_sent_for_a_researcher_who_lost_the_project(client, mturk_server):
    """A share revoked (or the staff flag removed) between the click and the task: the
    provider's block is not sent, as queued publishing, scoring and judge jobs are not run
    (`queued_access_refusal`); the call says why."""
    owner, helper = make_user("owner-revokes"), make_user("helper-revoked")
    project = make_project(owner=owner, shared_with=[helper])
    worker = make_worker(provider="mturk", external_id="AREVOKED")
    make_judgment(item=make_item(project), worker=worker)
    client.force_login(helper)
    batch = _batch(messages_of(act(client, "block_on_provider", [worker], reason="spam")))
    project.shared_with.remove(helper)

    outcome = task_run_here("worker.tasks.providers.worker_provider_calls_run", args=[batch])
    assert outcome == {"succeeded": 0, "failed": 1}
    assert mturk_server.state.blocks == {}
    call = ProviderCall.objects.get(key__endswith=batch)
    assert call.status == ProviderCallStatus.FAILED
    assert "helper-revoked, who queued it, no longer has access" in call.error


@pytest.mark.reliability
@pytest.mark.mturk
def test_a_queued_block_is_not_sent_for_an_account_deleted_since(client, mturk_server):
    researcher = make_user("deleted-after-click")
    worker = make_worker(provider="mturk", external_id="ADELETED")
    make_judgment(item=make_item(make_project(owner=researcher)), worker=worker)
    client.force_login(researcher)
    batch = _batch(messages_of(act(client, "block_on_provider", [worker], reason="spam")))
    client.logout()
    WorkerBlock.objects.filter(researcher=researcher).delete()
    researcher.delete()

    outcome = task_run_here("worker.tasks.providers.worker_provider_calls_run", args=[batch])
    assert outcome == {"succeeded": 0, "failed": 1}
    assert mturk_server.state.blocks == {}
    assert "has been deleted since" in ProviderCall.objects.get(key__endswith=batch).error


@pytest.mark.reliability
@pytest.mark.mturk
def test_a_queued_unblock_still_goes_for_an_account_deleted_since(client, mturk_server):
    """The account's own blocks went with it, so the provider's block must not outlive them:
    its queued unblock is still sent (only a block is held back for a deleted account)."""
    researcher = make_user("unblocks-then-deleted")
    worker = make_worker(provider="mturk", external_id="AUNDEL")
    make_judgment(item=make_item(make_project(owner=researcher)), worker=worker)
    client.force_login(researcher)
    block = _batch(messages_of(act(client, "block_on_provider", [worker], reason="spam")))
    task_run_here("worker.tasks.providers.worker_provider_calls_run", args=[block])
    assert mturk_server.state.blocks == {"AUNDEL": "spam"}
    unblock = _batch(messages_of(act(client, "unblock_on_provider", [worker])))
    client.logout()
    researcher.delete()

    outcome = task_run_here("worker.tasks.providers.worker_provider_calls_run", args=[unblock])
    assert outcome == {"succeeded": 1, "failed": 0}
    assert mturk_server.state.blocks == {}
