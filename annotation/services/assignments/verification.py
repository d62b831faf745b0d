"""Prolific participants verified against the provider before their work counts or is paid.

Anyone can open `/task/prolific/<stage>/` with a made-up PROLIFIC_PID and SESSION_ID. A session
is real when Prolific lists it among the study's submissions for that participant. It is asked:

- at the door (`prolific_session_check`): one "Retrieve a submission" call with a short timeout
  (`PROLIFIC_VERIFY_TIMEOUT_SECONDS`, default 3) for a session not verified yet; a session
  Prolific does not know is refused and nothing is created; when Prolific cannot tell
  (unreachable, no study id or token) the assignment starts PENDING;
- after a submit, the same call once more for a PENDING assignment (`assignment_verify`);
- in the provider sync (`stage_sessions_verify`, Celery beat and the stage admin action), from
  the study's complete submission list: listed for its participant -> VERIFIED; listed for
  another participant, or not listed although it started before the list was read -> FAILED.

A session the participant returned on Prolific, or that timed out there, gave its place in the
study back, so the sync gives its items back too, once (`stage_sessions_returned`): in progress
-> RETURNED (its page may still submit late, as after our own timeout: Prolific lets a timed-out
participant complete); submitted here -> FLAGGED for the researcher (not counted; Prolific will
not list it as completed unless the participant still enters the code).

PENDING and FAILED work never counts (`annotation.selectors.judgments_that_count`) nor is paid
(approving and paying need the sync's confirmation, which verifies); a PENDING session idle for
`QAJ_PROLIFIC_UNVERIFIED_TIMEOUT_MINUTES` (default 45) gives its items back.
"""
from __future__ import annotations

import dataclasses
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.assignment_draft import SERVER_DRAFT_KEY, server_state
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Judgment,
    ParticipantVerification,
    Provider,
    Stage,
    Worker,
)
from annotation.providers import get_provider
from annotation.services.redundancy import adaptive_targets_refresh

from .lifecycle import RETURNED_ON_PROVIDER_KEY, assignment_verification_failed
from .timeouts import LATE_KEY

NOT_FOUND_NOTE = ("Prolific does not list session {session} for participant {pid} in this "
                  "study: never counted, never paid.")


def _entry_timeout() -> float:
    return float(getattr(settings, "PROLIFIC_VERIFY_TIMEOUT_SECONDS", 3))


def _ask(stage: Stage, worker: Worker, session_id: str, *, timeout: float | None = None
         ) -> bool | None:
    return get_provider(stage.provider).session_verify(
        stage=stage, worker_external_id=worker.external_id, session_id=session_id,
        attempts=1, timeout=timeout or _entry_timeout())


def prolific_session_check(*, stage: Stage, worker: Worker, session_id: str) -> str:
    """What Prolific says about this session at the task page's door (outside any
    transaction: it is a network call): VERIFIED, FAILED or PENDING (cannot tell now). A
    session already verified is not asked again. FAILED releases any local assignment of the
    session (its items go back)."""
    known = Assignment.objects.filter(stage=stage, external_id=session_id, worker=worker)\
        .values_list("verification", flat=True).first()
    if known == ParticipantVerification.VERIFIED:
        return known
    if not getattr(settings, "QAJ_PROLIFIC_VERIFY_ON_ENTRY", True):
        return ParticipantVerification.PENDING
    verified = _ask(stage, worker, session_id)
    if verified is None:
        return ParticipantVerification.PENDING
    if verified:
        return ParticipantVerification.VERIFIED
    _record_failed(stage=stage, session_id=session_id, pid=worker.external_id)
    return ParticipantVerification.FAILED


@transaction.atomic
def _record_failed(*, stage: Stage, session_id: str, pid: str) -> None:
    for assignment in Assignment.objects.select_for_update().filter(
            stage=stage, external_id=session_id,
            verification=ParticipantVerification.PENDING):
        assignment_verification_failed(assignment=assignment, note=NOT_FOUND_NOTE.format(
            session=session_id, pid=pid))


def assignment_verify(*, assignment: Assignment, timeout: float | None = None) -> str:
    """Ask Prolific once about a PENDING assignment's session and record the answer (the task
    page after a submit; the assignment admin's "Verify with Prolific"). Returns the state."""
    if assignment.verification != ParticipantVerification.PENDING:
        return assignment.verification
    verified = _ask(assignment.stage, assignment.worker, assignment.external_id, timeout=timeout)
    if verified is None:
        return assignment.verification
    with transaction.atomic():
        fresh = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if fresh.verification == ParticipantVerification.PENDING:
            if verified:
                fresh.verification = ParticipantVerification.VERIFIED
                fresh.save(update_fields=["verification"])
            else:
                assignment_verification_failed(assignment=fresh, note=NOT_FOUND_NOTE.format(
                    session=fresh.external_id, pid=assignment.worker.external_id))
    assignment.verification, assignment.status = fresh.verification, fresh.status
    return fresh.verification


@dataclasses.dataclass
class VerifyReport:
    verified: int = 0
    failed: int = 0


@transaction.atomic
def stage_sessions_verify(*, stage: Stage, listed: dict[str, str], listed_since: datetime,
                          returned: set[str] = frozenset()) -> VerifyReport:
    """After the provider listed every session of the stage (`listed`: session id ->
    participant id, read from `listed_since` on): PENDING assignments listed for their own
    participant become VERIFIED; listed for another participant, or missing from the list
    although they started before it was read, FAILED. Sessions the participant returned on
    Prolific (`returned`) stay as they are: real, but not work to count."""
    report = VerifyReport()
    if stage.provider != Provider.PROLIFIC:
        return report
    pending = Assignment.objects.select_for_update().filter(
        stage=stage, verification=ParticipantVerification.PENDING).select_related("worker")
    for assignment in pending:
        session = assignment.external_id
        pid = assignment.worker.external_id
        if session in returned:
            continue
        if listed.get(session) == pid:
            assignment.verification = ParticipantVerification.VERIFIED
            assignment.save(update_fields=["verification"])
            report.verified += 1
        elif session in listed or assignment.started_at < listed_since:
            assignment_verification_failed(assignment=assignment, note=NOT_FOUND_NOTE.format(
                session=session or "(none)", pid=pid))
            report.failed += 1
    return report


RETURNED_NOTE = ("Returned or timed out on Prolific (session {session}): its place in the study "
                 "reopened there, so its items went back to other participants.")
RETURNED_SUBMITTED_NOTE = (
    "Submitted here, but returned or timed out on Prolific (session {session}): its place in "
    "the study reopened there, so it does not count and its items went back to other "
    "participants. Decide it by hand if Prolific lists it as completed later.")


@transaction.atomic
def stage_sessions_returned(*, stage: Stage, returned: dict[str, str]) -> int:
    """After the provider listed the stage's sessions: the local assignments of the sessions
    its participant returned on Prolific or let time out (`returned`: session id ->
    participant id) give their items back, as Prolific gives their place back — in progress:
    RETURNED; submitted (not decided): FLAGGED, never counted nor approved automatically.
    Anything else (decided, flagged, returned already) stays: a repeated sync frees nothing
    twice. Returns how many were given back."""
    if stage.provider != Provider.PROLIFIC or not returned:
        return 0
    freed = 0
    for assignment in Assignment.objects.select_for_update().filter(
            stage=stage, external_id__in=list(returned), worker__provider=Provider.PROLIFIC,
            status__in=(AssignmentStatus.IN_PROGRESS, AssignmentStatus.SUBMITTED),
    ).select_related("worker"):
        session = assignment.external_id
        if returned.get(session) != assignment.worker.external_id:
            continue  # another participant's session: the verification decides it
        submitted = assignment.status == AssignmentStatus.SUBMITTED
        assignment.status = AssignmentStatus.FLAGGED if submitted else AssignmentStatus.RETURNED
        note = (RETURNED_SUBMITTED_NOTE if submitted else RETURNED_NOTE).format(session=session)
        assignment.review_note = "\n".join(p for p in (assignment.review_note, note) if p)
        if not submitted:
            # Reopened if the participant comes back with a session Prolific verifies
            # (`_participant_held`), as late work: its items are free for others from now.
            state = {**server_state(assignment), RETURNED_ON_PROVIDER_KEY: session,
                     LATE_KEY: timezone.now().isoformat()}
            assignment.draft = {**(assignment.draft or {}), SERVER_DRAFT_KEY: state}
        assignment.save(update_fields=["status", "review_note", "draft"])
        adaptive_targets_refresh(judgments=Judgment.objects.filter(assignment=assignment))
        freed += 1
    return freed
