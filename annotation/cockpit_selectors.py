"""A study at a glance (the cockpit page): its stages in pipeline order with status, progress,
work waiting for review, agreement against the gate, money spent and committed against the
budget, and the next step for each. Reads only; the steps themselves are the admin actions."""
from __future__ import annotations

import dataclasses
import math
from decimal import Decimal

from annotation.cost_selectors import (
    StagePaid,
    committed_amount,
    stage_cost_estimate,
    stage_paid,
)
from annotation.judgment_selectors import agreement_gate, stage_alpha_with_reason
from annotation.models import (
    DATA_STAGE_KINDS,
    OPEN_STAGE_STATUSES,
    AssignmentStatus,
    Project,
    Provider,
    Stage,
    StageKind,
    StageStatus,
)
from annotation.providers import get_provider
from annotation.readiness_selectors import stage_readiness
from annotation.selectors import (
    Progress,
    stage_awaits_qualified_workers,
    stage_open_gate_problem,
    stages_with_progress,
)
from annotation.stage_plan_selectors import stage_release_preview

# Pipeline order: who may work in a stage depends on the stages before it.
PIPELINE = (StageKind.PRACTICE, StageKind.QUALIFICATION, StageKind.PILOT, StageKind.TRIAL,
            StageKind.FULL, StageKind.IMPORTED)

NEXT_STEP = {
    StageStatus.DRAFT: "estimate the cost, then publish",
    StageStatus.PUBLISHED: "wait for the first submissions (sync runs on schedule)",
    StageStatus.COLLECTING: "sync and review submitted work",
    StageStatus.REVIEWING: "review what is waiting, then close",
    StageStatus.CLOSED: "done",
}
# Work through an in-house link arrives on submit: nothing to sync with a platform.
INHOUSE_SEND_LINKS = ("send the annotators their links (stage action “In-house: create "
                      "annotators … and their personal links”)")
INHOUSE_NEXT_STEP = {
    StageStatus.PUBLISHED: INHOUSE_SEND_LINKS,
    StageStatus.COLLECTING: "review the submitted work (open “to review”; “Sync and review "
                            "now” applies the stage's review rules)",
}
# An in-house stage is collecting from the moment it is published: with nothing waiting for
# review, "review the submitted work" sent the researcher to an empty list.
INHOUSE_NOTHING_WAITING = {
    True: "wait for the annotators' work (or send more annotators their links); review it "
          "as it arrives",
    False: INHOUSE_SEND_LINKS + ", then review their work as it arrives",
}


@dataclasses.dataclass
class CockpitStage:
    stage: Stage
    # What the stage collects against what it wants (the admin's and the API's `Progress`:
    # the judgments that count of its regular items × their redundancy; a qualification's
    # takers; `progress.text()` is the line every page shows).
    progress: Progress
    waiting_review: int
    # Work the review rules or the sync held back (status flagged, the reason in its note):
    # it counts for nothing and is paid nothing until the researcher approves or rejects it.
    flagged: int
    alpha: float | None
    alpha_undefined: str | None  # why `alpha` is None (a data stage), the dashboard's words
    gate: str  # "" when the stage has no agreement gate
    gate_open: bool | None
    estimate: Decimal | None
    estimate_error: str
    spent: Decimal
    pay: str
    next_step: str
    # What stops the stage (the last publish's refusal, or a draft's provider not ready);
    # "" when nothing does.
    problem: str = ""
    release: str = ""  # a draft: which items publishing releases (or that there are none)
    # Slots of work that does not count given back (`Progress.reoffered_text`), said as the
    # stage's status allows: re-offered while it serves workers, left unfilled once it does not.
    reoffered: str = ""
    # Where the stage publishes (`CrowdProvider.environment`): MTurk sandbox or PRODUCTION.
    environment: str = ""

    @property
    def acts(self) -> bool:
        """Whether a stage action (publish, sync, extend, close) still applies: any stage
        but a closed one, which no door reopens."""
        return self.stage.status != StageStatus.CLOSED


@dataclasses.dataclass
class Cockpit:
    project: Project
    stages: list[CockpitStage]
    budget: Decimal | None
    committed: Decimal  # estimates of every published stage
    spent: Decimal

    @property
    def budget_used_percent(self) -> int | None:
        """The share of the budget cap committed, as it is: a project committing more than its
        cap (work the provider approved and paid itself, a cap set after the money was spent)
        reads over 100%, never "100%"; under the cap it is rounded down, so "100%" is a cap
        reached, not 99.6% of it."""
        if not self.budget:
            return None
        return math.floor(100 * self.committed / self.budget)

    @property
    def budget_over(self) -> Decimal:
        """How much more than the budget cap the project commits ($0 within it)."""
        if not self.budget:
            return Decimal("0")
        return max(self.committed - self.budget, Decimal("0"))


def _stage_problem(stage: Stage, cache: dict[str, list[str]]) -> str:
    """The last publish's refusal or failure, else (a draft) a qualification it forgets to
    require (`stage_open_gate_problem`) or what its provider lacks, found without calling the
    provider (publishing asks it)."""
    if stage.publish_problem:
        return stage.publish_problem
    if stage.status != StageStatus.DRAFT or stage.provider == Provider.IMPORT:
        return ""
    if gate := stage_open_gate_problem(stage):  # publishing refuses it (`requirement_guard`)
        return gate
    key = f"{stage.provider}:{stage.reward}"  # the provider-wide checks, once per page
    if key not in cache:
        readiness = stage_readiness(stage=stage)
        cache[key] = [str(p) for p in readiness.blocking]
    return f"{stage.get_provider_display()} not ready: {'; '.join(cache[key])}" \
        if cache[key] else ""


def study_cockpit(*, project: Project) -> Cockpit:
    rows = sorted(stages_with_progress(project=project),
                  key=lambda pair: (PIPELINE.index(pair[0].kind)
                                    if pair[0].kind in PIPELINE else len(PIPELINE),
                                    pair[0].order, pair[0].pk))
    alphas: dict[int, tuple[float | None, str | None]] = {}

    def alpha_of(stage: Stage) -> tuple[float | None, str | None]:
        if stage.pk not in alphas:
            alphas[stage.pk] = stage_alpha_with_reason(stage=stage)
        return alphas[stage.pk]

    stages, committed = [], Decimal("0")
    readiness_cache: dict[str, list[str]] = {}
    for stage, progress in rows:
        waiting = progress.assignments.get(AssignmentStatus.SUBMITTED, 0)
        flagged = progress.assignments.get(AssignmentStatus.FLAGGED, 0)
        gate, gate_open = "", None
        # The same stage and α the publish guard checks, in the words of every door.
        if (agreement := agreement_gate(stage, alpha_of=alpha_of)) is not None:
            gate = agreement.text()
            # Neither "open" nor "shut" beside a stage collecting after an override.
            gate_open = (agreement.passes
                         if agreement.passes or not agreement.overridden else None)
        problem, release, plans = _stage_problem(stage, readiness_cache), "", None
        if stage.status == StageStatus.DRAFT and stage.provider != Provider.IMPORT:
            # One plan for the release line and the estimate (a full stage's plan is the
            # slow part of this page).
            preview = stage_release_preview(stage=stage)
            # "releases 9 items …", or the reason there are none ("releases nothing to
            # release: … has no items to release" read twice).
            release = preview.as_text() if preview.error else f"releases {preview.as_text()}"
            plans = preview.plans if not preview.error else None
        estimate, error, pay, cost = None, "", "", None
        if stage.provider != Provider.IMPORT:
            try:
                cost = stage_cost_estimate(stage=stage, plans=plans)
                estimate, pay = cost.total, cost.pay_text()
            except Exception as exc:  # no items yet, or a plan the provider would refuse
                error = str(exc)
        paid = stage_paid(stage=stage) if stage.provider != Provider.IMPORT else StagePaid()
        if stage.status != StageStatus.DRAFT:
            # What the budget guards count (`project_committed_cost`), from the numbers read here.
            committed += committed_amount(estimate=cost, paid=paid,
                                          built_hits=stage.hits.exists())
        stages.append(CockpitStage(
            stage=stage, progress=progress, waiting_review=waiting, flagged=flagged,
            alpha=alpha_of(stage)[0] if stage.kind in DATA_STAGE_KINDS else None,
            alpha_undefined=alpha_of(stage)[1] if stage.kind in DATA_STAGE_KINDS else None,
            gate=gate, gate_open=gate_open, estimate=estimate, estimate_error=error,
            spent=paid.total,
            pay=pay, problem=problem, release=release,
            reoffered=progress.reoffered_text(stage_open=stage.status in OPEN_STAGE_STATUSES),
            environment=get_provider(stage.provider).environment(),
            next_step=("fix what the problem says, then publish again" if problem
                       else "review the waiting work first" if (waiting or flagged) and
                       stage.status == StageStatus.CLOSED
                       else _next_step(stage, waiting=waiting + flagged,
                                       started=bool(progress.assignments)))))
    return Cockpit(project=project, stages=stages, budget=project.budget_cap,
                   committed=Decimal(committed), spent=sum((s.spent for s in stages),
                                                           Decimal("0.00")))


def _next_step(stage: Stage, *, waiting: int, started: bool) -> str:
    """waiting: assignments submitted or flagged, held for the researcher; started: the stage
    has any assignment at all (an annotator opened their link)."""
    if stage.status == StageStatus.REVIEWING and not waiting:
        # Every HIT is taken and every piece of work decided: "review what is waiting" pointed
        # at nothing.
        return "nothing waits for review: close the stage (stage action “Close”)"
    if stage.status in OPEN_STAGE_STATUSES and not started and (
            waiting_on := stage_awaits_qualified_workers(stage)):
        return waiting_on  # not "wait for submissions": nobody may take its work yet
    if stage.provider == Provider.INHOUSE:
        if stage.status == StageStatus.COLLECTING and not waiting:
            return INHOUSE_NOTHING_WAITING[started]
        if stage.status in INHOUSE_NEXT_STEP:
            return INHOUSE_NEXT_STEP[stage.status]
    return NEXT_STEP.get(stage.status, "")
