"""A block lifted here only says when the provider still blocks the worker, at every door that
lifts one (the dashboard's Unblock, the admin's "Unblock selected workers", the worker's change
form): `annotation/selectors.py:provider_block_stands_warning`, reading
`annotation/selectors.py:workers_blocked_on_provider`, the last block or unblock a provider
carried out (a succeeded BlockWorker / UnblockWorker call).

Before: a worker the study's block rule (or "Block on the provider too") had blocked on MTurk
was "Unblocked" from the dashboard with a green tick, while MTurk's CreateWorkerBlock stood and
the worker could accept none of the study's HITs."""
from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from annotation.models import (
    Provider,
    ProviderCall,
    ProviderCallStatus,
    StageKind,
    TaskKind,
    Worker,
    WorkerStatus,
)
from annotation.selectors import blocked_worker_ids_for, workers_blocked_on_provider
from annotation.services.workers import worker_block, workers_block
from testing import factories
from tests.support.admin_forms import admin_form_as_posted

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _provider_call(worker: Worker, operation: str, *, response=None) -> None:
    ProviderCall.objects.create(
        provider=worker.provider, operation=operation, token="t",
        key=f"{worker.provider}:{operation}:{worker.pk}:{ProviderCall.objects.count()}",
        status=ProviderCallStatus.SUCCEEDED, completed_at=timezone.now(), worker=worker,
        response=response or {})


@pytest.fixture
def study():
    owner = factories.make_user("block-owner")
    project = factories.make_project(TaskKind.LIKERT, owner=owner)
    stage = factories.make_stage(project, kind=StageKind.TRIAL, provider=Provider.MTURK)
    workers = [factories.make_worker(provider=Provider.MTURK, external_id=f"AW{n}")
               for n in range(3)]
    for worker in workers:
        factories.make_judgment(item=factories.make_item(project), stage=stage, worker=worker)
    workers_block(workers=workers, reason="3 rejected assignments", by=owner)
    _provider_call(workers[0], "BlockWorker")  # blocked on MTurk too
    _provider_call(workers[1], "BlockWorker")
    _provider_call(workers[1], "UnblockWorker")  # and unblocked there since
    return project, owner, workers


def test_the_rule(study):
    _project, _owner, workers = study
    prolific = factories.make_worker(provider=Provider.PROLIFIC)
    _provider_call(prolific, "BlockWorker", response={"local_only": True})  # no block list
    assert workers_blocked_on_provider([w.pk for w in [*workers, prolific]]) == {workers[0].pk}


def test_the_dashboards_unblock_says_the_provider_still_blocks(client, study):
    project, owner, workers = study
    client.force_login(owner)
    for worker, warned in ((workers[0], True), (workers[1], False)):
        response = client.post(reverse("metrics:worker-unblock", args=[project.slug, worker.pk]),
                               follow=True)
        shown = [str(m) for m in get_messages(response.wsgi_request)]
        assert any("provider still blocks them" in line for line in shown) is warned, shown
        assert worker.pk not in blocked_worker_ids_for(project)


def test_the_admins_unblock_names_who_the_provider_still_blocks(client, study):
    _project, owner, workers = study
    client.force_login(owner)
    response = client.post(reverse("admin:annotation_worker_changelist"), {
        "action": "unblock_workers", "_selected_action": [w.pk for w in workers]})
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    stands = [line for line in shown if "provider still blocks them" in line]
    assert len(stands) == 1 and "AW0" in stands[0], shown
    assert "AW1" not in stands[0] and "AW2" not in stands[0]


def test_the_worker_forms_unblock_says_the_provider_still_blocks(client, study):
    """A superuser setting a worker's status back to active on the worker's change form lifts
    the global block here only: it said nothing while MTurk still blocked the worker. The form
    warns as the other doors do (`provider_block_stands_warning`), and only for a worker the
    provider still blocks."""
    _project, _owner, workers = study
    su = factories.make_user("block-su", superuser=True)
    client.force_login(su)
    for worker, warned in ((workers[0], True), (workers[1], False)):
        worker_block(worker=worker, reason="bad", by=None)
        url = reverse("admin:annotation_worker_change", args=[worker.pk])
        data = admin_form_as_posted(client.get(url), status=WorkerStatus.ACTIVE)
        response = client.post(url, data, follow=True)
        worker.refresh_from_db()
        assert worker.status == WorkerStatus.ACTIVE
        shown = [str(m) for m in get_messages(response.wsgi_request)]
        stands = [line for line in shown if "provider still blocks them" in line]
        assert bool(stands) is warned, shown
        assert all(worker.external_id in line for line in stands)
