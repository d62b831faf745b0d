"""One justification pasted on every item of an A/B assignment: a plausible sentence, long
enough and found in neither answer, so the page takes it on each item. A study walk found such
work approved and paid by auto-review and unmarked on the review page and the dashboard. The
review rules hold it ("the same justification on K of N items", stage setting
`review.max_same_justification_share`), the review page and the dashboard say it, all by one
comparison (`annotation/domain/answers.py:same_justification_count`)."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.domain.answers import justification_key, same_justification_count
from annotation.domain.stage_settings import BY_KEY, StageSettingError, setting_check
from annotation.models import AssignmentStatus, StageKind, TaskKind
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

PASTED = "Answer B is clearly more complete and explains the reasoning much better."
# The same sentence as a worker pastes and retouches it: case, spacing, punctuation.
RETOUCHED = ("answer b is clearly more complete, and explains the reasoning much better",
             "  Answer B is clearly more complete and explains the   reasoning much better!!")


def _honest(n: int) -> str:
    return f"Answer {'AB'[n % 2]} covers point {n} that the other answer leaves out entirely."


def _ab_assignment(stage, justifications, worker=None):
    worker = worker or make_worker()
    items = [make_item(stage.project) for _ in justifications]
    assignment = make_assignment(stage, worker=worker, items=items,
                                 status=AssignmentStatus.SUBMITTED)
    for n, (item, text) in enumerate(zip(items, justifications, strict=True)):
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                      choice="AB"[n % 2], presented_order=["A", "B"], time_spent_ms=30_000,
                      justification=text)
    return assignment


def test_normalised_comparison():
    assert {justification_key(PASTED), *map(justification_key, RETOUCHED)} == {
        "answer b is clearly more complete and explains the reasoning much better"}
    assert same_justification_count([PASTED, *RETOUCHED, "", "Other."]) == 3
    assert same_justification_count(["Once.", "", None]) == 0  # written once: not repeated


@pytest.mark.reliability
def test_the_same_justification_on_nearly_every_item_is_held_with_the_count(db):
    stage = make_stage(make_project(TaskKind.AB))
    pasted = _ab_assignment(stage, [PASTED, *RETOUCHED, *[PASTED] * 6, _honest(1)])
    decision = assignment_review_rules(assignment=pasted)
    assert decision.action == "hold"
    assert decision.reasons == ["the same justification on 9 of 10 items"]
    assert decision.metrics["same_justification_items"] == 9
    # A short phrase honestly reused on 2 of 10 items is fine.
    careful = _ab_assignment(stage, ["B is more complete."] * 2
                             + [_honest(n) for n in range(8)])
    decision = assignment_review_rules(assignment=careful)
    assert decision.action == "approve", decision.reasons
    assert decision.metrics["same_justification_share"] == 0.2
    # Below the straight-lining minimum of items nothing is judged.
    assert assignment_review_rules(assignment=_ab_assignment(stage, [PASTED] * 4)).action \
        == "approve"
    # The stage setting moves the threshold, and auto_reject rejects with the reason.
    stage.settings = {"review": {"max_same_justification_share": 0.2, "auto_reject": True}}
    stage.save()
    decision = assignment_review_rules(assignment=careful)
    assert decision.action == "reject"
    assert decision.reasons == ["the same justification on 2 of 10 items"]


def test_the_setting_is_checked_like_the_other_review_shares():
    spec = BY_KEY["review.max_same_justification_share"]
    assert setting_check(spec, 0.5) == 0.5
    with pytest.raises(StageSettingError):
        setting_check(spec, 1.5)


def test_the_review_page_and_the_dashboard_say_it(client):
    owner = make_user()
    project = make_project(TaskKind.AB, owner=owner, slug="ab-pasted")
    stage = make_stage(project, kind=StageKind.FULL)
    paster, careful = make_worker(external_id="paster"), make_worker(external_id="careful")
    first = _ab_assignment(stage, [PASTED] * 9 + [_honest(0)], worker=paster)
    _ab_assignment(stage, [PASTED] * 2 + [_honest(n) for n in range(8)], worker=careful)
    client.force_login(owner)
    page = client.get(reverse("admin:annotation_assignment_change", args=[first.pk]))
    assert "the same justification on 9 of 10 items" in page.content.decode()
    rows = {w["external_id"]: w for w in project_report(project=project)["workers"]}
    assert rows["paster"]["same_justification_share"] == 0.9
    assert "same justification" in rows["paster"]["flags"]
    assert rows["careful"]["same_justification_share"] == 0.2
    assert "same justification" not in rows["careful"]["flags"]
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug]) +
                      "?sort=justification").content.decode()
    assert "same justification</th>" in html and "<strong>justification</strong>" in html
    assert html.index("paster") < html.index("careful")
