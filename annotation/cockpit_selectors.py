"""A study at a glance (the cockpit page): its stages in pipeline order with status, progress,
work waiting for review, agreement against the gate, money spent and committed against the
budget, and the next step for each. Reads only; the steps themselves are the admin actions."""
from __future__ import annotations

import dataclasses
from decimal import Decimal

from django.db.models import Count, Q

from annotation.cost_selectors import stage_cost_estimate, stage_spent
from annotation.judgment_selectors import agreement_stage_for, stage_alpha
from annotation.models import (
    DATA_STAGE_KINDS,
    AssignmentStatus,
    Judgment,
    Project,
    Provider,
    Stage,
    StageKind,
    StageStatus,
    WorkerQualification,
)
from annotation.readiness_selectors import stage_readiness
from annotation.selectors import Progress, judgments_that_count, stages_with_progress
from annotation.stage_plan_selectors import DEFAULT_QUALIFICATION_WORKERS, stage_release_preview

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
INHOUSE_NEXT_STEP = {
    StageStatus.PUBLISHED: "send the annotators their links (stage action “In-house: "
                           "create annotators … and their personal links”)",
    StageStatus.COLLECTING: "review the submitted work (open “to review”; “Sync and review "
                            "now” applies the stage's review rules)",
}


@dataclasses.dataclass
class CockpitStage:
    stage: Stage
    progress: Progress
    waiting_review: int
    alpha: float | None
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
    count: StageCount = dataclasses.field(default_factory=lambda: StageCount())


@dataclasses.dataclass
class StageCount:
    """What a stage collects, said once for the cockpit: the judgments that count (the counting
    rule: not rejected, returned or flagged work, no blocked worker), those collected but not
    counted, and what the stage will collect (its HIT plan; a qualification: its takers)."""
    counted: int = 0
    not_counted: int = 0
    planned: int | None = None  # None: no plan to compare with (an imported stage)
    unit: str = "judgments"  # "takers" for a qualification
    passed: int | None = None  # qualification takers who passed

    @property
    def percent(self) -> int:
        if not self.planned:
            return 100 if self.counted else 0
        return min(100, round(100 * self.counted / self.planned))

    @property
    def beyond_plan(self) -> int:
        return max(0, self.counted - self.planned) if self.planned is not None else 0

    def text(self) -> str:
        if self.planned is None:
            main = f"{self.counted} {self.unit} counted"
        else:
            main = f"{self.counted} of {self.planned} {self.unit} counted"
        extra = []
        if self.passed is not None:
            extra.append(f"{self.passed} passed")
        if self.not_counted:
            extra.append(f"{self.not_counted} collected but not counted (rejected, returned, "
                         f"flagged or a blocked worker)")
        if self.beyond_plan:
            extra.append(f"{self.beyond_plan} more than planned")
        return main + (f"; {'; '.join(extra)}" if extra else "")


@dataclasses.dataclass
class Cockpit:
    project: Project
    stages: list[CockpitStage]
    budget: Decimal | None
    committed: Decimal  # estimates of every published stage
    spent: Decimal

    @property
    def budget_used_percent(self) -> int | None:
        if not self.budget:
            return None
        return min(100, round(100 * float(self.committed) / float(self.budget)))


def _stage_problem(stage: Stage, cache: dict[str, list[str]]) -> str:
    """The last publish's refusal or failure, else (a draft) what its provider lacks, found
    without calling the provider (publishing asks it)."""
    if stage.publish_problem:
        return stage.publish_problem
    if stage.status != StageStatus.DRAFT or stage.provider == Provider.IMPORT:
        return ""
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
    alphas: dict[int, float | None] = {}

    def alpha_of(stage: Stage) -> float | None:
        if stage.pk not in alphas:
            alphas[stage.pk] = stage_alpha(stage=stage)
        return alphas[stage.pk]

    counted, collected = _judgment_counts(project)
    takers = _qualification_takers(project)
    stages = []
    readiness_cache: dict[str, list[str]] = {}
    for stage, progress in rows:
        waiting = progress.assignments.get(AssignmentStatus.SUBMITTED, 0)
        gate, gate_open = "", None
        gating = (agreement_stage_for(stage) if stage.agreement_threshold is not None
                  else None)
        if gating is not None:  # the same stage and α the publish guard checks
            gate_alpha = alpha_of(gating)
            gate_open = gate_alpha is not None and gate_alpha >= stage.agreement_threshold
            shown = "too few judgments" if gate_alpha is None else f"α = {gate_alpha:.2f}"
            gate = f"needs α ≥ {stage.agreement_threshold:g} on “{gating.name}” ({shown})"
        problem, release, plans = _stage_problem(stage, readiness_cache), "", None
        if stage.status == StageStatus.DRAFT and stage.provider != Provider.IMPORT:
            # One plan for the release line and the estimate (a full stage's plan is the
            # slow part of this page).
            preview = stage_release_preview(stage=stage)
            release, plans = preview.as_text(), (preview.plans if not preview.error else None)
        estimate, error, pay = None, "", ""
        if stage.provider != Provider.IMPORT:
            try:
                cost = stage_cost_estimate(stage=stage, plans=plans)
                estimate, pay = cost.total, cost.pay_text()
            except Exception as exc:  # no items yet, or a plan the provider would refuse
                error = str(exc)
        count = _stage_count(stage, progress, planned_judgments=(
            cost.n_judgments if estimate is not None else None),
            counted=counted.get(stage.pk, 0), collected=collected.get(stage.pk, 0),
            takers=takers.get(stage.pk))
        stages.append(CockpitStage(count=count,
            stage=stage, progress=progress, waiting_review=waiting,
            alpha=alpha_of(stage) if stage.kind in DATA_STAGE_KINDS else None,
            gate=gate, gate_open=gate_open, estimate=estimate, estimate_error=error,
            spent=stage_spent(stage=stage) if stage.provider != Provider.IMPORT else Decimal("0.00"),
            pay=pay, problem=problem, release=release,
            next_step=("fix what the problem says, then publish again" if problem
                       else "review the waiting work first" if waiting and
                       stage.status == StageStatus.CLOSED
                       else _next_step(stage))))
    committed = sum((s.estimate or Decimal("0")) for s in stages
                    if s.stage.status != StageStatus.DRAFT)
    return Cockpit(project=project, stages=stages, budget=project.budget_cap,
                   committed=Decimal(committed), spent=sum((s.spent for s in stages),
                                                           Decimal("0.00")))


def _next_step(stage: Stage) -> str:
    if stage.provider == Provider.INHOUSE and stage.status in INHOUSE_NEXT_STEP:
        return INHOUSE_NEXT_STEP[stage.status]
    return NEXT_STEP.get(stage.status, "")


def _judgment_counts(project: Project) -> tuple[dict[int, int], dict[int, int]]:
    """Per stage id: the judgments that count, and all collected (two grouped queries)."""
    def per_stage(queryset) -> dict[int, int]:
        return dict(queryset.values_list("stage_id").annotate(n=Count("id")).order_by()
                    .values_list("stage_id", "n"))

    return (per_stage(judgments_that_count(project=project, data_stages_only=False)),
            per_stage(Judgment.objects.filter(item__project=project)))


def _qualification_takers(project: Project) -> dict[int, tuple[int, int]]:
    """Per qualification stage id: (graded takers, passed)."""
    rows = (WorkerQualification.objects.filter(stage__project=project)
            .values("stage_id").annotate(n=Count("id"), passed=Count("id", filter=Q(passed=True)))
            .order_by())
    return {row["stage_id"]: (row["n"], row["passed"]) for row in rows}


def _stage_count(stage: Stage, progress: Progress, *, planned_judgments: int | None,
                 counted: int, collected: int, takers: tuple[int, int] | None) -> StageCount:
    if stage.kind == StageKind.QUALIFICATION:
        # What a qualification collects is takers: each answers all its items once.
        graded, passed = takers or (0, 0)
        planned = int((stage.settings or {}).get("max_workers", DEFAULT_QUALIFICATION_WORKERS))
        return StageCount(counted=graded, planned=planned, unit="takers", passed=passed)
    if stage.provider == Provider.IMPORT:
        return StageCount(counted=counted, not_counted=collected - counted, planned=None)
    return StageCount(counted=counted, not_counted=collected - counted,
                      planned=planned_judgments if planned_judgments is not None
                      else progress.wanted)
