"""The platform side: datasets from judgments, versions, the promotion rule, refresh, cancel
and stuck-job safety."""
from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from annotation.models import StageKind, TaskKind
from metrics_app.model_selectors import learned_metric_seen_items
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.registry import MetricInput, MetricUnavailable, get_metric
from metrics_app.services.job_leases import stale_jobs_recover_all
from metrics_app.services.lerc import (
    LercError,
    lerc_dataset_build,
    lerc_refresh_due,
    model_version_cancel,
    model_version_create,
    model_version_decide,
    model_version_promote,
    model_version_rollback,
    model_version_train,
)
from metrics_app.services.lerc.datasets import version_dataset_build
from testing.factories import make_item, make_judgment, make_project, make_stage
from tests.support.lerc import likert_project_from_toy

pytestmark = pytest.mark.django_db


def test_dataset_gold_mean_drops_exact_matches_and_pins_judgments():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    practice = make_stage(project, kind=StageKind.PRACTICE)
    item = make_item(project, split="train", content={
        "passage": "p", "question": "q?", "references": ["on the mat"], "candidate": "a rug"})
    exact = make_item(project, split="train", content={
        "passage": "p", "question": "q?", "references": ["on the mat"], "candidate": "On the mat."})
    j1 = make_judgment(item=item, stage=stage, score=2)
    j2 = make_judgment(item=item, stage=stage, score=4)
    make_judgment(item=exact, stage=stage, score=5)
    make_judgment(item=item, stage=practice, score=1)  # practice never counts

    dataset = lerc_dataset_build(projects=[project], split_mode="item")
    assert [(e.candidate, e.score) for e in dataset.train] == [("a rug", 3.0)]
    assert dataset.snapshot["dropped_items"]["exact_match"] == 1
    assert dataset.snapshot["judgment_count"] == 2
    assert dataset.snapshot["max_judgment_id"] == j2.id

    pinned = dict(dataset.snapshot["watermarks"])
    make_judgment(item=item, stage=stage, score=5)  # arrives later
    again = lerc_dataset_build(projects=[project], watermarks=pinned, split_mode="item")
    assert again.snapshot["judgment_ids_sha256"] == dataset.snapshot["judgment_ids_sha256"]
    assert again.train[0].score == 3.0
    assert lerc_dataset_build(projects=[project], split_mode="item").train[0].score == pytest.approx(11 / 3)
    assert j1.id < j2.id



def test_dataset_drops_the_answers_the_served_judge_scores_by_rule():
    """Training leaves out what serving never sends to the encoder: an exact match as the judge
    reads texts, not only as they were written (a number spelled the other way, a label)."""
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    for candidate, score in (("6", 5), ("Answer: six", 5), ("seven", 1)):
        item = make_item(project, split="train", content={
            "passage": "p", "question": "How many seasons?", "references": ["six"],
            "candidate": candidate})
        make_judgment(item=item, stage=stage, score=score)

    dataset = lerc_dataset_build(projects=[project], split_mode="item")
    assert [e.candidate for e in dataset.train] == ["seven"]
    assert dataset.snapshot["dropped_items"]["exact_match"] == 2

def test_group_split_never_puts_a_passage_in_two_splits():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    for passage in range(40):
        for candidate in range(3):
            item = make_item(project, split="", content={
                "passage": f"passage {passage}", "question": f"q{candidate}?",
                "references": ["ref"], "candidate": f"cand {candidate}"})
            make_judgment(item=item, stage=stage, score=3)
    dataset = lerc_dataset_build(projects=[project], split_mode="group", val_fraction=0.2,
                                 test_fraction=0.2)
    splits = {name: {e.passage for e in getattr(dataset, name)} for name in ("train", "val", "test")}
    assert all(splits.values())
    assert not (splits["train"] & splits["val"] or splits["train"] & splits["test"]
                or splits["val"] & splits["test"])


def test_holdout_dataset_is_only_the_test_set():
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    for dataset_name, split in (("nq", "train"), ("nq", "dev"), ("tq", "train"), ("tq", "dev")):
        for i in range(3):
            item = make_item(project, dataset=dataset_name, split=split, content={
                "passage": "", "question": f"{dataset_name} {split} {i}?",
                "references": ["x"], "candidate": f"y{i}"})
            make_judgment(item=item, stage=stage, score=2)
    dataset = lerc_dataset_build(projects=[project], holdout_dataset="tq")
    assert {e.dataset for e in dataset.test} == {"tq"} and len(dataset.test) == 6
    assert {e.dataset for e in dataset.train + dataset.val} == {"nq"}


def test_train_promotes_first_version_then_rule_compares_on_same_judgments(lerc_settings,
                                                                           researcher):
    project, _stage = likert_project_from_toy()
    v1 = model_version_create(projects=[project])
    v1 = model_version_train(model_version=v1)
    assert v1.status == ModelStatus.PROMOTED, v1.error
    pearson_v1 = v1.metrics["validation"]["pearson"]
    assert pearson_v1 > 0.8
    assert v1.metrics["promotion_decision"]["promoted"] is True
    # A third of the toy candidates copy their reference: exact matches are dropped.
    assert v1.data_snapshot["judgment_count"] == 32
    assert v1.data_snapshot["dropped_items"]["exact_match"] == 16
    # What it saw is kept with it, so the reports measure it only on the rest: its train and
    # validation items (their passages too), apart from its test items.
    rebuilt = version_dataset_build(v1)
    assert v1.examples_seen["items"] == sorted(int(e.id) for e in rebuilt.train + rebuilt.val)
    assert v1.examples_seen["test_items"] == sorted(int(e.id) for e in rebuilt.test)
    assert v1.examples_seen["items"] and not set(v1.examples_seen["items"]) & set(
        v1.examples_seen["test_items"])
    assert learned_metric_seen_items(project, "lerc", f"v{v1.number}") == set(
        v1.examples_seen["items"])
    assert v1.progress["phase"] == "done" and v1.started_at and v1.finished_at
    assert {"created", "training started", "evaluated", "promoted"} <= set(
        v1.events.values_list("event", flat=True))

    # Candidates carrying v1's very model: the incumbent is re-scored on the candidate's
    # validation judgments, so only the candidate's own number decides.
    def candidate_with(pearson_value):
        version = model_version_create(projects=[project])
        version.status = ModelStatus.EVALUATED
        version.artifact_uri = v1.artifact_uri
        version.data_snapshot = v1.data_snapshot
        version.metrics = {"validation": {"pearson": pearson_value}}
        version.save()
        return model_version_decide(model_version=version)

    # A worker that died between evaluation and decision: the redelivered task decides.
    undecided = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=undecided.pk).update(
        status=ModelStatus.EVALUATED, artifact_uri=v1.artifact_uri,
        data_snapshot=v1.data_snapshot, metrics={"validation": {"pearson": -1.0}})
    assert model_version_train(model_version=undecided).status == ModelStatus.REJECTED

    worse = candidate_with(pearson_v1 - 0.05)
    assert worse.status == ModelStatus.REJECTED
    decision = worse.metrics["promotion_decision"]
    assert decision["incumbent"] == f"v{v1.number}"
    assert decision["incumbent_value"] == pytest.approx(pearson_v1, abs=1e-4)

    equal = candidate_with(decision["incumbent_value"])
    assert equal.status == ModelStatus.PROMOTED  # "at least as good"
    v1.refresh_from_db()
    assert v1.status == ModelStatus.EVALUATED

    # By hand: promote the rejected one, then roll back; both logged with the user.
    model_version_promote(model_version=worse, user=researcher, reason="looks fine to me",
                          force=True)  # the rule rejected it (test_hand_promotion.py)
    back = model_version_rollback(user=researcher)
    assert back.pk == equal.pk and back.status == ModelStatus.PROMOTED
    assert worse.events.filter(event="rolled back", user=researcher).exists()
    assert worse.events.filter(event="promoted", user=researcher).exists()

    metric = get_metric("lerc")
    assert metric.version == f"v{equal.number}"
    scores = metric.score_batch([MetricInput(id="1", question="What color is thing 0?",
                                             references=["red"], candidate="red",
                                             passage="Thing 0 is red.")])
    assert isinstance(scores[0], float)
    model_version_promote(model_version=v1, user=researcher, force=True)
    with pytest.raises(MetricUnavailable, match="changed from"):
        metric.score_batch([MetricInput(id="1", question="q", references=["r"], candidate="c")])
    metric.close()
    pinned = get_metric("lerc", model=f"v{v1.number}")
    assert pinned.version == f"v{v1.number}"


def test_lerc_metric_without_promoted_version_says_what_to_do():
    with pytest.raises(MetricUnavailable, match="no lerc version is promoted"):
        get_metric("lerc", model=None, model_version=None)
    with pytest.raises(MetricUnavailable, match="there is no lerc v99"):
        get_metric("lerc", model="v99")


def test_refresh_due_counts_from_latest_version_and_skips_in_flight(lerc_settings):
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    items = [make_item(project) for _ in range(4)]
    for score, item in enumerate(items[:3], start=2):  # scores that vary: a model can learn
        make_judgment(item=item, stage=stage, score=score)
    assert [(p.pk, n) for p, _kind, n in lerc_refresh_due(min_new_judgments=3)] == [
        (project.pk, 3)]
    version = model_version_create(projects=[project])
    assert lerc_refresh_due(min_new_judgments=3) == []  # queued: in flight
    version.status = ModelStatus.REJECTED
    version.save(update_fields=["status"])
    assert lerc_refresh_due(min_new_judgments=1) == []  # nothing new since its snapshot
    make_judgment(item=items[3], stage=stage, score=2)
    assert [n for _p, _k, n in lerc_refresh_due(min_new_judgments=1)] == [1]


def test_stale_training_is_failed_fresh_is_kept():
    project = make_project(kind=TaskKind.LIKERT)
    stale = model_version_create(projects=[project])
    fresh = model_version_create(projects=[project])
    old = timezone.now() - timedelta(hours=2)
    ModelVersion.objects.filter(pk=stale.pk).update(
        status=ModelStatus.TRAINING, heartbeat_at=old, lease="gpu1:42:ab12cd34")
    ModelVersion.objects.filter(pk=fresh.pk).update(
        status=ModelStatus.TRAINING, heartbeat_at=timezone.now(), lease="gpu1:43:ab12cd34")
    with override_settings(QAJ_JOB_STALE_AFTER_SECONDS=600):
        assert stale_jobs_recover_all() == {"retried": 0, "failed": 1}
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == ModelStatus.FAILED and "gpu1:42" in stale.error
    assert stale.events.filter(event="failed", detail=stale.error).exists()
    assert fresh.status == ModelStatus.TRAINING
    # A redelivered task for the failed version does nothing.
    assert model_version_train(model_version=stale).status == ModelStatus.FAILED


def test_cancel_queued_and_refuse_wrong_project_kind():
    project = make_project(kind=TaskKind.LIKERT)
    version = model_version_create(projects=[project])
    assert model_version_cancel(model_version=version).status == ModelStatus.CANCELLED
    assert model_version_train(model_version=version).status == ModelStatus.CANCELLED
    with pytest.raises(LercError, match="pairwise models train on ab projects"):
        model_version_create(projects=[project], kind="pairwise")
    with pytest.raises(LercError, match="unknown training options"):
        model_version_create(projects=[project], train_options={"epoch": 3})


def test_failed_training_is_recorded(lerc_settings):
    project = make_project(kind=TaskKind.LIKERT)  # no judgments at all
    version = model_version_create(projects=[project])
    with pytest.raises(LercError):
        model_version_train(model_version=version)
    version.refresh_from_db()
    assert version.status == ModelStatus.FAILED and "no training examples" in version.error


def test_missing_artifact_is_a_clear_metric_error(lerc_settings):
    project, _ = likert_project_from_toy(6)
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {**lerc_settings.QAJ_LERC_TRAIN_OPTIONS, "epochs": 1}
    version = model_version_train(model_version=model_version_create(projects=[project]))
    shutil.rmtree(version.artifact_uri)
    from metrics_app.services.lerc import evaluation as lerc_evaluation

    lerc_evaluation._SCORERS.clear()
    with pytest.raises(MetricUnavailable, match="missing on this machine"):
        get_metric("lerc").score_batch([MetricInput(id="1", question="q", references=["r"],
                                                    candidate="c")])


def test_train_lerc_command_sync_and_queued(lerc_settings, capsys):
    import json

    from django.core.management import call_command

    project, _ = likert_project_from_toy(6)
    options = json.dumps({"backbone_config": lerc_settings.QAJ_LERC_TRAIN_OPTIONS[
        "backbone_config"], "max_length": 64, "batch_size": 4})
    call_command("train_lerc", "--project", project.slug, "--epochs", "1", "--lr", "1e-3",
                 "--options", options, "--sync")
    out = capsys.readouterr().out
    assert "lerc v1: promoted" in out
    assert '"judgment_count": 8' in out  # 12 judged items minus 4 exact matches
    version = ModelVersion.objects.get(number=1)
    assert version.config["train"]["epochs"] == 1
    assert version.config["train"]["learning_rate"] == 1e-3

    call_command("train_lerc", "--project", project.slug)
    assert "queued lerc v2" in capsys.readouterr().out
    assert ModelVersion.objects.get(number=2).status == ModelStatus.QUEUED


@pytest.mark.parametrize(("flags", "message"), [
    (["--epochs", "-1"], "epochs: "), (["--epochs", "0"], "epochs: "),
    (["--epochs", "99999999999"], "epochs: "), (["--batch-size", "0"], "batch_size: "),
    (["--lr", "-1"], "learning_rate: "), (["--lr", "nan"], "learning_rate: "),
    (["--max-examples", "-5"], "max_train_examples: "), (["--max-length", "0"], "max_length: "),
    (["--max-val-examples", "0"], "max_val_examples: "),
    (["--pretrain-epochs", "-2"], "pretrain_epochs: "),
    (["--options", '{"epochs": "abc"}'], "epochs: "),
    (["--options", '{"grad_accumulation": 0}'], "grad_accumulation: "),
    (["--options", '{"learning_rate": 1e400}'], "learning_rate: "),
    (["--options", '{"learning_rate": NaN}'], "learning_rate: "),
    (["--options", "[1]"], "--options: a JSON object of TrainConfig fields"),
])
def test_train_lerc_command_refuses_options_that_cannot_train_and_stores_nothing(
        lerc_settings, capsys, flags, message):
    """Before: every one printed "queued lerc vN" and stored the value (a NaN or infinity
    ended as "could not allocate a version number", a list as a TypeError traceback)."""
    from django.core.management import CommandError, call_command

    project, _ = likert_project_from_toy(2)
    with pytest.raises(CommandError) as refused:
        call_command("train_lerc", "--project", project.slug, *flags)
    assert str(refused.value).startswith(message), refused.value
    assert not ModelVersion.objects.exists()
    assert "queued" not in capsys.readouterr().out


def test_the_refresh_task_refuses_default_options_that_cannot_train_and_creates_nothing(
        lerc_settings):
    """The Celery refresh creates versions from QAJ_LERC_TRAIN_OPTIONS alone: values that
    cannot train fail the task naming the variable and the option, before any version."""
    from worker.tasks.lerc import lerc_refresh

    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    for score in (2, 3, 4):
        make_judgment(item=make_item(project), stage=stage, score=score)
    lerc_settings.QAJ_LERC_MIN_NEW_JUDGMENTS = 3
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {"epochs": -3, "batch_size": 0,
                                            "learning_rate": -1}
    with pytest.raises(LercError, match=r"^QAJ_LERC_TRAIN_OPTIONS: epochs: .* not -3$"):
        lerc_refresh()
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {"epochs": 1, "learning_rate": float("nan")}
    with pytest.raises(LercError, match="^QAJ_LERC_TRAIN_OPTIONS: learning_rate: "):
        lerc_refresh()
    assert not ModelVersion.objects.exists()
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {"epochs": 1}
    assert len(lerc_refresh()) == 1


def test_version_numbers_retry_only_a_collision(lerc_settings, monkeypatch):
    """Another creator taking the same number is retried with the next one; any other
    refusal of the row goes up as it is, not as "could not allocate a version number"."""
    from django.db import IntegrityError

    from metrics_app.services.lerc import training

    project = make_project(kind=TaskKind.LIKERT)
    first = model_version_create(projects=[project])
    real_next = training.next_version_number
    stale = iter([first.number])  # a racing creator read the same highest number
    monkeypatch.setattr(training, "next_version_number",
                        lambda name: next(stale, None) or real_next(name))
    assert model_version_create(projects=[project]).number == first.number + 1

    def refused(**kwargs):
        raise IntegrityError("CHECK constraint failed: JSON_VALID")

    monkeypatch.setattr(ModelVersion.objects, "create", refused)
    with pytest.raises(IntegrityError, match="JSON_VALID"):
        model_version_create(projects=[project])
    assert ModelVersion.objects.count() == 2


def test_mc_pretraining_and_minimal_pairs_in_a_trained_version(lerc_settings):
    project, _ = likert_project_from_toy(6)
    for pair in ("p1", "p2"):
        for role, candidate in ((1, "red"), (2, "blue")):
            make_item(project, split="test", metadata={"minimal_pair": pair, "pair_role": role},
                      content={"passage": "Thing 0 is red.", "question": "What color is it?",
                               "references": ["scarlet"], "candidate": candidate})
    mc_project = make_project(kind=TaskKind.MC)
    make_item(mc_project)
    make_item(mc_project)
    version = model_version_create(projects=[project], pretrain_projects=[mc_project],
                                   train_options={"epochs": 1})
    assert version.config["train"]["pretrain_epochs"] == 1
    version = model_version_train(model_version=version)
    assert version.status == ModelStatus.PROMOTED, version.error
    # Two MC items × (3 wrong answers × 2 orders + 1 "both correct").
    assert version.metrics["training"]["pretrain_examples"] == 14
    assert version.metrics["minimal_pairs"]["n"] == 2
    assert 0.0 <= version.metrics["minimal_pairs"]["accuracy"] <= 1.0
    with pytest.raises(LercError, match="multiple-choice"):
        model_version_create(projects=[project], pretrain_projects=[project])


def test_refresh_after_a_failed_version_counts_from_the_last_trained_one(lerc_settings):
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    items = [make_item(project) for _ in range(5)]
    for item in items[:3]:
        make_judgment(item=item, stage=stage, score=4)
    trained = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=trained.pk).update(status=ModelStatus.REJECTED)
    for item in items[3:]:
        make_judgment(item=item, stage=stage, score=2)
    # Its worker was lost: it pinned all 5 judgments but never trained on them.
    lost = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=lost.pk).update(status=ModelStatus.FAILED)
    assert [n for _p, _k, n in lerc_refresh_due(min_new_judgments=2)] == [2]
    assert lerc_refresh_due(min_new_judgments=3) == []
