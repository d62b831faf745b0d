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

from annotation.access_selectors import researchers_beside
from annotation.models import Judgment, Worker, WorkerBlock, WorkerStatus
from annotation.services.redundancy import adaptive_targets_refresh


class WorkerUnblockRefused(ValueError):
    """A researcher asked to lift a block that is not theirs (a global one, or the provider-side
    block another researcher's study set)."""


def _is_global(by) -> bool:
    return by is None or getattr(by, "is_superuser", False)


# Who else blocks a worker (`workers_blocked_by_others`).
BLOCKED_BY_SUPERUSER = "a superuser's block, in every project"


def workers_blocked_by_others(*, workers, by=None, in_visible_projects: bool = False
                              ) -> dict[int, str]:
    """Of these workers (instances or ids), those a block other than the one `by` sets or lifts
    (`workers_block` / `workers_unblock`) keeps blocked: id → whose block
    (`BLOCKED_BY_SUPERUSER`, or "researcher NAME's block"). For a researcher, a superuser's
    global block and other researchers' blocks; for a superuser (or None), researchers'
    blocks. `in_visible_projects`: only the blocks that stop the worker in a project `by` may
    see (its owner's and sharers', `blocked_worker_ids_for`): what the admin's "Unblock
    selected workers" names, since a block in a study that is not theirs neither keeps the
    worker out of theirs nor is theirs to know of. Without it, every block: the
    provider-side unblock refuses on it (`worker_provider_unblock_check`), since a provider's
    block covers the whole requester account."""
    ids = [getattr(worker, "pk", worker) for worker in workers]
    out: dict[int, str] = {}
    if not _is_global(by):
        out.update(dict.fromkeys(Worker.objects.filter(pk__in=ids, status=WorkerStatus.BLOCKED)
                                 .values_list("pk", flat=True), BLOCKED_BY_SUPERUSER))
    others = WorkerBlock.objects.filter(worker_id__in=ids)
    if by is not None:
        others = others.exclude(researcher=by)
    if in_visible_projects and not _is_global(by):
        others = others.filter(researcher__in=researchers_beside(by).values("pk"))
    for pk, name in others.order_by("researcher__username").values_list(
            "worker_id", "researcher__username"):
        out.setdefault(pk, f"researcher {name}'s block")
    return out


def worker_provider_unblock_check(*, worker: Worker, by=None) -> None:
    """Refuse (`WorkerUnblockRefused`) a researcher's provider-side unblock while someone else
    still blocks the worker (`workers_blocked_by_others`): the provider's block covers the
    whole requester account, so lifting it would lift a superuser's global block or another
    researcher's block there too."""
    if _is_global(by):
        return
    worker = Worker.objects.get(pk=worker.pk)
    other = workers_blocked_by_others(workers=[worker], by=by).get(worker.pk)
    if other == BLOCKED_BY_SUPERUSER:
        raise WorkerUnblockRefused(
            f"{worker} is blocked in every project by a superuser; only a superuser lifts that "
            f"block, here or on {worker.get_provider_display()}. Nothing was changed.")
    if other is not None:
        raise WorkerUnblockRefused(
            f"{worker} is also blocked by another researcher, so the block on "
            f"{worker.get_provider_display()} stays; use \"Unblock selected workers\" to lift "
            f"your own block here. Nothing was changed.")


def worker_blocked_by(*, worker: Worker, by=None) -> bool:
    """Whether the block `by` sets (`workers_block`: global for a superuser or None, else
    `by`'s own) is on `worker` now."""
    if _is_global(by):
        return Worker.objects.filter(pk=worker.pk, status=WorkerStatus.BLOCKED).exists()
    return WorkerBlock.objects.filter(worker=worker, researcher=by).exists()


def _locked_ids(workers) -> list[int]:
    """The ids of these workers (instances or ids), their rows locked in id order."""
    ids = [getattr(worker, "pk", worker) for worker in workers]
    return list(Worker.objects.select_for_update().filter(pk__in=ids).order_by("pk")
                .values_list("pk", flat=True))


@transaction.atomic
def workers_block(*, workers, reason: str, by=None, study_rule: bool = False) -> list[int]:
    """Block these workers (instances or ids): globally when `by` is a superuser or None, else
    for `by`'s projects. `study_rule`: a study's automatic rule blocking for its owner `by`,
    whose block is a `WorkerBlock` (the owner's projects) even when `by` is a superuser: a rule
    of one study is no superuser's decision about every study. Blocking again updates the
    reason. A constant number of queries for any number of workers (the admin's "select all"
    blocks a whole fleet in one request); returns the ids blocked."""
    ids = _locked_ids(workers)
    reason = reason.strip()
    if _is_global(by) and not (study_rule and by is not None):
        Worker.objects.filter(pk__in=ids).update(status=WorkerStatus.BLOCKED,
                                                 blocked_reason=reason)
    else:
        WorkerBlock.objects.bulk_create(
            [WorkerBlock(worker_id=pk, researcher=by, reason=reason) for pk in ids],
            update_conflicts=True, unique_fields=["worker", "researcher"],
            update_fields=["reason"])
    # Their judgments stop counting: items they settled collect replacements.
    adaptive_targets_refresh(judgments=Judgment.objects.filter(worker_id__in=ids))
    return ids


@transaction.atomic
def workers_unblock(*, workers, by=None) -> list[int]:
    """Lift the blocks `by` set on these workers (a superuser: the global ones, and their own
    study rules' blocks; None: the global ones); a no-op for a worker without one. Constant
    queries for any number of workers; returns the ids whose block was lifted."""
    ids = _locked_ids(workers)
    lifted: set[int] = set()
    if by is not None:
        own = WorkerBlock.objects.filter(worker_id__in=ids, researcher=by)
        lifted.update(own.values_list("worker_id", flat=True))
        own.delete()
    if _is_global(by):
        blocked = Worker.objects.filter(pk__in=ids).exclude(status=WorkerStatus.ACTIVE,
                                                            blocked_reason="")
        lifted.update(blocked.values_list("pk", flat=True))
        blocked.update(status=WorkerStatus.ACTIVE, blocked_reason="")
    # A researcher's unblock refreshes every worker asked about (another block may remain).
    refresh = sorted(lifted) if _is_global(by) else ids
    if refresh:
        adaptive_targets_refresh(judgments=Judgment.objects.filter(worker_id__in=refresh))
    return sorted(lifted)


def worker_block(*, worker: Worker, reason: str, by=None, study_rule: bool = False) -> Worker:
    """`workers_block` for one worker; returns it as stored."""
    workers_block(workers=[worker], reason=reason, by=by, study_rule=study_rule)
    return Worker.objects.get(pk=worker.pk)


def worker_unblock(*, worker: Worker, by=None) -> Worker:
    """`workers_unblock` for one worker; returns it as stored."""
    workers_unblock(workers=[worker], by=by)
    return Worker.objects.get(pk=worker.pk)


def worker_added_by_hand_researcher(*, provider: str, user):
    """Whose in-house annotator a worker `user` adds by hand on the admin is: `user`'s when
    they are a researcher and it is in-house (their "Ann", as an invitation's is), else none."""
    from annotation.models import Provider

    if provider == Provider.INHOUSE and not getattr(user, "is_superuser", False):
        return user
    return None


def worker_identity_refusal(*, provider: str, external_id: str, researcher,
                            exclude_pk: int | None = None) -> str:
    """Why a worker with this identity cannot be stored ("" when it can), by the database's
    two rules: a crowd worker (or an in-house one of no researcher) once per provider id, an
    in-house annotator once per researcher and id. The admin's worker form asks before it
    saves: it validated neither (the researcher is no field of it), so a taken id was a 500."""
    taken = Worker.objects.filter(provider=provider, external_id=external_id,
                                  researcher=researcher)
    if researcher is None:
        taken = Worker.objects.filter(provider=provider, external_id=external_id,
                                      researcher__isnull=True)
    if exclude_pk is not None:
        taken = taken.exclude(pk=exclude_pk)
    if not taken.exists():
        return ""
    if researcher is not None:
        return f"you already have an in-house annotator with the id {external_id!r}"
    return f"a worker with the id {external_id!r} on this provider already exists"
