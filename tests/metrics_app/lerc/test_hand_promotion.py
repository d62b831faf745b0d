"""Promotion by hand follows the promotion rule unless the researcher forces it, seeing the
numbers: the admin's "Promote" served a version the rule had rejected (or never compared with
the version serving) with one click and nothing said."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import TaskKind
from metrics_app.admin import PROMOTE_FORCE_FIELD
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import (
    LercError,
    PromotionNeedsForce,
    model_version_create,
    model_version_promote,
    model_version_rollback,
    promoted_model_version,
)
from testing.factories import make_project, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

CHANGELIST = "admin:metrics_app_modelversion_changelist"


def _trained(project, pearson_value, *, decision=None, status=ModelStatus.EVALUATED):
    version = model_version_create(projects=[project])
    metrics = {"validation": {"pearson": pearson_value, "n": 40}}
    if decision is not None:
        metrics["promotion_decision"] = decision
    ModelVersion.objects.filter(pk=version.pk).update(
        status=status, artifact_uri=f"stub-{version.number}", metrics=metrics,
        promoted_at=timezone.now() if status == ModelStatus.PROMOTED else None)
    return ModelVersion.objects.get(pk=version.pk)


def _rejected_against(project, incumbent, candidate, incumbent_value):
    return _trained(project, candidate, status=ModelStatus.REJECTED, decision={
        "metric": "pearson", "candidate": candidate, "incumbent": f"v{incumbent.number}",
        "incumbent_value": incumbent_value, "validation_examples": 40, "promoted": False,
        "floor": {"passed": True, "best": "f1", "best_value": 0.41}})


def test_a_version_the_rule_rejected_is_promoted_by_hand_only_with_force_and_the_numbers():
    researcher = make_user(superuser=True)
    project = make_project(kind=TaskKind.LIKERT, owner=researcher)
    v1 = _trained(project, 0.7, status=ModelStatus.PROMOTED,
                  decision={"metric": "pearson", "candidate": 0.7, "promoted": True})
    v2 = _rejected_against(project, v1, 0.52, 0.71)

    with pytest.raises(PromotionNeedsForce) as refused:
        model_version_promote(model_version=v2, user=researcher, reason="looks fine")
    assert (f"the promotion rule rejected v{v2.number}: pearson 0.5200 vs v{v1.number}'s "
            "0.7100 on the same 40 validation examples; best baseline f1 0.4100 (beaten)"
            ) in str(refused.value)
    assert promoted_model_version(projects=[project]).pk == v1.pk
    assert not v2.events.filter(event="promoted").exists()

    forced = model_version_promote(model_version=v2, user=researcher, reason="looks fine",
                                   force=True)
    assert forced.status == ModelStatus.PROMOTED
    detail = v2.events.get(event="promoted", user=researcher).detail
    assert detail.startswith("looks fine; forced over the promotion rule: the promotion rule "
                             f"rejected v{v2.number}: pearson 0.5200 vs v{v1.number}'s 0.7100")


def test_a_version_never_compared_with_the_one_serving_needs_force():
    """Decided against v1, but v3 serves now; or never decided at all."""
    researcher = make_user(superuser=True)
    project = make_project(kind=TaskKind.LIKERT)
    v1 = _trained(project, 0.6, decision={"metric": "pearson", "candidate": 0.6,
                                          "promoted": True})
    v2 = _trained(project, 0.65, decision={
        "metric": "pearson", "candidate": 0.65, "incumbent": f"v{v1.number}",
        "incumbent_value": 0.6, "validation_examples": 40, "promoted": True})
    v3 = _trained(project, 0.8, status=ModelStatus.PROMOTED)
    undecided = _trained(project, 0.9)
    with pytest.raises(PromotionNeedsForce, match=(
            f"v{v2.number}'s promotion decision compared it with v{v1.number} .*, but "
            f"v{v3.number} serves now and was never compared with it")):
        model_version_promote(model_version=v2, user=researcher)
    with pytest.raises(PromotionNeedsForce, match=(
            f"v{undecided.number} was never compared by the promotion rule \\(validation "
            f"pearson 0.9000 on its own examples\\); v{v3.number} serves now \\(validation "
            "pearson 0.8000 on its own examples, not comparable\\)")):
        model_version_promote(model_version=undecided, user=researcher)
    assert promoted_model_version(projects=[project]).pk == v3.pk
    # A version with no model is refused for that, not sent to the "Promote anyway" page.
    queued = model_version_create(projects=[project])
    with pytest.raises(LercError, match="is queued; only trained versions") as refused:
        model_version_promote(model_version=queued, user=researcher)
    assert not isinstance(refused.value, PromotionNeedsForce)


def test_a_version_the_rule_promoted_over_the_one_serving_needs_no_force_after_a_rollback():
    researcher = make_user(superuser=True)
    project = make_project(kind=TaskKind.LIKERT)
    v1 = _trained(project, 0.6, status=ModelStatus.PROMOTED,
                  decision={"metric": "pearson", "candidate": 0.6, "promoted": True})
    v2 = _trained(project, 0.62, decision={
        "metric": "pearson", "candidate": 0.62, "incumbent": f"v{v1.number}",
        "incumbent_value": 0.6, "validation_examples": 40, "promoted": True})
    model_version_promote(model_version=v2, user=researcher)  # the rule's own verdict
    # The undo needs no force either: the version served before.
    assert model_version_rollback(model_version=v2, user=researcher).pk == v1.pk
    assert model_version_promote(model_version=v2, user=researcher).status == \
        ModelStatus.PROMOTED
    assert "forced" not in v2.events.filter(event="promoted").last().detail


def test_the_admin_shows_the_numbers_and_promotes_only_when_told_to_promote_anyway(client):
    admin_user = make_user(superuser=True)
    project = make_project(kind=TaskKind.LIKERT, owner=admin_user)
    v1 = _trained(project, 0.7, status=ModelStatus.PROMOTED,
                  decision={"metric": "pearson", "candidate": 0.7, "promoted": True})
    v2 = _rejected_against(project, v1, 0.52, 0.71)
    client.force_login(admin_user)
    url = reverse(CHANGELIST)

    page = client.post(url, {"action": "promote_version", "_selected_action": [v2.pk]})
    assert page.status_code == 200
    text = page.content.decode()
    assert (f"pearson 0.5200 vs v{v1.number}&#x27;s 0.7100 on the same 40 validation examples"
            in text)
    assert 'value="Promote anyway"' in text and f'name="{PROMOTE_FORCE_FIELD}" value="yes"' in text
    assert promoted_model_version(projects=[project]).pk == v1.pk

    client.post(url, {"action": "promote_version", "_selected_action": [v2.pk],
                      PROMOTE_FORCE_FIELD: "yes"})
    assert promoted_model_version(projects=[project]).pk == v2.pk
    event = v2.events.get(event="promoted")
    assert event.user == admin_user and "forced over the promotion rule" in event.detail
    # Whoever reads the version's card later sees that it was forced, and the numbers.
    card = client.get(reverse("metrics:model-card", args=[v2.pk])).content.decode()
    assert "forced over the promotion rule: the promotion rule rejected" in card
    assert f"pearson 0.5200 vs v{v1.number}&#x27;s 0.7100" in card
