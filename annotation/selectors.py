"""Reads shared by the admin, the REST API and the pages: progress counts per project and stage,
which judgments count, who is blocked where. Who may see which project:
annotation/access_selectors.py.

Progress functions take a page of objects and answer with a fixed number of grouped queries
(never one query per row; a draft stage that lists no items adds the read of what publishing it
would choose), so admin change lists and API lists stay O(1) in queries. `Progress` is the one
"counted / wanted" of a project or stage: the admin, the API and the cockpit all show it.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import Avg, Count, Exists, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce

from core.vocabulary import RECRUITING_PROVIDERS

from .access_selectors import projects_visible_to
from .domain.item_content import UNTRIMMED_PATTERN, item_filter_value
from .domain.stage_settings import OPEN_TO_EVERY_WORKER
from .models import (
    COLLECTION_STAGE_KINDS,
    DATA_STAGE_KINDS,
    LIVE_STAGE_STATUSES,
    NON_DATA_STAGE_KINDS,
    UNVERIFIED,
    AdaptiveTarget,
    Assignment,
    AssignmentStatus,
    Item,
    Judgment,
    ParticipantVerification,
    Project,
    Provider,
    ProviderCall,
    ProviderCallStatus,
    Stage,
    StageKind,
    StageStatus,
    TaskKind,
    Worker,
    WorkerBlock,
    WorkerQualification,
    WorkerStatus,
)
from .stage_errors import StageError
from .stage_plan_selectors import (
    DEFAULT_QUALIFICATION_WORKERS,
    HitPlan,
    places_for_plans,
    redundancy_target,
    stage_adaptive_rule,
    stage_items_by_kind,
)

# --- Blocks --------------------------------------------------------------------------------------


def _researchers_of(project: Project) -> QuerySet:
    """Owner and sharers of a project: the researchers whose blocks apply to it."""
    shared = Project.shared_with.through.objects.filter(project_id=project.pk).values("user_id")
    return (WorkerBlock.objects.filter(Q(researcher_id=project.owner_id)
                                       | Q(researcher_id__in=shared))
            .values("worker_id"))


def _blocked_here(project: Project, worker_field: str = "worker") -> Q:
    """The condition "this row's worker is blocked for `project`", as SQL (no id list)."""
    return (Q(**{f"{worker_field}__status": WorkerStatus.BLOCKED})
            | Q(**{f"{worker_field}_id__in": _researchers_of(project)}))


def _blocks_by_researchers_of_its_project(project_path: str = "item__project") -> QuerySet:
    """Blocks of a row's worker (`OuterRef("worker_id")`) by the owner of the row's project
    (`project_path`: a judgment's `item__project`, a qualification result's `stage__project`)
    or a researcher it is shared with: `_researchers_of` for a row of any project."""
    shared = Project.shared_with.through.objects.filter(
        project_id=OuterRef(OuterRef(f"{project_path}_id"))).values("user_id")
    return WorkerBlock.objects.filter(worker_id=OuterRef("worker_id")).filter(
        Q(researcher_id=OuterRef(f"{project_path}__owner_id")) | Q(researcher_id__in=shared))


def blocked_worker_ids_for(project: Project) -> set[int]:
    """Ids of the workers blocked for `project`: blocked globally (a superuser's block,
    `Worker.status`) or by a researcher who owns the project or has it shared with them
    (`WorkerBlock`). Another researcher's block never reaches this project."""
    return set(Worker.objects.filter(
        Q(status=WorkerStatus.BLOCKED) | Q(pk__in=_researchers_of(project))
    ).values_list("pk", flat=True))


def worker_is_blocked_for(*, worker: Worker, project: Project) -> bool:
    """One query, read fresh: a block set while the worker's page was open counts at once."""
    return Worker.objects.filter(pk=worker.pk).filter(
        Q(status=WorkerStatus.BLOCKED) | Q(pk__in=_researchers_of(project))).exists()


# What a door that lifted a block here only says of a worker their provider still blocks.
PROVIDER_BLOCK_STANDS = ("their provider still blocks them (a block sent there by “Block on the "
                         "provider too” or the study's block rule): lift it with the workers "
                         "admin's “Unblock on the provider too”")


def workers_blocked_on_provider(worker_ids: Iterable[int]) -> set[int]:
    """Of these workers, those their provider still blocks: the last block or unblock of
    theirs that a provider carried out (a succeeded `BlockWorker` / `UnblockWorker` call:
    "Block on the provider too", the `block_after_rejections` rule) is a block. A Prolific
    block without a block-list group is local only, and in-house has no provider. Every door
    that lifts a block here only says who stays blocked there (`provider_block_stands_warning`).
    One query whatever the number of workers."""
    last = (ProviderCall.objects.filter(
        worker_id=OuterRef("pk"), operation__in=("BlockWorker", "UnblockWorker"),
        status=ProviderCallStatus.SUCCEEDED)
        .filter(Q(response__local_only__isnull=True) | Q(response__local_only=False))
        .order_by("-completed_at", "-pk"))
    return set(
        Worker.objects.filter(pk__in=list(worker_ids), provider__in=RECRUITING_PROVIDERS)
        .annotate(last_operation=Subquery(last.values("operation")[:1]))
        .filter(last_operation="BlockWorker")
        .values_list("pk", flat=True))


def provider_block_stands_warning(worker_ids: Iterable[int]) -> str:
    """What every door that lifted a block here only (the dashboard's Unblock, the admin's
    "Unblock selected workers", a superuser setting a worker's status back to active on its
    form) says of the workers their provider still blocks (`workers_blocked_on_provider`),
    named (20 at most); "" when it blocks none of them."""
    on_provider = workers_blocked_on_provider(worker_ids)
    if not on_provider:
        return ""
    names = sorted(Worker.objects.filter(pk__in=on_provider)
                   .values_list("external_id", flat=True))
    more = f" and {len(names) - 20} more" if len(names) > 20 else ""
    return f"Unblocked here only: {', '.join(names[:20])}{more}: {PROVIDER_BLOCK_STANDS}."


# --- Which judgments count ---------------------------------------------------------------------

# STARC's practice rule: a multiple-choice participant who failed a practice item is out of it.


def practice_answers_wrong(project: Project | None = None) -> QuerySet[Judgment]:
    """THE practice rule of multiple-choice (STARC) projects: the answers to a practice item
    (`Item.is_practice`, every participant answers those first) that are not its correct
    answer (the item's gold choice; role A, the STARC correct answer, where it names none).
    "Participants who did not answer both practice trials correctly were excluded from the
    analysis": every answer of such a worker in the project is out of the counting rule
    (`judgments_that_count`), gives its redundancy slot back (`judgments_releasing_slots`), is
    left out of the STARC analytics and earns no bonus per correct answer. Likert and A/B
    projects read practice accuracy as a worker-quality number only."""
    wrong = Judgment.objects.filter(item__is_practice=True, item__project__kind=TaskKind.MC)
    if project is not None:
        wrong = wrong.filter(item__project=project)
    # KeyTextTransform, not KT: KT("item__gold__choice") reads keys of `item`, not the item's
    # gold (the SQL applied #>> to the item id on PostgreSQL).
    return wrong.exclude(choice=Coalesce(KeyTextTransform("choice", "item__gold"), Value("A")))


def practice_failed_worker_ids(project: Project) -> set[int]:
    """The workers `practice_answers_wrong` excludes from `project` (none unless multiple
    choice)."""
    if project.kind != TaskKind.MC:
        return set()
    return set(practice_answers_wrong(project).values_list("worker_id", flat=True).distinct())


def _failed_practice(project: Project | None) -> Q:
    """The condition "this judgment is data of a worker who failed the practice of its
    project" (their practice answers themselves stay: they are what shows the failure), as SQL;
    an empty condition for a project that is not multiple choice."""
    if project is not None:
        # The few failed workers first, as a literal list (as `counting_fingerprint` reads the
        # blocked ones): a correlated subquery per judgment of a large project costs more.
        failed = sorted(practice_failed_worker_ids(project))
        return Q(item__is_practice=False, worker_id__in=failed) if failed else Q(pk__in=[])
    wrong = practice_answers_wrong().filter(worker_id=OuterRef("worker_id"),
                                            item__project_id=OuterRef("item__project_id"))
    # The kind first: the subquery is probed only for multiple-choice projects' judgments.
    return Q(item__project__kind=TaskKind.MC, item__is_practice=False) & Q(Exists(wrong))


# Work the study did not accept: rejected on review, returned (a participant asked to return the
# study, or an assignment the provider says was returned), or flagged because the provider never
# listed the submission. Accepted and still-pending work (in progress, submitted, approved)
# counts, and so do judgments without an assignment (imported ones).
NOT_COUNTED_ASSIGNMENT_STATUSES = (AssignmentStatus.REJECTED, AssignmentStatus.RETURNED,
                                   AssignmentStatus.FLAGGED)


# The MTurk operation that re-offers a slot given back (one extra assignment per call, the
# call keyed by the assignment whose slot it replaces: annotation/services/replacements.py).
REOFFER_OPERATION = "CreateAdditionalAssignmentsForHIT"
# The Prolific operation that adds a place to a study for a slot given back by work Prolific
# keeps the place of (approved, then its worker blocked): one call per such assignment, keyed
# by it (annotation/services/replacements.py).
PROLIFIC_REOFFER_OPERATION = "UpdateStudyPlaces"


def prolific_study_places(*, stage: Stage) -> int:
    """The places of the stage's Prolific study: the batches its pages hand out for the HITs
    as built (`places_for_plans`), plus one per place the sync added and recorded into a HIT
    (each grew its HIT by one assignment: taken back out of the HIT before the plan is read).
    The one count publishing creates the study with, the cost estimate charges and
    `stage_collection_complete` waits for."""
    grown = Counter(ProviderCall.objects.filter(
        stage=stage, operation=PROLIFIC_REOFFER_OPERATION, response__recorded=True,
    ).values_list("hit_id", flat=True))
    plans = [HitPlan(items=list(hit.items.all()), split="",
                     max_assignments=hit.max_assignments - grown[hit.pk])
             for hit in stage.hits.prefetch_related("items")]
    return places_for_plans(stage=stage, plans=plans) + sum(grown.values())


def reoffers_not_grown(calls: QuerySet) -> QuerySet:
    """The re-offer calls of `calls` not yet grown into their HIT (no `"recorded": true` in
    their response). Not `.exclude(response__recorded=True)`: in SQL a response without the
    key compares as NULL, and NOT NULL drops the row, so every call a crash left unrecorded
    was skipped (on SQLite and PostgreSQL alike)."""
    return calls.filter(Q(response__recorded__isnull=True) | ~Q(response__recorded=True))


def qualification_results_that_count(queryset: QuerySet[WorkerQualification] | None = None
                                      ) -> QuerySet[WorkerQualification]:
    """The qualification results that qualify, as `judgments_that_count` counts work: not one
    graded from an assignment that was rejected (work rejected as spam passes no one, whatever
    its answers scored), nor one graded from work the provider has not vouched for
    (`Assignment.verification` PENDING or FAILED, as `judgments_that_count` leaves such work
    out: a Prolific session not verified, an MTurk assignment admitted over its HIT's local
    count and not listed by MTurk; it qualifies once the provider does). A result stored before
    results named their assignment reads the worker's assignments in the stage: any rejected one
    leaves it out. The gates (in-house and provider task pages, link readiness), the provider
    grant, the messages to qualified workers and progress (takers and passed) read this rule;
    the result itself is kept for the record."""
    queryset = WorkerQualification.objects.all() if queryset is None else queryset
    rejected_before_named = Assignment.objects.filter(
        worker_id=OuterRef("worker_id"), stage_id=OuterRef("stage_id"),
        status=AssignmentStatus.REJECTED)
    return (queryset.exclude(assignment__status=AssignmentStatus.REJECTED)
            .exclude(assignment__verification__in=UNVERIFIED)
            .exclude(Q(assignment__isnull=True) & Exists(rejected_before_named)))


def qualification_results_awaiting_provider(queryset: QuerySet[WorkerQualification]
                                             ) -> QuerySet[WorkerQualification]:
    """Of `queryset`, the results left out by `qualification_results_that_count` only because
    the provider has not vouched for their work yet (PENDING, not rejected): the pages and the
    link check say "waiting", not "rejected", to such a worker."""
    return queryset.filter(assignment__verification=ParticipantVerification.PENDING).exclude(
        assignment__status=AssignmentStatus.REJECTED)


def stage_awaits_qualified_workers(stage: Stage) -> str:
    """What publishing `stage` cannot say by its counts alone ("" when nothing): it requires a
    qualification nobody has passed yet (by the rule above), so no one can take its work until
    somebody does; the researcher reads it beside "published" instead of waiting for work."""
    required = stage.requires_stage
    if required is None or qualification_results_that_count(
            WorkerQualification.objects.filter(stage=required, passed=True)).exists():
        return ""
    return (f"only workers who pass {required.name} can take it, and nobody has passed it yet: "
            f"work arrives once {required.name} has takers who pass")


# The stages a project's qualification is meant to gate: a stage of these kinds that requires
# no qualification is published only when it says so (`stage_open_gate_problem`).
QUALIFICATION_GATED_KINDS = (StageKind.TRIAL, StageKind.FULL)


def stage_open_gate_problem(stage: Stage) -> str:
    """Why publishing `stage` would let in workers the researcher meant to qualify ("" when
    nothing): a trial or full stage of a project with a qualification stage (any status: a
    draft one is a qualification planned; an imported one grades nobody here) that requires
    none would take every worker, qualified or not, and pay them for a whole collection;
    published on purpose only with the setting `open_to_every_worker`. A stage that both
    requires a qualification and says it is open to every worker says two things: refused
    until one is cleared. The rule of publishing (`requirement_guard`, every door) and of what
    a draft shows before it (the cockpit, the stage page)."""
    settings = stage.settings if isinstance(stage.settings, dict) else {}
    open_on_purpose = settings.get(OPEN_TO_EVERY_WORKER) is True
    if stage.requires_stage_id is not None:
        if not open_on_purpose:
            return ""
        return (f"{stage} requires {stage.requires_stage.name} and its setting "
                f"{OPEN_TO_EVERY_WORKER} (“Open to every worker”) says every worker may work "
                "here: choose one — clear “Open to every worker” to keep the qualification, "
                "or clear “Requires stage” to open the stage on purpose")
    if stage.kind not in QUALIFICATION_GATED_KINDS or open_on_purpose:
        return ""
    qualifications = list(Stage.objects.filter(project_id=stage.project_id,
                                               kind=StageKind.QUALIFICATION)
                          .exclude(provider=Provider.IMPORT).exclude(pk=stage.pk)
                          .order_by("order", "pk"))
    if not qualifications:
        return ""
    named = ", ".join(f"{q.name} ({q.get_provider_display()}, {q.get_status_display().lower()})"
                      for q in qualifications)
    same = [q for q in qualifications if q.provider == stage.provider]
    opt_out = (f"say on purpose that the stage is open to every worker: its setting "
               f"{OPEN_TO_EVERY_WORKER} (“Open to every worker”) set to yes")
    way = (f"Set “Requires stage” to {same[0].name}, so only the workers who pass it work "
           f"here, or {opt_out}" if same else
           f"None of them is on {stage.get_provider_display()} (a qualification grants nothing "
           "on another provider), so none can be required here: add the stage on the "
           f"qualification's provider, or {opt_out}")
    return (f"{stage} requires no qualification, but its project qualifies workers in "
            f"{named}: published like this, every worker could work here, qualified or not, "
            f"and be paid for it. {way}")


def judgments_that_count(queryset: QuerySet[Judgment] | None = None, *,
                         project: Project | None = None, data_stages_only: bool = True,
                         include_rejected: bool = False,
                         awaiting_provider: bool = False) -> QuerySet[Judgment]:
    """THE counting rule, used by exports, aggregates, reports, dashboards, progress (admin, API,
    cockpit), stage gates and LERC datasets. A judgment counts when

    - it is data: its stage is not practice or qualification, and its item is not a practice
      item (`Item.is_practice`: every worker answers those first, in any stage, to learn the
      task) nor removed from the study (`Item.excluded`: an improper question, an exact-match
      candidate; progress, the metric report, the estimates, the judges and LERC leave those
      items out, so every other door does too). `data_stages_only=False` brings all three
      back. Practice and qualification work tests the workers, not the items; it is kept apart
      and read with `data_stages_only=False` (worker-quality numbers, `--include-qualification`);
    - its assignment was not rejected, returned or flagged (NOT_COUNTED_ASSIGNMENT_STATUSES),
      and the provider vouched for it (`Assignment.verification` not PENDING or FAILED): on
      Prolific, its session was verified (annotation/services/assignments/verification.py);
      on MTurk, work admitted over its HIT's local count was listed by MTurk as submitted
      (`annotation/services/assignments/lifecycle.py:_over_admission`);
    - its worker is not blocked for its project (`blocked_worker_ids_for`: a global block or
      one by the project's owner or a researcher it is shared with);
    - multiple choice (STARC): its worker answered every practice item of the project
      correctly (`practice_answers_wrong`); the wrong practice answers themselves stay, read
      with `data_stages_only=False` like all practice work.

    Gold/attention-check items are data like any other item: their judgments count (gold
    accuracy is read from them too); they are only outside a stage's redundancy plan
    (`stage_progress`) and are not study items (`items_measured_on`): no metric, judge,
    estimate or leaderboard is measured on them, and no preference pair is made of them unless
    asked (`preference_rows`).

    `awaiting_provider=True` gives instead the judgments that meet every condition but the
    provider's (PENDING: they count once it lists or verifies their work; `Progress.awaiting`).
    `include_rejected=True` drops the last three conditions (audits: `export_data
    --include-rejected`). With `project` the blocked-worker condition reads that project's
    blocks once; without it (progress over the stages of many projects) each judgment is
    checked against its own item's project.
    """
    queryset = Judgment.objects.all() if queryset is None else queryset
    if project is not None:
        queryset = queryset.filter(item__project=project)
    if data_stages_only:
        queryset = queryset.exclude(stage__kind__in=NON_DATA_STAGE_KINDS).exclude(
            item__is_practice=True).exclude(item__excluded=True)
    if include_rejected:
        return queryset
    queryset = queryset.exclude(assignment__status__in=NOT_COUNTED_ASSIGNMENT_STATUSES)
    if awaiting_provider:  # those that count once the provider vouches for them, nothing else
        queryset = queryset.filter(assignment__verification=ParticipantVerification.PENDING)
    else:
        queryset = queryset.exclude(assignment__verification__in=UNVERIFIED)
    queryset = queryset.exclude(_failed_practice(project))
    if project is not None:
        return queryset.exclude(_blocked_here(project))
    return queryset.exclude(worker__status=WorkerStatus.BLOCKED).exclude(
        Exists(_blocks_by_researchers_of_its_project()))


def provider_paid_filter() -> Q:
    """Assignments whose reward the provider paid: approved here, or approved by the provider
    itself while we held the work (MTurk's auto-approval of flagged work, recorded by the sync
    as a succeeded approve call: `annotation/services/review/sync.py:_held_paid_record`),
    whatever the researcher decided after. Money spent counts them (`stage_paid`), and a
    Prolific submission among them keeps its place on Prolific (`prolific_places_owed`)."""
    return Q(status=AssignmentStatus.APPROVED) | Exists(ProviderCall.objects.filter(
        assignment=OuterRef("pk"), operation="ApproveAssignment",
        status=ProviderCallStatus.SUCCEEDED))


def items_measured_on(project: Project) -> QuerySet[Item]:
    """THE study items: the items a metric or judge is measured on against the humans, and the
    population the system estimates and the judge plan estimate over. Read by the metric
    report (page, `metric_report`, its API), the judges report (page, `judge_report`, its
    API), the judge plan and the estimates, so each says the same n (`measured_on_summary`),
    and by the leaderboard (`board_mask`) and the preference pairs for training
    (`preference_rows`: a gold check is a pair only when asked for).

    An item is study data unless it is
    - a practice item or excluded from the study (as `judgments_that_count`);
    - a gold/attention check (`Item.is_gold_check`): the researcher chose it for its known
      answer to test the workers, it is mixed in outside the redundancy plan and is no sample
      of the systems' answers; its answer key is not a human judgment of the study, and its
      workers' judgments measure the workers (gold accuracy), not a metric;
    - released only in a qualification stage: listed on a qualification and on no data
      stage, and judged in none (its answers test the workers, as a qualification's do).
    Rule and reasons: docs/ANALYSIS.md "Which items a metric or judge is measured on"."""
    return Item.objects.filter(project=project, is_practice=False, excluded=False,
                               is_gold_check=False).exclude(
        pk__in=qualification_only_items(project).values("pk"))


def qualification_only_items(project: Project) -> QuerySet[Item]:
    """The project's items released in a qualification stage that no data stage lists and no
    data stage's judgment is on: not study items (`items_measured_on`)."""
    in_data_stage = Item.objects.filter(project=project, stages__kind__in=DATA_STAGE_KINDS)
    judged_as_data = Judgment.objects.filter(item__project=project).exclude(
        stage__kind__in=NON_DATA_STAGE_KINDS)
    return (Item.objects.filter(project=project, stages__kind=StageKind.QUALIFICATION)
            .exclude(pk__in=in_data_stage.values("pk"))
            .exclude(pk__in=judged_as_data.values("item_id")).distinct())


def measured_on_summary(*, n_items: int, n_labelled: int, n_imported: int = 0) -> dict:
    """How every door that compares a metric or judge with the humans says its n: `n_labelled`
    of the `n_items` study items (`items_measured_on`) carry a human label from judgments that
    count; `n_imported` others are scored by the human score their file gave them (the
    metric report only: a MOCHA file's mean score)."""
    text = (f"{n_labelled} of {n_items} study items carry a human label from judgments that "
            "count")
    if n_imported:
        text += f", {n_imported} the human score their file gave them"
    text += ("; gold checks, practice items, items released only in a qualification and "
             "excluded items are not study items")
    return {"items": n_items, "labelled": n_labelled, "imported": n_imported, "text": text}


def judgments_releasing_slots(queryset: QuerySet[Judgment] | None = None, *,
                               project: Project | None = None) -> QuerySet[Judgment]:
    """THE rule of a redundancy slot given back: the judgments that will never count, so the
    slot each one took in its item's redundancy is offered to another worker. An item's
    filled slots are its judgments in the stage that count (`judgments_that_count`) plus those
    that still could: a Prolific session being verified (presumed real until the provider
    says otherwise) and, beside the judgments, the live assignments holding the item. What is
    left is given back: rejected, returned or flagged work, a session the provider does not
    know, a worker blocked for the project, a multiple-choice worker who failed its practice
    (`practice_answers_wrong`).

    Read by every door that enforces redundancy: picking for in-house and Prolific pages
    (`annotation/services/assignments/picking.py`, fixed redundancy), the adaptive targets
    (`annotation/services/redundancy.py`), MTurk's extra assignments
    (`annotation/services/replacements.py`) and the progress line (`Progress.reoffered`).
    Without `project`, each judgment is checked against its own item's project's blocks."""
    queryset = Judgment.objects.all() if queryset is None else queryset
    given_back = (Q(assignment__status__in=NOT_COUNTED_ASSIGNMENT_STATUSES)
                  | Q(assignment__verification=ParticipantVerification.FAILED)
                  | _failed_practice(project))
    if project is not None:
        return queryset.filter(item__project=project).filter(given_back | _blocked_here(project))
    return queryset.filter(given_back | Q(worker__status=WorkerStatus.BLOCKED)
                           | Q(Exists(_blocks_by_researchers_of_its_project())))


def data_only_for(*, stage: Stage | None = None, include_qualification: bool = False) -> bool:
    """Whether a read of `stage` (or of the whole project when None) keeps to data
    (`judgments_that_count(data_stages_only=...)`): yes for the project and for a data stage,
    unless practice and qualification work is asked for; no for a practice or qualification
    stage, whose every judgment tests a worker (reading one is asking for that work)."""
    if include_qualification:
        return False
    return stage is None or stage.kind not in NON_DATA_STAGE_KINDS


def counting_fingerprint(*, project: Project) -> str:
    """What the counting rule depends on besides the judgments themselves, which are
    append-only: the not-counted (or not yet verified) assignments and the blocked workers
    (a STARC practice answered wrongly is a judgment: the watermark sees it).
    Cached reports compare it, since rejecting work, verifying a session or blocking a worker
    adds no judgment."""
    # Read from the few not-counted assignments and blocked workers, each probing the judgment
    # indexes for one judgment here, rather than by joining every judgment of the project
    # (0.7 s at a million judgments, on every cached report read).
    here = Judgment.objects.filter(item__project=project)
    excluded = Assignment.objects.filter(Q(status__in=NOT_COUNTED_ASSIGNMENT_STATUSES)
                                         | Q(verification__in=UNVERIFIED))\
        .filter(Exists(here.filter(assignment_id=OuterRef("pk"))))\
        .values_list("pk", flat=True).order_by("pk")
    # Only the blocked workers who worked here: a block elsewhere leaves this cache alone. The
    # blocked ids come first, as a literal list: with a subquery PostgreSQL may hash-join every
    # judgment of the project before it learns that no one is blocked.
    blocked_ids = sorted(blocked_worker_ids_for(project))
    blocked = sorted(here.filter(worker_id__in=blocked_ids).order_by().distinct()
                     .values_list("worker_id", flat=True)) if blocked_ids else []
    return f"{blocked}:{list(excluded)}"


def judgment_time_ms() -> Coalesce:
    """THE time a judgment took, as an expression: the server's measure
    (`Judgment.server_time_ms`), else what the browser reported (imported judgments, or stored
    before the server measured). A browser can claim anything: every statistic of a worker's
    speed (the dashboard, the worker's page, review rules) reads this one."""
    return Coalesce("server_time_ms", "time_spent_ms")


# --- Items and judgments ------------------------------------------------------------------------


def items_in_stage(*, stage: Stage) -> QuerySet[Item]:
    """Items released in a stage: its explicit items, or every non-excluded project item when
    the stage names none (see Stage.items)."""
    if stage.items.exists():
        return stage.items.filter(excluded=False)
    return Item.objects.filter(project_id=stage.project_id, excluded=False)


def stage_ids_to_sync() -> list[int]:
    """The stages a provider sync is due for: every stage live on a provider, and every closed
    stage not yet fully reconciled (workers who accepted before the HITs expired can still
    submit, and MTurk auto-approves what stays undecided: `Stage.reconciled_at` is set by the
    sync once nothing more can arrive and every submission is decided)."""
    return list(Stage.objects.filter(
        Q(status__in=LIVE_STAGE_STATUSES)
        | Q(status=StageStatus.CLOSED, reconciled_at__isnull=True),
        provider__in=RECRUITING_PROVIDERS,
    ).order_by("pk").values_list("pk", flat=True))


def item_list(*, project: Project, filters: dict | None = None) -> QuerySet[Item]:
    """A project's items, filtered by dataset, split, source, domain, text_level and stage."""
    filters = filters or {}
    queryset = Item.objects.filter(project=project).select_related("project")
    for name in ("dataset", "split", "source", "domain", "text_level"):
        if filters.get(name):
            queryset = queryset.filter(**{name: item_filter_value(name, filters[name])})
    stage = filters.get("stage")
    if stage is not None:
        queryset = queryset.filter(pk__in=items_in_stage(stage=stage).values("pk"))
    return queryset.order_by("id")


def judgment_list(*, project: Project, filters: dict | None = None) -> QuerySet[Judgment]:
    """A project's judgments that count (`judgments_that_count`, as in exports), oldest first,
    filtered by stage, worker, split, dataset and id; `include_qualification` adds practice
    and qualification judgments, `include_rejected` unaccepted work (audits)."""
    filters = filters or {}
    data_stages_only = not filters.get("include_qualification")
    queryset = judgments_that_count(
        Judgment.objects.filter(item__project=project), project=project,
        data_stages_only=data_stages_only,
        include_rejected=bool(filters.get("include_rejected")),
    ).select_related("item", "worker", "stage", "assignment")
    # `counts`, as the export's column: whether the study counts the judgment (an audit's
    # blocked workers' approved work says so nowhere else).
    counting = judgments_that_count(Judgment.objects.filter(item__project=project),
                                    project=project, data_stages_only=data_stages_only)
    queryset = queryset.annotate(counts=Exists(counting.filter(pk=OuterRef("pk")))) \
        if filters.get("include_rejected") else queryset.annotate(counts=Value(True))
    if filters.get("stage") is not None:
        queryset = queryset.filter(stage=filters["stage"])
    if filters.get("worker"):
        queryset = queryset.filter(worker__external_id=filters["worker"])
    for name in ("dataset", "split", "source"):
        if filters.get(name):
            queryset = queryset.filter(**{f"item__{name}": item_filter_value(name,
                                                                            filters[name])})
    if filters.get("item"):
        queryset = queryset.filter(item__external_id=filters["item"])
    if filters.get("after_id") is not None:
        # Cursor for incremental pulls: only judgments stored after the last one seen.
        queryset = queryset.filter(pk__gt=filters["after_id"])
    return queryset.order_by("id")


# --- Progress -----------------------------------------------------------------------------------


@dataclass
class Progress:
    """What a project or stage collects against what it wants, said once for every page that
    shows it (admin lists and forms, the stage API, the cockpit):

    - `items`: the items whose judgments it wants. A data stage's (and a project's) regular
      items: released (listed on the stage; a draft listing none, what publishing would choose;
      a live stage listing none, every item of the project), not excluded, and neither practice
      items (every worker answers those first, outside the redundancy) nor gold/attention checks
      (mixed in at the gold rate, outside the redundancy). A practice or qualification stage's
      own items.
    - `wanted`: the judgments its plan asks for, each item × its redundancy target
      (`redundancy_target`: the stage's `judgments_per_item`, else the project's per split);
      under adaptive redundancy each item's current target (`AdaptiveTarget`, less the
      replacements it makes room for; the rule's `min` before any judgment), what picking and
      "collection complete" work by; a qualification: every item for each of its
      `max_takers`; None where nothing is planned (an imported stage).
    - `judgments`: the judgments on those items that count (`judgments_that_count`; in a
      practice or qualification stage, its accepted work), and `not_counted`: those collected
      on them but not counted (rejected, returned, flagged or unverified work, a blocked
      worker); in a qualification, in takers (the workers with answers that do not count).
    - A qualification is counted in takers: graded (`takers`) and `passed`, of `max_takers`;
      a worker blocked for the project is no taker (the rule of `judgments_that_count`), nor
      one whose qualification work was rejected (`qualification_results_that_count`).
    - `awaiting` (0 for a qualification, counted in takers): of
      `not_counted`, the judgments whose work waits for the provider to list or verify it
      (`Assignment.verification` PENDING, not rejected, returned or flagged): a Prolific
      session not verified yet, an MTurk assignment admitted over its HIT's local count
      (`annotation/services/assignments/lifecycle.py:_over_admission`) that MTurk has not
      listed as submitted yet. They count once it does, and never if it does not.
    - `reoffered`: the slots given back and offered to other workers (a stage's; 0 for a
      project): on in-house and Prolific pages each judgment on those items that gives its
      slot back (`judgments_releasing_slots`), served again by picking; on MTurk, in the same
      unit, a judgment per regular item of the HIT for each extra assignment created for them
      (`annotation/services/replacements.py`).
    - `places_added`: Prolific, the places the sync added to the study for approved work given
      back (Prolific reopens a rejected or returned submission's place itself); 0 elsewhere.
    - `imported` (a project's): the judgments that count gathered elsewhere, an imported
      stage's (expert labels from a file). They are data for reports and exports like any
      (`judgments_that_count`), but no collection stage asked for them: a project's
      `judgments` are its collection stages' and fill its plan; the imported are said apart
      ("+ 260 imported"). "310 counted, 170 beyond the 140 wanted" read as a finished study
      whose crowd collection was at 8%. 0 for a stage (an imported stage counts its own).
    """

    items: int = 0
    judgments: int = 0
    wanted: int | None = 0
    not_counted: int = 0
    awaiting: int = 0
    assignments: dict[str, int] = field(default_factory=dict)
    takers: int | None = None
    passed: int | None = None
    max_takers: int | None = None
    reoffered: int = 0
    places_added: int = 0
    imported: int = 0

    def reoffered_text(self, *, stage_open: bool = True) -> str:
        """"2 slots of work that does not count re-offered to other workers" (and, on
        Prolific, "; 1 place added to the study for them"; "" for none). stage_open: False
        for a stage that serves nobody any more (reviewing, closed): its slots are given back
        but nobody fills them ("re-offered to other workers" beside a closed trial promised
        work that will not come)."""
        if not self.reoffered:
            return ""
        slots = (f"{self.reoffered} slot{'s' if self.reoffered != 1 else ''} of work that does "
                 f"not count (rejected, a blocked worker, ...)")
        if not stage_open:
            return f"{slots} left unfilled: the stage no longer serves anyone"
        places = (f"; {self.places_added} place{'s' if self.places_added != 1 else ''} added "
                  f"to the Prolific study for them" if self.places_added else "")
        return f"{slots} re-offered to other workers{places}"

    @property
    def unit(self) -> str:
        return "takers" if self.max_takers is not None else "judgments"

    @property
    def counted(self) -> int:
        """What counts, in the unit: judgments, or a qualification's graded takers."""
        return (self.takers or 0) if self.unit == "takers" else self.judgments

    @property
    def planned(self) -> int | None:
        """What is wanted, in the unit (None: no plan)."""
        return self.max_takers if self.unit == "takers" else self.wanted

    @property
    def percent(self) -> int:
        if not self.planned:
            return 100 if self.counted else 0
        return min(100, round(100 * self.counted / self.planned))

    @property
    def beyond_plan(self) -> int:
        return max(0, self.counted - self.planned) if self.planned is not None else 0

    def text(self) -> str:
        """The one sentence every page shows: "5 of 24 judgments counted (21%)", with the
        judgments imported beside it (a project's: "+ 260 imported"), what was collected but
        not counted, beyond the plan, or (a qualification) passed."""
        if self.planned is None and self.imported and not self.counted:
            main = f"{self.imported} imported {self.unit}; no collection stage"
        elif self.planned is None:
            main = f"{self.counted} {self.unit} counted"
        elif self.beyond_plan:
            # Imported studies often hold more judgments than the redundancy asks for (LFQA:
            # 260 expert judgments of 140 items); "260 of 140 (100%)" read as an error.
            main = (f"{self.counted} {self.unit} counted, {self.beyond_plan} beyond the "
                    f"{self.planned} wanted")
        else:
            main = f"{self.counted} of {self.planned} {self.unit} counted ({self.percent}%)"
        if self.imported and not main.startswith(f"{self.imported} imported"):
            main += f" + {self.imported} imported"
        extra = []
        if self.passed is not None:
            extra.append(f"{self.passed} passed")
        if self.not_counted > self.awaiting:
            extra.append(f"{self.not_counted - self.awaiting} collected but not counted "
                         f"(rejected, returned, flagged or a blocked worker)")
        if self.awaiting:
            extra.append(f"{self.awaiting} waiting for the provider to list or verify their "
                         f"work (counted once it does)")
        return main + (f"; {'; '.join(extra)}" if extra else "")

    @property
    def assignments_total(self) -> int:
        return sum(self.assignments.values())

    def assignments_summary(self) -> str:
        labels = dict(AssignmentStatus.choices)
        return ", ".join(
            f"{count} {labels.get(status, status).split(' ')[0].lower()}"
            for status, count in sorted(self.assignments.items())
            if count
        )

    def as_dict(self) -> dict:
        return {
            "items": self.items,
            "judgments": self.judgments,
            "not_counted": self.not_counted,
            "awaiting": self.awaiting,
            "wanted": self.wanted,
            "percent": self.percent,
            "takers": self.takers,
            "passed": self.passed,
            "max_takers": self.max_takers,
            "reoffered": self.reoffered,
            "places_added": self.places_added,
            "imported": self.imported,
            "text": self.text(),
            "assignments": dict(self.assignments),
        }


def _regular(prefix: str = "") -> Q:
    """The items whose judgments a data stage or project wants (`prefix`: the path to the
    item): not practice items, not gold/attention checks."""
    return Q(**{f"{prefix}is_practice": False, f"{prefix}is_gold_check": False})


# Judgments gathered elsewhere (`judgment_path`: the path to the judgment): an imported stage's,
# whatever its kind says, as `stage_progress` reads a stage with no plan.
def _imported(judgment_path: str = "") -> Q:
    return (Q(**{f"{judgment_path}stage__kind": StageKind.IMPORTED})
            | Q(**{f"{judgment_path}stage__provider": Provider.IMPORT}))


def _grouped_count(queryset: QuerySet[Judgment], key: str) -> dict[int, int]:
    return dict(queryset.order_by().values_list(key).annotate(n=Count("id"))
                .values_list(key, "n"))


def _counted_and_collected(judgments: QuerySet[Judgment], key: str
                           ) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """Per `key` (a judgment field path): the judgments that count (`judgments_that_count`,
    each against its own project's blocks; `judgments` is already restricted to data), all of
    them, and those that count once the provider lists or verifies their work
    (`Progress.awaiting`: not a blocked worker's, say). Two grouped queries."""
    waits = judgments_that_count(judgments, data_stages_only=False, awaiting_provider=True)
    collected: dict[int, int] = {}
    awaiting: dict[int, int] = {}
    for group, n, waiting in (judgments.order_by().values_list(key).annotate(
            n=Count("id"), waiting=Count("id", filter=Q(pk__in=waits.values("pk"))))
            .values_list(key, "n", "waiting")):
        collected[group], awaiting[group] = n, waiting
    return (_grouped_count(judgments_that_count(judgments, data_stages_only=False), key),
            collected, awaiting)


def project_progress(*, projects: Sequence[Project]) -> dict[int, Progress]:
    """Progress per project id (its collection stages together against its regular items ×
    their redundancy, the imported judgments apart: `Progress`), in five grouped queries
    whatever the number of projects."""
    by_id = {p.pk: p for p in projects}
    result = {pk: Progress() for pk in by_id}
    if not by_id:
        return result
    item_rows = (
        Item.objects.filter(_regular(), project_id__in=by_id, excluded=False)
        .values("project_id", "split")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in item_rows:
        progress = result[row["project_id"]]
        progress.items += row["n"]
        progress.wanted += row["n"] * by_id[row["project_id"]].redundancy_for(row["split"])
    data = (Judgment.objects.filter(_regular("item__"), item__project_id__in=by_id,
                                    item__excluded=False)
            .exclude(stage__kind__in=NON_DATA_STAGE_KINDS))
    counted, collected, awaiting = _counted_and_collected(data, "item__project_id")
    imported = _grouped_count(judgments_that_count(data.filter(_imported()),
                                                   data_stages_only=False), "item__project_id")
    collecting = set(Stage.objects.filter(project_id__in=by_id, kind__in=COLLECTION_STAGE_KINDS)
                     .exclude(provider=Provider.IMPORT).values_list("project_id", flat=True))
    for pk, progress in result.items():
        progress.imported = imported.get(pk, 0)
        progress.judgments = counted.get(pk, 0) - progress.imported
        progress.not_counted = collected.get(pk, 0) - counted.get(pk, 0)
        progress.awaiting = min(awaiting.get(pk, 0), progress.not_counted)
        if pk not in collecting:
            # Nothing is being collected (judgments imported with the items, no stage yet):
            # "0 of 1525 judgments counted (0%)" read as a study stalled at its start.
            progress.wanted = None
    assignment_rows = (
        Assignment.objects.filter(stage__project_id__in=by_id)
        .values("stage__project_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in assignment_rows:
        result[row["stage__project_id"]].assignments[row["status"]] = row["n"]
    return result


def _planned_by_kind(stage: Stage) -> list[tuple[str, int]]:
    """(split, items) of what publishing a draft that lists no items would release (the seeded
    choice `stage_items_by_kind` makes), its regular items only; [] when it would release
    none."""
    try:
        chosen = stage_items_by_kind(stage=stage, only=("split", "is_practice", "is_gold_check"))
    except StageError:
        return []
    if stage.kind not in NON_DATA_STAGE_KINDS:
        chosen = [item for item in chosen if not (item.is_practice or item.is_gold_check)]
    return sorted(Counter(item.split for item in chosen).items())


def stage_progress(*, stages: Sequence[Stage]) -> dict[int, Progress]:
    """Progress per stage id (`Progress`: what each stage wants and what counts of it) in at
    most nine grouped queries, plus the choice of each draft that lists no items (what
    publishing it would release). `stages` should come with `select_related("project")` (the
    project's redundancy decides what is wanted)."""
    by_id = {s.pk: s for s in stages}
    result = {pk: Progress() for pk in by_id}
    if not by_id:
        return result
    splits: dict[int, list[tuple[str, int]]] = defaultdict(list)

    # Listed items: a data stage wants its regular ones, a practice or qualification stage all.
    listed: set[int] = set()
    through = Stage.items.through
    for row in (
        through.objects.filter(stage_id__in=by_id, item__excluded=False)
        .values("stage_id", "item__split")
        .annotate(n=Count("id"), regular=Count("id", filter=_regular("item__")))
        .order_by()
    ):
        listed.add(row["stage_id"])
        data = by_id[row["stage_id"]].kind not in NON_DATA_STAGE_KINDS
        splits[row["stage_id"]].append((row["item__split"], row["regular" if data else "n"]))
    # A draft listing none releases what its kind chooses; a live stage listing none serves
    # every item of its project (`items_in_stage`).
    drafts = [s for s in stages if s.pk not in listed and s.status == StageStatus.DRAFT
              and s.provider != Provider.IMPORT]
    for stage in drafts:
        splits[stage.pk] = _planned_by_kind(stage)
    implicit = [s for s in stages if s.pk not in listed and s not in drafts]
    if implicit:
        per_project: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
        for row in (
            Item.objects.filter(project_id__in={s.project_id for s in implicit}, excluded=False)
            .values("project_id", "split")
            .annotate(n=Count("id"), regular=Count("id", filter=_regular()))
            .order_by()
        ):
            per_project[row["project_id"]].append((row["split"], row["n"], row["regular"]))
        for stage in implicit:
            data = stage.kind not in NON_DATA_STAGE_KINDS
            splits[stage.pk] = [(split, regular if data else n)
                                for split, n, regular in per_project.get(stage.project_id, [])]

    qualifications = [pk for pk, s in by_id.items() if s.kind == StageKind.QUALIFICATION]
    # A taker counts as a judgment does (`judgments_that_count`): a worker blocked for the
    # project, or whose qualification work was rejected (`qualification_results_that_count`),
    # is no taker ("3 of 3 takers counted" while one of them was blocked or rejected).
    takers = {row["stage_id"]: row for row in (
        qualification_results_that_count(
            WorkerQualification.objects.filter(stage_id__in=qualifications))
        .exclude(worker__status=WorkerStatus.BLOCKED)
        .exclude(Exists(_blocks_by_researchers_of_its_project("stage__project")))
        .values("stage_id")
        .annotate(n=Count("id"), passed=Count("id", filter=Q(passed=True))).order_by()
    )} if qualifications else {}
    for pk, stage in by_id.items():
        progress = result[pk]
        progress.items = sum(n for _split, n in splits[pk])
        if stage.provider == Provider.IMPORT or stage.kind == StageKind.IMPORTED:
            # Gathered elsewhere (imported qualification answers too): no plan to fall short of
            # or exceed.
            progress.wanted = None
        elif stage.kind == StageKind.QUALIFICATION:
            # Every taker answers every item once: what it collects is takers.
            progress.max_takers = int((stage.settings or {}).get(
                "max_workers", DEFAULT_QUALIFICATION_WORKERS))
            progress.wanted = progress.items * progress.max_takers
            row = takers.get(pk, {})
            progress.takers, progress.passed = row.get("n", 0), row.get("passed", 0)
        else:
            progress.wanted = sum(n * redundancy_target(stage=stage, split=split)
                                  for split, n in splits[pk])

    # The judgments on the wanted items: a data stage's on regular items, a practice or
    # qualification stage's all (its accepted work counts for it, never as data).
    wanted_judgments = Judgment.objects.filter(stage_id__in=by_id, item__excluded=False)\
        .filter(Q(stage__kind__in=NON_DATA_STAGE_KINDS) | _regular("item__"))
    counted, collected, awaiting = _counted_and_collected(wanted_judgments, "stage_id")
    for pk, progress in result.items():
        progress.judgments = counted.get(pk, 0)
        progress.not_counted = collected.get(pk, 0) - progress.judgments
        progress.awaiting = min(awaiting.get(pk, 0), progress.not_counted)
    if qualifications:
        # A qualification counts takers: what it collected but does not count is takers too
        # ("3 of 4 takers counted; 3 collected but not counted" meant one blocked taker's 3
        # answers).
        answers = Judgment.objects.filter(stage_id__in=qualifications)
        counting = judgments_that_count(answers, data_stages_only=False).values("pk")
        not_counted = dict(answers.exclude(pk__in=counting).order_by().values_list("stage_id")
                           .annotate(n=Count("worker_id", distinct=True))
                           .values_list("stage_id", "n"))
        for pk in qualifications:
            result[pk].not_counted = not_counted.get(pk, 0)
            result[pk].awaiting = 0  # in judgments, not takers
    _reoffered_count(by_id, result)
    _adaptive_wanted(by_id, result)
    for row in (
        Assignment.objects.filter(stage_id__in=by_id)
        .values("stage_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    ):
        result[row["stage_id"]].assignments[row["status"]] = row["n"]
    return result


def _reoffered_count(by_id: dict[int, Stage], result: dict[int, Progress]) -> None:
    """`Progress.reoffered` (and Prolific's `places_added`) of each data stage, in at most
    three grouped queries."""
    picking = [pk for pk, s in by_id.items() if s.kind not in NON_DATA_STAGE_KINDS
               and s.provider in (Provider.INHOUSE, Provider.PROLIFIC)]
    if picking:
        for stage_id, n in (judgments_releasing_slots(Judgment.objects.filter(
                _regular("item__"), stage_id__in=picking, item__excluded=False))
                .order_by().values_list("stage_id").annotate(n=Count("id"))
                .values_list("stage_id", "n")):
            result[stage_id].reoffered = n
    mturk = [pk for pk, s in by_id.items() if s.provider == Provider.MTURK]
    if mturk:
        # One extra assignment re-offers a judgment of each regular item of its HIT: counted in
        # judgments like `not_counted` beside it ("6 collected but not counted; 2 slots
        # re-offered" read as 4 still missing, for 2 assignments of 3 items each).
        regular = _regular("hit__items__") & Q(hit__items__excluded=False)
        for stage_id, n in (ProviderCall.objects.filter(
                stage_id__in=mturk, operation=REOFFER_OPERATION,
                status=ProviderCallStatus.SUCCEEDED)
                .order_by().values_list("stage_id")
                .annotate(n=Count("hit__items", filter=regular)).values_list("stage_id", "n")):
            result[stage_id].reoffered = n
    prolific = [pk for pk, s in by_id.items() if s.provider == Provider.PROLIFIC]
    for stage_id, n in _succeeded_calls(prolific, PROLIFIC_REOFFER_OPERATION):
        result[stage_id].places_added = n


def _adaptive_wanted(by_id: dict[int, Stage], result: dict[int, Progress]) -> None:
    """`Progress.wanted` of each data stage under adaptive redundancy: its items' current
    targets (the rule's `min` for an item without one yet), each less the judgments that do not
    count it makes room for (`Progress.reoffered`, read first), in one grouped query."""
    rules = {pk: rule for pk, s in by_id.items()
             if s.kind not in NON_DATA_STAGE_KINDS and result[pk].wanted is not None
             and (rule := stage_adaptive_rule(s)) is not None}
    if not rules:
        return
    stored = {row["stage_id"]: row for row in (
        AdaptiveTarget.objects.filter(_regular("item__"), stage_id__in=rules,
                                      item__excluded=False)
        .values("stage_id").annotate(n=Count("id"), total=Sum("target")).order_by())}
    for pk, rule in rules.items():
        row = stored.get(pk, {})
        progress = result[pk]
        progress.wanted = (row.get("total", 0) - progress.reoffered
                           + max(0, progress.items - row.get("n", 0)) * rule.min)


def _succeeded_calls(stage_ids: list[int], operation: str) -> list[tuple[int, int]]:
    """(stage id, how many `operation` provider calls succeeded) of the given stages."""
    if not stage_ids:
        return []
    return list(ProviderCall.objects.filter(stage_id__in=stage_ids, operation=operation,
                                            status=ProviderCallStatus.SUCCEEDED)
                .order_by().values_list("stage_id").annotate(n=Count("id"))
                .values_list("stage_id", "n"))


def stages_with_progress(*, project: Project) -> list[tuple[Stage, Progress]]:
    stages = list(Stage.objects.filter(project=project).select_related("project"))
    progress = stage_progress(stages=stages)
    return [(stage, progress[stage.pk]) for stage in stages]


def attach_progress(objects: Iterable, progress: dict[int, Progress]) -> list:
    """Set `obj.progress` on each object (for templates, admin columns and serializers)."""
    objects = list(objects)
    for obj in objects:
        obj.progress = progress.get(obj.pk, Progress())
    return objects


@dataclass
class WorkerHistory:
    assignments_by_status: dict[str, int]
    judgments: int  # every judgment collected, rejected and blocked work included
    judgments_counted: int  # of those, the judgments that count (`judgments_that_count`)
    mean_time_ms: float | None
    bonus_paid: Decimal | None
    qualifications: list[WorkerQualification]  # each with `counts`


def worker_history(*, worker: Worker, user) -> WorkerHistory:
    """A worker's record in the projects `user` may see (`projects_visible_to`: every project
    for a superuser, else the researcher's own and shared ones; another researcher's study is
    never counted): assignments by status, judgments and their mean time, bonuses paid and
    qualification results (the worker's admin page; the list's columns use the same scope).
    `judgments_counted` is the counting rule's number of them, the one the dashboard's workers
    table and every report read: the page said "Judgments: 12" of a worker the dashboard
    counted 4 for (8 rejected), with nothing to tell the two apart."""
    visible = projects_visible_to(user).values("pk")
    assignments = Assignment.objects.filter(worker=worker, stage__project__in=visible)
    by_status = dict(assignments.values_list("status").annotate(n=Count("pk"))
                     .values_list("status", "n"))
    collected = Judgment.objects.filter(worker=worker, item__project__in=visible)
    judgments = collected.aggregate(n=Count("pk"), ms=Avg(judgment_time_ms()))
    bonus = assignments.aggregate(total=Sum("bonus_paid"))["total"]
    return WorkerHistory(
        assignments_by_status=by_status, judgments=judgments["n"],
        judgments_counted=judgments_that_count(collected).count(),
        mean_time_ms=judgments["ms"], bonus_paid=bonus,
        qualifications=list(qualification_results_counting_annotate(
            WorkerQualification.objects.filter(worker=worker, stage__project__in=visible)
            .select_related("stage"))))


def qualification_results_counting_annotate(queryset: QuerySet[WorkerQualification]
                                            ) -> QuerySet[WorkerQualification]:
    """Each result with `counts`: whether it qualifies (`qualification_results_that_count`),
    for the pages that list results (a pass graded from rejected work says so)."""
    return queryset.annotate(counts=Exists(qualification_results_that_count(
        WorkerQualification.objects.filter(pk=OuterRef("pk")))))


# --- What the REST API reads ----------------------------------------------------------------------


def project_list(*, user) -> QuerySet[Project]:
    """The projects `user` may see, newest first, with owner and sharing loaded."""
    return (
        projects_visible_to(user)
        .select_related("owner")
        .prefetch_related("shared_with")
        .order_by("-created_at", "id")
    )


def project_with_progress(*, user, slug: str) -> Project | None:
    """One visible project with its progress counts attached; None when the user may not see
    it (or it does not exist)."""
    project = project_list(user=user).filter(slug=slug).first()
    if project is not None:
        project.progress = project_progress(projects=[project])[project.pk]
    return project


def stage_list(*, project: Project) -> QuerySet[Stage]:
    """A project's stages in order, with their explicit item counts."""
    return (
        Stage.objects.filter(project=project)
        .select_related("project")
        .annotate(explicit_item_count=Count("items"))
        .order_by("order", "id")
    )



# A value with whitespace at either end (SQLite's REGEXP is Python's `re`; PostgreSQL's `~`).
_UNTRIMMED = UNTRIMMED_PATTERN


@dataclass
class StoredUntrimmed:
    """`rows_stored_untrimmed`'s answer: `one` the row to use for a trimmed name (exactly one
    row trims to it), `several` the stored values of the rows that trim alike to a name (a door
    refuses it, naming them: an operator merges them by hand)."""

    one: dict = field(default_factory=dict)
    several: dict = field(default_factory=dict)


def rows_stored_untrimmed(queryset: QuerySet, column: str, names: Iterable[str]) -> StoredUntrimmed:
    """The rows of `queryset` whose `column` is stored with spaces around one of `names` (the
    trimmed names a door now stores and looks up, none of them held exactly): rows stored before
    every door trimmed names and labels (item external ids, import workers, stage names) that
    migration `annotation.0023_trim_stored_names` left as they were because their trimmed value
    was taken. A door uses the one row that trims to a name (re-importing a file never
    duplicates what it stored before) and refuses a name that several rows trim to."""
    wanted = set(names)
    found: dict[str, list] = defaultdict(list)
    if wanted:
        for row in queryset.filter(**{f"{column}__regex": _UNTRIMMED}).order_by("pk"):
            trimmed = getattr(row, column).strip()
            if trimmed in wanted:
                found[trimmed].append(row)
    answer = StoredUntrimmed()
    for name, rows in found.items():
        if len(rows) == 1:
            answer.one[name] = rows[0]
        else:
            answer.several[name] = [getattr(row, column) for row in rows]
    return answer
