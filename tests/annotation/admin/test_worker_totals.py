"""A worker's totals on the admin (issue #32, point 7): the change page showed a researcher the
judgments, assignments, bonuses and qualifications of other researchers' projects, while the
list column was scoped. Both now count only the projects the viewer may see."""
from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.models import AssignmentStatus, StageKind, TaskKind, WorkerQualification
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]


@pytest.fixture
def shared_worker():
    """One worker: 2 judgments in Alice's study, 5 (a bonus and a failed qualification) in
    Bob's."""
    alice, bob = make_user("alice"), make_user("bob")
    worker = make_worker(external_id="w-shared")
    for owner, n, bonus in ((alice, 2, Decimal("0")), (bob, 5, Decimal("3.50"))):
        project = make_project(TaskKind.LIKERT, owner=owner)
        stage = make_stage(project, name=f"{owner.username}-full")
        items = [make_item(project) for _ in range(n)]
        assignment = make_assignment(stage, worker=worker, items=items,
                                     status=AssignmentStatus.APPROVED, bonus_paid=bonus)
        for item in items:
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment)
        if owner is bob:
            qual = make_stage(project, kind=StageKind.QUALIFICATION, name="bob-secret-qual")
            WorkerQualification.objects.create(worker=worker, stage=qual, passed=False,
                                               score=0.1, n_items=5)
    return {"alice": alice, "bob": bob, "worker": worker}


def _page(client, user, worker) -> str:
    client.force_login(user)
    response = client.get(reverse("admin:annotation_worker_change", args=[worker.pk]))
    assert response.status_code == 200
    return response.content.decode()


def _list_cell(client, user) -> list[str]:
    client.force_login(user)
    html = client.get(reverse("admin:annotation_worker_changelist")).content.decode()
    return re.findall(r'<td class="field-n_judgments">(\d+)</td>', html)


def test_a_researcher_sees_the_totals_of_their_own_projects_only(client, shared_worker):
    worker = shared_worker["worker"]
    page = _page(client, shared_worker["alice"], worker)
    assert "Judgments collected: 2, of which 2 count" in page and "Approved: 2" not in page and "Approved: 1" in page
    assert "Bonuses paid: $0.00" in page and "bob-secret-qual" not in page
    assert _list_cell(client, shared_worker["alice"]) == ["2"]

    page = _page(client, shared_worker["bob"], worker)
    assert "Judgments collected: 5, of which 5 count" in page and re.search(r"Bonuses paid: \$3\.50?<", page)
    assert "bob-secret-qual: failed" in page
    assert _list_cell(client, shared_worker["bob"]) == ["5"]

    root = make_user("root", superuser=True)
    page = _page(client, root, worker)
    assert "Judgments collected: 7, of which 7 count" in page and "Approved: 2" in page
    assert _list_cell(client, root) == ["7"]
