"""What the assignment modules share: which stages are open, which assignments are finished, the
server-owned part of the draft, the items a stage releases and the answer rules of a project."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

# Re-exported for the assignment modules (`X as X`); defined below the services, where the
# selectors read them too.
from annotation.assignment_draft import REFUSED_KEY as REFUSED_KEY
from annotation.assignment_draft import SERVER_DRAFT_KEY as SERVER_DRAFT_KEY
from annotation.domain.answers import CONFIRM_MODES as _CONFIRM_MODES
from annotation.domain.answers import AnswerRules
from annotation.models import OPEN_STAGE_STATUSES as OPEN_STAGE_STATUSES
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Hit,
    HitStatus,
    Provider,
    Stage,
    StageStatus,
    StageTransition,
    TaskKind,
)


def stage_not_open_message(stage: Stage) -> str:
    """What an annotator reads when a stage takes no work now, by why (it said "not open at
    the moment" whether the stage was a draft, paused with every HIT taken, or over)."""
    if stage.status == StageStatus.DRAFT:
        return ("This task has not started yet. Your link will work once the researcher "
                "opens it.")
    if stage.status == StageStatus.REVIEWING and stage.provider == Provider.PROLIFIC:
        # The study is paused on Prolific (`stage_recruitment_follow`), but a participant who
        # reserved a place before the pause still arrives: they cannot wait with a place held.
        return ("This study has collected all the answers it needs, so there is nothing for "
                "you to do. Please return the study on Prolific (\u201cStop without "
                "completing\u201d) so your place is released; returning it does not count "
                "against you.")
    if stage.status == StageStatus.REVIEWING:
        return ("This task has collected all the answers it asked for and is paused while "
                "the researcher reviews them. Your link will work again if the researcher "
                "reopens the task; there is nothing to do until then.")
    return "This task has ended. Thank you \u2014 there is nothing more to do here."


FINISHED_STATUSES = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED,
                     AssignmentStatus.REJECTED)


def assignment_finished(assignment: Assignment) -> bool:
    """Whether the worker's part of `assignment` is over because it was submitted: submitted,
    approved, rejected, or flagged for review after its submit (FLAGGED with `submitted_at`: a
    review rule held it, the provider never listed it). Every write a page makes asks this
    first. A flagged submission is not returned work its page may still submit late: a submit
    sent again from that page (another tab, a retry) made it "submitted" again, with a new
    completion code, out of the researcher's review."""
    return assignment.status in FINISHED_STATUSES or (
        assignment.status == AssignmentStatus.FLAGGED and assignment.submitted_at is not None)


def finished_filter() -> Q:
    """`assignment_finished` as a query filter on assignments."""
    return Q(status__in=FINISHED_STATUSES) | Q(status=AssignmentStatus.FLAGGED,
                                               submitted_at__isnull=False)


MAX_DRAFT_BYTES = 200_000

# Server draft state of STARC pilot pages beside `guesses` (item id -> role): item id ->
# {"locked_at": ISO time the guess was locked, "client_ms": the page's time on the guess page,
# "server_ms": the server's}, copied into the judgment so each phase has its own time.
GUESS_TIMING_KEY = "guess_timing"


# MC modes in which each item is confirmed on its own before the next one is shown (the rule:
# `annotation.domain.answers.confirms_per_item`).
CONFIRM_MODES = _CONFIRM_MODES


def answer_rules(project, stage=None) -> AnswerRules:
    """What an answer is checked against: the project's settings, and the stage's `ab_ties`."""
    return AnswerRules(
        kind=project.kind,
        mode=project.experiment_mode if project.kind == TaskKind.MC else "",
        justification_min_length=project.justification_min_length,
        aspects=list(project.aspects or []),
        aspect_preferences=list(project.aspect_preferences or []),
        scale_size=project.scale_top,
        ties=project.kind == TaskKind.AB and stage is not None
        and bool((stage.settings or {}).get("ab_ties")),
    )


def hit_is_expired(hit: Hit, now: datetime | None = None) -> bool:
    """The HIT takes no new workers: expired on the provider (by us, or its lifetime ran out)."""
    if hit.status == HitStatus.EXPIRED:
        return True
    return hit.expires_at is not None and hit.expires_at <= (now or timezone.now())


# Providers whose own close lets the workers already in an assignment finish it: MTurk's
# ExpireHIT stops new accepts and leaves accepted assignments their duration; a stopped
# Prolific study takes no new participants and lets active ones complete. In-house links have
# no such contract: closing an in-house stage ends its pages.
FINISH_AFTER_CLOSE_PROVIDERS = (Provider.MTURK, Provider.PROLIFIC)


def stage_closed_at(stage: Stage) -> datetime | None:
    """When `stage` was closed (its logged transition to CLOSED); None when it is not closed
    or no close was logged."""
    if stage.status != StageStatus.CLOSED:
        return None
    return (StageTransition.objects.filter(stage=stage, to_status=StageStatus.CLOSED)
            .order_by("-created_at", "-pk").values_list("created_at", flat=True).first())


def assignment_finish_deadline(assignment: Assignment) -> datetime:
    """The last moment the provider takes this assignment's submission: its start plus the
    assignment duration (the HIT type's on MTurk; on Prolific the same setting, as the study's
    maximum time allowed is not stored: the stage's `assignment_duration_seconds`, else the
    project's assignment timeout)."""
    from annotation.providers.mturk_protocol import assignment_duration_seconds

    return assignment.started_at + timedelta(
        seconds=assignment_duration_seconds(assignment.stage))


def closed_stage_lets_finish(assignment: Assignment, now: datetime | None = None) -> bool:
    """Whether `assignment` may still be worked on and submitted although its stage is
    closed: the stage is an MTurk or Prolific one closed with a logged transition, the
    assignment was created before that close, is still in progress (not submitted, decided or
    returned) and its assignment duration has not run out. The one rule every door that
    re-checks an existing assignment asks; nothing new is ever created on a closed stage, and
    the worker checks (a block) still apply after it."""
    stage = assignment.stage
    if stage.provider not in FINISH_AFTER_CLOSE_PROVIDERS:
        return False
    if assignment.status != AssignmentStatus.IN_PROGRESS:
        return False
    closed_at = stage_closed_at(stage)
    if closed_at is None or assignment.started_at is None or assignment.started_at >= closed_at:
        return False
    return (now or timezone.now()) < assignment_finish_deadline(assignment)


def server_state_save(assignment: Assignment, state: dict) -> None:
    """Store `state` as the server-owned part of the draft (a sign of life too)."""
    assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
    assignment.last_seen_at = timezone.now()
    assignment.save(update_fields=["draft", "last_seen_at"])
