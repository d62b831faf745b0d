"""The promotion floor, caps that cap, the refresh rule for imported judgments, and the model
card: what a researcher relies on before serving a learned metric."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from annotation.models import StageKind, TaskKind
from metrics_app.models import ModelStatus
from metrics_app.services.lerc import (
    lerc_refresh_due,
    model_card,
    model_version_create,
    model_version_decide,
    model_version_train,
)
from metrics_app.services.lerc_artifacts import artifact_local_path
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker
from tests.support.lerc import likert_project_from_toy, toy_examples

pytestmark = pytest.mark.django_db


@pytest.fixture
def lerc_settings(settings, tmp_path, tiny_options):
    settings.QAJ_ARTIFACT_ROOT = str(tmp_path / "artifacts")
    settings.QAJ_LERC_TRAIN_OPTIONS = {**tiny_options, "epochs": 10}
    return settings


def test_a_first_version_that_does_not_beat_token_f1_is_not_promoted(lerc_settings):
    """On the toy data token F1 orders the candidates perfectly (copy > hedge > other colour),
    so a tiny model trained for 1 epoch cannot beat it: promoted before the floor existed, now
    rejected with the floor's numbers in the decision and the event."""
    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = ["f1", "contains"]
    project, _ = likert_project_from_toy()
    version = model_version_create(projects=[project], train_options={"epochs": 1})
    version = model_version_train(model_version=version)

    assert version.status == ModelStatus.REJECTED
    decision = version.metrics["promotion_decision"]
    floor = decision["floor"]
    assert floor["passed"] is False and floor["best"] in ("f1", "contains")
    assert floor["best_value"] == max(floor["baselines"].values())
    assert decision["candidate"] <= floor["best_value"]
    # The baselines were measured on the very validation examples the version was.
    validation = version.metrics["baselines"]["validation"]
    assert validation["lerc"]["n"] == validation["f1"]["n"] == version.metrics["validation"]["n"]
    assert "does not beat the best baseline" in version.events.get(event="rejected").detail


@pytest.mark.parametrize("candidate, promoted", [(0.8, True), (0.55, False), (0.6, False)])
def test_the_floor_is_every_baseline_on_the_same_validation(lerc_settings, trained_model_dir,
                                                            candidate, promoted):
    """Beating F1 is not enough when BERTScore is better; equal to the best is not beating it."""
    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = ["f1", "bertscore", "meteor"]
    project, _ = likert_project_from_toy(4)
    version = model_version_create(projects=[project])
    version.status = ModelStatus.EVALUATED
    version.artifact_uri = trained_model_dir
    version.metrics = {"validation": {"pearson": candidate, "n": 10}, "baselines": {
        "validation": {"f1": {"pearson": 0.5}, "bertscore": {"pearson": 0.6}},
        "unavailable": {"meteor": "unavailable: no Java"}}}
    version.save()
    version = model_version_decide(model_version=version, val_examples=[])
    floor = version.metrics["promotion_decision"]["floor"]
    assert (floor["best"], floor["best_value"]) == ("bertscore", 0.6)
    assert floor["unavailable"] == {"meteor": "unavailable: no Java"}
    assert version.status == (ModelStatus.PROMOTED if promoted else ModelStatus.REJECTED)


def test_an_unavailable_baseline_is_recorded_not_silently_passed(lerc_settings):
    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = ["f1", "no-such-metric"]
    project, _ = likert_project_from_toy(8)
    version = model_version_train(model_version=model_version_create(projects=[project]))
    assert "no-such-metric" in version.metrics["baselines"]["unavailable"]
    assert version.metrics["promotion_decision"]["floor"]["best"] == "f1"


def test_caps_bound_training_validation_and_test_and_the_printed_counts_are_real(lerc_settings):
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    worker = make_worker()
    for split, n in (("train", 30), ("dev", 20), ("test", 20)):
        for example in toy_examples(n, offset=100 if split != "train" else 0):
            item = make_item(project, split=split, content={
                "passage": example.passage, "question": f"{split} {example.question}",
                "references": list(example.references), "candidate": example.candidate})
            make_judgment(item=item, stage=stage, worker=worker, score=example.score)
    out = StringIO()
    call_command("train_lerc", "--project", project.slug, "--sync", "--epochs", "1",
                 "--max-examples", "7", "--max-val-examples", "5", "--max-test-examples", "4",
                 stdout=out)
    printed = json.loads(out.getvalue().split("\n", 2)[2])
    assert printed["examples"]["train"] == 7
    assert printed["examples"]["validation"] == 5
    assert printed["examples"]["test"] == 4
    assert printed["validation"]["n"] == 5 and printed["test"]["n"] == 4
    # What was available before the caps is still shown (exact copies are dropped: 2/3 left).
    assert printed["examples"]["available"]["train"] == 20


def test_refresh_counts_gathered_judgments_not_imported_ones(settings):
    settings.QAJ_LERC_REFRESH_COUNTS_IMPORTS = False
    project = make_project(kind=TaskKind.LIKERT)
    imported = make_stage(project, kind=StageKind.IMPORTED)
    gathered = make_stage(project, kind=StageKind.FULL)
    for i in range(5):
        item = make_item(project, content={"passage": "", "question": f"q{i}?",
                                           "references": ["a"], "candidate": "b"})
        make_judgment(item=item, stage=imported, score=1)
    assert lerc_refresh_due(min_new_judgments=3) == []
    for i in range(3):
        item = make_item(project, content={"passage": "", "question": f"r{i}?",
                                           "references": ["a"], "candidate": "b"})
        make_judgment(item=item, stage=gathered, score=5)
    assert [(p.id, n) for p, _kind, n in lerc_refresh_due(min_new_judgments=3)] == [
        (project.id, 3)]
    settings.QAJ_LERC_REFRESH_COUNTS_IMPORTS = True
    assert [n for _p, _k, n in lerc_refresh_due(min_new_judgments=3)] == [8]


def test_model_card_in_the_artifact_and_the_admin(lerc_settings, admin_client):
    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = ["f1"]
    project, _ = likert_project_from_toy(8)
    version = model_version_train(model_version=model_version_create(projects=[project]))
    folder = artifact_local_path(version.artifact_uri)
    card = json.loads((folder / "model_card.json").read_text())
    assert card["metrics"]["baselines"]["validation"]["f1"]["n"] > 0
    assert "| f1 |" in (folder / "MODEL_CARD.md").read_text()
    text = model_card(version)
    assert "Promotion decision" in text and "| lerc |" in text
    page = admin_client.get(f"/admin/metrics_app/modelversion/{version.id}/change/")
    assert page.status_code == 200 and b"Promotion decision" in page.content
    # The card as a page, from a real training run: a table and a chart per split.
    card_page = admin_client.get(f"/metrics/models/{version.id}/").content.decode()
    assert '<tr class="model">' in card_page and card_page.count("<svg") >= 1
    assert project.title in card_page
