"""A version trained but never decided (its worker killed after the model was stored, the
`lerc_evaluate` message lost, the broker down) is found by the one lease sweep
(`metrics_app/services/job_leases.py:stale_jobs_recover_all`): its decision is sent again once
it has been undecided for the stale limit, a bounded number of times, then the version is
failed with the reason. A decided version is never decided again, however late a copy of its
task arrives."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import TaskKind
from metrics_app.models import ModelStatus, ModelVersion, ModelVersionEvent
from metrics_app.services.job_leases import stale_jobs_recover_all
from metrics_app.services.lerc import (
    model_version_create,
    model_version_decide,
    model_version_rollback,
    promoted_model_version,
)
from metrics_app.services.lerc.refresh import DECISION_RESENT
from testing.factories import make_project

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

HOURS_AGO = timedelta(hours=2)


@pytest.fixture
def sent(monkeypatch, lerc_settings):
    """The tasks the sweep sends (by name, with the version id), instead of a broker."""
    from metrics_app.services.lerc import training

    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = []
    lerc_settings.QAJ_JOB_STALE_AFTER_SECONDS = 60
    lerc_settings.QAJ_JOB_MAX_ATTEMPTS = 2
    calls: list[tuple[str, int]] = []
    monkeypatch.setattr(training, "task_send",
                        lambda name, *, args, **_kw: calls.append((name, args[0])))
    return calls


def _trained(project, pearson_value, *, status=ModelStatus.EVALUATED, finished=HOURS_AGO,
             promoted_ago=None):
    """A version as training leaves it (evaluated, weights stored, no decision yet)."""
    version = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=version.pk).update(
        status=status, artifact_uri=f"stub-{version.number}",
        metrics={"validation": {"pearson": pearson_value}},
        finished_at=timezone.now() - finished,
        promoted_at=None if promoted_ago is None else timezone.now() - promoted_ago)
    return ModelVersion.objects.get(pk=version.pk)


def _sweep(capture):
    with capture(execute=True):
        return stale_jobs_recover_all()


def _resends(version) -> int:
    return version.events.filter(event=DECISION_RESENT).count()


def _age_sends(version) -> None:
    """Let the stale limit pass since the last send."""
    ModelVersionEvent.objects.filter(model_version=version, event=DECISION_RESENT).update(
        created_at=timezone.now() - HOURS_AGO)


def test_an_undecided_version_is_sent_again_once_and_decided_once(
        sent, django_capture_on_commit_callbacks):
    from worker.tasks.lerc import lerc_evaluate

    project = make_project(kind=TaskKind.LIKERT)
    young = _trained(project, 0.4, finished=timedelta(seconds=5))
    lost = _trained(make_project(kind=TaskKind.LIKERT), 0.6)

    assert _sweep(django_capture_on_commit_callbacks) == {"retried": 1, "failed": 0}
    assert sent == [("worker.tasks.lerc.lerc_evaluate", lost.pk)]
    assert _resends(young) == 0  # its decision may still be running in the training worker
    # A second sweep (the next beat, or two beats at once) within the stale limit sends nothing.
    assert _sweep(django_capture_on_commit_callbacks) == {"retried": 0, "failed": 0}
    assert len(sent) == 1 and _resends(lost) == 1

    # The resent task and a late copy of it: decided (promoted: no incumbent) exactly once.
    assert lerc_evaluate.run(lost.pk) == ModelStatus.PROMOTED
    assert lerc_evaluate.run(lost.pk) == ModelStatus.PROMOTED
    assert lost.events.filter(event="promoted").count() == 1
    _age_sends(lost)
    assert _sweep(django_capture_on_commit_callbacks) == {"retried": 0, "failed": 0}


def test_an_undecided_version_is_failed_after_the_bounded_sends_saying_why(
        sent, django_capture_on_commit_callbacks, monkeypatch):
    """No decision ever completes (here each run raises): after QAJ_JOB_MAX_ATTEMPTS sends the
    version is failed, the reason and the last error on the version; a late copy of the task
    then does nothing."""
    from metrics_app.services.lerc import runs
    from worker.tasks.lerc import lerc_evaluate

    version = _trained(make_project(kind=TaskKind.LIKERT), 0.6)

    def broken(**_kw):
        raise FileNotFoundError("stub-1/model.safetensors")

    with monkeypatch.context() as patched:
        patched.setattr(runs, "model_version_decide", broken)
        for send in (1, 2):
            assert _sweep(django_capture_on_commit_callbacks)["retried"] == 1
            assert _resends(version) == send
            with pytest.raises(FileNotFoundError):
                lerc_evaluate.run(version.pk)
            _age_sends(version)
    assert _sweep(django_capture_on_commit_callbacks) == {"retried": 0, "failed": 1}
    version.refresh_from_db()
    assert version.status == ModelStatus.FAILED
    assert version.error.startswith("no promotion decision after 2 sends of lerc_evaluate")
    assert "last error: FileNotFoundError: stub-1/model.safetensors" in version.error
    assert version.events.filter(event="failed", detail=version.error).exists()
    assert len(sent) == 2
    assert _sweep(django_capture_on_commit_callbacks) == {"retried": 0, "failed": 0}
    assert lerc_evaluate.run(version.pk) == ModelStatus.FAILED


def test_a_decided_version_is_never_decided_again_by_a_late_task(
        sent, django_capture_on_commit_callbacks, monkeypatch):
    """v2 is decided (promoted over v1), then rolled back by hand: v2 is evaluated again. A
    late copy of its decision task, or of the sweep's, must not promote it a second time over
    the rollback, and the sweep does not take it for an undecided version."""
    from metrics_app.services.lerc import promotion
    from worker.tasks.lerc import lerc_evaluate

    monkeypatch.setattr(promotion, "model_version_scorer", lambda version: version)
    monkeypatch.setattr(promotion, "split_metrics", lambda scorer, kind, examples, scores=None:
                        {"pearson": scorer.metrics["validation"]["pearson"]})
    project = make_project(kind=TaskKind.LIKERT)
    v1 = _trained(project, 0.5, status=ModelStatus.PROMOTED, promoted_ago=HOURS_AGO)
    v2 = _trained(project, 0.9)
    assert model_version_decide(model_version=v2, val_examples=[object()] * 3).status == \
        ModelStatus.PROMOTED
    assert model_version_rollback(model_version=v2).pk == v1.pk
    v2.refresh_from_db()
    assert v2.status == ModelStatus.EVALUATED

    assert lerc_evaluate.run(v2.pk) == ModelStatus.EVALUATED
    assert _sweep(django_capture_on_commit_callbacks) == {"retried": 0, "failed": 0}
    assert sent == []
    assert promoted_model_version(projects=[project]).pk == v1.pk
    assert v2.events.filter(event="promoted").count() == 1


def test_a_version_promoted_by_hand_before_any_decision_is_not_decided_later(
        sent, django_capture_on_commit_callbacks):
    """Promoted by hand while undecided, then replaced: it has no decision stored but was
    served; neither the sweep nor a late decision task promotes it again."""
    from metrics_app.services.lerc import model_version_promote
    from worker.tasks.lerc import lerc_evaluate

    project = make_project(kind=TaskKind.LIKERT)
    by_hand = _trained(project, 0.2)
    model_version_promote(model_version=by_hand, reason="by hand", force=True)
    later = _trained(project, 0.3)
    model_version_promote(model_version=later, reason="by hand", force=True)
    by_hand.refresh_from_db()
    assert by_hand.status == ModelStatus.EVALUATED and by_hand.promoted_at is not None
    assert _sweep(django_capture_on_commit_callbacks) == {"retried": 0, "failed": 0}
    assert lerc_evaluate.run(by_hand.pk) == ModelStatus.EVALUATED
    assert promoted_model_version(projects=[project]).pk == later.pk
