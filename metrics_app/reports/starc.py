"""STARC multiple-choice analytics (Berzak et al. 2020): accuracy and A/B/C/D choice rates per
source and text level (before and after reading in the pilot mode), participants excluded for
failing practice items, the pilot's flag criteria per question, the share of questions all
judges call invalid, and the approximate ceiling."""
from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import numpy as np

from annotation.judgment_selectors import JudgmentFrame
from annotation.models import ExperimentMode
from core.vocabulary import MC_ROLES

# Table 5's RACE "All" column weights the levels by the RACE test set's question counts.
LEVEL_WEIGHTS = {"race": {"middle": 1436, "high": 3498}}
ELEMENTARY = {"ele", "elementary"}
ADVANCED = {"adv", "advanced"}

# The STARC pilot's criteria for revising a question (see the brief), as exact fractions: a
# share is compared as counts (`_share`), so a boundary is never crossed by rounding (in floats
# 1.0 - 0.7 > 0.30: all right at Elementary and 7 in 10 at Advanced read as more than 30 points
# apart).
GUESSABLE_BEFORE_A = Fraction(60, 100)
PROBLEM_AFTER_A = Fraction(50, 100)
TOO_EASY_AFTER_A = Fraction(95, 100)
DISTRACTOR_AFTER = Fraction(30, 100)
LEVEL_GAP = Fraction(30, 100)
# A share over fewer answers than this says nothing about a question (the in-lab experiment has
# one answer per question and level); such questions are not flagged.
MIN_ANSWERS_FOR_FLAGS = 3


def _rates(choices: list[str]) -> dict:
    n = len(choices)
    rates = {role: (sum(c == role for c in choices) / n if n else None) for role in MC_ROLES}
    return {**rates, "n": n}


def _share(choices: list, role) -> Fraction:
    """The exact share of `choices` equal to `role` (of a non-empty list)."""
    return Fraction(sum(c == role for c in choices), len(choices))


def _source(frame: JudgmentFrame) -> np.ndarray:
    source = frame.item_column("source").astype(str)
    dataset = frame.item_column("dataset").astype(str)
    return np.where(source != "", source, dataset)


def question_key(external_id: str, metadata: dict | None, level: str) -> str:
    """The question an item asks, whatever its text level: importers may store it in
    metadata["question_id"]; otherwise the external id without its `_<level>` suffix."""
    if metadata and metadata.get("question_id"):
        return str(metadata["question_id"])
    if level and external_id.endswith(f"_{level}"):
        return external_id[: -len(level) - 1]
    return external_id


def practice_failures(frame: JudgmentFrame) -> set[int]:
    """Workers who answered any practice item wrongly (excluded from the analysis, as in
    STARC: "participants who did not answer both practice trials correctly were excluded")."""
    if len(frame) == 0:
        return set()
    practice = frame.items["is_practice"][frame.item_pos].astype(bool)
    gold = frame.items["gold"][frame.item_pos]
    failed = set()
    for j in np.nonzero(practice)[0]:
        right = (gold[j] or {}).get("choice", "A")
        if frame.choice[j] != right:
            failed.add(int(frame.worker_id[j]))
    return failed


# What each accuracy key holds, in the JSON itself: `accuracy["RACE"]` (pooled, 0.865 in-lab) is
# not the STARC paper's "All" column (levels weighted, 0.847).
ACCURACY_DEFINITIONS = {
    "accuracy": "share of trials answered with the correct role (A): per source (every trial "
                "of the source pooled, raw) and per source/level",
    "accuracy_weighted": "per source, the levels' accuracies weighted by the source's test-set "
                         "question counts (RACE: Middle 1,436, High 3,498): the STARC paper's "
                         "'All' column",
}


def _accuracy_block(keys: np.ndarray, levels: np.ndarray, chosen: list[str]) -> dict:
    accuracy, rates, weighted = {}, {}, {}
    by_key: dict[str, list[str]] = defaultdict(list)
    by_key_level: dict[tuple[str, str], list[str]] = defaultdict(list)
    for key, level, choice in zip(keys, levels, chosen, strict=True):
        if choice:
            by_key[key].append(choice)
            by_key_level[(key, level)].append(choice)
    for key, values in sorted(by_key.items()):
        rates[key] = _rates(values)
        accuracy[key] = rates[key]["A"]
    for (key, level), values in sorted(by_key_level.items()):
        rates[f"{key}/{level}"] = _rates(values)
        accuracy[f"{key}/{level}"] = rates[f"{key}/{level}"]["A"]
    for key in by_key:
        weights = LEVEL_WEIGHTS.get(key.lower())
        levels_here = {lvl for (k, lvl) in by_key_level if k == key}
        if weights and levels_here and all(lvl.lower() in weights for lvl in levels_here):
            total = sum(weights[lvl.lower()] for lvl in levels_here)
            weighted[key] = sum(
                weights[lvl.lower()] * accuracy[f"{key}/{lvl}"] for lvl in levels_here
            ) / total
    return {"accuracy": accuracy, "choice_rates": rates, "accuracy_weighted": weighted,
            "definitions": ACCURACY_DEFINITIONS}


def starc_report(frame: JudgmentFrame, *, experiment_mode: str = "",
                 excluded: set[int] | None = None) -> dict:
    """`excluded`: the workers the practice rule excludes
    (`annotation.selectors.practice_failed_worker_ids`, which also sees practice answered in
    another stage than the one read); by default those of the frame's practice answers."""
    excluded = practice_failures(frame) if excluded is None else set(excluded)
    data = frame.data_mask() & ~frame.items["is_practice"][frame.item_pos].astype(bool) \
        if len(frame) else np.zeros(0, dtype=bool)
    data &= ~np.isin(frame.worker_id, list(excluded))
    idx = np.nonzero(data)[0]
    sources = _source(frame)[idx] if len(frame) else np.array([], dtype=str)
    levels = frame.item_column("text_level").astype(str)[idx] if len(frame) else sources
    validity_mode = experiment_mode == ExperimentMode.VALIDITY
    # Validity judging marks answers as correct rather than answering: no accuracy from it.
    after = [""] * len(idx) if validity_mode else [str(frame.choice[j]) for j in idx]
    report: dict = {
        "experiment_mode": experiment_mode,
        "n_participants": int(len(set(frame.worker_id.tolist()))),
        "n_excluded_practice": len(excluded),
        "excluded_worker_ids": sorted(excluded),
        "n_judgments": int(len(idx)),
        **_accuracy_block(sources, levels, after),
    }
    before = [str((frame.extra[j] or {}).get("guess_choice", "")) for j in idx]
    has_before = any(before)
    if has_before:
        report["before_reading"] = _accuracy_block(sources, levels, before)
    if experiment_mode == ExperimentMode.GUESSING:
        # Guessing answers are made without the paragraph: they are the "before reading"
        # answers of the pilot's criteria (guessable), never its after-reading ones (a wrong
        # guess is no "question or answers problem", a spread of guesses no distractor one).
        report["question_flags"] = _question_flags(frame, idx, [""] * len(idx), after)
    else:
        report["question_flags"] = _question_flags(frame, idx, after,
                                                   before if has_before else None)
    report["validity"] = _validity(frame, idx, sources) if validity_mode or any(
        frame.choices[j] for j in idx
    ) else {}
    return report


def _question_flags(frame: JudgmentFrame, idx: np.ndarray, after: list[str],
                    before: list[str] | None) -> dict[str, list[str]]:
    """Question key → the pilot criteria it meets (only questions meeting any are listed)."""
    if not any(after) and not any(before or []):
        return {}
    external = frame.items["external_id"][frame.item_pos]
    metadata = frame.items["metadata"][frame.item_pos]
    level_col = frame.item_column("text_level").astype(str)
    per_question: dict[str, dict] = defaultdict(lambda: {"after": [], "before": [],
                                                         "levels": defaultdict(list)})
    for n, j in enumerate(idx):
        key = question_key(str(external[j]), metadata[j], level_col[j])
        entry = per_question[key]
        if after[n]:
            entry["after"].append(after[n])
            entry["levels"][level_col[j].lower()].append(after[n] == "A")
        if before and before[n]:
            entry["before"].append(before[n])
    flags: dict[str, list[str]] = {}
    for key, entry in per_question.items():
        found = []
        if len(entry["before"]) >= MIN_ANSWERS_FOR_FLAGS and (
            _share(entry["before"], "A") > GUESSABLE_BEFORE_A
        ):
            found.append("guessable")
        if len(entry["after"]) >= MIN_ANSWERS_FOR_FLAGS:
            right = _share(entry["after"], "A")
            if right < PROBLEM_AFTER_A:
                found.append("question or answers problem")
            if right > TOO_EASY_AFTER_A:
                found.append("too easy")
            if any(_share(entry["after"], r) > DISTRACTOR_AFTER for r in ("B", "C", "D")):
                found.append("distractor problem")
        ele = [v for lvl, vs in entry["levels"].items() if lvl in ELEMENTARY for v in vs]
        adv = [v for lvl, vs in entry["levels"].items() if lvl in ADVANCED for v in vs]
        if len(ele) >= MIN_ANSWERS_FOR_FLAGS and len(adv) >= MIN_ANSWERS_FOR_FLAGS and (
            abs(_share(ele, True) - _share(adv, True)) > LEVEL_GAP
        ):
            found.append("caters to one level")
        if found:
            flags[key] = found
    return flags


def _validity(frame: JudgmentFrame, idx: np.ndarray, sources: np.ndarray) -> dict:
    """Share of items every judge calls invalid (not exactly one correct answer) and the
    approximate ceiling: a valid item scores 1, an invalid one 1 / the mean number of answers
    judged correct (no correct answer counting as 4)."""
    marked: dict[int, list[int]] = defaultdict(list)
    source_of: dict[int, str] = {}
    for n, j in enumerate(idx):
        choices = frame.choices[j] or []
        count = len(choices) if (choices or not frame.choice[j]) else 1
        item = int(frame.item_id[j])
        marked[item].append(count)
        source_of[item] = str(sources[n])
    per_source: dict[str, dict] = defaultdict(lambda: {"invalid": [], "score": []})
    for item, counts in marked.items():
        invalid = all(c != 1 for c in counts)
        mean_correct = np.mean([4 if c == 0 else c for c in counts])
        for key in (source_of[item], "all"):
            per_source[key]["invalid"].append(invalid)
            per_source[key]["score"].append(1 / mean_correct if invalid else 1.0)
    return {
        key: {"invalid_share": float(np.mean(v["invalid"])), "ceiling": float(np.mean(v["score"])),
              "n_items": len(v["invalid"])}
        for key, v in sorted(per_source.items())
    }
