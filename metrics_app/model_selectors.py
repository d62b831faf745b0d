"""Which LERC version serves a project (selectors): the one rule the promotion service, the
scorers and the reports read (the estimates' and the routing's default judge is "the promoted
LERC"), so a report never reads the scores of a version that does not serve."""
from __future__ import annotations

import re

from annotation.models import NON_DATA_STAGE_KINDS, Item, Judgment, Project
from core import vocabulary
from core.text_match import passage_group
from metrics_app.models import ModelStatus, ModelVersion

# The versions a lookup means when it names no model: the regression (the stored name "lerc").
REGRESSION_MODEL_NAME = vocabulary.ModelKind.REGRESSION.model_name
# Items read at once for their passage group (below SQLite's limit on query parameters).
GROUP_READ_BATCH = 900
# The metrics a trained model scores with, and the model name its versions are stored under.
LEARNED_METRIC_MODELS = {
    **{kind.metric_name: kind.model_name for kind in vocabulary.ModelKind},
    vocabulary.PROBABILITY_METRIC_NAME: REGRESSION_MODEL_NAME,
}


def version_project_set(version: ModelVersion) -> frozenset[int]:
    """The ids of the projects a version trains on: its promotion scope."""
    return frozenset(version.projects.values_list("id", flat=True))


def promoted_model_version(*, name: str = REGRESSION_MODEL_NAME, project: Project | None = None,
                           projects=None) -> ModelVersion | None:
    """The served version: for exactly the project set `projects` (ids or projects; the
    promotion scope); else for `project` the most recently promoted one trained on it, or,
    when none was (a new project scored out of domain, as LERC is meant to be used), the most
    recently promoted one of the name."""
    promoted = _promoted(name)
    if projects is not None:
        wanted = frozenset(getattr(p, "id", p) for p in projects)
        return next((v for v in promoted if version_project_set(v) == wanted), None)
    if project is not None:
        own = promoted.filter(projects=project).first()
        if own is not None:
            return own
    return promoted.first()


def _promoted(name: str):
    return (ModelVersion.objects.filter(name=name, status=ModelStatus.PROMOTED)
            .order_by("-promoted_at", "-id"))


def projects_served_by_others(version: ModelVersion, *, besides=()) -> list[tuple[Project,
                                                                                  ModelVersion]]:
    """The projects `version` would take over if it were promoted now, with the version serving
    each now: every project of its set that a promoted version trained on it serves
    (`promoted_model_version(project=...)`, the most recently promoted one), when that is
    another version than `version` and than those of `besides` (the incumbent of its own set,
    compared on all its validation examples). Ordered by project slug. The promotion rule
    compares `version` with each on that project's validation examples before it serves it
    (`metrics_app/services/lerc/promotion.py`)."""
    skip = {version.pk, *(getattr(v, "pk", None) for v in besides)}
    taken = []
    for project in version.projects.order_by("slug", "id"):
        serving = _promoted(version.name).filter(projects=project).first()
        if serving is not None and serving.pk not in skip:
            taken.append((project, serving))
    return taken


def projects_won_since(version: ModelVersion, *, rolled_back: ModelVersion
                       ) -> list[tuple[Project, ModelVersion]]:
    """The projects of `version`'s set that a rollback from `rolled_back` to `version` would take
    from a version promoted after `version` was (still promoted, of another set): one that won
    the project over since, whether it serves it now or would again once `rolled_back` stops
    (it was promoted between the two). `version` was never shown at least as good there;
    a version promoted before it, which it displaced when it was promoted first, is not
    counted. Ordered by project slug."""
    since = version.promoted_at
    won = []
    for project in version.projects.order_by("slug", "id"):
        other = (_promoted(version.name).exclude(pk__in=[version.pk, rolled_back.pk])
                 .filter(projects=project).first())
        if other is not None and (since is None or other.promoted_at is None
                                  or other.promoted_at > since):
            won.append((project, other))
    return won


def learned_metric_seen_items(project: Project, metric: str, version: str | None
                              ) -> frozenset[int]:
    """The items of `project` on which the scores of a learned metric (`lerc`, `lerc_prob`,
    `lerc_ab`) at `version` ("v3") say nothing about how well it judges: the version trained on
    them, or chose its epoch and fitted its calibrator on them (its train and validation
    items, `ModelVersion.examples_seen`), or on another answer of the same passage or question
    (an item it never had, judged after it was trained, whose passage group it trained on).
    Its test items are never among them. Every reading of a learned metric against humans
    leaves these out (the judge views, so the judges page, the judge plan, the estimates and
    the routing; the metric report; the leaderboard's metric boards), and every door says how
    many (the API, the commands, the model card; the notebook frames flag them,
    `<metric>_seen_by_version`, and keep the rows): measured on them it scores
    its memory, and a prediction-powered estimate corrected with labels its predictions were
    fitted to is biased. Empty for any other metric.

    A version trained before the record was kept counts every item it could have read as seen:
    the items of its projects judged up to its pinned watermark."""
    model_name = LEARNED_METRIC_MODELS.get(metric)
    match = re.fullmatch(r"v(\d+)", version or "")
    if model_name is None or match is None:
        return frozenset()
    found = ModelVersion.objects.filter(name=model_name, number=int(match.group(1))).first()
    if found is None:
        return frozenset()
    record = found.examples_seen or {}
    if not record:
        pinned = ((found.data_snapshot or {}).get("watermarks") or {}).get(str(project.id))
        if pinned is None:
            return frozenset()
        return frozenset(Judgment.objects.filter(item__project=project, id__lte=int(pinned))
                         .exclude(stage__kind__in=NON_DATA_STAGE_KINDS)
                         .values_list("item_id", flat=True).distinct())
    seen = set(record.get("items") or ())
    in_dataset = seen | set(record.get("test_items") or ())
    groups = set(record.get("groups") or ())
    ids = list(Item.objects.filter(project=project).values_list("id", flat=True))
    found = {item_id for item_id in ids if item_id in seen}
    # Only the items outside its data are read for their passage (on the project it trained
    # on, the answers judged since), in batches the database takes as parameters.
    outside = [item_id for item_id in ids if item_id not in in_dataset]
    for start in range(0, len(outside) if groups else 0, GROUP_READ_BATCH):
        rows = Item.objects.filter(id__in=outside[start:start + GROUP_READ_BATCH]).values_list(
            "id", "group_key", "content__passage", "content__question")
        found |= {item_id for item_id, group_key, passage, question in rows
                  if passage_group(group_key, passage, question) in groups}
    return frozenset(found)
