"""Writes on workers. Blocking is one function so that provider code can extend it (e.g. also
block the worker on MTurk) without the admin or the API changing.

Who a block stops: a superuser's block (or one with no researcher, as automatic rules on an
ownerless project set) is global, `Worker.status = BLOCKED`; a staff researcher's block is a
`WorkerBlock` that applies to the projects that researcher owns or that are shared with them
(`annotation.selectors.blocked_worker_ids_for`), never to other researchers' studies; so is a
study's automatic rule's block for its owner, a superuser included (`study_rule`).
"""
from __future__ import annotations

from django.db import transaction

from annotation.models import Judgment, Worker, WorkerBlock, WorkerStatus
from annotation.services.redundancy import adaptive_targets_refresh


class WorkerUnblockRefused(ValueError):
    """A researcher asked to lift a block that is not theirs (a global one, or the provider-side
    block another researcher's study set)."""


def _is_global(by) -> bool:
    return by is None or getattr(by, "is_superuser", False)


def worker_provider_unblock_check(*, worker: Worker, by=None) -> None:
    """Refuse (`WorkerUnblockRefused`) a researcher's provider-side unblock while someone else
    still blocks the worker: the provider's block covers the whole requester account, so lifting
    it would lift a superuser's global block or another researcher's block there too."""
    if _is_global(by):
        return
    worker = Worker.objects.get(pk=worker.pk)
    if worker.status == WorkerStatus.BLOCKED:
        raise WorkerUnblockRefused(
            f"{worker} is blocked in every project by a superuser; only a superuser lifts that "
            f"block, here or on {worker.get_provider_display()}. Nothing was changed.")
    if WorkerBlock.objects.filter(worker=worker).exclude(researcher=by).exists():
        raise WorkerUnblockRefused(
            f"{worker} is also blocked by another researcher, so the block on "
            f"{worker.get_provider_display()} stays; use \"Unblock selected workers\" to lift "
            f"your own block here. Nothing was changed.")


@transaction.atomic
def worker_block(*, worker: Worker, reason: str, by=None, study_rule: bool = False) -> Worker:
    """Block a worker: globally when `by` is a superuser or None, else for `by`'s projects.
    `study_rule`: a study's automatic rule blocking for its owner `by`, whose block is a
    `WorkerBlock` (the owner's projects) even when `by` is a superuser: a rule of one study is
    no superuser's decision about every study. Blocking again updates the reason."""
    worker = Worker.objects.select_for_update().get(pk=worker.pk)
    if _is_global(by) and not (study_rule and by is not None):
        worker.status = WorkerStatus.BLOCKED
        worker.blocked_reason = reason.strip()
        worker.save(update_fields=["status", "blocked_reason"])
    else:
        WorkerBlock.objects.update_or_create(worker=worker, researcher=by,
                                             defaults={"reason": reason.strip()})
    # Their judgments stop counting: items they settled collect replacements.
    adaptive_targets_refresh(judgments=Judgment.objects.filter(worker=worker))
    return worker


@transaction.atomic
def worker_unblock(*, worker: Worker, by=None) -> Worker:
    """Lift the block `by` set (a superuser: the global one, and their own study rules'
    blocks; None: the global one); a no-op when there is none."""
    worker = Worker.objects.select_for_update().get(pk=worker.pk)
    lifted = bool(by is not None
                  and WorkerBlock.objects.filter(worker=worker, researcher=by).delete()[0])
    if _is_global(by) and (worker.status != WorkerStatus.ACTIVE or worker.blocked_reason):
        worker.status = WorkerStatus.ACTIVE
        worker.blocked_reason = ""
        worker.save(update_fields=["status", "blocked_reason"])
        lifted = True
    if lifted or not _is_global(by):
        adaptive_targets_refresh(judgments=Judgment.objects.filter(worker=worker))
    return worker
