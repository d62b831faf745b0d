"""The budget cap at every door that spends: one sum of what is committed
(`annotation.cost_selectors.committed_after`), one check (`spend_over_budget`) asked under one
lock (`annotation.services.budget.budget_lock`) by bonuses (by hand and per correct answer),
replacement assignments, Prolific places and publishing."""
from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.cost_selectors import (
    project_committed_cost,
    stage_cost_estimate,
    stage_spent,
)
from annotation.models import (
    Assignment,
    AssignmentStatus,
    ProviderCall,
    ProviderCallStatus,
    TaskKind,
)
from annotation.providers import override_provider
from annotation.selectors import REOFFER_OPERATION
from annotation.services.review import (
    ReviewError,
    assignment_approve,
    assignment_bonus_pay,
    assignments_bonus_pay,
    stage_auto_review,
)
from testing.factories import (
    make_assignment,
    make_hit,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)
from tests.annotation.providers.test_review import RecordingProvider
from tests.support.paths import require_shared_database
from tests.support.races import side_by_side

pytestmark = pytest.mark.reliability


@pytest.fixture
def recording():
    provider = RecordingProvider()
    with override_provider("inhouse", provider):
        yield provider


def _approved(stage, hit, n_items=3):
    worker = make_worker()
    items = [make_item(stage.project) for _ in range(n_items)]
    assignment = make_assignment(stage, worker=worker, hit=hit, items=items,
                                 status=AssignmentStatus.SUBMITTED)
    for item in items:
        make_judgment(item=item, stage=stage, worker=worker, assignment=assignment, score=3,
                      time_spent_ms=5000)
    assignment_approve(assignment=assignment)
    return assignment


def _stage_of_three_dollars(cap: str):
    """An in-house stage (no fees) whose one HIT of 3 assignments at $1.00 commits $3.00."""
    project = make_project(TaskKind.LIKERT, budget_cap=Decimal(cap),
                           reward_per_hit=Decimal("1.00"))
    stage = make_stage(project)
    hit = make_hit(stage, items=[make_item(project)], max_assignments=3,
                   reward=Decimal("1.00"))
    return project, stage, hit


@pytest.mark.django_db
def test_a_bonus_beyond_the_bonus_budget_adds_to_the_rewards_not_yet_paid(recording):
    """The stage holds $3.00 of rewards, $1.00 paid so far. A $1.00 bonus by hand is not in
    its estimate: once the other two assignments are paid the stage has cost $4.00. One max
    over the totals (estimate $3.00 against $1.00 paid + $1.00 bonus) let it under a $3.00 cap."""
    project, stage, hit = _stage_of_three_dollars("3.00")
    assignment = _approved(stage, hit)
    assert project_committed_cost(project=project) == Decimal("3.00")
    with pytest.raises(ReviewError, match=r"would commit \$4.00 of the project's \$3.00"):
        assignment_bonus_pay(assignment=assignment, amount=Decimal("1.00"), reason="great")
    assert [d for d in recording.done if d[0] == "bonus"] == []
    project.budget_cap = Decimal("4.00")
    project.save()
    assignment_bonus_pay(assignment=assignment, amount=Decimal("1.00"), reason="great")
    assert project_committed_cost(project=project) == Decimal("4.00")


@pytest.mark.django_db
@pytest.mark.parametrize("typed", ["NaN", "Infinity", "1000000"])
def test_a_bonus_amount_that_is_no_amount_is_refused_before_anything_is_paid(recording, typed):
    """The bonus action takes the amount as typed: NaN and Infinity are refused by name, and
    an amount whose total the assignment's record of bonuses cannot hold is refused before its
    call is written. Was: NaN and Infinity failed with "[<class 'decimal.InvalidOperation'>]",
    and a $1,000,000 bonus (no cap set) was sent to the provider, its total too large for the
    assignment's record of bonuses (8 digits)."""
    project = make_project(TaskKind.LIKERT, reward_per_hit=Decimal("1.00"))
    stage = make_stage(project)
    assignment = _approved(stage, make_hit(stage, items=[make_item(project)], max_assignments=1,
                                           reward=Decimal("1.00")))
    with pytest.raises(ReviewError,
                       match="'NaN' is not a number|'Infinity' is not a number|more than \\$999999.99"):
        assignment_bonus_pay(assignment=assignment, amount=Decimal(typed), reason="typo")
    assert [d for d in recording.done if d[0] == "bonus"] == []
    assert not ProviderCall.objects.filter(operation="SendBonus").exists()


@pytest.mark.django_db
def test_a_bonus_in_flight_counts_against_the_cap(recording):
    """A bonus whose answer was lost may have paid: it is committed from the moment its call
    is written, so a second bonus checked meanwhile counts it; its own retry is not refused."""
    project, stage, hit = _stage_of_three_dollars("5.00")
    first, second = _approved(stage, hit), _approved(stage, hit)
    recording.lose_next = 1
    with pytest.raises(ConnectionError):
        assignment_bonus_pay(assignment=first, amount=Decimal("1.50"), reason="a")
    assert ProviderCall.objects.get(operation="SendBonus").status == ProviderCallStatus.PENDING
    assert stage_spent(stage=stage) == Decimal("3.50")  # $2.00 approved + $1.50 in flight
    with pytest.raises(ReviewError, match=r"would commit \$6.00 of the project's \$5.00"):
        assignment_bonus_pay(assignment=second, amount=Decimal("1.50"), reason="b")
    assignment_bonus_pay(assignment=first, amount=Decimal("1.50"), reason="a")  # the retry
    assert [d[2] for d in recording.done if d[0] == "bonus"] == ["1.50"]
    assert project_committed_cost(project=project) == Decimal("4.50")


def _all_correct_submitted(*, cap: str, n_items: int, n_workers: int):
    """A STARC-like multiple-choice stage paying $1.00 per correct answer (no bonus budget in
    its estimate), whose `n_workers` workers each submitted every item right."""
    project = make_project(TaskKind.MC, bonus_per_correct=Decimal("1.00"),
                           budget_cap=Decimal(cap), reward_per_hit=Decimal("1.00"))
    stage = make_stage(project, settings={"bonus_budget": 0})
    items = [make_item(project, gold={"choice": "A"}) for _ in range(n_items)]
    hit = make_hit(stage, items=items, max_assignments=n_workers, reward=Decimal("1.00"))
    for _ in range(n_workers):
        worker = make_worker()
        assignment = make_assignment(stage, worker=worker, hit=hit, items=items,
                                     status=AssignmentStatus.SUBMITTED)
        for item in items:
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                          choice="A", time_spent_ms=9000)
        assignment.submitted_at = assignment.started_at
        assignment.save()
    return project, stage


@pytest.mark.django_db
def test_a_per_correct_bonus_past_the_cap_is_refused(recording):
    """A stage's `bonus_budget` replaces the per-correct maximum in its estimate, so the
    per-correct bonus is not always budgeted at publish: review asks the cap too, and a refused
    bonus is said in its report (the approval stands)."""
    project, stage = _all_correct_submitted(cap="1.00", n_items=4, n_workers=1)
    assert stage_cost_estimate(stage=stage).total == Decimal("1.00")
    report = stage_auto_review(stage=stage)
    assert (report.approved, report.bonuses) == (1, 0)
    assert any("budget cap" in error for error in report.errors), report.errors
    assert [d[0] for d in recording.done] == ["approve"]
    assert project_committed_cost(project=project) <= project.budget_cap


@pytest.mark.django_db
def test_a_replacement_asked_for_is_committed_before_its_answer(recording):
    """A re-offer call written and not yet grown into its HIT (answer lost, or in flight) is one
    more assignment in the estimate, so a bonus checked meanwhile counts it."""
    project, stage, hit = _stage_of_three_dollars("4.00")
    assignment = _approved(stage, hit)
    ProviderCall.objects.create(provider="inhouse", operation=REOFFER_OPERATION,
                                key="mturk:reoffer:x", token="t", stage=stage, hit=hit,
                                assignment=assignment,
                                request={"NumberOfAdditionalAssignments": 1})
    assert stage_cost_estimate(stage=stage).n_assignments == 4
    assert project_committed_cost(project=project) == Decimal("4.00")
    with pytest.raises(ReviewError, match="budget cap"):
        assignment_bonus_pay(assignment=assignment, amount=Decimal("0.50"), reason="r")


@pytest.mark.django_db(transaction=True)
def test_two_bonuses_at_once_never_pass_the_cap(monkeypatch):
    """Two researchers (or a researcher and the per-correct review) pay bonuses on one project
    at once, each fitting the cap alone, not both: each check is forced to wait, after reading
    what is committed, for the other to have read too (`side_by_side`). One is paid, the other
    refused."""
    require_shared_database()
    from annotation.services.review import decisions

    provider = RecordingProvider()
    with override_provider("inhouse", provider):
        project, stage, hit = _stage_of_three_dollars("5.00")
        pks = [_approved(stage, hit).pk for _ in range(2)]

    def pay(pk: int):
        def step() -> None:
            with override_provider("inhouse", provider):
                assignment_bonus_pay(assignment=Assignment.objects.get(pk=pk),
                                     amount=Decimal("2.00"), reason=f"bonus {pk}")
        return step

    refused, errors = side_by_side([pay(pk) for pk in pks], monkeypatch=monkeypatch,
                                   reads=[(decisions, "bonuses_over_budget")],
                                   expected=ReviewError)
    assert errors == []
    assert len([d for d in provider.done if d[0] == "bonus"]) == 1
    assert len(refused) == 1 and "budget cap" in refused[0]
    assert project_committed_cost(project=project) == Decimal("5.00")

@pytest.mark.django_db
def test_a_replacement_a_crash_left_unrecorded_is_grown_into_its_hit_by_the_next_sync():
    """MTurk added the assignment (the call succeeded), the process died before the HIT grew:
    the next sync records it, so the estimate and the cap count the assignment bought. The
    old query (`exclude(response__recorded=True)`) never found such a call: a response
    without the key compares as NULL in SQL."""
    from annotation.services.replacements import stage_replacements_offer

    project, stage, hit = _stage_of_three_dollars("10.00")
    stage.provider = "mturk"
    stage.save()
    assignment = make_assignment(stage, hit=hit, status=AssignmentStatus.REJECTED)
    ProviderCall.objects.create(provider="mturk", operation=REOFFER_OPERATION,
                                key=f"mturk:reoffer:{assignment.pk}", token="t", stage=stage,
                                hit=hit, assignment=assignment,
                                status=ProviderCallStatus.SUCCEEDED, response={"HIT": "x"},
                                request={"NumberOfAdditionalAssignments": 1})
    stage_replacements_offer(stage=stage)
    hit.refresh_from_db()
    assert hit.max_assignments == 4
    assert ProviderCall.objects.get(operation=REOFFER_OPERATION).response["recorded"] is True
    stage_replacements_offer(stage=stage)  # recorded once
    hit.refresh_from_db()
    assert hit.max_assignments == 4


@pytest.mark.django_db(transaction=True)
def test_two_stages_published_at_once_never_pass_the_cap(monkeypatch):
    """Two stages of one project published at once (two researchers, the admin and a Celery
    publish), each fitting the cap alone: each publish's budget check waits, after reading what
    is committed, for the other to have read too (`side_by_side`). One is published; the other
    is refused and stays a draft."""
    require_shared_database()
    from annotation.models import Stage, StageKind, StageStatus
    from annotation.services import stages as stage_services
    from annotation.services.stages import stage_publish
    from annotation.stage_errors import BudgetExceeded

    project = make_project(TaskKind.LIKERT, reward_per_hit=Decimal("0.40"), items_per_hit=5,
                           budget_cap=Decimal("1.20"), redundancy={"default": 1})
    for _ in range(30):
        make_item(project, split="dev", group_key="one passage")
    pks = [make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT, order=n,
                      judgments_per_item=1, settings={"n_items": 10}).pk for n in (1, 2)]
    assert stage_cost_estimate(stage=Stage.objects.get(pk=pks[0])).total == Decimal("0.80")
    refused, errors = side_by_side(
        [lambda pk=pk: stage_publish(stage=Stage.objects.get(pk=pk), actor="test")
         for pk in pks],
        monkeypatch=monkeypatch, reads=[(stage_services, "budget_guard")],
        expected=BudgetExceeded)
    assert errors == []
    statuses = sorted(Stage.objects.filter(pk__in=pks).values_list("status", flat=True))
    assert len(refused) == 1 and "budget cap" in refused[0], refused
    assert statuses == sorted([StageStatus.DRAFT, StageStatus.COLLECTING])
    assert project_committed_cost(project=project) <= project.budget_cap

@pytest.mark.django_db(transaction=True)
def test_a_cap_lowered_while_a_bonus_is_paid_never_ends_below_what_is_committed(monkeypatch):
    """A researcher lowers the cap to what is committed while a bonus is being paid: each
    check alone holds, both together would leave the project committing $4.00 under a $3.00
    cap. Each check waits, after reading what is committed, for the other (`side_by_side`);
    one of them is refused."""
    require_shared_database()
    from django.core.exceptions import ValidationError

    from annotation.models import Project
    from annotation.services import stages as stage_services
    from annotation.services.projects import project_update
    from annotation.services.review import decisions

    provider = RecordingProvider()
    with override_provider("inhouse", provider):
        project, stage, hit = _stage_of_three_dollars("5.00")
        pk = _approved(stage, hit).pk

    def bonus() -> None:
        with override_provider("inhouse", provider):
            assignment_bonus_pay(assignment=Assignment.objects.get(pk=pk),
                                 amount=Decimal("1.00"), reason="great")

    refused, errors = side_by_side(
        [bonus, lambda: project_update(project=Project.objects.get(pk=project.pk), user=None,
                                       data={"budget_cap": Decimal("3.00")})],
        monkeypatch=monkeypatch,
        reads=[(decisions, "bonuses_over_budget"), (stage_services, "project_committed_cost")],
        expected=(ReviewError, ValidationError))
    assert errors == []
    assert len(refused) == 1 and "cap" in refused[0], refused
    project.refresh_from_db()
    assert project_committed_cost(project=project) <= project.budget_cap


@pytest.mark.django_db
def test_every_door_takes_the_budget_lock_before_the_stage_row(monkeypatch):
    """Publishing took the project's budget lock, then the stage's row; an edit of a live
    stage's bonus budget took the row, then the budget lock. Two transactions taking two locks
    in opposite orders can each hold the one the other waits for (PostgreSQL then kills one as
    a deadlock). Every door takes them in one order: `stage_row_lock` takes both."""
    from annotation.models import Stage, StageStatus
    from annotation.services import stages as stage_services

    order: list[str] = []
    real_budget_lock = stage_services.budget_lock
    real_select_for_update = type(Stage.objects).select_for_update

    def budget_lock(project):
        order.append("budget")
        return real_budget_lock(project)

    def select_for_update(manager, *args, **kwargs):
        if manager.model is Stage:
            order.append("stage row")
        return real_select_for_update(manager, *args, **kwargs)

    monkeypatch.setattr(stage_services, "budget_lock", budget_lock)
    monkeypatch.setattr(type(Stage.objects), "select_for_update", select_for_update)
    project = make_project(TaskKind.LIKERT, budget_cap=Decimal("100"),
                           reward_per_hit=Decimal("1.00"))
    live = make_stage(project, status=StageStatus.COLLECTING, settings={"bonus_budget": 1})
    stage_services.stage_update(stage=live, data={"settings": {"bonus_budget": 2}})
    assert order and order[0] == "budget" and "stage row" in order, order
    assert Stage.objects.get(pk=live.pk).settings["bonus_budget"] == 2


# --- a selection's bonuses: one rule (`assignments_bonus_pay`) -------------------------------


def _bonus_action(client, ids, amount: str) -> list[str]:
    from django.urls import reverse

    url = reverse("admin:annotation_assignment_changelist")
    response = client.post(url, {"action": "bonus_assignments", "index": "0",
                                 "_selected_action": [str(i) for i in ids], "amount": amount,
                                 "reason": "thanks"}, follow=True)
    return [str(m) for m in response.context["messages"]]


@pytest.fixture
def researcher(client):
    from testing.factories import make_user

    client.force_login(make_user(superuser=True))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("typed,why", [
    ("-1", "a bonus must be positive"), ("0", "a bonus must be positive"),
    ("0.015", "not a whole number of cents"), ("1e100", "is more than $999999.99"),
    ("abc", "'abc' is not a number of dollars")])
def test_a_bad_amount_on_a_selection_is_refused_once_before_anything_is_paid(
        recording, researcher, typed, why):
    """A bonus of -1 on three assignments read "Paid a $-1 bonus on no assignment." and the
    same error three times, once per assignment; the amount is the selection's, checked once."""
    _project, stage, hit = _stage_of_three_dollars("100.00")
    ids = [_approved(stage, hit).pk for _ in range(3)]
    shown = _bonus_action(researcher, ids, typed)
    assert len(shown) == 1 and shown[0].startswith("No bonus was paid: ") and why in shown[0], \
        shown
    assert not ProviderCall.objects.filter(operation="SendBonus").exists()
    assert [d for d in recording.done if d[0] == "bonus"] == []


@pytest.mark.django_db
def test_a_selection_whose_bonuses_cross_the_cap_is_refused_whole_naming_total_left_and_cap(
        recording, researcher):
    """Three $1.00 bonuses where the $5.00 cap leaves $2.00: the first two were paid and the
    third refused, where the researcher expects the selection checked against what is left.
    Refused whole, naming the total, what is committed and left, and the cap; nothing paid.
    Reasons of one assignment's own (not approved) stay said for it alone."""
    project, stage, hit = _stage_of_three_dollars("5.00")
    ids = [_approved(stage, hit).pk for _ in range(3)]
    shown = _bonus_action(researcher, ids, "1.00")
    assert shown == [
        "No bonus was paid: the bonuses of 3 assignments, $3.00 in all ($3.00 with the "
        f"provider's fees) would commit $6.00 of the project's $5.00 budget cap (“{project.title}”:"
        " $3.00 committed, $2.00 left); raise the cap first."], shown
    assert not ProviderCall.objects.filter(operation="SendBonus").exists()
    assert [d for d in recording.done if d[0] == "bonus"] == []
    submitted = make_assignment(stage, hit=hit, items=[make_item(project)],
                                status=AssignmentStatus.SUBMITTED)
    project.budget_cap = Decimal("6.00")
    project.save()
    shown = _bonus_action(researcher, [*ids, submitted.pk], "1.00")
    assert shown[0] == "Paid a $1.00 bonus on 3 assignment(s)."
    assert shown[1:] == [f"{submitted}: only approved assignments get bonuses"], shown
    assert sorted(Assignment.objects.filter(pk__in=ids).values_list("bonus_paid", flat=True)) \
        == [Decimal("1.00")] * 3
    assert project_committed_cost(project=project) == Decimal("6.00")


@pytest.mark.django_db
def test_review_pays_the_bonuses_per_correct_answer_together_or_not_at_all(recording):
    """Review's bonuses per correct answer are a selection too: two $2.00 bonuses where the
    cap leaves $3.00 paid the first and refused the second (one worker paid, the other not,
    by the order of their rows); now neither, with one error naming the total."""
    project, stage = _all_correct_submitted(cap="5.00", n_items=2, n_workers=2)
    report = stage_auto_review(stage=stage)
    assert (report.approved, report.bonuses) == (2, 0)
    assert len(report.errors) == 1, report.errors
    assert ("the bonuses of 2 assignments, $4.00 in all" in report.errors[0]
            and "$3.00 left" in report.errors[0]), report.errors
    assert [d[0] for d in recording.done] == ["approve", "approve"]
    project.budget_cap = Decimal("6.00")
    project.save()
    assert stage_auto_review(stage=stage).bonuses == 2


@pytest.mark.django_db
def test_a_refused_bonus_paid_again_counts_against_the_cap_while_it_is_sent(recording):
    """A bonus the provider refused (its call failed for good) is paid again with the same
    key: its row was written back under the budget lock as it stood, failed, so while the
    payment was sent a bonus checked meanwhile did not count it. It is in flight again."""
    from annotation.providers.calls import ProviderCallRefused

    _project, stage, hit = _stage_of_three_dollars("10.00")
    assignment = _approved(stage, hit)
    seen: list[Decimal] = []

    def refuse(**_kwargs):
        raise ProviderCallRefused("insufficient funds")

    def pay(**kwargs):
        seen.append(stage_spent(stage=stage))  # what a bonus checked meanwhile counts
        return {}

    recording.bonus = refuse
    with pytest.raises(ProviderCallRefused):
        assignment_bonus_pay(assignment=assignment, amount=Decimal("1.50"), reason="a")
    assert ProviderCall.objects.get(operation="SendBonus").status == ProviderCallStatus.FAILED
    recording.bonus = pay
    assignment_bonus_pay(assignment=assignment, amount=Decimal("1.50"), reason="a")
    assert seen == [Decimal("2.50")]  # $1.00 approved + the $1.50 being paid
    assert ProviderCall.objects.get(operation="SendBonus").status == ProviderCallStatus.SUCCEEDED


@pytest.mark.django_db
def test_a_selection_across_projects_is_refused_whole_when_one_project_would_pass_its_cap(
        recording, researcher):
    """Each project's bonuses are checked against its own cap, and the selection is paid
    whole or not at all: one project past its cap refuses the other's bonuses too."""
    roomy, roomy_stage, roomy_hit = _stage_of_three_dollars("100.00")
    tight, tight_stage, tight_hit = _stage_of_three_dollars("3.00")
    ids = [_approved(roomy_stage, roomy_hit).pk, _approved(tight_stage, tight_hit).pk]
    shown = _bonus_action(researcher, ids, "0.50")
    assert len(shown) == 1 and "would commit $3.50 of the project's $3.00" in shown[0], shown
    assert f"“{tight.title}”" in shown[0] and roomy.title not in shown[0], shown
    assert not ProviderCall.objects.filter(operation="SendBonus").exists()
    tight.budget_cap = Decimal("3.50")
    tight.save()
    assert _bonus_action(researcher, ids, "0.50") == ["Paid a $0.50 bonus on 2 assignment(s)."]


def _one_bonus_in_flight(recording):
    """A stage committing $3.00 under a $3.90 cap (`_stage_of_three_dollars`) with two
    approved assignments; the first one's $0.50 bonus "thanks" lost its provider answer (in
    flight, counted against the cap). Returns (first, second), the provider answering again."""
    _project, stage, hit = _stage_of_three_dollars("3.90")
    first, second = _approved(stage, hit), _approved(stage, hit)
    real = recording.bonus

    def lost(**_kwargs):
        raise TimeoutError("answer lost")

    recording.bonus = lost
    with pytest.raises(TimeoutError):
        assignment_bonus_pay(assignment=first, amount=Decimal("0.50"), reason="thanks")
    recording.bonus = real
    return first, second


@pytest.mark.django_db
def test_a_bonus_in_flight_is_sent_again_when_the_rest_of_its_selection_is_past_the_cap(
        recording):
    """A's $0.50 bonus lost its provider answer (in flight, counted against the cap). Paid
    again with B's new $0.50 past the $3.90 cap, the selection is refused, but A's, which adds
    nothing, is sent again and done: refused with the rest it stayed in doubt every time."""
    first, second = _one_bonus_in_flight(recording)
    assert ProviderCall.objects.get(assignment=first, operation="SendBonus").status \
        == ProviderCallStatus.PENDING
    batch = assignments_bonus_pay(bonuses=[(first, "0.50"), (second, "0.50")], reason="thanks")
    assert "$3.90 budget cap" in batch.over_cap and batch.paid == [first]
    assert ProviderCall.objects.get(assignment=first, operation="SendBonus").status \
        == ProviderCallStatus.SUCCEEDED
    assert not ProviderCall.objects.filter(assignment=second, operation="SendBonus").exists()


@pytest.mark.django_db
def test_the_admin_says_a_bonus_in_flight_was_sent_when_the_new_ones_are_refused(
        recording, researcher):
    """The admin's refusal past the cap said "No bonus was paid" after the selection's bonus
    in flight had been sent again and paid: it says which."""
    first, second = _one_bonus_in_flight(recording)
    shown = _bonus_action(researcher, [first.pk, second.pk], "0.50")
    assert len(shown) == 1 and shown[0].startswith("No new bonus was paid:"), shown
    assert "The 1 bonus(es) of the selection already in flight" in shown[0], shown
    first.refresh_from_db()
    assert first.bonus_paid == Decimal("0.50")
