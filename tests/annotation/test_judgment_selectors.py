"""`stage_agreement`, the entry point the stage publishing guard calls."""
from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from annotation.judgment_selectors import stage_agreement
from annotation.models import StageKind, TaskKind
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db


def test_likert_stage_interval_alpha_matches_package():
    project = make_project(TaskKind.LIKERT)
    trial = make_stage(project, kind=StageKind.TRIAL)
    other = make_stage(project, kind=StageKind.FULL)
    workers = [make_worker() for _ in range(3)]
    scores = [[1, 2, 4, 5, 3], [1, 3, 4, 5, None], [2, 2, None, 4, 3]]
    items = [make_item(project) for _ in range(5)]
    for worker, row in zip(workers, scores, strict=True):
        for item, score in zip(items, row, strict=True):
            if score is not None:
                make_judgment(item=item, stage=trial, worker=worker, score=score)
    # Judgments of another stage do not count.
    make_judgment(item=items[0], stage=other, worker=workers[0], score=5)
    expected = krippendorff.alpha(
        np.array(scores, dtype=float), level_of_measurement="interval",
        value_domain=[1, 2, 3, 4, 5],
    )
    assert stage_agreement(stage=trial) == pytest.approx(expected)


def test_ab_stage_nominal_and_empty_stage():
    project = make_project(TaskKind.AB)
    stage = make_stage(project, kind=StageKind.TRIAL)
    assert stage_agreement(stage=stage) is None
    w1, w2 = make_worker(), make_worker()
    for choice_1, choice_2 in [("A", "A"), ("B", "B"), ("A", "B"), ("B", "B")]:
        item = make_item(project)
        make_judgment(item=item, stage=stage, worker=w1, choice=choice_1)
        make_judgment(item=item, stage=stage, worker=w2, choice=choice_2)
    # Units AA, BB, AB, BB: o_AA=2, o_AB=o_BA=1, o_BB=4 → α = 1 − 7·2/(2·3·5) = 8/15.
    assert stage_agreement(stage=stage) == pytest.approx(8 / 15)
