"""The one freshness rule (`annotation.judgment_selectors.watermark`): the highest id of the
rows a result read, 0 when none; a `JudgmentFrame` and every cache compare it."""
from __future__ import annotations

import numpy as np
import pytest

from annotation.judgment_selectors import load_judgments, watermark
from annotation.models import Judgment, StageKind, TaskKind
from metrics_app.models import MetricScore
from metrics_app.reports.estimates import judge_watermark, metric_watermark
from metrics_app.reports.project import judgment_watermark
from metrics_app.services.judges.alignment import _watermarks as alignment_watermarks
from metrics_app.services.lerc.datasets import _data_watermark
from metrics_app.services.meta_evaluation_report import _watermarks as metric_eval_watermarks
from testing.factories import make_item, make_judgment, make_project, make_stage

pytestmark = pytest.mark.django_db


def test_nothing_read_is_watermark_zero():
    assert watermark(Judgment.objects.none()) == 0
    assert watermark(np.array([], dtype=np.int64)) == 0
    project = make_project(TaskKind.LIKERT)
    assert load_judgments(project=project).watermark == 0
    assert judgment_watermark(project=project) == 0
    assert metric_eval_watermarks(project) == (0, 0)


def test_every_cache_reads_the_same_rule():
    project = make_project(TaskKind.LIKERT)
    practice = make_stage(project, kind=StageKind.PRACTICE, name="practice")
    data = make_stage(project, kind=StageKind.FULL, name="full")
    item = make_item(project)
    first = make_judgment(item=item, stage=data, score=4)
    last_practice = make_judgment(item=item, stage=practice, score=2)
    score = MetricScore.objects.create(item=item, metric="lerc_prob", version="v1", value=0.7)

    judgments = Judgment.objects.filter(item__project=project)
    assert watermark(judgments) == last_practice.pk
    frame = load_judgments(project=project, include_non_data_stages=True)
    assert frame.watermark == watermark(judgments) == judgment_watermark(project=project)
    assert judgment_watermark(project=project, stage=data) == first.pk
    # A LERC data set pins the data stages' judgments only.
    assert _data_watermark(project) == first.pk
    assert metric_eval_watermarks(project) == (last_practice.pk, score.pk)
    assert metric_watermark(project) == score.pk
    assert judge_watermark(project) == 0
    marks = alignment_watermarks(project)
    assert (marks["judgments"], marks["scores"], marks["verdicts"]) == (
        last_practice.pk, score.pk, 0)
    newer = make_judgment(item=item, stage=data, score=5)
    assert load_judgments(project=project).watermark == newer.pk == watermark(judgments)
