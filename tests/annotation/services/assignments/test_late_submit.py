"""Timed-out assignments: answers given after the timeout are kept when their items still need
judgments and refused, by item, when other workers filled them meanwhile — never lost silently,
never beyond the redundancy."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentStatus,
    ExperimentMode,
    Judgment,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.services.assignments import (
    AssignmentClosed,
    assignment_confirm_item,
    assignment_release_abandoned,
    assignment_save_draft,
    assignment_start,
    assignment_submit,
)
from annotation.task_selectors import assignment_feedback
from testing.factories import make_hit, make_item, make_stage, make_worker
from tests.support.tasks import make_task

pytestmark = pytest.mark.django_db


def _idle(assignment, minutes=45):
    past = timezone.now() - timedelta(minutes=minutes)
    Assignment.objects.filter(pk=assignment.pk).update(last_seen_at=past, started_at=past)


def _answers(items, score=4):
    return [{"item": item.pk, "score": score} for item in items]


def _mc_answers(items, shown="a"):
    return [{"item": item.pk, "shown_choice": shown} for item in items]


def _judgments_per_item(stage):
    counts: dict[int, int] = {}
    for item_id in Judgment.objects.filter(stage=stage).values_list("item_id", flat=True):
        counts[item_id] = counts.get(item_id, 0) + 1
    return counts


@pytest.mark.parametrize("released_by_beat", [False, True])
def test_late_submit_keeps_needed_answers_and_refuses_filled_items_by_name(released_by_beat):
    # STARC QA: the other worker's page confirms items one by one (a Likert page cannot).
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=3,
                                      redundancy={"default": 1}, assignment_timeout_minutes=30)
    late = assignment_start(stage=stage, worker=make_worker())
    _idle(late)
    if released_by_beat:
        assert assignment_release_abandoned() == 1
    # Another worker is given the freed items and judges the first two.
    other = assignment_start(stage=stage, worker=make_worker())
    assert set(other.items.all()) == set(items)
    assignment_confirm_item(assignment=other, item=items[0], answer={"shown_choice": "b"})
    assignment_confirm_item(assignment=other, item=items[1], answer={"shown_choice": "b"})
    # Held by the other's live assignment, not judged: still taken.
    # Give the third back: the other worker's assignment times out too.
    _idle(other)

    judgments = assignment_submit(assignment=late, answers=_mc_answers(items))
    assert [j.item_id for j in judgments] == [items[2].pk]
    assert set(judgments.refused) == {str(items[0].pk), str(items[1].pk)}
    assert "items 1, 2" in judgments.message and "could not be stored" in judgments.message
    late.refresh_from_db()
    assert late.status == AssignmentStatus.SUBMITTED and late.completion_code
    assert "items 1, 2" in late.review_note
    assert max(_judgments_per_item(stage).values()) == 1  # never beyond the redundancy
    # Idempotent: a second submit returns the stored judgments.
    assert [j.pk for j in assignment_submit(assignment=late, answers=_mc_answers(items))] == \
        [j.pk for j in judgments]


def test_late_submit_with_every_item_still_needed_is_accepted_whole():
    project, stage, items = make_task(TaskKind.LIKERT, n_items=3, group="",
                                      redundancy={"default": 2}, assignment_timeout_minutes=30)
    late = assignment_start(stage=stage, worker=make_worker())
    _idle(late)
    assignment_release_abandoned()
    judgments = assignment_submit(assignment=late, answers=_answers(items))
    assert len(judgments) == 3 and judgments.refused == {}
    late.refresh_from_db()
    assert late.status == AssignmentStatus.SUBMITTED


def test_late_submit_of_only_filled_items_is_refused_naming_them():
    project, stage, items = make_task(TaskKind.LIKERT, n_items=2, group="",
                                      redundancy={"default": 1}, assignment_timeout_minutes=30)
    late = assignment_start(stage=stage, worker=make_worker())
    _idle(late)
    other = assignment_start(stage=stage, worker=make_worker())  # live: holds both items
    with pytest.raises(AssignmentClosed) as exc:
        assignment_submit(assignment=late, answers=_answers(items))
    assert "items 1, 2" in exc.value.message and not exc.value.finished
    assert Judgment.objects.count() == 0
    assignment_submit(assignment=other, answers=_answers(items))
    assert Judgment.objects.count() == 2


def test_autosave_revives_a_timed_out_assignment_but_submit_still_rechecks():
    project, stage, items = make_task(TaskKind.LIKERT, n_items=2, group="",
                                      redundancy={"default": 1}, assignment_timeout_minutes=30)
    late = assignment_start(stage=stage, worker=make_worker())
    _idle(late)
    other = assignment_start(stage=stage, worker=make_worker())
    # The late page autosaves: the draft is kept and the assignment is live again...
    assignment_save_draft(assignment=late, draft={"answers": {"x": 1}})
    late.refresh_from_db()
    assert late.draft["answers"] == {"x": 1} and late.status == AssignmentStatus.IN_PROGRESS
    # ...but the items went to `other` meanwhile: the submit sees it.
    with pytest.raises(AssignmentClosed):
        assignment_submit(assignment=late, answers=_answers(items))
    assert len(assignment_submit(assignment=other, answers=_answers(items))) == 2


def test_returned_assignment_can_still_autosave_its_draft():
    project, stage, items = make_task(TaskKind.LIKERT, n_items=1, assignment_timeout_minutes=30)
    late = assignment_start(stage=stage, worker=make_worker())
    _idle(late)
    assignment_release_abandoned()
    assignment_save_draft(assignment=late, draft={"answers": {"1": {"score": 3}}})
    late.refresh_from_db()
    assert late.status == AssignmentStatus.RETURNED and late.draft["answers"]


def test_late_confirm_of_a_filled_item_is_refused_and_of_a_needed_item_kept():
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2,
                                      redundancy={"default": 1}, assignment_timeout_minutes=30)
    late = assignment_start(stage=stage, worker=make_worker())
    _idle(late)
    other = assignment_start(stage=stage, worker=make_worker())
    assignment_confirm_item(assignment=other, item=items[0], answer={"shown_choice": "a"})
    _idle(other)  # items[1] is free again
    # Refused, and recorded so the page counts the item as settled ("no longer needed").
    assert assignment_confirm_item(assignment=late, item=items[0],
                                   answer={"shown_choice": "b"}) is None
    feedback = assignment_feedback(assignment=late, item_id=items[0].pk)
    assert feedback["settled"] and "item 1 " in feedback["refused"]
    assert "correct_shown" not in feedback
    judgment = assignment_confirm_item(assignment=late, item=items[1],
                                       answer={"shown_choice": "b"})
    assert judgment.pk and Judgment.objects.filter(item=items[1]).count() == 1
    assert Judgment.objects.filter(item=items[0]).count() == 1


def test_submit_accepts_a_confirm_page_whose_remaining_item_was_refused_late():
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2,
                                      redundancy={"default": 1}, assignment_timeout_minutes=30)
    late = assignment_start(stage=stage, worker=make_worker())
    _idle(late)
    assignment_confirm_item(assignment=late, item=items[0], answer={"shown_choice": "a"})
    _idle(late)
    other = assignment_start(stage=stage, worker=make_worker())  # holds items[1]
    assert list(other.items.all()) == [items[1]]
    assert assignment_confirm_item(assignment=late, item=items[1],
                                   answer={"shown_choice": "b"}) is None
    # The slot frees up again (the other worker times out too): the refusal still settles
    # the item, so the page's submit, which sends no answer for it, is accepted.
    _idle(other)
    judgments = assignment_submit(assignment=late, answers=[])
    assert [j.item_id for j in judgments] == [items[0].pk]
    assert list(judgments.refused) == [str(items[1].pk)]
    late.refresh_from_db()
    assert late.status == AssignmentStatus.SUBMITTED and late.completion_code


def test_task_page_lists_a_refused_late_confirm_as_settled(client):
    from annotation.services.access import inhouse_link_create
    from tests.support.tasks import page_config

    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2,
                                      redundancy={"default": 1}, assignment_timeout_minutes=30)
    worker = make_worker()
    late = assignment_start(stage=stage, worker=worker)
    _idle(late)
    other = assignment_start(stage=stage, worker=make_worker())
    assignment_confirm_item(assignment=other, item=items[0], answer={"shown_choice": "a"})
    assignment_confirm_item(assignment=late, item=items[0], answer={"shown_choice": "b"})
    _, path = inhouse_link_create(worker=worker, project=project, stage=stage)
    config = page_config(client.get(path))
    assert config["confirmed"][str(items[0].pk)]["settled"] is True


def test_practice_and_gold_answers_are_kept_after_the_timeout():
    project, stage, items = make_task(TaskKind.LIKERT, n_items=1, group="", items_per_hit=2,
                                      redundancy={"default": 1}, assignment_timeout_minutes=30)
    practice = make_item(project, is_practice=True)
    late = assignment_start(stage=stage, worker=make_worker())
    assert set(late.items.all()) == {practice, items[0]}
    _idle(late)
    other = assignment_start(stage=stage, worker=make_worker())
    assignment_submit(assignment=other, answers=_answers([practice, items[0]]))
    judgments = assignment_submit(assignment=late, answers=_answers([practice, items[0]]))
    assert [j.item_id for j in judgments] == [practice.pk]
    assert set(judgments.refused) == {str(items[0].pk)}


def test_hit_assignments_follow_the_provider_and_are_never_late():
    project, stage, items = make_task(TaskKind.LIKERT, n_items=2, redundancy={"default": 1},
                                      assignment_timeout_minutes=30)
    hit = make_hit(stage, items=items, external_id="HIT1")
    first = assignment_start(stage=stage, worker=make_worker(), hit=hit, external_id="A1")
    _idle(first)
    assert len(assignment_submit(assignment=first, answers=_answers(items))) == 2


def test_qualification_stage_has_no_cap_after_the_timeout():
    project, _, items = make_task(TaskKind.LIKERT, n_items=1, redundancy={"default": 1},
                                  assignment_timeout_minutes=30)
    qual = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.PUBLISHED)
    late = assignment_start(stage=qual, worker=make_worker())
    _idle(late)
    other = assignment_start(stage=qual, worker=make_worker())
    assignment_submit(assignment=other, answers=_answers(items))
    assert len(assignment_submit(assignment=late, answers=_answers(items))) == 1


def test_reopening_a_timed_out_session_remembers_it_was_late():
    project, stage, items = make_task(TaskKind.LIKERT, n_items=1, redundancy={"default": 1},
                                      assignment_timeout_minutes=30)
    worker = make_worker()
    late = assignment_start(stage=stage, worker=worker, external_id="SESSION-1")
    _idle(late)
    other = assignment_start(stage=stage, worker=make_worker())
    assignment_submit(assignment=other, answers=_answers(items))
    # The participant comes back: the page is served again (last_seen_at moves on)...
    assert assignment_start(stage=stage, worker=worker, external_id="SESSION-1") == late
    Assignment.objects.filter(pk=late.pk).update(last_seen_at=timezone.now())
    # ...and the submit still knows the item was filled meanwhile.
    with pytest.raises(AssignmentClosed):
        assignment_submit(assignment=late, answers=_answers(items))
    assert Judgment.objects.count() == 1


def test_submit_endpoint_names_the_refused_items(client):
    from django.urls import reverse

    from annotation.services.access import assignment_token_make

    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2,
                                      redundancy={"default": 1}, assignment_timeout_minutes=30)
    late = assignment_start(stage=stage, worker=make_worker())
    _idle(late)
    other = assignment_start(stage=stage, worker=make_worker())
    assignment_confirm_item(assignment=other, item=items[0], answer={"shown_choice": "a"})
    _idle(other)
    response = client.post(reverse("annotation:task-submit"),
                           data={"answers": _mc_answers(items)}, content_type="application/json",
                           HTTP_X_ASSIGNMENT_TOKEN=assignment_token_make(assignment=late))
    data = response.json()
    assert response.status_code == 200 and data["ok"] and data["n_judgments"] == 1
    assert list(data["refused"]) == [str(items[0].pk)]
    assert "item 1" in data["refused"][str(items[0].pk)][0]


@pytest.mark.reliability
@pytest.mark.parametrize("timed_out", ["no", "revived by autosave", "released by the beat"])
def test_a_submission_held_for_review_stays_held_whatever_its_page_sends_again(client, timed_out):
    """A submission the review held (FLAGGED) is finished work: its page sending the submit
    again (a second tab, a retry, or on purpose) is answered "already submitted" and changes
    nothing. Against the old code a late-submitted one (timed out, then submitted) was taken
    for a late assignment again: the resent submit made it "submitted" with a new completion
    code, out of the review, and its autosave still wrote; a flagged one that had not timed
    out answered 409 "returned or has expired" to the resent submit."""
    from django.urls import reverse

    from annotation.services.access import assignment_token_make
    from annotation.services.review.decisions import assignment_flag

    project, stage, items = make_task(TaskKind.LIKERT, n_items=2, group="",
                                      assignment_timeout_minutes=30)
    assignment = assignment_start(stage=stage, worker=make_worker())
    token = assignment_token_make(assignment=assignment)

    def call(name, body):
        return client.post(reverse(f"annotation:{name}"), data=body,
                           content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=token)

    if timed_out != "no":
        _idle(assignment)
        if timed_out == "released by the beat":
            assert assignment_release_abandoned() == 1
        else:
            assert call("task-autosave", {"draft": {"answers": {}}}).status_code == 200
    assert call("task-submit", {"answers": _answers(items)}).json()["n_judgments"] == 2
    assignment.refresh_from_db()
    assignment_flag(assignment, "Held for review: every item has the same score.")
    held = Assignment.objects.get(pk=assignment.pk)
    assert held.status == AssignmentStatus.FLAGGED

    again = call("task-submit", {"answers": _answers(items, score=1)})
    assert again.status_code == 200, again.content
    assert again.json()["already_submitted"] is True
    saved = call("task-autosave", {"draft": {"answers": {"x": 1}}})
    assert saved.status_code == 200 and saved.json()["already_submitted"] is True
    confirmed = call("task-confirm", {"item": items[0].pk, "answer": {"score": 1}})
    assert confirmed.json().get("already_submitted") is True
    after = Assignment.objects.get(pk=assignment.pk)
    assert (after.status, after.completion_code, after.review_note, after.draft) == (
        AssignmentStatus.FLAGGED, held.completion_code, held.review_note, held.draft)
    assert sorted(Judgment.objects.values_list("score", flat=True)) == [4.0, 4.0]


@pytest.mark.reliability
@pytest.mark.parametrize("first", ["old page", "new page"])
def test_a_timed_out_tab_never_leaves_the_newer_page_unsubmittable(client, first):
    """An annotator leaves a page until it times out, opens their link again (a new page: the
    same items, since they judged none of them) and then submits from the old tab too. The
    old tab's late answers to items the newer page holds are refused by name ("answer them
    there"), whichever page submits first, and the newer page is submitted. Against the old
    code the old tab's late submit stored them, and the newer page could never be submitted
    ("Some of these items were already judged by you in this stage") while still holding the
    items, its link reopening the same dead page until it timed out."""
    from annotation.services.access import inhouse_link_create
    from tests.support.tasks import api, page_config

    project, stage, items = make_task(TaskKind.LIKERT, n_items=3, group="",
                                      assignment_timeout_minutes=30)
    worker = make_worker()
    _, path = inhouse_link_create(worker=worker, project=project, stage=stage)
    old = page_config(client.get(path))
    _idle(Assignment.objects.get())
    assert assignment_release_abandoned() == 1  # the beat's sweep, every minute
    new = page_config(client.get(path))
    assert new["token"] != old["token"] and new["items"] == old["items"]

    def submit(config, score):
        return api(client, "task-submit", config["token"],
                   {"answers": [{"item": i, "score": score} for i in config["items"]]})

    if first == "old page":
        late = submit(old, 1)
        assert late.status_code == 409 and "in your newer page" in late.json()["message"]
        assert "items 1, 2, 3" in late.json()["message"]
        assert "Nothing was stored" in late.json()["message"]
        kept = submit(new, 5)
        assert kept.status_code == 200, kept.content
    else:
        assert submit(new, 5).status_code == 200
        late = submit(old, 1)
        assert late.status_code == 409 and "in your newer page" in late.json()["message"]
    assert sorted(Judgment.objects.values_list("score", flat=True)) == [5.0, 5.0, 5.0]
    statuses = dict(Assignment.objects.values_list("pk", "status"))
    assert sorted(statuses.values()) == [AssignmentStatus.RETURNED, AssignmentStatus.SUBMITTED]


def test_a_timed_out_tabs_confirm_of_an_item_the_newer_page_holds_is_settled_not_stored(client):
    """The same one by one (STARC QA, the page that confirms each item): the old tab's confirm
    of an item the newer page holds says so, stores nothing, and the newer page confirms it."""
    from annotation.services.access import inhouse_link_create
    from tests.support.tasks import api, page_config

    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2,
                                      assignment_timeout_minutes=30)
    _, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
    old = page_config(client.get(path))
    _idle(Assignment.objects.get())
    assert assignment_release_abandoned() == 1
    new = page_config(client.get(path))
    assert new["token"] != old["token"] and new["items"] == old["items"]
    confirmed = api(client, "task-confirm", old["token"],
                    {"item": old["items"][0], "answer": {"shown_choice": "a"}}).json()
    assert "in your newer page" in confirmed["feedback"]["refused"]
    assert not Judgment.objects.exists()
    kept = api(client, "task-confirm", new["token"],
               {"item": new["items"][0], "answer": {"shown_choice": "b"}})
    assert kept.status_code == 200 and kept.json()["feedback"]["confirmed"] is True
    assert Judgment.objects.get().assignment.pk != Assignment.objects.order_by("pk").first().pk


def test_a_late_answer_to_an_item_the_newer_page_does_not_hold_is_still_kept():
    """Only the items the worker holds again are refused: a late submit keeps the rest."""
    project, stage, items = make_task(TaskKind.LIKERT, n_items=3, group="",
                                      assignment_timeout_minutes=30)
    worker = make_worker()
    late = assignment_start(stage=stage, worker=worker)
    _idle(late)
    assignment_release_abandoned()
    newer = assignment_start(stage=stage, worker=worker)
    # The newer page holds the first item only (the others went elsewhere meanwhile).
    newer.assignmentitem_set.exclude(item=items[0]).delete()
    judgments = assignment_submit(assignment=late, answers=_answers(items))
    assert sorted(j.item_id for j in judgments) == [items[1].pk, items[2].pk]
    assert list(judgments.refused) == [str(items[0].pk)]
    assert "item 1 is in your newer page" in judgments.refused[str(items[0].pk)][0]
    assert len(assignment_submit(assignment=newer, answers=_answers(items[:1]))) == 1


def test_a_prolific_participant_whose_batch_is_held_gets_no_second_one_from_a_new_session():
    """The Prolific entry reads a held submission as finished too (`finished_filter`, the
    query form of `assignment_finished`): a participant whose submitted batch the review held
    who came back with another session id was given a second batch of the stage."""
    from annotation.models import AssignmentItem, Item, Provider
    from annotation.services.review.decisions import assignment_flag

    project, _, _items = make_task(TaskKind.LIKERT, n_items=4, items_per_hit=2, group="")
    stage = make_stage(project, status=StageStatus.PUBLISHED, provider=Provider.PROLIFIC)
    worker = make_worker(provider=Provider.PROLIFIC)
    first = assignment_start(stage=stage, worker=worker, external_id="SESSION-1")
    mine = Item.objects.filter(pk__in=AssignmentItem.objects.filter(
        assignment=first).values("item_id"))
    assert len(assignment_submit(assignment=first, answers=_answers(mine))) == 2
    first.refresh_from_db()
    assignment_flag(first, "Held for review: every item has the same score.")
    with pytest.raises(AssignmentClosed):
        assignment_start(stage=stage, worker=worker, external_id="SESSION-2")
    assert Assignment.objects.filter(stage=stage, worker=worker).count() == 1
