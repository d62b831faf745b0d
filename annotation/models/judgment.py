from __future__ import annotations

from django.conf import settings
from django.db import models

from .crowd import Assignment, Worker
from .item import Item
from .stage import Stage


class AppendOnlyError(Exception):
    """Raised when code tries to change or delete a stored judgment."""


class AppendOnlyQuerySet(models.QuerySet):
    """Bulk updates and deletes refused: rows are evidence (what a worker answered, what a
    researcher decided) and are only ever added."""

    refusal = "rows are append-only"

    def update(self, **kwargs):
        raise AppendOnlyError(self.refusal)

    def delete(self):
        raise AppendOnlyError(self.refusal)


class AppendOnlyModel(models.Model):
    """Saving a stored row again or deleting one raises AppendOnlyError."""

    refusal = "rows are append-only"

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.get("force_insert"):
            raise AppendOnlyError(self.refusal)
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError(self.refusal)


class JudgmentQuerySet(AppendOnlyQuerySet):
    refusal = "Judgments are append-only; they cannot be changed or deleted."


class Judgment(AppendOnlyModel):
    """One worker's answer to one item in one stage. Append-only.

    value columns by kind:
      likert: score (1–5; imported binary judgments are mapped onto the project's scale)
      ab:     choice ("A"/"B" in item order, whatever order was shown), difficult,
              justification, aspects (list), extra["aspect_preferences"]
      mc:     choice (role letter A–D, whatever order was shown), choices (validity judging:
              every role marked correct; [] means "no correct answer"),
              extra["guess_choice"] (pilot: answer before reading), extra["is_correct"]
    """

    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="judgments")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="judgments")
    stage = models.ForeignKey(Stage, on_delete=models.PROTECT, related_name="judgments")
    assignment = models.ForeignKey(
        Assignment, null=True, blank=True, on_delete=models.PROTECT, related_name="judgments"
    )
    score = models.FloatField(null=True, blank=True)
    choice = models.CharField(max_length=10, blank=True)
    choices = models.JSONField(default=list, blank=True)
    difficult = models.BooleanField(null=True, blank=True)
    justification = models.TextField(blank=True)
    aspects = models.JSONField(default=list, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    presented_order = models.JSONField(default=list, blank=True)
    time_spent_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="Time on the item as the worker's browser reported it.")
    server_time_ms = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Time on the item as the server measured it: from the page showing the item "
                  "(or the previous answer of the assignment) to this answer arriving; shared "
                  "evenly by the items of one submit. Review rules read this one.")
    client_started_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = JudgmentQuerySet.as_manager()
    refusal = JudgmentQuerySet.refusal

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["worker", "item", "stage"], name="one_judgment_per_worker_item_stage"
            )
        ]
        indexes = [models.Index(fields=["stage", "item"], name="judgment_stage_item_idx")]

    def __str__(self) -> str:
        return f"Judgment {self.pk} of {self.item_id} by {self.worker_id}"



class AdjudicationQuerySet(AppendOnlyQuerySet):
    refusal = "Adjudications are append-only: record a new one instead."


class Adjudication(AppendOnlyModel):
    """A researcher's decision on an item the annotators disagree on: the item's label from now
    on (exports and aggregates use it before the majority or the mean). Append-only: a later
    adjudication of the same item replaces the earlier one, which stays as history."""

    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="adjudications")
    score = models.FloatField(null=True, blank=True, help_text="Likert items: 1-5.")
    choice = models.CharField(max_length=10, blank=True, help_text="A/B or STARC role.")
    note = models.TextField(blank=True, help_text="Why, for the next reader.")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = AdjudicationQuerySet.as_manager()
    refusal = AdjudicationQuerySet.refusal

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"Adjudication of {self.item_id}: {self.label}"

    @property
    def label(self) -> str:
        return self.choice or (format(self.score, "g") if self.score is not None else "")


class SpotCheckVerdict(models.TextChoices):
    OK = "ok", "Looks right"
    PROBLEM = "problem", "Problem"


class SpotCheckQuerySet(AppendOnlyQuerySet):
    refusal = "Spot checks are append-only: a judgment is spot-checked once."


class SpotCheck(AppendOnlyModel):
    """A researcher's random spot check of one judgment (the spot-check page,
    /metrics/<slug>/spot-check/): does the answer look right? Recorded once per judgment
    (a second decision on the same judgment is the first one: `spot_check_record`);
    append-only. The workers table counts them per worker (checked / problems)."""

    judgment = models.OneToOneField(Judgment, on_delete=models.PROTECT,
                                    related_name="spot_check")
    verdict = models.CharField(max_length=10, choices=SpotCheckVerdict.choices)
    note = models.TextField(blank=True, help_text="What is wrong (or right), for the next reader.")
    checked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = SpotCheckQuerySet.as_manager()
    refusal = SpotCheckQuerySet.refusal

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"Spot check of judgment {self.judgment_id}: {self.verdict}"
