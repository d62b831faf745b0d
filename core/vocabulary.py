"""The product's vocabulary, spelled once: task kinds, recruiting providers, the multiple-choice
roles and the learned-model kinds with the names their models and metrics are stored under.

Plain enums without Django: the models' choices (`annotation.models.TaskKind`, `Provider`,
`metrics_app.models.ModelKind`, built by `core.choices.django_choices`), the stage-settings
schema and the pure code (`annotation.domain`, `metrics_app.domain`, `metrics_app.lerc`) all
derive from these. The stored values are the enum values; changing one is a data migration.
"""
from __future__ import annotations

import enum


class LabelledStrEnum(enum.StrEnum):
    """A str enum whose members also carry a human label: `MEMBER = "value", "Label"`.
    Members compare and hash as their value, so they can stand wherever the string did."""

    label: str

    def __new__(cls, value: str, label: str):
        member = str.__new__(cls, value)
        member._value_ = value
        member.label = label
        return member


class TaskKind(LabelledStrEnum):
    """What a project asks its workers to judge."""

    LIKERT = "likert", "Likert correctness (MOCHA)"
    AB = "ab", "A/B preference with justification (long-form QA)"
    MC = "mc", "STARC multiple choice (OneStopQA)"


# Every task kind's value, in the order above (what a setting or prompt applies to by default).
TASK_KINDS: tuple[str, ...] = tuple(kind.value for kind in TaskKind)


class Provider(LabelledStrEnum):
    """Where a stage's judgments come from."""

    MTURK = "mturk", "Mechanical Turk"
    PROLIFIC = "prolific", "Prolific"
    INHOUSE = "inhouse", "In-house link"
    IMPORT = "import", "Imported"


# The providers that recruit workers (a stage's settings are scoped to them); an imported stage
# recruits nobody.
RECRUITING_PROVIDERS: tuple[str, ...] = tuple(
    provider.value for provider in Provider if provider is not Provider.IMPORT)


class McRole(enum.StrEnum):
    """The four answer roles of a STARC multiple-choice item (A is the correct answer)."""

    A = "A"
    B = "B"
    C = "C"
    D = "D"


# The roles in their canonical order: the order shown when no presented order was stored.
MC_ROLES: tuple[str, ...] = tuple(role.value for role in McRole)
# The two answers of an A/B preference item: the first two roles.
AB_CHOICES: tuple[str, ...] = MC_ROLES[:2]


class ModelKind(LabelledStrEnum):
    """The kinds of learned metric (LERC) a model version can be, each with the name its model
    versions are stored under and the metric name its scores are stored under."""

    REGRESSION = "regression", "LERC regression (1–5 score)"
    PAIRWISE = "pairwise", "Pairwise Bradley–Terry (A/B)"

    @property
    def model_name(self) -> str:
        """`ModelVersion.name` of this kind's versions."""
        return _MODEL_NAME[self]

    @property
    def metric_name(self) -> str:
        """The registered metric (`MetricScore.metric`) that scores with this kind's model."""
        return _METRIC_NAME[self]

    @classmethod
    def for_task_kind(cls, task_kind: str) -> ModelKind:
        """The learned model that scores a project of `task_kind`: pairwise for A/B, else the
        regression."""
        return cls.PAIRWISE if task_kind == TaskKind.AB else cls.REGRESSION


# Stored values (model-version names and score rows in the database): these strings never change.
_MODEL_NAME = {ModelKind.REGRESSION: "lerc", ModelKind.PAIRWISE: "lerc-ab"}
_METRIC_NAME = {ModelKind.REGRESSION: "lerc", ModelKind.PAIRWISE: "lerc_ab"}
# The regression model's calibrated probability that an answer is correct, a second metric.
PROBABILITY_METRIC_NAME = "lerc_prob"
