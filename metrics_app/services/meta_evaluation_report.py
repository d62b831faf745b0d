"""Metric evaluation report of a project: correlations with the human gold score per group,
minimal pairs, and A/B pairwise accuracy with baselines. Reads cached `MetricScore`s (it never
scores anything itself) and caches the result as a `Report` (kind `metric_eval`).

Human gold score of a Likert item = mean of its judgments (optionally z-normalized per
annotator first); an item without judgments falls back to its imported `gold["score"]` (MOCHA
files carry the mean human score) -- except when z-normalizing: an imported mean of unknown
annotators' raw 1-5 scores has no z-score, so such items are left out (and counted in
`n_skipped_imported_gold`) rather than mixing raw and z scales. Items scored by their gold
score are counted in `n_imported_gold`: the page says so, since the judges page, the
dashboard and the exports count only items with judgments that count. The items are the
study items (`annotation.selectors.items_measured_on`, as the judges report, the judge plan
and the estimates read them): no gold check is scored by its answer key, no item released
only in a qualification is counted; `measured_on` says the n as every such door says it
(`measured_on_summary`). When several versions of a
metric were stored, the most recently stored version is evaluated.

Minimal-pair items (`metadata.minimal_pair`) count only in the `minimal_pairs` section, never
in the correlation groups. The scatter plots read the same items and gold as the table.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from annotation.domain.agreement import pearson
from annotation.judgment_selectors import item_gold_scores, judgment_rows, watermark
from annotation.models import Judgment, Project, TaskKind
from annotation.selectors import counting_fingerprint, items_measured_on, measured_on_summary
from core.statistics import resamples_check
from core.text_match import is_exact_match, is_filtered_number_pair
from core.vocabulary import AB_CHOICES
from metrics_app.domain import meta_evaluation
from metrics_app.model_selectors import learned_metric_seen_items
from metrics_app.models import MetricScore, Report
from metrics_app.reports.project import item_fingerprint
from metrics_app.reports.store import report_cached, report_rows, report_store
from metrics_app.score_selectors import project_metric_versions

REPORT_KIND = "metric_eval"
DEFAULT_PARAMS = {"znormalize": False, "drop_exact_matches": False, "drop_number_pairs": False,
                  "n_resamples": 1000}
def normalize_params(params: dict | None) -> dict:
    merged = dict(DEFAULT_PARAMS)
    for key, value in (params or {}).items():
        if key in DEFAULT_PARAMS:
            merged[key] = int(value) if key == "n_resamples" else bool(value)
    return merged


def _seen_by_metric(*, project: Project, versions: dict[str, str]) -> dict[str, frozenset[int]]:
    """metric → the items its version trained or calibrated on (`learned_metric_seen_items`;
    empty but for a learned metric), read once per report."""
    return {name: learned_metric_seen_items(project, name, version)
            for name, version in versions.items()}


def _scores(*, project: Project, versions: dict[str, str],
            seen_by: dict[str, frozenset[int]] | None = None,
            ) -> dict[str, dict[tuple[int, str], float | None]]:
    """metric → (item, side) → its stored value, leaving out a learned metric's values on the
    answers its version trained or calibrated on (`seen_by`, else read here)."""
    seen_by = seen_by if seen_by is not None else _seen_by_metric(project=project,
                                                                  versions=versions)
    result: dict[str, dict[tuple[int, str], float | None]] = defaultdict(dict)
    for name, version in versions.items():
        seen = seen_by[name]
        rows = MetricScore.objects.filter(item__project=project, metric=name, version=version)
        for item_id, side, value in rows.values_list("item_id", "side", "value"):
            if item_id not in seen:
                result[name][(item_id, side)] = value
    return result


def _left_out_seen(*, project: Project, versions: dict[str, str],
                   seen_by: dict[str, frozenset[int]]) -> dict[str, dict]:
    """For each learned metric, how many of its scored items were left out because its
    version saw them (shown beside the tables, so a smaller n is explained)."""
    left_out = {}
    for name, version in versions.items():
        seen = seen_by[name]
        if seen:
            scored = set(MetricScore.objects.filter(item__project=project, metric=name,
                                                    version=version)
                         .values_list("item_id", flat=True))
            if scored & seen:
                left_out[name] = {"version": version, "items": len(scored & seen),
                                  "measured_on": len(scored - seen)}
    return left_out


def _kept_likert_items(*, project: Project, params: dict) -> list[dict]:
    """The items the correlations (and scatter plots) use: the study items
    (`items_measured_on`) that are not minimal pairs and pass the study filters chosen in
    `params`."""
    items = list(items_measured_on(project)
                 .values("id", "dataset", "source", "split", "content", "gold", "metadata"))
    kept = []
    for item in items:
        if "minimal_pair" in (item["metadata"] or {}):
            continue  # hand-made pairs: their own section, not a sample of the dev set
        content = item["content"] or {}
        refs = content.get("references") or []
        candidate = content.get("candidate", "")
        if params["drop_exact_matches"] and is_exact_match(candidate, refs):
            continue
        if params["drop_number_pairs"] and is_filtered_number_pair(item["dataset"], candidate,
                                                                    refs):
            continue
        kept.append(item)
    # In the order of what the items say, not of their ids (the import order): the paired
    # bootstrap of the significance section resamples positions in this order.
    kept.sort(key=lambda item: meta_evaluation.content_order_key(
        item["content"], item["source"] or "", item["dataset"] or "", item["split"] or "",
        item["id"]))
    return kept


def _imported_score(gold) -> float | None:
    if isinstance(gold, dict):
        score = gold.get("score")
        if isinstance(score, int | float) and not isinstance(score, bool):
            return float(score)
    return None


def _human_gold(*, project: Project, items: list[dict], znormalize: bool
                ) -> tuple[dict, int, int]:
    """(item id → human gold score for `items`, number of items left out because only an
    imported raw score exists while z-normalizing, number of items whose score is their
    imported gold score because no judgment of theirs counts)."""
    judged = item_gold_scores(project=project, znormalize=znormalize)
    gold: dict[int, float] = {}
    skipped = from_gold = 0
    for item in items:
        if item["id"] in judged:
            gold[item["id"]] = judged[item["id"]]
            continue
        imported = _imported_score(item["gold"])
        if imported is None:
            continue
        if znormalize:
            skipped += 1
        else:
            gold[item["id"]] = imported
            from_gold += 1
    return gold, skipped, from_gold


@dataclass
class _StudyItems:
    """The kept items and their human gold, read once per report (each section used to read
    them again: three times 23,499 items and their judgments on EVOUNA)."""

    items: list[dict]
    gold: dict[int, float]       # under the report's z-normalization option
    n_skipped: int
    n_imported_gold: int         # items in `gold` scored by their gold score, not judgments
    raw_gold: dict[int, float]   # never z-normalized: the decision table's labels


def _study_items(*, project: Project, params: dict) -> _StudyItems:
    items = _kept_likert_items(project=project, params=params)
    gold, skipped, from_gold = _human_gold(project=project, items=items,
                                           znormalize=params["znormalize"])
    raw_gold = _human_gold(project=project, items=items, znormalize=False)[0] \
        if params["znormalize"] else gold
    return _StudyItems(items=items, gold=gold, n_skipped=skipped, n_imported_gold=from_gold,
                       raw_gold=raw_gold)


def _say_unscorable(cell: dict, scores: dict, keys: Sequence[tuple[int, str]]) -> None:
    """Give the cell of a metric that stored a score for some of `keys` (item, side) and a
    value for none of them the reason (`meta_evaluation.unscorable_reason`) instead of a
    bare dash or "0 items"."""
    reason = meta_evaluation.unscorable_reason(
        [scores[key] for key in dict.fromkeys(keys) if key in scores])  # an item once
    if reason:
        cell["undefined"] = reason


def _correlation_section(*, params, versions, scores, study: _StudyItems
                         ) -> tuple[dict, list[str], dict, int]:
    items, gold, skipped = study.items, study.gold, study.n_skipped
    groups, order = _likert_groups(items, lambda item: item["id"] in gold)
    section: dict[str, dict] = {}
    for name in versions:
        section[name] = {}
        for group in order:
            pairs = [(scores[name].get((item_id, "")), gold[item_id]) for item_id in groups[group]]
            pairs = [(m, h) for m, h in pairs if m is not None]
            section[name][group] = meta_evaluation.correlations(
                [m for m, _ in pairs], [h for _, h in pairs], n_resamples=params["n_resamples"],
            )
            _say_unscorable(section[name][group], scores[name],
                            [(item_id, "") for item_id in groups[group]])
    best = {}
    for group in order:
        ranked = [(section[name][group]["pearson"], name) for name in versions
                  if section[name][group]["pearson"] is not None]
        best[group] = max(ranked)[1] if ranked else None
    return section, order, best, skipped


VALIDATION_SPLITS = frozenset({"validation", "valid", "val", "dev"})


def _likert_groups(items: list[dict], keep) -> tuple[dict[str, list[int]], list[str]]:
    """Group name → item ids ("overall", "dataset:…", "source:…") of the items `keep` accepts,
    and the group order (overall first, then sorted; empty groups left out)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for item in items:
        if not keep(item):
            continue
        groups["overall"].append(item["id"])
        if item["dataset"]:
            groups[f"dataset:{item['dataset']}"].append(item["id"])
        if item["source"]:
            groups[f"source:{item['source']}"].append(item["id"])
    order = ["overall"] + sorted(g for g in groups if g != "overall")
    return groups, [g for g in order if groups[g]]


def _decision_split(*, project, params, study: _StudyItems | None = None
                    ) -> tuple[list[dict], dict[int, float], set[int], bool]:
    """(kept items, raw human gold per item, ids of the validation items, whether the project's
    own split chose them): the one split the decision table and the ROC curves use."""
    study = study or _study_items(project=project, params=params)
    items, gold = study.items, study.raw_gold
    # A declared split counts only when it splits: a project that is all "dev" (MOCHA's dev
    # set) is split by question instead.
    on_declared = [(item.get("split") or "").lower() in VALIDATION_SPLITS
                   for item in items if item["id"] in gold]
    declared = any(on_declared) and not all(on_declared)

    def on_validation(item) -> bool:
        if declared:
            return (item.get("split") or "").lower() in VALIDATION_SPLITS
        question = (item["content"] or {}).get("question", "") or str(item["id"])
        return meta_evaluation.is_validation_key(question)

    validation = {item["id"] for item in items if item["id"] in gold and on_validation(item)}
    return items, gold, validation, declared


def _decision_section(*, project, params, versions, scores, study: _StudyItems
                      ) -> dict | None:
    """Correct / incorrect, the way answer-correctness papers judge a metric: each metric's
    threshold is chosen on validation items (the project's validation/dev split when it has
    one beside other items, else the half of the questions a stable hash picks) and measured
    on the other items: accuracy, F1 and Cohen's κ at that threshold and ROC AUC, per group,
    with bootstrap intervals. "Correct" = mean human score at or above the project's cut
    (`Project.correct_at`: the midpoint of its scale, 3 on 1-5, 4 on 1-7; raw, never
    z-normalized). No question is on both sides."""
    items, gold, validation, declared = _decision_split(project=project, params=params,
                                                        study=study)
    if not gold or not versions:
        return None
    groups, order = _likert_groups(
        items, lambda item: item["id"] in gold and item["id"] not in validation)
    if not validation or not groups["overall"]:
        return None
    cut = project.correct_at
    label = {item_id: int(value >= cut) for item_id, value in gold.items()}
    metrics: dict[str, dict] = {}
    for name in versions:
        tuning = [(scores[name].get((item_id, "")), label[item_id]) for item_id in validation]
        threshold = meta_evaluation.best_threshold([s for s, _ in tuning], [y for _, y in tuning])
        metrics[name] = {}
        for group in order:
            pairs = [(scores[name].get((item_id, "")), label[item_id])
                     for item_id in groups[group]]
            pairs = [(value, y) for value, y in pairs if value is not None]
            metrics[name][group] = meta_evaluation.decision_statistics(
                [value for value, _ in pairs], [y for _, y in pairs], threshold,
                n_resamples=params["n_resamples"])
    best = {}
    for group in order:
        ranked = [(metrics[name][group]["accuracy"], name) for name in versions
                  if metrics[name][group]["accuracy"] is not None]
        best[group] = max(ranked)[1] if ranked else None
    return {
        "correct_at": cut,
        "threshold_chosen_on": ("the project's validation split" if declared
                                else "half of the questions (stable hash), kept out of the "
                                     "measured items"),
        "n_validation_items": len(validation), "n_test_items": len(groups["overall"]),
        "binary_gold": len(set(gold.values())) == 2,
        "groups": order, "metrics": metrics, "best": best,
    }


def _significance_section(*, params, versions, scores, correlations,
                          study: _StudyItems) -> dict | None:
    """For every two metrics, on the items both scored (overall group): is the first one's
    Pearson with the human score higher? Williams' test and a paired bootstrap. Pairs are
    ordered so that `a` has the higher Pearson."""
    gold = study.gold
    overall = {name: correlations[name].get("overall", {}).get("pearson") for name in versions}
    ranked = sorted((name for name in versions if overall[name] is not None),
                    key=lambda name: -overall[name])
    if len(ranked) < 2:
        return None
    item_ids = list(gold)
    human = np.array([gold[item_id] for item_id in item_ids], dtype=float)
    # Each metric's scores of the gold items once, NaN where unscored (was a dict lookup per
    # item for every one of the 21 pairs of seven metrics).
    values = {name: np.array([scores[name].get((item_id, "")) for item_id in item_ids],
                             dtype=float) for name in ranked}
    # Pairs scored on the same items share one bootstrap (the usual case: every metric scored
    # every item); a pair over a different set of items gets its own.
    by_items: dict[bytes, list[tuple[str, str]]] = defaultdict(list)
    for i, a in enumerate(ranked):
        for b in ranked[i + 1:]:
            both = ~(np.isnan(values[a]) | np.isnan(values[b]))
            if both.sum() >= 4:
                by_items[np.packbits(both).tobytes()].append((a, b))
    pairs = []
    for group_pairs in by_items.values():
        a0, b0 = group_pairs[0]
        both = ~(np.isnan(values[a0]) | np.isnan(values[b0]))
        bootstraps = meta_evaluation.paired_bootstrap_pearson_differences(
            {name: values[name][both] for pair in group_pairs for name in pair}, human[both],
            group_pairs, n_resamples=params["n_resamples"])
        for a, b in group_pairs:
            va, vb, vh = values[a][both], values[b][both], human[both]
            r_ah, r_bh, r_ab = pearson(va, vh), pearson(vb, vh), pearson(va, vb)
            williams = (meta_evaluation.williams_test(r_ah, r_bh, r_ab, len(va))
                        if None not in (r_ah, r_bh, r_ab) else None)
            pairs.append({
                "a": a, "b": b, "n": len(va), "pearson_a": r_ah, "pearson_b": r_bh,
                "pearson_a_b": r_ab, "williams": williams, "bootstrap": bootstraps[(a, b)],
            })
    order = {pair: position for position, pair in enumerate(
        (a, b) for i, a in enumerate(ranked) for b in ranked[i + 1:])}
    pairs.sort(key=lambda row: order[(row["a"], row["b"])])
    return {"group": "overall", "statistic": "pearson", "pairs": pairs}


def _minimal_pair_section(*, project, versions, scores) -> dict | None:
    items = project.items.filter(metadata__has_key="minimal_pair").values(
        "id", "dataset", "gold", "metadata")
    pairs = [(key, better["dataset"] or "", better["id"], worse["id"])
             for key, better, worse in meta_evaluation.minimal_pairs(items)]
    if not pairs:
        return None
    section: dict[str, dict] = {}
    datasets = sorted({dataset for _, dataset, _, _ in pairs})
    for name in versions:
        section[name] = {}
        for group in ["overall"] + datasets:
            chosen = [p for p in pairs if group == "overall" or p[1] == group]
            section[name][group] = meta_evaluation.minimal_pair_accuracy(
                (scores[name].get((better, "")), scores[name].get((worse, "")))
                for _, _, better, worse in chosen
            )
    return section


def _pairwise_section(*, project, versions, scores) -> dict | None:
    items = {
        row["id"]: row for row in items_measured_on(project).values("id", "domain", "content")
    }
    comparisons = []  # (item_id, group keys, choice, kind_a, kind_b, len_a, len_b)
    for row in judgment_rows(project=project):
        item = items.get(row.item_id)
        if item is None or row.choice not in AB_CHOICES:
            continue
        content = item["content"] or {}
        a, b = content.get("answer_a") or {}, content.get("answer_b") or {}
        keys = ["overall"]
        if content.get("setting"):
            keys.append(f"setting:{content['setting']}")
        if item["domain"]:
            keys.append(f"domain:{item['domain']}")
        comparisons.append((row.item_id, keys, row.choice, a.get("kind", ""), b.get("kind", ""),
                            len((a.get("text") or "").split()), len((b.get("text") or "").split())))
    if not comparisons:
        return None
    order = ["overall"] + sorted({k for c in comparisons for k in c[1] if k != "overall"})

    def subset(group):
        return [c for c in comparisons if group in c[1]]

    baselines = {"random": {}, "always_human": {}, "longer_answer": {}}
    metrics: dict[str, dict] = {name: {} for name in versions}
    for group in order:
        chosen = subset(group)
        baselines["random"][group] = meta_evaluation.random_accuracy(len(chosen))
        baselines["always_human"][group] = meta_evaluation.always_human_accuracy(
            (c[3], c[4], c[2]) for c in chosen)
        baselines["longer_answer"][group] = meta_evaluation.pairwise_accuracy(
            (c[5], c[6], c[2]) for c in chosen)
        for name in versions:
            metrics[name][group] = meta_evaluation.pairwise_accuracy(
                (scores[name].get((c[0], "A")), scores[name].get((c[0], "B")), c[2])
                for c in chosen
            )
            _say_unscorable(metrics[name][group], scores[name],
                            [(c[0], side) for c in chosen for side in "AB"])
    return {"groups": order, "baselines": baselines, "metrics": metrics,
            "unit": "judgment (each expert's choice is one comparison)"}


def metric_evaluation_build(*, project: Project, params: dict | None = None,
                            metric_names: Sequence[str] | None = None) -> dict:
    """The full report as JSON-ready data (see module docstring); ValueError naming
    n_resamples when it is out of range (`core.statistics.resamples_check`)."""
    params = normalize_params(params)
    resamples_check(params["n_resamples"])
    versions = project_metric_versions(project=project)
    if metric_names is not None:
        versions = {name: v for name, v in versions.items() if name in set(metric_names)}
    seen_by = _seen_by_metric(project=project, versions=versions)
    scores = _scores(project=project, versions=versions, seen_by=seen_by)
    report: dict = {
        "project": project.slug, "kind": project.kind, "params": params,
        "human_score": (("z-normalized " if params["znormalize"] else "")
                        + ("median" if project.aggregation_model == "median" else "mean")),
        "metrics": versions,
        "left_out_seen": _left_out_seen(project=project, versions=versions, seen_by=seen_by),
    }
    if project.kind == TaskKind.LIKERT:
        study = _study_items(project=project, params=params)
        correlations, groups, best, skipped = _correlation_section(
            params=params, versions=versions, scores=scores, study=study)
        report.update(correlations=correlations, groups=groups, best=best,
                      n_skipped_imported_gold=skipped, n_imported_gold=study.n_imported_gold,
                      measured_on=measured_on_summary(
                          n_items=len(study.items), n_imported=study.n_imported_gold,
                          n_labelled=len(study.gold) - study.n_imported_gold))
        decision = _decision_section(project=project, params=params, versions=versions,
                                     scores=scores, study=study)
        if decision is not None:
            report["decision"] = decision
        significance = _significance_section(params=params, versions=versions, scores=scores,
                                             correlations=correlations, study=study)
        if significance is not None:
            report["significance"] = significance
        minimal_pairs = _minimal_pair_section(project=project, versions=versions, scores=scores)
        if minimal_pairs is not None:
            report["minimal_pairs"] = minimal_pairs
    if project.kind == TaskKind.AB:
        pairwise = _pairwise_section(project=project, versions=versions, scores=scores)
        if pairwise is not None:
            report["pairwise"] = pairwise
    return report


# What a cached copy of an older format misses, by its format (copies stored before formats
# were numbered: 2 with `left_out_seen`, else 1): the page says it until the copy is refreshed.
METRIC_REPORT_FORMAT = 6
METRIC_REPORT_CHANGES = {
    5: "gold checks and items released only in a qualification are left out (the study "
       "items, as the judges page and the estimates read them)",
    1: "learned metrics are measured only on the answers they never saw, and an undefined "
       "correlation or kappa says why",
    2: "an undefined correlation or kappa says why instead of showing a number or a dash",
    3: "a metric that could give no answer a value (no reference answer) says so in its "
       "cells instead of a dash",
    4: "the paired bootstrap of the significance tests no longer depends on the order the "
       "items were imported in",
}


def _watermarks(project: Project) -> tuple[int, int]:
    return (watermark(Judgment.objects.filter(item__project=project)),
            watermark(MetricScore.objects.filter(item__project=project)))


def metric_report_compute(*, project: Project, params: dict | None = None) -> tuple[dict, int]:
    """(the report with what the cache compares, its judgment watermark), stored nowhere: what
    a GET answers when nothing is cached. The watermarks are read first, so judgments
    arriving during the computation leave a stored copy stale."""
    params = normalize_params(params)
    judgment_mark, score_mark = _watermarks(project)
    data = metric_evaluation_build(project=project, params=params)
    data["score_watermark"] = score_mark
    # What changes the report without a new judgment or score (the counting rule, the items
    # kept and their groups, the aggregation model): the project report's fingerprint.
    data["item_fingerprint"] = item_fingerprint(project=project)
    data["aggregation"] = project.aggregation_model
    # Kept apart as well, so a stale copy can say that rejected work or a block is the cause.
    data["counting_fingerprint"] = counting_fingerprint(project=project)
    data["format_version"] = METRIC_REPORT_FORMAT
    return data, judgment_mark


def metric_report_refresh(*, project: Project, params: dict | None = None) -> Report:
    """Recompute and cache the report for these parameters (replacing the older copy).

    The computation (minutes on a big project) runs outside any transaction and only the
    swap of the cached row is one (`report_store`, where refreshes at once take turns): on
    SQLite a transaction holds the database's only write lock, and annotators, the admin and
    imports must keep writing meanwhile."""
    params = normalize_params(params)
    data, judgment_mark = metric_report_compute(project=project, params=params)
    return report_store(project=project, stage=None, kind=REPORT_KIND, params=params, data=data,
                        judgment_watermark=judgment_mark)


def metric_report_cached(*, project: Project, params: dict | None = None,
                         any_resamples: bool = False) -> tuple[Report | None, bool]:
    """(cached report or None, is_stale): stale when judgments or scores were added since,
    or anything else the report reads changed (`metric_report_cached_with_reason`).
    any_resamples: accept the newest report with the same options whatever its number of
    bootstrap resamples (the page shows what exists rather than nothing)."""
    report, reason = metric_report_cached_with_reason(project=project, params=params,
                                                      any_resamples=any_resamples)
    return report, report is None or bool(reason)


def metric_report_cached_with_reason(*, project: Project, params: dict | None = None,
                                     any_resamples: bool = False
                                     ) -> tuple[Report | None, str]:
    """(cached report or None, why it is stale: "" when it is fresh). The page says the
    reason: "new judgments arrived" beside a copy made stale by a block misled the reader."""
    params = normalize_params(params)
    report = report_cached(project=project, stage=None, kind=REPORT_KIND, params=params)
    if report is None and any_resamples:
        for candidate in report_rows(project=project, stage=None, kind=REPORT_KIND):
            other = normalize_params(candidate.params)
            if all(other[k] == params[k] for k in params if k != "n_resamples"):
                report = candidate
                break
    if report is None:
        return None, "no report has been computed with these options"
    return report, metric_report_stale_reason(project=project, report=report)


def metric_report_stale_reason(*, project: Project, report: Report) -> str:
    """Why the cached `report` no longer matches the project ("" when it does), naming every
    cause found: new judgments, new metric scores (a finished or a cancelled scoring job),
    the counting rule (rejected, returned or flagged work, a session verified, a worker
    blocked), the aggregation model, or another input of the fingerprint (an item excluded or
    regrouped, a stage's settings, an adjudication, LERC scores or judge verdicts)."""
    judgment_mark, score_mark = _watermarks(project)
    reasons = []
    if judgment_mark > report.judgment_watermark:
        reasons.append("new judgments arrived")
    if score_mark > report.data.get("score_watermark", 0):
        reasons.append("new metric scores were stored")
    if report.data.get("item_fingerprint") != item_fingerprint(project=project):
        # Rejected work, a blocked worker, an item excluded or regrouped, another aggregation
        # model: the human side changes without a new judgment. Which one is told by the parts
        # stored beside the fingerprint (a report stored before them says it generally).
        other = True
        if ("counting_fingerprint" in report.data
                and report.data["counting_fingerprint"] != counting_fingerprint(project=project)):
            reasons.append("the judgments that count changed (work rejected, returned or "
                           "flagged, a Prolific session verified, or a worker blocked)")
            other = False
        if report.data.get("aggregation", project.aggregation_model) != project.aggregation_model:
            reasons.append(f"the aggregation model changed ({report.data['aggregation']} → "
                           f"{project.aggregation_model})")
            other = False
        if other:
            reasons.append("what the report reads changed without a new judgment (work "
                           "rejected or a worker blocked, an item excluded or regrouped, a "
                           "stage's settings, an adjudication, LERC scores or judge verdicts)")
    stored_format = report.data.get("format_version",
                                    2 if "left_out_seen" in report.data else 1)
    if stored_format < METRIC_REPORT_FORMAT:
        reasons.append(f"the report reads differently since this copy was made "
                       f"({METRIC_REPORT_CHANGES[stored_format]})")
    return "; ".join(reasons)


def scatter_points(*, project: Project, metric: str, params: dict | None = None,
                   limit: int = 4000) -> tuple[list[float], list[float], int]:
    """(metric values, human gold scores, number of points) of the project's Likert items for
    a scatter plot -- the items and gold of the correlation table under the same `params`
    (z-normalization, study filters, no minimal pairs); an evenly spaced subset of the points
    when there are more than `limit`."""
    params = normalize_params(params)
    versions = project_metric_versions(project=project)
    if metric not in versions:
        return [], [], 0
    items = _kept_likert_items(project=project, params=params)
    gold, _, _ = _human_gold(project=project, items=items, znormalize=params["znormalize"])
    seen = learned_metric_seen_items(project, metric, versions[metric])
    values = {item_id: value for item_id, value in MetricScore.objects.filter(
        item__project=project, metric=metric, version=versions[metric], side="",
        value__isnull=False,
    ).values_list("item_id", "value") if item_id not in seen}
    points = [(values[item["id"]], gold[item["id"]]) for item in items
              if item["id"] in gold and item["id"] in values]
    total = len(points)
    if total > limit:
        step = total / limit
        points = [points[int(i * step)] for i in range(limit)]
    return [p[0] for p in points], [p[1] for p in points], total


def roc_curves(*, project: Project, params: dict | None = None, max_points: int = 400
               ) -> tuple[dict[str, dict], bool]:
    """({metric: {fpr, tpr, auc, n}} on the items the decision table measures (not the
    validation ones), whether the human scores are binary (only two values: then a scatter
    plot shows two bands and the ROC curve says more)). Curves are thinned to `max_points`."""
    from sklearn.metrics import roc_auc_score, roc_curve

    params = normalize_params(params)
    items, gold, validation, _declared = _decision_split(project=project, params=params)
    binary = len(set(gold.values())) == 2
    measured = [item_id for item_id in gold if item_id not in validation]
    versions = project_metric_versions(project=project)
    scores = _scores(project=project, versions=versions)
    curves = {}
    for name in versions:
        pairs = [(scores[name].get((item_id, "")), int(gold[item_id] >= project.correct_at))
                 for item_id in measured]
        pairs = [(value, label) for value, label in pairs if value is not None]
        labels = [label for _, label in pairs]
        if len(set(labels)) < 2:
            continue
        values = [value for value, _ in pairs]
        fpr, tpr, _thresholds = roc_curve(labels, values)
        step = max(1, len(fpr) // max_points)
        curves[name] = {"fpr": fpr[::step].tolist() + [1.0], "tpr": tpr[::step].tolist() + [1.0],
                        "auc": float(roc_auc_score(labels, values)), "n": len(pairs)}
    return curves, binary
