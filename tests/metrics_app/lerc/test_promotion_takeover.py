"""A version trained on several projects serves each of them once promoted (a project is served
by the most recently promoted version trained on it), so it must first be at least as good as
the version serving each project it takes over, on that project's validation examples. Before,
it was compared only with the promoted version of exactly its own project set (or with nothing),
and project A's reports, estimates and routing switched to a version never measured against
A's own one on A's judgments. The same check at every door: the decision, the promotion by hand,
the rollback."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Item, TaskKind
from metrics_app.lerc.data import LercExample
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.lerc import (
    LercError,
    PromotionNeedsForce,
    model_version_create,
    model_version_decide,
    model_version_promote,
    model_version_rollback,
    promoted_model_version,
)
from metrics_app.services.lerc.model_card import model_card
from testing.factories import make_item, make_project, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _version(projects, pearson, by_project=None, *, status=ModelStatus.EVALUATED,
             promoted_hours_ago=None, decision=None):
    """A trained version (stub weights): `pearson` on all its validation examples,
    `by_project` (slug: pearson) on one project's part of them."""
    version = model_version_create(projects=projects)
    metrics = {"validation": {"pearson": pearson, "n": 6}, "by_project": by_project or {}}
    if decision is not None:
        metrics["promotion_decision"] = decision
    ModelVersion.objects.filter(pk=version.pk).update(
        status=status, artifact_uri=f"stub-{version.number}", metrics=metrics,
        promoted_at=(None if promoted_hours_ago is None
                     else timezone.now() - timedelta(hours=promoted_hours_ago)))
    return ModelVersion.objects.get(pk=version.pk)


@pytest.fixture
def two_projects(lerc_settings, monkeypatch):
    """Projects a and b, three validation examples each; the stub scorer of a version is the
    version, and it measures on one project's examples its `by_project` number."""
    from metrics_app.services.lerc import promotion

    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = []
    project_a = make_project(kind=TaskKind.LIKERT, slug="a")
    project_b = make_project(kind=TaskKind.LIKERT, slug="b")
    examples = [LercExample(question="q", references=("r",), candidate="c", score=float(i),
                            id=str(make_item(project).id))
                for project in (project_a, project_b) for i in range(3)]

    def measured(scorer, kind, examples, predictions=None):
        slugs = set(Item.objects.filter(id__in=[int(e.id) for e in examples])
                    .values_list("project__slug", flat=True))
        if len(slugs) == 1:
            return {"pearson": scorer.metrics["by_project"][slugs.pop()]}
        return {"pearson": scorer.metrics["validation"]["pearson"]}

    monkeypatch.setattr(promotion, "model_version_scorer", lambda version: version)
    monkeypatch.setattr(promotion, "split_metrics", measured)
    return project_a, project_b, examples


def test_a_version_of_two_projects_takes_a_project_over_only_if_at_least_as_good_there(
        two_projects):
    project_a, project_b, examples = two_projects
    a1 = _version([project_a], 0.8, {"a": 0.8}, status=ModelStatus.PROMOTED,
                  promoted_hours_ago=2)
    b1 = _version([project_b], 0.5, {"b": 0.5}, status=ModelStatus.PROMOTED,
                  promoted_hours_ago=1)

    # No promoted version of {a, b} yet, better on b, worse than a1 on a's examples: rejected.
    worse = model_version_decide(model_version=_version(
        [project_a, project_b], 0.9, {"a": 0.6, "b": 0.7}), val_examples=examples)
    assert worse.status == ModelStatus.REJECTED
    decision = worse.metrics["promotion_decision"]
    assert decision["promoted"] is False
    assert [(row["project"], row["serving"], row["examples"], row["candidate"],
             row["serving_value"], row["at_least_as_good"]) for row in decision["takeovers"]] == [
        ("a", f"v{a1.number}", 3, 0.6, 0.8, False), ("b", f"v{b1.number}", 3, 0.7, 0.5, True)]
    assert worse.events.get(event="rejected").detail == (
        "automatic: not shown at least as good as every version it would take a project from: "
        f"on project a, pearson 0.6000 vs v{a1.number}'s 0.8000 (serving it now) on the same 3 "
        "validation examples of a")
    assert promoted_model_version(project=project_a).pk == a1.pk
    assert promoted_model_version(project=project_b).pk == b1.pk
    # The model card lists each comparison.
    assert (f"- takeovers: at_least_as_good False · candidate 0.600 · examples 3 · project a · "
            f"project_id {project_a.pk} · serving v{a1.number} · serving_value 0.800; "
            "at_least_as_good True") in model_card(worse)

    # At least as good on each project it takes over: promoted, and serves both.
    better = model_version_decide(model_version=_version(
        [project_a, project_b], 0.9, {"a": 0.8, "b": 0.6}), val_examples=examples)
    assert better.status == ModelStatus.PROMOTED
    assert [row["at_least_as_good"] for row in
            better.metrics["promotion_decision"]["takeovers"]] == [True, True]
    assert promoted_model_version(project=project_a).pk == better.pk
    assert promoted_model_version(project=project_b).pk == better.pk

    # a's own next version is compared with the {a, b} version now serving a, on a's part.
    a2 = model_version_decide(model_version=_version([project_a], 0.95, {"a": 0.7}),
                              val_examples=examples[:3])
    assert a2.status == ModelStatus.REJECTED
    assert a2.metrics["promotion_decision"]["incumbent"] == f"v{a1.number}"
    assert [(row["serving"], row["candidate"], row["serving_value"])
            for row in a2.metrics["promotion_decision"]["takeovers"]] == [
        (f"v{better.number}", 0.7, 0.8)]
    assert promoted_model_version(project=project_a).pk == better.pk


def test_a_project_with_no_validation_example_is_not_shown_at_least_as_good(two_projects):
    project_a, project_b, examples = two_projects
    _version([project_a], 0.8, {"a": 0.8}, status=ModelStatus.PROMOTED, promoted_hours_ago=1)
    version = model_version_decide(model_version=_version(
        [project_a, project_b], 0.9, {"a": 0.9, "b": 0.9}), val_examples=examples[3:])
    assert version.status == ModelStatus.REJECTED
    assert "project a (served by v" in version.events.get(event="rejected").detail
    assert "has none of its validation examples" in version.events.get(event="rejected").detail


def test_by_hand_a_version_never_compared_with_a_project_s_version_needs_force(two_projects):
    project_a, project_b, _examples = two_projects
    researcher = make_user(superuser=True)
    # Decided (and promoted) when nothing served a or b; rolled back since; a1 serves a now.
    both = _version([project_a, project_b], 0.9, {"a": 0.6, "b": 0.7}, decision={
        "metric": "pearson", "candidate": 0.9, "validation_examples": 6, "promoted": True})
    a1 = _version([project_a], 0.8, {"a": 0.8}, status=ModelStatus.PROMOTED,
                  promoted_hours_ago=1)
    with pytest.raises(PromotionNeedsForce, match=(
            f"v{both.number} would serve project a in place of v{a1.number}, but its promotion "
            r"decision \(pearson 0.9000\) never compared it with that version")):
        model_version_promote(model_version=both, user=researcher)
    assert promoted_model_version(project=project_a).pk == a1.pk
    forced = model_version_promote(model_version=both, user=researcher, force=True)
    assert forced.status == ModelStatus.PROMOTED
    assert "forced over the promotion rule" in both.events.get(event="promoted").detail


def test_by_hand_a_version_the_rule_rejected_on_one_project_shows_that_comparison(two_projects):
    project_a, project_b, examples = two_projects
    researcher = make_user(superuser=True)
    a1 = _version([project_a], 0.8, {"a": 0.8}, status=ModelStatus.PROMOTED,
                  promoted_hours_ago=1)
    worse = model_version_decide(model_version=_version(
        [project_a, project_b], 0.9, {"a": 0.6, "b": 0.7}), val_examples=examples)
    with pytest.raises(PromotionNeedsForce, match=(
            f"the promotion rule rejected v{worse.number}: pearson 0.9000; on project a, pearson "
            rf"0.6000 vs v{a1.number}'s 0.8000 \(serving it now\)")):
        model_version_promote(model_version=worse, user=researcher)


def test_a_rollback_never_hands_a_project_to_a_version_not_compared_with_its_server(
        two_projects):
    """e1 then c served {a, b}; then a1 (compared with c on a) took a over. Rolling {a, b}
    back to e1 would make e1 the most recently promoted version trained on a: it would serve a
    in place of a1, never compared with it. Refused; the set is unchanged."""
    project_a, project_b, _examples = two_projects
    researcher = make_user(superuser=True)
    e1 = _version([project_a, project_b], 0.7, status=ModelStatus.EVALUATED,
                  promoted_hours_ago=3)
    c = _version([project_a, project_b], 0.8, status=ModelStatus.PROMOTED,
                 promoted_hours_ago=2)
    a1 = _version([project_a], 0.9, status=ModelStatus.PROMOTED, promoted_hours_ago=1)
    with pytest.raises(LercError, match=(
            f"rolling back to lerc v{e1.number} would make it serve project a in place of "
            f"v{a1.number}, never compared with it there")):
        model_version_rollback(model_version=c, user=researcher)
    e1.refresh_from_db()
    c.refresh_from_db()
    assert (e1.status, c.status) == (ModelStatus.EVALUATED, ModelStatus.PROMOTED)
    assert promoted_model_version(project=project_a).pk == a1.pk
    assert promoted_model_version(project=project_b).pk == c.pk
    # Once a1 no longer serves a, the rollback is the plain undo again.
    ModelVersion.objects.filter(pk=a1.pk).update(status=ModelStatus.EVALUATED)
    assert model_version_rollback(model_version=c, user=researcher).pk == e1.pk
    assert promoted_model_version(project=project_a).pk == e1.pk


def test_a_project_taken_over_while_the_decision_measures_is_compared_with_its_new_server(
        two_projects, monkeypatch):
    """While the {a, b} version's decision measures (outside the lock), a1 is promoted for a.
    Under the lock the decision sees that a's server changed and measures again against a1:
    worse than a1 on a, it is rejected, and a1 keeps serving a."""
    from metrics_app.services.lerc import promotion

    project_a, project_b, examples = two_projects
    a1 = _version([project_a], 0.8, {"a": 0.8})
    verdict = promotion._promotion_verdict
    raced = []

    def racing(*args, **kwargs):
        if not raced:
            raced.append(a1)  # the inner decision passes straight through
            raced[0] = model_version_decide(model_version=a1, val_examples=examples[:3])
        return verdict(*args, **kwargs)

    monkeypatch.setattr(promotion, "_promotion_verdict", racing)
    both = model_version_decide(model_version=_version(
        [project_a, project_b], 0.9, {"a": 0.6, "b": 0.9}), val_examples=examples)
    assert raced[0].status == ModelStatus.PROMOTED
    assert both.status == ModelStatus.REJECTED
    assert [row["serving"] for row in both.metrics["promotion_decision"]["takeovers"]] == [
        f"v{a1.number}"]
    assert promoted_model_version(project=project_a).pk == a1.pk


def test_a_rollback_never_hands_back_a_project_won_over_between_the_two_versions(two_projects):
    """e1 served {a, b}; a1 then won a over (compared with e1 there); c then served {a, b}
    (compared with a1 on a). Rolling c back to e1 would make e1 serve a again in place of a1,
    which beat it there: refused. An {a} version promoted before e1, which e1 displaced when
    it was first promoted, does not stop the plain undo."""
    project_a, project_b, _examples = two_projects
    researcher = make_user(superuser=True)
    old_a = _version([project_a], 0.6, status=ModelStatus.PROMOTED, promoted_hours_ago=4)
    e1 = _version([project_a, project_b], 0.7, status=ModelStatus.EVALUATED,
                  promoted_hours_ago=3)
    a1 = _version([project_a], 0.9, status=ModelStatus.PROMOTED, promoted_hours_ago=2)
    c = _version([project_a, project_b], 0.8, status=ModelStatus.PROMOTED,
                 promoted_hours_ago=1)
    assert promoted_model_version(project=project_a).pk == c.pk
    with pytest.raises(LercError, match=(
            f"rolling back to lerc v{e1.number} would make it serve project a in place of "
            f"v{a1.number}, never compared with it there")):
        model_version_rollback(model_version=c, user=researcher)
    assert promoted_model_version(project=project_a).pk == c.pk
    ModelVersion.objects.filter(pk=a1.pk).update(status=ModelStatus.EVALUATED)
    assert model_version_rollback(model_version=c, user=researcher).pk == e1.pk
    assert promoted_model_version(project=project_a).pk == e1.pk
    assert ModelVersion.objects.get(pk=old_a.pk).status == ModelStatus.PROMOTED
