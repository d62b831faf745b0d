"""LERC datasets from gathered judgments: gold per item (the project's Likert aggregation, mean
or median, optionally z-normalized),
exact matches dropped, splits by item split or hashed passage/question groups, an out-of-dataset
holdout, and the multiple-choice pre-training set."""
from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass, field

from annotation.domain.aggregation import (
    LIKERT_MODELS,
    aggregate_items,
    mean_by_item,
    znormalize_by_annotator,
)
from annotation.domain.answers import AB_TIE_CHOICES
from annotation.domain.likert_scale import FIVE_POINT_TOP, to_five_point
from annotation.judgment_selectors import (
    adjudication_watermark,
    judgment_rows,
    latest_adjudications,
    watermark,
)
from annotation.models import NON_DATA_STAGE_KINDS, Item, Judgment, Project, TaskKind
from core.statistics import has_variation
from core.text_match import passage_group
from core.vocabulary import AB_CHOICES
from metrics_app.judge_selectors import judge_view, predictor_values
from metrics_app.lerc.data import (
    LercExample,
    PairExample,
    is_exact_match_as_judged,
    mc_item_row,
    mc_pretraining_examples,
)
from metrics_app.models import ModelKind, ModelVersion

from .common import LercError
from .options import version_data_options

VAL_SPLITS = {"dev", "val", "valid", "validation"}
# Aggregation models whose posterior is an A/B soft target.
WORKER_MODELS = ("dawid_skene", "mace", "glad")


SPLIT_MODES = ("auto", "item", "group")


@dataclass
class LercDataset:
    kind: str
    train: list = field(default_factory=list)
    val: list = field(default_factory=list)
    test: list = field(default_factory=list)
    # A trusted judge's verdicts on items no human judged (DataOptions.distill_judge), each
    # a LercExample scored 1 + 4·P(correct); they reach only the calibrated judge's fit.
    distill: list = field(default_factory=list)
    snapshot: dict = field(default_factory=dict)


def one_score_reason(scores: list[float], *, what: str) -> str | None:
    """Why a regression version cannot learn from these gold scores: all of them one value (a
    project whose workers all answered 5, a spot-check stage of known-good answers), so no
    answer is better or worse than another and its validation Pearson is undefined. None when
    they vary (beyond floating-point rounding). `what` names them ("training answers")."""
    if not scores or has_variation(scores):
        return None
    return (f"all {len(scores)} {what} have the same score ({scores[0]:g}): a model cannot "
            "learn from them which answers are better; gather judgments that use more of the "
            "scale, then train")


def _group_bucket(group: str, seed: int) -> float:
    """Deterministic position in [0, 1) of a passage/question group."""
    digest = hashlib.sha256(f"{seed}:{group}".encode()).hexdigest()
    return int(digest[:12], 16) / float(16**12)


def _item_group(item: Item) -> str:
    """Items sharing a passage (or, without one, a question) share a group and thus a split."""
    content = item.content or {}
    return passage_group(item.group_key, content.get("passage"), content.get("question"))


def _data_watermark(project: Project) -> int:
    return watermark(Judgment.objects.filter(item__project=project)
                     .exclude(stage__kind__in=NON_DATA_STAGE_KINDS))


def lerc_dataset_build(
    *,
    projects: list[Project],
    kind: str = ModelKind.REGRESSION,
    watermarks: dict[str, int] | None = None,
    adjudication_watermarks: dict[str, int] | None = None,
    holdout_dataset: str = "",
    split_mode: str = "auto",
    znormalize: bool = False,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    seed: int = 0,
    drop_exact_match: bool = True,
    distill_judge: str = "",
) -> LercDataset:
    """Training, validation and test examples from the projects' judgments.

    Only judgments with id ≤ the project's watermark are read (judgments are append-only, so a
    watermark pins the exact set). Gold = mean score, or the median when the project's
    `aggregation` setting says so (optionally z-normalized per annotator:
    the mean (median) of the annotators' z-scores is mapped back onto the 1–5 scale with the
    project's pooled mean and standard deviation of the raw scores, z · std + mean, so `lerc`
    still scores on 1–5 and "≥ 3 means correct" keeps its meaning);
    A/B gold = share of judgments preferring A, a tie counting half. A researcher's adjudication of an item wins
    over the crowd's gold, as at every door that reads an item's label
    (`annotation.judgment_selectors.with_adjudications`): its score, or for A/B 1 (A) or 0
    (B); `adjudication_watermarks` pins which adjudications are read (a version pinned before
    they were recorded reads none). Candidates that exactly match a reference are
    dropped (unless `drop_exact_match=False`, to evaluate against EM on whole splits).
    Splits: the item's split field ("item"), or passage/question groups hashed into
    train/val/test ("group") so no passage lands in two splits; "auto" uses the split field when
    the items carry train and dev splits. With `holdout_dataset` that dataset is the test set
    (out-of-dataset setting) and is never trained or validated on.

    `distill_judge` (Likert only): that judge's verdicts on the items with no judgment up to
    the watermark become `dataset.distill`, from the training and validation splits only (a
    test or held-out item's verdict would leak what the version is measured on).
    """
    if split_mode not in SPLIT_MODES:
        raise LercError(f"split mode must be one of {', '.join(SPLIT_MODES)}")
    pinned = dict(watermarks or {})
    watermarks = dict(pinned)
    adjudication_watermarks = dict(adjudication_watermarks or {})
    dataset = LercDataset(kind=kind)
    seen_ids: list[int] = []
    per_project: dict[str, dict] = {}
    # The project that first holds each passage/question group: the same text in a later
    # project is split with it, so an item copied into two projects is never trained on in
    # one and evaluated in the other (`_split_group`).
    first_holder: dict[str, int] = {}
    dropped = {"exact_match": 0, "excluded": 0, "no_gold": 0}
    for project in projects:
        watermark = watermarks.get(str(project.id))
        if watermark is None:
            watermark = _data_watermark(project)
            watermarks[str(project.id)] = watermark
        rows = [r for r in judgment_rows(project=project) if r.id <= watermark]
        # How many judgments up to the watermark counted when the version read them: the
        # refresh counts those that count since (held work approved) as new
        # (`refresh.lerc_refresh_due`).
        counted = len(rows)
        split_args = {"holdout_dataset": holdout_dataset, "seed": seed,
                      "val_fraction": val_fraction, "test_fraction": test_fraction}
        if kind == ModelKind.PAIRWISE:
            rows = [r for r in rows if r.choice in AB_CHOICES or r.choice in AB_TIE_CHOICES]
        else:
            rows = [r for r in rows if r.score is not None]
        used_items = _usable_items({r.item_id for r in rows}, kind=kind,
                                   drop_exact_match=drop_exact_match, dropped=dropped)
        rows = [r for r in rows if r.item_id in used_items]
        seen_ids.extend(r.id for r in rows)
        per_project[project.slug] = {
            "id": project.id, "watermark": watermark, "counted": counted,
            "judgments": len(rows),
            "items": len({r.item_id for r in rows}),
        }
        gold = _gold_by_item(rows, kind=kind, znormalize=znormalize,
                             summary=per_project[project.slug],
                             aggregation=_target_aggregation(project))
        up_to = adjudication_watermarks.get(str(project.id))
        if up_to is None:
            # A data set pinned before adjudications were pinned too read none of them.
            up_to = 0 if str(project.id) in pinned else adjudication_watermark(project)
            adjudication_watermarks[str(project.id)] = up_to
        gold = _adjudicated(gold, kind=kind, project=project, up_to=up_to,
                            summary=per_project[project.slug])
        if kind != ModelKind.PAIRWISE:
            gold = _on_five_points(gold, project=project, summary=per_project[project.slug])
        has_splits = {i.split.lower() for i in used_items.values()}
        use_item_split = split_mode == "item" or (
            split_mode == "auto" and "train" in has_splits and has_splits & VAL_SPLITS
        )
        for item_id in sorted(gold):
            item = used_items[item_id]
            example = item_example(kind, item, gold[item_id], project)
            target = _split_of(item, example, use_item_split=use_item_split,
                               group=_split_group(item, project, first_holder), **split_args)
            if target:
                getattr(dataset, target).append(example)
        if distill_judge and kind == ModelKind.REGRESSION:
            dataset.distill.extend(_distilled_examples(
                project, distill_judge, watermark, use_item_split=use_item_split,
                drop_exact_match=drop_exact_match, first_holder=first_holder, **split_args))
    dataset.snapshot = {
        **_judgments_pinned(seen_ids, watermarks),
        "adjudication_watermarks": adjudication_watermarks,
        "projects": per_project,
        "examples": {"train": len(dataset.train), "val": len(dataset.val),
                     "test": len(dataset.test)},
        "dropped_items": dropped,
        "holdout_dataset": holdout_dataset,
        "split_mode": split_mode,
        "znormalize": znormalize,
    }
    if distill_judge:
        dataset.snapshot["distill"] = {
            "judge": distill_judge, "answers": len(dataset.distill),
            "item_ids_sha256": hashlib.sha256(
                ",".join(e.id for e in dataset.distill).encode()).hexdigest()}
    return dataset


def _distilled_examples(project: Project, judge_ref: str, watermark: int, *,
                        use_item_split: bool, drop_exact_match: bool,
                        first_holder: dict[str, int] | None = None, **split_args
                        ) -> list[LercExample]:
    """The judge's verdicts on the project's items that no human judged (no judgment up to the
    watermark), not excluded or practice, not an exact match, in the training or validation
    split; gold = 1 + 4 · the judge's 0–1 value. None when the judge has nothing here."""
    try:
        view = judge_view(project, judge_ref)
    except LookupError:
        return []
    judged = set(Judgment.objects.filter(item__project=project, id__lte=watermark)
                 .values_list("item_id", flat=True))
    items = [item for item in Item.objects.filter(project=project, excluded=False,
                                                  is_practice=False).order_by("id")
             if item.id in view.calls and item.id not in judged]
    if drop_exact_match:
        items = [item for item in items if not is_exact_match_as_judged(
            (item.content or {}).get("candidate", ""), (item.content or {}).get("references", []))]
    if not items:
        return []
    values = predictor_values(view, [item.id for item in items])
    examples = []
    for item, value in zip(items, values, strict=True):
        example = item_example(ModelKind.REGRESSION, item, 1.0 + 4.0 * float(value), project)
        group = _split_group(item, project, {} if first_holder is None else first_holder)
        if _split_of(item, example, use_item_split=use_item_split, group=group,
                     **split_args) in ("train", "val"):
            examples.append(example)
    return examples


def _judgments_pinned(seen_ids: list[int], watermarks: dict[str, int]) -> dict:
    """What pins the data set: the per-project watermarks, and the count, highest id and
    sha256 of the judgment ids read (judgments are append-only, so these name the exact set)."""
    seen_ids = sorted(seen_ids)
    return {
        "watermarks": watermarks,
        "judgment_count": len(seen_ids),
        "max_judgment_id": seen_ids[-1] if seen_ids else 0,
        "judgment_ids_sha256": hashlib.sha256(
            ",".join(map(str, seen_ids)).encode()).hexdigest(),
    }


def _usable_items(item_ids: set[int], *, kind: str, drop_exact_match: bool,
                  dropped: dict[str, int]) -> dict[int, Item]:
    """The judged items that may become examples: not excluded, not practice and (Likert,
    unless asked to keep them) not an exact match of a reference; `dropped` counts the rest."""
    used_items = {}
    for item_id, item in {i.id: i for i in Item.objects.filter(id__in=item_ids)}.items():
        if item.excluded or item.is_practice:
            dropped["excluded"] += 1
            continue
        content = item.content or {}
        if drop_exact_match and kind == ModelKind.REGRESSION and is_exact_match_as_judged(
            content.get("candidate", ""), content.get("references", [])
        ):
            dropped["exact_match"] += 1
            continue
        used_items[item_id] = item
    return used_items


_PREFERS_A = {"A": 1.0, "B": 0.0}


def _target_aggregation(project: Project) -> str:
    """The project's choice of targets: mean or median for Likert; for A/B the worker model
    (dawid_skene, mace, glad) whose posterior becomes the soft target, or majority (the share
    of judges preferring A)."""
    model = project.aggregation_model
    if project.kind == TaskKind.LIKERT:
        return model if model in LIKERT_MODELS else "mean"
    return model if model in WORKER_MODELS else "majority"


def _gold_by_item(rows: list, *, kind: str, znormalize: bool, summary: dict,
                  aggregation: str = "mean") -> dict[int, float]:
    """Gold per item: for A/B a soft target for the pairwise loss (the share preferring A, or
    a worker model's posterior that A is better), or the mean or median score (`aggregation`),
    optionally z-normalized per annotator and mapped back onto 1–5 (the scale goes into
    `summary`)."""
    if kind == ModelKind.PAIRWISE:
        if aggregation in WORKER_MODELS:
            # The model's posterior that A is better: a worker it trusts counts for more than
            # one it found guessing.
            summary["aggregation"] = aggregation
            # The worker models read A and B only (their label set); a tie is no label.
            posterior = aggregate_items(((r.worker_id, r.item_id, r.choice) for r in rows
                                         if r.choice in AB_CHOICES),
                                        model=aggregation, kind="nominal")
            return {item_id: (a.confidence if a.label == "A" else 1.0 - a.confidence)
                    for item_id, a in posterior.items() if a.label is not None}
        # A tie ("tie", "both good", "both bad") counts half, as the leaderboard counts it: a
        # pair voted [A, tie, tie] is a mild preference (2/3), not a certain one.
        return mean_by_item((r.worker_id, r.item_id, _PREFERS_A.get(r.choice, 0.5))
                            for r in rows)
    summary["aggregation"] = aggregation
    if aggregation == "median":
        triples = [(r.worker_id, r.item_id, r.score) for r in rows]
        if znormalize:
            triples = znormalize_by_annotator(triples)
        gold = {item_id: aggregate.label for item_id, aggregate in
                aggregate_items(triples, model="median", kind="likert").items()}
    else:
        gold = mean_by_item(((r.worker_id, r.item_id, r.score) for r in rows),
                            znormalize=znormalize)
    if znormalize and rows:
        raw = [float(r.score) for r in rows]
        pooled_mean = statistics.fmean(raw)
        pooled_std = statistics.pstdev(raw) if len(raw) > 1 else 0.0
        gold = {item_id: z * pooled_std + pooled_mean for item_id, z in gold.items()}
        summary["znormalize_scale"] = {"mean": pooled_mean, "std": pooled_std}
    return gold


def _adjudicated(gold: dict[int, float], *, kind: str, project: Project, up_to: int,
                 summary: dict) -> dict[int, float]:
    """`gold` with the researcher's latest adjudication (id ≤ `up_to`) in place of the crowd's
    on the items it holds: a Likert score as it is (gold is on the 1–5 scale, z-normalized gold
    mapped back onto it), an A/B choice as the certain target 1 (A) or 0 (B)."""
    decided = latest_adjudications(project=project, up_to=up_to) if up_to else {}
    out, n = dict(gold), 0
    for item_id, adjudication in decided.items():
        if item_id not in out:
            continue  # the data set's own choice of items: no usable judgment, no example
        if kind == ModelKind.PAIRWISE:
            if adjudication.choice not in AB_CHOICES:
                continue
            out[item_id] = 1.0 if adjudication.choice == "A" else 0.0
        elif adjudication.score is not None:
            out[item_id] = float(adjudication.score)
        else:
            continue
        n += 1
    summary["adjudicated"] = n
    return out


def _on_five_points(gold: dict[int, float], *, project: Project, summary: dict
                    ) -> dict[int, float]:
    """Likert gold on LERC's 1-5 scale: a project on another scale (1 to `scale_top`) is mapped
    linearly onto it (`to_five_point`: its cut, the midpoint, becomes 3), the one door where a
    project's gold enters LERC training and evaluation, which read 1-5 and "≥ 3 is correct"."""
    top = project.scale_top
    if top == FIVE_POINT_TOP:
        return gold
    summary["scale"] = {"top": top, "mapped_onto": [1, FIVE_POINT_TOP]}
    return {item_id: to_five_point(value, top) for item_id, value in gold.items()}


def _split_group(item: Item, project: Project, first_holder: dict[str, int]) -> str:
    """The group an item is split by: its passage/question group in the first project (of
    the data set being built) that holds that group. Within one project this is the
    example's own group; the same text in a second project follows the first one's split."""
    text_group = _item_group(item)
    return f"{first_holder.setdefault(text_group, project.id)}:{text_group}"


def _split_of(item: Item, example, *, use_item_split: bool, holdout_dataset: str, seed: int,
              val_fraction: float, test_fraction: float, group: str | None = None) -> str:
    """"train", "val" or "test" for an example, or "" when it must not be used (another
    dataset's test split in the out-of-dataset setting). `group`: the group that decides a
    hashed split (`_split_group`; default the example's own)."""
    if holdout_dataset:
        if item.dataset == holdout_dataset:
            return "test"
        if use_item_split and item.split.lower() == "test":
            return ""  # another dataset's test split: never trained on
    split = item.split.lower()
    if use_item_split and split in ({"train", "test"} | VAL_SPLITS):
        return "val" if split in VAL_SPLITS else split
    position = _group_bucket(group or example.group, seed)
    return ("test" if position < test_fraction and not holdout_dataset
            else "val" if position < test_fraction + val_fraction else "train")


def item_example(kind: str, item: Item, gold: float, project: Project):
    """The LercExample (or PairExample) of an item with gold `gold`."""
    content = item.content or {}
    group = f"{project.id}:{_item_group(item)}"
    if kind == ModelKind.PAIRWISE:
        return PairExample(question=content.get("question", ""),
                           answer_a=content["answer_a"]["text"],
                           answer_b=content["answer_b"]["text"], label=gold,
                           id=str(item.id), dataset=item.dataset, group=group)
    return LercExample(question=content.get("question", ""),
                       references=tuple(content.get("references") or ("",)),
                       candidate=content.get("candidate", ""), passage=content.get("passage", ""),
                       score=gold, id=str(item.id), dataset=item.dataset, group=group,
                       source=item.source)


def mc_pretraining_build(*, projects: list[Project], seed: int = 0) -> list:
    """3-way pre-training examples from multiple-choice projects' items (role A is correct);
    practice items and items removed from the study (`Item.excluded`) are left out, as every
    LERC door leaves them out."""
    items = Item.objects.filter(project__in=projects, project__kind=TaskKind.MC,
                                is_practice=False, excluded=False).order_by("id")
    rows = [row for item in items if (row := mc_item_row(item.content or {})) is not None]
    return mc_pretraining_examples(rows, seed=seed)


def is_held_out(item: Item, train_ids: set[str], train_groups: set[str]) -> bool:
    """Whether an item is outside training: not a training example; judged items that are not
    training examples are validation/test; unjudged ones count when their split field is
    validation/test, or, without one, when no training example shares their passage group.
    `train_groups`: the training examples' passage groups without their project
    (`text_group`)."""
    if str(item.id) in train_ids:
        return False
    split = (item.split or "").lower()
    if split == "train":
        return False
    if split in VAL_SPLITS or split == "test":
        return True
    # By text, whatever the project: the same passage trained on in another project of the
    # version is not held out here.
    return _item_group(item) not in train_groups


def text_group(example_group: str) -> str:
    """An example's passage/question group without its project (`item_example`'s
    "project:group")."""
    return example_group.partition(":")[2]


def examples_seen_record(dataset: LercDataset) -> dict:
    """What a version saw of its data, kept with it for the reports that measure it against
    humans (`metrics_app.model_selectors.learned_metric_seen_items`): the items it trained on
    (a distilling judge's included) and the validation items its epoch and calibrator were chosen on, their passage groups, and
    its test items. A judge measured on answers it was fitted to measures memory, and
    prediction-powered estimates need predictions made without the labels they are corrected
    with. The answers a distilling judge taught it on (`dataset.distill`) are seen too: the
    calibrated judge is fitted on them as on the validation answers, and humans may judge them
    later."""
    seen = [*dataset.train, *dataset.val, *dataset.distill]
    return {"items": sorted({int(e.id) for e in seen if str(e.id).isdigit()}),
            "groups": sorted({text_group(e.group) for e in seen}),
            "test_items": sorted({int(e.id) for e in dataset.test if str(e.id).isdigit()})}


def version_dataset_build(model_version: ModelVersion) -> LercDataset:
    """The dataset a version trains on: its projects' judgments up to its pinned watermarks,
    split as its data options say."""
    data = version_data_options(model_version)
    return lerc_dataset_build(
        projects=list(model_version.projects.order_by("id")),
        kind=model_version.kind,
        watermarks=model_version.data_snapshot.get("watermarks"),
        adjudication_watermarks=model_version.data_snapshot.get("adjudication_watermarks"),
        holdout_dataset=data.holdout_dataset,
        split_mode=data.split_mode,
        znormalize=data.znormalize,
        distill_judge=data.distill_judge,
    )


def project_watermarks(projects: list[Project]) -> dict[str, int]:
    """The judgments a new version pins, per project id: the newest data judgment's id."""
    return {str(p.id): _data_watermark(p) for p in projects}


def project_adjudication_watermarks(projects: list[Project]) -> dict[str, int]:
    """The adjudications a new version pins, per project id: the newest one's id."""
    return {str(p.id): adjudication_watermark(p) for p in projects}
