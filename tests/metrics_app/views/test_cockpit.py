"""The study cockpit: stages in pipeline order, progress, work waiting for review, the agreement
gate the publish guard applies, and money spent and committed against the budget."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.cockpit_selectors import study_cockpit
from annotation.models import Assignment, AssignmentStatus, StageKind, StageStatus, TaskKind
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


def _study(owner=None):
    """A Likert study: a collecting trial (3 workers agreeing on 2 of 4 items' scores, one
    submitted assignment waiting, one approved with a bonus) and a draft full stage gated on
    the trial's α."""
    project = make_project(TaskKind.LIKERT, owner=owner, budget_cap=Decimal("50.00"),
                           reward_per_hit=Decimal("1.00"), items_per_hit=2,
                           redundancy={"default": 3})
    items = [make_item(project) for _ in range(4)]
    full = make_stage(project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT,
                      agreement_threshold=0.5, order=2)
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial", order=1,
                       settings={"n_items": 4})
    trial.items.set(items)
    # Published: its HITs were built (a stage that never built any commits only what it paid).
    for pair in (items[:2], items[2:]):
        make_hit(trial, items=pair, max_assignments=3, reward=Decimal("1.00"))
    for n, status in enumerate([AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED,
                                AssignmentStatus.APPROVED]):
        worker = make_worker()
        assignment = make_assignment(trial, worker=worker, items=items, status=status)
        for index, item in enumerate(items):
            make_judgment(item=item, stage=trial, worker=worker, assignment=assignment,
                          score=1 + index if n < 2 else 5 - index)
    approved = Assignment.objects.filter(stage=trial, status=AssignmentStatus.APPROVED)
    approved.filter(pk=approved.first().pk).update(bonus_paid=Decimal("0.50"))
    return project, trial, full


def test_the_cockpit_reads_the_study_as_its_researcher_would():
    project, trial, full = _study()
    cockpit = study_cockpit(project=project)
    assert [row.stage.name for row in cockpit.stages] == ["trial", "full"]  # pipeline order
    trial_row, full_row = cockpit.stages
    assert trial_row.waiting_review == 1
    assert (trial_row.progress.judgments, trial_row.progress.wanted) == (12, 12)
    assert trial_row.alpha is not None and trial_row.alpha < 0.5
    # In-house stages cost nothing in fees: 2 approved × $1.00 + a $0.50 bonus.
    assert trial_row.spent == Decimal("2.50") and cockpit.spent == Decimal("2.50")
    assert full_row.gate_open is False
    assert full_row.gate == f"needs α ≥ 0.5 on “trial” (α = {trial_row.alpha:.2f})"
    assert full_row.next_step == "estimate the cost, then publish"
    assert trial_row.next_step.startswith("review the submitted work (open “to review”")
    assert cockpit.budget == Decimal("50.00")
    # Only published stages are committed; the draft full stage is not. The $0.50 bonus is
    # beyond the stage's bonus budget ($0): it adds to the $6 of rewards the estimate holds,
    # never hides in the $4 of them not paid yet.
    assert cockpit.committed == trial_row.estimate + Decimal("0.50")


def test_the_cockpit_page_shows_the_pipeline_and_is_private(client):
    alice = make_user("alice")
    project, trial, full = _study(owner=alice)
    url = reverse("metrics:project-cockpit", args=[project.slug])
    client.force_login(make_user("mallory"))
    assert client.get(url).status_code == 404
    client.force_login(alice)
    page = client.get(url).content.decode()
    assert "study cockpit" in page and "Spent <strong>$2.50</strong>" in page
    assert "1 to review" in page and f"stage__id__exact={trial.pk}" in page
    assert "gate-shut\">shut</span> needs α ≥ 0.5 on “trial”" in page
    assert "budget cap <strong>$50.00</strong>" in page
    dashboard = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    assert url in dashboard.content.decode()


def test_the_cockpit_counts_what_counts_against_what_the_stage_will_collect(client):
    """A rejection leaves the trial short (it showed "12 / 12"); a qualification counts takers
    against its max takers (it showed items × redundancy, "0 / 41 on 23 items"); an imported
    stage has no plan to exceed (the LFQA demo showed "260 / 140")."""
    owner = make_user("owner")
    project, trial, _full = _study(owner=owner)
    Assignment.objects.filter(stage=trial, status=AssignmentStatus.APPROVED).update(
        status=AssignmentStatus.REJECTED)  # both approved ones: 8 of 12 judgments no longer count
    gold = [make_item(project, gold={"score": 3}) for _ in range(3)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.DRAFT,
                               settings={"n_items": 3, "max_workers": 15})
    qualification.items.set(gold)
    imported = make_stage(project, kind=StageKind.IMPORTED, name="imported", provider="import")
    for item in gold:
        for _ in range(3):  # three judgments per item, more than the redundancy's plan
            make_judgment(item=item, stage=imported, worker=make_worker())
    rows = {row.stage.name: row for row in study_cockpit(project=project).stages}
    trial_count = rows["trial"].progress
    assert (trial_count.counted, trial_count.not_counted, trial_count.planned) == (4, 8, 12)
    assert trial_count.percent == 33
    assert rows["qual"].progress.text() == "0 of 15 takers counted (0%); 0 passed"
    assert rows["imported"].progress.planned is None and rows["imported"].progress.percent == 100
    assert rows["imported"].progress.text() == "9 judgments counted"
    client.force_login(owner)
    page = client.get(reverse("metrics:project-cockpit", args=[project.slug])).content.decode()
    assert "4 of 12 judgments counted (33%); 8 collected but not counted" in page
    assert "0 of 15 takers counted" in page and "9 judgments counted" in page


def test_flagged_work_waits_for_the_researcher_on_the_cockpit(client):
    """A researcher's day: the review rules held the careful annotator's trial back (too fast
    for `min_seconds_per_item`), status flagged. The cockpit showed "1 to review" (the other
    one, submitted) and nothing else: the held work, counted and paid for nothing until it is
    decided, had no link and the closed stage said "done"."""
    alice = make_user("alice")
    project, trial, _full = _study(owner=alice)
    Assignment.objects.filter(stage=trial, status=AssignmentStatus.APPROVED).update(
        status=AssignmentStatus.FLAGGED,
        review_note="Held for review: 0.7 s per item is below the minimum of 2.0 s")
    trial_row = study_cockpit(project=project).stages[0]
    assert (trial_row.waiting_review, trial_row.flagged) == (1, 2)
    client.force_login(alice)
    page = client.get(reverse("metrics:project-cockpit", args=[project.slug])).content.decode()
    assert "1 to review" in page
    assert "2 flagged, held for your decision" in page
    assert f"stage__id__exact={trial.pk}&amp;status__exact=flagged" in page

    Assignment.objects.filter(stage=trial, status=AssignmentStatus.SUBMITTED).update(
        status=AssignmentStatus.APPROVED)
    trial.status = StageStatus.CLOSED
    trial.save(update_fields=["status"])
    trial_row = study_cockpit(project=project).stages[0]
    assert trial_row.waiting_review == 0 and trial_row.flagged == 2
    assert trial_row.next_step == "review the waiting work first"


def test_an_in_house_stage_with_nothing_to_review_does_not_send_the_researcher_to_review():
    """Walking a first study: publishing an in-house trial makes it "collecting" at once, and
    the cockpit's next step said "review the submitted work" beside "–" to review, before any
    annotator had opened a link. With nothing waiting it now says to send the links (nobody
    started) or to wait for the work (someone did)."""
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 2})
    items = [make_item(project) for _ in range(2)]
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial")
    trial.items.set(items)
    make_hit(trial, items=items, max_assignments=2)

    row = study_cockpit(project=project).stages[0]
    assert row.waiting_review == 0
    assert row.next_step.startswith("send the annotators their links")

    make_assignment(trial, items=items, status=AssignmentStatus.APPROVED)
    row = study_cockpit(project=project).stages[0]
    assert row.next_step.startswith("wait for the annotators' work")

    make_assignment(trial, items=items, status=AssignmentStatus.SUBMITTED)
    row = study_cockpit(project=project).stages[0]
    assert row.next_step.startswith("review the submitted work (open “to review”")


def test_a_reviewing_stage_with_everything_decided_says_to_close_it():
    """Walking a first study: the qualification had every taker approved, and the cockpit
    still said "review what is waiting, then close" beside "–" to review."""
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 1})
    items = [make_item(project, gold={"score": 3}) for _ in range(2)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.REVIEWING)
    qualification.items.set(items)
    make_hit(qualification, items=items, max_assignments=1)
    waiting = make_assignment(qualification, items=items, status=AssignmentStatus.SUBMITTED)
    row = study_cockpit(project=project).stages[0]
    assert row.next_step == "review what is waiting, then close"
    Assignment.objects.filter(pk=waiting.pk).update(status=AssignmentStatus.APPROVED)
    row = study_cockpit(project=project).stages[0]
    assert row.next_step.startswith("nothing waits for review: close the stage")


def test_a_stage_published_past_its_gate_says_overridden_not_shut_or_blocked(client):
    """Walking a first study: the full stage was published with an override reason (the
    trial's α had no value yet) and was collecting, while the cockpit still said "shut" and the
    dashboard "blocked" beside it."""
    from annotation.services.stages import stage_publish
    from metrics_app.reports.project import project_report

    owner = make_user("override-owner")
    project, trial, full = _study(owner=owner)
    trial.status = StageStatus.REVIEWING
    trial.save(update_fields=["status"])
    for _ in range(2):  # items the trial did not release, for the full stage
        make_item(project)
    row = {r.stage.name: r for r in study_cockpit(project=project).stages}["full"]
    assert row.gate_open is False  # a draft: the gate still decides
    stage_publish(stage=full, user=owner, override_reason="instructions revised")
    row = {r.stage.name: r for r in study_cockpit(project=project).stages}["full"]
    assert row.gate_open is None
    assert row.gate.startswith("published with an override (“instructions revised”)")
    client.force_login(owner)
    page = client.get(reverse("metrics:project-cockpit", args=[project.slug])).content.decode()
    assert "gate-shut" not in page and "published with an override" in page
    stages = {s["name"]: s for s in project_report(project=project)["stages"]}
    assert stages["full"]["gate"]["overridden"] == "instructions revised"
    dashboard = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    html = dashboard.content.decode()
    assert "published with an override (“instructions revised”)" in html
    assert '<span class="flags">blocked</span>' not in html


def test_the_cockpit_offers_the_stage_actions_to_every_stage_but_a_closed_one(client):
    """A closed stage is reopened at no door, so its row links to no stage action; every
    other one does (the template asked the stored string "closed" before)."""
    alice = make_user("alice")
    project, trial, full = _study(owner=alice)
    make_stage(project, kind=StageKind.PILOT, name="pilot", status=StageStatus.CLOSED)
    client.force_login(alice)
    rows = {row.stage.name: row.acts for row in study_cockpit(project=project).stages}
    assert rows == {"trial": True, "full": True, "pilot": False}
    page = client.get(reverse("metrics:project-cockpit", args=[project.slug])).content.decode()
    assert page.count(">stage actions</a>") == 2


def test_the_budget_committed_reads_its_real_share_over_the_cap_too(client):
    """The share was capped at 100%: a project committing $6.50 under a $5.00 cap (a cap
    stored below what is committed: work the provider approved and paid itself, data older
    than the rule) read "100% of the budget committed", and $6.50 of a $6.52 cap read 100%
    too. The real share, rounded down, and by how much the cap is passed."""
    from annotation.models import Project

    alice = make_user("alice")
    project, _trial, _full = _study(owner=alice)
    assert study_cockpit(project=project).committed == Decimal("6.50")
    client.force_login(alice)
    url = reverse("metrics:project-cockpit", args=[project.slug])
    Project.objects.filter(pk=project.pk).update(budget_cap=Decimal("5.00"))
    project.refresh_from_db()
    assert study_cockpit(project=project).budget_used_percent == 130
    page = client.get(url).content.decode()
    assert "130% of the budget committed: <strong>$1.50 over the budget cap</strong>" in page
    Project.objects.filter(pk=project.pk).update(budget_cap=Decimal("6.52"))
    page = client.get(url).content.decode()
    assert "99% of the budget committed</p>" in page, page
