"""A version refused for its data (nothing left to train on once exact matches are dropped,
every training answer one score) fails before any training, and the same data refuses again.
The scheduled refresh counts new judgments from it as from a version that trained: before, it
counted from the last trained version only, so every beat queued one more version of the same
data, failed at once, without end (v2, v3, v4... each hour)."""
from __future__ import annotations

import pytest

from annotation.models import TaskKind
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import LercError, lerc_refresh, lerc_refresh_due, model_version_train
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _exact_matches_only(n: int = 12):
    """Judgments that vary (so `_one_score_only` lets the refresh through), all on candidates
    that repeat their reference: the data set drops every one of them."""
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    worker = make_worker()
    items = []
    for index in range(n):
        answer = f"answer {index}"
        item = make_item(project, split="train" if index % 2 else "dev", dataset="toy", content={
            "passage": f"passage {index}", "question": f"question {index}?",
            "references": [answer], "candidate": answer})
        make_judgment(item=item, stage=stage, worker=worker, score=1 + index % 5)
        items.append(item)
    return project, stage, items


def _versions(project):
    return list(ModelVersion.objects.filter(projects=project).order_by("number")
                .values_list("status", flat=True))


def test_a_version_refused_for_its_data_is_not_queued_again_each_beat(lerc_settings,
                                                                      monkeypatch):
    from metrics_app.lerc import training as lerc_training
    from metrics_app.services.lerc import training

    monkeypatch.setattr(training, "task_send", lambda *args, **kwargs: None)
    monkeypatch.setattr(lerc_training, "train", lambda *a, **k: pytest.fail("trained"))
    project, stage, items = _exact_matches_only()
    [version] = lerc_refresh(min_new_judgments=10)
    with pytest.raises(LercError, match="no training examples"):
        model_version_train(model_version=version)
    assert _versions(project) == [ModelStatus.FAILED]
    # The next beats: the same judgments would be refused again; nothing is queued.
    assert lerc_refresh_due(min_new_judgments=10) == []
    assert lerc_refresh(min_new_judgments=10) == []
    assert _versions(project) == [ModelStatus.FAILED]
    # Enough judgments gathered since the refused version: due again.
    worker = make_worker()
    for item in items[:10]:
        make_judgment(item=item, stage=stage, worker=worker, score=3)
    assert [(p.pk, n) for p, _kind, n in lerc_refresh_due(min_new_judgments=10)] == [
        (project.pk, 10)]


def test_a_version_whose_worker_was_lost_is_replaced_at_the_next_beat(lerc_settings,
                                                                      monkeypatch):
    """Only a refusal of the data pins it: a version failed for another reason (the lease
    sweep failing one whose worker died) is replaced without waiting for new judgments."""
    from metrics_app.services.lerc import training

    monkeypatch.setattr(training, "task_send", lambda *args, **kwargs: None)
    project, _stage, _items = _exact_matches_only()
    [version] = lerc_refresh(min_new_judgments=10)
    ModelVersion.objects.filter(pk=version.pk).update(status=ModelStatus.FAILED,
                                                      error="worker lost")
    assert [(p.pk, n) for p, _kind, n in lerc_refresh_due(min_new_judgments=10)] == [
        (project.pk, 12)]


def test_versions_failing_in_a_row_stop_the_refresh_until_new_judgments(lerc_settings,
                                                                       monkeypatch):
    """A training that fails each time on the same data (an error in evaluation, a worker
    killed for memory every time) is tried QAJ_JOB_MAX_ATTEMPTS times, then the refresh waits
    for that many new judgments: before, it queued one more version every beat without end
    (a full training each hour, failed each time)."""
    from metrics_app.services.lerc import training

    lerc_settings.QAJ_JOB_MAX_ATTEMPTS = 3
    monkeypatch.setattr(training, "task_send", lambda *args, **kwargs: None)
    project, stage, items = _exact_matches_only()
    for attempt in range(3):
        [version] = lerc_refresh(min_new_judgments=10)
        ModelVersion.objects.filter(pk=version.pk).update(
            status=ModelStatus.FAILED, error=f"RuntimeError: evaluation broke ({attempt})")
    assert lerc_refresh_due(min_new_judgments=10) == []
    assert lerc_refresh(min_new_judgments=10) == []
    assert _versions(project) == [ModelStatus.FAILED] * 3
    worker = make_worker()
    for item in items[:10]:
        make_judgment(item=item, stage=stage, worker=worker, score=3)
    assert [(p.pk, n) for p, _kind, n in lerc_refresh_due(min_new_judgments=10)] == [
        (project.pk, 10)]
