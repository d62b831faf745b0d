"""The judge alignment report: every judge (LLM, imported, metrics, LERC) against the human
labels of a project, side by side, with intervals, the human ceiling, disagreements, bias
cards, paired tests between judges, history across versions and prediction-powered estimates
with each judge. The statistics are metrics_app/domain/judge_alignment.py; this module gathers
the numbers. The human label is the one every door reads: Likert projects: "correct" = the
item's human score (adjudicated, else the project's mean or median) of 3 or more; A/B
projects: the adjudicated side, else the project's aggregation model's."""
from __future__ import annotations

import logging
import math
from itertools import combinations

import numpy as np

from annotation.domain.likert_scale import FIVE_POINT_TOP, likert_correct_at
from annotation.judgment_selectors import (
    item_gold_scores,
    item_labels,
    load_judgments,
    with_adjudications,
)
from annotation.models import Project, TaskKind
from annotation.selectors import items_measured_on, measured_on_summary
from core.vocabulary import AB_CHOICES

from ...domain import estimates as est
from ...domain.judge_alignment import (
    binary_alignment,
    human_ceiling,
    length_bias,
    paired_comparison,
    position_bias,
    rate_gap,
    resample_indices,
)
from ...domain.meta_evaluation import best_threshold, content_order_key, is_validation_key
from ...judge_selectors import (
    LIKERT_RANGE,
    JudgeView,
    default_refs,
    judge_history,
    judge_view,
    lerc_versions_read,
    predictor_values,
    verdict_view,
)

logger = logging.getLogger(__name__)

# A judge's Likert score is on 1-5 (`TASK_SCORE_RANGE`), whatever the project's scale: its
# verdict threshold is that scale's cut.
JUDGE_CORRECT_AT = likert_correct_at(FIVE_POINT_TOP)
DISAGREEMENTS = 25
ESTIMATE_LABELS = 200


def human_labels(project: Project, *, with_unlabelled: bool = False) -> dict[int, dict]:
    """item id -> {labels: [1/0 per judgment], label, mean, score, n, spread, agreement}. The label of
    a Likert item is its human score (`item_gold_scores`: a researcher's adjudicated score,
    else the mean, or the median when the project's aggregation says so) at or above the
    project's cut (`Project.correct_at`: the midpoint of its scale), as the export's label,
    the estimates and the metric report's decision table read it; of an A/B item the export's
    label (`item_labels`: the adjudicated side, else the project's aggregation model: majority, Dawid–Skene, MACE or GLAD; an item without one, a
    majority tie, is left out, or kept with label and agreement None `with_unlabelled`: the
    human ceiling reads every item's votes). `labels`, `mean` and `spread` describe the votes,
    `agreement` the share of them on the label's side. Only the study items
    (`items_measured_on`): a gold check's or a qualification-only item's judgments measure
    the workers, and the judge plan's pilot is read from here."""
    frame = load_judgments(project=project)
    ab = project.kind == TaskKind.AB
    gold = item_gold_scores(project=project) if not ab else {}
    cut = project.correct_at
    sides = ({item: entry.label for item, entry in item_labels(project=project).items()}
             if ab else {})
    mask = frame.data_mask()
    per_item: dict[int, list] = {}
    study = set(items_measured_on(project).values_list("id", flat=True))
    for item_id, score, choice in zip(frame.item_id[mask].tolist(), frame.score[mask].tolist(),
                                      frame.choice[mask].tolist(), strict=True):
        if item_id not in study:
            continue
        if ab:
            if choice in AB_CHOICES:
                per_item.setdefault(item_id, []).append(1.0 if choice == "A" else 0.0)
        elif not math.isnan(score):
            per_item.setdefault(item_id, []).append(score)
    out = {}
    for item_id, values in per_item.items():
        binary = values if ab else [float(v >= cut) for v in values]
        share = sum(binary) / len(binary)
        if not ab:
            label = int(gold[item_id] >= cut)
        elif sides.get(item_id) in AB_CHOICES:
            label = int(sides[item_id] == "A")
        elif with_unlabelled:
            label = None  # a majority tie: no label, its votes still read by the ceiling
        else:
            continue  # no label: a majority tie
        out[item_id] = {"labels": [int(b) for b in binary], "label": label,
                        "mean": float(np.mean(values)), "n": len(values),
                        # The human score the label is read from (adjudicated, else the mean
                        # or the median): what a judge's scores are correlated with, as the
                        # metric report does. A/B: A's share of the votes.
                        "score": float(np.mean(values)) if ab else float(gold[item_id]),
                        # The share of the item's judgments on its label's side: an item
                        # adjudicated against unanimous judges (or a model's label against the
                        # majority) has little, not full, agreement.
                        "spread": float(np.std(values)),
                        "agreement": None if label is None else share if label else 1 - share}
    # An item none of whose judgments counts any more (rejected work, a blocked worker) but
    # which a researcher adjudicated carries that label, as at every door that reads one
    # (`with_adjudications`: the metric report, the estimates, the export, the frames). No
    # votes: n 0, the label itself as the mean, no agreement to speak of.
    for item_id, value in with_adjudications({}, project=project).items():
        if item_id in out or item_id not in study:
            continue
        label = int(value == "A") if ab else int(float(value) >= cut)
        shown = float(label) if ab else float(value)
        out[item_id] = {"labels": [], "label": label, "n": 0, "spread": 0.0,
                        "mean": shown, "score": shown, "agreement": None}
    return out


def item_order(items: dict[int, dict], votes: dict[int, dict]) -> dict[int, tuple]:
    """item id -> its sort key in the report (`content_order_key`: its content, source and
    dataset, then its human votes, the id last). Every bootstrap of the report resamples
    positions in this order and the estimates draw their labelled sample from it: in the
    order of the ids, the same judgments imported in another row order (or under other item
    names) drew other labels for the estimates (a prediction-powered accuracy of 0.799 became
    0.793) and other bootstrap intervals."""
    def key(pk: int) -> tuple:
        row, vote = items[pk], votes.get(pk) or {}
        return content_order_key(row.get("content"), row.get("source") or "",
                                 row.get("dataset") or "", sorted(vote.get("labels") or []),
                                 vote.get("mean", 0.0), pk)

    return {pk: key(pk) for pk in items}


def _decision(view: JudgeView, items: list[int], human: dict, questions: dict[int, str]
              ) -> tuple[np.ndarray, float, str, np.ndarray | None, np.ndarray | None]:
    """(rank, threshold, how the threshold was set, probability or None, the items it is
    measured on or None for all) on `items`. A threshold chosen on the validation half of the
    questions is measured on the other half only: measured on the half it was fitted to, a
    metric looked better than a judge that needs no threshold."""
    calls = [view.calls[i] for i in items]
    verdict = np.array([c.verdict if c.verdict is not None else np.nan for c in calls])
    score = np.array([c.score if c.score is not None else np.nan for c in calls])
    prob = np.array([c.probability if c.probability is not None else np.nan for c in calls])
    has_prob = not np.isnan(prob).any()
    if not np.isnan(verdict).any():
        if not np.isnan(score).any() and np.array_equal(score >= JUDGE_CORRECT_AT, verdict == 1):
            rank, threshold, how = (score, JUDGE_CORRECT_AT,
                                    f"the judge's verdict (score >= {JUDGE_CORRECT_AT:g})")
        elif has_prob and np.array_equal(prob >= 0.5, verdict == 1):
            rank, threshold, how = prob, 0.5, "the judge's verdict (probability >= 0.5)"
        else:
            rank, threshold, how = verdict, 1.0, "the judge's verdict"
    elif has_prob:
        rank, threshold, how = prob, 0.5, "probability >= 0.5"
    elif not np.isnan(score).any():
        validation = [k for k, i in enumerate(items) if is_validation_key(questions.get(i, ""))]
        threshold = best_threshold(score[validation].tolist(),
                                   [human[items[k]]["label"] for k in validation])
        measured = np.ones(len(items), dtype=bool)
        measured[validation] = False
        if measured.sum() < 2:
            raise ValueError(
                f"{view.label} gives only scores: its threshold is chosen on the validation "
                f"half of the questions and measured on the other half, which holds "
                f"{int(measured.sum())} judged items with human labels (2 needed)")
        rank, how = score, (f"score >= {threshold:.4g}, chosen on the validation half of the "
                            f"questions ({len(validation)} items) and measured on the other "
                            f"half ({int(measured.sum())} items)")
        return rank, float(threshold), how, prob if has_prob else None, measured
    else:
        # What the judge gives differs by item (an imported file with verdicts on some rows,
        # only scores or probabilities on others): each item is decided by what it has.
        rank = np.array([_own_call(view, call) for call in calls], dtype=float)
        missing = [items[k] for k in np.flatnonzero(np.isnan(rank))]
        if missing:
            raise ValueError(
                f"{view.label} gives a verdict or probability on some items and on others "
                f"(item id {missing[0]}, {len(missing)} in all) only a score that has no "
                f"verdict threshold (only Likert 1-5 scores do: correct at "
                f"{JUDGE_CORRECT_AT:g} or more)")
        threshold, how = 0.5, ("the judge's own call on each item: its verdict, else its "
                               f"probability >= 0.5, else its score >= {JUDGE_CORRECT_AT:g}")
    return rank, float(threshold), how, prob if has_prob else None, None


def _own_call(view: JudgeView, call) -> float:
    """The item's value on 0-1, at or above 0.5 exactly when the judge called it correct (A/B:
    side A): its probability, else its Likert score as (s-1)/4 (3 or more is correct), kept
    where it agrees with the item's verdict; else the verdict (1/0). NaN when the item has
    only a score on a scale without a verdict threshold."""
    graded = call.probability
    if graded is None and call.score is not None and view.score_range == LIKERT_RANGE:
        graded = (call.score - LIKERT_RANGE[0]) / (LIKERT_RANGE[1] - LIKERT_RANGE[0])
    if call.verdict is None:
        return np.nan if graded is None else graded
    if graded is not None and (graded >= 0.5) == (call.verdict == 1):
        return graded
    return call.verdict


def judge_alignment_report(*, project: Project, refs: list[str] | None = None,
                           n_resamples: int = 1000, estimate_labels: int = ESTIMATE_LABELS,
                           seed: int = 0) -> dict:
    """{"judges": {label: {...}}, "ceiling", "paired", "estimates", "history", ...}."""
    if project.kind not in (TaskKind.LIKERT, TaskKind.AB):
        return {"skipped": "the alignment report covers Likert and A/B projects"}
    votes = human_labels(project, with_unlabelled=True)
    human = {i: h for i, h in votes.items() if h["label"] is not None}
    refs = refs or default_refs(project)
    items = {row["id"]: row for row in items_measured_on(project).values(
        "id", "external_id", "source", "dataset", "content")}
    order = item_order(items, votes)
    questions = {i: (row["content"] or {}).get("question", "") for i, row in items.items()}
    report = {"project": project.slug, "kind": project.kind, "n_items": len(items),
              "n_labelled": sum(i in items for i in human), "n_resamples": n_resamples,
              "measured_on": measured_on_summary(n_items=len(items),
                                                 n_labelled=sum(i in items for i in human)),
              "judges": {}, "errors": {}, "paired": [], "estimates": {}, "history": {}}
    # Every item's votes, labelled or not: the A/B items without a label are those whose
    # judgments split evenly, and leaving them out kept the items where the humans agree
    # (two experts who agree 70% of the time read as a ceiling of 1.0).
    report["ceiling"] = human_ceiling({i: h["labels"] for i, h in votes.items() if i in items},
                                      n_resamples=n_resamples, seed=seed)
    views: dict[str, JudgeView] = {}
    correct: dict[str, dict[int, bool]] = {}
    for ref in refs:
        try:
            view = judge_view(project, ref)
        except LookupError as exc:
            report["errors"][ref] = str(exc)
            continue
        common = sorted((i for i in view.calls if i in human and i in items),
                        key=order.__getitem__)
        if len(common) < 2:
            report["errors"][view.label] = (
                f"only {len(common)} judged items carry human labels"
                + (f" ({view.left_out_seen} more left out: its version trained or calibrated "
                   "on them)" if view.left_out_seen else ""))
            continue
        try:
            rank, threshold, how, prob, measured = _decision(view, common, human, questions)
        except ValueError as exc:
            report["errors"][view.label] = str(exc)
            continue
        if measured is not None:
            common = [i for i, keep in zip(common, measured, strict=True) if keep]
            rank = rank[measured]
            prob = prob[measured] if prob is not None else None
        views[view.label] = view
        labels = np.array([human[i]["label"] for i in common])
        scores = np.array([human[i]["score"] for i in common])
        stats = binary_alignment(rank=rank, threshold=threshold, labels=labels,
                                 human_mean=scores, probability=prob,
                                 n_resamples=n_resamples, seed=seed)
        predicted = rank >= threshold
        correct[view.label] = dict(zip(common, (predicted == (labels == 1)).tolist(),
                                       strict=True))
        entry = {"kind": view.kind, "version": view.version, "decision": how,
                 "asked": view.asked, "unparseable": view.unparseable,
                 "judged_with_labels": len(common), "left_out_seen": view.left_out_seen,
                 # verdicts on text the item no longer holds, left out until a rerun
                 "on_earlier_content": view.on_earlier_content,
                 **stats}
        entry["bias"] = _bias_cards(view, common, items, human, predicted, rank, labels,
                                    n_resamples=n_resamples, seed=seed)
        entry["disagreements"] = _disagreements(view, common, items, human, predicted, prob,
                                                order, ab=project.kind == TaskKind.AB)
        report["judges"][view.label] = entry
    labels_sorted = sorted(correct)
    for a, b in combinations(labels_sorted, 2):
        shared = sorted(set(correct[a]) & set(correct[b]), key=order.__getitem__)
        comparison = paired_comparison([correct[a][i] for i in shared],
                                       [correct[b][i] for i in shared],
                                       n_resamples=n_resamples, seed=seed)
        report["paired"].append({"a": a, "b": b, **comparison})
    for label, view in views.items():
        if view.kind != "metric":
            name = label.split("@")[0]
            report["history"][name] = _history(project, name, human, items, questions)
        if project.kind == TaskKind.LIKERT:
            report["estimates"][label] = _estimates(view, items, human, order,
                                                    estimate_labels=estimate_labels, seed=seed)
    return report


def _bias_cards(view, common, items, human, predicted, rank, labels, *, n_resamples,
                seed) -> dict:
    cards: dict = {}
    judge_pos = predicted.astype(float)
    human_pos = labels.astype(float)
    if view.orders:
        pairs = [o for i, o in view.orders.items() if i in items and {"AB", "BA"} <= set(o)]
        # In order AB the item's A was shown first; in BA its B was.
        first = [o["AB"] == "A" for o in pairs] + [o["BA"] == "B" for o in pairs]
        cards["position"] = position_bias(first, [o["AB"] == o["BA"] for o in pairs],
                                          n_resamples=n_resamples, seed=seed)
    else:
        lengths = [len(str((items[i]["content"] or {}).get("candidate", "")).split())
                   for i in common]
        cards["length"] = length_bias(lengths, rank, [human[i]["score"] for i in common],
                                      judge_positive=judge_pos, human_positive=human_pos,
                                      n_resamples=min(n_resamples, 500), seed=seed)
    for column in ("source", "dataset"):
        groups: dict[str, list[int]] = {}
        for k, i in enumerate(common):
            groups.setdefault(items[i][column] or "(none)", []).append(k)
        if len(groups) < 2:
            continue
        cards[column] = {
            name: {**rate_gap(judge_pos[ks], human_pos[ks], n_resamples=n_resamples,
                              seed=seed),
                   **_accuracy_with_interval(judge_pos[ks] == human_pos[ks],
                                             n_resamples=n_resamples, seed=seed)}
            for name, ks in sorted(groups.items())}
    return cards


def _accuracy_with_interval(right: np.ndarray, *, n_resamples: int, seed: int) -> dict:
    right = right.astype(float)
    idx = resample_indices(len(right), n_resamples, seed)
    ci = [None, None]
    if len(idx):
        low, high = np.quantile(right[idx].mean(axis=1), [0.025, 0.975])
        ci = [float(low), float(high)]
    return {"accuracy": float(right.mean()), "accuracy_ci": ci}


def _shown_answers(content: dict) -> str:
    texts = [((content.get(f"answer_{side}") or {}).get("text") or "")[:60] for side in "ab"]
    return f"A: {texts[0]} | B: {texts[1]}"


def _disagreements(view, common, items, human, predicted, prob, order, *, ab: bool = False
                   ) -> list[dict]:
    """ab: an A/B item's label 1 means answer A is the better one, not "correct": the rows say
    "A better" / "B better" (they said "humans correct, judge incorrect" on A/B projects)."""
    words = ("A better", "B better") if ab else ("correct", "incorrect")
    rows = []
    for k, i in enumerate(common):
        if bool(predicted[k]) == bool(human[i]["label"]):
            continue
        call = view.calls[i]
        content = items[i]["content"] or {}
        confidence = abs(prob[k] - 0.5) if prob is not None else 0.0
        rows.append({"item": items[i]["external_id"], "item_id": i,
                     "source": items[i]["source"], "question": content.get("question", ""),
                     "references": content.get("references"),
                     "candidate": _shown_answers(content) if ab else content.get("candidate"),
                     "human_label": words[0] if human[i]["label"] else words[1],
                     "human_mean": human[i]["mean"], "human_n": human[i]["n"],
                     # what `human_mean` averages: the 1-5 scores, or A's share of the votes
                     "human_mean_of": "share choosing A" if ab else "mean",
                     "human_spread": human[i]["spread"],
                     "human_agreement": human[i]["agreement"],
                     "judge_verdict": words[0] if predicted[k] else words[1],
                     "judge_score": call.score, "judge_probability": call.probability,
                     "reasoning": call.reasoning[:600], "_confidence": confidence})
    # The judge is most plainly wrong where the humans agree and the judge was sure.
    rows.sort(key=lambda r: (-(r["human_agreement"] or 0.0), -r["human_n"], -r["_confidence"],
                             order[r["item_id"]]))
    for row in rows:
        del row["_confidence"]
    return rows[:DISAGREEMENTS]


def _history(project, name, human, items, questions) -> list[dict]:
    out = []
    for version in judge_history(project, name):
        view = verdict_view(project, version)
        common = sorted(i for i in view.calls if i in human and i in items)
        row = {"version": version.version, "created_at": version.created_at.isoformat(),
               "asked": view.asked, "unparseable": view.unparseable, "n": len(common),
               "accuracy": None, "kappa": None}
        if len(common) >= 2:
            try:
                rank, threshold, _how, _prob, measured = _decision(view, common, human,
                                                                   questions)
            except ValueError:
                out.append(row)
                continue
            if measured is not None:  # as the report's row: on the half not fitted to
                common = [i for i, keep in zip(common, measured, strict=True) if keep]
                rank = rank[measured]
                row["n"] = len(common)
            labels = np.array([human[i]["label"] for i in common])
            stats = binary_alignment(rank=rank, threshold=threshold, labels=labels,
                                     human_mean=np.array([human[i]["score"] for i in common]),
                                     n_resamples=0)
            row.update(accuracy=stats["accuracy"], kappa=stats["kappa"])
        out.append(row)
    return out


def _estimates(view: JudgeView, items: dict, human: dict, order: dict[int, tuple], *,
               estimate_labels: int, seed: int) -> dict:
    """Accuracy over the items this judge scored, prediction-powered with `estimate_labels`
    human labels drawn at random from the labelled ones (the rest read as unlabelled), next to
    the human-only estimate from the same labels and the accuracy of all labels."""
    population = sorted((i for i in view.calls if i in items), key=order.__getitem__)
    labelled = [k for k, i in enumerate(population) if i in human]
    if len(labelled) < 2:
        return {"skipped": "fewer than two labelled items"}
    rng = np.random.default_rng(seed)
    n = min(estimate_labels, len(labelled))
    drawn = sorted(rng.choice(labelled, size=n, replace=False).tolist())
    f_all = predictor_values(view, population)
    y = np.array([human[population[k]]["label"] for k in drawn], dtype=float)
    f = f_all[drawn]
    ppi = est.prediction_powered(y, f, f_all)
    alone = est.human_only(y, n_items=len(population))
    every = np.array([human[population[k]]["label"] for k in labelled], dtype=float)
    return {"n_items": len(population), "n_labels": n, "labels_available": len(labelled),
            "all_labels_accuracy": float(every.mean()) if len(every) else None,
            "ppi": ppi.as_dict(), "human": alone.as_dict(),
            "width_ratio": (None if not ppi.se or not alone.se or ppi.low is None
                            or alone.low is None else
                            round((ppi.high - ppi.low) / (alone.high - alone.low), 4))}


def _watermarks(project: Project) -> dict:
    from annotation.judgment_selectors import watermark
    from annotation.models import Judgment

    from ...models import JudgeVerdict, MetricScore
    from ...reports.project import item_fingerprint

    return {
        # Rejecting work, verifying a session, blocking a worker, excluding or regrouping an
        # item adds no row but changes the human labels or the items compared, as in the
        # project report's cache (its fingerprint).
        "counting": item_fingerprint(project=project),
        "judgments": watermark(Judgment.objects.filter(item__project=project)),
        "verdicts": watermark(JudgeVerdict.objects.filter(item__project=project)),
        "scores": watermark(MetricScore.objects.filter(item__project=project)),
        # A promotion or rollback stores no score but changes which LERC scores are read.
        "lerc_versions": lerc_versions_read(project),
    }


# What the judges page asks for (GET ?resamples= overrides it): the report a finished judge
# job precomputes, so the page reads it from the cache instead of computing in the request
# (13,809 EVOUNA answers x 5 judges: 21 s on the loaded 2-core host; a cached read 0.05 s).
ALIGNMENT_KIND = "judge_alignment"  # its `Report` kind
PAGE_RESAMPLES = 200


# Bumped when the report reads differently, so a cached copy of the older reading is not
# served (2: a learned metric leaves out the answers its version saw; 3: κ of one label on
# both sides is undefined, not 0; 4: the human ceiling reads the items whose votes tie; 5: the
# items in the order of what they say, not of their ids, `item_order`; 6: the length card's
# tercile rates are shares called correct, not means of scores; 7: the study items,
# `items_measured_on`: items released only in a qualification are left out, `measured_on`;
# 8: a prediction-powered estimate whose labels show no error of the judge has no interval,
# `estimates.no_spread`, not one of width 0; an adjudicated item none of whose judgments
# counts carries its adjudicated label, `human_labels`; a json or regex judge's stored score
# off the task's scale is read as unparseable, `answer_score_problem`; a verdict on content
# the item no longer holds is not read, `current_verdicts`; 9: Pearson, Spearman and the length
# card read the item's human score its label is read from, adjudicated, else the mean or the
# median, not the mean of the votes).
ALIGNMENT_FORMAT = 9


def _alignment_params(project: Project, refs: list[str] | None, n_resamples: int) -> dict:
    return {"refs": sorted(refs or []), "n_resamples": n_resamples,
            "watermarks": _watermarks(project), "format": ALIGNMENT_FORMAT}


def _computed(project: Project, refs: list[str] | None, n_resamples: int) -> dict:
    from django.utils import timezone

    data = judge_alignment_report(project=project, refs=refs, n_resamples=n_resamples)
    data["computed_at"] = timezone.now().isoformat()
    return _json_ready(data)


def cached_judge_alignment_report(*, project: Project, refs: list[str] | None = None,
                                  n_resamples: int = PAGE_RESAMPLES) -> dict:
    """The report from the `Report` cache while no judgment, verdict or score was stored
    since and the counting rule reads the same judgments; else computed in this call and not
    stored (a GET writes nothing; `judge_alignment_report_refresh` fills the cache). The one
    rule of the judges page and the API: the default options are the ones the report refresh
    stores (`PAGE_RESAMPLES`, every judge), so neither computes while that copy is current.

    `stored_copy` says which copy answered, for a script polling the API: the project's stored
    copy's `computed_at`, whether it is `current` (nothing changed since it was computed),
    its options, and whether it was `served` (false: computed in this call, for other options
    or because something changed since)."""
    from ...reports.store import report_rows

    params = _alignment_params(project, refs, n_resamples)
    stored = report_rows(project=project, stage=None, kind=ALIGNMENT_KIND)  # newest first
    served = next((row for row in stored if row.params == params), None)
    report = served.data if served is not None else _computed(project, refs, n_resamples)
    copy = served if served is not None else (stored[0] if stored else None)
    return {**report, "stored_copy": None if copy is None else {
        "computed_at": copy.data.get("computed_at"),
        "current": (copy.params.get("watermarks") == params["watermarks"]
                    and copy.params.get("format") == ALIGNMENT_FORMAT),
        "n_resamples": copy.params.get("n_resamples"),
        "judges": copy.params.get("refs") or None,
        "served": copy is served}}


def judge_alignment_report_refresh(*, project: Project, refs: list[str] | None = None,
                                   n_resamples: int = 1000) -> dict:
    """Compute the report (outside a transaction) and store it as the project's cached one."""
    from ...reports.store import report_store

    params = _alignment_params(project, refs, n_resamples)
    data = _computed(project, refs, n_resamples)
    # One cached alignment report per project: the copy for other options or older
    # watermarks is replaced.
    report_store(project=project, stage=None, kind=ALIGNMENT_KIND, params=params, data=data,
                 judgment_watermark=params["watermarks"]["judgments"],
                 supersedes=lambda row: row.kind == ALIGNMENT_KIND)
    return data


def judge_alignment_precompute(*, project: Project) -> bool:
    """The judges page's report (`PAGE_RESAMPLES`) computed and stored by the job that changed
    the data (a judge job, the project's report refresh after an import or new judgments),
    not by the page's next visitor: on the EVOUNA import (23,499 judged answers) every visit
    to the judges page computed it again, 9.4 s each. Nothing is computed while the stored
    copy is fresh. A failure is logged and leaves the page to compute it; it never fails the
    job that called. Returns whether it computed."""
    try:
        if _cached(project, _alignment_params(project, None, PAGE_RESAMPLES)) is not None:
            return False
        judge_alignment_report_refresh(project=project, n_resamples=PAGE_RESAMPLES)
    except Exception:  # noqa: BLE001 - the caller's data is stored; the page can still compute
        logger.warning("judge alignment report not precomputed for %s", project.slug,
                       exc_info=True)
        return False
    return True


def _cached(project: Project, params: dict) -> dict | None:
    from ...reports.store import report_cached

    row = report_cached(project=project, stage=None, kind=ALIGNMENT_KIND, params=params)
    return row.data if row is not None else None


def _json_ready(value):
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
