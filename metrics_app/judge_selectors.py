"""Reads of judges (selectors): every kind of judge read the same way: item id -> (verdict, score, probability,
reasoning), whatever gave it.

References: `metric:NAME` (a registered metric's stored scores at its latest version on the
project: `metric:f1`, `metric:meteor`, `metric:bertscore`, `metric:lerc`, `metric:lerc_prob`),
or `NAME` / `NAME@VERSION` (an LLM or imported judge's verdicts; NAME alone is its latest
version with verdicts on the project)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Max

from annotation.models import Project, TaskKind
from core.vocabulary import PROBABILITY_METRIC_NAME

from .models import Judge, JudgeVerdict, JudgeVersion, MetricScore

# Metrics whose value is a probability that the answer is correct (read as such).
PROBABILITY_METRICS = (PROBABILITY_METRIC_NAME,)


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

    @property
    def label(self) -> str:
        return self.ref if self.kind == "metric" else f"{self.ref.split('@')[0]}@{self.version}"


def metric_view(project: Project, name: str) -> JudgeView:
    rows = MetricScore.objects.filter(item__project=project, metric=name, side="")
    last = rows.aggregate(top=Max("id"))["top"]
    if last is None:
        raise LookupError(f"no {name} scores stored on {project.slug} (score_project "
                          f"{project.slug} --metric {name})")
    version = MetricScore.objects.get(pk=last).version
    view = JudgeView(ref=f"metric:{name}", kind="metric", version=version)
    is_probability = name in PROBABILITY_METRICS
    for item_id, value in rows.filter(version=version).values_list("item_id", "value"):
        view.asked += 1
        if value is None:
            view.unparseable += 1
            continue
        view.calls[item_id] = JudgeCall(verdict=None, score=float(value),
                                        probability=float(value) if is_probability else None)
    return view


def verdict_view(project: Project, version: JudgeVersion) -> JudgeView:
    view = JudgeView(ref=version.label, kind=version.judge.kind, version=version.version)
    ab = project.kind == TaskKind.AB
    rows = (JudgeVerdict.objects.filter(judge_version=version, item__project=project)
            .order_by("item_id", "id")
            .values_list("item_id", "order", "verdict", "score", "probability", "parsed",
                         "reasoning"))
    for item_id, order, verdict, score, probability, parsed, reasoning in rows:
        view.asked += 1
        if not parsed:
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
    if "@" in ref:
        return judge_version_get(ref)
    judge_version_get(ref)  # the judge exists (else LookupError naming the judges)
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
    """The judge's value on a 0-1 scale for the estimates: its probability, else its verdict
    or score mapped onto 0-1 (Likert 1-5 scores as (s-1)/4)."""
    values = []
    for i in items:
        call = view.calls[i]
        if call.probability is not None:
            values.append(call.probability)
        elif call.score is not None:
            values.append(call.score)
        else:
            values.append(call.verdict)
    values = np.array(values, dtype=float)
    if len(values) and (values.min() < 0 or values.max() > 1):
        low, high = (1.0, 5.0) if values.min() >= 1 and values.max() <= 5 else \
            (values.min(), values.max())
        values = (values - low) / (high - low) if high > low else np.full(len(values), 0.5)
    return values
