"""A rejection made by mistake, or overturned on a worker's appeal, is reversed through one
service (`assignment_rejection_reverse`) at every door (the admin's action, the assignment's
page): MTurk approves the work with OverrideRejection (within 30 days of its submission), an
in-house one is recorded here, Prolific's API cannot (refused, naming what to do); who, when
and why are kept; the work counts again; a block the rejections caused stays and is named;
twice does nothing the second time; only researchers who see the project may."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.cost_selectors import stage_paid
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Judgment,
    Provider,
    ProviderCall,
    StageKind,
    WorkerQualification,
)
from annotation.selectors import judgments_that_count
from annotation.services.review import (
    ReviewError,
    assignment_reject,
    assignment_rejection_reverse,
    stage_sync_and_review,
    worker_block_everywhere,
)
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
)
from tests.support.providers import (
    mturk_qualification_hand_reviewed,
    w1_submitted_awaiting_review,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _counted(assignment: Assignment) -> int:
    return judgments_that_count(Judgment.objects.filter(assignment=assignment)).count()


def _rejected(provider: str = Provider.INHOUSE, *, owner=None, n_items: int = 2,
              kind: str = StageKind.FULL, **fields) -> Assignment:
    """A worker's assignment of `n_items` judged items, rejected here (in-house: a local
    record; other providers: as if the provider had confirmed and rejected it)."""
    project = make_project(owner=owner)
    stage = make_stage(project, provider=provider, kind=kind)
    items = [make_item(project) for _ in range(n_items)]
    confirmed = {} if provider == Provider.INHOUSE else {"provider_confirmed_at": timezone.now()}
    assignment = make_assignment(stage, items=items, status=AssignmentStatus.SUBMITTED,
                                 submitted_at=timezone.now(), **confirmed, **fields)
    for item in items:
        make_judgment(item=item, stage=stage, worker=assignment.worker, assignment=assignment)
    if provider == Provider.INHOUSE:
        assignment_reject(assignment=assignment, reason="too fast")
    else:
        Assignment.objects.filter(pk=assignment.pk).update(status=AssignmentStatus.REJECTED)
        assignment.refresh_from_db()
    return assignment


# --- the service ----------------------------------------------------------------------------


def test_an_inhouse_rejection_is_reversed_with_who_when_and_why_and_counts_again():
    owner = make_user("alice")
    assignment = _rejected(owner=owner)
    assert _counted(assignment) == 0
    reversal = assignment_rejection_reverse(assignment=assignment, reason="appeal upheld",
                                            by=owner)
    assert reversal.already == "" and reversal.warnings == []
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED
    assert _counted(assignment) == 2
    assert "Rejected: too fast" in assignment.review_note  # the rejection stays on record
    assert "Rejection reversed (" in assignment.review_note
    assert "by alice): appeal upheld" in assignment.review_note
    call = ProviderCall.objects.get(assignment=assignment, operation="ApproveAssignment")
    assert call.request == {"override_rejection": True, "reason": "appeal upheld",
                            "by": "alice"}
    assert call.status == "succeeded"


def test_reversing_twice_does_nothing_the_second_time_and_says_so():
    owner = make_user("alice")
    assignment = _rejected(owner=owner)
    assignment_rejection_reverse(assignment=assignment, reason="appeal upheld", by=owner)
    note = Assignment.objects.get(pk=assignment.pk).review_note
    again = assignment_rejection_reverse(assignment=assignment, reason="appeal upheld",
                                         by=owner)
    assert "reversed already" in again.already and "by alice" in again.already
    assert "nothing was sent or changed again" in again.already
    assert Assignment.objects.get(pk=assignment.pk).review_note == note
    assert ProviderCall.objects.filter(assignment=assignment,
                                       operation="ApproveAssignment").count() == 1


@pytest.mark.parametrize("status", [AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED,
                                    AssignmentStatus.FLAGGED, AssignmentStatus.RETURNED])
def test_work_that_is_not_rejected_is_refused(status):
    project = make_project()
    stage = make_stage(project)
    assignment = make_assignment(stage, status=status)
    with pytest.raises(ReviewError, match="not rejected: there is no rejection to reverse"):
        assignment_rejection_reverse(assignment=assignment, reason="appeal")
    assignment.refresh_from_db()
    assert assignment.status == status
    assert not ProviderCall.objects.filter(assignment=assignment).exists()


def test_a_reversal_needs_a_reason():
    assignment = _rejected()
    with pytest.raises(ReviewError, match="needs a reason"):
        assignment_rejection_reverse(assignment=assignment, reason="  ")
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED


def test_only_researchers_who_see_the_project_reverse_its_rejections():
    alice, mallory, bob = make_user("alice"), make_user("mallory"), make_user("bob")
    assignment = _rejected(owner=alice)
    assignment.stage.project.shared_with.add(bob)
    with pytest.raises(ReviewError, match="a project you cannot see"):
        assignment_rejection_reverse(assignment=assignment, reason="appeal", by=mallory)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED
    assignment_rejection_reverse(assignment=assignment, reason="appeal", by=bob)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED


def test_prolific_is_refused_naming_why_and_what_to_do():
    assignment = _rejected(Provider.PROLIFIC)
    with pytest.raises(ReviewError) as refused:
        assignment_rejection_reverse(assignment=assignment, reason="appeal upheld")
    message = str(refused.value)
    assert "Prolific's API cannot reverse a rejection" in message
    assert "researcher app" in message and "next sync" in message and "bonus" in message
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED
    assert not ProviderCall.objects.filter(assignment=assignment).exists()


def test_a_block_the_rejections_caused_stays_and_is_named():
    owner = make_user("alice")
    assignment = _rejected(owner=owner)
    project = assignment.stage.project
    worker_block_everywhere(worker=assignment.worker, reason="1 rejected assignments", by=owner,
                            study_rule=True, rule_project_id=project.pk)
    reversal = assignment_rejection_reverse(assignment=assignment, reason="appeal", by=owner)
    (warning,) = reversal.warnings
    assert "still blocked in this project by its block-after-rejections rule" in warning
    assert "1 rejected assignments" in warning and "0 rejection(s)" in warning
    assert "Unblock selected workers" in warning
    assert assignment.worker.blocks.filter(researcher=owner).exists()  # not lifted
    assert _counted(assignment) == 0  # the block still keeps the work out


def test_a_reversed_qualification_counts_again():
    assignment = _rejected(kind=StageKind.QUALIFICATION)
    WorkerQualification.objects.create(worker=assignment.worker, stage=assignment.stage,
                                       passed=True, score=1.0, n_items=2,
                                       assignment=assignment)
    from annotation.selectors import qualification_results_that_count
    assert not qualification_results_that_count().exists()
    assignment_rejection_reverse(assignment=assignment, reason="appeal")
    assert qualification_results_that_count().count() == 1


# --- MTurk: OverrideRejection ---------------------------------------------------------------


@pytest.mark.mturk
def test_mturk_approves_the_rejected_work_with_override_rejection(mturk_server, likert_study,
                                                                  researcher, client):
    state = mturk_server.state
    project = likert_study[0]
    project.owner = researcher
    project.save(update_fields=["owner"])
    stage, _hit, w1, assignment = w1_submitted_awaiting_review(state, likert_study, researcher,
                                                               client)
    stage_sync_and_review(stage=stage)  # MTurk lists it: confirmed
    assignment_reject(assignment=assignment, reason="same answer everywhere")
    assert state.assignments[w1]["AssignmentStatus"] == "Rejected"
    assert stage_paid(stage=stage).rewards == Decimal("0")

    reversal = assignment_rejection_reverse(assignment=assignment, reason="appeal upheld",
                                            by=researcher)
    assert reversal.already == ""
    assert state.overridden == [w1]
    assert state.assignments[w1]["AssignmentStatus"] == "Approved"
    assert state.assignments[w1]["RequesterFeedback"] == "appeal upheld"
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED
    assert _counted(assignment) == 5
    assert stage_paid(stage=stage).rewards == Decimal("0.48")  # $0.40 and MTurk's 20%

    calls = len(state.calls)
    again = assignment_rejection_reverse(assignment=assignment, reason="appeal upheld",
                                         by=researcher)
    assert "reversed already" in again.already
    assert state.calls[calls:] == [] and state.overridden == [w1]
    sync, _review = stage_sync_and_review(stage=stage)  # MTurk and here agree
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.APPROVED and sync.mirrored == 0


@pytest.mark.mturk
def test_mturk_past_30_days_is_refused_before_anything_is_sent(mturk_server, likert_study,
                                                                researcher, client):
    state = mturk_server.state
    stage, _hit, w1, assignment = w1_submitted_awaiting_review(state, likert_study, researcher,
                                                               client)
    stage_sync_and_review(stage=stage)
    assignment_reject(assignment=assignment, reason="same answer everywhere")
    Assignment.objects.filter(pk=assignment.pk).update(
        submitted_at=timezone.now() - dt.timedelta(days=31))
    assignment.refresh_from_db()
    calls = len(state.calls)
    with pytest.raises(ReviewError, match="only within 30 days of its submission") as refused:
        assignment_rejection_reverse(assignment=assignment, reason="appeal upheld")
    assert "31 days ago" in str(refused.value) and "bonus" in str(refused.value)
    assert state.calls[calls:] == [] and state.overridden == []
    assert state.assignments[w1]["AssignmentStatus"] == "Rejected"
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.REJECTED


# --- the doors: the admin's action and the assignment's page ---------------------------------


def _act(client, ids, **fields):
    url = reverse("admin:annotation_assignment_changelist")
    data = {"action": "reverse_rejections", "_selected_action": [str(i) for i in ids],
            "index": "0", **fields}
    return client.post(url, data, follow=True)


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_the_admin_action_reverses_with_a_reason_once(client):
    owner = make_user("alice")
    client.force_login(owner)
    assignment = _rejected(owner=owner)
    refused = _act(client, [assignment.pk])
    assert any("Type why the rejection is reversed" in m for m in _messages(refused))
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.REJECTED
    done = _act(client, [assignment.pk], reason="appeal upheld")
    assert "Reversed the rejection of (approved) 1 assignment(s)." in _messages(done)
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.APPROVED
    again = _act(client, [assignment.pk], reason="appeal upheld")
    assert ("Reversed the rejection of (approved) no assignment; 1 reversed already (nothing "
            "sent again).") in _messages(again)


def test_the_admin_action_names_each_refusal_and_warning(client):
    owner = make_user("alice")
    client.force_login(owner)
    prolific = _rejected(Provider.PROLIFIC, owner=owner)
    blocked = _rejected(owner=owner)
    worker_block_everywhere(worker=blocked.worker, reason="1 rejected assignments", by=owner,
                            study_rule=True, rule_project_id=blocked.stage.project_id)
    lines = _messages(_act(client, [prolific.pk, blocked.pk], reason="appeal upheld"))
    assert any(line.startswith(str(prolific)) and "Prolific's API cannot" in line
               for line in lines)
    assert any(line.startswith(str(blocked)) and "still blocked" in line for line in lines)
    assert Assignment.objects.get(pk=prolific.pk).status == AssignmentStatus.REJECTED


def test_the_assignment_page_reverses_a_rejection_and_others_cannot(client):
    owner = make_user("alice")
    assignment = _rejected(owner=owner)
    decide = reverse("admin:annotation_assignment_decide", args=[assignment.pk])
    client.force_login(make_user("mallory"))
    assert client.post(decide, {"decision": "reverse", "reason": "x"}).status_code in (403, 404)
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.REJECTED
    client.force_login(owner)
    page = client.get(reverse("admin:annotation_assignment_change",
                              args=[assignment.pk])).content.decode()
    assert 'value="reverse"' in page and "Reverse rejection (approve)" in page
    client.post(decide, {"decision": "reverse", "reason": "appeal upheld"})
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.APPROVED
    page = client.get(reverse("admin:annotation_assignment_change",
                              args=[assignment.pk])).content.decode()
    assert 'value="reverse"' not in page  # only rejected work offers it


@pytest.mark.mturk
def test_a_reversed_qualification_gets_its_pass_back_on_mturk(mturk_server, likert_study,
                                                              researcher, client):
    """A pass taken back on MTurk at the rejection (the value below the pass mark) is granted
    again when the rejection is reversed, once; so is one granted as a fail (rejected before
    the review granted it)."""
    from annotation.domain.qualification_scores import percent_threshold
    from annotation.services.review import stage_auto_review
    from annotation.services.review.sync import provider_sync

    state = mturk_server.state
    stage, submits = mturk_qualification_hand_reviewed(state, likert_study, researcher, client)
    mark = percent_threshold(likert_study[0].qualification_threshold)

    first = submits("WOK1")
    stage_sync_and_review(stage=stage)
    qual_type = stage.__class__.objects.get(pk=stage.pk).settings["mturk_qualification_type_id"]
    first.refresh_from_db()
    assignment_reject(assignment=first, reason="copied answers")
    assert state.scores[(qual_type, "WOK1")] < mark
    reversal = assignment_rejection_reverse(assignment=first, reason="appeal upheld")
    assert reversal.warnings == []
    assert state.scores[(qual_type, "WOK1")] >= mark
    stage_auto_review(stage=stage)  # nothing is sent again
    assert ProviderCall.objects.get(key__contains="qualification-regrant").attempts == 1

    second = submits("WOK2")
    provider_sync(stage=stage)
    second.refresh_from_db()
    assignment_reject(assignment=second, reason="copied answers")
    stage_auto_review(stage=stage)  # granted as a fail
    assert state.scores[(qual_type, "WOK2")] < mark
    assignment_rejection_reverse(assignment=second, reason="appeal upheld")
    assert state.scores[(qual_type, "WOK2")] >= mark


def test_every_door_that_counts_reads_the_reversed_work():
    """The export, the project report (its judgments and workers table), the worker's history,
    the cached reports' fingerprint and the block-after-rejections count all read the status:
    the reversed work counts again at each, and no longer counts as a rejection."""
    from annotation.selectors import counting_fingerprint, worker_history
    from annotation.services.exports import judgment_rows
    from annotation.services.review.auto_review import _block_repeated_rejections
    from annotation.services.review.decisions import ReviewReport
    from metrics_app.reports.project import project_report

    owner = make_user("alice")
    assignment = _rejected(owner=owner, n_items=3)
    project, worker = assignment.stage.project, assignment.worker

    def exported() -> int:
        return sum(1 for row in judgment_rows(project=project, stage=assignment.stage)
                   if row["judgment"] is not None)

    def reported() -> tuple[int, list[int]]:
        report = project_report(project=project)
        return report["n_judgments"], [w["worker_id"] for w in report["workers"]]

    before = counting_fingerprint(project=project)
    assert exported() == 0 and reported() == (0, [])
    assert worker_history(worker=worker, user=owner).judgments_counted == 0
    assignment_rejection_reverse(assignment=assignment, reason="appeal upheld", by=owner)
    assert counting_fingerprint(project=project) != before  # cached reports go stale
    assert exported() == 3 and reported() == (3, [worker.pk])
    history = worker_history(worker=worker, user=owner)
    assert history.judgments_counted == 3
    assert history.assignments_by_status == {AssignmentStatus.APPROVED: 1}
    report = ReviewReport()
    _block_repeated_rejections(assignment.stage, 1, report)  # one rejection blocks...
    assert report.blocked == 0  # ...but none is left
    assert not worker.blocks.exists()
