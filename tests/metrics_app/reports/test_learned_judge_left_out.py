"""A learned metric (LERC) is measured against humans only on answers its version did not see.

The scheduled refresh trains LERC on a project's own judgments and then scores that project:
its train and validation answers (the epoch and the calibrator were chosen on validation) are
answers it was fitted to. Every reading of it against the humans leaves them out, with one
rule (`learned_metric_seen_items`): the metric report and its scatter and ROC, the judge views
(the judges page, a judge named in the estimates), the estimates' default judge, and the
leaderboard's metric boards. Measured there it would score its memory, and a
prediction-powered estimate corrected with labels its predictions were fitted to is biased.
"""
from __future__ import annotations

import numpy as np
import pytest
from django.utils import timezone

from annotation.judgment_selectors import load_judgments
from annotation.models import StageKind, TaskKind
from core.text_match import passage_group
from metrics_app.judge_selectors import metric_view
from metrics_app.model_selectors import learned_metric_seen_items
from metrics_app.models import MetricScore, ModelStatus, ModelVersion
from metrics_app.reports.estimates import estimates_report
from metrics_app.services.judges.alignment import judge_alignment_report
from metrics_app.services.meta_evaluation_report import metric_evaluation_build, scatter_points
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def promoted(project, number: int = 1, **fields) -> ModelVersion:
    version = ModelVersion.objects.create(name="lerc", number=number, backbone="b",
                                          status=ModelStatus.PROMOTED,
                                          promoted_at=timezone.now(), **fields)
    version.projects.add(project)
    return version


def item_with_passage(project, passage: str, **fields):
    return make_item(project, content={"passage": passage, "question": "q?",
                                       "references": ["r"], "candidate": "c"}, **fields)


@pytest.mark.parametrize("batch", [900, 1])
def test_the_seen_items_are_the_train_and_validation_items_and_their_passages_never_the_test(
        batch, monkeypatch):
    # Items outside the version's data are read for their passage in batches.
    monkeypatch.setattr("metrics_app.model_selectors.GROUP_READ_BATCH", batch)
    project = make_project(TaskKind.LIKERT, slug="seen-rule")
    trained = item_with_passage(project, "Passage one.")
    validated = item_with_passage(project, "Passage two.")
    tested = item_with_passage(project, "Passage three.")
    # Judged after training: another answer to a passage it trained on, and a new passage.
    same_passage = item_with_passage(project, "  passage ONE. ")
    new_passage = item_with_passage(project, "Passage four.")
    # A test answer whose passage also had a training answer (an item-split dataset) stays
    # a test answer: the split decided it.
    tested_beside_training = item_with_passage(project, "Passage one.")
    promoted(project, examples_seen={
        "items": [trained.pk, validated.pk],
        "groups": [passage_group("", "Passage one.", "q?"), passage_group("", "Passage two.", "q?")],
        "test_items": [tested.pk, tested_beside_training.pk]})

    seen = learned_metric_seen_items(project, "lerc", "v1")
    assert seen == {trained.pk, validated.pk, same_passage.pk}
    assert tested.pk not in seen and new_passage.pk not in seen
    assert learned_metric_seen_items(project, "lerc_prob", "v1") == seen
    # Any other metric, or a version that is not a model's, sees nothing.
    assert learned_metric_seen_items(project, "f1", "v1") == frozenset()
    assert learned_metric_seen_items(project, "lerc", "1.0") == frozenset()
    assert learned_metric_seen_items(project, "lerc", "v9") == frozenset()


def test_a_version_trained_before_the_record_counts_every_item_judged_up_to_its_watermark():
    project = make_project(TaskKind.LIKERT, slug="seen-old")
    stage = make_stage(project, kind=StageKind.FULL)
    worker = make_worker()
    before = [make_item(project) for _ in range(3)]
    marks = [make_judgment(item=item, stage=stage, worker=worker, score=4).pk for item in before]
    promoted(project, data_snapshot={"watermarks": {str(project.pk): max(marks)}})
    after = make_item(project)
    make_judgment(item=after, stage=stage, worker=worker, score=2)
    assert learned_metric_seen_items(project, "lerc", "v1") == {item.pk for item in before}


@pytest.fixture
def study():
    """200 judged answers of two systems; LERC v1 trained on the first 120 and memorized their
    labels exactly, while on the other 80 it is a noisy but honest judge."""
    project = make_project(TaskKind.LIKERT, slug="memorized")
    stage = make_stage(project, kind=StageKind.FULL)
    worker = make_worker()
    rng = np.random.default_rng(7)
    seen, unseen, labels = [], [], {}
    for n in range(200):
        item = item_with_passage(project, f"Passage {n}.", source="x" if n % 2 else "y")
        correct = bool(rng.random() < 0.6)
        make_judgment(item=item, stage=stage, worker=worker, score=5 if correct else 1)
        labels[item.pk] = correct
        (seen if n < 120 else unseen).append(item)
    for item in seen:
        p = 1.0 if labels[item.pk] else 0.0  # its memory of the label it trained on
        store_lerc(item, p)
    for item in unseen:
        p = float(np.clip((0.7 if labels[item.pk] else 0.3) + rng.normal(0, 0.25), 0.01, 0.99))
        store_lerc(item, p)
        MetricScore.objects.create(item=item, metric="f1", version="1", value=p)
    for item in seen:
        MetricScore.objects.create(item=item, metric="f1", version="1", value=0.5)
    promoted(project, examples_seen={"items": [i.pk for i in seen], "groups": [],
                                     "test_items": [i.pk for i in unseen]})
    return {"project": project, "seen": seen, "unseen": unseen, "labels": labels}


def store_lerc(item, p: float) -> None:
    MetricScore.objects.bulk_create([
        MetricScore(item=item, metric="lerc_prob", version="v1", value=p),
        MetricScore(item=item, metric="lerc", version="v1", value=1 + 4 * p)])


def test_the_metric_report_measures_lerc_on_its_unseen_answers_and_says_so(study):
    project = study["project"]
    report = metric_evaluation_build(project=project, params={"n_resamples": 50})
    overall = report["correlations"]["lerc"]["overall"]
    assert overall["n"] == 80
    # Its memory (a perfect Pearson on 120 answers) is not what the table shows.
    assert overall["pearson"] < 0.95
    assert report["correlations"]["f1"]["overall"]["n"] == 200
    assert report["left_out_seen"] == {
        "lerc": {"version": "v1", "items": 120, "measured_on": 80},
        "lerc_prob": {"version": "v1", "items": 120, "measured_on": 80}}
    xs, _ys, total = scatter_points(project=project, metric="lerc")
    assert total == 80 and len(xs) == 80


def test_the_judge_views_and_the_judges_page_leave_the_seen_answers_out(study):
    project = study["project"]
    view = metric_view(project, "lerc_prob")
    assert set(view.calls) == {item.pk for item in study["unseen"]}
    assert view.left_out_seen == 120
    report = judge_alignment_report(project=project, refs=["metric:lerc_prob"], n_resamples=50)
    entry = report["judges"]["metric:lerc_prob"]
    assert entry["left_out_seen"] == 120
    assert entry["judged_with_labels"] <= 80, entry["judged_with_labels"]


def test_the_estimates_do_not_move_with_what_lerc_says_on_answers_it_saw(study):
    """Prediction-powered estimates are unbiased only with predictions made without the labels
    they are corrected with: what the version says on its training answers must not change
    them (those answers count as unscored, predicted unsure)."""
    project = study["project"]

    def accuracy(judge=None):
        report = estimates_report(load_judgments(project=project), project=project, judge=judge)
        return {system: report["systems"][system]["accuracy"]["ppi"] for system in ("x", "y")}, \
            report

    memorized, report = accuracy()
    assert report["metric"]["left_out_seen"] == 120
    assert "trained or calibrated on 120" in report["left_out_note"]
    # The version's memory turned upside down: the estimates stay where they were.
    for item in study["seen"]:
        p = 0.0 if study["labels"][item.pk] else 1.0
        MetricScore.objects.filter(item=item, metric="lerc_prob").update(value=p)
        MetricScore.objects.filter(item=item, metric="lerc").update(value=1 + 4 * p)
    inverted, _ = accuracy()
    assert inverted == memorized
    # The same through a judge reference (metric:lerc_prob) as through the default.
    named, named_report = accuracy("metric:lerc_prob")
    assert named_report["metric"]["left_out_seen"] == 120
    for system in ("x", "y"):
        assert named[system]["estimate"] == pytest.approx(memorized[system]["estimate"])


def test_a_version_that_saw_every_scored_answer_gives_no_estimate_and_says_why():
    project = make_project(TaskKind.LIKERT, slug="all-seen")
    stage = make_stage(project, kind=StageKind.FULL)
    items = [item_with_passage(project, f"P{n}", source="x") for n in range(4)]
    for item in items:
        make_judgment(item=item, stage=stage, worker=make_worker(), score=5)
        store_lerc(item, 0.9)
    promoted(project, examples_seen={"items": [i.pk for i in items], "groups": [],
                                     "test_items": []})
    report = estimates_report(load_judgments(project=project), project=project)
    assert "trained or calibrated on every item" in report["note"]
    assert "ppi" not in report["systems"]["x"]["accuracy"]
    named = estimates_report(load_judgments(project=project), project=project,
                             judge="metric:lerc_prob")
    assert "trained or calibrated on every item" in named["skipped"]


def test_the_metrics_page_says_where_lerc_was_measured(client, study):
    from django.urls import reverse

    from metrics_app.services.meta_evaluation_report import metric_report_refresh
    from testing.factories import make_user

    project = study["project"]
    project.owner = make_user("owner-left-out")
    project.save(update_fields=["owner"])
    metric_report_refresh(project=project)
    client.force_login(project.owner)
    page = client.get(reverse("metrics:project-metrics", args=[project.slug])).content.decode()
    assert 'id="left-out-seen"' in page
    assert "is measured on the 80 scored answers it never saw" in page
    assert "n=80" in page  # the LERC cells name their own n beside the column's 200
