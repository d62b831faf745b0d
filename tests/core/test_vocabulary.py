"""The vocabulary (core/vocabulary.py) is the one spelling: the models' choices, the stage-settings
schema, the learned-metric names and the roles all derive from it, and the stored values are the
ones the database already holds."""
from __future__ import annotations

import pytest

from annotation.domain import stage_settings
from annotation.domain.item_content import MC_ROLES as ITEM_CONTENT_MC_ROLES
from annotation.models import Project, Provider, Stage, TaskKind
from core import vocabulary
from metrics_app.models import ModelKind, ModelVersion
from metrics_app.registry import get_metric, metric_names
from metrics_app.services.lerc import NAME_BY_KIND


@pytest.mark.parametrize(("django_choices", "core_enum"), [
    (TaskKind, vocabulary.TaskKind),
    (Provider, vocabulary.Provider),
    (ModelKind, vocabulary.ModelKind),
])
def test_model_choices_are_the_vocabulary(django_choices, core_enum):
    assert django_choices.choices == [(member.value, member.label) for member in core_enum]
    assert [member.name for member in django_choices] == [member.name for member in core_enum]
    for member in core_enum:
        assert django_choices[member.name] == member
        assert django_choices(member.value).label == member.label


def test_model_fields_take_their_choices_from_the_vocabulary():
    assert Project._meta.get_field("kind").choices == TaskKind.choices
    assert Stage._meta.get_field("provider").choices == Provider.choices
    assert ModelVersion._meta.get_field("kind").choices == ModelKind.choices


def test_stored_values_are_unchanged():
    # Rows in existing databases hold these strings; changing one is a data migration.
    assert [kind.value for kind in vocabulary.TaskKind] == ["likert", "ab", "mc"]
    assert [p.value for p in vocabulary.Provider] == ["mturk", "prolific", "inhouse", "import"]
    assert vocabulary.MC_ROLES == ("A", "B", "C", "D")
    assert vocabulary.AB_CHOICES == ("A", "B")
    names = {kind.value: (kind.model_name, kind.metric_name) for kind in vocabulary.ModelKind}
    assert names == {"regression": ("lerc", "lerc"), "pairwise": ("lerc-ab", "lerc_ab")}
    assert ModelVersion._meta.get_field("name").default == "lerc"


def test_stage_settings_scope_to_the_vocabulary():
    assert stage_settings.KINDS == vocabulary.TASK_KINDS
    assert stage_settings.PROVIDERS == vocabulary.RECRUITING_PROVIDERS
    assert vocabulary.Provider.IMPORT not in stage_settings.PROVIDERS
    for spec in stage_settings.SETTINGS:
        assert set(spec.kinds) <= set(vocabulary.TASK_KINDS), spec.key
        assert set(spec.providers) <= set(vocabulary.RECRUITING_PROVIDERS), spec.key


def test_item_content_roles_are_the_core_roles():
    assert ITEM_CONTENT_MC_ROLES is vocabulary.MC_ROLES


@pytest.mark.parametrize(("task_kind", "model_kind"), [
    ("likert", vocabulary.ModelKind.REGRESSION),
    ("mc", vocabulary.ModelKind.REGRESSION),
    ("ab", vocabulary.ModelKind.PAIRWISE),
])
def test_a_task_kind_is_scored_by_one_learned_model(task_kind, model_kind):
    assert vocabulary.ModelKind.for_task_kind(task_kind) is model_kind


def test_training_names_versions_by_the_vocabulary():
    assert NAME_BY_KIND == {kind: vocabulary.ModelKind(kind).model_name for kind in ModelKind}


def test_registered_learned_metrics_use_the_vocabulary_names(monkeypatch):
    # The factories' LercMetric is replaced by a recorder: building a real one looks up the
    # promoted model version, which a fresh database does not have.
    from metrics_app.metrics import learned

    built = {}
    monkeypatch.setattr(learned, "LercMetric", lambda **kwargs: kwargs)
    for name in (vocabulary.PROBABILITY_METRIC_NAME,
                 *(kind.metric_name for kind in vocabulary.ModelKind)):
        assert name in metric_names()
        # An option builds a fresh instance through the factory (the plain lookup returns the
        # instance an earlier test may have cached); model=None is the factory's default.
        built[name] = get_metric(name, model=None)
    for kind in vocabulary.ModelKind:
        assert (built[kind.metric_name]["name"], built[kind.metric_name]["model_name"]) == (
            kind.metric_name, kind.model_name)
    assert built[vocabulary.PROBABILITY_METRIC_NAME]["model_name"] == (
        vocabulary.ModelKind.REGRESSION.model_name)


def test_members_stand_in_for_their_strings():
    # Code compares stored strings with members and keys dicts by them.
    assert vocabulary.TaskKind.AB == "ab" and {"ab": 1}[vocabulary.TaskKind.AB] == 1
    assert f"{vocabulary.Provider.MTURK}" == "mturk"
    assert vocabulary.TaskKind("mc") is vocabulary.TaskKind.MC
