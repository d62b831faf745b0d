"""Review rules, qualification grading, payments done at most once, and the Celery tasks."""
from __future__ import annotations

from decimal import Decimal

import pytest
from django.conf import settings as django_settings

from annotation.models import (
    AssignmentStatus,
    ProviderCall,
    ProviderCallStatus,
    StageKind,
    StageStatus,
    TaskKind,
    WorkerQualification,
    WorkerStatus,
)
from annotation.providers import CrowdProvider, override_provider
from annotation.providers.calls import provider_call_run
from annotation.selectors import worker_is_blocked_for
from annotation.services.qualification import qualification_grade
from annotation.services.review import (
    ReviewError,
    assignment_approve,
    assignment_bonus_pay,
    assignment_review_rules,
    correct_answer_bonus,
    stage_auto_review,
    worker_block_everywhere,
    workers_notify,
)
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)

pytestmark = pytest.mark.django_db


class RecordingProvider(CrowdProvider):
    """Counts side effects; `lose_next` makes the next call do its work and then fail the way a
    lost response (or a worker killed right after the call) does."""

    name = "inhouse"

    def __init__(self):
        self.done: list[tuple] = []
        self.tokens: dict[str, int] = {}
        self.lose_next = 0

    def _record(self, entry, token=None):
        if token is not None and token in self.tokens:
            return {"duplicate": True}  # the provider deduplicates its tokens
        self.done.append(entry)
        if token is not None:
            self.tokens[token] = len(self.done)
        if self.lose_next:
            self.lose_next -= 1
            raise ConnectionError("response lost")
        return {}

    def publish_stage(self, *, stage):
        return iter(())

    def list_submissions(self, *, stage):
        return iter(())

    def approve(self, *, assignment, feedback=""):
        return self._record(("approve", assignment.pk))

    def reject(self, *, assignment, reason):
        return self._record(("reject", assignment.pk, reason))

    def bonus(self, *, assignment, amount, reason, token):
        return self._record(("bonus", assignment.pk, str(amount)), token=token)

    def block(self, *, worker, reason):
        return self._record(("block", worker.external_id))

    def notify(self, *, workers, subject, message):
        return self._record(("notify", tuple(w.external_id for w in workers)))


@pytest.fixture
def recording():
    provider = RecordingProvider()
    with override_provider("inhouse", provider):
        yield provider


def likert_assignment(stage, scores, seconds=5.0, gold_checks=0, worker=None):
    worker = worker or make_worker()
    items = [make_item(stage.project, is_gold_check=n < gold_checks, gold={"score": 3})
             for n in range(len(scores))]
    assignment = make_assignment(stage, worker=worker, items=items,
                                 status=AssignmentStatus.SUBMITTED)
    for item, score in zip(items, scores, strict=True):
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment, score=score,
                      time_spent_ms=int(seconds * 1000))
    assignment.submitted_at = assignment.started_at
    assignment.save()
    return assignment


def ab_assignment(stage, picks):
    """An A/B assignment: (stored choice, order shown) per item, five seconds each."""
    worker = make_worker()
    items = [make_item(stage.project) for _ in picks]
    assignment = make_assignment(stage, worker=worker, items=items,
                                 status=AssignmentStatus.SUBMITTED)
    for item, (choice, order) in zip(items, picks, strict=True):
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                      choice=choice, presented_order=order, time_spent_ms=5000)
    return assignment


@pytest.mark.reliability
def test_ab_straight_lining_is_judged_by_the_position_on_screen(db):
    """A study walk: a careful judge whose five better answers were all the file's answer B
    (shown left or right at random) was held for "the same answer on 100% of 5 items" (with
    `auto_reject`, rejected unpaid), while a worker who pressed the left answer every time
    passed, their stored choices scattered by the shuffle. The dashboard's "modal answer
    share" read positions all along; the rule now reads them too (`position_shown`)."""
    stage = make_stage(make_project(TaskKind.AB))
    left, right = ["A", "B"], ["B", "A"]
    careful = ab_assignment(stage, [("B", left), ("B", right), ("B", right), ("B", left),
                                    ("B", right)])
    decision = assignment_review_rules(assignment=careful)
    assert decision.action == "approve", decision.reasons
    assert decision.metrics["same_answer_share"] == 0.6
    presser = ab_assignment(stage, [("A", left), ("B", right), ("B", right), ("A", left),
                                    ("B", right)])
    decision = assignment_review_rules(assignment=presser)
    assert decision.action == "hold" and "same answer on 100% of 5" in decision.reasons[0]
    # Judgments without a recorded order (imported) fall back to the stored choice.
    assert assignment_review_rules(assignment=ab_assignment(
        stage, [("A", [])] * 5)).metrics["same_answer_share"] == 1.0


def test_rules_approve_good_work_and_name_each_problem(db):
    stage = make_stage(make_project(TaskKind.LIKERT))
    good = likert_assignment(stage, [3, 4, 2, 5, 3], gold_checks=2)
    assert assignment_review_rules(assignment=good).action == "approve"
    straight = likert_assignment(stage, [4, 4, 4, 4, 4, 4])
    decision = assignment_review_rules(assignment=straight)
    assert decision.action == "hold" and "same answer on 100%" in decision.reasons[0]
    fast = likert_assignment(stage, [1, 2, 3], seconds=0.5)
    assert "0.5 s per item" in assignment_review_rules(assignment=fast).reasons[0]
    wrong_gold = likert_assignment(stage, [1, 5, 3], gold_checks=2)
    reasons = assignment_review_rules(assignment=wrong_gold).reasons
    assert reasons == ["accuracy on check items 0% (0 of 2) is below 50%"]
    stage.settings = {"review": {"auto_reject": True}}
    stage.save()
    assert assignment_review_rules(assignment=wrong_gold).action == "reject"
    empty = make_assignment(stage, status=AssignmentStatus.SUBMITTED)
    assert assignment_review_rules(assignment=empty).action == "hold"


def test_a_starc_reader_right_on_every_item_is_no_straight_liner(db):
    """STARC's correct answer is always role A, shown at a random place: a reader who got all
    six items right was held as "the same answer on 100% of 6 items" (the rule read the role,
    the dashboard the position on screen); one who clicks the first option every time is."""
    stage = make_stage(make_project(TaskKind.MC))
    orders = [list(order) for order in ("BADC", "ACBD", "DCAB", "CBDA", "BDAC", "DBCA")]

    def mc_assignment(choices):
        worker = make_worker()
        items = [make_item(stage.project, gold={"choice": "A"}) for _ in orders]
        assignment = make_assignment(stage, worker=worker, items=items,
                                     status=AssignmentStatus.SUBMITTED)
        for item, order, choice in zip(items, orders, choices, strict=True):
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                          choice=choice, presented_order=order, time_spent_ms=20_000)
        return assignment

    careful = mc_assignment(["A"] * 6)
    assert assignment_review_rules(assignment=careful).action == "approve"
    first_clicker = mc_assignment([order[0] for order in orders])
    decision = assignment_review_rules(assignment=first_clicker)
    assert decision.action == "hold" and "same answer on 100% of 6" in decision.reasons[0]


def test_qualification_grading_tolerance_threshold_and_no_retake(db):
    project = make_project(TaskKind.LIKERT, qualification_tolerance=1.0,
                           qualification_threshold=0.8)
    stage = make_stage(project, kind=StageKind.QUALIFICATION)
    items = [make_item(project, gold={"score": 3}) for _ in range(5)]
    worker = make_worker()
    first = make_assignment(stage, worker=worker, items=items, status=AssignmentStatus.SUBMITTED)
    for item, score in zip(items, [4, 2, 3, 5, 1], strict=True):  # within 1: 3 of 5 = 60%
        make_judgment(item=item, stage=stage, worker=worker, assignment=first, score=score)
    result = qualification_grade(assignment=first)
    assert (result.passed, result.score, result.n_items) == (False, 0.6, 5)
    retake = make_assignment(stage, worker=worker, items=items, status=AssignmentStatus.SUBMITTED)
    assert qualification_grade(assignment=retake).pk == result.pk  # the first result stands
    assert WorkerQualification.objects.filter(worker=worker).count() == 1


def test_mc_qualification_counts_unanswered_items_as_wrong(db):
    project = make_project(TaskKind.MC)
    stage = make_stage(project, kind=StageKind.QUALIFICATION)
    items = [make_item(project, gold={"choice": "A"}) for _ in range(5)]
    worker = make_worker()
    assignment = make_assignment(stage, worker=worker, items=items)
    for item in items[:4]:
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment, choice="A")
    result = qualification_grade(assignment=assignment)
    assert (result.passed, result.score) == (True, 0.8)


@pytest.mark.reliability
def test_bonus_survives_a_lost_response_and_redelivery_without_paying_twice(recording):
    stage = make_stage(make_project(TaskKind.LIKERT))
    assignment = likert_assignment(stage, [3, 4, 2])
    assignment_approve(assignment=assignment)
    recording.lose_next = 1
    with pytest.raises(ConnectionError):
        assignment_bonus_pay(assignment=assignment, amount=Decimal("0.20"), reason="r", key="k")
    call = ProviderCall.objects.get(operation="SendBonus")
    assert call.status == ProviderCallStatus.PENDING and call.attempts == 1
    # The task is redelivered: the same token goes out again and the provider deduplicates it.
    assignment_bonus_pay(assignment=assignment, amount=Decimal("0.20"), reason="r", key="k")
    assignment_bonus_pay(assignment=assignment, amount=Decimal("0.20"), reason="r", key="k")
    assert [d for d in recording.done if d[0] == "bonus"] == [("bonus", assignment.pk, "0.20")]
    call.refresh_from_db()
    assert (call.status, call.attempts) == (ProviderCallStatus.SUCCEEDED, 2)
    assignment.refresh_from_db()
    assert assignment.bonus_paid == Decimal("0.20")
    # A different bonus is a different payment.
    assignment_bonus_pay(assignment=assignment, amount=Decimal("0.10"), reason="extra")
    assignment.refresh_from_db()
    assert assignment.bonus_paid == Decimal("0.30")


def test_succeeded_calls_are_never_repeated():
    calls = []
    for _ in range(3):
        provider_call_run(provider="mturk", operation="Op", key="same-key",
                          call_fn=lambda token: calls.append(token) or {"ok": 1})
    assert len(calls) == 1


def test_flagged_and_unsubmitted_work_is_not_approved(recording):
    stage = make_stage(make_project(TaskKind.LIKERT))
    flagged = likert_assignment(stage, [1, 2, 3])
    flagged.status = AssignmentStatus.FLAGGED
    flagged.save()
    with pytest.raises(ReviewError):
        assignment_approve(assignment=flagged)
    report = stage_auto_review(stage=stage)
    assert report.approved == 0 and recording.done == []
    assignment_approve(assignment=flagged, allow_flagged=True)  # the researcher decides
    assert recording.done == [("approve", flagged.pk)]


@pytest.mark.reliability
def test_starc_bonus_per_correct_answer_paid_once_by_review(recording):
    project = make_project(TaskKind.MC, bonus_per_correct=Decimal("0.05"))
    stage = make_stage(project)
    worker = make_worker()
    items = [make_item(project, gold={"choice": "A"}) for _ in range(4)]
    assignment = make_assignment(stage, worker=worker, items=items,
                                 status=AssignmentStatus.SUBMITTED)
    for item, choice in zip(items, "AABA", strict=True):
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                      choice=choice, time_spent_ms=9000)
    assignment.submitted_at = assignment.started_at
    assignment.save()
    assert correct_answer_bonus(assignment=assignment) == Decimal("0.15")
    first = stage_auto_review(stage=stage)
    again = stage_auto_review(stage=stage)
    assert (first.approved, first.bonuses, again.approved, again.bonuses) == (1, 1, 0, 0)
    assert [d[0] for d in recording.done] == ["approve", "bonus"]
    assignment.refresh_from_db()
    assert assignment.bonus_paid == Decimal("0.15")


def test_approval_waits_for_the_configured_delay(recording):
    stage = make_stage(make_project(TaskKind.LIKERT),
                       settings={"review": {"approve_after_seconds": 3600}})
    assignment = likert_assignment(stage, [3, 4, 2])
    assert stage_auto_review(stage=stage).approved == 0
    from datetime import timedelta

    later = assignment.submitted_at + timedelta(hours=2)
    assert stage_auto_review(stage=stage, now=later).approved == 1


def _rejected_twice_and_blocked(stage, worker) -> None:
    """Two straight-lined assignments of `worker`, rejected by the stage's rules, which block
    after two rejections."""
    for _ in range(2):
        likert_assignment(stage, [2, 2, 2, 2, 2], worker=worker)  # straight-lining
    report = stage_auto_review(stage=stage)
    assert (report.rejected, report.blocked) == (2, 1)
    worker.refresh_from_db()


def test_repeated_rejections_block_the_worker(recording):
    stage = make_stage(make_project(TaskKind.LIKERT),
                       settings={"review": {"auto_reject": True, "block_after_rejections": 2}})
    worker = make_worker()
    _rejected_twice_and_blocked(stage, worker)
    assert worker.status == WorkerStatus.BLOCKED
    assert ("block", worker.external_id) in recording.done


@pytest.mark.reliability
def test_one_wrong_check_answer_is_held_never_rejected_nor_blocked_on(recording):
    """A worker whose assignments each held one check item, answered wrong once each, was
    rejected twice ("accuracy on check items 0% is below 50%", from one answer) and then
    blocked by `block_after_rejections`: two gold answers in all. Fewer check items than
    `min_gold_checks_to_reject` (2) are held for the researcher, the reason saying how little
    it rests on; the other rules still reject; with enough checks the rule rejects as before."""
    stage = make_stage(make_project(TaskKind.LIKERT),
                       settings={"review": {"auto_reject": True, "block_after_rejections": 2}})
    worker = make_worker()
    thin = [likert_assignment(stage, [1, 3, 4, 2, 5], gold_checks=1, worker=worker)
            for _ in range(2)]
    decision = assignment_review_rules(assignment=thin[0])
    assert decision.action == "hold"
    assert decision.reasons == [
        "accuracy on check items 0% (0 of 1) is below 50%: only 1 check item, too few to "
        "reject on alone (at least 2)"]
    report = stage_auto_review(stage=stage)
    assert (report.rejected, report.held, report.blocked) == (0, 2, 0)
    worker.refresh_from_db()
    assert worker.status == WorkerStatus.ACTIVE
    assert not [done for done in recording.done if done[0] in ("reject", "block")]
    # Another reason beside it still rejects; enough check items reject on accuracy alone.
    fast = likert_assignment(stage, [1, 3, 4], gold_checks=1, seconds=0.5)
    assert assignment_review_rules(assignment=fast).action == "reject"
    enough = likert_assignment(stage, [1, 5, 4], gold_checks=2)
    decision = assignment_review_rules(assignment=enough)
    assert (decision.action, decision.reasons) == (
        "reject", ["accuracy on check items 0% (0 of 2) is below 50%"])


@pytest.mark.reliability
def test_a_superuser_owned_studys_block_rule_blocks_for_that_study_only(recording):
    """The study's own rule (`block_after_rejections`) blocks for the project's researcher
    even when that researcher is a superuser: it is no superuser's decision about every
    study. The worker's accepted work in Bob's study keeps counting there (a global block took
    it out of Bob's counts and re-offered its slots, paid again), and the owner lifts the block
    with the ordinary unblock."""
    from annotation.models import Worker, WorkerBlock
    from annotation.selectors import judgments_that_count, worker_is_blocked_for
    from annotation.services.workers import worker_unblock
    from testing.factories import make_user

    root = make_user("root", superuser=True)
    stage = make_stage(make_project(TaskKind.LIKERT, owner=root),
                       settings={"review": {"auto_reject": True, "block_after_rejections": 2}})
    bobs = make_project(TaskKind.LIKERT, owner=make_user("bob"))
    bobs_stage = make_stage(bobs)
    worker = make_worker()
    bobs_work = make_assignment(bobs_stage, worker=worker, status=AssignmentStatus.APPROVED,
                                items=[make_item(bobs)])
    make_judgment(item=bobs_work.items.get(), stage=bobs_stage, worker=worker,
                  assignment=bobs_work)
    _rejected_twice_and_blocked(stage, worker)
    assert worker.status == WorkerStatus.ACTIVE
    assert worker_is_blocked_for(worker=worker, project=stage.project)
    assert not worker_is_blocked_for(worker=worker, project=bobs)
    assert judgments_that_count(bobs_stage.judgments.all(), project=bobs).count() == 1
    assert ("block", worker.external_id) in recording.done  # the provider's block, as before

    worker_unblock(worker=Worker.objects.get(pk=worker.pk), by=root)
    assert not WorkerBlock.objects.filter(worker=worker).exists()
    assert not worker_is_blocked_for(worker=worker, project=stage.project)


@pytest.mark.reliability
def test_a_researchers_unblock_is_not_overruled_by_the_next_review(recording):
    """The study's rule blocked a worker after two rejections; the researcher read the work
    and lifted the block; the next beat run (every sync) blocked them again on the very same
    two rejections and sent the provider a second block. The rule counts only rejections not
    already behind its last block of the worker: two new ones block again, once."""
    from annotation.services.workers import worker_unblock
    from testing.factories import make_user

    owner = make_user("alice")
    stage = make_stage(make_project(TaskKind.LIKERT, owner=owner),
                       settings={"review": {"auto_reject": True, "block_after_rejections": 2}})
    worker = make_worker()
    _rejected_twice_and_blocked(stage, worker)
    assert worker_is_blocked_for(worker=worker, project=stage.project)
    worker_unblock(worker=worker, by=owner)
    report = stage_auto_review(stage=stage)
    assert report.blocked == 0
    assert not worker_is_blocked_for(worker=worker, project=stage.project)
    assert [done for done in recording.done if done[0] == "block"] == [
        ("block", worker.external_id)]
    likert_assignment(stage, [4, 4, 4, 4, 4], worker=worker)  # one new rejection: not yet
    assert (stage_auto_review(stage=stage).rejected,
            worker_is_blocked_for(worker=worker, project=stage.project)) == (1, False)
    likert_assignment(stage, [5, 5, 5, 5, 5], worker=worker)  # two new ones: blocked again
    assert stage_auto_review(stage=stage).blocked == 1
    assert worker_is_blocked_for(worker=worker, project=stage.project)
    assert len([done for done in recording.done if done[0] == "block"]) == 2


def test_block_and_notify(recording):
    workers = [make_worker() for _ in range(2)]
    worker_block_everywhere(worker=workers[0], reason="spam")
    workers[0].refresh_from_db()
    assert workers[0].status == WorkerStatus.BLOCKED and workers[0].blocked_reason == "spam"
    workers_notify(workers=workers, subject="s", message="m")
    assert recording.done[-1] == ("notify", tuple(w.external_id for w in workers))


def test_celery_tasks_and_beat_entry(recording, researcher):
    from worker.tasks import providers as tasks

    assert django_settings.CELERY_BEAT_SCHEDULE["providers-sync"]["task"] == \
        "worker.tasks.providers.providers_sync_all"
    # Queued by the project's researcher: the task checks they still see it.
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 1},
                           owner=researcher)
    for _ in range(4):
        make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT)
    out = tasks.stage_publish.run(stage.pk, researcher.pk)
    assert out["status"] == StageStatus.COLLECTING
    assignment = likert_assignment(stage, [1, 2, 3])
    first = tasks.stage_sync.run(stage.pk)
    second = tasks.stage_sync.run(stage.pk)  # a redelivered task
    assert (first["approved"], second["approved"]) == (1, 0)
    assert recording.done.count(("approve", assignment.pk)) == 1


def test_prolific_needs_two_failed_checks_before_a_check_rejection(db):
    stage = make_stage(make_project(TaskKind.LIKERT), provider="prolific",
                       settings={"review": {"auto_reject": True}})
    one_wrong = likert_assignment(stage, [1, 4, 2], gold_checks=1)  # 1 check, failed
    assert assignment_review_rules(assignment=one_wrong).action == "approve"
    two_wrong = likert_assignment(stage, [1, 5, 2], gold_checks=2)  # 2 checks, both failed
    assert assignment_review_rules(assignment=two_wrong).action == "reject"
    mturk_stage = make_stage(stage.project, provider="mturk",
                             settings={"review": {"auto_reject": True}})
    # Elsewhere one failed check of one is held for the researcher (too little to reject on:
    # `min_gold_checks_to_reject`), no longer rejected; two of two reject.
    assert assignment_review_rules(
        assignment=likert_assignment(mturk_stage, [1, 4, 2], gold_checks=1)).action == "hold"
    assert assignment_review_rules(
        assignment=likert_assignment(mturk_stage, [1, 5, 2], gold_checks=2)).action == "reject"


def test_work_failing_the_rules_is_flagged_for_the_researcher(recording):
    stage = make_stage(make_project(TaskKind.LIKERT))
    fast = likert_assignment(stage, [1, 2, 3], seconds=0.3)
    report = stage_auto_review(stage=stage)
    assert (report.approved, report.rejected, report.held) == (0, 0, 1)
    fast.refresh_from_db()
    assert fast.status == AssignmentStatus.FLAGGED
    assert "Held for review: 0.3 s per item" in fast.review_note
    assert recording.done == []
    assert stage_auto_review(stage=stage).held == 0  # decided once; the researcher takes over


def test_default_bonus_key_is_the_same_in_every_process(recording):
    import subprocess
    import sys

    stage = make_stage(make_project(TaskKind.LIKERT))
    assignment = likert_assignment(stage, [3, 4, 2])
    assignment_approve(assignment=assignment)
    assignment_bonus_pay(assignment=assignment, amount=Decimal("0.40"), reason="great work")
    key = ProviderCall.objects.get(operation="SendBonus").key
    # Another process (another web worker) computes the same key for the same bonus.
    code = ("import hashlib; print(hashlib.sha256('great work'.encode()).hexdigest()[:16])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={"PYTHONHASHSEED": "123"}, check=True).stdout.strip()
    assert key.endswith(f":manual:0.40:{other}")


@pytest.mark.reliability
def test_a_bonus_by_hand_must_fit_the_budget_cap_and_money_paid_stays_committed(recording):
    """A bonus granted by hand was not in any estimate: it is refused when it would take the
    project past its cap (fee included), and what a stage has paid counts against the cap
    even where it is more than the stage's estimate."""
    from annotation.cost_selectors import project_committed_cost, stage_committed_cost

    project = make_project(TaskKind.LIKERT, budget_cap=Decimal("10.00"),
                           reward_per_hit=Decimal("0.40"))
    stage = make_stage(project)  # in-house, collecting
    assignment = likert_assignment(stage, [3, 4, 2])
    assignment_approve(assignment=assignment)
    estimate = stage_committed_cost(stage=stage)
    with pytest.raises(ReviewError, match=r"budget cap"):
        assignment_bonus_pay(assignment=assignment, amount=Decimal("50.00"), reason="great")
    assert [d for d in recording.done if d[0] == "bonus"] == []
    assert not ProviderCall.objects.filter(operation="SendBonus").exists()
    # One that fits is paid; the stage now holds at least what it paid.
    assignment_bonus_pay(assignment=assignment, amount=Decimal("5.00"), reason="great")
    assert stage_committed_cost(stage=stage) >= Decimal("5.40") > estimate
    assert project_committed_cost(project=project) == stage_committed_cost(stage=stage)
    # Paying it again (a double click) is no new payment and is not refused.
    assignment_bonus_pay(assignment=assignment, amount=Decimal("5.00"), reason="great")
    assert [d[0] for d in recording.done].count("bonus") == 1


def test_the_mturk_qualification_value_agrees_with_the_local_pass_mark():
    from annotation.domain.qualification_scores import granted_value, percent_threshold

    assert percent_threshold(0.67) == 67 and percent_threshold(0.665) == 67
    assert percent_threshold(0.8) == 80 and percent_threshold(0) == 0
    # 2 of 3 right against 0.67: failed here, so below MTurk's 67 (it was round(66.7) = 67).
    assert granted_value(score=2 / 3, passed=False, threshold=0.67) == 66
    # 0.666 against 0.665: passed here, so at least 67 although its percent rounds down to 66.
    assert granted_value(score=0.666, passed=True, threshold=0.665) == 67
    assert granted_value(score=0.29, passed=False, threshold=0.5) == 29
    assert granted_value(score=1.0, passed=True, threshold=0.8) == 100
    assert granted_value(score=0.9, passed=False, threshold=0) == 0


@pytest.mark.reliability
@pytest.mark.parametrize("researcher_decides", ["approve", "reject"])
def test_a_researchers_decision_made_during_the_review_stands(recording, monkeypatch,
                                                              researcher_decides):
    """The review lists a stage's due submissions, then decides them one by one (a provider
    call each: minutes on a big stage). A researcher who approves or rejects one of them in
    the admin meanwhile keeps that decision: the review acts on each assignment's status as it
    is when it comes to it. Before, it held the researcher's approved (paid) work for review
    again, FLAGGED from the status it had listed (its data out of the study, the decision
    gone), and likewise turned a rejection into a hold."""
    from annotation.models import Assignment
    from annotation.services.review import assignment_reject, auto_review

    stage = make_stage(make_project(TaskKind.LIKERT))
    both = [likert_assignment(stage, [1, 2, 3], seconds=0.3)  # too fast: held
            for _ in range(2)]
    real_rules = auto_review.assignment_review_rules
    seen: list[int] = []

    def researcher_meanwhile(*, assignment):
        if not seen:  # while the review decides the first of the two, the other one:
            other = next(a for a in both if a.pk != assignment.pk)
            mine = Assignment.objects.select_related("stage", "worker").get(pk=other.pk)
            if researcher_decides == "approve":
                assignment_approve(assignment=mine, allow_flagged=True)
            else:
                assignment_reject(assignment=mine, reason="copied answers", allow_flagged=True)
        seen.append(assignment.pk)
        return real_rules(assignment=assignment)

    monkeypatch.setattr(auto_review, "assignment_review_rules", researcher_meanwhile)
    report = stage_auto_review(stage=stage)
    assert (report.held, report.errors) == (1, [])
    held = Assignment.objects.get(pk=seen[0])
    decided = Assignment.objects.get(pk=next(a.pk for a in both if a.pk != seen[0]))
    assert held.status == AssignmentStatus.FLAGGED
    assert decided.status == (AssignmentStatus.APPROVED if researcher_decides == "approve"
                              else AssignmentStatus.REJECTED)
    assert "Held for review" not in decided.review_note


@pytest.mark.reliability
def test_a_decision_recorded_during_the_provider_call_stands(recording, monkeypatch):
    """The review's approve is on its way to the provider when the researcher rejects the same
    submission in the admin: the rejection stands and the approve is refused, not written
    over it (it read approved with the rejection's note, both calls sent, no error)."""
    from annotation.models import Assignment
    from annotation.services.review import assignment_reject

    stage = make_stage(make_project(TaskKind.LIKERT))
    assignment = likert_assignment(stage, [1, 2, 3])
    real_approve = recording.approve

    def researcher_rejects_meanwhile(*, assignment, feedback=""):
        answer = real_approve(assignment=assignment, feedback=feedback)
        mine = Assignment.objects.select_related("stage", "worker").get(pk=assignment.pk)
        assignment_reject(assignment=mine, reason="copied answers", allow_flagged=True)
        return answer

    monkeypatch.setattr(recording, "approve", researcher_rejects_meanwhile)
    report = stage_auto_review(stage=stage)
    stored = Assignment.objects.get(pk=assignment.pk)
    assert stored.status == AssignmentStatus.REJECTED
    assert "copied answers" in stored.review_note
    assert any("rejected meanwhile; the approve was not recorded" in e for e in report.errors), \
        report.errors
