"""Which version serves, and the promotion rule; promote, roll back by hand.

The rule, in one sentence: a version is promoted only if it beats every measurable baseline on
its validation examples (the floor), is at least as good as the promoted version of its own
project set on the same examples, and is at least as good as every other version it would take
a project from, on that project's part of them.

Why the last part: a promoted version serves every project of its set (the selectors,
`metrics_app/model_selectors.py:promoted_model_version`: a project is served by the most
recently promoted version trained on it), so a version trained on {A, B} replaces project A's
own version. It is compared with that version on A's validation examples (the examples of its
validation split whose item is A's: no dataset is rebuilt, and the split hashes each passage
group alone, so they are A's own validation split up to the validation cap), and the decision
record lists each comparison (`takeovers`). A project whose part is empty, or on which the
candidate's number is undefined, is not shown at least as good: the version is rejected, and a
researcher may still promote it by hand with force, the numbers shown. Every door that changes
what serves applies the same check: the decision, the promotion by hand
(`hand_promotion_objection`: a version whose decision did not compare it with each version
serving its projects now needs force), and the rollback (refused when the earlier version
would take a project from a version of another set promoted after it, `projects_won_since`)."""
from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.domain.numbers import MAX_ROW_ID
from annotation.models import Item, Project
from metrics_app.access_selectors import model_versions_visible_to
from metrics_app.lerc.config import KIND_PAIRWISE, KIND_REGRESSION
from metrics_app.lerc.data import capped_examples
from metrics_app.lerc.validation import validation_metric_name
from metrics_app.model_selectors import (
    GROUP_READ_BATCH,
    REGRESSION_MODEL_NAME,
    projects_served_by_others,
    projects_won_since,
    promoted_model_version,
    version_project_set,
)
from metrics_app.models import ModelKind, ModelStatus, ModelVersion
from metrics_app.services.lerc_artifacts import ModelFilesUnusable

from .common import TRAINED, LercError, decision_pending, version_event, versions_locked
from .datasets import version_dataset_build
from .evaluation import model_version_scorer, split_metrics, validation_undefined_reason
from .options import version_train_config

# A decision reads the candidate's validation number of its training (no new measurement).
STORED = object()


def _scope_label(project_ids) -> str:
    slugs = Project.objects.filter(id__in=project_ids).order_by("slug").values_list("slug",
                                                                                     flat=True)
    return ", ".join(slugs) or "no project"


def model_version_decide(*, model_version: ModelVersion, val_examples: list | None = None
                         ) -> ModelVersion:
    """Apply the promotion rule to an evaluated version (see the module docstring).

    The incumbent is re-scored outside any lock (it takes a while); the verdict is then
    written under the lock of the name's versions (`common.versions_locked`), and only if the
    incumbent, and the version serving each project it would take over, are still those
    measured. When another promotion landed meanwhile (a second retrain finishing, a promotion
    by hand, of its set or of another set sharing a project), the version is measured again
    against the versions serving then, never promoted over a version it was not compared
    with."""
    version = ModelVersion.objects.get(pk=model_version.pk)
    if not decision_pending(version):
        return version  # decided already (a redelivered or resent task): once only
    candidate: float | None | object = STORED
    if val_examples is None:
        cfg = version_train_config(version)
        dataset = version_dataset_build(version)
        val_examples = capped_examples(cfg, dataset.val, cfg.max_val_examples)
        # Read again by today's counting rule, the judgments may no longer be those it was
        # trained and measured on (an item excluded or a worker blocked since): its stored
        # number then describes other examples, and it is measured on these, as the
        # incumbent is. (A snapshot without the hash names no judgments to compare.)
        pinned = version.data_snapshot.get("judgment_ids_sha256")
        if pinned is not None and dataset.snapshot.get("judgment_ids_sha256") != pinned:
            try:
                candidate = split_metrics(model_version_scorer(version), version.kind,
                                          val_examples).get(_validation_metric(version))
            except ModelFilesUnusable as exc:
                raise LercError(f"v{version.number} cannot be measured again: {exc}") from exc
    for _attempt in range(5):
        incumbent, taken = _serving_now(version)
        promote, why, decision = _promotion_verdict(version, incumbent, val_examples, candidate,
                                                    taken=taken)
        with transaction.atomic():
            versions_locked(version.name)
            version = ModelVersion.objects.get(pk=version.pk)
            if not decision_pending(version):
                return version  # decided meanwhile (a redelivered or resent task)
            if _serving_key(*_serving_now(version)) != _serving_key(incumbent, taken):
                continue  # another promotion landed: compare with what serves now
            version.metrics = {**version.metrics, "promotion_decision": decision}
            version.save(update_fields=["metrics"])
            if promote:
                return _promote(model_version=version, reason=f"automatic: {why}")
            version.status = ModelStatus.REJECTED
            version.save(update_fields=["status"])
            version_event(version, "rejected", f"automatic: {why}")
            return version
    raise LercError(f"v{version.number}: the promoted version of its projects kept changing "
                    "while it was compared; decide it again (lerc_evaluate)")


def _serving_now(version: ModelVersion) -> tuple[ModelVersion | None, list]:
    """The promoted version of `version`'s own project set, and the (project, version serving
    it) pairs of the other projects it would take over (`projects_served_by_others`)."""
    incumbent = promoted_model_version(name=version.name, projects=version_project_set(version))
    return incumbent, projects_served_by_others(version, besides=[incumbent])


def _serving_key(incumbent, taken) -> tuple:
    return getattr(incumbent, "pk", None), tuple((p.pk, v.pk) for p, v in taken)


def _validation_by_project(val_examples: list, project_ids) -> dict[int, list]:
    """The validation examples of each project in `project_ids`, by their item (an example's
    id is its item's id), read in batches the database takes as parameters."""
    item_ids = sorted({int(e.id) for e in val_examples
                       if str(getattr(e, "id", "")).isdigit() and 1 <= int(e.id) <= MAX_ROW_ID})
    project_of: dict[int, int] = {}
    for start in range(0, len(item_ids), GROUP_READ_BATCH):
        project_of.update(Item.objects.filter(
            id__in=item_ids[start:start + GROUP_READ_BATCH], project_id__in=list(project_ids)
        ).values_list("id", "project_id"))
    parts: dict[int, list] = {pid: [] for pid in project_ids}
    for example in val_examples:
        item_id = str(getattr(example, "id", ""))
        pid = project_of.get(int(item_id)) if item_id.isdigit() else None
        if pid is not None:
            parts[pid].append(example)
    return parts


def _takeover_comparisons(version: ModelVersion, taken: list, val_examples: list,
                          metric: str) -> list[dict[str, Any]]:
    """The candidate against the version serving each project it would take over, both scored
    on that project's part of the validation examples; one record per project."""
    parts = _validation_by_project(val_examples, [project.pk for project, _v in taken])
    rows = []
    for project, serving in taken:
        examples = parts[project.pk]
        row: dict[str, Any] = {"project": project.slug, "project_id": project.pk,
                               "serving": f"v{serving.number}", "examples": len(examples),
                               "candidate": None, "serving_value": None}
        if examples:
            try:
                row["candidate"] = split_metrics(model_version_scorer(version), version.kind,
                                                 examples).get(metric)
            except ModelFilesUnusable as exc:
                raise LercError(f"v{version.number} cannot be measured on project "
                                f"{project.slug}: {exc}") from exc
            try:
                row["serving_value"] = split_metrics(model_version_scorer(serving),
                                                     version.kind, examples).get(metric)
            except ModelFilesUnusable as exc:
                row["serving_error"] = str(exc)  # the served model is gone: not comparable
        row["at_least_as_good"] = row["candidate"] is not None and (
            row["serving_value"] is None or row["candidate"] >= row["serving_value"])
        rows.append(row)
    return rows


def _takeover_words(row: dict, metric: str) -> str:
    if not row["examples"]:
        return (f"project {row['project']} (served by {row['serving']}) has none of its "
                "validation examples: it cannot be compared there")
    return (f"on project {row['project']}, {metric} {_number(row['candidate'])} vs "
            f"{row['serving']}'s {_number(row['serving_value'])} (serving it now) on the same "
            f"{row['examples']} validation examples of {row['project']}")


def _validation_metric(version: ModelVersion) -> str:
    return validation_metric_name(KIND_PAIRWISE if version.kind == ModelKind.PAIRWISE
                                  else KIND_REGRESSION)


def _promotion_verdict(version: ModelVersion, incumbent: ModelVersion | None,
                       val_examples: list, candidate: float | None | object = STORED,
                       taken: list = ()) -> tuple[bool, str, dict[str, Any]]:
    """(promote, why, decision record) for `version` (its `candidate` value on `val_examples`;
    STORED: the validation number of its training) against `incumbent` (re-scored on
    `val_examples`), against each version serving a project it would take over (`taken`,
    both scored on that project's part of `val_examples`), and the baseline floor."""
    metric = _validation_metric(version)
    stored = (version.metrics.get("validation") or {}).get(metric)
    remeasured = candidate is not STORED
    if not remeasured:
        candidate = stored
    decision: dict[str, Any] = {"metric": metric, "candidate": candidate,
                                "validation_judgments_sha256":
                                    version.data_snapshot.get("judgment_ids_sha256"),
                                "validation_examples": len(val_examples)}
    if remeasured:
        decision["candidate_in_training"] = stored
    if incumbent is None:
        promote, why = candidate is not None, "no promoted version yet"
        if candidate is None:
            why = (f"validation {metric} could not be computed: "
                   + (validation_undefined_reason(version) if not remeasured else
                      f"undefined on the {len(val_examples)} validation examples"))
    else:
        try:
            incumbent_value = split_metrics(model_version_scorer(incumbent), version.kind,
                                        val_examples).get(metric)
        except ModelFilesUnusable as exc:
            # The served model is gone or damaged: it cannot be compared, and serving it fails
            # anyway.
            incumbent_value = None
            decision["incumbent_error"] = str(exc)
        decision.update(incumbent=f"v{incumbent.number}", incumbent_value=incumbent_value)
        promote = candidate is not None and (incumbent_value is None
                                             or candidate >= incumbent_value)
        why = (f"{metric} {candidate} vs v{incumbent.number}'s {incumbent_value} on the same "
               f"{len(val_examples)} validation examples")
    if taken:
        decision["takeovers"] = _takeover_comparisons(version, list(taken), val_examples, metric)
        worse = [row for row in decision["takeovers"] if not row["at_least_as_good"]]
        if promote and worse:
            promote = False
            why = ("not shown at least as good as every version it would take a project "
                   "from: " + "; ".join(_takeover_words(row, metric) for row in worse))
        elif promote:
            why += "; " + "; ".join(_takeover_words(row, metric)
                                    for row in decision["takeovers"])
    floor = _baseline_floor(version, metric)
    if floor is not None:
        decision["floor"] = floor
        if promote and not floor["passed"]:
            promote = False
            # The floor compares the numbers of training, all measured on its examples.
            measured_on = (version.metrics.get("validation") or {}).get("n", len(val_examples))
            why = (f"{metric} {stored} does not beat the best baseline, "
                   f"{floor['best']} at {floor['best_value']}, on the same "
                   f"{measured_on} validation examples")
        elif promote:
            why += f"; beats the best baseline {floor['best']} ({floor['best_value']})"
    decision["promoted"] = promote
    return promote, why, decision


def promotion_baselines() -> list[str]:
    return list(getattr(settings, "QAJ_LERC_PROMOTION_BASELINES", []) or [])


def _baseline_floor(version: ModelVersion, metric: str) -> dict | None:
    """The promotion floor: the version's validation metric must beat every baseline metric
    measured on the same validation examples (`metrics["baselines"]`, computed after training).
    None when no floor applies (A/B models, or QAJ_LERC_PROMOTION_BASELINES empty)."""
    if version.kind != ModelKind.REGRESSION or not promotion_baselines():
        return None
    candidate = (version.metrics.get("validation") or {}).get(metric)
    measured = (version.metrics.get("baselines") or {}).get("validation") or {}
    values = {name: (measured.get(name) or {}).get(metric) for name in promotion_baselines()
              if name in measured}
    values = {name: value for name, value in values.items() if value is not None}
    if not values:
        return {"passed": candidate is not None, "best": None, "best_value": None,
                "baselines": {}, "note": "no baseline could be measured on validation"}
    best = max(values, key=values.get)
    return {"passed": candidate is not None and candidate > values[best], "best": best,
            "best_value": values[best], "baselines": values,
            "unavailable": (version.metrics.get("baselines") or {}).get("unavailable", {})}


class PromotionNeedsForce(LercError):
    """A promotion by hand of a version the promotion rule has not shown at least as good as
    the one serving its project set, or as one serving a project of its set; the message gives
    the numbers. Promote with `force=True`
    to serve it anyway (the numbers are then logged with the promotion)."""


def _number(value) -> str:
    return "undefined" if value is None else f"{value:.4f}"


def _decision_words(decision: dict) -> str:
    """A stored promotion decision in numbers: the candidate against the incumbent on the same
    validation examples, and the baseline floor."""
    metric = decision.get("metric", "validation metric")
    words = f"{metric} {_number(decision.get('candidate'))}"
    if decision.get("incumbent"):
        words += (f" vs {decision['incumbent']}'s {_number(decision.get('incumbent_value'))} on "
                  f"the same {decision.get('validation_examples')} validation examples")
    for row in decision.get("takeovers") or ():
        words += "; " + _takeover_words(row, metric)
    floor = decision.get("floor") or {}
    if floor.get("best"):
        words += (f"; best baseline {floor['best']} {_number(floor.get('best_value'))} "
                  f"({'beaten' if floor.get('passed') else 'not beaten'})")
    return words


def hand_promotion_objection(version: ModelVersion) -> str | None:
    """Why a promotion by hand of `version` would serve a version the promotion rule has not
    shown at least as good as the one serving its project set now, or as the one serving a
    project of its set now (which it would take over), with the numbers; None when its own
    decision was made against exactly the versions serving now (or, with none serving, against
    none) and said promote (as after a rollback from it).

    Only stored numbers are read (no model is scored in a researcher's request): the decision
    measured both versions on the same validation examples; a version never compared with the
    one serving now is not shown at least as good, whatever its own number on other examples."""
    metric = _validation_metric(version)
    current, taken = _serving_now(version)
    serving = f"v{current.number}" if current is not None else None
    decision = (version.metrics or {}).get("promotion_decision")
    own = _number((version.metrics.get("validation") or {}).get(metric))
    if decision is None:
        objection = (f"v{version.number} was never compared by the promotion rule "
                     f"(validation {metric} {own} on its own examples)")
        if current is not None:
            theirs = _number((current.metrics.get("validation") or {}).get(metric))
            objection += (f"; {serving} serves now (validation {metric} {theirs} on its own "
                          "examples, not comparable)")
        return objection + "".join(f"; v{other.number} serves project {project.slug} now"
                                   for project, other in taken)
    if decision.get("incumbent") != serving:
        return (f"v{version.number}'s promotion decision compared it with "
                f"{decision.get('incumbent') or 'no promoted version'} ({_decision_words(decision)})"
                f", but {serving or 'no version'} serves now and was never compared with it")
    compared = {row.get("project_id"): row.get("serving")
                for row in decision.get("takeovers") or ()}
    uncompared = [(project, other) for project, other in taken
                  if compared.get(project.pk) != f"v{other.number}"]
    if uncompared:
        return (f"v{version.number} would serve " + ", ".join(
            f"project {project.slug} in place of v{other.number}" for project, other in uncompared)
            + f", but its promotion decision ({_decision_words(decision)}) never compared it "
            "with " + ("that version" if len(uncompared) == 1 else "those versions")
            + " on that project's validation examples")
    if decision.get("promoted"):
        return None
    return f"the promotion rule rejected v{version.number}: {_decision_words(decision)}"


@transaction.atomic
def model_version_promote(*, model_version: ModelVersion, user=None, reason: str = "",
                          force: bool = False) -> ModelVersion:
    """Promotion by hand (the admin's action): serve this version for its project set, if the
    promotion rule showed it at least as good as the version serving now
    (`hand_promotion_objection`). Otherwise PromotionNeedsForce, with the numbers, unless
    `force`: a researcher may overrule the rule, but then says so, and the numbers are logged
    with the promotion on the version's card."""
    versions_locked(model_version.name)
    version = ModelVersion.objects.get(pk=model_version.pk)
    if version.status in (ModelStatus.EVALUATED, ModelStatus.REJECTED) and version.artifact_uri:
        # (Any other version is refused by `_promote` for what it is: untrained, or serving.)
        # Read under the lock: a decision promoting another version of the set at this
        # moment is either seen here or happens after this promotion.
        objection = hand_promotion_objection(version)
        if objection is not None and not force:
            raise PromotionNeedsForce(
                f"{objection}. Promote it anyway only with force (the numbers are logged with "
                "the promotion).")
        if objection is not None:
            reason = f"{reason or 'by hand'}; forced over the promotion rule: {objection}"
    return _promote(model_version=version, user=user, reason=reason)


@transaction.atomic
def _promote(*, model_version: ModelVersion, user=None, reason: str = "") -> ModelVersion:
    """Make this the served version of its name for its project set; the version promoted for
    the same set goes back to evaluated (other project sets keep their promoted version, but
    this one, the most recently promoted, serves every project of its set: the callers checked
    it against each version it takes a project from). The rule's own verdict and a rollback
    come here directly; a promotion by hand through `model_version_promote`."""
    versions_locked(model_version.name)
    version = ModelVersion.objects.select_for_update().get(pk=model_version.pk)
    if version.status == ModelStatus.PROMOTED:
        return version
    if version.status not in (ModelStatus.EVALUATED, ModelStatus.REJECTED) or not version.artifact_uri:
        raise LercError(f"v{version.number} is {version.status}; only trained versions "
                        "(evaluated or rejected) can be promoted")
    scope = version_project_set(version)
    for previous in ModelVersion.objects.select_for_update().filter(
        name=version.name, status=ModelStatus.PROMOTED
    ):
        if version_project_set(previous) != scope:
            continue
        previous.status = ModelStatus.EVALUATED
        previous.save(update_fields=["status"])
        version_event(previous, "demoted", f"replaced by v{version.number}", user)
    version.status = ModelStatus.PROMOTED
    version.promoted_at = timezone.now()
    version.save(update_fields=["status", "promoted_at"])
    version_event(version, "promoted", reason or ("by hand" if user else ""), user)
    return version


@transaction.atomic
def model_version_rollback(*, name: str = REGRESSION_MODEL_NAME, user=None,
                           model_version: ModelVersion | None = None) -> ModelVersion:
    """Serve again the version that was promoted before the current one, within a project
    set: `model_version`'s, or the only set with a promoted version of `name`.

    Which version serves now, and which served before it, are read under the lock that
    promotions and promotion decisions take (`common.versions_locked`): a decision landing at
    the same moment (a retrain promoted) happens wholly before or after the rollback, so the
    rollback never replaces a version it did not read as the current one, and one version of
    the set serves.

    The earlier version serves every project of the set again. Where a version of another set
    promoted after the earlier one won one of them over (`projects_won_since`: it serves the
    project now, promoted after the current one, or served it between the two and would serve
    it again), the rollback is refused: the earlier version was never shown at least as good
    there, and a promotion by hand (`model_version_promote`) shows the numbers and needs
    force."""
    if model_version is not None:
        name = model_version.name
    versions_locked(name)
    if model_version is not None:
        scope = version_project_set(model_version)
    else:
        scopes = {version_project_set(v) for v in ModelVersion.objects.filter(
            name=name, status=ModelStatus.PROMOTED)}
        if len(scopes) > 1:
            raise LercError(f"{name} has promoted versions for {len(scopes)} project sets; "
                            "roll back one of them by choosing a version of that set")
        scope = next(iter(scopes), frozenset())
    current = promoted_model_version(name=name, projects=scope)
    if current is None:
        raise LercError(f"no promoted {name} version to roll back from"
                        + (f" for projects {_scope_label(scope)}" if scope else ""))
    # promoted_at is set at every promotion: the latest other one was served just before.
    earlier = next((v for v in ModelVersion.objects.filter(
        name=name, promoted_at__isnull=False,
        status__in=(ModelStatus.EVALUATED, ModelStatus.REJECTED),
    ).exclude(pk=current.pk).order_by("-promoted_at", "-id") if version_project_set(v) == scope), None)
    if earlier is None:
        raise LercError(f"{name} v{current.number} is the only version ever promoted for "
                        f"projects {_scope_label(scope)}")
    taken = projects_won_since(earlier, rolled_back=current)
    if taken:
        raise LercError(
            f"rolling back to {name} v{earlier.number} would make it serve "
            + ", ".join(f"project {project.slug} in place of v{other.number}"
                        for project, other in taken)
            + f", never compared with it there (the rollback undoes v{current.number} only); "
            f"promote v{earlier.number} by hand instead, where its numbers are shown")
    version_event(current, "rolled back", f"back to v{earlier.number}", user)
    # A rollback is the researcher's undo of a promotion and needs no force: the version it
    # serves again served before, and the event says from which.
    return _promote(model_version=earlier, user=user, reason=f"rollback from v{current.number}")


# "3", "v3", "V3": a version number as a label gives it.
_VERSION_NUMBER = re.compile(r"[vV]?([0-9]{1,24})")


def model_version_for_label(label: str | int | None, *, name: str = REGRESSION_MODEL_NAME,
                            project: Project | None = None, user=None) -> ModelVersion:
    """A version by label ("3", "v3", "lerc-ab:v2"), or when label is empty the promoted one
    (for `project`: the most recently promoted one trained on it, see promoted_model_version).

    The one rule for a version label, whoever scores with it (the APIs, `score`,
    `score_project`, the scoring jobs): a `NAME:` prefix must be this metric's model `name`; the
    version must exist, be trained (TRAINED: promoted, evaluated or rejected) and have its
    weights; and with a `user`, be one they may see (`model_versions_visible_to`), answered as
    a missing one. LercError says which."""
    if label in (None, ""):
        version = promoted_model_version(name=name, project=project)
        if version is None:
            raise LercError(f"no {name} version is promoted yet: train one with "
                            "`manage.py train_lerc --project SLUG` or pass --model VERSION")
        return version
    text = str(label).strip()
    if ":" in text:
        prefix, text = text.split(":", 1)
        if prefix.strip() != name:
            raise LercError(f"model version {label!r} is a {prefix.strip() or '(no name)'} "
                            f"version; this metric scores with {name} versions (e.g. {name}:v1)")
    match = _VERSION_NUMBER.fullmatch(text.strip())
    if match is None:
        raise LercError(f"model version {label!r} is not like 3, v3 or {name}:v3")
    number = int(match.group(1))
    versions = ModelVersion.objects.filter(name=name, number=number)
    if user is not None:
        versions = versions.filter(pk__in=model_versions_visible_to(user).values("pk"))
    # A number no id column holds is no version (and never reaches the database driver).
    version = versions.first() if 1 <= number <= MAX_ROW_ID else None
    if version is None:
        raise LercError(f"there is no {name} v{number}")
    if version.status not in TRAINED:
        raise LercError(f"{name} v{number} is {version.status}: only a trained version "
                        "(promoted, evaluated or rejected) scores")
    if not version.artifact_uri:
        raise LercError(f"{name} v{number} is {version.status} and has no trained model")
    return version
