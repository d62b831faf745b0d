"""HIT plans (qualification HITs up to the wanted number of workers; gold/attention items mixed
into data HITs at the gold rate) and the money guards (MTurk's minimum fee, the balance, the
budget cap across stages)."""
from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from annotation.cost_selectors import project_committed_cost, stage_cost_estimate
from annotation.models import Provider, StageKind, StageStatus, TaskKind
from annotation.providers import override_provider
from annotation.services.stage_plans import stage_hit_plan
from annotation.services.stages import stage_hits_build, stage_publish
from annotation.stage_errors import BudgetExceeded
from annotation.stage_plan_selectors import DEFAULT_QUALIFICATION_WORKERS
from testing.factories import make_item, make_project, make_stage

pytestmark = pytest.mark.django_db


def qualification_stage(provider: str, **settings):
    project = make_project(TaskKind.LIKERT, reward_per_hit=Decimal("0.40"))
    for n in range(10):
        make_item(project, gold={"score": 1 + n % 5}, is_gold_check=True)
    return make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                      provider=provider, settings=settings)


# --- qualification HITs ----------------------------------------------------------------------


def test_mturk_qualification_reaches_the_wanted_workers_in_hits_of_at_most_nine(db):
    stage = qualification_stage("mturk", locales=[])
    plans = stage_hit_plan(stage=stage, store=False)
    sizes = [plan.max_assignments for plan in plans]
    assert sum(sizes) == DEFAULT_QUALIFICATION_WORKERS == 50
    assert sizes == [9, 9, 8, 8, 8, 8] and max(sizes) <= 9
    items = {tuple(i.pk for i in plan.items) for plan in plans}
    assert len(items) == 1 and len(next(iter(items))) == 10  # every HIT is the whole test
    estimate = stage_cost_estimate(stage=stage)
    assert (estimate.n_hits, estimate.n_assignments, estimate.hits_in_40pct_tier) == (6, 50, 0)
    assert estimate.rewards == Decimal("20.00") and estimate.fees == Decimal("4.00")

    stage.settings = {"max_workers": 20}
    assert [p.max_assignments for p in stage_hit_plan(stage=stage, store=False)] == [7, 7, 6]
    stage.settings = {"max_workers": 20, "allow_40pct_fee_tier": True}
    assert [p.max_assignments for p in stage_hit_plan(stage=stage, store=False)] == [20]


def test_prolific_and_inhouse_qualifications_have_no_nine_cap(db):
    for provider in ("prolific", "inhouse"):
        stage = qualification_stage(provider, max_workers=30)
        assert [p.max_assignments for p in stage_hit_plan(stage=stage, store=False)] == [30]


@pytest.mark.prolific
def test_prolific_qualification_study_gets_every_place(prolific_server, researcher):
    stage = qualification_stage("prolific")
    stage_publish(stage=stage, user=researcher)
    stage.refresh_from_db()
    study = prolific_server.state.studies[stage.settings["prolific_study_id"]]
    assert study["total_available_places"] == DEFAULT_QUALIFICATION_WORKERS


@pytest.mark.mturk
def test_mturk_qualification_publishes_every_hit_under_one_guard(mturk_server, researcher):
    state = mturk_server.state
    stage = qualification_stage("mturk", max_workers=20, locales=[])
    result = stage_publish(stage=stage, user=researcher)
    assert result.report.created == 3 and result.stage.status == StageStatus.COLLECTING
    remote = [state.hits[h.external_id] for h in stage.hits.all()]
    assert sorted(h["MaxAssignments"] for h in remote) == [6, 7, 7]
    stage.refresh_from_db()
    guard = {"QualificationTypeId": stage.settings["mturk_qualification_type_id"],
             "Comparator": "DoesNotExist", "ActionsGuarded": "DiscoverPreviewAndAccept"}
    assert all(guard in h["QualificationRequirements"] for h in remote)


# --- gold/attention items in HITs --------------------------------------------------------------


def test_gold_items_are_mixed_into_hits_at_the_gold_rate(db):
    project = make_project(TaskKind.MC, items_per_hit=5, gold_rate=0.2,
                           redundancy={"default": 2})
    regular = [make_item(project, gold={"choice": "A"}, split="test") for _ in range(80)]
    gold = [make_item(project, gold={"choice": "B"}, is_gold_check=True, split="dev")
            for _ in range(7)]
    make_item(project, is_gold_check=True, excluded=True)  # excluded items never go out
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                       provider="mturk")
    plans = stage_hit_plan(stage=stage, store=False)
    gold_ids = {g.pk for g in gold}
    placed = [i.pk for plan in plans for i in plan.items if i.pk not in gold_ids]
    assert sorted(placed) == sorted(i.pk for i in regular)  # each regular item once
    n_gold = sum(i.pk in gold_ids for plan in plans for i in plan.items)
    n_all = sum(len(plan.items) for plan in plans)
    assert abs(n_gold / n_all - 0.2) < 0.05, (n_gold, n_all)
    for plan in plans:
        ids = [i.pk for i in plan.items]
        assert len(ids) <= 5 and len(set(ids)) == len(ids)  # no gold item twice in a HIT
        assert any(pk not in gold_ids for pk in ids)  # every HIT has real work
        assert plan.split == "test" and plan.max_assignments == 2
    uses = Counter(i.pk for plan in plans for i in plan.items if i.pk in gold_ids)
    assert max(uses.values()) - min(uses.values()) <= 1  # spread over the whole pool
    # The cost estimate and the HITs built at publishing are the same plan.
    assert stage_cost_estimate(stage=stage).n_judgments == 2 * n_all
    built = stage_hits_build(stage=stage)
    assert [[i.pk for i in hit.items.order_by("hititem__position")] for hit in built] == [
        [i.pk for i in plan.items] for plan in plans]
    assert not stage.items.filter(is_gold_check=True).exists()  # stage items stay regular


def test_stage_gold_rate_overrides_and_likert_gold_stays_in_its_passage(db):
    project = make_project(TaskKind.LIKERT, items_per_hit=10, gold_rate=0.0)
    for passage in ("p1", "p2"):
        for _ in range(9):
            make_item(project, group_key=passage, split="dev")
    same = make_item(project, group_key="p1", is_gold_check=True, gold={"score": 5})
    make_item(project, group_key="elsewhere", is_gold_check=True, gold={"score": 1})
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       settings={"n_items": 100})
    assert all(not any(i.is_gold_check for i in p.items)
               for p in stage_hit_plan(stage=stage, store=False))  # project rate 0: no gold
    stage.settings = {"n_items": 100, "gold_rate": 0.1}
    plans = stage_hit_plan(stage=stage, store=False)
    by_passage = {plan.items[0].group_key if not plan.items[0].is_gold_check
                  else plan.items[-1].group_key: plan for plan in plans}
    assert [i.pk for i in by_passage["p1"].items if i.is_gold_check] == [same.pk]
    # p2 has no gold item of its own: a passage from elsewhere would give the check away.
    assert not any(i.is_gold_check for i in by_passage["p2"].items)


# --- money ---------------------------------------------------------------------------------------


def test_mturk_fee_is_at_least_one_cent_per_assignment_and_bonus(db):
    project = make_project(TaskKind.MC, reward_per_hit=Decimal("0.04"), items_per_hit=2,
                           redundancy={"default": 3}, bonus_per_correct=Decimal("0.01"))
    for _ in range(4):
        make_item(project, split="test")
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                       provider="mturk")
    estimate = stage_cost_estimate(stage=stage)
    # 2 HITs × 3 assignments × $0.04 = $0.24; 20% would be $0.008 an assignment: $0.01 each.
    assert (estimate.rewards, estimate.fees) == (Decimal("0.24"), Decimal("0.06"))
    # Bonus: at most 2 × $0.01 per assignment, one payment each, $0.01 fee each.
    assert (estimate.bonus_budget, estimate.bonus_fees) == (Decimal("0.12"), Decimal("0.06"))
    assert estimate.total == Decimal("0.48")
    stage.provider = "inhouse"  # no commission at all
    assert stage_cost_estimate(stage=stage).fees == Decimal("0.00")


def test_the_per_correct_bonus_is_budgeted_on_the_items_it_is_paid_on(db):
    """Review never pays the bonus per correct answer on a practice item
    (`correct_answer_bonus`); the estimate budgeted it on every HIT item, so a practice stage
    committed bonuses (and fees) that can never be paid, drafted and published alike."""
    project = make_project(TaskKind.MC, reward_per_hit=Decimal("0.40"), items_per_hit=2,
                           redundancy={"default": 3}, bonus_per_correct=Decimal("0.05"))
    for _ in range(2):
        make_item(project, is_practice=True, gold={"choice": "A"})
    stage = make_stage(project, kind=StageKind.PRACTICE, status=StageStatus.DRAFT,
                       provider="mturk")
    estimate = stage_cost_estimate(stage=stage)
    assert (estimate.bonus_budget, estimate.bonus_fees) == (Decimal("0.00"), Decimal("0.00"))
    stage_hits_build(stage=stage)
    estimate = stage_cost_estimate(stage=stage)
    assert (estimate.bonus_budget, estimate.bonus_fees) == (Decimal("0.00"), Decimal("0.00"))
    assert estimate.rewards == Decimal("1.20")


@pytest.mark.mturk
def test_budget_guard_refuses_when_the_balance_does_not_cover(mturk_server, researcher):
    from decimal import Decimal as D

    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 2},
                           reward_per_hit=D("1.00"))
    for _ in range(4):
        make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT, provider="mturk",
                       settings={"locales": []})
    mturk_server.state.balance = D("4.00")  # 2 HITs × 2 × $1 + 20% = $4.80
    with pytest.raises(BudgetExceeded, match=r"balance \$4.00 does not cover \$4.80"):
        stage_publish(stage=stage, user=researcher)
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.hits.exists()
    mturk_server.state.balance = D("5.00")
    result = stage_publish(stage=stage, user=researcher)
    assert result.stage.status == StageStatus.COLLECTING
    assert "balance $5.00" in stage.transitions.get(to_status="published").reason


@pytest.mark.mturk
def test_unknown_balance_is_said_and_publishing_goes_on(mturk_server, researcher):
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 1})
    for _ in range(2):
        make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT, provider="mturk",
                       settings={"locales": []})
    mturk_server.throttle_next["GetAccountBalance"] = 5  # the balance is asked twice at most
    estimate = stage_cost_estimate(stage=stage, with_balance=True)
    assert estimate.balance is None
    assert "balance unknown: ThrottlingException: Rate exceeded" in estimate.as_text()
    result = stage_publish(stage=stage, user=researcher)
    assert result.stage.status == StageStatus.COLLECTING
    assert "balance unknown: ThrottlingException" in stage.transitions.get(
        to_status="published").reason


def test_budget_cap_counts_every_stage_already_published(db, researcher):
    project = make_project(TaskKind.LIKERT, items_per_hit=2, redundancy={"default": 1},
                           reward_per_hit=Decimal("1.00"), budget_cap=Decimal("5.00"))
    stages = []
    for n in range(3):
        stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                           provider=Provider.INHOUSE)
        stage.items.set([make_item(project, split="test", group_key=f"s{n}")
                         for _ in range(4)])
        stages.append(stage)
    # Each stage: 2 HITs × 1 assignment × $1.00 (in-house: no fee) = $2.00.
    for stage in stages[:2]:
        stage_publish(stage=stage, user=researcher)
    assert project_committed_cost(project=project) == Decimal("4.00")
    assert project_committed_cost(project=project, exclude_stage=stages[0]) == Decimal("2.00")
    with pytest.raises(BudgetExceeded, match=r"\$2.00 on top of \$4.00 already committed; "
                                             r"the project's budget cap is \$5.00"):
        stage_publish(stage=stages[2], user=researcher)
    project.budget_cap = Decimal("6.00")
    project.save()
    assert stage_publish(stage=stages[2], user=researcher).stage.status == \
        StageStatus.COLLECTING


class _NoBalance:
    """A provider whose balance cannot be read (in-house otherwise)."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def balance(self, *, stage=None):
        raise ConnectionError("endpoint unreachable")


def test_balance_error_of_any_kind_is_named(db):
    from annotation.providers.inhouse import InhouseProvider

    project = make_project(TaskKind.LIKERT)
    make_item(project)
    stage = make_stage(project, status=StageStatus.DRAFT)
    with override_provider("inhouse", _NoBalance(InhouseProvider())):
        estimate = stage_cost_estimate(stage=stage, with_balance=True)
    assert estimate.balance_error == "ConnectionError: endpoint unreachable"
    assert "; balance unknown: ConnectionError: endpoint unreachable;" in estimate.as_text()


def test_a_passage_without_gold_keeps_full_hits(db):
    project = make_project(TaskKind.LIKERT, items_per_hit=5, gold_rate=0.4)
    for _ in range(10):
        make_item(project, group_key="nogold", split="dev")
    make_item(project, group_key="other", is_gold_check=True, gold={"score": 2})
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT)
    assert [len(plan.items) for plan in stage_hit_plan(stage=stage, store=False)] == [5, 5]


# --- effective hourly pay ----------------------------------------------------------------------


def _full_stage_of_five_item_hits(**settings):
    project = make_project(TaskKind.LIKERT, reward_per_hit=Decimal("0.40"), items_per_hit=5)
    items = [make_item(project) for _ in range(10)]
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                       provider="mturk", settings=settings)
    return project, items, stage


def test_hourly_pay_is_unknown_until_a_trial_or_a_stated_time_says_it(db):
    _project, _items, stage = _full_stage_of_five_item_hits()
    estimate = stage_cost_estimate(stage=stage)
    assert estimate.hourly_pay is None
    assert "hourly pay unknown: run a trial or state settings.seconds_per_item" in \
        estimate.as_text()
    stage.settings = {"seconds_per_item": "a few"}  # not a number: still unknown, no crash
    assert stage_cost_estimate(stage=stage).hourly_pay is None
    stage.settings = {"seconds_per_item": 12}
    estimate = stage_cost_estimate(stage=stage)
    # $0.40 for 5 items × 12 s = 60 s → $24.00/h, above the default floor of $12/h.
    assert estimate.hourly_pay == Decimal("24.00")
    assert estimate.pay_warning == ""
    assert "effective pay $24.00/h at 12 s per item (stated in the stage settings)" in \
        estimate.as_text()


def _trial_assignment(trial, items, *, seconds, status, worker=None):
    """A trial assignment of `items` that took `seconds` (None: still in progress), with a
    judgment per item as a submitted page leaves."""
    from datetime import timedelta

    from django.utils import timezone

    from annotation.models import Assignment, AssignmentStatus
    from testing.factories import make_assignment, make_judgment

    submitted = seconds is not None and status != AssignmentStatus.IN_PROGRESS
    assignment = make_assignment(trial, items=items, status=status, worker=worker)
    now = timezone.now()
    Assignment.objects.filter(pk=assignment.pk).update(
        started_at=now - timedelta(seconds=seconds or 999),
        submitted_at=now if submitted else None)
    if submitted:
        for item in items:
            make_judgment(item=item, stage=trial, worker=assignment.worker,
                          assignment=assignment)
    return assignment


def test_the_trials_median_time_per_item_sets_the_pay_and_a_low_pay_is_warned(db, settings):
    from annotation.models import AssignmentStatus

    project, items, stage = _full_stage_of_five_item_hits(seconds_per_item=12)
    trial = make_stage(project, kind=StageKind.TRIAL, provider="mturk")
    for seconds, status in ((100, AssignmentStatus.APPROVED), (150, AssignmentStatus.SUBMITTED),
                            (400, AssignmentStatus.APPROVED),
                            (None, AssignmentStatus.IN_PROGRESS)):
        # 20, 30, 80 s per item; one still in progress
        _trial_assignment(trial, items[:5], seconds=seconds, status=status)
    estimate = stage_cost_estimate(stage=stage)
    # The trial wins over the stated 12 s: median 30 s per item → $0.40 / 150 s → $9.60/h.
    assert estimate.seconds_per_item == 30
    assert estimate.seconds_per_item_source == \
        "trial median of 3 counted assignments (2 approved, 1 awaiting review)"
    assert estimate.hourly_pay == Decimal("9.60")
    assert "WARNING: effective pay $9.60/h is below the floor of $12.00/h" in estimate.as_text()
    settings.QAJ_MIN_HOURLY_PAY = 9
    assert stage_cost_estimate(stage=stage).pay_warning == ""


def test_the_pay_estimate_reads_only_trial_work_that_counts(db, researcher):
    """A study walk: spammers click through a trial in 10 s, are rejected or flagged (or their
    worker blocked); their speed dragged the trial's median down and the estimate told the
    researcher that a low reward paid well, underpaying the careful workers of the full stage.
    The median reads the assignments behind `judgments_that_count` and says how many."""
    from annotation.models import AssignmentStatus, WorkerBlock, WorkerStatus
    from testing.factories import make_item, make_worker

    project, items, stage = _full_stage_of_five_item_hits()
    project.owner = researcher
    project.save(update_fields=["owner"])
    trial = make_stage(project, kind=StageKind.TRIAL, provider="mturk")
    for seconds in (300, 400):  # careful work: 60 and 80 s per item, approved
        _trial_assignment(trial, items[:5], seconds=seconds, status=AssignmentStatus.APPROVED)
    for status in (AssignmentStatus.REJECTED, AssignmentStatus.FLAGGED,
                   AssignmentStatus.RETURNED):  # 2 s per item, not counted
        _trial_assignment(trial, items[:5], seconds=10, status=status)
    blocked = make_worker(provider="mturk", status=WorkerStatus.BLOCKED)
    _trial_assignment(trial, items[:5], seconds=10, status=AssignmentStatus.APPROVED,
                      worker=blocked)
    owner_block = make_worker(provider="mturk")
    WorkerBlock.objects.create(worker=owner_block, researcher=project.owner)
    _trial_assignment(trial, items[:5], seconds=10, status=AssignmentStatus.SUBMITTED,
                      worker=owner_block)
    practice = [make_item(project, is_practice=True) for _ in range(5)]
    _trial_assignment(trial, practice, seconds=10, status=AssignmentStatus.APPROVED)
    estimate = stage_cost_estimate(stage=stage)
    assert estimate.seconds_per_item == 70
    assert estimate.seconds_per_item_source == \
        "trial median of 2 counted assignments (2 approved, 0 awaiting review)"
    # $0.40 for 5 items × 70 s = 350 s → $4.11/h, with the warning (the spammers' 2 s per item
    # read $0.40 / 10 s as $144/h, no warning).
    assert estimate.hourly_pay == Decimal("4.11")
    assert "below the floor" in estimate.pay_warning
