"""The learned metric's background jobs at every door: what makes a scheduled retrain due, and
how a promotion decision holds when another promotion of the same scope lands meanwhile."""
from __future__ import annotations

import pytest
from django.utils import timezone

from annotation.models import AssignmentStatus, TaskKind
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import (
    lerc_refresh_due,
    model_version_create,
    model_version_decide,
    promoted_model_version,
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
    make_judgment(item=items[0], stage=stage, assignment=good, worker=good.worker, score=4)
    assert [(p.pk, n) for p, _kind, n in lerc_refresh_due(min_new_judgments=1)] == [
        (project.pk, 1)]


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
