"""One rule at every door: every worker the project's review rules act on (hold, reject, and
through the rejections block) carries the workers table's flag for that reason, with the
rule's words and numbers. The dashboard's own looks used other thresholds (straight-lining at
≥ 0.9 on ≥ 10 judgments, gold accuracy below 0.6 on ≥ 3 checks; the rule: 1.0 on ≥ 5 items,
below 0.5 on ≥ 2 checks), so a worker the rule rejected for 2 of 2 wrong checks, or for the
same answer on 5 to 9 items, stood "fine" beside the automatic rejection."""
from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.domain.answers import (
    FLAG_LOW_GOLD_ACCURACY,
    FLAG_SAME_JUSTIFICATION,
    FLAG_STRAIGHT_LINING,
)
from annotation.models import AssignmentStatus, TaskKind
from annotation.services.review import assignment_review_rules
from metrics_app.reports.project import project_report
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

# Every status the rules read; a held or rejected assignment's judgments count nowhere.
STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.FLAGGED, AssignmentStatus.REJECTED,
            AssignmentStatus.APPROVED)


def _worker_with(stage, scores, *, gold_checks=0, status):
    """One worker, one assignment: `scores` per item (seconds well above any minimum), the
    first `gold_checks` items gold checks whose right answer is 3."""
    worker = make_worker()
    items = [make_item(stage.project, is_gold_check=n < gold_checks,
                       gold={"score": 3} if n < gold_checks else None)
             for n in range(len(scores))]
    assignment = make_assignment(stage, worker=worker, items=items, status=status)
    for item, score in zip(items, scores, strict=True):
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment, score=score,
                      time_spent_ms=6000)
    return assignment


def _synthetic_workers(stage):
    """Workers around each boundary of the rules: straight-lining on 3 to 11 items, every
    answer the same or all but one; 1 to 4 gold checks, every number of them wrong."""
    assignments = []
    for n in (3, 4, 5, 6, 9, 10, 11):
        for same in (n, n - 1):
            scores = [2] * same + [4] * (n - same)
            assignments.append(_worker_with(stage, scores,
                                            status=STATUSES[len(assignments) % 4]))
    for n_checks in (1, 2, 3, 4):
        for wrong in range(n_checks + 1):
            # Right answers 3, wrong ones 1, one more item answered 5: no straight-lining.
            scores = [1] * wrong + [3] * (n_checks - wrong) + [5]
            assignments.append(_worker_with(stage, scores, gold_checks=n_checks,
                                            status=STATUSES[len(assignments) % 4]))
    return assignments


@pytest.mark.reliability
@pytest.mark.parametrize("review", [
    {},  # the defaults: the same answer on 100% of ≥ 5 items; below 50% on ≥ 2 checks
    {"straightline_min_items": 3, "max_same_answer_share": 0.75, "min_gold_accuracy": 0.7,
     "min_gold_checks_to_reject": 3, "auto_reject": True},
], ids=["default rules", "configured rules"])
def test_every_worker_a_review_rule_acts_on_is_flagged_for_its_reason(review):
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project, settings={"review": review})
    assignments = _synthetic_workers(stage)

    acted = _assert_flagged_as_the_rules_act(project, assignments)
    # The grid reaches both sides of each boundary: some workers acted on, some not.
    assert 0 < acted[FLAG_STRAIGHT_LINING] < len(assignments)
    assert 0 < acted[FLAG_LOW_GOLD_ACCURACY] < len(assignments)


def _assert_flagged_as_the_rules_act(project, assignments) -> dict[str, int]:
    """Each worker (one assignment each) carries every flag the rule raises on their work, with
    the rule's reason, and no rule reason where the rule approves; returns how many workers the
    rules acted on per flag."""
    rows = {row["worker_id"]: row for row in project_report(project=project)["workers"]}
    acted = {FLAG_STRAIGHT_LINING: 0, FLAG_LOW_GOLD_ACCURACY: 0}
    for assignment in assignments:
        decision = assignment_review_rules(assignment=assignment)
        for flag, reason in decision.flags.items():
            assert decision.action != "approve"
            row = rows.get(assignment.worker_id)
            assert row is not None, f"{reason}: the worker has no row"
            assert flag in row["flags"], f"{reason}: flags {row['flags']}"
            assert row["flag_reasons"][flag] == reason
            acted[flag] = acted.get(flag, 0) + 1
        if decision.action == "approve":
            # A worker no rule acts on carries no rule reason (looks may still flag them).
            assert not rows.get(assignment.worker_id, {}).get("flag_reasons")
    return acted


@pytest.mark.reliability
def test_ab_workers_the_rules_act_on_are_flagged_too():
    """A/B reads positions on screen and justifications: pressing the left answer on 5 to 6
    items, one pasted justification, fewer items than the rule judges from."""
    project = make_project(TaskKind.AB)
    stage = make_stage(project)
    left, right = ["A", "B"], ["B", "A"]
    assignments = []
    for n, pasted in ((4, False), (5, False), (6, False), (5, True), (6, True)):
        for all_left in (True, False):
            worker = make_worker()
            items = [make_item(project) for _ in range(n)]
            assignment = make_assignment(stage, worker=worker, items=items,
                                         status=STATUSES[len(assignments) % 4])
            for k, item in enumerate(items):
                order = left if all_left or k else right
                note = ("B is more complete and answers the question directly" if pasted
                        else f"answer {k} covers point {k * 7} of the question best")
                make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                              choice="A", presented_order=order, justification=note,
                              time_spent_ms=6000)
            assignments.append(assignment)
    acted = _assert_flagged_as_the_rules_act(project, assignments)
    assert 0 < acted[FLAG_STRAIGHT_LINING] < len(assignments)
    assert 0 < acted.get(FLAG_SAME_JUSTIFICATION, 0) < len(assignments)


@pytest.mark.reliability
def test_the_cases_the_dashboard_called_fine_are_flagged_in_the_rules_words(client):
    """2 of 2 checks wrong, and the same answer on 5 items (both under the dashboard's old
    thresholds), rejected by the default rules with `auto_reject`: flagged, the reason shown
    beside the flag on the dashboard and by `manage.py report`, though none of their work
    counts any more."""
    owner = make_user()
    project = make_project(TaskKind.LIKERT, owner=owner)
    stage = make_stage(project, settings={"review": {"auto_reject": True}})
    two_wrong = _worker_with(stage, [1, 1, 5], gold_checks=2, status=AssignmentStatus.REJECTED)
    five_same = _worker_with(stage, [2] * 5, status=AssignmentStatus.SUBMITTED)
    assert assignment_review_rules(assignment=two_wrong).action == "reject"
    assert assignment_review_rules(assignment=five_same).action == "reject"

    rows = {row["worker_id"]: row for row in project_report(project=project)["workers"]}
    assert rows[two_wrong.worker_id]["flags"] == [FLAG_LOW_GOLD_ACCURACY]
    assert rows[two_wrong.worker_id]["n_judgments"] == 0  # rejected: counted nowhere
    assert "below 50%" in rows[two_wrong.worker_id]["flag_reasons"][FLAG_LOW_GOLD_ACCURACY]
    assert rows[five_same.worker_id]["flags"] == [FLAG_STRAIGHT_LINING]

    client.force_login(owner)
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "accuracy on check items 0% (0 of 2) is below 50%" in page
    assert "the same answer on 100% of 5 items (the rule: 100% or more on 5 items or more)" in page
    # `manage.py report` lists them the same way.
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert (f"{two_wrong.worker.external_id}: low gold accuracy (review rule: accuracy on check "
            "items 0% (0 of 2) is below 50%)") in out.getvalue()
