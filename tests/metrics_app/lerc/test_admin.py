"""ModelVersion admin: progress bar, cancel, promote and rollback actions."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import TaskKind
from metrics_app.admin import PROMOTE_FORCE_FIELD
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import model_version_create
from testing.factories import make_project, make_user

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:metrics_app_modelversion_changelist"


def _trained(project, status=ModelStatus.EVALUATED):
    version = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=version.pk).update(
        status=status, artifact_uri="/nowhere", metrics={"validation": {"pearson": 0.5, "n": 9}},
        promoted_at=timezone.now() if status == ModelStatus.PROMOTED else None)
    version.refresh_from_db()
    return version


def test_changelist_shows_progress_bar(client):
    admin_user = make_user(superuser=True)
    project = make_project(kind=TaskKind.LIKERT, owner=admin_user)
    version = model_version_create(projects=[project])
    ModelVersion.objects.filter(pk=version.pk).update(status=ModelStatus.TRAINING, progress={
        "phase": "train", "epoch": 2, "epochs": 3, "step": 5, "steps_per_epoch": 10,
        "loss": 0.4321})
    client.force_login(admin_user)
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert '<progress max="30" value="15"></progress>' in page
    assert "epoch 2/3" in page and "loss 0.432" in page
    detail = client.get(reverse("admin:metrics_app_modelversion_change", args=[version.pk]))
    assert detail.status_code == 200
    assert "created" in detail.content.decode()  # the event log inline


def test_promote_rollback_and_cancel_actions(client):
    admin_user = make_user(superuser=True)
    project = make_project(kind=TaskKind.LIKERT, owner=admin_user)
    v1, v2 = _trained(project, ModelStatus.PROMOTED), _trained(project)
    queued = model_version_create(projects=[project])
    client.force_login(admin_user)
    url = reverse(CHANGELIST)

    # v2 was never compared with v1: promoted from the "Promote anyway" page
    # (test_hand_promotion.py).
    client.post(url, {"action": "promote_version", "_selected_action": [v2.pk],
                      PROMOTE_FORCE_FIELD: "yes"})
    v1.refresh_from_db()
    v2.refresh_from_db()
    assert (v1.status, v2.status) == (ModelStatus.EVALUATED, ModelStatus.PROMOTED)
    assert v2.events.filter(event="promoted", user=admin_user).exists()

    client.post(url, {"action": "rollback_promoted", "_selected_action": [v2.pk]})
    v1.refresh_from_db()
    assert v1.status == ModelStatus.PROMOTED

    client.post(url, {"action": "cancel_training", "_selected_action": [queued.pk]})
    queued.refresh_from_db()
    assert queued.status == ModelStatus.CANCELLED


def test_researcher_cannot_promote_and_sees_only_own_projects(client):
    researcher = make_user()
    mine = make_project(kind=TaskKind.LIKERT, owner=researcher)
    other = make_project(kind=TaskKind.LIKERT)
    own_version, other_version = _trained(mine), _trained(other)
    client.force_login(researcher)
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert f"lerc v{own_version.number} " in page
    assert f"lerc v{other_version.number} " not in page
    client.post(reverse(CHANGELIST), {"action": "promote_version",
                                      "_selected_action": [own_version.pk]})
    own_version.refresh_from_db()
    assert own_version.status == ModelStatus.EVALUATED


def test_rollback_in_the_admin_rolls_back_only_the_selected_versions_project_set(client):
    admin_user = make_user(superuser=True)
    first, second = (make_project(kind=TaskKind.LIKERT, owner=admin_user) for _ in range(2))
    a1, a2 = _trained(first, ModelStatus.PROMOTED), _trained(first)
    b1 = _trained(second, ModelStatus.PROMOTED)
    client.force_login(admin_user)
    url = reverse(CHANGELIST)
    client.post(url, {"action": "promote_version", "_selected_action": [a2.pk],
                      PROMOTE_FORCE_FIELD: "yes"})
    client.post(url, {"action": "rollback_promoted", "_selected_action": [a2.pk, b1.pk]})
    for version in (a1, a2, b1):
        version.refresh_from_db()
    assert (a1.status, a2.status, b1.status) == (
        ModelStatus.EVALUATED, ModelStatus.PROMOTED, ModelStatus.PROMOTED), "two: refused"
    client.post(url, {"action": "rollback_promoted", "_selected_action": [a2.pk]})
    for version in (a1, a2, b1):
        version.refresh_from_db()
    assert a1.status == ModelStatus.PROMOTED and a2.status != ModelStatus.PROMOTED
    assert b1.status == ModelStatus.PROMOTED  # the other project's model is untouched


def test_the_card_on_disk_follows_promotion_and_the_admin_page_reads_as_a_card(
        client, tmp_path, django_capture_on_commit_callbacks):
    """The card was written while training and still said "status: training" after promotion;
    the admin page was raw JSON."""
    from metrics_app.services.lerc import model_version_promote

    admin_user = make_user(superuser=True)
    project = make_project(kind=TaskKind.LIKERT, owner=admin_user)
    version = _trained(project)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "MODEL_CARD.md").write_text("# lerc\n\n- status: training\n")
    ModelVersion.objects.filter(pk=version.pk).update(artifact_uri=str(folder), metrics={
        "validation": {"pearson": 0.5, "n": 9},
        "promotion_decision": {"metric": "pearson", "candidate": 0.5, "promoted": True,
                               "floor": {"best": "f1", "best_value": 0.4, "passed": True}},
        "baselines": {"validation": {"f1": {"accuracy": 0.7, "n": 9}}}})
    version.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        model_version_promote(model_version=version, user=admin_user)
    card = (folder / "MODEL_CARD.md").read_text()
    assert "status: **promoted**" in card and "status: training" not in card
    assert "floor: best f1 · best_value 0.400 · passed True" in card
    client.force_login(admin_user)
    page = client.get(reverse("admin:metrics_app_modelversion_change",
                              args=[version.pk])).content.decode()
    assert '<div class="model-card">' in page and "<table>" in page
    assert "<td>f1</td>" in page and "<strong>promoted</strong>" in page
    # The raw JSON is still there, indented and folded away.
    assert "Raw data (JSON)" in page and '&quot;promotion_decision&quot;: {' in page
