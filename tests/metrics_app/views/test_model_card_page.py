"""The model card as a page (metrics/models/<id>/): the numbers against the baselines as a
table and a chart, the data it saw per project, options and timings, the promotion decision;
seen only by researchers who see one of its projects (a stranger gets 404, the projects they
do not see are counted, not named), linked from the Model versions admin."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import TaskKind
from metrics_app.models import ModelStatus, ModelVersion, ModelVersionEvent
from testing.factories import make_project, make_user

pytestmark = pytest.mark.django_db


def _row(n, accuracy, pearson, *, ci=True):
    row = {"n": n, "accuracy": accuracy, "kappa": accuracy - 0.3, "roc_auc": accuracy + 0.05,
           "pearson": pearson}
    if ci:
        row["pearson_ci"] = [round(pearson - 0.1, 3), round(pearson + 0.1, 3)]
    return row


def _version(*projects, **fields):
    version = ModelVersion.objects.create(
        name="lerc", number=7, backbone="bert-base-uncased", status=ModelStatus.PROMOTED,
        config={"train": {"epochs": 3, "learning_rate": 2e-5}, "data": {"split_mode": "auto"}},
        data_snapshot={
            "projects": {p.slug: {"id": p.pk, "judgments": 100 + i, "items": 40 + i,
                                  "watermark": 900 + i} for i, p in enumerate(projects)},
            "examples": {"train": 61, "val": 22, "test": 17}, "judgment_count": 201,
            "max_judgment_id": 901, "judgment_ids_sha256": "ab12cd", "split_mode": "auto"},
        metrics={
            "examples": {"train": 61, "val": 22, "test": 17,
                         "available": {"train": 80, "val": 30}},
            "timings": {"train": 123.4, "evaluate": 5.6, "epoch_seconds": [60.04, 62.96]},
            "baselines": {
                "validation": {"lerc": _row(22, 0.818, 0.712), "f1": _row(22, 0.636, 0.401)},
                "test": {"lerc": _row(17, 0.765, 0.655), "f1": _row(17, 0.588, 0.377,
                                                                   ci=False)},
                "thresholds": {"lerc": 3.0, "f1": 0.4213},
                "unavailable": {"bertscore": "bert-score is not installed"}},
            "promotion_decision": {"promoted": True, "measure": "pearson",
                                   "value": 0.712, "best_baseline": "f1"},
        }, **fields)
    version.projects.set(projects)
    ModelVersionEvent.objects.create(model_version=version, event="promoted",
                                     detail="beats f1 on validation pearson")
    return version


def _url(version):
    return reverse("metrics:model-card", args=[version.pk])


def test_the_card_shows_numbers_against_baselines_chart_data_options_and_decision(client):
    owner = make_user("owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="cats", title="Where the cat sat")
    version = _version(project)
    client.force_login(owner)
    response = client.get(_url(version))
    assert response.status_code == 200
    html = response.content.decode()
    assert "lerc v7 — model card" in html and "Promoted" in html
    validation = html[html.index('id="split-validation"'):html.index('id="split-test"')]
    assert '<tr class="model">' in validation and "0.818" in validation and "0.712" in validation
    assert validation.index("<td>lerc</td>") < validation.index("<td>f1</td>")
    assert "[0.612, 0.812]" in validation  # the interval under Pearson
    assert "0.636" in validation and "0.421" in validation  # f1's accuracy and threshold
    assert validation.count("<svg") == 1 and "pearson on validation" in validation
    assert "0.765" in html and "0.655" in html  # test
    assert "bertscore (bert-score is not installed)" in html
    decision = html[html.index('id="decision"'):]
    assert "<strong>promoted</strong>" in decision and "best baseline" in decision
    projects = html[html.index('id="card-projects"'):]
    assert "Where the cat sat" in projects and "<td>100</td><td>40</td><td>900</td>" in projects
    assert "train 61 · val 22 · test 17 · available train 80 · val 30" in html
    assert "{'" not in html  # no Python repr of a nested count
    facts = html[html.index('id="card-data"'):html.index('id="card-options"')]
    assert "<dt>judgment count</dt><dd>201</dd>" in facts and "ab12cd" in facts
    assert "<dt>judgment ids sha256</dt>" in facts and "judgmentcount" not in facts
    assert "epochs 3 · learning_rate 2e-05" in html
    assert "epoch_seconds 60.0, 63.0 · evaluate 5.6 · train 123.4" in html
    assert "beats f1 on validation pearson" in html


@pytest.mark.reliability
def test_a_stranger_gets_404_and_a_collaborator_sees_only_their_projects_named(client):
    owner, stranger, colleague = make_user("owner"), make_user("stranger"), make_user("colleague")
    mine = make_project(TaskKind.LIKERT, owner=owner, slug="mine", title="Owner's study")
    shared = make_project(TaskKind.LIKERT, owner=owner, slug="shared", title="Shared study")
    shared.shared_with.add(colleague)
    version = _version(mine, shared)

    client.force_login(stranger)
    assert client.get(_url(version)).status_code == 404
    client.force_login(colleague)
    html = client.get(_url(version)).content.decode()
    assert "Shared study" in html and "Owner's study" not in html and "mine" not in html
    assert "and 1 project you do not see" in html
    client.force_login(owner)
    assert "and 1 project" not in client.get(_url(version)).content.decode()
    client.logout()
    anonymous = client.get(_url(version))
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert client.get(reverse("metrics:model-card", args=[version.pk + 1000])).status_code == 302


def test_a_version_without_numbers_yet_and_the_superuser_sees_versions_of_no_project(client):
    version = ModelVersion.objects.create(name="lerc", number=1, backbone="b",
                                          status=ModelStatus.TRAINING)
    client.force_login(make_user("someone"))
    assert client.get(_url(version)).status_code == 404
    client.force_login(make_user("root", superuser=True))
    html = client.get(_url(version)).content.decode()
    assert "No validation or test numbers yet (training)" in html
    assert "Not decided yet." in html


def test_the_model_versions_admin_links_to_the_page(client):
    owner = make_user("owner")
    version = _version(make_project(TaskKind.LIKERT, owner=owner, slug="cats"))
    client.force_login(owner)
    listing = client.get(reverse("admin:metrics_app_modelversion_changelist")).content.decode()
    assert f'href="{_url(version)}"' in listing
    change = client.get(reverse("admin:metrics_app_modelversion_change", args=[version.pk]))
    assert f'href="{_url(version)}"' in change.content.decode()
