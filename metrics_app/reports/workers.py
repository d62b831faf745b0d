"""Per-worker quality: agreement with the others, accuracy on gold/practice items, speed,
straight-lining, one justification pasted on item after item. Everything is computed in one vectorised pass over the judgments."""
from __future__ import annotations

import numpy as np

from annotation.domain.agreement import (
    NO_JUDGMENTS,
    agreement_undefined_reason,
    alpha_without_each,
    krippendorff_alpha_from_counts,
)
from annotation.domain.answers import (
    FLAG_FAILED_PRACTICE,
    FLAG_LOW_GOLD_ACCURACY,
    FLAG_SAME_JUSTIFICATION,
    FLAG_STRAIGHT_LINING,
    FLAG_TOO_FAST,
    MIN_SECONDS_PER_ITEM,
    SAME_JUSTIFICATION_SHARE,
    answer_matches_gold,
    position_shown,
    same_justification_count,
)
from annotation.judgment_selectors import JudgmentFrame
from annotation.models import TaskKind, Worker

# The dashboard's own "look" thresholds, read on all of a worker's counted work; a worker the
# project's review rules act on is flagged whatever these say (`rule_flags` of `worker_report`).
# A worker giving the same answer this often (with enough judgments) is flagged.
STRAIGHT_LINING_SHARE = 0.9
STRAIGHT_LINING_MIN_JUDGMENTS = 10
# Gold accuracy below this, on at least this many gold items, is flagged.
GOLD_ACCURACY_FLOOR = 0.6
# "lowers agreement" only when α without the worker is this much higher: on a dozen experts a
# single disagreement moves α by a few hundredths, which is not a reason to look at anyone.
LOWERS_AGREEMENT_BY = 0.05
GOLD_MIN_ITEMS = 3


def _correct(frame: JudgmentFrame, tolerance: float) -> np.ndarray:
    """Per judgment: 1 right, 0 wrong, NaN when the item has no gold label (the definition is
    `answer_matches_gold`, shared with qualification grading and the assignment review)."""
    gold = frame.items["gold"][frame.item_pos] if len(frame) else np.array([], dtype=object)
    out = np.full(len(frame), np.nan)
    for j in np.nonzero(gold != None)[0]:  # noqa: E711 (elementwise comparison)
        verdict = answer_matches_gold(
            frame.kind, gold[j], tolerance=tolerance,
            score=float(frame.score[j]) if frame.kind == TaskKind.LIKERT else None,
            choice=frame.choice[j] if frame.kind != TaskKind.LIKERT else "")
        if verdict is not None:
            out[j] = float(verdict)
    return out


def _grouped_mean(index: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    ok = ~np.isnan(values)
    total = np.bincount(index[ok], weights=values[ok], minlength=n)
    count = np.bincount(index[ok], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan), count


def shown_position(frame: JudgmentFrame) -> np.ndarray:
    """A/B and MC: the position on screen of the chosen option (straight-lining by position:
    always clicking the first option looks random in item order when the order is shuffled)."""
    return np.array([position_shown(choice, order)
                     for choice, order in zip(frame.choice, frame.presented_order, strict=True)],
                    dtype=object)


def worker_report(frame: JudgmentFrame, *, tolerance: float = 0.0,
                  rule_flags: dict[int, dict[str, str]] | None = None) -> list[dict]:
    """One row per worker, sorted by agreement contribution (most harmful first). `rule_flags`:
    per worker, the flags the project's review rules raise on their work and the rules'
    reasons (`annotation.services.review.workers_review_rule_flags`): each is among the row's
    `flags`, its reason in `flag_reasons`, so a flag never comes later than a rule acts; a
    worker whose only work a rule held or rejected (none of it counts) gets a row too."""
    rule_flags = rule_flags or {}
    if len(frame) == 0:
        return _rows_without_counted_work(rule_flags, listed=set())
    worker_ids, w_index = np.unique(frame.worker_id, return_inverse=True)
    n_workers = len(worker_ids)
    data = frame.data_mask()
    has, value_index, domain = frame.coded_values()
    use = data & has

    counts = np.zeros((len(frame.item_table_ids), len(domain)), dtype=np.int64)
    np.add.at(counts, (frame.item_pos[use], value_index[use]), 1)
    alpha_all, alpha_without = _alpha_without_each_worker(
        frame, counts, domain, use, value_index, w_index, n_workers)
    agreement, n_shared = _agreement_with_others(frame, counts, domain, use, value_index,
                                                 w_index, n_workers)
    why = _alpha_reasons(frame, counts, use, value_index, w_index, n_workers,
                         alpha_all=alpha_all, alpha_without=alpha_without, n_shared=n_shared)
    accuracies = _accuracies(frame, tolerance, data, w_index, n_workers)
    modal = _modal_answer_share(frame, has, value_index, data, w_index, n_workers)
    info = {
        pk: (external_id, name, status)
        for pk, external_id, name, status in Worker.objects.filter(
            pk__in=worker_ids.tolist()
        ).values_list("pk", "external_id", "display_name", "status")
    }
    order = np.argsort(w_index, kind="stable")
    bounds = np.searchsorted(w_index[order], np.arange(n_workers + 1))
    rows = []
    for w in range(n_workers):
        idx = order[bounds[w]:bounds[w + 1]]
        idx = idx[data[idx]]  # speed and straight-lining on real work, not practice
        times = frame.time_ms[idx]
        times = times[~np.isnan(times)]
        without = alpha_without[w]
        external_id, name, status = info.get(int(worker_ids[w]), ("", "", ""))
        row = {
            "worker_id": int(worker_ids[w]),
            "external_id": external_id,
            "name": name,
            "status": status,
            "n_judgments": int(len(idx)),
            "n_items_shared": int(n_shared[w]),
            "agreement_with_others": None if np.isnan(agreement[w]) else float(agreement[w]),
            "agreement_with_others_undefined": None if n_shared[w] else why[w],
            "agreement_measure": "mean_abs_diff" if frame.kind == TaskKind.LIKERT
            else "share_agreeing",
            "alpha_without": None if np.isnan(without) else float(without),
            # > 0: α is higher with this worker than without (the worker helps agreement).
            # None when the worker shares no item with anyone (removing them changes nothing).
            "alpha_contribution": None if np.isnan(without) or alpha_all is None
            or n_shared[w] == 0 else float(alpha_all - without),
            # Why α without the worker, or the contribution, is None (`_alpha_reasons`).
            "alpha_undefined": why[w],
            **{key: values[w] for key, values in accuracies.items()},
            "median_time_s": float(np.median(times) / 1000) if len(times) else None,
            "modal_answer_share": None if np.isnan(modal[w]) else float(modal[w]),
            "same_justification_share": _same_justification_share(frame, idx),
        }
        row["flag_reasons"] = rule_flags.get(row["worker_id"], {})
        row["flags"] = _flags(row)
        rows.append(row)
    rows.sort(key=lambda r: (r["alpha_contribution"] is None, r["alpha_contribution"] or 0.0))
    return rows + _rows_without_counted_work(rule_flags, listed={r["worker_id"] for r in rows})


def flags_with_reasons(row: dict) -> list[str]:
    """A row's flags as the workers table shows them: each one a review rule raised followed
    by the rule's reason ("low gold accuracy (review rule: accuracy on check items 0% ...)")."""
    reasons = row.get("flag_reasons") or {}
    return [f"{flag} (review rule: {reasons[flag]})" if flag in reasons else flag
            for flag in row.get("flags") or []]


def worker_row_without_counted_work(*, worker_id: int, external_id: str, name: str,
                                    status: str, why: str, **fields) -> dict:
    """A workers-table row for a worker none of whose judgments count (blocked, or every
    assignment held or rejected): the row's every key, numbers empty, `why` the reason their
    agreement is undefined; `fields` add to it (flags, the judgments not counted)."""
    return {
        "worker_id": worker_id, "external_id": external_id, "name": name, "status": status,
        "n_judgments": 0, "n_items_shared": 0, "agreement_with_others": None,
        "agreement_with_others_undefined": why, "agreement_measure": None,
        "alpha_without": None, "alpha_contribution": None, "alpha_undefined": why,
        "gold_accuracy": None, "n_gold": 0, "practice_accuracy": None, "n_practice": 0,
        "median_time_s": None, "modal_answer_share": None, "same_justification_share": None,
        "flag_reasons": {}, "flags": [], **fields,
    }


def _rows_without_counted_work(rule_flags: dict[int, dict[str, str]], *,
                               listed: set[int]) -> list[dict]:
    """Rows for the workers the review rules flag whose work is all out of the count."""
    missing = sorted(set(rule_flags) - listed)
    why = own_items_reason(NO_JUDGMENTS)
    return [worker_row_without_counted_work(
        worker_id=pk, external_id=external_id, name=name, status=status, why=why,
        flag_reasons=rule_flags[pk], flags=list(rule_flags[pk]))
        for pk, external_id, name, status in Worker.objects.filter(pk__in=missing)
        .order_by("external_id").values_list("pk", "external_id", "display_name", "status")]


def _alpha_without_each_worker(frame: JudgmentFrame, counts: np.ndarray, domain: np.ndarray,
                               use: np.ndarray, value_index: np.ndarray, w_index: np.ndarray,
                               n_workers: int) -> tuple[float | None, np.ndarray]:
    """α of all data judgments, and α with each worker's judgments left out (NaN where
    undefined)."""
    level = frame.default_level()
    alpha_all = krippendorff_alpha_from_counts(counts, domain, level)
    alpha_without = np.full(n_workers, np.nan)
    if alpha_all is not None:
        alpha_without = alpha_without_each(
            counts.astype(float), domain, frame.item_pos[use], value_index[use], w_index[use],
            level,
        )
        alpha_without = np.concatenate(
            [alpha_without, np.full(n_workers - len(alpha_without), np.nan)]
        )
    return alpha_all, alpha_without


def workers_table_note(rows: list[dict], agreement_all: dict | None
                       ) -> tuple[str | None, list[dict]]:
    """(the reason α is undefined for everyone, which the dashboard says once above its
    workers table, or None; copies of `rows` marking `alpha_see_note` where a worker's
    `alpha_undefined` is that same reason). Every worker sharing an item then carried the
    agreement row's sentence, repeated row after row; a worker's own reason ("this worker's
    items: ...") still stands in its cell. The report's JSON is left as it is."""
    reason = (agreement_all or {}).get("alpha_undefined")
    marked = [{**row, "alpha_see_note": bool(reason) and row.get("alpha_contribution") is None
               and row.get("alpha_undefined") == reason} for row in rows]
    return (reason if any(row["alpha_see_note"] for row in marked) else None), marked


def own_items_reason(reason: str) -> str:
    """Why a worker's agreement with the others is undefined, in the words of the agreement
    rule (`agreement_undefined_reason`) read on the worker's own items."""
    return f"this worker's items: {reason}"


def _alpha_reasons(frame: JudgmentFrame, counts: np.ndarray, use: np.ndarray,
                   value_index: np.ndarray, w_index: np.ndarray, n_workers: int, *,
                   alpha_all: float | None, alpha_without: np.ndarray,
                   n_shared: np.ndarray) -> list[str | None]:
    """Per worker, why their α contribution (α without them, and their agreement with the
    others) is undefined, None where it is defined, always from `agreement_undefined_reason`:
    α of everyone undefined (its own reason, the agreement row's); the worker's items without
    a second judgment ("this worker's items: ..."): removing them changes nothing and there is
    no one to agree with; α of the others undefined ("without this worker: ...", e.g. every
    other judgment gives one answer). Counts are rebuilt only for the workers concerned."""
    labels = frame.value_labels()
    overall = None if alpha_all is not None else agreement_undefined_reason(counts, labels)
    # Each worker's counted judgments, grouped once (a loop of masks would be workers × rows).
    judged = np.flatnonzero(use)
    judged = judged[np.argsort(w_index[judged], kind="stable")]
    bounds = np.searchsorted(w_index[judged], np.arange(n_workers + 1))
    out: list[str | None] = []
    for w in range(n_workers):
        mine = judged[bounds[w]:bounds[w + 1]]
        if not n_shared[w]:
            # The worker's items only: none has a judgment by anyone else.
            out.append(own_items_reason(agreement_undefined_reason(
                counts[np.unique(frame.item_pos[mine])], labels)))
        elif overall is not None:
            out.append(overall)
        elif np.isnan(alpha_without[w]):
            rest = counts.copy()
            np.add.at(rest, (frame.item_pos[mine], value_index[mine]), -1)
            out.append(f"without this worker: {agreement_undefined_reason(rest, labels)}")
        else:
            out.append(None)
    return out


def _agreement_with_others(frame: JudgmentFrame, counts: np.ndarray, domain: np.ndarray,
                           use: np.ndarray, value_index: np.ndarray, w_index: np.ndarray,
                           n_workers: int) -> tuple[np.ndarray, np.ndarray]:
    """Per worker: agreement with the other judgments of the same items, and how many of the
    worker's judgments had others to compare with."""
    others = counts[frame.item_pos] - np.eye(len(domain), dtype=np.int64)[value_index] * use[:, None]
    n_others = others.sum(axis=1)
    with_others = use & (n_others > 0)
    agree = np.full(len(frame), np.nan)
    if frame.kind == TaskKind.LIKERT:
        # Likert: mean absolute distance to the others' mean score (0 = always agrees).
        others_mean = (others @ domain) / np.maximum(n_others, 1)
        agree[with_others] = np.abs(frame.score[with_others] - others_mean[with_others])
    else:
        # Nominal: share of the other judgments choosing the same answer.
        same = others[np.arange(len(frame)), value_index]
        agree[with_others] = same[with_others] / n_others[with_others]
    return _grouped_mean(w_index, agree, n_workers)


def _accuracies(frame: JudgmentFrame, tolerance: float, data: np.ndarray, w_index: np.ndarray,
                n_workers: int) -> dict[str, list]:
    """Per worker: gold accuracy — the share of the worker's judgments on items with a gold
    answer (gold checks and labelled items alike, in any stage; practice items apart) that
    match it — and practice accuracy, each with its count; accuracy None where there were
    none. The assignment review page counts the same way (`annotation.review_selectors`)."""
    correct = _correct(frame, tolerance)
    is_practice = frame.items["is_practice"][frame.item_pos].astype(bool)
    out: dict[str, list] = {}
    for name, count_name, mask in (("gold_accuracy", "n_gold", ~is_practice),
                                   ("practice_accuracy", "n_practice", is_practice)):
        accuracy, n = _grouped_mean(w_index, np.where(mask, correct, np.nan), n_workers)
        out[name] = [None if n[w] == 0 else float(accuracy[w]) for w in range(n_workers)]
        out[count_name] = [int(n[w]) for w in range(n_workers)]
    return out


def _modal_answer_share(frame: JudgmentFrame, has: np.ndarray, value_index: np.ndarray,
                        data: np.ndarray, w_index: np.ndarray, n_workers: int) -> np.ndarray:
    """Straight-lining: the share of each worker's most frequent answer in data stages (by
    value for Likert, by on-screen position for A/B and MC), from one bincount over (worker,
    answer) pairs; NaN for a worker with no answer."""
    if frame.kind == TaskKind.LIKERT:
        answer_code = np.where(has, value_index, -1)
    else:
        shown = shown_position(frame).astype(str)
        _labels, answer_code = np.unique(shown, return_inverse=True)
        answer_code = np.where(shown == "", -1, answer_code.reshape(-1))
    answered = data & (answer_code >= 0)
    n_codes = int(answer_code.max(initial=0)) + 1
    per_answer = np.bincount(w_index[answered] * n_codes + answer_code[answered],
                             minlength=n_workers * n_codes).reshape(n_workers, n_codes)
    n_answered = per_answer.sum(axis=1)
    return np.where(n_answered > 0, per_answer.max(axis=1) / np.maximum(n_answered, 1), np.nan)


def _same_justification_share(frame: JudgmentFrame, idx: np.ndarray) -> float | None:
    """The share of a worker's data judgments (`idx`) carrying their most repeated
    justification, as review compares them (`same_justification_count`); None when the task
    has no justifications or the worker wrote none twice."""
    if not frame.justification or not len(idx):
        return None
    same = same_justification_count(frame.justification[i] for i in idx)
    return same / len(idx) if same else None


def _flags(row: dict) -> list[str]:
    """The row's flags: each one the review rules raise on the worker's work
    (`row["flag_reasons"]`), and the dashboard's own looser looks at all their counted work."""
    flags = set(row["flag_reasons"])
    if (row["modal_answer_share"] or 0) >= STRAIGHT_LINING_SHARE and (
        row["n_judgments"] >= STRAIGHT_LINING_MIN_JUDGMENTS
    ):
        flags.add(FLAG_STRAIGHT_LINING)
    # The review rule's default share (annotation/domain/answers.py says why 0.8).
    if (row["same_justification_share"] or 0) >= SAME_JUSTIFICATION_SHARE and (
        row["n_judgments"] >= STRAIGHT_LINING_MIN_JUDGMENTS
    ):
        flags.add(FLAG_SAME_JUSTIFICATION)
    if row["gold_accuracy"] is not None and row["n_gold"] >= GOLD_MIN_ITEMS and (
        row["gold_accuracy"] < GOLD_ACCURACY_FLOOR
    ):
        flags.add(FLAG_LOW_GOLD_ACCURACY)
    # The review rule's default minimum time per item (it reads each assignment's mean; here
    # the worker's median over their work that counts).
    if row["median_time_s"] is not None and row["median_time_s"] < MIN_SECONDS_PER_ITEM:
        flags.add(FLAG_TOO_FAST)
    if row["practice_accuracy"] is not None and row["practice_accuracy"] < 1.0:
        flags.add(FLAG_FAILED_PRACTICE)
    if row["alpha_contribution"] is not None and (
        row["alpha_contribution"] < -LOWERS_AGREEMENT_BY
    ):
        flags.add("lowers agreement")
    # One order on every row, whichever raised a flag.
    order = (FLAG_STRAIGHT_LINING, FLAG_SAME_JUSTIFICATION, FLAG_LOW_GOLD_ACCURACY,
             FLAG_TOO_FAST, FLAG_FAILED_PRACTICE, "lowers agreement")
    return sorted(flags, key=lambda flag: order.index(flag) if flag in order else len(order))
