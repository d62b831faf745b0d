"""Stages: which items go out, as which HITs, and the status machine

    draft → published → collecting → reviewing → closed

Every status change goes through `stage_transition`, which refuses illegal moves and logs each
one (who and why, both required) in `StageTransition`; a new stage is a draft (`stage_create`)
and no form, API or bulk edit writes `status` (`manage.py check --database default` names any
stage whose status its logged transitions do not explain, annotation/checks.py). `stage_publish` checks the guards (the
agreement of the previous stage, the budget cap, the account balance), builds the HITs locally
in one transaction, commits, and only then creates them on the provider one by one — each HIT's
idempotency token is stored before its call, so publishing can be interrupted and resumed.
"""
from __future__ import annotations

import dataclasses
import logging
from decimal import Decimal

from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone

from annotation.access_selectors import queued_access_refusal
from annotation.cost_selectors import (
    StageCostEstimate,
    budget_cap_now,
    project_committed_cost,
    publish_needs_confirmation,
    stage_committed_cost,
    stage_cost_estimate,
    stage_spent,
)
from annotation.domain.control_characters import display_text_error
from annotation.domain.stage_settings import (
    ROUTING_MODES,
    review_window,
    review_window_problem,
    settings_fixed_once_published,
    stage_settings_errors,
)
from annotation.judgment_selectors import (
    AGREEMENT_OVERRIDE_MARK,
    NO_GATE_STAGE,
    agreement_stage_for,
    stage_alpha_with_reason,
)
from annotation.models import (
    LIVE_STAGE_STATUSES,
    AssignmentStatus,
    Hit,
    HitItem,
    HitStatus,
    Judgment,
    Stage,
    StageKind,
    StageStatus,
    StageTransition,
    TaskKind,
)
from annotation.providers import PublishReport, get_provider
from annotation.readiness_selectors import stage_readiness
from annotation.selectors import (
    judgments_releasing_slots,
    prolific_study_places,
    stage_open_gate_problem,
)
from annotation.services.budget import budget_lock
from annotation.stage_errors import (
    BudgetExceeded,
    GuardFailed,
    IllegalTransition,
    PublishNeedsConfirmation,
    StageAlreadyClosed,
    StageError,
)
from annotation.stage_plan_selectors import (
    design_applies,
    mixes_in_extras,
    repeated_design_units,
    stage_items_planned,
)
from core.background import task_send_or_fail_fast
from core.vocabulary import Provider

from .assignments import stage_items_short
from .hits import hit_updates_record, stage_hits_publish
from .readiness import ProviderNotReady
from .redundancy import adaptive_redundancy_guard
from .stage_plans import stage_hit_plan, stage_items_choose, stage_items_select

logger = logging.getLogger(__name__)

ALLOWED_TRANSITIONS: dict[str, set[str]] = {
    StageStatus.DRAFT: {StageStatus.PUBLISHED, StageStatus.CLOSED},
    StageStatus.PUBLISHED: {StageStatus.COLLECTING, StageStatus.CLOSED},
    StageStatus.COLLECTING: {StageStatus.REVIEWING, StageStatus.CLOSED},
    StageStatus.REVIEWING: {StageStatus.COLLECTING, StageStatus.CLOSED},
    StageStatus.CLOSED: set(),
}


LEGACY_ACTOR_PREFIX = "migration "  # rows recorded on upgrade for stages older than the log


def transition_log_problem(status: str, log: list[tuple[str, str, str]]) -> str:
    """Why `status` could not be the result of the logged transitions `log` ((from, to,
    actor) in order), or "". The log starts at draft, each row is a legal move from where the
    previous one ended, and it ends at `status`. A row recorded on upgrade (actor "migration
    ...") for a stage older than the log is taken as where that stage was."""
    state = StageStatus.DRAFT
    for from_status, to_status, actor in log:
        if (actor or "").startswith(LEGACY_ACTOR_PREFIX):
            state = to_status
            continue
        if from_status != state:
            return f"a logged move starts at {from_status} but the stage was {state}"
        if to_status not in ALLOWED_TRANSITIONS.get(state, set()):
            return f"{state} → {to_status} is not a move the status machine makes"
        state = to_status
    if state != status:
        how = "no transition was logged" if not log else f"its log ends at {state}"
        return f"it is {status} but {how}"
    return ""


@dataclasses.dataclass
class StagePublishResult:
    stage: Stage
    estimate: StageCostEstimate
    report: PublishReport
    n_hits: int


# --- status machine ------------------------------------------------------------------------


def actor_of(user) -> str:
    return user.get_username() if getattr(user, "pk", None) else ""


@transaction.atomic
def stage_transition(*, stage: Stage, to_status: str, user=None, reason: str = "",
                     actor: str = "") -> Stage:
    """The one place a stage's status changes: refuses illegal moves and logs who (`user`, or
    `actor` naming the job or command) and why (`reason`) — both required."""
    fresh = Stage.objects.select_for_update().get(pk=stage.pk)
    if to_status not in ALLOWED_TRANSITIONS[fresh.status]:
        raise IllegalTransition(
            f"{stage} cannot go from {fresh.status} to {to_status}; allowed: "
            f"{', '.join(sorted(ALLOWED_TRANSITIONS[fresh.status])) or 'none'}"
        )
    if not getattr(user, "pk", None) and actor.startswith(LEGACY_ACTOR_PREFIX):
        raise ValueError(f"actor {actor!r} is reserved for the rows recorded on upgrade")
    actor = actor_of(user) or actor.strip()
    if not actor or not reason.strip():
        raise ValueError(f"a transition of {stage} to {to_status} needs who made it (user or "
                         "actor) and a reason")
    StageTransition.objects.create(
        stage=fresh, from_status=fresh.status, to_status=to_status, reason=reason.strip(),
        user=user if getattr(user, "pk", None) else None, actor=actor[:150],
    )
    fresh.status = to_status
    fresh.save(update_fields=["status", "updated_at"])
    stage.status = to_status
    return stage


@transaction.atomic
def stage_by_hand_errors(*, kind: str | None, provider: str | None) -> dict[str, str]:
    """{field: why} for a stage a researcher creates by hand (the API, the admin) that only an
    import may create: an imported stage holds judgments collected elsewhere and the import
    provider recruits nobody, so `import_data` and the admin's import page create that pair
    (closed at once, `annotation.services.imports.import_stage_get_or_create`); a stage of
    another kind with the import provider, or an imported one with a recruiting provider,
    could never collect anything."""
    errors = {}
    if kind == StageKind.IMPORTED:
        errors["kind"] = ("an imported stage holds judgments collected elsewhere: import_data "
                          "and the import page create it, never by hand")
    if provider == Provider.IMPORT:
        errors["provider"] = ("the import provider recruits nobody: only imported stages "
                              "(created by import_data and the import page) use it; choose "
                              "MTurk, Prolific or in-house")
    return errors


def stage_identity_clashes(*, name: str | None, kind: str | None,
                           others: list[tuple[str, str]]) -> dict[str, str]:
    """{field: why} for a stage named `name` of `kind` beside the project's `others` (their
    (name, kind)): a name says which stage it is, so it is unique in the project; a project
    has one qualification stage (workers qualify once per project, `requires_stage` names it).
    """
    errors = {}
    if name and any(other == name for other, _ in others):
        errors["name"] = f"the project already has a stage named {name!r}"
    if kind == StageKind.QUALIFICATION and any(k == StageKind.QUALIFICATION
                                               for _, k in others):
        errors["kind"] = ("the project already has a qualification stage; workers qualify once "
                          "per project (edit that stage instead)")
    return errors


def identity_kind(kind: str | None, provider: str | None) -> str | None:
    """The kind `stage_identity_clashes` weighs a stage as: an imported practice or
    qualification stage (provider import: answers collected elsewhere, imported from an
    `--include-qualification` export) grades nobody here, so it is not the project's
    qualification stage and leaves room for one."""
    return StageKind.IMPORTED if provider == Provider.IMPORT else kind


def stage_identity_errors(*, project, name: str | None, kind: str | None,
                          stage_pk: int | None = None) -> dict[str, str]:
    """`stage_identity_clashes` against the project's saved stages (but `stage_pk`, the one
    being edited): the rule of every door that creates or renames a stage (the API, the stage
    form, the project page's stage rows)."""
    others = [(other, identity_kind(other_kind, provider)) for other, other_kind, provider in
              Stage.objects.filter(project=project).exclude(pk=stage_pk)
              .values_list("name", "kind", "provider")]
    return stage_identity_clashes(name=name, kind=kind, others=others)


def stage_requirement_error(*, project, required: Stage | None,
                            stage_pk: int | None = None,
                            provider: str | None = None) -> str | None:
    """Why `required` cannot be the `requires_stage` of a stage of `project` (`stage_pk`, None
    for a new one), or None: only the project's qualification stage grades workers
    (`WorkerQualification`), so a stage that requires another kind, another project's stage or
    itself would refuse every worker. The rule of every door that sets it (the API, the stage
    form) and of publishing, for a stage saved before the rule."""
    if required is None:
        return None
    if required.project_id != project.pk:
        return f"{required}, which is not a stage of the same project"
    if stage_pk is not None and required.pk == stage_pk:
        return (f"{required}, which is this stage itself: a stage cannot require itself; name "
                "the project's qualification stage")
    if required.kind != StageKind.QUALIFICATION:
        return (f"{required}, a {required.get_kind_display().lower()} stage: only a "
                "qualification passes workers, so nobody could work here; require the "
                "project's qualification stage, or none")
    if required.provider == Provider.IMPORT:
        return (f"{required}, which holds imported qualification answers: it grades nobody "
                "here, so nobody could work here; require a qualification stage of this "
                "project, or none")
    if provider and provider != required.provider:
        # A worker is one provider's id: an in-house or Prolific qualification grants nothing
        # on MTurk (its HITs would require a qualification type nobody holds, so nobody could
        # accept them), nor an MTurk one on Prolific.
        where = Provider(provider).label
        return (f"{required}, a qualification on {required.get_provider_display()}: only "
                f"the workers who took it there qualify, so nobody on {where} could work "
                f"here; require a qualification stage on {where}, or none")
    return None


def stage_name_error(name: str) -> str | None:
    """Why `name` cannot name a stage (one line, no control characters), or None: the
    rule of the stage model's validator, for the doors that do not run it (imports, services
    called directly)."""
    return display_text_error(name, multiline=False)


def stage_create(*, project, items: dict | None = None, **fields) -> Stage:
    """A new stage: always a draft (its status then changes only through publish, close and
    extend); `status` is refused, not ignored. `items`: a filter for `stage_items_select`."""
    if "status" in fields and fields.pop("status") not in (None, "", StageStatus.DRAFT):
        raise IllegalTransition("a new stage is a draft: publish it to release its items")
    if (error := stage_name_error(fields.get("name", ""))) is not None:
        raise StageEditRefused({"name": error})
    stage = Stage.objects.create(project=project, status=StageStatus.DRAFT, **fields)
    if items is not None:
        stage_items_select(stage=stage, **items)
    return stage


# --- what may change once a stage is published ----------------------------------------------

# A saved stage's project, kind and provider never change: its items, settings, HITs and
# workers were made for them (moved to another project, a stage would carry the first one's
# items, judgments and committed money under the second one's budget cap).
STAGE_FIXED_FIELDS = ("project", "kind", "provider")

LIVE_FIXED_STAGE_FIELDS = {
    "judgments_per_item": "the HITs (the study's places, the pages' targets) were built with "
                          "this many judgments per item at publish: the provider would not "
                          "serve more, and progress and the cost estimate would count against "
                          "a target nobody collects. Close the stage and publish another for "
                          "more judgments",
    "requires_stage": "who may work here was set at publish (the qualification the HITs "
                      "require on the provider, checked when the stage was published)",
    "agreement_threshold": "the agreement gate was checked when the stage was published (its "
                           "log says against which threshold); changed now it would guard "
                           "nothing",
    "reward_per_hit": "the HITs (the study) were created on the provider with the reward of "
                      "publish; a change here would not reach them, and the estimate and "
                      "committed cost would disagree with what is paid",
}


# The stage fields a door may post (besides `settings`), each judged by `stage_edit_errors`.
STAGE_EDIT_FIELDS = (*STAGE_FIXED_FIELDS, *LIVE_FIXED_STAGE_FIELDS)


def _live(status: str) -> bool:
    return status != StageStatus.DRAFT


def stage_edit_errors(*, stage: Stage, changes: dict) -> dict[str, str]:
    """{field (or settings key "settings.KEY"): why} for each change of a saved stage that is
    refused: the one rule of every door that edits a stage (the API's PATCH through
    `stage_update`, the stage admin form, the project admin's stage rows). `changes`: the
    fields posted, with their new values (`settings` the whole new object); values equal to
    the stored ones are no change.

    - project, kind and provider never change once the stage exists;
    - once published (any status but draft): `LIVE_FIXED_STAGE_FIELDS` and the settings that
      chose its items, built or created its HITs or decide its page
      (`annotation.domain.stage_settings.settings_fixed_once_published`) are refused;
    - the bonus budget may change while the project's budget cap still holds what its
      published stages commit (the check publishing makes, `budget_guard`).
    Name, order, the review rules, the pay assumption and unknown keys stay free."""
    if stage.pk is None:
        return {}
    stored = Stage.objects.get(pk=stage.pk)
    errors: dict[str, str] = {}
    for name in STAGE_FIXED_FIELDS:
        if name in changes and changes[name] != getattr(stored, name):
            errors[name] = "cannot be changed after the stage is created"
    if not _live(stored.status):
        return errors
    status = stored.get_status_display().lower()
    for name, why in LIVE_FIXED_STAGE_FIELDS.items():
        if name not in changes:
            continue
        old, new = getattr(stored, f"{name}_id" if name == "requires_stage" else name), \
            changes[name]
        if name == "requires_stage":
            new = getattr(new, "pk", new)
        if old != new:
            errors[name] = f"the stage is {status}: {why}"
    if "settings" in changes and isinstance(changes["settings"], dict):
        for key, why in settings_fixed_once_published(stored.settings,
                                                      changes["settings"]).items():
            errors[f"settings.{key}"] = f"the stage is {status}: {why}"
        if not errors:
            problem = _bonus_budget_problem(stored, changes["settings"])
            if problem:
                errors["settings.bonus_budget"] = problem
    return errors


def _bonus_budget_problem(stored: Stage, settings: dict) -> str:
    """Why the new bonus budget of a published stage would take the project past its cap."""
    old, new = (stored.settings or {}).get("bonus_budget"), settings.get("bonus_budget")
    if old == new or stored.project.budget_cap is None:
        return ""
    # Checked and saved under the budget lock (the door's transaction), so a spend checked
    # meanwhile counts the new budget, and this check counts that spend.
    budget_lock(stored.project)
    cap = budget_cap_now(project_id=stored.project_id)
    changed = Stage.objects.get(pk=stored.pk)
    changed.settings = settings
    committed = (project_committed_cost(project=stored.project, exclude_stage=stored)
                 + stage_committed_cost(stage=changed))
    if committed <= cap:
        return ""
    return (f"with this bonus budget the project's published stages commit ${committed}, "
            f"above its budget cap of ${cap}: raise the cap first")


def _takes_reward(stage: Stage) -> bool:
    return stage.reward_per_hit is None


def _takes_items_per_hit(stage: Stage) -> bool:
    options = stage.settings or {}
    return not (options.get("items_per_hit") or options.get("items_per_assignment"))


# Project settings a live stage (published, collecting, reviewing) still reads, fixed while
# one does: {field: (whether the stage reads it, why)}.
LIVE_READ_PROJECT_FIELDS = {
    "reward_per_hit": (_takes_reward, "its HITs (study) were created on the provider with this "
                       "reward; set a reward on a new stage instead"),
    "items_per_hit": (_takes_items_per_hit, "its HITs were built with this many items and its "
                      "pages give each assignment this many (paid the same reward)"),
    "redundancy": (lambda stage: not stage.judgments_per_item,
                   "its HITs (places, the pages' targets) were built with these judgments per "
                   "item: the provider would not serve more, and progress would count against "
                   "a target nobody collects"),
    "gold_rate": (lambda stage: (stage.settings or {}).get("gold_rate") is None,
                  "its HITs mixed gold items in at this rate when published"),
    "experiment_mode": (lambda stage: stage.project.kind == TaskKind.MC,
                        "its participants answer in this mode: changed mid-stage, one stage "
                        "would mix answers given under two protocols"),
    "qualification_threshold": (lambda stage: stage.kind == StageKind.QUALIFICATION
                                or stage.requires_stage_id is not None,
                                "its workers were graded (and its HITs' qualification "
                                "requirement set) with this threshold"),
    "qualification_tolerance": (lambda stage: True,
                                "its work is graded against gold with this tolerance: workers "
                                "graded before and after would be held to two rules"),
}


def project_edit_errors(*, project, changes: dict) -> dict[str, str]:
    """{field: why} for each change of a project's settings refused while stages of it are
    published: the one rule of the API's PATCH (`annotation.services.projects.project_update`)
    and the project admin form. A setting a live stage still reads from the project
    (`LIVE_READ_PROJECT_FIELDS`: reward, items per HIT, redundancy, gold rate, STARC mode,
    qualification rules; the number of Likert labels) is fixed while that stage is live; the
    budget cap may not go below
    what the published stages commit, nor the bonus per correct answer take them past the cap
    (the check publishing makes, `budget_guard`). Values equal to the stored ones are no
    change."""
    from annotation.models import Project

    if project.pk is None:
        return {}
    stored = Project.objects.get(pk=project.pk)
    changed = {name: value for name, value in changes.items()
               if hasattr(stored, name) and getattr(stored, name) != value}
    if changed:
        # Which stages are live is read under the budget lock a publish holds from its checks
        # until its stage is published (`_publish_draft`), held by the door's transaction until
        # the change is saved: a change made while a stage is being published waits, then
        # counts that stage as live, never saved beside HITs built with the old value.
        budget_lock(stored)
    errors: dict[str, str] = {}
    live = list(stored.stages.filter(status__in=LIVE_STAGE_STATUSES))
    for name, (reads, why) in LIVE_READ_PROJECT_FIELDS.items():
        if name not in changed:
            continue
        readers = [stage for stage in live if reads(stage)]
        if readers:
            names = ", ".join(repr(stage.name) for stage in readers[:3])
            more = f" and {len(readers) - 3} more" if len(readers) > 3 else ""
            who = (f"stage {names} is {readers[0].get_status_display().lower()} and takes"
                   if len(readers) == 1 else f"stages {names}{more} are live and take")
            errors[name] = (f"{who} it from the project: {why}. It cannot change while such a "
                            "stage is live")
    if "scale_labels" in changed and live and stored.kind == TaskKind.LIKERT and len(
            changed["scale_labels"] or []) != len(stored.scale_labels or []):
        # Relabelling is free; the number of labels is the scale workers answer on.
        errors["scale_labels"] = (
            f"stage {live[0].name!r} is {live[0].get_status_display().lower()}: its workers "
            f"answer on a scale of 1 to {len(stored.scale_labels or []) or 5}, one label per "
            "point; changing the number of labels mid-stage would mix scores of two scales. "
            "Reword the labels, or close the stage first")
    if errors or not ({"budget_cap", "bonus_per_correct"} & set(changed)):
        return errors
    # Checked and saved under the budget lock taken above (the door's transaction: the API's
    # `project_update`, the admin's change form), so a spend checked meanwhile (a bonus, a
    # replacement, a publish) reads the new cap, and this check counts that spend.
    stored.budget_cap = budget_cap_now(project_id=stored.pk)
    for name, value in changed.items():
        if name in ("budget_cap", "bonus_per_correct"):
            setattr(stored, name, value)
    cap = stored.budget_cap
    if cap is None or (changed.get("bonus_per_correct") or 0) < 0:
        return errors  # no cap, or a negative bonus the field's own validator names
    committed = project_committed_cost(project=stored)
    if committed > cap:
        field = "budget_cap" if "budget_cap" in changed else "bonus_per_correct"
        spent = sum((stage_spent(stage=stage) for stage in
                     stored.stages.exclude(status=StageStatus.DRAFT)), start=0)
        errors[field] = (f"the project's published stages commit ${committed} (${spent} paid "
                         f"so far) {'with this bonus ' if field == 'bonus_per_correct' else ''}"
                         f"against a budget cap of ${cap}: "
                         + ("the cap cannot go below what is committed" if field == "budget_cap"
                            else "raise the cap first"))
    return errors


def stage_delete_refusal(stage: Stage) -> str:
    """Why `stage` may not be deleted ("" for a draft): a published stage's HITs (study,
    links) were created on its provider, its payments are recorded with it and its money is
    committed against the budget; deleted, the HITs would stay open with nobody reviewing or
    recording the work, and the next stage would be published against a budget that forgot
    it. Close it instead. The rule of the stage admin (delete button, bulk delete), the
    project page's stage rows and a project's deletion (`project_delete_refusal`).
    A draft stage that a published stage requires is refused too: deleting it would clear
    that stage's requirement (`requires_stage` is set to null) and open it to workers who
    never passed."""
    if stage.status == StageStatus.DRAFT:
        gated = (Stage.objects.filter(requires_stage=stage).exclude(status=StageStatus.DRAFT)
                 .order_by("pk").first())
        if gated is None:
            return ""
        return (f"stage {stage.name!r} is required by {gated.get_status_display().lower()} "
                f"stage {gated.name!r}: deleting it would open that stage to workers who "
                "never passed it")
    return (f"stage {stage.name!r} is {stage.get_status_display().lower()}: its HITs were "
            f"created on {stage.get_provider_display()} and its payments and committed money "
            "are recorded with it; close it instead of deleting it")


def hit_delete_refusal(hit: Hit) -> str:
    """Why `hit` may not be deleted ("" for a draft's): the rule of `stage_delete_refusal`
    for one HIT of a published stage (the HIT page's delete button and bulk delete), since
    its assignments and payments go with it and the open HIT stays on the provider."""
    stage = hit.stage
    if stage.status == StageStatus.DRAFT:
        return ""
    return (f"HIT {hit.pk} of stage {stage.name!r} ({stage.get_status_display().lower()}) was "
            f"built at publish and created on {stage.get_provider_display()}; its "
            "assignments, payments and committed money are recorded with it: close the stage "
            "instead of deleting it")


def project_delete_refusal(project) -> str:
    """Why `project` may not be deleted ("" when all its stages are drafts): its published
    stages (`stage_delete_refusal`) would go with it."""
    published = project.stages.exclude(status=StageStatus.DRAFT).order_by("order", "pk")
    first = published.first()
    if first is None:
        return ""
    return f"{project.slug}: {stage_delete_refusal(first)}" + (
        f" (and {published.count() - 1} more published stages)" if published.count() > 1
        else "")


class StageEditRefused(StageError):
    """A change `stage_edit_errors` refuses; `errors` is {field: why}."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{name}: {why}" for name, why in errors.items()))


@transaction.atomic
def stage_update(*, stage: Stage, data: dict) -> Stage:
    """Change a stage's fields (never its status) and, for a draft, its items by filter;
    a change `stage_edit_errors` refuses raises `StageEditRefused` and stores nothing."""
    data = dict(data)
    if "status" in data:
        raise IllegalTransition("a stage's status changes only through publish, close and "
                                "extend")
    # Wait for a publish of this stage that is running its checks (`_publish_draft` holds the
    # row), so the rule below reads the status it left: an edit never slips in between the
    # checks and the HITs they approved.
    stage_row_lock(stage)
    stage.refresh_from_db(fields=["status"])  # what the item choice below is judged by
    errors = stage_edit_errors(stage=stage, changes=data)
    if "name" in data and (error := stage_name_error(data["name"])) is not None:
        errors["name"] = error
    if errors:
        raise StageEditRefused(errors)
    items = data.pop("items", None)
    for name, value in data.items():
        setattr(stage, name, value)
    if data:
        stage.save(update_fields=[*data, "updated_at"])
    if items is not None:
        stage_items_select(stage=stage, **items)
    return stage


def _publish_problem_record(stage: Stage, problem: str) -> None:
    """Why the last publish did not go through, for the stage page and the cockpit ("" once
    the stage is live). Only this service writes it."""
    now = timezone.now() if problem else None
    Stage.objects.filter(pk=stage.pk).update(publish_problem=problem[:4000],
                                             publish_problem_at=now)
    stage.publish_problem, stage.publish_problem_at = problem[:4000], now


@transaction.atomic
def stage_hits_build(*, stage: Stage) -> list[Hit]:
    """Create the stage's HITs locally (status pending). Idempotent: existing HITs are kept."""
    existing = list(stage.hits.all())
    if existing:
        return existing
    hits = []
    if stage.kind == StageKind.QUALIFICATION and not (stage.settings or {}).get(
        "items_per_assignment"
    ):
        # Prolific and in-house pages pick items per assignment: a qualification takes all.
        stage.settings = {**(stage.settings or {}), "items_per_assignment": stage.items.count()
                          or len(stage_items_choose(stage=stage))}
        stage.save(update_fields=["settings", "updated_at"])
    for plan in stage_hit_plan(stage=stage):
        hit = Hit.objects.create(
            stage=stage, provider=stage.provider, max_assignments=plan.max_assignments,
            reward=stage.reward, status=HitStatus.PENDING,
        )
        HitItem.objects.bulk_create(
            [HitItem(hit=hit, item=item, position=i) for i, item in enumerate(plan.items)]
        )
        hits.append(hit)
    return hits


# --- guards ------------------------------------------------------------------------------------


def agreement_guard(*, stage: Stage, override_reason: str | None = None) -> str:
    """Refuse (GuardFailed) unless the gating stage's alpha reaches the threshold or the
    researcher gave a reason to override; returns the note to log with the transition."""
    if stage.agreement_threshold is None:
        return ""
    gate = agreement_stage_for(stage)
    named = (stage.settings or {}).get("agreement_stage_id")
    if named and gate is None:  # no override: there is no gate to override
        raise GuardFailed(f"{stage}: the agreement gate stage (agreement_stage_id {named}) is "
                          f"not a stage of project {stage.project.slug}")
    alpha, undefined = (stage_alpha_with_reason(stage=gate) if gate is not None
                        else (None, NO_GATE_STAGE))
    shown = f"undefined ({undefined})" if alpha is None else f"{alpha:.3f}"
    if alpha is not None and alpha >= stage.agreement_threshold:
        return f"agreement guard passed: alpha {shown} of {gate} ≥ {stage.agreement_threshold}"
    if override_reason and override_reason.strip():
        return (
            f"{AGREEMENT_OVERRIDE_MARK}: alpha {shown} of {gate} < {stage.agreement_threshold}; "
            f"reason: {override_reason.strip()}"
        )
    if alpha is None:
        # "is n/a, below the required 0.0" read as a bug: alpha has no value, it is not low;
        # the reason is the one the cockpit and the dashboard give.
        raise GuardFailed(
            f"Krippendorff's alpha of {gate or 'the previous stage'} cannot be computed yet "
            f"({undefined}), so it cannot be checked against the required "
            f"{stage.agreement_threshold}; collect more judgments there, or publish with an "
            f"override reason to go ahead anyway"
        )
    raise GuardFailed(
        f"Krippendorff's alpha of {gate or 'the previous stage'} is {shown}, below the required "
        f"{stage.agreement_threshold}; publish with an override reason to go ahead anyway"
    )


def requirement_guard(*, stage: Stage) -> None:
    """The stage a stage requires is a published qualification: only grading a qualification
    passes workers (`WorkerQualification`), so the pages would refuse every worker of a stage
    requiring a trial or full stage, while MTurk and Prolific, which require only
    qualifications, would let them accept its HITs. And a trial or full stage of a project
    with a qualification stage requires it or is open to every worker on purpose
    (`stage_open_gate_problem`)."""
    required = stage.requires_stage
    if why := stage_requirement_error(project=stage.project, required=required,
                                      stage_pk=stage.pk, provider=stage.provider):
        # Saved before the doors checked it, or through the shell: the same rule.
        raise GuardFailed(f"{stage} requires {why}")
    if required is not None and required.status == StageStatus.DRAFT:
        raise GuardFailed(f"{required} must be published first")
    # A trial or full stage of a project with a qualification requires it, or says on purpose
    # that it is open to every worker: forgotten, the collection pays unqualified workers.
    if problem := stage_open_gate_problem(stage):
        raise GuardFailed(problem)


def stage_settings_problems(settings, *, provider: str | None,
                            published_with: dict | None = None) -> list[str]:
    """Everything wrong with a stage's settings on `provider` (`stage_settings_errors`), with
    the provider sync's period read from the settings (`QAJ_PROVIDER_SYNC_SECONDS`): the one
    call of every door that sets a stage's settings (the stage form, the API) and of
    publishing (`settings_guard`). `published_with`: the stored settings of a stage published
    already, whose review window (`review_window_problem`) is asked again only when an edit
    changes the review's wait or the approval delay: the delay is fixed once published, so a
    stage published under an older rule (or a shorter sync period) could be saved no more,
    not even to change its name or its review's other rules."""
    errors = stage_settings_errors(settings, provider=provider,
                                   sync_seconds=django_settings.QAJ_PROVIDER_SYNC_SECONDS)
    if published_with is not None and review_window(settings) == review_window(published_with):
        window = review_window_problem(settings, provider=provider,
                                       sync_seconds=django_settings.QAJ_PROVIDER_SYNC_SECONDS)
        errors = [error for error in errors if error != window]
    return errors


def stage_published_settings(stage: Stage | None) -> dict | None:
    """The stored settings of `stage` when it is published already (anything but a draft),
    for `stage_settings_problems`' `published_with`; None for a new stage or a draft."""
    if stage is None or stage.pk is None or stage.status == StageStatus.DRAFT:
        return None
    return Stage.objects.filter(pk=stage.pk).values_list("settings", flat=True).first() or {}


def settings_guard(*, stage: Stage) -> None:
    """The stage's settings pass the schema the admin form uses: settings written through the
    API or the shell skip the form, and a wrong value (an approval rate of 150, a string
    reward) would otherwise reach the provider or fail mid-collection."""
    errors = stage_settings_problems(stage.settings, provider=stage.provider)
    if errors:
        raise GuardFailed(f"{stage}: settings: {'; '.join(errors)}")


def routing_guard(*, stage: Stage) -> None:
    """A stage that asks for routing by uncertainty is published only with its recorded draw:
    serving every item instead would spend the budget the routing was meant to save, and the
    estimates would find no sampling probabilities to weight by."""
    mode = (stage.settings or {}).get("routing", "random")
    if mode not in ROUTING_MODES:
        raise GuardFailed(f"{stage}: routing {mode!r} is not one of {', '.join(ROUTING_MODES)}")
    if mode == "uncertainty" and not stage.routing_draws.exists():
        raise GuardFailed(f"{stage} asks for routing by uncertainty but has no routing draw: "
                          "run the 'Route by LERC uncertainty' action (or "
                          "`manage.py route_stage`) first")


def money_guard(*, stage: Stage) -> None:
    """No negative money reaches a provider or the budget: a negative reward (or bonus per
    correct answer) would be refused by the provider after other calls were made, and would
    lower the committed cost, letting later stages past the budget cap."""
    project = stage.project
    for what, amount in (("reward per HIT", stage.reward),
                         ("bonus per correct answer", project.bonus_per_correct)):
        if amount is not None and amount < 0:
            raise GuardFailed(f"{stage}: the {what} is ${amount}; it must be 0 or more")


def design_guard(*, stage: Stage) -> None:
    """A qualification under the STARC design lists at most one item per text: every taker
    answers all of its items, so two levels of one paragraph would be read by everyone (its
    MTurk HITs would be refused at every accept; the pages would serve the first item of
    each text only). Chosen by kind, it takes one per text already; a hand-made list is
    refused here, naming the texts."""
    if stage.kind != StageKind.QUALIFICATION or not design_applies(stage):
        return
    repeated = repeated_design_units(stage_items_planned(stage=stage))
    if repeated:
        named = ", ".join(f"{unit} ({n} items)" for unit, n in list(repeated.items())[:5])
        more = f" and {len(repeated) - 5} more" if len(repeated) > 5 else ""
        raise GuardFailed(
            f"{stage}: a qualification shows each taker all of its items, and it lists several "
            f"items of one text: {named}{more}. A participant reads each text once: list one "
            "item per text, or let the stage choose its items")


def confirmation_guard(*, stage: Stage, estimate: StageCostEstimate,
                       confirmed_total: Decimal | None) -> None:
    """Real money is spent only on the researcher's word: a publish on MTurk production or
    Prolific's own API needs `confirmed_total` equal to the stage's estimated total with fees
    (what the confirmation page showed, or what the caller states), so a stage edited since
    the page was shown is asked again. Sandbox, rehearsal endpoints and in-house publish at
    once."""
    if not get_provider(stage.provider).spends_real_money():
        return
    if confirmed_total is None:
        raise PublishNeedsConfirmation(
            f"publishing {stage} spends real money — {estimate.confirmation_text()}: confirm "
            f"this cost first", estimate=estimate)
    if Decimal(confirmed_total) != estimate.total:
        raise PublishNeedsConfirmation(
            f"publishing {stage} costs ${estimate.total} now, not the ${confirmed_total} you "
            f"confirmed (the stage changed since) — {estimate.confirmation_text()}: confirm "
            f"this cost", estimate=estimate)


def budget_guard(*, stage: Stage, estimate: StageCostEstimate) -> None:
    cap = budget_cap_now(project_id=stage.project_id)
    if cap is not None:
        committed = project_committed_cost(project=stage.project, exclude_stage=stage)
        if committed + estimate.total > cap:
            raise BudgetExceeded(
                f"publishing costs ${estimate.total} on top of ${committed} already committed; "
                f"the project's budget cap is ${cap}"
            )
    if estimate.balance is not None and estimate.balance < estimate.total:
        raise BudgetExceeded(
            f"the {stage.get_provider_display()} balance ${estimate.balance} does not cover "
            f"${estimate.total}"
        )


# --- publish, close ----------------------------------------------------------------------------


def stage_publish(*, stage: Stage, user=None, override_reason: str | None = None,
                  check_balance: bool = True, actor: str = "",
                  confirmed_total: Decimal | None = None,
                  queued: bool = False) -> StagePublishResult:
    """Publish a draft stage (or resume publishing one whose HITs are not all created): the one
    path every door takes (admin actions, Celery, commands). Every check — order of stages,
    settings, routing, redundancy, agreement gate, items, budget and the provider's readiness
    (`check_balance`: with its read-only probe) — runs before anything is stored or sent; a
    refusal leaves the stage a draft, raises, and is kept in `Stage.publish_problem`. A draft
    that spends real money (MTurk production, Prolific's own API) also needs the researcher's
    confirmation of its cost: `confirmed_total`, the total they saw (`confirmation_guard`).
    `queued`: run later for `user` (the background publish), who must still see the project
    then (`queued_access_refusal`)."""
    stage.refresh_from_db()
    actor = actor or "stage_publish called without a user"
    if stage.status not in (StageStatus.DRAFT, StageStatus.PUBLISHED, StageStatus.COLLECTING):
        raise IllegalTransition(f"{stage} is {stage.status}; only a draft can be published")
    try:
        # Queued (the background publish): its researcher must still see the project.
        refusal = queued_access_refusal(user=user, project=stage.project) if queued else ""
        if refusal:
            raise GuardFailed(refusal)
        if stage.status == StageStatus.DRAFT:
            hits, estimate = _publish_draft(stage=stage, user=user, actor=actor,
                                            override_reason=override_reason,
                                            probe=check_balance,
                                            confirmed_total=confirmed_total)
        else:  # resuming: HITs not all created yet
            _provider_ready(stage=stage, probe=check_balance)
            hits = list(stage.hits.all())
            estimate = stage_cost_estimate(stage=stage)
    except StageError as error:
        # The winner's outcome is the stage's; an unconfirmed cost is a question, not a problem.
        if not isinstance(error, PublishRaced | PublishNeedsConfirmation):
            _publish_problem_record(stage, f"publish refused: {error}")
        raise
    report = stage_hits_create(stage=stage)
    _hits_opened_meanwhile_expire(stage)
    if report.complete:
        _publish_complete_mark(stage=stage, n_hits=len(hits), user=user, actor=actor)
    _publish_problem_record(stage, "" if report.complete else (
        f"{report.failed} of {len(hits)} HITs not created on {stage.get_provider_display()} "
        f"({'; '.join(report.errors[:3])}): nothing is served until they are; publish again "
        "to retry"))
    return StagePublishResult(stage=stage, estimate=estimate, report=report, n_hits=len(hits))


@transaction.atomic
def _publish_complete_mark(*, stage: Stage, n_hits: int, user, actor: str) -> None:
    """Published → collecting once every HIT exists, read under the stage's row lock: another
    publish of the same stage running at once (a double click, a retry after a timeout, the
    background task beside the action) resumes the HITs this one is still creating and may
    finish first; then the stage is collecting already, and this publish, which succeeded as
    well, says so instead of failing with "cannot go from collecting to collecting"."""
    fresh = Stage.objects.select_for_update().get(pk=stage.pk)
    if fresh.status == StageStatus.PUBLISHED:
        stage_transition(stage=fresh, to_status=StageStatus.COLLECTING, user=user, actor=actor,
                         reason=f"{n_hits} HITs live on {stage.get_provider_display()}")
    stage.status = fresh.status


def _provider_ready(*, stage: Stage, probe: bool):
    readiness = stage_readiness(stage=stage, probe=probe)
    if not readiness.ready:
        raise ProviderNotReady(f"{stage.get_provider_display()} is {readiness.as_text()}")
    return readiness


class PublishRaced(IllegalTransition):
    """Another publish of the stage passed its checks first (this one waited on the row)."""


def stage_row_lock(stage: Stage) -> None:
    """Lock the project's budget row, then the stage's row, until the transaction ends
    (publishing and editing take them). Always in this order: an edit of a live stage's bonus
    budget takes the budget lock as well, and a publish holding it while it waited for the
    stage's row would deadlock with an edit holding the row while it waited for the budget."""
    budget_lock(stage.project)
    list(Stage.objects.select_for_update().filter(pk=stage.pk).values_list("pk", flat=True))


@transaction.atomic
def _publish_draft(*, stage: Stage, user, actor: str, override_reason: str | None,
                   probe: bool, confirmed_total: Decimal | None,
                   ) -> tuple[list[Hit], StageCostEstimate]:
    # Every check reads the stage as it is under its row lock, held until the HITs they
    # approved are built and the stage is published (an edit waits: `stage_update`). The
    # project's budget lock first: another stage's publish, a bonus or a replacement checked
    # meanwhile waits, then counts this stage (`annotation/services/budget.py`).
    stage_row_lock(stage)
    stage.refresh_from_db()
    if stage.status != StageStatus.DRAFT:
        raise PublishRaced(f"{stage} is {stage.status}: another publish of it went first")
    estimate, note = _publish_checks(stage=stage, override_reason=override_reason, probe=probe)
    # Last: real money waits for the researcher's word on this very cost.
    confirmation_guard(stage=stage, estimate=estimate, confirmed_total=confirmed_total)
    hits = stage_hits_build(stage=stage)
    reason = "; ".join(part for part in (estimate.as_text(), note) if part)
    stage_transition(stage=stage, to_status=StageStatus.PUBLISHED, user=user, actor=actor,
                     reason=reason)
    return hits, estimate


def _publish_checks(*, stage: Stage, override_reason: str | None,
                    probe: bool) -> tuple[StageCostEstimate, str]:
    """Every check publishing a draft makes before it stores or sends anything: (the cost
    estimate, with the balance when probed; the agreement override's note)."""
    requirement_guard(stage=stage)
    settings_guard(stage=stage)
    routing_guard(stage=stage)
    design_guard(stage=stage)
    money_guard(stage=stage)
    adaptive_redundancy_guard(stage=stage)
    note = agreement_guard(stage=stage, override_reason=override_reason)
    # Checked on the plan before any HIT row exists, so a refused stage stays editable; the
    # items too: a stage with nothing to release is refused here, never published empty.
    estimate = stage_cost_estimate(stage=stage)
    # The provider last: its probe is a (read-only) remote call, made only for a stage that
    # passed every local check. Nothing that creates or spends runs before it.
    readiness = _provider_ready(stage=stage, probe=probe)
    if probe:
        estimate = dataclasses.replace(estimate, balance=readiness.balance,
                                       balance_error=readiness.balance_error)
    budget_guard(stage=stage, estimate=estimate)
    return estimate, note


def stage_publish_confirmation(*, stage: Stage,
                               override_reason: str | None = None) -> StageCostEstimate | None:
    """The cost a researcher confirms before a stage that spends real money is published
    (`publish_needs_confirmation`): the estimate after every check publishing makes (guards,
    budget, the provider's readiness with its read-only probe), so a confirmation page never
    asks about a publish that would be refused — the refusal is raised (and kept in
    `Stage.publish_problem`) instead. None: nothing to confirm, publish at once."""
    stage.refresh_from_db()
    if not publish_needs_confirmation(stage=stage):
        return None
    try:
        estimate, _note = _publish_checks(stage=stage, override_reason=override_reason,
                                          probe=True)
    except StageError as error:
        _publish_problem_record(stage, f"publish refused: {error}")
        raise
    return estimate


def stage_publish_enqueue(*, stage: Stage, by=None, reason: str | None = None,
                          confirmed_total: Decimal | None = None):
    """Queue `stage_publish` on a Celery worker (the admin's "publish in the background");
    raises background.BrokerUnreachable within seconds when the broker is down. A stage that
    spends real money is queued only with its cost confirmed (`confirmation_guard`, asked here
    before queueing and again by the task). A draft that forgets its project's qualification
    (`stage_open_gate_problem`) is refused here, before it is queued, as the task would (kept
    in `Stage.publish_problem`)."""
    if stage.status == StageStatus.DRAFT and (problem := stage_open_gate_problem(stage)):
        _publish_problem_record(stage, f"publish refused: {problem}")
        raise GuardFailed(problem)
    if publish_needs_confirmation(stage=stage):
        confirmation_guard(stage=stage, estimate=stage_cost_estimate(stage=stage),
                           confirmed_total=confirmed_total)
    return task_send_or_fail_fast(
        "worker.tasks.providers.stage_publish",
        args=[stage.pk, getattr(by, "pk", None), reason,
              None if confirmed_total is None else str(confirmed_total)])


def stage_hits_create(*, stage: Stage) -> PublishReport:
    """Create every pending HIT of the stage on its provider (resumable; the benchmark calls
    this directly to publish many HITs against a throttling server)."""
    return stage_hits_publish(stage=stage, provider=get_provider(stage.provider))


def stage_close(*, stage: Stage, user=None, reason: str = "", actor: str = "") -> Stage:
    """Stop the stage on the provider (expire HITs / stop the study) and close it. Expired
    first, so a provider that fails leaves the stage open to close again; then whatever a
    publish running beside it created meanwhile is expired too. Closed once, whichever door
    asks twice: a stage closed already raises `StageAlreadyClosed` (nothing logged), and a
    close that another one overtook while the provider was expiring the HITs is logged by that
    one only. A close asked again is the researcher's retry when the first one's second expire
    failed (MTurk throttled it) and left HITs open on the provider: nothing else expires a
    closed stage's HITs, so it expires them (as recorded) before answering, and says how many
    (`StageAlreadyClosed.expired`); with none open it sends nothing."""
    stage.refresh_from_db(fields=["status"])
    if stage.status == StageStatus.CLOSED:
        expired = _hits_opened_meanwhile_expire(stage)
        raise StageAlreadyClosed(f"{stage} is already closed", expired=expired)
    if stage.status != StageStatus.DRAFT:
        hit_updates_record(get_provider(stage.provider).expire_stage(stage=stage))
    with transaction.atomic():
        fresh = Stage.objects.select_for_update().get(pk=stage.pk)
        if fresh.status != StageStatus.CLOSED:  # else closed meanwhile: logged by that close
            stage_transition(stage=stage, to_status=StageStatus.CLOSED, user=user,
                             actor=actor or "stage_close called without a user",
                             reason=reason.strip() or "closed (no reason given)")
        stage.status = StageStatus.CLOSED
    _hits_opened_meanwhile_expire(stage)
    return stage


def _hits_opened_meanwhile_expire(stage: Stage) -> int:
    """Expire the HITs of a closed stage that are open: created by a publish, or reopened by
    an extend, that ran beside its close (the admin's Close while a background publish creates
    the HITs, or in another tab while "Extend by one day" runs). The publish stops creating
    once it sees the stage closed (`stage_hits_publish`); the publish and the extend call this
    after their last provider call, the close after its transition, so whichever ends last
    finds every HIT the other opened, and a closed stage keeps none open on the provider.
    How many HITs it expired."""
    fresh = Stage.objects.get(pk=stage.pk)
    if fresh.status == StageStatus.CLOSED and fresh.hits.filter(status=HitStatus.OPEN).exists():
        return hit_updates_record(get_provider(fresh.provider).expire_stage(stage=fresh))
    return 0


def stage_extend(*, stage: Stage, seconds: int, user=None, actor: str = "") -> Stage:
    """Keep a live stage's HITs (study) open `seconds` longer; a reviewing stage collects
    again, once however many extends (or syncs) reopen it at the same time. A close that ran
    while the HITs were being extended wins: what the extend reopened is expired again."""
    stage.refresh_from_db(fields=["status"])
    if stage.status not in LIVE_STAGE_STATUSES:
        raise IllegalTransition(f"{stage} is {stage.status}: only a live stage can be extended")
    hit_updates_record(get_provider(stage.provider).extend_stage(stage=stage, seconds=seconds))
    _hits_opened_meanwhile_expire(stage)
    if stage.status == StageStatus.REVIEWING:
        with transaction.atomic():
            # Under the row lock: another extend (a second tab) or the sync may have taken it
            # back to collecting while the provider moved the expiry; then it is done. A close
            # meanwhile still refuses the move (closed → collecting).
            fresh = Stage.objects.select_for_update().get(pk=stage.pk)
            stage.status = fresh.status
            if fresh.status != StageStatus.COLLECTING:
                stage_transition(stage=stage, to_status=StageStatus.COLLECTING, user=user,
                                 actor=actor or "stage_extend called without a user",
                                 reason=f"extended by {seconds} s")
        stage_recruitment_follow(stage=stage)
    return stage


def stage_recruitment_follow(*, stage: Stage) -> str:
    """The provider recruits exactly while the stage collects: after the stage's latest move
    between collecting and reviewing (whichever door made it: the sync, a rejection by hand,
    an extend), the provider stops showing it to new workers (reviewing: Prolific PAUSEs the
    study, so nobody is sent to a page that turns them away unpaid) or shows it again
    (collecting: START), once per move (`CrowdProvider.stage_recruiting`, a `ProviderCall`
    keyed by the logged `StageTransition`). Called after the move is committed, never inside
    it: a provider that fails leaves the move logged and the call recorded as not done, and
    every sync calls this again until it is done (`_sync_and_review`). Returns why it failed
    ("" when done or nothing to do); never raises."""
    last = StageTransition.objects.filter(stage_id=stage.pk).order_by("-pk").first()
    if last is None or {last.from_status, last.to_status} != {StageStatus.COLLECTING,
                                                              StageStatus.REVIEWING}:
        return ""
    try:
        get_provider(stage.provider).stage_recruiting(
            stage=stage, recruiting=last.to_status == StageStatus.COLLECTING,
            occasion=f"transition-{last.pk}")
    except Exception as exc:  # noqa: BLE001 - recorded in its ProviderCall, retried by the sync
        problem = (f"{stage.get_provider_display()} was not told that {stage} is "
                   f"{last.get_to_status_display().lower()}: {type(exc).__name__}: {exc}")
        logger.warning("%s (the next sync tries again)", problem)
        return problem[:500]
    return ""


def stage_collection_complete(*, stage: Stage) -> bool:
    """Nothing more can come: counting only the submitted work that still takes a slot where
    new work would need one,

    - where the pages pick the items (a Prolific or in-house data stage): every regular item
      reached its redundancy (`annotation/services/assignments/picking.py:stage_items_short`,
      the rule the pages pick by: the next page has nothing to hand out), whatever the HIT
      plan's assignments (they are not the batches the pages hand out: A/B, 5 items × 2
      judgments in batches of 2 is 6 assignments and 5 batches), with work the provider
      confirmed (Prolific listed the submission). Work that gives its slot back
      (`annotation.selectors.judgments_releasing_slots`: rejected or flagged work, a worker
      blocked for the project) leaves its items short, and picking serves them again;
    - MTurk: every assignment MTurk used up, rejected ones too (MTurk never gives one back;
      the sync buys a replacement, which grows the HIT: `annotation/services/replacements.py`);
    - Prolific, besides: every submission holding a place in the study
      (`prolific_study_places`: the batches its pages hand out, not the HITs' assignments):
      not one Prolific reopened the place of (rejected, returned, timed out), and an approved
      one given back holds its place until the sync adds one (which grows the HIT), since
      until then no new participant can take part;
    - an in-house qualification or practice stage, whose pages give every worker all its
      items: its HITs' assignments (its takers) with work that holds its slot.

    So a stage whose slots or places reopened stays in, or goes back to, collecting."""
    if stage.provider in (Provider.INHOUSE, Provider.PROLIFIC) and mixes_in_extras(stage):
        short = stage_items_short(
            stage=stage, confirmed_only=get_provider(stage.provider).confirms_submissions)
        if short == 0:
            return True
        if stage.provider == Provider.INHOUSE:
            return False
    wanted = prolific_study_places(stage=stage) if stage.provider == Provider.PROLIFIC \
        else sum(stage.hits.values_list("max_assignments", flat=True))
    done = stage.assignments.exclude(
        status__in=[AssignmentStatus.IN_PROGRESS, AssignmentStatus.RETURNED]
    )
    if stage.provider == Provider.PROLIFIC:
        done = done.exclude(status=AssignmentStatus.REJECTED)
    elif stage.provider != Provider.MTURK:
        done = done.exclude(pk__in=judgments_releasing_slots(
            Judgment.objects.filter(stage=stage), project=stage.project,
        ).values("assignment_id")).exclude(status__in=[AssignmentStatus.REJECTED,
                                                       AssignmentStatus.FLAGGED])
    if get_provider(stage.provider).confirms_submissions:
        # Submissions the provider never listed (a made-up assignment id) fill no HIT.
        done = done.filter(provider_confirmed_at__isnull=False)
    return wanted > 0 and done.count() >= wanted


def stage_reopen_if_slots_free(*, stage: Stage, actor: str, reoffered: int = 0,
                               user=None) -> bool:
    """Take a reviewing stage back to collecting when work no longer holds a slot or place
    that new work needs (`stage_collection_complete`), at once, whichever door freed it (the
    sync after its review and re-offers; a rejection by hand: Prolific reopens a rejected
    submission's place the moment it is rejected). On MTurk only for the assignments bought
    (`reoffered`): a slot it could not buy, nobody could take. Returns whether it reopened.
    The status is read under the stage row's lock, not from `stage` (loaded before another
    rejection, or another request, reopened it)."""
    if stage.provider == Provider.MTURK and not reoffered:
        return False
    with transaction.atomic():
        fresh = Stage.objects.select_for_update().get(pk=stage.pk)
        stage.status = fresh.status
        if fresh.status != StageStatus.REVIEWING or stage_collection_complete(stage=fresh):
            return False
        stage_transition(stage=stage, to_status=StageStatus.COLLECTING, user=user, actor=actor,
                         reason=_reopen_reason(stage, reoffered))
    stage_recruitment_follow(stage=stage)
    return True


def _reopen_reason(stage: Stage, reoffered: int) -> str:
    if stage.provider == Provider.MTURK:
        return f"{reoffered} slot(s) of rejected or blocked work re-offered as new assignments"
    added = f"; {reoffered} place(s) added to the Prolific study" if reoffered else ""
    return ("slots of work that no longer counts (rejected, flagged or a blocked worker) "
            f"are offered to other workers again{added}")
