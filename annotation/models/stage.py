from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core import vocabulary
from core.choices import django_choices
from core.leases import LeaseStates

from ..validators import validate_one_line_text
from .item import Item
from .project import NOT_NEGATIVE_MONEY, Project


class StageKind(models.TextChoices):
    PRACTICE = "practice", "Practice"
    QUALIFICATION = "qualification", "Qualification"
    TRIAL = "trial", "Trial"
    FULL = "full", "Full collection"
    PILOT = "pilot", "Pilot"
    IMPORTED = "imported", "Imported judgments"


# Which stages hold data: the one definition. Practice and qualification answers test the
# workers, not the items, so they never count towards an item's judgments, reports or LERC data.
NON_DATA_STAGE_KINDS = (StageKind.PRACTICE, StageKind.QUALIFICATION)
DATA_STAGE_KINDS = tuple(kind for kind in StageKind if kind not in NON_DATA_STAGE_KINDS)
# The data stages that collect judgments here (imported judgments were gathered elsewhere): the
# stages whose items a later stage may avoid re-showing.
COLLECTION_STAGE_KINDS = tuple(kind for kind in DATA_STAGE_KINDS if kind != StageKind.IMPORTED)


class StageStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    PUBLISHED = "published", "Published"
    COLLECTING = "collecting", "Collecting"
    REVIEWING = "reviewing", "Reviewing"
    CLOSED = "closed", "Closed"


Provider = django_choices(vocabulary.Provider, module=__name__)

# The stages that take work now (links, HITs and the annotator's home offer them).
OPEN_STAGE_STATUSES = (StageStatus.PUBLISHED, StageStatus.COLLECTING)
# Live stages: published and not closed. They serve items (a reviewing stage pauses its pages
# but reopens when more work is wanted), keep their provider's HITs or study offered, are
# synced, and read the project settings they were published with.
LIVE_STAGE_STATUSES = (*OPEN_STAGE_STATUSES, StageStatus.REVIEWING)


class Stage(models.Model):
    """A release of items to workers: qualification → trial → full collection (MOCHA app. D)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="stages")
    kind = models.CharField(max_length=20, choices=StageKind.choices)
    name = models.CharField(max_length=100, validators=[validate_one_line_text])
    order = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(
        max_length=20, choices=StageStatus.choices, default=StageStatus.DRAFT
    )
    provider = models.CharField(max_length=20, choices=Provider.choices, default=Provider.INHOUSE)
    items = models.ManyToManyField(
        Item, blank=True, related_name="stages",
        help_text="Items released in this stage; empty means every non-excluded item.",
    )
    judgments_per_item = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Overrides the project's per-split redundancy (1 to 1000, as it does).",
    )
    requires_stage = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="unlocks",
        help_text="Only workers who passed this (qualification) stage may work here.",
    )
    agreement_threshold = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)],
        help_text="Publishing needs the required stage's Krippendorff's alpha to reach this "
                  "(alpha is at most 1: from -1 to 1).",
    )
    reward_per_hit = models.DecimalField(
        max_digits=8, decimal_places=2, null=True, blank=True, validators=[NOT_NEGATIVE_MONEY],
        help_text="Overrides the project's reward per HIT.",
    )
    settings = models.JSONField(
        default=dict, blank=True, help_text="Provider options (lifetime, duration, keywords ...)."
    )
    publish_problem = models.TextField(
        blank=True,
        help_text="Why the last attempt to publish did not go through (a guard, a missing "
                  "credential, HITs not created); cleared once the stage is live. Written by "
                  "the publish service only.",
    )
    publish_problem_at = models.DateTimeField(null=True, blank=True)
    reconciled_at = models.DateTimeField(
        null=True, blank=True,
        help_text="Set by the provider sync once a closed stage can receive no more "
                  "submissions and every one is decided; until then the sync goes on.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "order", "id"]

    def __str__(self) -> str:
        return f"{self.project.slug} / {self.name}"

    @property
    def reward(self) -> Decimal:
        return self.reward_per_hit if self.reward_per_hit is not None else self.project.reward_per_hit


class StageSync(models.Model):
    """The job lease of a stage's provider sync and review (`core.leases`: one row per stage,
    claimed by each run): the beat queues a sync every few minutes, the admin's "Sync now" and
    a redelivered message run the same function, and two runs at once would each pay what the
    other had not recorded yet (a Prolific bonus set up twice is paid twice). A run that finds
    the lease held by a live worker does nothing; a holder silent for the stale limit lost its
    worker, and the next run takes the lease over."""

    IDLE, RUNNING, FAILED = "idle", "running", "failed"

    stage = models.OneToOneField(Stage, on_delete=models.CASCADE, related_name="sync_lease")
    status = models.CharField(max_length=10, default=IDLE)
    lease = models.CharField(max_length=100, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    lease_states = LeaseStates(queued=IDLE, running=RUNNING, failed=FAILED)

    def __str__(self) -> str:
        return f"sync of {self.stage_id}: {self.status}"


class StageTransition(models.Model):
    """Log of every stage status change (and overridden guards), append-only. Written only by
    `annotation.services.stages.stage_transition`, which needs who (`user`, or `actor` for a
    scheduled job or a command) and why (`reason`)."""

    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="transitions")
    from_status = models.CharField(max_length=20, choices=StageStatus.choices)
    to_status = models.CharField(max_length=20, choices=StageStatus.choices)
    reason = models.TextField(blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor = models.CharField(
        max_length=150, blank=True,
        help_text="Who made the change: the user's name, or the job or command that did.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.stage}: {self.from_status} → {self.to_status}"


class RoutingDraw(models.Model):
    """One item of a stage's routing population: the probability it had of being sent to
    humans and whether the seeded draw sent it (a stage with `"routing": "uncertainty"`). Kept
    for every item of the population, drawn or not, and never edited: estimates weight each
    human label by 1/probability (active inference), which is unbiased only with the
    probabilities the draw really used."""

    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="routing_draws")
    item = models.ForeignKey("annotation.Item", on_delete=models.CASCADE,
                             related_name="routing_draws")
    probability = models.FloatField(help_text="Chance of being sent to humans (0–1].")
    drawn = models.BooleanField()
    predicted = models.FloatField(null=True, help_text="The metric's P(correct) it was routed on.")
    metric_version = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["stage", "item"],
                                               name="routing_draw_unique")]

    def __str__(self) -> str:
        return f"{self.stage}: item {self.item_id} p={self.probability:.3f} drawn={self.drawn}"


class AdaptiveTarget(models.Model):
    """How many judgments an item of a stage with adaptive redundancy should get, updated as
    its judgments arrive (`annotation/services/redundancy.py`); picking reads it in place of the
    fixed redundancy. Items without a row get the setting's `min`."""

    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="adaptive_targets")
    item = models.ForeignKey("annotation.Item", on_delete=models.CASCADE,
                             related_name="adaptive_targets")
    target = models.PositiveSmallIntegerField()
    settled = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["stage", "item"],
                                               name="adaptive_target_unique")]

    def __str__(self) -> str:
        return f"{self.stage}: item {self.item_id} → {self.target}"
