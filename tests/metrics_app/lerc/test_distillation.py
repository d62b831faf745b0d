"""Distillation from a judge the researcher trusts: which items it teaches on (only those no
human judged, never a test or held-out item), how a version names the judge, and that its
verdicts reach the calibrated judge's fit through `train_lerc --distill-judge`."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import TaskKind
from metrics_app.models import MetricScore, ModelVersion
from metrics_app.services.judges.imports import verdicts_import
from metrics_app.services.lerc import LercError, lerc_dataset_build, model_version_create
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker
from tests.support.lerc import likert_project_from_toy

pytestmark = pytest.mark.django_db


def _import(project, tmp_path, rows, *, judge="trusted", version="1"):
    path = tmp_path / f"{judge}-{version}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge=judge, version=version)


def _item(project, name, split, candidate, **extra):
    return make_item(project, split=split, external_id=name, content={
        "passage": "", "question": f"who is {name}?", "references": ["ada lovelace"],
        "candidate": candidate}, **extra)


def test_the_judge_teaches_only_on_unjudged_training_and_validation_items(tmp_path):
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    worker = make_worker()
    judged_train = _item(project, "judged-train", "train", "lovelace")
    judged_dev = _item(project, "judged-dev", "dev", "countess of lovelace")
    for item in (judged_train, judged_dev):
        make_judgment(item=item, stage=stage, worker=worker, score=4)
    _item(project, "free-train", "train", "the countess ada")
    _item(project, "free-dev", "dev", "byron's daughter")
    _item(project, "free-test", "test", "a mathematician")  # measured on: never taught on
    _item(project, "exact", "train", "Ada Lovelace.")  # exact matches are not judged either
    _item(project, "excluded", "train", "ada", excluded=True)
    _import(project, tmp_path, [
        {"item_id": name, "verdict": "correct", "probability": p} for name, p in (
            ("judged-train", 0.1), ("judged-dev", 0.1), ("free-train", 0.9),
            ("free-dev", 0.25), ("free-test", 0.9), ("exact", 0.9), ("excluded", 0.9))])

    dataset = lerc_dataset_build(projects=[project], split_mode="item",
                                 distill_judge="trusted@1")

    taught = {e.candidate: e.score for e in dataset.distill}
    assert taught == {"the countess ada": pytest.approx(1 + 4 * 0.9),
                      "byron's daughter": pytest.approx(1 + 4 * 0.25)}
    # The human judgments are untouched by the judge's (contradicting) verdicts.
    assert sorted(e.score for e in dataset.train + dataset.val) == [4.0, 4.0]
    assert dataset.snapshot["distill"]["judge"] == "trusted@1"
    assert dataset.snapshot["distill"]["answers"] == 2
    assert "distill" not in lerc_dataset_build(projects=[project], split_mode="item").snapshot


def test_an_item_a_human_judged_after_the_version_was_pinned_is_still_unjudged_for_it(tmp_path):
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    make_judgment(item=_item(project, "a", "train", "lovelace"), stage=stage, score=5)
    later = _item(project, "b", "train", "byron")
    _import(project, tmp_path, [{"item_id": "b", "verdict": "incorrect", "probability": 0.2}])
    pinned = lerc_dataset_build(projects=[project], split_mode="item").snapshot["watermarks"]
    make_judgment(item=later, stage=stage, score=1)

    again = lerc_dataset_build(projects=[project], split_mode="item", watermarks=pinned,
                               distill_judge="trusted@1")
    assert [e.candidate for e in again.distill] == ["byron"]
    assert [e.candidate for e in lerc_dataset_build(
        projects=[project], split_mode="item", distill_judge="trusted@1").distill] == []


def test_a_version_pins_the_judge_and_refuses_what_cannot_teach_it(tmp_path):
    project = make_project(kind=TaskKind.LIKERT)
    item = _item(project, "a", "train", "lovelace")
    _import(project, tmp_path, [{"item_id": "a", "verdict": "correct"}], version="1")
    _import(project, tmp_path, [{"item_id": "a", "verdict": "correct"}], version="2")

    version = model_version_create(projects=[project], distill_judge="trusted")
    assert version.config["data"]["distill_judge"] == "trusted@2"  # the latest, pinned
    assert model_version_create(projects=[project], distill_judge="trusted@1"
                                ).config["data"]["distill_judge"] == "trusted@1"
    assert model_version_create(projects=[project]).config["data"]["distill_judge"] == ""

    with pytest.raises(LercError, match="no judge named 'nobody'.*trusted"):
        model_version_create(projects=[project], distill_judge="nobody")
    with pytest.raises(LercError, match="has no version '9'"):
        model_version_create(projects=[project], distill_judge="trusted@9")
    MetricScore.objects.create(item=item, metric="lerc", version="3", value=4.0)
    with pytest.raises(LercError, match="cannot be taught by LERC"):
        model_version_create(projects=[project], distill_judge="metric:lerc")
    with pytest.raises(LercError, match="no meteor scores stored"):
        model_version_create(projects=[project], distill_judge="metric:meteor")
    ab = make_project(kind=TaskKind.AB)
    with pytest.raises(LercError, match="pairwise"):
        model_version_create(projects=[ab], kind="pairwise", distill_judge="trusted")
    assert ModelVersion.objects.count() == 3  # the refused ones were never created


def test_train_lerc_distils_from_a_metric_into_the_calibrated_judge(lerc_settings):
    project, stage = likert_project_from_toy()
    # Answers no human judged, scored by a metric the researcher trusts.
    for n in range(30):
        item = make_item(project, split="train", dataset="toy", content={
            "passage": "", "question": f"unjudged {n}?", "references": ["blue whale"],
            "candidate": "the blue whale, largest animal" if n % 2 else "a small shark"})
        MetricScore.objects.create(item=item, metric="f1", version="1",
                                   value=0.8 if n % 2 else 0.1)
    out = StringIO()
    call_command("train_lerc", "--project", project.slug, "--distill-judge", "metric:f1",
                 "--sync", "--options", json.dumps({"calibration_distill_weights": [0.25]}),
                 stdout=out)
    version = ModelVersion.objects.get()
    assert version.config["data"]["distill_judge"] == "metric:f1"
    assert version.data_snapshot["distill"]["answers"] == 30
    summary = json.loads(out.getvalue().split("\n", 2)[2])
    distillation = summary["distillation"]
    assert distillation["answers"] == 30 and distillation["judged_correct"] == 15
    assert distillation["weights_tried"] == [0.0, 0.25]
    assert distillation["weight"] in (0.0, 0.25)


def test_train_lerc_names_a_judge_that_cannot_teach(lerc_settings):
    project, _stage = likert_project_from_toy(4)
    with pytest.raises(CommandError, match="no judge named 'gpt'"):
        call_command("train_lerc", "--project", project.slug, "--distill-judge", "gpt",
                     stdout=StringIO())
    assert not ModelVersion.objects.exists()


def test_the_answers_a_version_was_taught_on_by_the_judge_count_as_seen(tmp_path):
    # The calibrated judge (`lerc_prob`) is fitted on the distilled answers as on its
    # validation answers: once humans judge them, measuring the version there (the judges
    # page, the estimates) measures what it was fitted to. They were left out of its record,
    # so every reading of it against humans counted them as unseen.
    from django.utils import timezone

    from metrics_app.model_selectors import learned_metric_seen_items
    from metrics_app.models import ModelStatus
    from metrics_app.services.lerc.datasets import examples_seen_record

    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    make_judgment(item=_item(project, "judged", "train", "lovelace"), stage=stage, score=4)
    taught = _item(project, "taught", "dev", "byron's daughter")
    # A passage no human judged: its group is nowhere else in the version's data.
    taught.content = {**taught.content, "passage": "Only the judge read this passage."}
    taught.save()
    untaught = _item(project, "untaught", "test", "a mathematician")
    _import(project, tmp_path, [{"item_id": "taught", "verdict": "correct", "probability": 0.8},
                                {"item_id": "untaught", "verdict": "correct",
                                 "probability": 0.8}])
    dataset = lerc_dataset_build(projects=[project], split_mode="item",
                                 distill_judge="trusted@1")
    assert [e.candidate for e in dataset.distill] == ["byron's daughter"]

    record = examples_seen_record(dataset)
    version = ModelVersion.objects.create(name="lerc", number=1, backbone="b",
                                          status=ModelStatus.PROMOTED,
                                          promoted_at=timezone.now(), examples_seen=record)
    version.projects.add(project)
    make_judgment(item=taught, stage=stage, score=2)  # humans judge it after training

    seen = learned_metric_seen_items(project, "lerc_prob", "v1")
    assert taught.pk in seen
    assert untaught.pk not in seen
