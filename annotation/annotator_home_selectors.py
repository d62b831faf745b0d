"""What an in-house annotator's home page shows: their own stages, progress and history.

Read only, and only the annotator's own rows (their assignments and judgment counts); item
texts, gold answers and other annotators' work never reach this page.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count

from annotation.models import (
    OPEN_STAGE_STATUSES,
    Assignment,
    AssignmentStatus,
    InhouseLink,
    Judgment,
    Provider,
    Stage,
)

HISTORY_LIMIT = 50
# The status an annotator reads: "Flagged for review (see the note)" is the researcher's label,
# and the note is not shown here. To the annotator the batch is sent and waits for a decision.
ANNOTATOR_STATUS = {
    AssignmentStatus.FLAGGED: "Submitted, waiting for the researcher's review",
}


@dataclass
class HomeStage:
    stage: Stage
    is_open: bool
    judged: int = 0  # items this annotator has answered in the stage
    submitted: int = 0  # their finished batches
    in_progress: bool = False  # a batch is waiting for them
    # Start/Continue leads somewhere: the stage would give them items now (set by the page
    # from `more_work_for`, the rule the stage's entry and the completion page follow)
    has_more: bool = True


@dataclass
class HomeBatch:
    stage_name: str
    status: str
    items: int
    started_at: datetime
    submitted_at: datetime | None


@dataclass
class AnnotatorHome:
    stages: list[HomeStage] = field(default_factory=list)
    history: list[HomeBatch] = field(default_factory=list)


def annotator_home(*, link: InhouseLink) -> AnnotatorHome:
    """The in-house stages the link opens (all of its project's, or its one stage) that are open
    or that the annotator worked in, with their progress; their batches, newest first."""
    stages = Stage.objects.filter(project=link.project, provider=Provider.INHOUSE)
    if link.stage_id is not None:
        stages = stages.filter(pk=link.stage_id)
    worker = link.worker
    mine = Assignment.objects.filter(worker=worker, stage__in=stages)
    judged = dict(
        Judgment.objects.filter(worker=worker, stage__in=stages)
        .values_list("stage").annotate(n=Count("item", distinct=True))
    )
    # Work the review rules held back (flagged) was submitted all the same: it is a batch done
    # for the annotator ("0 batches done" beside four flagged batches read as lost work).
    finished = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED, AssignmentStatus.REJECTED,
                AssignmentStatus.FLAGGED)
    submitted = dict(mine.filter(status__in=finished).values_list("stage")
                     .annotate(n=Count("pk")))
    waiting = set(mine.filter(status=AssignmentStatus.IN_PROGRESS)
                  .values_list("stage", flat=True))
    worked = set(mine.values_list("stage", flat=True))
    home = AnnotatorHome()
    for stage in stages.order_by("order", "pk"):
        is_open = stage.status in OPEN_STAGE_STATUSES
        if not is_open and stage.pk not in worked:
            continue
        home.stages.append(HomeStage(
            stage=stage, is_open=is_open, judged=judged.get(stage.pk, 0),
            submitted=submitted.get(stage.pk, 0), in_progress=stage.pk in waiting))
    batches = (mine.select_related("stage").annotate(n_items=Count("items"))
               .order_by("-started_at", "-pk")[:HISTORY_LIMIT])
    home.history = [
        HomeBatch(stage_name=a.stage.name,
                  status=ANNOTATOR_STATUS.get(a.status) or a.get_status_display(),
                  items=a.n_items,
                  started_at=a.started_at, submitted_at=a.submitted_at)
        for a in batches
    ]
    return home
