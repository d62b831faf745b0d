"""Reads of judges (selectors): every kind of judge read the same way: item id -> (verdict, score, probability,
reasoning), whatever gave it.

References: `metric:NAME` (a registered metric's stored scores on the project, at the version
`metric_version_on_project` names: LERC's the served one, others the latest: `metric:f1`, `metric:meteor`, `metric:bertscore`, `metric:lerc`, `metric:lerc_prob`),
or `NAME` / `NAME@VERSION` (an LLM or imported judge's verdicts; NAME alone is its latest
version with verdicts on the project)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Max

from annotation.models import Item, Project, TaskKind
from core.vocabulary import PROBABILITY_METRIC_NAME, ModelKind

from .domain.judge_prompts import DEFAULT_PARSE, answer_score_problem, item_prompt
from .model_selectors import (
    REGRESSION_MODEL_NAME,
    learned_metric_seen_items,
    promoted_model_version,
)
from .models import (
    Judge,
    JudgeKind,
    JudgeVerdict,
    JudgeVersion,
    MetricScore,
    ModelStatus,
    ModelVersion,
)

# Metrics whose value is a probability that the answer is correct (read as such).
PROBABILITY_METRICS = (PROBABILITY_METRIC_NAME,)
# LERC's 1-5 score.
LIKERT_SCORE_METRIC = ModelKind.REGRESSION.metric_name
# The metrics a LERC version scores (its version is the model version's "vN").
LERC_METRICS = (PROBABILITY_METRIC_NAME, LIKERT_SCORE_METRIC)
LIKERT_RANGE = (1.0, 5.0)


@dataclass
class JudgeCall:
    verdict: float | None  # 1 correct / 0 incorrect (A/B: 1 = side A)
    score: float | None
    probability: float | None
    reasoning: str = ""


@dataclass
class JudgeView:
    ref: str
    kind: str  # metric | llm | imported
    version: str
    calls: dict[int, JudgeCall] = field(default_factory=dict)
    unparseable: int = 0
    asked: int = 0
    # A/B judges asked in both orders: item -> {"AB": side, "BA": side}
    orders: dict[int, dict[str, str]] = field(default_factory=dict)
    # The scale the judge's scores are on, where its source fixes it (Likert 1-5), so that
    # scores that happen to be all 1 are not read as already on 0-1; None: read from them.
    score_range: tuple[float, float] | None = None
    # A learned metric's items left out because its version trained or calibrated on them
    # (`learned_metric_seen_items`): no reading of the judge against humans may use them.
    left_out_seen: int = 0
    # Those items themselves, and any item of the project its version saw though unscored:
    # the estimates predict them unsure, and so does the judge plan.
    seen_items: frozenset[int] = frozenset()
    # Item orders whose only verdicts judged text the item no longer holds (`current_verdicts`).
    on_earlier_content: int = 0

    @property
    def label(self) -> str:
        return self.ref if self.kind == "metric" else f"{self.ref.split('@')[0]}@{self.version}"


def metric_version_on_project(project: Project, name: str) -> str | None:
    """The version of metric `name` whose stored scores every report reads on `project`
    (None: none stored). LERC's (`lerc`, `lerc_prob`): the version that serves the project
    (`promoted_model_version`), when its scores are stored here; else the one stored last that
    was not rejected by the promotion rule (a version scored by hand with `--model` and
    rejected is never read as "the promoted LERC"). Every other metric: the version stored
    last."""
    rows = MetricScore.objects.filter(item__project=project, metric=name, side="")
    if name in LERC_METRICS:
        served = promoted_model_version(project=project)
        if served is not None and rows.filter(version=f"v{served.number}").exists():
            return f"v{served.number}"
        rejected = [f"v{n}" for n in ModelVersion.objects.filter(
            name=REGRESSION_MODEL_NAME, status=ModelStatus.REJECTED)
            .values_list("number", flat=True)]
        rows = rows.exclude(version__in=rejected)
    last = rows.aggregate(top=Max("id"))["top"]
    return None if last is None else MetricScore.objects.get(pk=last).version


def lerc_versions_read(project: Project) -> str:
    """The LERC versions the reports read on `project` (`metric_version_on_project`), for the
    caches' fingerprints: promoting or rolling back a version stores no score, yet changes
    which scores "the promoted LERC" means."""
    return ",".join(f"{name}:{metric_version_on_project(project, name)}"
                    for name in LERC_METRICS)


def metric_view(project: Project, name: str) -> JudgeView:
    rows = MetricScore.objects.filter(item__project=project, metric=name, side="")
    version = metric_version_on_project(project, name)
    if version is None:
        raise LookupError(f"no {name} scores stored on {project.slug} (score_project "
                          f"{project.slug} --metric {name})")
    view = JudgeView(ref=f"metric:{name}", kind="metric", version=version,
                     score_range=LIKERT_RANGE if name == LIKERT_SCORE_METRIC else None)
    is_probability = name in PROBABILITY_METRICS
    seen = learned_metric_seen_items(project, name, version)
    view.seen_items = seen
    for item_id, value in rows.filter(version=version).values_list("item_id", "value"):
        if item_id in seen:
            view.left_out_seen += 1
            continue
        view.asked += 1
        if value is None:
            view.unparseable += 1
            continue
        view.calls[item_id] = JudgeCall(verdict=None, score=float(value),
                                        probability=float(value) if is_probability else None)
    return view


VERDICT_FIELDS = ("item_id", "order", "verdict", "score", "probability", "parsed", "reasoning")


def current_verdicts(project: Project, version: JudgeVersion, *, items=None
                     ) -> tuple[list[tuple], int]:
    """(rows of `VERDICT_FIELDS`, how many item orders have verdicts on earlier content only)
    of a judge version on the project's items (`items`: a narrower queryset of them): per item
    and order shown, its newest verdict on what the item holds now, parsed or not. An LLM
    judge's verdict carries a hash of what it was shown (`judge_prompts.item_prompt`): one on
    text the item no longer holds (edited before anyone judged it) is not the judge's verdict
    on it, and a rerun asks again. The one read of every door that reads a judge's verdicts
    (`verdict_view`: the judges page and API, `judge_report`, the estimates, the routing, the
    plan; the leaderboard's judge boards)."""
    rows = JudgeVerdict.objects.filter(judge_version=version, item__project=project)
    if items is not None:
        rows = rows.filter(item__in=items.values("pk"))
    rows = list(rows.order_by("item_id", "-id").values_list(*VERDICT_FIELDS, "content_hash"))
    current = _current_hashes(version, {row[0] for row in rows})
    read: set[tuple[int, str]] = set()
    earlier: set[tuple[int, str]] = set()
    out = []
    for row in rows:
        key = (row[0], row[1] or "AB")
        if key in read:
            continue  # an older verdict in the same order
        expected = current.get((row[0], row[1]))
        if expected is not None and row[-1] != expected:
            earlier.add(key)  # a verdict on the item's earlier content
            continue
        read.add(key)
        out.append(row[:-1])
    return out, len(earlier - read)


def _current_hashes(version: JudgeVersion, item_ids: set[int]) -> dict[tuple[int, str], str]:
    """(item id, order) -> the hash of what an LLM judge version would be shown now; empty for
    an imported judge (its items' content is fixed while it has verdicts:
    `item_imported_verdicts_note`) or a config that renders no prompt."""
    config = version.config or {}
    if version.judge.kind != JudgeKind.LLM or not item_ids:
        return {}
    orders = ("AB", "BA") if config.get("task") == TaskKind.AB else ("",)
    out = {}
    try:
        for item_id, content in (Item.objects.filter(pk__in=item_ids)
                                 .values_list("id", "content")):
            for order in orders:
                out[item_id, order] = item_prompt(config, content, order=order)[1]
    except (KeyError, ValueError, TypeError):
        return {}  # a config no prompt renders from: read its verdicts as stored
    return out


def verdict_view(project: Project, version: JudgeVersion) -> JudgeView:
    view = JudgeView(ref=version.label, kind=version.judge.kind, version=version.version,
                     score_range=_verdict_score_range(project, version))
    ab = project.kind == TaskKind.AB
    # Per item and order, the newest verdict on what the item holds now, parsed or not.
    rows, view.on_earlier_content = current_verdicts(project, version)
    config = {**(version.config or {}), "task": project.kind}
    for item_id, order, verdict, score, probability, parsed, reasoning in rows:
        view.asked += 1
        if not parsed or answer_score_problem(config, score):
            # A score off the task's scale, stored before the parse rules refused it, is read
            # as the rules now read that answer: unparseable.
            view.unparseable += 1
            continue
        if ab:
            view.orders.setdefault(item_id, {})[order or "AB"] = verdict
            if order == "BA" and item_id in view.calls:
                continue  # the item's verdict is read from the order shown as stored (AB)
            value = {"A": 1.0, "B": 0.0}.get(verdict)
        else:
            value = {"correct": 1.0, "incorrect": 0.0}.get(verdict.lower())
        view.calls[item_id] = JudgeCall(verdict=value, score=score, probability=probability,
                                        reasoning=reasoning)
    return view


def _verdict_score_range(project: Project, version: JudgeVersion) -> tuple | None:
    """Likert 1-5 where the source fixes it: imported scores on Likert items (the import
    refuses any other) and an LLM judge's `likert` parse rule."""
    if project.kind != TaskKind.LIKERT:
        return None
    if version.judge.kind == JudgeKind.IMPORTED or \
            (version.config or {}).get("parse") == DEFAULT_PARSE[TaskKind.LIKERT]:
        return LIKERT_RANGE
    return None


def item_imported_verdicts_note(item_id: int) -> str:
    """What the item rule says about an item with imported verdicts ("" when it has none):
    they judged this content, and an imported judge cannot be asked again (an LLM judge's
    verdicts carry a hash of what it read, and a rerun asks it again on new content).
    Registered as an `annotation.hooks` content reader."""
    labels = sorted({f"{name}@{version}" for name, version in JudgeVerdict.objects.filter(
        item_id=item_id, judge_version__judge__kind=JudgeKind.IMPORTED).values_list(
        "judge_version__judge__name", "judge_version__version")})
    if not labels:
        return ""
    return f"it has imported verdicts ({', '.join(labels)}) on this content"


def judge_version_get(label: str) -> JudgeVersion:
    """`name@version`, or `name` for its latest version; LookupError names what is missing."""
    name, _, version = label.partition("@")
    judge = Judge.objects.filter(name=name).first()
    if judge is None:
        known = ", ".join(Judge.objects.values_list("name", flat=True)) or "none"
        raise LookupError(f"no judge named {name!r} (judges: {known})")
    versions = judge.versions.all()
    found = versions.filter(version=version).first() if version else versions.last()
    if found is None:
        raise LookupError(f"judge {name!r} has no version {version!r} (versions: "
                          f"{', '.join(versions.values_list('version', flat=True)) or 'none'})")
    return found


def judge_view(project: Project, ref: str) -> JudgeView:
    """The judge `ref` on this project (LookupError says what is missing)."""
    if ref.startswith("metric:"):
        return metric_view(project, ref.removeprefix("metric:"))
    version = _version_on_project(project, ref)
    return verdict_view(project, version)


def _version_on_project(project: Project, ref: str) -> JudgeVersion:
    """The version `ref` names (NAME@VERSION, or NAME's latest with verdicts on the project),
    refused alike when it has no verdicts on this project: a version that exists elsewhere
    would otherwise be an empty judge here, read as "no prediction" on every item."""
    named = judge_version_get(ref)  # the judge and version exist (else LookupError naming them)
    if "@" in ref:
        on_project = JudgeVerdict.objects.filter(judge_version=named,
                                                 item__project=project).exists()
        version = named if on_project else None
    else:
        version = (JudgeVersion.objects.filter(judge__name=ref,
                                               verdicts__item__project=project)
                   .order_by("-id").first())
    if version is None:
        raise LookupError(f"judge {ref!r} has no verdicts on {project.slug} (run_judge "
                          f"{project.slug} {ref} or import_verdicts)")
    return version


def default_refs(project: Project) -> list[str]:
    """The metrics stored on the project and the latest version of every judge with verdicts
    on it."""
    metrics = sorted(set(MetricScore.objects.filter(item__project=project, side="")
                         .values_list("metric", flat=True)))
    judges = []
    seen = set()
    for version in (JudgeVersion.objects.filter(verdicts__item__project=project)
                    .select_related("judge").distinct().order_by("-id")):
        if version.judge.name not in seen:
            seen.add(version.judge.name)
            judges.append(version.label)
    return [f"metric:{name}" for name in metrics] + sorted(judges)


def judge_history(project: Project, name: str) -> list[JudgeVersion]:
    return list(JudgeVersion.objects.filter(judge__name=name, verdicts__item__project=project)
                .distinct().order_by("id"))


def predictor_values(view: JudgeView, items: Sequence[int]) -> np.ndarray:
    """The judge's value on a 0-1 scale for the estimates, each item on its own: its
    probability when it has one, else its score on 0-1, else its verdict (1/0). A judge may
    give a probability on some items and only a score on others; the probabilities are never
    rescaled with the scores. Scores: on the judge's known scale (`score_range`: Likert 1-5
    as (s-1)/4), else as they are when every score of the judge is in 0-1, (s-1)/4 when
    every one is in 1-5, else rescaled by the judge's lowest and highest score."""
    to_unit = _score_to_unit(view)
    values = []
    for i in items:
        call = view.calls[i]
        if call.probability is not None:
            values.append(call.probability)
        elif call.score is not None:
            values.append(to_unit(call.score))
        else:
            values.append(call.verdict)
    return np.array(values, dtype=float)


def _score_to_unit(view: JudgeView):
    """score -> 0-1 for this judge, one rule for all its items (read from all its scores on
    the project, so a subset of items maps the same way)."""
    low, high = view.score_range or _observed_range(view)
    if high <= low:
        return lambda score: 0.5
    return lambda score: min(1.0, max(0.0, (score - low) / (high - low)))


def _observed_range(view: JudgeView) -> tuple[float, float]:
    scores = [call.score for call in view.calls.values() if call.score is not None]
    if not scores:
        return (0.0, 1.0)
    low, high = min(scores), max(scores)
    if low >= 0 and high <= 1:
        return (0.0, 1.0)
    if low >= LIKERT_RANGE[0] and high <= LIKERT_RANGE[1]:
        return LIKERT_RANGE
    return (low, high)
