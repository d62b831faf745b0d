from __future__ import annotations

from django.db import models

from .project import Project


class Item(models.Model):
    """One unit of judgment. `content` holds the kind-specific fields (validated by
    `annotation.domain.item_content.validate_item_content`); the columns hold what researchers
    filter and group by.

    content per kind:
      likert: {passage, question, references: [str], candidate}
      ab:     {question, evidence: [str], answer_a: {text, kind, upvotes, system?},
               answer_b: {text, kind, upvotes, system?}, setting: "HH"|"HM"}
      mc:     {paragraph, question, answers: [A, B, C, D] (role order: A correct,
               B misreading of the critical span, C distractor span, D unsupported),
               critical_span: [start, end] | null, distractor_span: [start, end] | null}
    gold per kind (never sent to annotator pages before they answer):
      likert: {"score": float}; ab: {"choice": "A"|"B"}; mc: {"choice": "A"} (role letter)
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=255)
    dataset = models.CharField(max_length=100, blank=True, db_index=True)
    source = models.CharField(
        max_length=100, blank=True, db_index=True,
        help_text="Generation source of the candidate (e.g. backtranslation, gpt2, mhpg, a QA system).",
    )
    split = models.CharField(max_length=20, blank=True, db_index=True)
    domain = models.CharField(max_length=100, blank=True, db_index=True)
    text_level = models.CharField(max_length=20, blank=True, db_index=True)
    group_key = models.CharField(
        max_length=64, blank=True, db_index=True,
        help_text="Items with the same key (e.g. a passage hash) share a HIT.",
    )
    design_unit = models.CharField(
        max_length=100, blank=True, db_index=True,
        help_text="The text a participant reads (a OneStopQA paragraph at any level, a RACE "
                  "article): in a STARC Latin square a participant never gets two items of one "
                  "unit. Derived from the external id or metadata when not given "
                  "(annotation.domain.design.design_unit_for); empty: the item is its own unit.",
    )
    content = models.JSONField()
    gold = models.JSONField(null=True, blank=True)
    is_gold_check = models.BooleanField(
        default=False, help_text="Gold/attention item mixed into assignments to check workers."
    )
    is_practice = models.BooleanField(default=False)
    excluded = models.BooleanField(
        default=False, help_text="Not sent out (e.g. exact-match candidate, improper question)."
    )
    exclusion_reason = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="item_external_id_unique_per_project"
            )
        ]
        indexes = [models.Index(fields=["project", "split"], name="item_project_split_idx")]

    def __str__(self) -> str:
        return f"{self.project.slug}:{self.external_id}"
