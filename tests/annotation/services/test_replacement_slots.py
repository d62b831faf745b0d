"""Fixed redundancy gives back the slot of work that will never count: a stage asking for N
judgments per item ends with N that count after the researcher rejects a spammer or blocks a
worker, on in-house and Prolific pages (picking) and in the progress every page shows."""
from __future__ import annotations

import pytest

from annotation.models import (
    AssignmentStatus,
    Judgment,
    ParticipantVerification,
    Provider,
    StageStatus,
    TaskKind,
)
from annotation.selectors import judgments_releasing_slots, stage_progress
from annotation.services.assignments import NoItemsAvailable, assignment_start, assignment_submit
from annotation.services.assignments.lifecycle import assignment_verification_failed
from annotation.services.review import assignment_reject
from annotation.services.workers import worker_block, worker_unblock
from testing.factories import make_assignment, make_judgment, make_worker
from tests.support.tasks import make_task

pytestmark = [pytest.mark.django_db]


def _fixed_stage(n: int = 2, provider: str = Provider.INHOUSE):
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1,
                                        provider=provider)
    stage.judgments_per_item = n
    stage.save()
    return stage, item


def _judge(stage, item, score=5, worker=None):
    assignment = assignment_start(stage=stage, worker=worker or make_worker(
        provider=stage.provider))
    assert assignment.items.get() == item
    assignment_submit(assignment=assignment, answers=[{"item": item.pk, "score": score}])
    assignment.refresh_from_db()
    return assignment


def _counted(stage) -> int:
    return stage_progress(stages=[stage])[stage.pk].judgments


@pytest.mark.reliability
def test_a_rejected_assignment_gives_its_slot_to_another_worker_once():
    """Two judgments per item; one is rejected: the item is served to a third worker (was:
    the rejected judgment kept its slot, the item ended with one that counts), never to the
    worker who was rejected, and never beyond two that count."""
    stage, item = _fixed_stage()
    _judge(stage, item)
    spam = _judge(stage, item, score=1)
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=stage, worker=make_worker())
    assignment_reject(assignment=spam, reason="answers do not match the passage")
    assert _counted(stage) == 1
    with pytest.raises(NoItemsAvailable):  # the rejected worker never gets it again
        assignment_start(stage=stage, worker=spam.worker)
    _judge(stage, item)
    progress = stage_progress(stages=[stage])[stage.pk]
    assert (progress.judgments, progress.wanted, progress.not_counted) == (2, 2, 1)
    assert progress.reoffered == 1
    assert "1 slot of work that does not count" in progress.reoffered_text()
    with pytest.raises(NoItemsAvailable):  # two count: full again
        assignment_start(stage=stage, worker=make_worker())


@pytest.mark.reliability
def test_a_blocked_workers_slots_are_reoffered_and_taken_back_on_unblock():
    stage, item = _fixed_stage()
    _judge(stage, item)
    spam = _judge(stage, item, score=1)
    worker_block(worker=spam.worker, reason="spam")
    assert list(judgments_releasing_slots(Judgment.objects.filter(stage=stage),
                                          project=stage.project)) == [spam.judgments.get()]
    held = assignment_start(stage=stage, worker=make_worker())  # the slot, re-offered
    assert held.items.get() == item
    # A live assignment holds the slot: nobody else gets the item meanwhile.
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=stage, worker=make_worker())
    assignment_submit(assignment=held, answers=[{"item": item.pk, "score": 5}])
    assert _counted(stage) == 2
    worker_unblock(worker=spam.worker)  # counts again: three, one beyond the plan
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=stage, worker=make_worker())


@pytest.mark.reliability
def test_a_prolific_session_being_verified_holds_its_slot_until_it_fails():
    stage, item = _fixed_stage(provider=Provider.PROLIFIC)
    make_judgment(item=item, stage=stage, score=5)
    unverified = make_assignment(stage, status=AssignmentStatus.SUBMITTED,
                                 verification=ParticipantVerification.PENDING)
    make_judgment(item=item, stage=stage, worker=unverified.worker, assignment=unverified,
                  score=5)
    with pytest.raises(NoItemsAvailable):  # presumed real while pending
        assignment_start(stage=stage, worker=make_worker(provider=Provider.PROLIFIC))
    assignment_verification_failed(assignment=unverified, note="not a Prolific session")
    assert assignment_start(stage=stage, worker=make_worker(
        provider=Provider.PROLIFIC)).items.get() == item


def test_a_closed_stage_reoffers_nothing():
    stage, item = _fixed_stage()
    _judge(stage, item)
    spam = _judge(stage, item, score=1)
    assignment_reject(assignment=spam, reason="answers do not match the passage")
    stage.status = StageStatus.CLOSED
    stage.save()
    with pytest.raises(Exception, match="has ended"):
        assignment_start(stage=stage, worker=make_worker())
    assert Judgment.objects.filter(stage=stage).count() == 2


def test_the_project_redundancy_per_split_is_refilled_too():
    """Without `judgments_per_item` the project's per-split redundancy is the target: the
    same rule gives a rejected slot back."""
    _project, stage, [item] = make_task(TaskKind.LIKERT, n_items=1, items_per_hit=1,
                                        redundancy={"default": 1})
    spam = _judge(stage, item, score=1)
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=stage, worker=make_worker())
    assignment_reject(assignment=spam, reason="random answers")
    _judge(stage, item)
    assert _counted(stage) == 1


SHOWN = "1 slot of work that does not count (rejected, a blocked worker, ...) re-offered"


def test_the_cockpit_and_the_stage_page_say_how_many_slots_were_reoffered(client):
    from django.urls import reverse

    from testing.factories import make_user

    stage, item = _fixed_stage()
    _judge(stage, item)
    spam = _judge(stage, item, score=1)
    assignment_reject(assignment=spam, reason="answers do not match the passage")
    client.force_login(make_user(superuser=True))
    page = client.get(reverse("metrics:project-cockpit",
                              args=[stage.project.slug])).content.decode()
    assert SHOWN in page
    page = client.get(reverse("admin:annotation_stage_change", args=[stage.pk])).content.decode()
    assert SHOWN in page


def test_a_closed_stage_says_its_given_back_slots_are_left_unfilled(client):
    """Walking a first study: after the trial was closed the cockpit still said its rejected
    work's "5 slots … re-offered to other workers", though a closed stage serves nobody."""
    from django.urls import reverse

    from annotation.models import StageStatus
    from testing.factories import make_user

    stage, item = _fixed_stage()
    _judge(stage, item)
    spam = _judge(stage, item, score=1)
    assignment_reject(assignment=spam, reason="answers do not match the passage")
    stage.status = StageStatus.CLOSED
    stage.save(update_fields=["status"])
    client.force_login(make_user(superuser=True))
    for url in (reverse("metrics:project-cockpit", args=[stage.project.slug]),
                reverse("admin:annotation_stage_change", args=[stage.pk])):
        page = client.get(url).content.decode()
        assert SHOWN not in page, url
        assert ("1 slot of work that does not count (rejected, a blocked worker, ...) left "
                "unfilled: the stage no longer serves anyone") in page, url
