"""The review page of one assignment: the worker's answers next to gold, the other workers'
answers and times, and approve / reject / bonus / block from the page itself."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.models import AssignmentStatus, TaskKind, WorkerStatus
from annotation.review_selectors import assignment_review
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


def _reviewed_assignment(owner=None):
    """A worker's 3 Likert items: one with gold (answered wrong), one where 2 others agree with
    each other but not with this worker, one left unanswered."""
    project = make_project(TaskKind.LIKERT, owner=owner)
    stage = make_stage(project)
    gold_item = make_item(project, gold={"score": 5}, content={
        "passage": "p", "question": "Who wrote Hamlet?", "reference": "Shakespeare",
        "candidate": "Marlowe"})
    disputed, skipped = make_item(project), make_item(project)
    assignment = make_assignment(stage, items=[gold_item, disputed, skipped],
                                 status=AssignmentStatus.SUBMITTED)
    make_judgment(item=gold_item, stage=stage, worker=assignment.worker, assignment=assignment,
                  score=2, time_spent_ms=1500)
    make_judgment(item=disputed, stage=stage, worker=assignment.worker, assignment=assignment,
                  score=1, time_spent_ms=900)
    for seconds in (20, 30):
        other = make_assignment(stage, items=[disputed], status=AssignmentStatus.SUBMITTED)
        make_judgment(item=disputed, stage=stage, worker=other.worker, assignment=other, score=4,
                      time_spent_ms=seconds * 1000)
    return assignment


def test_the_review_rows_put_the_answer_beside_gold_and_the_others():
    rows = assignment_review(assignment=_reviewed_assignment())
    assert [r.position for r in rows] == [1, 2, 3]
    gold_row, disputed, skipped = rows
    assert (gold_row.question, gold_row.answer, gold_row.gold, gold_row.matches_gold) == (
        "Who wrote Hamlet?", "2", "5", False)
    assert disputed.others == [("4", 2)] and disputed.agrees_with_others is False
    assert (disputed.seconds, disputed.others_median_seconds) == (0.9, 25.0)
    assert skipped.answer == "" and skipped.matches_gold is None


def test_the_assignment_page_shows_the_review_and_decides_from_it(client):
    client.force_login(make_user(superuser=True))
    assignment = _reviewed_assignment()
    url = reverse("admin:annotation_assignment_change", args=[assignment.pk])
    page = client.get(url).content.decode()
    assert "this worker&#x27;s answers beside gold" in page or \
        "this worker's answers beside gold" in page
    assert "2 of 3 items answered; 0 of 1 gold items right; agrees with the others&#x27; " \
           "most given answer on 0 of 1" in page
    assert "differs from gold" in page and "4 (2)" in page and "0.9 (0.9) [25.0]" in page
    assert "<strong>candidate:</strong> Marlowe" in page
    assert "<strong>reference:</strong> Shakespeare" in page
    decide = reverse("admin:annotation_assignment_decide", args=[assignment.pk])
    refused = client.post(decide, {"decision": "reject"}, follow=True)
    assert "Type a reason" in refused.content.decode()
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    client.post(decide, {"decision": "approve"})
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED
    client.post(decide, {"decision": "bonus", "amount": "0.10", "reason": "effort"})
    assignment.refresh_from_db()
    assert assignment.bonus_paid == Decimal("0.10")
    back = client.post(decide, {"decision": "block", "reason": "spam"})
    assert back.status_code == 302 and back.url == url
    assignment.worker.refresh_from_db()
    assert assignment.worker.status == WorkerStatus.BLOCKED


def test_a_researcher_cannot_review_or_decide_on_another_researchers_assignment(client):
    assignment = _reviewed_assignment(owner=make_user("alice"))
    client.force_login(make_user("mallory"))
    decide = reverse("admin:annotation_assignment_decide", args=[assignment.pk])
    response = client.post(decide, {"decision": "approve"})
    assert response.status_code in (403, 404)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert client.get(decide).status_code in (403, 404)
    make_worker()  # nothing else changed: no worker blocked


def test_gold_accuracy_is_one_definition_on_the_review_page_and_the_dashboard(client):
    """Every item has a gold score (imported labels, no gold-check flag): the dashboard's gold
    accuracy and the review page's summary count the same items with the same tolerance."""
    from metrics_app.reports.project import project_report

    owner = make_user()
    project = make_project(TaskKind.LIKERT, owner=owner, qualification_tolerance=0.5)
    stage = make_stage(project)
    items = [make_item(project, gold={"score": score}) for score in (4.4, 2.0, 3.0)]
    assignment = make_assignment(stage, items=items, status=AssignmentStatus.SUBMITTED)
    for item, score in zip(items, (4, 2, 5), strict=True):  # within 0.5, exact, 2 off
        make_judgment(item=item, stage=stage, worker=assignment.worker, assignment=assignment,
                      score=score)
    rows = assignment_review(assignment=assignment)
    assert [r.matches_gold for r in rows] == [True, True, False]
    worker_row = next(w for w in project_report(project=project)["workers"]
                      if w["worker_id"] == assignment.worker_id)
    assert (worker_row["gold_accuracy"], worker_row["n_gold"]) == (pytest.approx(2 / 3), 3)
    client.force_login(owner)
    page = client.get(reverse("admin:annotation_assignment_change",
                              args=[assignment.pk])).content.decode()
    assert "2 of 3 gold items right" in page
    dashboard = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    assert "66.7% (3)" in dashboard.content.decode()


def test_the_review_page_shows_what_the_worker_judged():
    """The question alone does not say whether "2" was a fair score: the candidate and the
    reference sit beside it."""
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    item = make_item(project, content={"passage": "p", "question": "Who wrote Hamlet?",
                                       "references": ["Shakespeare"], "candidate": "Marlowe"})
    assignment = make_assignment(stage, items=[item], status=AssignmentStatus.SUBMITTED)
    make_judgment(item=item, stage=stage, worker=assignment.worker, assignment=assignment,
                  score=2)
    (row,) = assignment_review(assignment=assignment)
    assert row.judged == [("candidate", "Marlowe"), ("reference", "Shakespeare")]


@pytest.mark.reliability
def test_an_ab_choice_says_the_letter_the_worker_saw_beside_their_justification(client):
    """A study walk: the review page listed the answers in the file's order and the worker's
    choice as "A — “Answer B addresses the question directly…”": the answers had been swapped
    on the worker's page, and an honest justification read as a contradiction to the
    researcher about to reject it (unpaid). The choice now says under which letter it was
    seen; a choice seen under its own letter, or with no recorded order, stays as it was."""
    project = make_project(TaskKind.AB)
    stage = make_stage(project)
    swapped, same, imported = make_item(project), make_item(project), make_item(project)
    assignment = make_assignment(stage, items=[swapped, same, imported],
                                 status=AssignmentStatus.SUBMITTED)
    for item, order in ((swapped, ["B", "A"]), (same, ["A", "B"]), (imported, [])):
        make_judgment(item=item, stage=stage, worker=assignment.worker, assignment=assignment,
                      choice="A", presented_order=order,
                      justification="Answer B explains the mechanism; the other does not.")
    rows = assignment_review(assignment=assignment)
    assert rows[0].answer.startswith(
        "A (shown to them as B: the answers were swapped on their page) — “Answer B explains")
    assert rows[1].answer.startswith("A — “Answer B") and rows[2].answer.startswith("A — “")
    client.force_login(make_user(superuser=True))
    page = client.get(reverse("admin:annotation_assignment_change", args=[assignment.pk]))
    assert "shown to them as B" in page.content.decode()
