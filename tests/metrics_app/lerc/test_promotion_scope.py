"""Promotion is scoped by project set: project B's model never replaces project A's; the
`lerc` metric for a project serves the version promoted for it."""
from __future__ import annotations

import pytest

from annotation.models import Project, TaskKind
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.registry import get_metric
from metrics_app.services.lerc import (
    LercError,
    model_version_create,
    model_version_decide,
    model_version_promote,
    model_version_rollback,
    model_version_train,
)
from metrics_app.services.scoring import project_score_metrics
from testing.factories import make_project
from tests.support.lerc import likert_project_from_toy

pytestmark = pytest.mark.django_db


def test_two_projects_each_keep_their_promoted_version(lerc_settings, researcher):
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {**lerc_settings.QAJ_LERC_TRAIN_OPTIONS, "epochs": 2}
    project_a, _ = likert_project_from_toy(6)
    project_b, _ = likert_project_from_toy(6)
    a1 = model_version_train(model_version=model_version_create(projects=[project_a]))
    assert a1.status == ModelStatus.PROMOTED, a1.error

    def evaluated(projects, pearson_value):
        version = model_version_create(projects=projects)
        ModelVersion.objects.filter(pk=version.pk).update(
            status=ModelStatus.EVALUATED, artifact_uri=a1.artifact_uri,
            data_snapshot=version.data_snapshot,
            metrics={"validation": {"pearson": pearson_value}})
        return model_version_decide(model_version=version)

    # B's first version is compared with nothing of B's: promoted, and A keeps a1.
    b1 = evaluated([project_b], -0.5)
    assert b1.status == ModelStatus.PROMOTED
    assert b1.metrics["promotion_decision"]["promoted"] is True
    assert "incumbent" not in b1.metrics["promotion_decision"]
    a1.refresh_from_db()
    assert a1.status == ModelStatus.PROMOTED

    # A's next version competes with a1 only.
    a2 = evaluated([project_a], -1.0)
    assert a2.status == ModelStatus.REJECTED
    assert a2.metrics["promotion_decision"]["incumbent"] == f"v{a1.number}"

    assert get_metric("lerc", project=project_a).version == f"v{a1.number}"
    assert get_metric("lerc", project=project_b).version == f"v{b1.number}"
    assert get_metric("lerc", project=project_b, model=f"v{a1.number}").version == \
        f"v{a1.number}"  # model= still pins
    # A project no version trained on is scored out of domain by the latest promoted one.
    lonely = make_project(kind=TaskKind.LIKERT)
    assert get_metric("lerc", project=lonely).version == f"v{b1.number}"
    # Project scoring serves the project's own version.
    assert project_score_metrics(project=project_b, metric_names=["lerc"])["lerc"][
        "version"] == f"v{b1.number}"

    # By hand: promoting a2 replaces a1, not b1; rollback within A's set; both logged.
    model_version_promote(model_version=a2, user=researcher, reason="by hand", force=True)
    a1.refresh_from_db()
    b1.refresh_from_db()
    assert (a1.status, b1.status) == (ModelStatus.EVALUATED, ModelStatus.PROMOTED)
    with pytest.raises(LercError, match="2 project sets"):
        model_version_rollback(name="lerc", user=researcher)
    back = model_version_rollback(model_version=a2, user=researcher)
    assert back.pk == a1.pk and back.status == ModelStatus.PROMOTED
    assert a2.events.filter(event="rolled back", user=researcher).exists()
    assert a1.events.filter(event="promoted", user=researcher).exists()
    b1.refresh_from_db()
    assert b1.status == ModelStatus.PROMOTED

    # A version trained on both projects is a third scope; it serves both once most recent.
    both = evaluated([project_a, project_b], 0.1)
    assert both.status == ModelStatus.PROMOTED
    # It takes a from a1 and b from b1: compared with each on that project's validation
    # examples (the same weights here, so at least as good on each).
    takeovers = both.metrics["promotion_decision"]["takeovers"]
    assert [(row["project_id"], row["serving"]) for row in takeovers] == sorted(
        [(project_a.pk, f"v{a1.number}"), (project_b.pk, f"v{b1.number}")],
        key=lambda pair: Project.objects.get(pk=pair[0]).slug)
    assert all(row["examples"] > 0 and row["candidate"] == row["serving_value"]
               for row in takeovers)
    a1.refresh_from_db()
    b1.refresh_from_db()
    assert a1.status == b1.status == ModelStatus.PROMOTED
    assert get_metric("lerc", project=project_a).version == f"v{both.number}"
