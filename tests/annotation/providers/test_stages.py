"""Stage status machine, item choice, HIT plans, cost estimates and publishing guards."""
from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.cost_selectors import stage_cost_estimate
from annotation.models import (
    HitStatus,
    StageKind,
    StageStatus,
    StageTransition,
    TaskKind,
)
from annotation.services.stage_plans import stage_hit_plan
from annotation.services.stages import (
    stage_close,
    stage_hits_build,
    stage_publish,
    stage_transition,
)
from annotation.stage_errors import (
    BudgetExceeded,
    GuardFailed,
    IllegalTransition,
    StageError,
)
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker
from tests.support.providers import make_stages

pytestmark = pytest.mark.django_db


def test_every_legal_path_is_logged_and_illegal_moves_are_refused(likert_study, researcher):
    project, _gold, _items = likert_study
    stage = make_stage(project, status=StageStatus.DRAFT)
    for target in (StageStatus.PUBLISHED, StageStatus.COLLECTING, StageStatus.REVIEWING,
                   StageStatus.COLLECTING, StageStatus.REVIEWING, StageStatus.CLOSED):
        stage_transition(stage=stage, to_status=target, user=researcher, reason=f"to {target}")
    log = list(StageTransition.objects.filter(stage=stage).values_list("from_status",
                                                                       "to_status", "reason"))
    assert log == [
        ("draft", "published", "to published"), ("published", "collecting", "to collecting"),
        ("collecting", "reviewing", "to reviewing"), ("reviewing", "collecting", "to collecting"),
        ("collecting", "reviewing", "to reviewing"), ("reviewing", "closed", "to closed"),
    ]
    stage.refresh_from_db()
    assert stage.status == StageStatus.CLOSED
    for target in StageStatus.values:
        with pytest.raises(IllegalTransition):
            stage_transition(stage=stage, to_status=target)
    assert StageTransition.objects.filter(stage=stage).count() == 6


@pytest.mark.parametrize("start,target", [
    ("draft", "collecting"), ("draft", "reviewing"), ("published", "reviewing"),
    ("published", "draft"), ("collecting", "published"), ("reviewing", "draft"),
])
def test_illegal_transitions(likert_study, start, target):
    project, _gold, _items = likert_study
    stage = make_stage(project, status=start)
    with pytest.raises(IllegalTransition):
        stage_transition(stage=stage, to_status=target)
    stage.refresh_from_db()
    assert stage.status == start and not stage.transitions.exists()


def test_qualification_plan_is_one_hit_of_gold_items(likert_study):
    project, gold, _items = likert_study
    qualification, _trial, _full = make_stages(project, "inhouse")
    plans = stage_hit_plan(stage=qualification)
    assert len(plans) == 1
    assert [i.pk for i in plans[0].items] == [g.pk for g in gold[:10]]
    assert plans[0].max_assignments == 6
    assert set(qualification.items.values_list("pk", flat=True)) == {g.pk for g in gold[:10]}


def test_qualification_needs_enough_gold_items(db):
    project = make_project(TaskKind.LIKERT)
    make_item(project, gold={"score": 3})
    stage = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT)
    with pytest.raises(StageError, match="needs 10 items"):
        stage_hit_plan(stage=stage)


def test_trial_then_full_cover_the_remaining_items_grouped_by_passage(likert_study):
    project, gold, items = likert_study
    _q, trial, full = make_stages(project, "inhouse")
    trial_plans = stage_hit_plan(stage=trial)
    trial_items = {i.pk for plan in trial_plans for i in plan.items}
    assert len(trial_items) == 10 and not trial_items & {g.pk for g in gold}
    assert all(plan.max_assignments == 3 for plan in trial_plans)  # judgments_per_item
    full_plans = stage_hit_plan(stage=full)
    full_items = {i.pk for plan in full_plans for i in plan.items}
    assert full_items == {i.pk for i in items} - trial_items
    for plan in full_plans:
        assert len({i.group_key for i in plan.items}) == 1  # one passage per HIT
        assert len({i.split for i in plan.items}) == 1
        assert len(plan.items) <= project.items_per_hit
        assert plan.max_assignments == project.redundancy_for(plan.split)


def test_mturk_refuses_ten_assignments_unless_opted_into_the_40pct_tier(likert_study):
    project, _gold, items = likert_study
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT, provider="mturk",
                       judgments_per_item=10)
    stage.items.set(items[:5])
    with pytest.raises(StageError, match="40%"):
        stage_hit_plan(stage=stage)
    stage.settings = {"allow_40pct_fee_tier": True}
    stage.save()
    estimate = stage_cost_estimate(stage=stage)
    # one HIT of 5 items × 10 assignments × $0.40 = $4.00; 40% fee = $1.60
    assert (estimate.n_hits, estimate.n_assignments, estimate.rewards, estimate.fees) == (
        1, 10, Decimal("4.00"), Decimal("1.60"))
    assert estimate.hits_in_40pct_tier == 1 and estimate.total == Decimal("5.60")


def test_cost_estimate_mturk_20pct_and_bonus_budget(db):
    project = make_project(TaskKind.MC, reward_per_hit=Decimal("0.50"), items_per_hit=4,
                           bonus_per_correct=Decimal("0.05"), redundancy={"default": 2})
    for _ in range(8):
        make_item(project, split="test")
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT, provider="mturk")
    estimate = stage_cost_estimate(stage=stage)
    # 2 HITs × 2 assignments × $0.50 = $2.00 + 20% = $0.40; bonus at most 16 × $0.05 = $0.80
    # + 20% = $0.16
    assert (estimate.n_hits, estimate.n_judgments) == (2, 16)
    assert (estimate.rewards, estimate.fees, estimate.bonus_budget, estimate.bonus_fees) == (
        Decimal("2.00"), Decimal("0.40"), Decimal("0.80"), Decimal("0.16"))
    assert estimate.total == Decimal("3.36")
    assert "rewards $2.00" in estimate.as_text()


def test_budget_cap_refuses_publishing(likert_study, researcher):
    project, _gold, _items = likert_study
    project.budget_cap = Decimal("1.00")
    project.save()
    qualification, _t, _f = make_stages(project, "inhouse")
    with pytest.raises(BudgetExceeded, match="budget cap"):
        stage_publish(stage=qualification, user=researcher)
    qualification.refresh_from_db()
    assert qualification.status == StageStatus.DRAFT
    assert not qualification.transitions.exists() and not qualification.hits.exists()
    project.budget_cap = Decimal("100.00")
    project.save()
    result = stage_publish(stage=qualification, user=researcher)
    assert result.stage.status == StageStatus.COLLECTING
    assert [t.to_status for t in qualification.transitions.all()] == ["published", "collecting"]
    assert "rewards $2.40" in qualification.transitions.first().reason  # 6 × $0.40


def test_settings_written_around_the_form_are_checked_at_publishing(likert_study, researcher):
    """The API and the shell skip the admin form: publishing checks the same schema."""
    project, _gold, _items = likert_study
    qualification, _t, _f = make_stages(project, "inhouse")
    qualification.settings = {**(qualification.settings or {}), "min_approval_rate": 150}
    qualification.save()
    with pytest.raises(GuardFailed, match="min_approval_rate must be"):
        stage_publish(stage=qualification, user=researcher)
    qualification.refresh_from_db()
    assert qualification.status == StageStatus.DRAFT and not qualification.hits.exists()
    qualification.settings.pop("min_approval_rate")
    qualification.save()
    assert stage_publish(stage=qualification, user=researcher).stage.status == \
        StageStatus.COLLECTING


def test_required_stage_must_be_published_first(likert_study, researcher):
    project, _gold, _items = likert_study
    _q, trial, _f = make_stages(project, "inhouse")
    with pytest.raises(GuardFailed, match="published first"):
        stage_publish(stage=trial, user=researcher)


def test_agreement_guard_and_logged_override(likert_study, researcher):
    project, _gold, items = likert_study
    qualification, trial, full = make_stages(project, "inhouse")
    stage_publish(stage=qualification, user=researcher)
    stage_publish(stage=trial, user=researcher)
    trial_items = list(trial.items.all())
    workers = [make_worker() for _ in range(3)]
    # Workers disagree completely: alpha is far below 0.5.
    for n, item in enumerate(trial_items):
        for k, worker in enumerate(workers):
            make_judgment(item=item, stage=trial, worker=worker, score=1 + (n + 2 * k) % 5)
    with pytest.raises(GuardFailed, match="below the required 0.5"):
        stage_publish(stage=full, user=researcher)
    full.refresh_from_db()
    assert full.status == StageStatus.DRAFT and not full.hits.exists()
    result = stage_publish(stage=full, user=researcher, override_reason="instructions revised")
    assert result.stage.status == StageStatus.COLLECTING
    note = full.transitions.get(to_status="published").reason
    assert "OVERRIDDEN" in note and "instructions revised" in note
    assert full.transitions.get(to_status="published").user == researcher


def test_agreement_guard_passes_when_workers_agree(likert_study, researcher):
    project, _gold, _items = likert_study
    qualification, trial, full = make_stages(project, "inhouse")
    stage_publish(stage=qualification, user=researcher)
    stage_publish(stage=trial, user=researcher)
    workers = [make_worker() for _ in range(3)]
    for n, item in enumerate(trial.items.all()):
        for worker in workers:
            make_judgment(item=item, stage=trial, worker=worker, score=1 + n % 5)
    stage_publish(stage=full, user=researcher)
    assert "guard passed" in full.transitions.get(to_status="published").reason


def test_another_projects_stage_never_opens_the_agreement_gate(likert_study, researcher):
    """`agreement_stage_id` was read from any project: a full stage gated at 0.5 on a trial
    whose workers disagree was published (no override) by naming another project's stage whose
    workers agreed, and its cockpit showed that project's alpha."""
    from annotation.judgment_selectors import agreement_stage_for

    project, _gold, _items = likert_study
    qualification, trial, full = make_stages(project, "inhouse")
    stage_publish(stage=qualification, user=researcher)
    stage_publish(stage=trial, user=researcher)
    workers = [make_worker() for _ in range(3)]
    for n, item in enumerate(trial.items.all()):
        for k, worker in enumerate(workers):
            make_judgment(item=item, stage=trial, worker=worker, score=1 + (n + 2 * k) % 5)
    other = make_project(TaskKind.LIKERT)
    agreed = make_stage(other, kind=StageKind.TRIAL, name="agreed")
    for n in range(5):
        item = make_item(other)
        for worker in workers:
            make_judgment(item=item, stage=agreed, worker=worker, score=1 + n % 5)
    full.settings = {**(full.settings or {}), "agreement_stage_id": agreed.pk}
    full.save(update_fields=["settings"])
    assert agreement_stage_for(full) is None
    for override in (None, "the other project agreed"):
        with pytest.raises(GuardFailed, match=f"agreement_stage_id {agreed.pk}.* not a stage "
                                              f"of project {project.slug}"):
            stage_publish(stage=full, user=researcher, override_reason=override)
    full.refresh_from_db()
    assert full.status == StageStatus.DRAFT and not full.hits.exists()


def test_a_stage_requiring_a_stage_that_passes_nobody_is_never_published(likert_study,
                                                                          researcher):
    """A full stage requiring the trial was published: MTurk and Prolific require only
    qualifications, so its HITs were open to all, while its pages refused every worker
    ("needs a qualification you have not passed yet"): only a qualification passes anyone."""
    project, _gold, _items = likert_study
    qualification, trial, full = make_stages(project, "inhouse")
    stage_publish(stage=qualification, user=researcher)
    stage_publish(stage=trial, user=researcher)
    full.requires_stage, full.agreement_threshold = trial, None
    full.save(update_fields=["requires_stage", "agreement_threshold"])
    with pytest.raises(GuardFailed, match="requires .*trial.*, a trial stage: only a "
                                          "qualification passes workers"):
        stage_publish(stage=full, user=researcher)
    full.refresh_from_db()
    assert full.status == StageStatus.DRAFT and not full.hits.exists()
    assert "only a qualification passes workers" in full.publish_problem


def test_practice_qualification_trial_combination_and_close(likert_study, researcher):
    project, _gold, items = likert_study
    for item in items[:3]:
        item.is_practice = True
        item.save()
    practice = make_stage(project, kind=StageKind.PRACTICE, status=StageStatus.DRAFT, order=0)
    qualification, trial, _full = make_stages(project, "inhouse")
    for stage in (practice, qualification, trial):
        stage_publish(stage=stage, user=researcher)
    assert set(practice.items.values_list("pk", flat=True)) == {i.pk for i in items[:3]}
    assert not set(trial.items.values_list("pk", flat=True)) & {i.pk for i in items[:3]}
    assert all(h.status == HitStatus.OPEN for h in trial.hits.all())
    n_hits = trial.hits.count()
    again = stage_publish(stage=trial, user=researcher)  # resumes: nothing left to create
    assert (again.report.created, trial.hits.count()) == (0, n_hits)
    stage_close(stage=trial, user=researcher, reason="done")
    trial.refresh_from_db()
    assert trial.status == StageStatus.CLOSED
    assert set(trial.hits.values_list("status", flat=True)) == {HitStatus.EXPIRED}
    assert [t.to_status for t in trial.transitions.all()] == ["published", "collecting", "closed"]
    with pytest.raises(IllegalTransition):
        stage_publish(stage=trial, user=researcher)


def test_hits_build_is_idempotent(likert_study):
    project, _gold, _items = likert_study
    _q, trial, _f = make_stages(project, "inhouse")
    first = stage_hits_build(stage=trial)
    again = stage_hits_build(stage=trial)
    assert [h.pk for h in first] == [h.pk for h in again]


def test_negative_money_is_refused_before_anything_is_created(likert_study, researcher):
    project, _gold, _items = likert_study
    project.budget_cap = Decimal("5.00")
    project.save()
    qualification, _t, _f = make_stages(project, "inhouse")
    qualification.reward_per_hit = Decimal("-5.00")
    qualification.save()
    with pytest.raises(GuardFailed, match=r"reward per HIT is \$-5.00; it must be 0 or more"):
        stage_publish(stage=qualification, user=researcher)
    qualification.refresh_from_db()
    assert qualification.status == StageStatus.DRAFT and not qualification.hits.exists()
    qualification.reward_per_hit = None
    qualification.save()
    project.bonus_per_correct = Decimal("-1")
    project.save()
    with pytest.raises(GuardFailed, match="bonus per correct answer"):
        stage_publish(stage=qualification, user=researcher)


def test_an_agreement_gate_without_an_alpha_says_so_instead_of_n_a_below_the_threshold(
        likert_study, researcher):
    """Walking a first study: the trial's judgments were rejected, so its alpha had no value,
    and publishing the full stage answered "alpha of … trial is n/a, below the required 0.0"
    (n/a below zero?). It now says alpha cannot be computed yet and what to do."""
    project, _gold, _items = likert_study
    qualification, trial, full = make_stages(project, "inhouse")
    stage_publish(stage=qualification, user=researcher)
    stage_publish(stage=trial, user=researcher)
    full.agreement_threshold = 0.0
    full.save(update_fields=["agreement_threshold"])
    with pytest.raises(GuardFailed) as refused:
        stage_publish(stage=full, user=researcher)
    message = str(refused.value)
    assert "n/a" not in message and "below the required" not in message
    assert "cannot be computed yet" in message and "override reason" in message
