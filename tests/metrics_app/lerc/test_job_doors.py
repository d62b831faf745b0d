"""The learned metric's background jobs at every door: what makes a scheduled retrain due, and
how a promotion decision holds when another promotion of the same scope lands meanwhile."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import AssignmentStatus, TaskKind
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import (
    TrainingElsewhere,
    lerc_refresh_due,
    model_version_create,
    model_version_decide,
    model_version_train,
    promoted_model_version,
)
from metrics_app.services.lerc.common import TRAINED
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)
from tests.support.lerc import likert_project_from_toy

pytestmark = pytest.mark.django_db


def test_refresh_counts_only_judgments_that_count(lerc_settings):
    """Judgments of rejected or returned assignments and of blocked workers never reach the
    training data (the counting rule), so they must not make a retrain due either."""
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    items = [make_item(project) for _ in range(6)]
    rejected = make_assignment(stage, status=AssignmentStatus.REJECTED)
    for item in items[:3]:
        make_judgment(item=item, stage=stage, assignment=rejected, worker=rejected.worker,
                      score=1)
    spammer = make_worker(status="blocked")
    for item in items[3:]:
        make_judgment(item=item, stage=stage, worker=spammer, score=1)
    assert lerc_refresh_due(min_new_judgments=1) == []
    good = make_assignment(stage, status=AssignmentStatus.APPROVED)
    for item, score in ((items[0], 4), (items[1], 2)):  # scores that vary: a model can learn
        make_judgment(item=item, stage=stage, assignment=good, worker=good.worker, score=score)
    assert [(p.pk, n) for p, _kind, n in lerc_refresh_due(min_new_judgments=1)] == [
        (project.pk, 2)]


def _evaluated(project, pearson_value, status=ModelStatus.EVALUATED):
    version = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=version.pk).update(
        status=status, artifact_uri=f"stub-{version.number}",
        metrics={"validation": {"pearson": pearson_value}},
        promoted_at=timezone.now() if status == ModelStatus.PROMOTED else None)
    return ModelVersion.objects.get(pk=version.pk)


def test_a_decision_raced_by_another_promotion_compares_with_the_new_incumbent(
        lerc_settings, monkeypatch):
    """v2 and v3 of one project set finish together. While v2's decision re-scores the
    incumbent v1, v3 (better than both) is decided and promoted. v2 must then be compared with
    v3, the version it would replace, not with v1: the worse v2 is rejected and v3 serves."""
    from metrics_app.services.lerc import promotion

    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = []
    project = make_project(kind=TaskKind.LIKERT)
    v1 = _evaluated(project, 0.5, ModelStatus.PROMOTED)
    v2, v3 = _evaluated(project, 0.7), _evaluated(project, 0.9)
    raced = []

    def measured(scorer, kind, examples, scores=None):
        # The stub scorer is the incumbent: it measures what it measured in training.
        if not raced:
            raced.append(v3)
            raced[0] = model_version_decide(model_version=v3, val_examples=examples)
        return {"pearson": scorer.metrics["validation"]["pearson"]}

    monkeypatch.setattr(promotion, "model_version_scorer", lambda version: version)
    monkeypatch.setattr(promotion, "split_metrics", measured)
    v2 = model_version_decide(model_version=v2, val_examples=[object()] * 3)
    assert raced[0].status == ModelStatus.PROMOTED
    for version in (v1, v3):
        version.refresh_from_db()
    assert (v1.status, v2.status, v3.status) == (
        ModelStatus.EVALUATED, ModelStatus.REJECTED, ModelStatus.PROMOTED)
    assert v2.metrics["promotion_decision"]["incumbent"] == f"v{v3.number}"
    assert promoted_model_version(projects=[project]).pk == v3.pk


def test_one_training_of_a_project_set_at_a_time(lerc_settings):
    """While a worker trains a version of a project set (fresh heartbeat), another version of
    the same set does not train too: a queued task looks again later (TrainingElsewhere, the
    task retries), `train_lerc --sync` is refused and its version cancelled, saying which
    version holds the set. Another project set trains meanwhile, and once the first worker's
    heartbeat is stale the set is free again."""
    from django.core.management import CommandError, call_command

    project, _stage = likert_project_from_toy(6)
    other, _ = likert_project_from_toy(6)
    busy = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=busy.pk).update(
        status=ModelStatus.TRAINING, lease="gpu-host:1:abc", heartbeat_at=timezone.now(),
        started_at=timezone.now())
    queued = model_version_create(projects=[project], train_options={"epochs": 1})
    with pytest.raises(TrainingElsewhere, match=f"v{busy.number} .* is training"):
        model_version_train(model_version=queued)
    assert ModelVersion.objects.get(pk=queued.pk).status == ModelStatus.QUEUED
    with pytest.raises(CommandError, match=f"v{busy.number} .* is training"):
        call_command("train_lerc", "--project", project.slug, "--sync", "--epochs", "1")
    refused = ModelVersion.objects.order_by("-pk").first()
    assert refused.status == ModelStatus.CANCELLED
    elsewhere = model_version_create(projects=[other], train_options={"epochs": 1})
    assert model_version_train(model_version=elsewhere).status in TRAINED
    ModelVersion.objects.filter(pk=busy.pk).update(
        heartbeat_at=timezone.now() - timedelta(hours=1))
    assert model_version_train(model_version=queued).status in TRAINED


def test_an_item_copied_into_two_projects_is_never_trained_on_in_one_and_evaluated_in_the_other(
        lerc_settings):
    """A version trained on two projects that hold the same items (a study run again, a data
    set imported twice) with hashed passage splits: every copy of a passage lands in the split
    of its first project, so no validation or test example is a training example."""
    from metrics_app.services.lerc import lerc_dataset_build

    projects = [make_project(kind=TaskKind.LIKERT) for _ in range(2)]
    for project in projects:
        stage, worker = make_stage(project), make_worker()
        for i in range(60):
            item = make_item(project, split="", content={
                "passage": f"Passage {i}.", "question": f"Question {i}?",
                "references": [f"answer {i}"], "candidate": f"candidate {i}"})
            make_judgment(item=item, stage=stage, worker=worker, score=1 + i % 5)
    alone = lerc_dataset_build(projects=projects[:1], split_mode="group")
    both = lerc_dataset_build(projects=projects, split_mode="group")

    def texts(examples):
        return {(e.passage, e.question, e.candidate) for e in examples}

    assert not texts(both.train) & texts(both.val + both.test)
    assert texts(both.val) == texts(alone.val) and texts(both.test) == texts(alone.test)
    assert len(both.val) == 2 * len(alone.val) > 0


def test_two_overlapping_refreshes_queue_one_version(lerc_settings, monkeypatch):
    """Two refreshes at once (a second beat, a run that outlasted its interval) both find the
    project due before either queued anything; the second one, coming to queue, finds the
    first one's version in flight and queues none."""
    from metrics_app.services.lerc import lerc_refresh
    from metrics_app.services.lerc import refresh as refresh_module

    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    for score in (2, 3, 4):
        make_judgment(item=make_item(project), stage=stage, score=score)
    due_before = lerc_refresh_due(min_new_judgments=3)
    assert len(lerc_refresh(min_new_judgments=3)) == 1
    monkeypatch.setattr(refresh_module, "lerc_refresh_due", lambda **_kw: due_before)
    assert lerc_refresh(min_new_judgments=3) == []
    assert ModelVersion.objects.filter(projects=project).count() == 1


def test_a_decision_on_rebuilt_validation_data_measures_both_versions_on_it(lerc_settings):
    """A version decided again (the lerc_evaluate task, a redelivery after its worker died
    between evaluation and decision) reads its validation judgments anew by the counting rule,
    which may since have dropped some (an item excluded, a worker blocked). The candidate must
    be measured on those same examples as the incumbent it is compared with, not stand on its
    training-time number: here the candidate is the incumbent's very model, so "at least as
    good" holds; compared with its stored number the incumbent looked better and it was
    rejected."""
    from annotation.domain.agreement import pearson
    from annotation.models import Item
    from metrics_app.lerc.data import capped_examples
    from metrics_app.services.lerc import model_version_scorer
    from metrics_app.services.lerc.datasets import version_dataset_build
    from metrics_app.services.lerc.options import version_train_config

    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = []
    project, _stage = likert_project_from_toy()
    v1 = model_version_train(model_version=model_version_create(
        projects=[project], train_options={"epochs": 2}))
    assert v1.status == ModelStatus.PROMOTED, v1.error
    cfg = version_train_config(v1)
    val = capped_examples(cfg, version_dataset_build(v1).val, cfg.max_val_examples)
    scores = model_version_scorer(v1).score(val)
    full = pearson(scores, [e.score for e in val])
    assert full == pytest.approx(v1.metrics["validation"]["pearson"], abs=1e-6)

    def without(i):
        rest = [j for j in range(len(val)) if j != i]
        return pearson([scores[j] for j in rest], [val[j].score for j in rest])

    # Exclude the validation item whose removal flatters the model most.
    dropped = max(range(len(val)), key=without)
    assert without(dropped) > full
    Item.objects.filter(pk=int(val[dropped].id)).update(excluded=True)

    candidate = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=candidate.pk).update(
        status=ModelStatus.EVALUATED, artifact_uri=v1.artifact_uri,
        data_snapshot=v1.data_snapshot, metrics={"validation": {"pearson": full}})
    decided = model_version_decide(model_version=candidate)
    assert decided.status == ModelStatus.PROMOTED
    decision = decided.metrics["promotion_decision"]
    assert decision["validation_examples"] == len(val) - 1
    assert decision["candidate"] == pytest.approx(decision["incumbent_value"], abs=1e-6)
    assert decision["candidate_in_training"] == full
