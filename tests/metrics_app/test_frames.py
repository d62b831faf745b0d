"""The notebook entry point: a project's tables as pandas DataFrames, counting rule applied."""
from __future__ import annotations

import pandas as pd
import pytest

from annotation.models import TaskKind
from metrics_app.frames import project_frames, setup
from metrics_app.services.scoring import project_score_metrics
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db


def test_project_frames_hold_items_judgments_scores_and_the_counting_rule():
    setup()   # already configured by the test run: a no-op, as in a second notebook cell
    project = make_project(kind=TaskKind.LIKERT, slug="frames")
    stage = make_stage(project)
    practice = make_stage(project, kind="practice")
    first = make_item(project, source="fid", content={
        "passage": "", "question": "Who?", "references": ["Röntgen"], "candidate": "Röntgen"})
    second = make_item(project, source="gpt4", content={
        "passage": "", "question": "When?", "references": ["1901"], "candidate": "In 1902"})
    alice, bob = make_worker(external_id="alice"), make_worker(external_id="bob")
    make_judgment(item=first, stage=stage, worker=alice, score=5)
    make_judgment(item=first, stage=stage, worker=bob, score=4)
    make_judgment(item=second, stage=stage, worker=alice, score=1)
    make_judgment(item=second, stage=practice, worker=bob, score=5)   # practice: never counts
    project_score_metrics(project=project, metric_names=["em", "f1"])

    frames = project_frames("frames")
    assert list(frames.items.index) == [first.pk, second.pk]
    assert frames.items.loc[second.pk, "candidate"] == "In 1902"
    assert frames.items.loc[first.pk, "references"] == ["Röntgen"]
    assert list(frames.judgments.columns[:3]) == ["judgment_id", "item_id", "external_id"]
    assert frames.judgments.counts.tolist() == [True, True, True, False]
    assert set(frames.judgments.worker) == {"alice", "bob"}
    assert frames.human.loc[first.pk].tolist() == [4.5, 2, 4.5, True]  # mean, n, label, study
    assert frames.human.loc[second.pk].tolist() == [1.0, 1, 1.0, True]
    scores = frames.scores.set_index("item_id")
    assert scores.loc[first.pk, "em"] == 1.0 and scores.loc[second.pk, "em"] == 0.0
    assert {"em", "f1", "side"} <= set(frames.scores.columns)
    merged = frames.scores.merge(frames.human, left_on="item_id", right_index=True)
    assert isinstance(merged, pd.DataFrame) and len(merged) == 2
    # A judged gold check keeps its row but is no study item, as the metric report reads it.
    check = make_item(project, is_gold_check=True, gold={"score": 5}, content={
        "passage": "", "question": "Where?", "references": ["Paris"], "candidate": "Lyon"})
    make_judgment(item=check, stage=stage, worker=bob, score=2)
    frames = project_frames("frames")
    assert frames.human.loc[check.pk, "n_judgments"] == 1
    assert frames.human.study_item.to_dict() == {first.pk: True, second.pk: True,
                                                 check.pk: False}
    assert frames.items.study_item.tolist() == [True, True, False]
    with pytest.raises(LookupError, match="no project with slug 'nope'"):
        project_frames("nope")
