from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from annotation.domain.aggregation import AGGREGATION_MODELS, resolve_aggregation
from annotation.domain.item_content import normalize_split, redundancy_error
from annotation.domain.judge_refs import judge_ref_error
from annotation.domain.likert_scale import likert_correct_at
from annotation.validators import validate_multiline_text, validate_one_line_text
from core import vocabulary
from core.choices import django_choices

TaskKind = django_choices(vocabulary.TaskKind, module=__name__)


class ExperimentMode(models.TextChoices):
    """STARC experiment modes (only meaningful for multiple-choice projects)."""

    QA = "qa", "QA: paragraph, question, answers; feedback after confirming"
    GUESSING = "guessing", "Guessing: no paragraph; answer and paragraph afterwards"
    VALIDITY = "validity", "Validity judging: one, several or no correct answers"
    PILOT = "pilot", "Pilot: guess, read the paragraph, answer again with it hidden"


DEFAULT_LIKERT_LABELS = [
    "Completely wrong",
    "Mostly wrong",
    "Half right",
    "Mostly right",
    "Perfect answer",
]
DEFAULT_AB_ASPECTS = [
    "factuality",
    "completeness",
    "relevance",
    "ease of understanding",
    "conciseness",
    "specificity",
    "grammar",
    "examples",
    "structure",
]


# Money is never negative (a reward, a cap, a bonus), and a share is from 0 to 1; the API's
# serializers and the admin's forms both take these validators from the fields.
NOT_NEGATIVE_MONEY = MinValueValidator(Decimal("0"), "must be 0 or more")
SHARE = [MinValueValidator(0.0), MaxValueValidator(1.0)]


def default_redundancy() -> dict[str, int]:
    # MOCHA: one judgment per training candidate, more on dev/test to measure agreement.
    return {"train": 1, "dev": 3, "test": 3, "default": 1}


class Project(models.Model):
    """One study: a task kind, its instructions and the settings every stage inherits."""

    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200, validators=[validate_one_line_text])
    kind = models.CharField(max_length=10, choices=TaskKind.choices)
    instructions = models.TextField(blank=True, help_text="Shown above every task page.",
                                    validators=[validate_multiline_text])
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_projects",
    )
    shared_with = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="shared_projects"
    )

    # Settings every kind uses.
    items_per_hit = models.PositiveSmallIntegerField(
        default=10, validators=[MinValueValidator(1)],
        help_text="Items in one HIT / assignment (MOCHA: up to 10 sharing a passage).",
    )
    redundancy = models.JSONField(
        default=default_redundancy,
        blank=True,
        help_text='Judgments wanted per item, by split, e.g. {"train": 1, "dev": 3, "default": 1}.',
    )
    reward_per_hit = models.DecimalField(max_digits=8, decimal_places=2, default=Decimal("0.40"),
                                         validators=[NOT_NEGATIVE_MONEY])
    budget_cap = models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True, validators=[NOT_NEGATIVE_MONEY],
        help_text="Publishing refuses to spend more than this (rewards + fees + bonuses).",
    )
    qualification_threshold = models.FloatField(
        default=0.8, validators=SHARE,
        help_text="Share of qualification items a worker must get right.",
    )
    qualification_tolerance = models.FloatField(
        default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(4.0)],
        help_text="Likert: an answer within this distance of the gold score is right (0 to 4, "
                  "the width of the 1–5 scale).",
    )
    assignment_timeout_minutes = models.PositiveIntegerField(
        default=60, validators=[MinValueValidator(1)],
        help_text="Items of an abandoned assignment are released after this.",
    )
    gold_rate = models.FloatField(
        default=0.0, validators=SHARE,
        help_text="Share of gold/attention items mixed into each assignment.",
    )

    # Kind-specific settings.
    scale_labels = models.JSONField(default=list, blank=True, help_text="Likert labels, 1 first.")
    # The long-form QA protocol has every judge write why they chose: an A/B answer without a
    # sentence of justification is refused unless the researcher lowers this (0: optional).
    justification_min_length = models.PositiveIntegerField(
        default=20, help_text="A/B: the shortest justification accepted, in characters "
                              "(0 makes it optional).")
    aspects = models.JSONField(default=list, blank=True, help_text="A/B aspect checkboxes.")
    aspect_preferences = models.JSONField(
        default=list, blank=True, help_text="A/B per-aspect preferences, e.g. coherence."
    )
    experiment_mode = models.CharField(
        max_length=10, choices=ExperimentMode.choices, default=ExperimentMode.QA, blank=True
    )
    bonus_per_correct = models.DecimalField(
        max_digits=6, decimal_places=2, default=Decimal("0.00"), validators=[NOT_NEGATIVE_MONEY],
        help_text="STARC QA and guessing: optional bonus per correct answer.",
    )

    # Analysis.
    aggregation = models.CharField(
        max_length=12, blank=True, default="",
        choices=[(name, name) for name in AGGREGATION_MODELS],
        help_text="How an item's judgments become its label (aggregated exports, LERC training "
                  "targets): Likert projects mean (default) or median; A/B and multiple-choice "
                  "projects majority (default), dawid_skene, mace or glad. docs/AGGREGATION.md "
                  "compares them.",
    )

    estimates_judge = models.CharField(
        max_length=200, blank=True, default="",
        help_text="The judge of the system estimates (prediction-powered accuracy, the "
                  "dashboard's forest plots): metric:NAME or an LLM or imported judge's "
                  "NAME[@VERSION]; empty: the promoted LERC. docs/JUDGES.md.",
    )

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.title} ({self.get_kind_display()})"

    def save(self, *args, **kwargs):
        if self.kind == TaskKind.LIKERT and not self.scale_labels:
            self.scale_labels = list(DEFAULT_LIKERT_LABELS)
        if self.kind == TaskKind.AB and not self.aspects:
            self.aspects = list(DEFAULT_AB_ASPECTS)
        if not self.aggregation and self.kind in TaskKind.values:
            self.aggregation = resolve_aggregation(self.kind, "")
            update_fields = kwargs.get("update_fields")
            if update_fields is not None and "aggregation" not in update_fields:
                kwargs["update_fields"] = [*update_fields, "aggregation"]
        super().save(*args, **kwargs)

    @property
    def scale_top(self) -> int:
        """The highest Likert score of the project: one label per point (a 7-point project
        collects 6s and 7s); 5 without labels."""
        return len(self.scale_labels or []) or 5

    @property
    def correct_at(self) -> float:
        """The lowest Likert score that counts as correct on this project: the midpoint of its
        scale (`likert_correct_at`: 3 on 1-5, 4 on 1-7)."""
        return likert_correct_at(self.scale_top)

    def clean(self):
        super().clean()
        if self.kind in TaskKind.values:
            try:
                resolve_aggregation(self.kind, self.aggregation)
            except ValueError as error:
                raise ValidationError({"aggregation": str(error)}) from None
        error = judge_ref_error(self.estimates_judge, field="estimates_judge")
        if error:
            raise ValidationError({"estimates_judge": error})
        if (error := redundancy_error(self.redundancy)) is not None:
            raise ValidationError({"redundancy": error[0].upper() + error[1:] + "."})

    @property
    def aggregation_model(self) -> str:
        """The aggregation model in use: the `aggregation` setting, or the kind's default."""
        return resolve_aggregation(self.kind, self.aggregation)

    def redundancy_by_split(self) -> dict[str, int]:
        """`redundancy` read under the one spelling of a split (`normalize_split`: a
        researcher's {"validation": 3} is dev's), its "default" entry apart: what every door
        that sends items out by split reads (HIT plans, progress, the pages' picking)."""
        return {normalize_split(key): int(value) for key, value in
                (self.redundancy or {}).items() if key != "default"}

    def redundancy_for(self, split: str) -> int:
        """Judgments wanted per item of `split` (`redundancy_by_split`), else the "default"
        entry, else 1."""
        return self.redundancy_by_split().get(normalize_split(split or ""),
                                              self.redundancy_default())

    def redundancy_default(self) -> int:
        """Judgments wanted per item of a split `redundancy` does not name."""
        return int((self.redundancy or {}).get("default", 1))
