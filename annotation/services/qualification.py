"""Grading the qualification stage (MOCHA appendix D).

A worker answers N items with known answers; an answer is correct when the multiple-choice or
A/B choice equals the gold choice, or the Likert score is within `project.qualification_tolerance`
of the gold score. Passing needs at least `project.qualification_threshold` of the N correct
(unanswered items count as wrong). The result is stored once per worker and stage — a failing
worker cannot retake — and granted on the provider (`qualification_grant`), where MTurk's
qualification value (the score in percent) also keeps failing workers out of the trial.

On MTurk and Prolific a result counts only once the provider has confirmed the assignment it
was graded from (the sync found it in the provider's own list): the task page cannot tell a
made-up assignment id from a real one, so a forged failing submission in someone else's
worker id must neither be granted on the provider nor stand in the way of that worker's own,
confirmed result, which replaces it.
"""
from __future__ import annotations

from django.db import IntegrityError, transaction

from annotation.domain.answers import answer_matches_gold
from annotation.domain.qualification_scores import granted_value
from annotation.models import (
    Assignment,
    Item,
    Judgment,
    ProviderCall,
    ProviderCallStatus,
    StageKind,
    WorkerQualification,
)
from annotation.providers.calls import provider_call_run
from annotation.selectors import qualification_results_that_count


def answer_is_correct(*, item: Item, judgment: Judgment, tolerance: float = 0.0) -> bool | None:
    """Whether a judgment matches the item's gold answer (None: the item has no gold);
    `annotation.domain.answers.answer_matches_gold` is the definition."""
    return answer_matches_gold(item.project.kind, item.gold, score=judgment.score,
                               choice=judgment.choice, tolerance=tolerance)


class QualificationUnconfirmed(Exception):
    """The result was graded from an assignment the provider has not confirmed."""


def assignment_provider_confirmed(assignment: Assignment | None) -> bool:
    """Whether the assignment is known to the provider (always true for providers that keep no
    list of their own: in-house links, imports)."""
    from annotation.providers import get_provider

    if assignment is None:
        return False
    if assignment.provider_confirmed_at is not None:
        return True
    return not get_provider(assignment.stage.provider).confirms_submissions


def qualification_source_confirmed(qualification: WorkerQualification) -> bool:
    """Whether the result may be granted on the provider: its assignment is confirmed (results
    stored before results named their assignment: any confirmed assignment of the worker in
    the stage)."""
    from annotation.providers import get_provider

    if not get_provider(qualification.stage.provider).confirms_submissions:
        return True
    if qualification.assignment_id is not None:
        return qualification.assignment.provider_confirmed_at is not None
    return Assignment.objects.filter(worker=qualification.worker, stage=qualification.stage,
                                     provider_confirmed_at__isnull=False).exists()


def qualification_grade(*, assignment: Assignment) -> WorkerQualification:
    """Grade a submitted qualification assignment (local only; no provider call).

    Idempotent: a worker's first result stands, so grading again (a redelivered task, a second
    qualification assignment) returns it unchanged — unless that first result came from an
    assignment the provider has not confirmed and this one is confirmed: then this one's
    result replaces it (before it was granted anywhere).
    """
    stage = assignment.stage
    if stage.kind != StageKind.QUALIFICATION:
        raise ValueError(f"{stage} is not a qualification stage")
    existing = WorkerQualification.objects.filter(worker=assignment.worker, stage=stage).first()
    if existing is not None:
        replace = (
            existing.assignment_id not in (None, assignment.pk)
            and not existing.granted_externally
            and assignment_provider_confirmed(assignment)
            and not assignment_provider_confirmed(existing.assignment)
        )
        if not replace:
            return existing
        passed, score, n_items = _grade(assignment)
        existing.passed, existing.score, existing.n_items = passed, score, n_items
        existing.assignment = assignment
        existing.save(update_fields=["passed", "score", "n_items", "assignment"])
        return existing
    passed, score, n_items = _grade(assignment)
    try:
        with transaction.atomic():
            return WorkerQualification.objects.create(
                worker=assignment.worker, stage=stage, passed=passed, score=score,
                n_items=n_items, assignment=assignment,
            )
    except IntegrityError:  # graded concurrently: the first result stands
        return WorkerQualification.objects.get(worker=assignment.worker, stage=stage)


def _grade(assignment: Assignment) -> tuple[bool, float, int]:
    project = assignment.stage.project
    items = [item for item in assignment.items.select_related("project") if item.gold]
    judgments = {j.item_id: j for j in assignment.judgments.all()}
    correct = sum(
        1 for item in items
        if item.pk in judgments and answer_is_correct(
            item=item, judgment=judgments[item.pk], tolerance=project.qualification_tolerance)
    )
    score = correct / len(items) if items else 0.0
    passed = bool(items) and score >= project.qualification_threshold - 1e-9
    return passed, score, len(items)


def qualification_grant(*, qualification: WorkerQualification) -> WorkerQualification:
    """Record the result on the provider (MTurk: AssociateQualificationWithWorker with the
    score in percent; Prolific: passing participants join the allow-list group). Once only."""
    from annotation.providers import get_provider

    if qualification.granted_externally:
        return qualification
    if not qualification_source_confirmed(qualification):
        raise QualificationUnconfirmed(
            f"{qualification.worker}'s result comes from an assignment "
            f"{qualification.stage.get_provider_display()} has not confirmed; not granted")
    stage = qualification.stage
    provider = get_provider(stage.provider)
    # Rejected work qualifies no one, whatever its answers scored: granted as a fail (MTurk's
    # value below the pass mark keeps the worker out of the trial; Prolific adds no one).
    passed = qualification.passed and qualification_counts(qualification)
    value = granted_value(score=qualification.score, passed=passed,
                          threshold=stage.project.qualification_threshold)
    _qualification_call(qualification, "GrantQualification", "qualification-grant",
                        lambda: provider.grant_qualification(
                            stage=stage, worker=qualification.worker, value=value,
                            passed=passed),
                        request={"value": value, "passed": passed})
    qualification.granted_externally = True
    qualification.save(update_fields=["granted_externally"])
    return qualification


def qualification_counts(qualification: WorkerQualification) -> bool:
    """Whether the result qualifies (`qualification_results_that_count`: not graded from
    rejected work)."""
    return qualification_results_that_count(
        WorkerQualification.objects.filter(pk=qualification.pk)).exists()


def qualification_withdraw_rejected(*, qualification: WorkerQualification) -> bool:
    """Take back a pass granted on the provider once the work it was graded from is rejected
    (MTurk: the value set below the pass mark; Prolific: out of the allow-list group). Once
    only (a recorded call); True when the result needed it."""
    from annotation.providers import get_provider

    if not (qualification.granted_externally and qualification.passed) \
            or qualification_counts(qualification):
        return False
    stage = qualification.stage
    provider = get_provider(stage.provider)
    value = granted_value(score=qualification.score, passed=False,
                          threshold=stage.project.qualification_threshold)
    _qualification_call(qualification, "WithdrawQualification", "qualification-withdraw",
                        lambda: provider.withdraw_qualification(
                            stage=stage, worker=qualification.worker, value=value),
                        request={"value": value})
    return True


def _qualification_call(qualification: WorkerQualification, operation: str, key_name: str,
                        call, *, request: dict) -> None:
    """One recorded provider call about a worker's qualification result, made once per result
    (`provider_call_run`, keyed by the result)."""
    stage = qualification.stage
    provider_call_run(
        provider=stage.provider, operation=operation,
        key=f"{stage.provider}:{key_name}:{qualification.pk}",
        call_fn=lambda _token: call(), stage=stage, worker=qualification.worker,
        request=request)


def qualification_provider_holds_fail(qualification: WorkerQualification) -> bool:
    """Whether the provider holds a pass of ours as a fail because its work was rejected: the
    pass was withdrawn (`qualification_withdraw_rejected`), or granted as a fail (rejected
    before the grant), and not granted again since (`qualification_regrant`)."""
    stage = qualification.stage
    calls = ProviderCall.objects.filter(status=ProviderCallStatus.SUCCEEDED)
    key = f"{stage.provider}:qualification-%s:{qualification.pk}"
    if calls.filter(key=key % "regrant").exists():
        return False
    return calls.filter(key=key % "withdraw").exists() or calls.filter(
        key=key % "grant", request__passed=False).exists()


def qualification_regrant(*, qualification: WorkerQualification) -> bool:
    """Grant a pass again on the provider once the rejection of the work it was graded from is
    reversed (`assignment_rejection_reverse`, or an approval the sync mirrors): the result
    qualifies again (`qualification_counts`) while the provider holds it as a fail. Once only
    (a recorded call); True when the result needed it."""
    from annotation.providers import get_provider

    if not (qualification.granted_externally and qualification.passed) \
            or not qualification_counts(qualification) \
            or not qualification_provider_holds_fail(qualification):
        return False
    stage = qualification.stage
    provider = get_provider(stage.provider)
    value = granted_value(score=qualification.score, passed=True,
                          threshold=stage.project.qualification_threshold)
    _qualification_call(qualification, "GrantQualification", "qualification-regrant",
                        lambda: provider.grant_qualification(
                            stage=stage, worker=qualification.worker, value=value, passed=True),
                        request={"value": value, "passed": True, "after": "rejection reversed"})
    return True


def qualification_regrant_after_reversal(*, assignment: Assignment) -> list[str]:
    """Called where a rejected qualification assignment becomes approved: grant its pass again
    (`qualification_regrant`). Returns what failed, in words (a provider fault: the periodic
    review retries, `stage_auto_review`)."""
    if assignment.stage.kind != StageKind.QUALIFICATION:
        return []
    failed = []
    for qualification in WorkerQualification.objects.filter(
            worker=assignment.worker, stage=assignment.stage).select_related(
            "worker", "stage", "stage__project"):
        try:
            qualification_regrant(qualification=qualification)
        except Exception as exc:  # noqa: BLE001 - retried by the periodic review
            failed.append(f"the pass could not be granted again on "
                          f"{assignment.stage.get_provider_display()} ({exc}); the periodic "
                          f"review tries again")
    return failed


def qualification_withdraw_after_rejection(*, assignment: Assignment) -> None:
    """Called where a qualification assignment becomes rejected (a researcher's or the
    review's rejection, one mirrored from the provider): withdraw the pass granted from it. A
    provider fault is left to the periodic review, which retries (`stage_auto_review`)."""
    if assignment.stage.kind != StageKind.QUALIFICATION:
        return
    for qualification in WorkerQualification.objects.filter(
            worker=assignment.worker, stage=assignment.stage).select_related(
            "worker", "stage", "stage__project"):
        try:
            qualification_withdraw_rejected(qualification=qualification)
        except Exception:  # noqa: BLE001 - retried by the periodic review
            continue


def qualification_grade_on_submit(*, assignment: Assignment) -> WorkerQualification | None:
    """Called by `assignment_submit` for qualification stages: grade at once, so a passing
    worker can start the trial on our pages right away. The provider-side grant is a network
    call and is left to the periodic sync (`stage_auto_review`), keeping the submit request
    free of provider and broker calls."""
    if assignment.stage.kind != StageKind.QUALIFICATION:
        return None
    return qualification_grade(assignment=assignment)
