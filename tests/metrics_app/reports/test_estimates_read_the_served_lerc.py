"""The estimates' default judge is "the promoted LERC" (docs/JUDGES.md), and so is the routing's
and `metric:lerc_prob`: every report reads the scores of the version that serves the project,
not whichever version's scores were stored last (a researcher scoring with a rejected version
by hand), and a promotion, which stores no score, reaches the cached report at once."""
from __future__ import annotations

import pytest
from django.utils import timezone

from annotation.models import StageKind, TaskKind
from metrics_app.judge_selectors import metric_view
from metrics_app.models import MetricScore, ModelStatus, ModelVersion
from metrics_app.reports.estimates import latest_metric_scores
from metrics_app.reports.project import cached_project_report, report_refresh
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


def version(project, number: int, status: str) -> ModelVersion:
    made = ModelVersion.objects.create(
        name="lerc", number=number, backbone="b", status=status,
        promoted_at=timezone.now() if status == ModelStatus.PROMOTED else None)
    made.projects.add(project)
    return made


def scored(items, number: int, p: float) -> None:
    MetricScore.objects.bulk_create([
        MetricScore(item=item, metric=name, version=f"v{number}", value=value)
        for item in items for name, value in (("lerc_prob", p), ("lerc", 1 + 4 * p))])


def test_reports_read_the_scores_of_the_version_that_serves_the_project():
    project = make_project(TaskKind.LIKERT, slug="served", owner=make_user("owner"))
    stage = make_stage(project, kind=StageKind.FULL)
    items = [make_item(project, source="sys") for _ in range(4)]
    make_judgment(item=items[0], stage=stage, worker=make_worker(), score=5)
    v1 = version(project, 1, ModelStatus.PROMOTED)
    scored(items, 1, 0.9)
    version(project, 2, ModelStatus.REJECTED)
    scored(items, 2, 0.1)  # scored by hand with --model v2, stored last

    assert latest_metric_scores(project, "lerc_prob") == ("v1", {i.pk: 0.9 for i in items})
    assert metric_view(project, "lerc_prob").version == "v1"
    report_refresh(project=project)
    assert cached_project_report(project=project)["estimates"]["metric"][
        "probability_version"] == "v1"

    # A version promoted later serves once its scores are stored; until then the reports read
    # the last version that was not rejected, never the rejected one.
    v1.status = ModelStatus.EVALUATED
    v1.save(update_fields=["status"])
    version(project, 3, ModelStatus.PROMOTED)
    assert latest_metric_scores(project, "lerc_prob")[0] == "v1"
    scored(items, 3, 0.7)
    assert latest_metric_scores(project, "lerc_prob") == ("v3", {i.pk: 0.7 for i in items})
    # The cached report follows a promotion or a rollback, which stores no score.
    report_refresh(project=project)
    ModelVersion.objects.filter(number=3).update(status=ModelStatus.EVALUATED)
    ModelVersion.objects.filter(number=1).update(status=ModelStatus.PROMOTED,
                                                 promoted_at=timezone.now())
    assert cached_project_report(project=project)["estimates"]["metric"][
        "probability_version"] == "v1"
