"""Scheduled work: retrain when enough new judgments arrived (counting only work gathered here
unless imports are asked for), and decide the versions whose promotion decision never ran.
Versions whose worker stopped beating are failed by the one lease sweep
(metrics_app/services/job_leases.py), which also runs `model_versions_decide_pending`."""
from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.models import Project, StageKind
from annotation.selectors import judgments_that_count
from core.leases import max_attempts, scope_lock, stale_after_seconds
from metrics_app.models import ModelKind, ModelStatus, ModelVersion

from .common import (
    NAME_BY_KIND,
    REFUSED,
    TASK_KIND_BY_MODEL_KIND,
    TRAINED,
    decision_pending,
    version_event,
    versions_locked,
)
from .datasets import one_score_reason
from .options import default_train_options_check
from .training import model_version_create, model_version_enqueue, model_versions_send_pending

logger = logging.getLogger(__name__)

# The event that records each time the sweep sent a version's decision again (their count
# bounds the sends) and the one a failed decision run leaves (its error ends the story).
DECISION_RESENT = "decision sent again"
DECISION_ERROR = "decision error"


def lerc_refresh_due(*, min_new_judgments: int) -> list[tuple[Project, ModelKind, int]]:
    """(project, model kind, new judgments) for projects that gathered at least
    `min_new_judgments` data judgments since the last version trained on them. Only judgments
    that count (`annotation.selectors.judgments_that_count`, the rule the training data is read
    by: no practice or qualification work, no rejected or returned assignment, no blocked
    worker) are counted; judgments in imported stages do not count unless
    QAJ_LERC_REFRESH_COUNTS_IMPORTS is true.

    Judgments up to that version's watermark that count now but did not when it read them
    (held work approved since) are new too (`_counted_since_read`).

    "Since" counts from the latest version that includes the project and finished training
    (promoted, evaluated or rejected) or was refused for its data (`common.DataRefused`: no
    training example once exact matches are dropped, every training answer one score):
    counting from the promoted one would retrain after every rejection on every beat, counting
    past a refused one would queue the same data, refused at once, on every beat, and counting
    from one failed otherwise (e.g. a lost worker) would wait for N more judgments before
    replacing a version that never trained, unless QAJ_JOB_MAX_ATTEMPTS versions in a row
    failed since (`_counted_from`). A project whose newest
    version is in flight is skipped, and so is one whose judgments that count all give one
    score (Likert): training would refuse them (`datasets.one_score_reason`).
    """
    due = []
    for kind, task_kind in TASK_KIND_BY_MODEL_KIND.items():
        for project in Project.objects.filter(kind=task_kind).order_by("id"):
            versions = (ModelVersion.objects.filter(name=NAME_BY_KIND[kind], projects=project)
                        .exclude(status=ModelStatus.CANCELLED))
            if _in_flight(project, kind):
                continue
            latest = _counted_from(versions)
            since = int(((latest.data_snapshot or {}).get("watermarks") or {})
                        .get(str(project.id), 0)) if latest else 0
            new = judgments_that_count(project=project).filter(id__gt=since)
            if not getattr(settings, "QAJ_LERC_REFRESH_COUNTS_IMPORTS", False):
                # Imported judgments were gathered elsewhere (and a re-import of the same file
                # adds none): only work collected here makes a refresh due.
                new = new.exclude(stage__kind=StageKind.IMPORTED)
            new = new.count() + _counted_since_read(project, latest, since)
            if new >= min_new_judgments and not _one_score_only(project, kind):
                due.append((project, kind, new))
    return due


def _counted_since_read(project: Project, version: ModelVersion | None, since: int) -> int:
    """Judgments up to the version's watermark that count now but did not when it read its
    data (held work approved since, a session verified since): it never trained on them, so
    they are new. The count it read (its snapshot's `counted`) less the count now, never
    below 0: work rejected since offsets them, so this may count fewer, never more (a
    training on them reads them, and they stop being new). 0 for a version that recorded no
    count (refused before reading, or trained before it was recorded)."""
    if version is None:
        return 0
    read = next((entry.get("counted") for entry in
                 ((version.data_snapshot or {}).get("projects") or {}).values()
                 if entry.get("id") == project.id), None)
    if read is None:
        return 0
    return max(0, judgments_that_count(project=project).filter(id__lte=since).count()
               - int(read))


def _counted_from(versions) -> ModelVersion | None:
    """The version whose watermark new judgments are counted from: the newest that trained or
    was refused for its data; but once QAJ_JOB_MAX_ATTEMPTS versions in a row failed after it
    (an error in training or evaluation, a worker lost each time: the same data failing
    again), the newest of those, so the refresh waits for new judgments instead of queuing
    another version of the same data every beat, without end."""
    tried = versions.filter(_tried_on_its_data()).order_by("-created_at", "-id").first()
    failed = versions.filter(status=ModelStatus.FAILED)
    if tried is not None:
        failed = failed.filter(Q(created_at__gt=tried.created_at)
                               | Q(created_at=tried.created_at, id__gt=tried.id))
    in_a_row = list(failed.order_by("-created_at", "-id")[:max_attempts()])
    return in_a_row[0] if len(in_a_row) >= max_attempts() else tried


def _tried_on_its_data() -> Q:
    """The versions whose pinned judgments were tried: trained, or refused for the data."""
    return Q(status__in=TRAINED) | Q(status=ModelStatus.FAILED, data_snapshot__has_key=REFUSED)


def _one_score_only(project: Project, kind: ModelKind) -> bool:
    """Whether every judgment of the project that counts gives one score, so a version would
    be refused before training (`datasets.one_score_reason`, unless a distilling judge's
    verdicts vary). Not due then: a refused version
    is failed, and the refresh, which counts from the last version that trained, would queue
    another each beat for as long as the scores stay one."""
    if kind != ModelKind.REGRESSION:
        return False
    # Read only for a project already due (rare): its scores, one small integer per judgment.
    reason = one_score_reason(
        [float(score) for score in judgments_that_count(project=project)
         .exclude(score__isnull=True).values_list("score", flat=True)],
        what="judgments that count")
    if reason:
        logger.info("lerc refresh: %s not due: %s", project.slug, reason)
    return reason is not None


def _in_flight(project: Project, kind: ModelKind) -> bool:
    """Whether the project's newest version of the kind (not cancelled) is queued or
    training."""
    newest = (ModelVersion.objects.filter(name=NAME_BY_KIND[kind], projects=project)
              .exclude(status=ModelStatus.CANCELLED).order_by("-created_at", "-id").first())
    return newest is not None and newest.status in ModelVersion.lease_states.in_flight


def lerc_refresh(*, min_new_judgments: int | None = None) -> list[ModelVersion]:
    """Create and enqueue a training version for every project that is due; first send the
    queued versions that never reached the broker (`model_versions_send_pending`)."""
    model_versions_send_pending()
    if min_new_judgments is None:
        min_new_judgments = int(getattr(settings, "QAJ_LERC_MIN_NEW_JUDGMENTS", 500))
    due = lerc_refresh_due(min_new_judgments=min_new_judgments)
    if due:
        # Refused before any version is created (the task fails saying what to fix), not
        # queued to fail on the worker.
        default_train_options_check()
    created = []
    for project, kind, new in due:
        with transaction.atomic():
            # Refreshes take turns per project (a second beat, an overlapping run): one that
            # finds a version queued meanwhile by another does not queue a second one.
            scope_lock(project)
            if _in_flight(project, kind):
                continue
            version = model_version_create(projects=[project], kind=kind,
                                           reason=f"refresh: {new} new judgments in {project.slug}")
            model_version_enqueue(model_version=version)
        created.append(version)
    return created


def model_versions_decide_pending() -> dict[str, int]:
    """Beat (part of the lease sweep): a version that finished training but whose promotion
    decision never ran or never finished (the worker killed after storing the model, the
    `lerc_evaluate` message lost, the broker down, the decision raising) would stay undecided
    forever. Once it has been undecided for QAJ_JOB_STALE_AFTER_SECONDS since its evaluation
    or its last send, its `lerc_evaluate` is sent again, at most QAJ_JOB_MAX_ATTEMPTS times;
    after that it is failed, the reason logged on the version. Counts: {"retried", "failed"}.

    Safe to run twice at once and against a late delivery: each version is looked at under the
    lock of its model's versions (the one promotions and decisions take), and the decision
    itself acts only on a version still undecided (`common.decision_pending`)."""
    counts = {"retried": 0, "failed": 0}
    now = timezone.now()
    undecided = (ModelVersion.objects.filter(status=ModelStatus.EVALUATED,
                                             promoted_at__isnull=True)
                 .order_by("pk").values_list("pk", flat=True))
    for version_id in undecided:
        outcome = _decision_recover(version_id, now)
        if outcome is not None:
            counts[outcome] += 1
    return counts


@transaction.atomic
def _decision_recover(version_id: int, now) -> str | None:
    """Send one undecided version's decision again, fail it, or leave it (decided meanwhile,
    or its last send is younger than the stale limit); "retried", "failed" or None."""
    name = ModelVersion.objects.filter(pk=version_id).values_list("name", flat=True).first()
    if name is None:
        return None
    versions_locked(name)
    version = ModelVersion.objects.get(pk=version_id)
    if not decision_pending(version):
        return None
    sends = version.events.filter(event=DECISION_RESENT)
    last_send = sends.order_by("-created_at").values_list("created_at", flat=True).first()
    since = last_send or version.finished_at or version.heartbeat_at or version.created_at
    waited = (now - since).total_seconds()
    if waited < stale_after_seconds():
        return None  # the decision may still be running (or on its way)
    sent = sends.count()
    if sent < max_attempts():
        version_event(version, DECISION_RESENT,
                      f"no promotion decision {int(waited)}s after "
                      f"{'the last send' if last_send else 'evaluation'}; "
                      f"send {sent + 1} of {max_attempts()}")
        model_version_enqueue(model_version=version, task="evaluate")
        logger.warning("%s: promotion decision sent again (%s of %s)", version, sent + 1,
                       max_attempts())
        return "retried"
    last_error = (version.events.filter(event=DECISION_ERROR).order_by("-created_at", "-id")
                  .values_list("detail", flat=True).first())
    reason = (f"no promotion decision after {sent} sends of lerc_evaluate"
              + (f"; last error: {last_error}" if last_error else
                 " (none ran to the end: no worker on the gpu queue?)")
              + "; train a new version")
    version.status = ModelStatus.FAILED
    version.error = reason
    version.finished_at = version.finished_at or now
    version.save(update_fields=["status", "error", "finished_at"])
    version_event(version, "failed", reason)
    logger.warning("%s: %s", version, reason)
    return "failed"
