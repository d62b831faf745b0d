"""Adaptive redundancy: two judgments per item, more (up to four) only while the judges
disagree; workers are served through the real picking and submit services, and the report says
how many judgments were saved against four per item."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.domain.redundancy import AdaptiveRedundancy, adaptive_redundancy, next_target
from annotation.models import (
    AdaptiveTarget,
    Assignment,
    AssignmentStatus,
    Judgment,
    ParticipantVerification,
    Provider,
    TaskKind,
    WorkerStatus,
)
from annotation.providers import get_provider
from annotation.providers.base import Submission, SubmissionStatus
from annotation.selectors import stage_progress
from annotation.services.assignments import (
    NoItemsAvailable,
    assignment_release_abandoned,
    assignment_start,
    assignment_submit,
)
from annotation.services.assignments.lifecycle import assignment_verification_failed
from annotation.services.redundancy import adaptive_redundancy_guard, adaptive_targets_update
from annotation.services.review import assignment_reject, provider_sync
from annotation.services.stages import stage_collection_complete
from annotation.services.workers import worker_block, worker_unblock
from annotation.stage_errors import GuardFailed
from metrics_app.reports.project import project_report
from testing.factories import make_assignment, make_item, make_judgment, make_user, make_worker
from tests.support.tasks import make_task

RULE = {"min": 2, "max": 4, "agreement": 0.75}


def test_the_rule_stops_at_agreement_and_at_max():
    rule = AdaptiveRedundancy(min=2, max=4, agreement=0.75)
    assert next_target([], rule) == (2, False)
    assert next_target([True], rule) == (2, False)
    assert next_target([True, True], rule) == (2, True)  # two agree: settled at the minimum
    assert next_target([True, False], rule) == (3, False)
    assert next_target([True, False, True], rule) == (4, False)  # 2/3 < 0.75
    assert next_target([True, False, True, True], rule) == (4, True)  # 3/4 agree
    assert next_target(["A", "B", "A", "B"], rule) == (4, True)  # at max, still split


@pytest.mark.parametrize("setting, message", [
    ({"redundancy": 3}, "must be an object"),
    ({"redundancy": {"min": 3, "max": 2}}, "1 ≤ min ≤ max"),
    ({"redundancy": {"min": 2.5}}, "whole number"),
    ({"redundancy": {"agreement": 0.4}}, "above 0.5"),
    ({"redundancy": {"mni": 2}}, "unknown keys: mni"),
])
def test_malformed_settings_are_named(setting, message):
    with pytest.raises(ValueError, match=message):
        adaptive_redundancy(setting)
    assert adaptive_redundancy({}) is None


@pytest.mark.django_db
def test_items_get_more_judgments_only_while_judges_disagree_and_the_report_counts_the_savings(
        client):
    project, stage, items = make_task(TaskKind.LIKERT, n_items=3, items_per_hit=1)
    stage.settings = {"redundancy": RULE}
    stage.save()
    easy, split, close = items
    # Judges agree on `easy`; on `split` they alternate; on `close` the third breaks the tie.
    votes = {easy.pk: [True] * 4, split.pk: [True, False, True, False],
             close.pk: [True, False, True, True]}
    served = {item.pk: 0 for item in items}
    for _round in range(12):
        try:
            assignment = assignment_start(stage=stage, worker=make_worker())
        except NoItemsAvailable:
            break
        [item] = assignment.items.all()
        vote = votes[item.pk][served[item.pk]]
        served[item.pk] += 1
        assignment_submit(assignment=assignment, answers=[{"item": item.pk,
                                                           "score": 5 if vote else 1}])
    counts = {item.pk: Judgment.objects.filter(stage=stage, item=item).count() for item in items}
    assert counts == {easy.pk: 2, split.pk: 4, close.pk: 4}
    targets = {t.item_id: (t.target, t.settled) for t in AdaptiveTarget.objects.filter(stage=stage)}
    assert targets[easy.pk] == (2, True) and targets[split.pk] == (4, True)
    # Every item reached its target: the stage is complete, and its progress says so at the
    # items' targets (was: "10 judgments counted, 1 beyond the 9 wanted": the fixed 3 each).
    assert stage_collection_complete(stage=stage)
    assert stage_progress(stages=[stage])[stage.pk].text() == "10 of 10 judgments counted (100%)"
    [summary] = project_report(project=project)["adaptive_redundancy"]
    assert summary["items_finished"] == 3 and summary["items_settled_by_agreement"] == 1
    assert summary["judgments_finished_items"] == 10
    assert summary["judgments_fixed_redundancy"] == 12 and summary["judgments_saved"] == 2
    client.force_login(make_user(superuser=True))
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "Adaptive redundancy" in html and "2 of 12" in html


@pytest.mark.django_db
def test_publishing_refuses_a_bad_setting_and_mturk():
    _project, stage, _items = make_task(TaskKind.AB, provider=Provider.MTURK)
    stage.settings = {"redundancy": RULE}
    with pytest.raises(GuardFailed, match="MTurk HITs fix their items"):
        adaptive_redundancy_guard(stage=stage)
    stage.provider = Provider.INHOUSE
    adaptive_redundancy_guard(stage=stage)
    stage.settings = {"redundancy": {"min": 0}}
    with pytest.raises(GuardFailed, match="1 ≤ min"):
        adaptive_redundancy_guard(stage=stage)


@pytest.mark.django_db
def test_a_setting_broken_after_publishing_falls_back_to_fixed_redundancy():
    _project, stage, items = make_task(TaskKind.LIKERT, n_items=3, redundancy={"default": 1})
    stage.settings = {"redundancy": {"min": "two"}}
    stage.save()
    first = assignment_start(stage=stage, worker=make_worker())
    assert first.items.count() == 3  # served as if there were no adaptive setting


def _judge(stage, item, score):
    assignment = assignment_start(stage=stage, worker=make_worker())
    assignment_submit(assignment=assignment, answers=[{"item": item.pk, "score": score}])
    assignment.refresh_from_db()
    return assignment


@pytest.mark.django_db
def test_a_blocked_workers_judgments_do_not_settle_an_item():
    """Two judges agree, the item is settled; one of them is then blocked as a spammer: the
    item is no longer settled by judgments that count, and is served again (was: settled by
    every judgment of the stage, so it never got another)."""
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1)
    stage.settings = {"redundancy": RULE}
    stage.save()
    _judge(stage, item, 5)
    spam = _judge(stage, item, 5)
    assert AdaptiveTarget.objects.get(stage=stage, item=item).settled
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=stage, worker=make_worker())
    worker_block(worker=spam.worker, reason="spam")
    target = AdaptiveTarget.objects.get(stage=stage, item=item)
    assert (target.target, target.settled) == (3, False)  # min 2 that count + 1 replaced
    third = _judge(stage, item, 5)
    assert third.items.get() == item
    target.refresh_from_db()
    assert (target.target, target.settled) == (3, True)
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=stage, worker=make_worker())
    worker_unblock(worker=spam.worker)  # counts again: three agreeing judgments, settled
    target.refresh_from_db()
    assert (target.target, target.settled) == (3, True)


@pytest.mark.django_db
def test_a_rejected_assignment_does_not_settle_an_item():
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1)
    stage.settings = {"redundancy": RULE}
    stage.save()
    _judge(stage, item, 5)
    bad = _judge(stage, item, 5)
    assignment_reject(assignment=bad, reason="answers do not match the passage")
    target = AdaptiveTarget.objects.get(stage=stage, item=item)
    assert (target.target, target.settled) == (3, False)
    assert _judge(stage, item, 5).items.get() == item


@pytest.mark.django_db
def test_a_blocked_worker_disagreeing_does_not_hold_an_item_open():
    """Judgments submitted after a block are read by the counting rule too: a blocked worker's
    disagreement neither settles nor stretches an item (its target only makes room for it)."""
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1)
    stage.settings = {"redundancy": RULE}
    stage.save()
    blocked = make_worker(status=WorkerStatus.BLOCKED)
    Judgment.objects.create(stage=stage, item=item, worker=blocked, score=1)
    _judge(stage, item, 5)
    _judge(stage, item, 5)
    target = AdaptiveTarget.objects.get(stage=stage, item=item)
    assert (target.target, target.settled) == (3, True)


@pytest.mark.django_db
def test_a_session_being_verified_counts_until_the_provider_does_not_know_it():
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1,
                                        provider=Provider.PROLIFIC)
    stage.settings = {"redundancy": RULE}
    stage.save()
    make_judgment(item=item, stage=stage, score=5)
    unverified = make_assignment(stage, status=AssignmentStatus.SUBMITTED,
                                 verification=ParticipantVerification.PENDING)
    make_judgment(item=item, stage=stage, worker=unverified.worker, assignment=unverified,
                  score=5)
    adaptive_targets_update(stage=stage, item_ids=[item.pk])
    target = AdaptiveTarget.objects.get(stage=stage, item=item)
    assert (target.target, target.settled) == (2, True)  # presumed real while pending
    assignment_verification_failed(assignment=unverified, note="not a Prolific session")
    target.refresh_from_db()
    assert (target.target, target.settled) == (3, False)


@pytest.mark.django_db
def test_an_abandoned_assignment_released_by_the_timeout_reopens_the_item():
    """Items confirmed one by one (STARC) are judgments of an assignment still in progress;
    when the timeout releases it (RETURNED) they stop counting, as a rejection's do. Every
    other door that makes work stop counting (a rejection here or on the provider, a block, a
    failed session) recomputed the targets; the timeout's bulk release did not, so the item
    stayed settled on an answer that no longer counts."""
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1)
    stage.settings = {"redundancy": RULE}
    stage.save()
    make_judgment(item=item, stage=stage, score=5)
    left = make_assignment(stage)
    Assignment.objects.filter(pk=left.pk).update(
        started_at=timezone.now() - timedelta(days=2), last_seen_at=None)
    make_judgment(item=item, stage=stage, worker=left.worker, assignment=left, score=5)
    adaptive_targets_update(stage=stage, item_ids=[item.pk])
    target = AdaptiveTarget.objects.get(stage=stage, item=item)
    assert (target.target, target.settled) == (2, True)
    assert assignment_release_abandoned() == 1
    left.refresh_from_db()
    assert left.status == AssignmentStatus.RETURNED
    target.refresh_from_db()
    assert (target.target, target.settled) == (3, False)


@pytest.mark.django_db
def test_a_rejection_made_on_the_provider_reopens_the_item(monkeypatch):
    """The sync takes over a decision made on Prolific by hand: the rejected judgments stop
    settling the item, as a rejection made here does."""
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1,
                                        provider=Provider.PROLIFIC)
    stage.settings = {"redundancy": RULE}
    stage.save()
    make_judgment(item=item, stage=stage, score=5)
    bad = make_assignment(stage, status=AssignmentStatus.SUBMITTED, external_id="session-1",
                          provider_confirmed_at=timezone.now())
    make_judgment(item=item, stage=stage, worker=bad.worker, assignment=bad, score=5)
    adaptive_targets_update(stage=stage, item_ids=[item.pk])
    assert AdaptiveTarget.objects.get(stage=stage, item=item).settled
    provider = get_provider(Provider.PROLIFIC)
    monkeypatch.setattr(type(provider), "list_submissions", lambda self, stage: [Submission(
        external_id="session-1", worker_external_id=bad.worker.external_id,
        hit_external_id="", status=SubmissionStatus.REJECTED)])
    monkeypatch.setattr(type(provider), "sessions_listable", lambda self, stage: False)
    assert provider_sync(stage=stage).mirrored == 1
    target = AdaptiveTarget.objects.get(stage=stage, item=item)
    assert (target.target, target.settled) == (3, False)


@pytest.mark.django_db
def test_the_summary_does_not_count_a_replaced_judgment_as_reaching_max():
    project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1)
    stage.settings = {"redundancy": RULE}
    stage.save()
    _judge(stage, item, 5)
    spam = _judge(stage, item, 1)
    worker_block(worker=spam.worker, reason="spam")
    _judge(stage, item, 5)  # two that count agree: settled, the blocked one replaced
    target = AdaptiveTarget.objects.get(stage=stage, item=item)
    assert (target.target, target.settled) == (3, True)
    blocked = make_worker(status=WorkerStatus.BLOCKED)
    Judgment.objects.create(stage=stage, item=item, worker=blocked, score=1)
    adaptive_targets_update(stage=stage, item_ids=[item.pk])
    target.refresh_from_db()
    assert (target.target, target.settled) == (4, True)  # = max, but only 2 count
    [summary] = project_report(project=project)["adaptive_redundancy"]
    assert summary["items_settled_by_agreement"] == 1 and summary["items_reaching_max"] == 0
    assert summary["judgments_finished_items"] == 4  # every judgment paid for


@pytest.mark.django_db
def test_the_summary_leaves_practice_items_out():
    """Every worker answers a practice item first: its judgments are not data, and were read as
    judgments spent on a finished item (here: 5 against a fixed redundancy of 4)."""
    project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1)
    stage.settings = {"redundancy": RULE}
    stage.save()
    practice = make_item(project, is_practice=True)
    for _ in range(5):
        Judgment.objects.create(stage=stage, item=practice, worker=make_worker(), score=5)
    for _ in range(2):
        Judgment.objects.create(stage=stage, item=item, worker=make_worker(), score=5)
    adaptive_targets_update(stage=stage, item_ids=[practice.pk, item.pk])
    [summary] = project_report(project=project)["adaptive_redundancy"]
    assert summary["items_finished"] == 1 and summary["items_collecting"] == 0
    assert summary["judgments_finished_items"] == 2 and summary["judgments_saved"] == 2


@pytest.mark.django_db
def test_a_block_set_on_the_worker_form_reopens_the_items_they_settled(client):
    """A superuser's `status` on the worker form was a bare write of the column: the items the
    worker settled stayed settled (the Block action went through `worker_block`)."""
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1)
    stage.settings = {"redundancy": RULE}
    stage.save()
    _judge(stage, item, 5)
    spam = _judge(stage, item, 5).worker
    client.force_login(make_user(superuser=True))
    response = client.post(reverse("admin:annotation_worker_change", args=[spam.pk]), {
        "provider": spam.provider, "external_id": spam.external_id, "display_name": "",
        "email": "", "status": WorkerStatus.BLOCKED, "blocked_reason": "spam",
        "blocks-TOTAL_FORMS": "0", "blocks-INITIAL_FORMS": "0"})
    assert response.status_code == 302, response.context["adminform"].form.errors
    spam.refresh_from_db()
    assert (spam.status, spam.blocked_reason) == (WorkerStatus.BLOCKED, "spam")
    target = AdaptiveTarget.objects.get(stage=stage, item=item)
    assert (target.target, target.settled) == (3, False)



SEVEN_POINT = [f"point {n}" for n in range(1, 8)]


def _judged_three_and_four(**project_fields):
    """A one-item adaptive stage whose item two judges scored 3 and 4; (stage, item, target)."""
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1,
                                        **project_fields)
    stage.settings = {"redundancy": RULE}
    stage.save()
    _judge(stage, item, 3)
    _judge(stage, item, 4)
    return stage, item, AdaptiveTarget.objects.get(stage=stage, item=item)


@pytest.mark.django_db
def test_on_a_seven_point_scale_a_three_and_a_four_disagree():
    """A 7-point project is correct at its midpoint, 4: a 3 ("somewhat incorrect") and a 4 are
    on opposite sides, so the item is served again (was: both ≥ 3, counted as agreeing that
    the answer is correct, the item settled after two judgments)."""
    stage, item, target = _judged_three_and_four(scale_labels=SEVEN_POINT)
    assert (target.target, target.settled) == (3, False)
    assert _judge(stage, item, 3).items.get() == item
    _judge(stage, item, 2)  # three of four judges call it incorrect: 0.75 agree, settled
    target.refresh_from_db()
    assert (target.target, target.settled) == (4, True)


@pytest.mark.django_db
def test_on_a_five_point_scale_a_three_and_a_four_agree():
    _stage, _item, target = _judged_three_and_four()
    assert (target.target, target.settled) == (2, True)
