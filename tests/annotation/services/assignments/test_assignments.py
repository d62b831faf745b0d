"""Assignment services: which items a worker gets, refusals, timeouts, submit and confirm."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentStatus,
    ExperimentMode,
    Judgment,
    Provider,
    StageKind,
    StageStatus,
    TaskKind,
    WorkerStatus,
)
from annotation.services.assignments import (
    SERVER_DRAFT_KEY,
    AssignmentClosed,
    ForeignAssignment,
    NoItemsAvailable,
    QualificationRequired,
    StageNotOpen,
    SubmissionInvalid,
    WorkerBlocked,
    assignment_confirm_item,
    assignment_record_guess,
    assignment_release_abandoned,
    assignment_save_draft,
    assignment_start,
    assignment_submit,
    items_pick_next,
)
from annotation.task_selectors import assignment_feedback
from testing.factories import (
    make_hit,
    make_item,
    make_judgment,
    make_qualification,
    make_stage,
    make_worker,
)
from tests.support.tasks import ab_answer, make_task, shown_label

pytestmark = pytest.mark.django_db


# --- Picking ------------------------------------------------------------------------------------


def test_redundancy_counts_judgments_and_held_items():
    project, stage, items = make_task(TaskKind.AB, redundancy={"dev": 2, "default": 1})
    first = assignment_start(stage=stage, worker=make_worker())
    second = assignment_start(stage=stage, worker=make_worker())
    assert set(first.items.all()) == set(items) == set(second.items.all())
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=stage, worker=make_worker())


def test_items_furthest_from_target_come_first_and_never_twice():
    project, stage, items = make_task(TaskKind.AB, n_items=3, redundancy={"default": 3})
    make_judgment(item=items[0], stage=stage)
    make_judgment(item=items[0], stage=stage)
    make_judgment(item=items[1], stage=stage)
    worker = make_worker()
    assert items_pick_next(stage=stage, worker=worker, limit=3) == [items[2], items[1], items[0]]
    make_judgment(item=items[2], stage=stage, worker=worker)
    assert items[2] not in items_pick_next(stage=stage, worker=worker, limit=3)


def test_stage_override_of_redundancy_and_split_targets():
    project, stage, items = make_task(TaskKind.AB, n_items=2, redundancy={"train": 1, "dev": 2})
    items[0].split = "train"
    items[0].save(update_fields=["split"])
    make_judgment(item=items[0], stage=stage)
    make_judgment(item=items[1], stage=stage)
    assert items_pick_next(stage=stage, worker=make_worker(), limit=5) == [items[1]]
    stage.judgments_per_item = 1
    stage.save(update_fields=["judgments_per_item"])
    assert items_pick_next(stage=stage, worker=make_worker(), limit=5) == []


def test_likert_items_sharing_a_passage_stay_together():
    project, stage, group_a = make_task(TaskKind.LIKERT, n_items=3, group="p1", items_per_hit=10)
    group_b = [make_item(project, group_key="p2") for _ in range(4)]
    for item in group_a:  # passage p2 is now furthest from its target
        make_judgment(item=item, stage=stage)
    picked = items_pick_next(stage=stage, worker=make_worker(), limit=10)
    # In-house: the page fills up with further passages, each whole and in one run (p2, the
    # furthest from its target, first).
    assert picked[:4] and set(picked[:4]) == set(group_b) and set(picked[4:]) == set(group_a)
    picked = items_pick_next(stage=stage, worker=make_worker(), limit=2)
    assert len(picked) == 2 and {item.group_key for item in picked} == {"p2"}
    # A crowd page (Prolific) stays one passage, as MOCHA's HITs: not topped up from p1.
    stage.provider = Provider.PROLIFIC
    stage.save(update_fields=["provider"])
    picked = items_pick_next(stage=stage, worker=make_worker(provider=Provider.PROLIFIC),
                             limit=10)
    assert set(picked) == set(group_b)


def test_practice_items_come_first_and_gold_is_mixed_in():
    project, stage, items = make_task(TaskKind.MC, n_items=4, gold_rate=0.5)
    practice = make_item(project, is_practice=True)
    gold = [make_item(project, is_gold_check=True, gold={"choice": "A"}) for _ in range(5)]
    picked = items_pick_next(stage=stage, worker=make_worker(), limit=5)
    assert picked[0] == practice
    # Practice on top of the batch of 5: 5 x 0.5 = 2.5, rounded half up to 3 gold items.
    assert len(picked) == 6
    assert sum(item in gold for item in picked) == 3
    assert sum(item in items for item in picked) == 2


@pytest.mark.reliability
@pytest.mark.parametrize(("project_rate", "stage_rate", "n_gold"), [(0.5, 0.0, 0), (0.0, 0.5, 2)])
def test_pages_mix_gold_at_the_stages_rate_as_its_hit_plan_does(project_rate, stage_rate, n_gold):
    """A Prolific (or in-house) page mixes gold at the rate the stage's HIT plan and places were
    built with (`stage_gold_rate`: the stage's `gold_rate`, else the project's). Was: the page
    read the project's rate only, so a stage with gold off still got half its page in gold
    checks, and a stage with gold on, under a project without, got none."""
    project, stage, items = make_task(TaskKind.MC, n_items=4, gold_rate=project_rate,
                                      provider=Provider.PROLIFIC)
    stage.settings = {**(stage.settings or {}), "gold_rate": stage_rate}
    stage.save(update_fields=["settings"])
    gold = [make_item(project, is_gold_check=True, gold={"choice": "A"}) for _ in range(5)]
    picked = items_pick_next(stage=stage, worker=make_worker(provider=Provider.PROLIFIC),
                             limit=4)
    assert sum(item in gold for item in picked) == n_gold
    assert sum(item in items for item in picked) == 4 - n_gold


def test_qualification_stage_gives_every_worker_the_same_items():
    project, _, items = make_task(TaskKind.LIKERT, n_items=3, redundancy={"default": 1})
    qual = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.PUBLISHED)
    for _ in range(3):
        assert set(assignment_start(stage=qual, worker=make_worker()).items.all()) == set(items)


# --- Refusals -----------------------------------------------------------------------------------


def test_refusals_blocked_unqualified_and_closed_stage():
    project, stage, _ = make_task(TaskKind.LIKERT)
    blocked = make_worker(status=WorkerStatus.BLOCKED)
    with pytest.raises(WorkerBlocked):
        assignment_start(stage=stage, worker=blocked)

    qual = make_stage(project, kind=StageKind.QUALIFICATION)
    stage.requires_stage = qual
    stage.save(update_fields=["requires_stage"])
    worker = make_worker()
    with pytest.raises(QualificationRequired):
        assignment_start(stage=stage, worker=worker)
    make_qualification(worker=worker, stage=qual, passed=False)
    with pytest.raises(QualificationRequired):
        assignment_start(stage=stage, worker=worker)
    passed = make_worker()
    make_qualification(worker=passed, stage=qual, passed=True)
    assert assignment_start(stage=stage, worker=passed).items.count() == 3

    stage.status = StageStatus.DRAFT
    stage.save(update_fields=["status"])
    with pytest.raises(StageNotOpen):
        assignment_start(stage=stage, worker=passed)


def test_hit_assignment_is_reused_per_external_id_and_refused_to_others():
    project, stage, items = make_task(TaskKind.LIKERT)
    hit = make_hit(stage, items=items[:2], external_id="HIT1")
    worker = make_worker()
    first = assignment_start(stage=stage, worker=worker, hit=hit, external_id="ASG1")
    assert list(first.items.order_by("assignmentitem__position")) == items[:2]
    assert assignment_start(stage=stage, worker=worker, hit=hit, external_id="ASG1") == first
    with pytest.raises(ForeignAssignment):
        assignment_start(stage=stage, worker=make_worker(), hit=hit, external_id="ASG1")
    assignment_submit(assignment=first, answers=[{"item": i.pk, "score": 3} for i in items[:2]])
    with pytest.raises(AssignmentClosed) as exc:
        assignment_start(stage=stage, worker=worker, hit=hit, external_id="ASG1")
    assert exc.value.finished


def test_inhouse_worker_resumes_the_unfinished_assignment():
    _, stage, _ = make_task(TaskKind.LIKERT)
    worker = make_worker()
    first = assignment_start(stage=stage, worker=worker)
    assert assignment_start(stage=stage, worker=worker) == first


def test_abandoned_assignments_are_released_after_the_timeout():
    project, stage, items = make_task(TaskKind.AB, redundancy={"default": 1},
                                      assignment_timeout_minutes=30)
    idle = assignment_start(stage=stage, worker=make_worker())
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=stage, worker=make_worker())
    assert assignment_release_abandoned(now=timezone.now() + timedelta(minutes=10)) == 0
    assert assignment_release_abandoned(now=timezone.now() + timedelta(minutes=31)) == 1
    idle.refresh_from_db()
    assert idle.status == AssignmentStatus.RETURNED
    assert set(assignment_start(stage=stage, worker=make_worker()).items.all()) == set(items)
    with pytest.raises(AssignmentClosed):
        assignment_submit(assignment=idle, answers=[])


def test_expired_but_unreleased_assignment_frees_its_items():
    project, stage, items = make_task(TaskKind.AB, redundancy={"default": 1},
                                      assignment_timeout_minutes=30)
    idle = assignment_start(stage=stage, worker=make_worker())
    Assignment.objects.filter(pk=idle.pk).update(
        last_seen_at=timezone.now() - timedelta(minutes=45),
        started_at=timezone.now() - timedelta(minutes=45),
    )
    assert set(items_pick_next(stage=stage, worker=make_worker(), limit=5)) == set(items)


# --- Drafts and submit --------------------------------------------------------------------------


@pytest.mark.reliability
def test_submit_maps_shown_order_to_item_order_and_is_idempotent():
    project, stage, items = make_task(TaskKind.AB)
    assignment = assignment_start(stage=stage, worker=make_worker())
    answers = [ab_answer(assignment, item, role="B") for item in items]
    judgments = assignment_submit(assignment=assignment, answers=answers,
                                  client_meta={"viewport": "1280x800"})
    assert [j.choice for j in judgments] == ["B", "B", "B"]
    for judgment in judgments:
        row = assignment.assignmentitem_set.get(item=judgment.item)
        assert judgment.presented_order == row.presented_order
        assert sorted(judgment.presented_order) == ["A", "B"]
        assert judgment.time_spent_ms == 1234 and judgment.client_started_at is not None
        assert judgment.aspects == ["factuality"] and judgment.difficult is False
        assert judgment.extra["client_meta"] == {"viewport": "1280x800"}
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert assignment.completion_code and assignment.submitted_at
    again = assignment_submit(assignment=assignment, answers=answers)
    assert [j.pk for j in again] == [j.pk for j in judgments]
    assert Judgment.objects.count() == 3


@pytest.mark.reliability
def test_an_ab_project_asks_for_a_written_justification_unless_told_otherwise():
    """The long-form QA protocol has every judge say why: by default an A/B answer with no
    sentence of justification is refused; a researcher who wants it optional sets 0."""
    project, stage, items = make_task(TaskKind.AB, n_items=1)
    assert project.justification_min_length == 20
    assignment = assignment_start(stage=stage, worker=make_worker())
    with pytest.raises(SubmissionInvalid) as exc:
        assignment_submit(assignment=assignment, answers=[ab_answer(assignment, items[0], text="")])
    assert "at least 20 characters (0 so far)" in " ".join(exc.value.errors[str(items[0].pk)])
    assert Judgment.objects.count() == 0

    project.justification_min_length = 0
    project.save(update_fields=["justification_min_length"])
    assignment.refresh_from_db()
    assignment_submit(assignment=assignment, answers=[ab_answer(assignment, items[0], text="")])
    assert Judgment.objects.get().justification == ""


@pytest.mark.reliability
def test_submit_rejects_incomplete_or_invalid_answers_and_stores_nothing():
    project, stage, items = make_task(TaskKind.AB, justification_min_length=30)
    other_item = make_item(project)
    assignment = assignment_start(stage=stage, worker=make_worker())
    answers = [ab_answer(assignment, items[0], text="too short"),
               {**ab_answer(assignment, items[1]), "aspects": ["vibes"], "difficult": None},
               {"item": other_item.pk, "shown_choice": "A"}]
    with pytest.raises(SubmissionInvalid) as exc:
        assignment_submit(assignment=assignment, answers=answers)
    errors = exc.value.errors
    assert "at least 30 characters (9 so far)" in " ".join(errors[str(items[0].pk)])
    assert any("Unknown aspect: vibes" in m for m in errors[str(items[1].pk)])
    assert any("difficult" in m for m in errors[str(items[1].pk)])
    assert errors[str(items[2].pk)] == ["Answer this item."]
    assert "not part of this assignment" in errors["__all__"][0]
    assert Judgment.objects.count() == 0
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.IN_PROGRESS


@pytest.mark.reliability
@pytest.mark.parametrize("score", [0, 6, 2.5, "x", None, True])
def test_likert_scores_outside_the_scale_are_refused(score):
    _, stage, items = make_task(TaskKind.LIKERT, n_items=1)
    assignment = assignment_start(stage=stage, worker=make_worker())
    with pytest.raises(SubmissionInvalid) as exc:
        assignment_submit(assignment=assignment, answers=[{"item": items[0].pk, "score": score}])
    assert exc.value.errors[str(items[0].pk)] == ["Pick a score from 1 to 5."]


def test_draft_autosave_keeps_server_state_and_refuses_after_submit():
    project, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.PILOT, n_items=1)
    assignment = assignment_start(stage=stage, worker=make_worker())
    order = assignment.assignmentitem_set.get().presented_order
    assignment_record_guess(assignment=assignment, item=items[0],
                            answer={"shown_guess": shown_label(order, "C", "abcd")})
    assignment_save_draft(assignment=assignment,
                          draft={"answers": {"1": {}}, SERVER_DRAFT_KEY: {"guesses": {}}})
    assignment.refresh_from_db()
    assert assignment.draft["answers"] == {"1": {}}
    assert assignment.draft[SERVER_DRAFT_KEY]["guesses"] == {str(items[0].pk): "C"}
    # A second guess cannot replace the locked one.
    assert assignment_record_guess(assignment=assignment, item=items[0],
                                   answer={"shown_guess": shown_label(order, "A", "abcd")}) == "C"
    judgment = assignment_confirm_item(
        assignment=assignment, item=items[0],
        answer={"shown_choice": shown_label(order, "A", "abcd"),
                "shown_guess": shown_label(order, "A", "abcd")},
    )
    assert judgment.choice == "A" and judgment.extra["guess_choice"] == "C"
    assert judgment.extra["is_correct"] is True
    assignment_submit(assignment=assignment, answers=[])
    with pytest.raises(AssignmentClosed):
        assignment_save_draft(assignment=assignment, draft={})


def test_qa_mode_confirm_gives_feedback_only_after_answering():
    _, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2)
    assignment = assignment_start(stage=stage, worker=make_worker())
    assert assignment_feedback(assignment=assignment, item_id=items[0].pk) == {}
    order = assignment.assignmentitem_set.get(item=items[0]).presented_order
    wrong = shown_label(order, "D", "abcd")
    judgment = assignment_confirm_item(assignment=assignment, item=items[0],
                                       answer={"shown_choice": wrong})
    assert judgment.choice == "D" and judgment.extra["is_correct"] is False
    again = assignment_confirm_item(assignment=assignment, item=items[0],
                                    answer={"shown_choice": shown_label(order, "A", "abcd")})
    assert again.pk == judgment.pk and again.choice == "D"
    feedback = assignment_feedback(assignment=assignment, item_id=items[0].pk)
    assert feedback["is_correct"] is False
    assert feedback["correct_shown"] == shown_label(order, "A", "abcd")
    with pytest.raises(SubmissionInvalid) as exc:
        assignment_submit(assignment=assignment, answers=[])
    assert exc.value.errors == {str(items[1].pk): ["Answer this item."]}
    order2 = assignment.assignmentitem_set.get(item=items[1]).presented_order
    judgments = assignment_submit(
        assignment=assignment,
        answers=[{"item": items[1].pk, "shown_choice": shown_label(order2, "B", "abcd")}],
    )
    assert [j.choice for j in judgments] == ["D", "B"]


def test_qualification_stage_never_reveals_the_scoring():
    project, _, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=1)
    qual = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.PUBLISHED)
    assignment = assignment_start(stage=qual, worker=make_worker())
    assignment_confirm_item(assignment=assignment, item=items[0], answer={"shown_choice": "a"})
    feedback = assignment_feedback(assignment=assignment, item_id=items[0].pk)
    assert "correct_shown" not in feedback and "is_correct" not in feedback


@pytest.mark.parametrize("validity,shown,expected_choice,expected_choices", [
    ("one", ["b"], "X", ["X"]),
    ("several", ["a", "c"], "", None),
    ("none", [], "", []),
])
def test_validity_judging_maps_marked_answers_to_roles(validity, shown, expected_choice,
                                                       expected_choices):
    _, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.VALIDITY, n_items=1)
    assignment = assignment_start(stage=stage, worker=make_worker())
    order = assignment.assignmentitem_set.get().presented_order
    [judgment] = assignment_submit(assignment=assignment, answers=[
        {"item": items[0].pk, "validity": validity, "shown_choices": shown}])
    roles = sorted(order["abcd".index(s)] for s in shown)
    assert judgment.choices == roles
    assert judgment.choice == (roles[0] if validity == "one" else "")
    assert judgment.extra["validity"] == validity


def test_validity_judging_refuses_inconsistent_marks():
    _, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.VALIDITY, n_items=1)
    assignment = assignment_start(stage=stage, worker=make_worker())
    with pytest.raises(SubmissionInvalid) as exc:
        assignment_submit(assignment=assignment, answers=[
            {"item": items[0].pk, "validity": "several", "shown_choices": ["a"]}])
    assert "at least two" in exc.value.errors[str(items[0].pk)][0]


def test_ab_aspect_preferences_are_stored_in_item_order():
    _, stage, items = make_task(TaskKind.AB, n_items=1,
                                aspect_preferences=["coherence", "factuality"])
    assignment = assignment_start(stage=stage, worker=make_worker())
    order = assignment.assignmentitem_set.get().presented_order
    answer = {**ab_answer(assignment, items[0]),
              "aspect_preferences": {"coherence": shown_label(order, "B", "AB"),
                                     "factuality": "same"}}
    [judgment] = assignment_submit(assignment=assignment, answers=[answer])
    assert judgment.extra["aspect_preferences"] == {"coherence": "B", "factuality": "same"}


@pytest.mark.reliability
def test_unknown_aspect_preference_and_oversized_justification_are_refused():
    _, stage, items = make_task(TaskKind.AB, n_items=1, aspect_preferences=["coherence"])
    assignment = assignment_start(stage=stage, worker=make_worker())
    answer = {**ab_answer(assignment, items[0], text="xy" * 5_001),
              "aspect_preferences": {"humour": "A"}}
    with pytest.raises(SubmissionInvalid) as exc:
        assignment_submit(assignment=assignment, answers=[answer])
    messages = " ".join(exc.value.errors[str(items[0].pk)])
    assert "under 10000 characters" in messages and "Unknown aspect preference: humour" in messages


@pytest.mark.reliability
def test_oversized_draft_is_refused():
    _, stage, _ = make_task(TaskKind.AB, n_items=1)
    assignment = assignment_start(stage=stage, worker=make_worker())
    with pytest.raises(SubmissionInvalid):
        assignment_save_draft(assignment=assignment, draft={"answers": {"1": "x" * 300_000}})


def test_release_task_calls_the_service():
    from worker.tasks.assignments import release_abandoned_assignments

    project, stage, _ = make_task(TaskKind.AB, assignment_timeout_minutes=1)
    idle = assignment_start(stage=stage, worker=make_worker())
    Assignment.objects.filter(pk=idle.pk).update(
        last_seen_at=timezone.now() - timedelta(minutes=5))
    assert release_abandoned_assignments() == 1
    idle.refresh_from_db()
    assert idle.status == AssignmentStatus.RETURNED


def test_release_task_is_scheduled_by_beat(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["release-abandoned-assignments"]
    assert entry["task"] == "worker.tasks.assignments.release_abandoned_assignments"


def test_latin_square_gives_one_item_per_paragraph_rotating_questions_and_levels():
    project, stage, _ = make_task(TaskKind.MC, n_items=0, items_per_hit=10,
                                  redundancy={"default": 1})
    items = {}  # no setting: the default for a multiple-choice project sharing paragraphs
    for paragraph in range(4):
        for question in (1, 2):
            for level in ("Ele", "Adv"):
                items[paragraph, question, level] = make_item(
                    project, text_level=level,
                    metadata={"article": 1, "paragraph": paragraph, "question": question})
    assert {i.design_unit for i in items.values()} == {f"article 1 paragraph {p}"
                                                        for p in range(4)}
    workers = [make_worker() for _ in range(4)]
    # Participants are numbered in order of arrival (first assignment in the stage).
    got = {w: list(assignment_start(stage=stage, worker=w).items.all()) for w in workers}
    for picked in got.values():
        assert sorted(i.metadata["paragraph"] for i in picked) == [0, 1, 2, 3]  # each once
        levels = [item.text_level for item in picked]
        assert levels.count("Ele") == levels.count("Adv") == 2  # balanced within a list
        questions = [item.metadata["question"] for item in picked]
        assert questions.count(1) == questions.count(2) == 2
    # The four participants together take every condition once.
    assert sorted(i.pk for picked in got.values() for i in picked) == sorted(
        i.pk for i in items.values())
    # A worker who read one item of a paragraph (in any stage) never gets another of it.
    newcomer = make_worker()
    other = make_stage(project, status=StageStatus.PUBLISHED)
    make_judgment(item=items[0, 1, "Ele"], stage=other, worker=newcomer)
    Assignment.objects.filter(worker__in=workers).update(status=AssignmentStatus.RETURNED)
    later = items_pick_next(stage=stage, worker=newcomer, limit=10)
    assert len(later) == 3 and all(i.metadata["paragraph"] != 0 for i in later)


def test_latin_square_falls_back_to_a_condition_still_short_when_the_own_one_is_full():
    """A participant who returns their assignment leaves their conditions open; the next
    arrival whose own conditions are full gets the open ones (still one item per paragraph),
    so the stage can finish without waiting for a participant of the same list."""
    project, stage, _ = make_task(TaskKind.MC, n_items=0, items_per_hit=10,
                                  redundancy={"default": 1})
    for paragraph in range(2):
        for level in ("Ele", "Int", "Adv"):
            make_item(project, text_level=level,
                      metadata={"article": 1, "paragraph": paragraph, "question": 1})
    a, b, c, d, e = [make_worker() for _ in range(5)]
    returned = assignment_start(stage=stage, worker=a)  # participant 0 (list 0) returns it
    Assignment.objects.filter(pk=returned.pk).update(status=AssignmentStatus.RETURNED)
    for worker in (b, c):  # participants 1 and 2 (lists 1 and 2) finish theirs
        done = assignment_start(stage=stage, worker=worker)
        assignment_submit(assignment=done, answers=[{"item": i.pk, "shown_choice": "a"}
                                                    for i in done.items.all()])
    again = assignment_start(stage=stage, worker=d)  # participant 3: list 0, returns it too
    assert set(again.items.all()) == set(returned.items.all())
    Assignment.objects.filter(pk=again.pk).update(status=AssignmentStatus.RETURNED)
    # Participant 4 is on list 1, which is full: they get list 0's open conditions.
    late = assignment_start(stage=stage, worker=e)
    assert set(late.items.all()) == set(returned.items.all())
    assert sorted(i.metadata["paragraph"] for i in late.items.all()) == [0, 1]


@pytest.mark.reliability
@pytest.mark.parametrize("door", ["confirm", "submit"])
def test_an_item_the_worker_judged_before_in_the_stage_is_refused_as_already_judged(door):
    _, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2)
    worker = make_worker()
    assignment = assignment_start(stage=stage, worker=worker)
    make_judgment(item=items[0], stage=stage, worker=worker)  # e.g. through an earlier import
    with pytest.raises(SubmissionInvalid) as exc:
        if door == "confirm":
            assignment_confirm_item(assignment=assignment, item=items[0],
                                    answer={"shown_choice": "a"})
        else:
            assignment_submit(assignment=assignment, answers=[
                {"item": item.pk, "shown_choice": "a"} for item in items])
    assert exc.value.errors == (
        {str(items[0].pk): ["You have already judged this item."]} if door == "confirm"
        else {"__all__": ["Some of these items were already judged by you in this stage."]})
    assert Judgment.objects.filter(assignment=assignment).count() == 0


@pytest.mark.reliability
@pytest.mark.parametrize("door", ["confirm", "submit"])
def test_another_database_error_is_not_reported_as_already_judged(door):
    """NaN in client_meta (the task API refuses it; code calling the service directly does not
    have to): SQLite's JSON check refuses the row with an IntegrityError, which was answered
    "already judged" though the worker had judged nothing. It is raised as it is."""
    from django.db import DatabaseError

    _, stage, items = make_task(TaskKind.MC, mode=ExperimentMode.QA, n_items=2)
    assignment = assignment_start(stage=stage, worker=make_worker())
    meta = {"width": float("nan")}
    with pytest.raises(DatabaseError):
        if door == "confirm":
            assignment_confirm_item(assignment=assignment, item=items[0],
                                    answer={"shown_choice": "a"}, client_meta=meta)
        else:
            assignment_submit(assignment=assignment, client_meta=meta, answers=[
                {"item": item.pk, "shown_choice": "a"} for item in items])
    assert not Judgment.objects.exists()


# --- Published stages: practice and gold come from the project, not `stage.items` -----------


def _published(project, kind=StageKind.TRIAL, **fields):
    from annotation.services.stages import stage_publish

    stage = make_stage(project, kind=kind, status=StageStatus.DRAFT, **fields)
    stage_publish(stage=stage)
    stage.refresh_from_db()
    assert stage.status in (StageStatus.PUBLISHED, StageStatus.COLLECTING)
    return stage


@pytest.mark.parametrize("kind", [StageKind.TRIAL, StageKind.FULL])
def test_published_stage_serves_practice_first_and_mixes_in_gold(kind):
    project, draft_stage, items = make_task(TaskKind.MC, n_items=8, gold_rate=0.5,
                                            items_per_hit=5, redundancy={"default": 3})
    draft_stage.delete()
    practice = [make_item(project, is_practice=True) for _ in range(2)]
    gold = [make_item(project, is_gold_check=True, gold={"choice": "A"}) for _ in range(6)]
    stage = _published(project, kind=kind, settings={"n_items": 8})
    # Publishing stored only the regular items on the stage.
    assert set(stage.items.all()) == set(items)

    worker = make_worker()
    first = list(assignment_start(stage=stage, worker=worker).items
                 .order_by("assignmentitem__position"))
    assert first[:2] == practice
    # The practice items come on top of the batch of 5 the HIT plan counts: 5 x 0.5 = 2.5,
    # rounded half up to 3 gold items (never at random), and 2 regular items.
    assert len(first) == 7
    assert sum(item in gold for item in first) == 3
    assert sum(item in items for item in first) == 2
    assignment = Assignment.objects.get(worker=worker)
    for item in first:
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment)
    Assignment.objects.filter(pk=assignment.pk).update(status=AssignmentStatus.SUBMITTED)

    second = items_pick_next(stage=stage, worker=worker, limit=5)
    assert not set(second) & set(practice)  # practice once per worker
    assert sum(item in gold for item in second) == 3  # 5 x 0.5 = 2.5, half up: 3
    assert sum(item in items for item in second) == 2


def test_practice_done_in_a_practice_stage_is_not_repeated_in_the_trial():
    project, draft_stage, items = make_task(TaskKind.MC, n_items=4, items_per_hit=4)
    draft_stage.delete()
    practice = make_item(project, is_practice=True)
    practice_stage = _published(project, kind=StageKind.PRACTICE)
    trial = _published(project, settings={"n_items": 4})
    worker, newcomer = make_worker(), make_worker()
    assert items_pick_next(stage=practice_stage, worker=worker, limit=4) == [practice]
    make_judgment(item=practice, stage=practice_stage, worker=worker)
    assert practice not in items_pick_next(stage=trial, worker=worker, limit=4)
    assert items_pick_next(stage=trial, worker=newcomer, limit=4)[0] == practice


def test_gold_items_for_stage_is_the_project_pool_for_data_stages():
    from annotation.services.assignments import gold_items_for_stage

    project, draft_stage, items = make_task(TaskKind.MC, n_items=3)
    draft_stage.delete()
    gold = [make_item(project, is_gold_check=True, gold={"choice": "A"}) for _ in range(2)]
    make_item(project, is_gold_check=True, excluded=True)
    stage = _published(project, settings={"n_items": 3})
    assert set(gold_items_for_stage(stage=stage)) == set(gold)


def test_ranking_in_sql_returns_the_top_deficits_only():
    from annotation.services.assignments.picking import _ranked
    from annotation.stage_plan_selectors import stage_items

    project, stage, items = make_task(TaskKind.AB, n_items=6, items_per_hit=2,
                                      redundancy={"train": 4, "default": 2})
    for item in items[:2]:
        item.split = "train"
        item.save(update_fields=["split"])
    make_judgment(item=items[0], stage=stage)  # train: 4 - 1 = 3
    make_judgment(item=items[2], stage=stage)  # dev: 2 - 1 = 1
    make_judgment(item=items[3], stage=stage)
    make_judgment(item=items[3], stage=stage)  # dev: filled
    held = assignment_start(stage=stage, worker=make_worker())  # holds the top two
    assert set(held.items.all()) == {items[1], items[0]}
    available = stage_items(stage).filter(
        is_practice=False, is_gold_check=False)
    # train 4-0-1=3 (items[1]), train 4-1-1=2 (items[0]), dev 2 (items[4], items[5]), dev 1.
    ranked = [pk for pk, _ in _ranked(stage, available, limit=10)]
    assert ranked == [items[1].pk, items[0].pk, items[4].pk, items[5].pk, items[2].pk]
    assert [pk for pk, _ in _ranked(stage, available, limit=2)] == ranked[:2]
