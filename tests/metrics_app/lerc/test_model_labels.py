"""A model version label (`model` in the scoring APIs, `--model` in `score` / `score_project`,
a queued job's option) is checked by one rule at every door before anything is stored or
scored (`metrics_app/services/scoring.py:scoring_model_check`, resolving through
`metrics_app/services/lerc/promotion.py:model_version_for_label`): it must name a trained
version (promoted, evaluated or rejected) of the metric's own model, and one the requester may
see."""
from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import TaskKind
from metrics_app.models import (
    ItemScoringJob,
    MetricScore,
    ModelStatus,
    ModelVersion,
    ScoringJob,
    ScoringStatus,
)
from metrics_app.registry import MetricUnavailable, get_metric
from metrics_app.services.lerc import LercError, model_version_for_label
from testing.factories import make_item, make_project, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

ITEMS = [{"id": "a", "question": "What color is it?", "references": ["red"], "candidate": "red"},
         {"id": "b", "question": "What color is it?", "references": ["blue"], "candidate": "x"}]
SCORE_URL = "/api/metrics/score/"


def _version(name: str, number: int, status: str, projects, *, artifact: str = "/models/v"):
    """A version row as training leaves it (the label check loads no model)."""
    version = ModelVersion.objects.create(
        name=name, number=number, backbone="packaged MiniLM", status=status,
        kind="pairwise" if name == "lerc-ab" else "regression",
        artifact_uri=artifact if status in ("promoted", "evaluated", "rejected") else "",
        promoted_at=timezone.now() if status == "promoted" else None)
    version.projects.set(projects)
    return version


@pytest.fixture
def study():
    """Alice's Likert project with lerc v1 (promoted), v2 (failed) and v3 (rejected), and her
    A/B project with lerc-ab v1; Bob's Likert and A/B projects see none of them."""
    alice, bob = make_user("alice"), make_user("bob")
    likert = make_project(kind=TaskKind.LIKERT, owner=alice)
    ab = make_project(kind=TaskKind.AB, owner=alice)
    _version("lerc", 1, ModelStatus.PROMOTED, [likert])
    _version("lerc", 2, ModelStatus.FAILED, [likert])
    _version("lerc", 3, ModelStatus.REJECTED, [likert])
    _version("lerc-ab", 1, ModelStatus.PROMOTED, [ab])
    bobs = make_project(kind=TaskKind.LIKERT, owner=bob)
    bobs_ab = make_project(kind=TaskKind.AB, owner=bob)
    for project in (likert, bobs):
        make_item(project, content={"passage": "", "question": "q?", "references": ["red"],
                                    "candidate": "red"})
    for project in (ab, bobs_ab):
        make_item(project, content={"question": "q?", "references": ["red"],
                                    "answer_a": {"text": "red"}, "answer_b": {"text": "blue"}})
    return {"alice": alice, "bob": bob, "likert": likert, "ab": ab, "bobs": bobs,
            "bobs_ab": bobs_ab}


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _jobs_url(project) -> str:
    return reverse("metrics-api:scoring-jobs", args=[project.slug])


def _nothing_stored():
    assert not ItemScoringJob.objects.exists()
    assert not ScoringJob.objects.exists()
    assert not MetricScore.objects.exists()


def test_a_researcher_cannot_score_with_a_version_of_a_project_they_cannot_see(study):
    """Before: 202 on both APIs, and the scores of Bob's project stored as lerc v1 from
    Alice's model. The answer is the one a missing version gets."""
    bob = _api(study["bob"])
    response = bob.post(SCORE_URL, {"metrics": ["lerc"], "model": "v1", "items": ITEMS},
                        format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {"model": ["lerc: there is no lerc v1"]}
    response = bob.post(_jobs_url(study["bobs"]), {"metrics": ["lerc", "f1"], "model": "v1"},
                        format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {"model": ["lerc: there is no lerc v1"]}
    _nothing_stored()
    # Its owner, and a superuser, may.
    assert _api(study["alice"]).post(SCORE_URL, {"metrics": ["lerc"], "model": "v1",
                                                 "items": ITEMS}, format="json"
                                     ).status_code == 202
    root = _api(make_user("root", superuser=True))
    assert root.post(_jobs_url(study["bobs"]), {"metrics": ["lerc"], "model": "lerc:v1"},
                     format="json").status_code == 202


@pytest.mark.parametrize(("label", "message"), [
    ("abc", "lerc: model version 'abc' is not like 3, v3 or lerc:v3"),
    ("v42", "lerc: there is no lerc v42"),
    ("v99999999999999999999", "lerc: there is no lerc v99999999999999999999"),
    ("1" * 40, f"lerc: model version '{'1' * 40}' is not like 3, v3 or lerc:v3"),
    ("v2", "lerc: lerc v2 is failed: only a trained version (promoted, evaluated or rejected) "
           "scores"),
    ("lerc-ab:v1", "lerc: model version 'lerc-ab:v1' is a lerc-ab version; this metric scores "
                   "with lerc versions (e.g. lerc:v1)"),
])
def test_a_label_that_names_no_trained_version_is_a_400_naming_it_on_both_apis(
        study, label, message):
    """Before: 202, and the job ended "done" (or "failed") with the error only inside it."""
    alice = _api(study["alice"])
    response = alice.post(SCORE_URL, {"metrics": ["lerc"], "model": label, "items": ITEMS},
                          format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {"model": [message]}
    response = alice.post(_jobs_url(study["likert"]), {"metrics": ["lerc"], "model": label},
                          format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {"model": [message]}
    _nothing_stored()


def test_a_rejected_version_may_be_scored_with_by_its_label(study):
    """A version the promotion rule rejected is trained and kept: comparing it by hand is
    legitimate; only the unlabelled metric follows the promoted one."""
    response = _api(study["alice"]).post(_jobs_url(study["likert"]),
                                         {"metrics": ["lerc"], "model": "v3"}, format="json")
    assert response.status_code == 202, response.content
    assert model_version_for_label("v3", user=study["alice"]).number == 3


def test_a_label_of_another_model_never_switches_the_metrics_model(study):
    """Before: `lerc_ab` with "lerc:v1" scored A/B answers with the regression model and stored
    them as lerc_ab v1 (a label lerc-ab v1 also has, so later runs reused them)."""
    alice = _api(study["alice"])
    response = alice.post(_jobs_url(study["ab"]), {"metrics": ["lerc_ab"], "model": "lerc:v1"},
                          format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {"model": [
        "lerc_ab: model version 'lerc:v1' is a lerc version; this metric scores with lerc-ab "
        "versions (e.g. lerc-ab:v1)"]}
    _nothing_stored()
    with pytest.raises(MetricUnavailable, match="'lerc:v1' is a lerc version"):
        get_metric("lerc_ab", model="lerc:v1")
    with pytest.raises(MetricUnavailable, match="'lerc-ab:v1' is a lerc-ab version"):
        get_metric("lerc_prob", model="lerc-ab:v1")
    assert get_metric("lerc_ab", model="lerc-ab:v1").model_version.name == "lerc-ab"
    assert _api(study["alice"]).post(_jobs_url(study["ab"]),
                                     {"metrics": ["lerc_ab"], "model": "v1"}, format="json"
                                     ).status_code == 202


@pytest.mark.parametrize(("metric", "label", "message"), [
    ("lerc_ab", "lerc:v1", "--model: lerc_ab: model version 'lerc:v1' is a lerc version; this "
                           "metric scores with lerc-ab versions"),
    ("lerc", "v42", "--model: lerc: there is no lerc v42"),
    ("lerc", "v2", "--model: lerc: lerc v2 is failed"),
])
def test_the_score_commands_refuse_the_same_labels_even_with_allow_missing(
        study, tmp_path, metric, label, message):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in ITEMS), encoding="utf-8")
    with pytest.raises(CommandError, match="^" + message):
        call_command("score", "--metric", f"f1,{metric}", "--model", label, "--input",
                     str(source), "--output", str(target), "--no-progress", "--allow-missing")
    assert not target.exists()
    project = study["ab"] if metric == "lerc_ab" else study["likert"]
    with pytest.raises(CommandError, match="^" + message):
        call_command("score_project", project.slug, "--metric", f"f1,{metric}", "--model",
                     label, "--no-progress", "--allow-missing")
    _nothing_stored()


def test_a_queued_job_is_checked_again_for_its_requester_when_it_runs(study):
    """The Celery door: a job queued before the check (or whose requester lost access since)
    fails saying why, and stores no score."""
    from worker.tasks.metrics import score_items, score_project

    job = ScoringJob.objects.create(project=study["bobs"], metrics=["f1", "lerc"], queue="gpu",
                                    requested_by=study["bob"], options={"model": "v1"})
    with pytest.raises(ValueError, match="there is no lerc v1"):
        score_project.run(job.pk)
    job.refresh_from_db()
    assert job.status == ScoringStatus.FAILED
    assert job.error == "ScoringModelError: lerc: there is no lerc v1"
    items = ItemScoringJob.objects.create(
        metrics=["lerc_ab"], queue="gpu", requested_by=study["alice"], items=[
            {"id": "a", "question": "q", "references": ["r"], "candidate": "r", "passage": ""}],
        options={"model": "lerc:v1"}, total=1)
    with pytest.raises(ValueError, match="is a lerc version"):
        score_items.run(items.pk)
    items.refresh_from_db()
    assert items.status == ScoringStatus.FAILED and "lerc_ab: model version" in items.error
    assert not MetricScore.objects.exists()


def test_a_number_no_id_column_holds_is_no_version_not_a_driver_error(study):
    with pytest.raises(LercError, match="^there is no lerc v99999999999999999999$"):
        model_version_for_label("v99999999999999999999")
    with pytest.raises(LercError, match="^there is no lerc v0$"):
        model_version_for_label("v0")
    with pytest.raises(LercError, match="is not like 3, v3 or lerc:v3"):
        model_version_for_label("v-3")
    assert model_version_for_label(" V1 ").number == 1


def test_a_leftover_lerc_scoring_message_never_scores_with_the_version_it_names(study):
    """A `lerc_score_project(project, version id)` message still in a broker (nothing sends it
    now) has no requester, so it may not choose a version: it becomes a scoring job of the
    project's own LERC metric with no model option (the promoted version serves), whether the
    id names an unpromoted version (lerc v3, rejected) or the other kind's version (lerc v1 on
    an A/B project, never read as lerc-ab v1). Nothing is scored by the message itself."""
    from worker.tasks.lerc import lerc_score_project

    rejected = ModelVersion.objects.get(name="lerc", number=3)
    outcome = lerc_score_project.run(study["likert"].pk, rejected.pk)
    job = ScoringJob.objects.get(pk=outcome["scoring_job"])
    assert (job.metrics, job.options, job.requested_by) == (["lerc"], {}, None)
    assert outcome["ignored_model_version"] == rejected.pk
    assert "may not choose" in outcome["note"]

    regression = ModelVersion.objects.get(name="lerc", number=1)
    on_ab = lerc_score_project.run(study["ab"].pk, regression.pk)
    ab_job = ScoringJob.objects.get(pk=on_ab["scoring_job"])
    assert (ab_job.project, ab_job.metrics, ab_job.options) == (study["ab"], ["lerc_ab"], {})
    assert not MetricScore.objects.exists()