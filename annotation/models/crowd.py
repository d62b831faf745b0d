from __future__ import annotations

from django.conf import settings
from django.db import models

from .item import Item
from .project import Project
from .stage import Provider, Stage


class WorkerStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    BLOCKED = "blocked", "Blocked"


class Worker(models.Model):
    """A crowdworker, Prolific participant, in-house expert, or an imported annotator."""

    provider = models.CharField(max_length=20, choices=Provider.choices)
    external_id = models.CharField(max_length=255)
    display_name = models.CharField(max_length=200, blank=True)
    email = models.EmailField(blank=True)
    status = models.CharField(
        max_length=10, choices=WorkerStatus.choices, default=WorkerStatus.ACTIVE
    )
    blocked_reason = models.TextField(blank=True)
    # An in-house annotator is named by a researcher ("Ann"), so the name is theirs: another
    # researcher's "Ann" is another person, with her own reading history and qualifications.
    # Null for ids the provider makes global (an MTurk worker id, a Prolific participant id),
    # for imported annotators, and for in-house annotators created before names were scoped.
    researcher = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
        related_name="inhouse_annotators",
        help_text="The researcher whose in-house annotator this is (their name for them).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["provider", "external_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "external_id"], condition=models.Q(researcher__isnull=True),
                name="worker_unique_per_provider",
            ),
            models.UniqueConstraint(
                fields=["provider", "external_id", "researcher"],
                condition=models.Q(researcher__isnull=False),
                name="inhouse_annotator_unique_per_researcher",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or f"{self.provider}:{self.external_id}"


class WorkerBlock(models.Model):
    """A researcher's block: the worker gets no assignment (and no live page accepts their work)
    in any project that researcher owns or that is shared with them. Other researchers' projects
    are unaffected. A global block, for every project, is `Worker.status = BLOCKED`, which only
    superusers set."""

    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="blocks")
    researcher = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                   related_name="worker_blocks")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["worker", "researcher"],
                                    name="worker_block_once_per_researcher")
        ]

    def __str__(self) -> str:
        return f"{self.worker} blocked by {self.researcher}"


class WorkerQualification(models.Model):
    """Result of a worker's qualification stage; `passed` decides access to later stages."""

    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="qualifications")
    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="qualifications")
    passed = models.BooleanField()
    score = models.FloatField(help_text="Share of qualification items answered correctly.")
    n_items = models.PositiveIntegerField(default=0)
    granted_externally = models.BooleanField(
        default=False, help_text="The provider-side qualification was granted."
    )
    assignment = models.ForeignKey(
        "Assignment", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="qualification_results",
        help_text="The assignment graded. A result counts on the provider only once the "
                  "provider has confirmed that assignment (see Assignment.provider_confirmed_at).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["worker", "stage"], name="one_qualification_result_per_stage"
            )
        ]

    def __str__(self) -> str:
        return f"{self.worker} {'passed' if self.passed else 'failed'} {self.stage}"


class HitStatus(models.TextChoices):
    PENDING = "pending", "Pending (not yet on the provider)"
    OPEN = "open", "Open"
    EXPIRED = "expired", "Expired"
    DONE = "done", "Done"


class Hit(models.Model):
    """A HIT (MTurk), study slot (Prolific) or batch (in-house): a fixed group of items."""

    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="hits")
    provider = models.CharField(max_length=20, choices=Provider.choices)
    external_id = models.CharField(max_length=255, blank=True, db_index=True)
    hit_type_id = models.CharField(max_length=255, blank=True)
    unique_request_token = models.CharField(
        max_length=64, blank=True,
        help_text="Stored before CreateHIT so a retry never creates a second HIT.",
    )
    items = models.ManyToManyField(Item, through="HitItem", related_name="hits")
    max_assignments = models.PositiveSmallIntegerField(default=1)
    reward = models.DecimalField(max_digits=8, decimal_places=2)
    status = models.CharField(max_length=10, choices=HitStatus.choices, default=HitStatus.PENDING)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"HIT {self.external_id or self.pk} ({self.stage})"


class HitItem(models.Model):
    hit = models.ForeignKey(Hit, on_delete=models.CASCADE)
    item = models.ForeignKey(Item, on_delete=models.CASCADE)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["hit", "position"]
        constraints = [models.UniqueConstraint(fields=["hit", "item"], name="hit_item_unique")]

    def __str__(self) -> str:
        return f"item {self.item_id} at {self.position} in HIT {self.hit_id}"


class AssignmentStatus(models.TextChoices):
    IN_PROGRESS = "in_progress", "In progress"
    SUBMITTED = "submitted", "Submitted"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    RETURNED = "returned", "Returned / abandoned"
    # Held for a person to look at: the review note says why (a review rule held it, or the
    # provider never listed the submission).
    FLAGGED = "flagged", "Flagged for review (see the note)"


class ParticipantVerification(models.TextChoices):
    """Whether the provider knows this participant's session (Prolific: the submission id from
    SESSION_ID exists in the study's submissions, for the PROLIFIC_PID the page was opened with).
    Work of a PENDING or FAILED session never counts (`annotation.selectors.judgments_that_count`)
    nor is paid; a PENDING session idle for `QAJ_PROLIFIC_UNVERIFIED_TIMEOUT_MINUTES` gives its
    items back. MTurk: an assignment admitted over its HIT's local count (a slot returned on
    MTurk, `annotation/services/assignments/lifecycle.py:_over_admission`) is PENDING until
    MTurk lists it as submitted (VERIFIED); others carry NOT_NEEDED."""

    NOT_NEEDED = "", "Not needed (in-house, MTurk, imported)"
    PENDING = "pending", "Not verified yet"
    VERIFIED = "verified", "Verified with the provider"
    FAILED = "failed", "Not found at the provider"


# Sessions whose work does not count (yet).
UNVERIFIED = (ParticipantVerification.PENDING, ParticipantVerification.FAILED)


class Assignment(models.Model):
    """One worker's work on one group of items in one stage."""

    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="assignments")
    hit = models.ForeignKey(
        Hit, null=True, blank=True, on_delete=models.CASCADE, related_name="assignments"
    )
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="assignments")
    external_id = models.CharField(
        max_length=255, blank=True, db_index=True,
        help_text="MTurk assignmentId or Prolific SESSION_ID.",
    )
    items = models.ManyToManyField(Item, through="AssignmentItem", related_name="assignments")
    status = models.CharField(
        max_length=20, choices=AssignmentStatus.choices, default=AssignmentStatus.IN_PROGRESS
    )
    draft = models.JSONField(default=dict, blank=True, help_text="Autosaved partial answers.")
    review_note = models.TextField(blank=True)
    bonus_paid = models.DecimalField(max_digits=8, decimal_places=2, default=0)
    completion_code = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    provider_confirmed_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When the provider sync found this assignment in the provider's own list "
                  "(same id, same worker). MTurk and Prolific work is approved, paid or "
                  "counted for a qualification only once confirmed.",
    )
    verification = models.CharField(
        max_length=10, choices=ParticipantVerification.choices, blank=True,
        default=ParticipantVerification.NOT_NEEDED,
        help_text="Prolific: whether the session was found in the study's submissions for this "
                  "participant. Unverified work neither counts nor is paid.",
    )

    class Meta:
        ordering = ["-started_at", "id"]
        indexes = [models.Index(fields=["stage", "status"], name="assignment_stage_status_idx")]
        constraints = [
            # One live assignment per Prolific participant and stage: a second SESSION_ID from
            # the same PROLIFIC_PID gets the first assignment back (assignment_start), and two
            # racing sessions cannot both create one. Only Prolific assignments carry a
            # verification state, so in-house and MTurk work is not constrained here.
            models.UniqueConstraint(
                fields=["stage", "worker"],
                condition=models.Q(status="in_progress",
                                   verification__in=["pending", "verified"]),
                name="one_live_prolific_assignment_per_worker_stage",
            ),
        ]

    def __str__(self) -> str:
        return f"Assignment {self.external_id or self.pk} by {self.worker}"


class AssignmentItem(models.Model):
    """An item inside an assignment, with the order its options were shown in."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE)
    item = models.ForeignKey(Item, on_delete=models.CASCADE)
    position = models.PositiveSmallIntegerField(default=0)
    presented_order = models.JSONField(
        default=list, blank=True, help_text="A/B order or MC option order shown to the worker."
    )
    first_shown_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["assignment", "position"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "item"], name="assignment_item_unique")
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} at {self.position} in assignment {self.assignment_id}"


class InhouseLink(models.Model):
    """A signed personal link for an in-house annotator; revocable, optionally expiring."""

    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="links")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="links")
    stage = models.ForeignKey(
        Stage, null=True, blank=True, on_delete=models.CASCADE, related_name="links"
    )
    nonce = models.CharField(max_length=64, unique=True)
    revoked = models.BooleanField(default=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Link for {self.worker} on {self.project.slug}"
