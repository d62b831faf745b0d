"""Judges beside the metric registry: an LLM over an OpenAI-compatible chat endpoint, or
verdicts imported from a file. Each judge has versions; a version's `config` (prompt, model,
parse rule, ...) never changes, so every edit of the prompt is a new version and every verdict
names the version that gave it. Built-in metrics and LERC are judges too, read from
`MetricScore` (`metric:NAME`, see metrics_app/services/judges/sources.py)."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Item, Project
from annotation.validators import validate_multiline_text

from .scoring_jobs import ScoringJobBase


class JudgeKind(models.TextChoices):
    LLM = "llm", "LLM over a chat endpoint"
    IMPORTED = "imported", "Verdicts imported from a file"


class Judge(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=JudgeKind.choices)
    description = models.TextField(blank=True, validators=[validate_multiline_text])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class JudgeVersion(models.Model):
    """One immutable configuration of a judge (the service refuses edits: a changed config
    makes a new version; the same config finds the version it already has)."""

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="versions")
    version = models.CharField(max_length=50)
    config = models.JSONField(default=dict, blank=True,
                              help_text="LLM: endpoint, model, prompt, parse rule ... "
                                        "(never the API key: only the name of its variable).")
    config_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["judge_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["judge", "version"], name="judge_version_unique"),
            models.UniqueConstraint(fields=["judge", "config_hash"],
                                    name="judge_version_config_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.judge.name}@{self.version}"

    @property
    def label(self) -> str:
        return f"{self.judge.name}@{self.version}"


class JudgeVerdict(models.Model):
    """A judge version's verdict on one item (for A/B, one row per order shown: "AB" or "BA";
    the verdict names the item's side either way). Rows are the cache: a rerun of the same
    version on the same item content asks nothing."""

    judge_version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE,
                                      related_name="verdicts")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="judge_verdicts")
    order = models.CharField(max_length=2, blank=True, help_text="A/B: order shown (AB or BA).")
    content_hash = models.CharField(max_length=64, help_text="sha256 of what the judge saw.")
    verdict = models.CharField(max_length=50, blank=True,
                               help_text="correct / incorrect, A / B, a choice; blank when "
                                         "unparseable.")
    score = models.FloatField(null=True, blank=True)
    probability = models.FloatField(null=True, blank=True,
                                    help_text="P(correct) (Likert) or P(A better) (A/B).")
    parsed = models.BooleanField(default=True)
    reasoning = models.TextField(blank=True)
    raw = models.TextField(blank=True, help_text="The endpoint's answer (LLM judges).")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(null=True, blank=True, help_text="USD, from the price table.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["judge_version", "item", "order", "content_hash"],
                                    name="judge_verdict_unique"),
        ]
        indexes = [models.Index(fields=["judge_version", "item"], name="judge_verdict_item_idx")]

    def __str__(self) -> str:
        return f"{self.judge_version_id} item {self.item_id}{self.order}: {self.verdict}"


class JudgeJob(ScoringJobBase):
    """An LLM judge version run over a project's items in a Celery task, under the job lease
    (core/leases.py; the lease columns come from ScoringJobBase). `metrics` holds the judge's
    label."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="judge_jobs")
    judge_version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE,
                                      related_name="jobs")
    budget = models.FloatField(null=True, blank=True,
                               help_text="USD cap: no request is sent that could exceed it.")
    spent = models.FloatField(default=0.0, help_text="USD spent by this job's requests.")
    detail = models.JSONField(default=dict, blank=True,
                              help_text="calls, cached, unparseable, retries, tokens, stopped.")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+")

    class Meta(ScoringJobBase.Meta):
        pass

    def __str__(self) -> str:
        return f"judge {self.judge_version} on {self.project.slug} ({self.status})"
