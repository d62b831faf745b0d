"""The systems leaderboard of an A/B project (`leaderboard` key of the project report): each
judgment is a vote between the systems of the two answers (`answer_system`), oriented by the
order shown; fitted by `metrics_app.domain.leaderboard` overall, per domain and per dataset.
Automatic metrics, LLM judges and imported verdicts on the same items get a board each
(`judges`), and every LLM or imported judge a board with the humans (`combined`)."""
from __future__ import annotations

import io

import numpy as np

from annotation.domain.answers import AB_TIE_CHOICES
from annotation.domain.csv_safe import SafeWriter
from annotation.domain.item_content import answer_system, answers_identical
from annotation.judgment_selectors import JudgmentFrame
from annotation.models import Item, Project, Stage, Worker
from annotation.selectors import items_in_stage, items_measured_on
from core.vocabulary import AB_CHOICES

from ..domain.leaderboard import (
    LEFT,
    RIGHT,
    TIE,
    LeaderboardError,
    Votes,
    leaderboard,
    position_bias,
    style_features,
)
from ..judge_selectors import current_verdicts
from ..model_selectors import learned_metric_seen_items
from ..models import JudgeVersion, MetricScore

ROUNDS = 200
STYLE_NAMES = ("length", "markdown_headers", "markdown_lists", "markdown_bold")


def _item_table(item_ids: list[int]) -> dict[int, dict]:
    """Per item: the systems of answers A and B, the style differences (A minus B) and whether
    the two answers are one text (`answers_identical`)."""
    table = {}
    rows = Item.objects.filter(pk__in=item_ids).values_list("id", "content", "source", "metadata")
    for pk, content, source, metadata in rows.iterator(chunk_size=2000):
        content = content or {}
        systems = tuple(answer_system(content, side, source=source or "", metadata=metadata)
                        for side in AB_CHOICES)
        texts = [(content.get(f"answer_{s}") or {}).get("text") or "" for s in "ab"]
        features = style_features(*texts)
        table[pk] = {"systems": systems, "style": [features[n] for n in STYLE_NAMES],
                     "identical": answers_identical(content)}
    return table


# Why votes were left out: the two answers are one text (`answers_identical`).
IDENTICAL = "identical_answers"


def _left_out(info: dict | None) -> str | None:
    """Why an item's votes are not a comparison of two systems, or None: its two answers come
    from one system (`same_system`), or are one text (`identical_answers`: the judge could
    only guess, so the pick is noise; not a tie either, which would say the judge found them
    equal). The one rule of every board: the humans', each judge's, the combined ones."""
    if info is None or info["systems"][0] == info["systems"][1]:
        return "same_system"
    if info["identical"]:
        return IDENTICAL
    return None


def identical_note(votes: int, items: int) -> str:
    """The sentence every door shows for the votes `_left_out` drops as identical answers."""
    return (f"{votes} vote{'s' if votes != 1 else ''} on {items} item{'s' if items != 1 else ''}"
            " whose two answers are the same text (after Unicode and whitespace normalization)"
            " left out: the judge could only guess, so the pick says nothing about the systems.")


def frame_votes(frame: JudgmentFrame, mask: np.ndarray) -> tuple[Votes | None, dict]:
    """The votes of the judgments in `mask` and what was left out (why)."""
    idx = np.nonzero(mask & (frame.choice != ""))[0]
    items = _item_table(sorted({int(frame.item_id[j]) for j in idx}))
    names: dict[str, int] = {}
    left, right, outcome, item, worker, style = [], [], [], [], [], []
    skipped = {"same_system": 0, IDENTICAL: 0, "unknown_choice": 0}
    identical_items: set[int] = set()
    one_system: set[str] = set()
    tie_choices = dict.fromkeys(AB_TIE_CHOICES, 0)
    order_recorded = []
    for j in idx:
        info = items.get(int(frame.item_id[j]))
        choice = str(frame.choice[j])
        if (why := _left_out(info)) is not None:
            skipped[why] += 1
            if why == IDENTICAL:
                identical_items.add(int(frame.item_id[j]))
            elif info is not None:
                one_system.add(info["systems"][0])
            continue
        if choice not in AB_CHOICES and choice not in AB_TIE_CHOICES:
            skipped["unknown_choice"] += 1
            continue
        order = frame.presented_order[j] or []
        order_recorded.append(bool(order) and order[0] in AB_CHOICES)
        first = order[0] if order_recorded[-1] else "A"
        a, b = (names.setdefault(s, len(names)) for s in info["systems"])
        flip = first == "B"
        left.append(b if flip else a)
        right.append(a if flip else b)
        if choice in AB_TIE_CHOICES:
            outcome.append(TIE)
            tie_choices[choice] += 1
        else:
            outcome.append(LEFT if choice == first else RIGHT)
        item.append(int(frame.item_id[j]))
        worker.append(int(frame.worker_id[j]))
        style.append([-v for v in info["style"]] if flip else info["style"])
    skipped[IDENTICAL_ITEMS] = frozenset(identical_items)
    skipped[ONE_SYSTEM] = frozenset(one_system)
    skipped[TIE_CHOICES] = tie_choices
    if not left:
        return None, skipped
    votes = Votes(list(names), left, right, outcome, item, worker,
                  np.array(style, dtype=float), list(STYLE_NAMES))
    # Imported judgments rarely say which answer was shown first: the position effect is
    # fitted only when every vote's order is known ("left" otherwise just means answer A).
    skipped["order_recorded"] = all(order_recorded)
    skipped["order_unrecorded"] = order_recorded.count(False)
    skipped[RECORDED] = np.array(order_recorded, dtype=bool)
    return votes, skipped


# The key of `frame_votes`'s info holding which votes recorded the order shown (not reported).
RECORDED = "recorded"
# The items the identical-answer votes were on (their number is said in the board's note).
IDENTICAL_ITEMS = "identical_answer_items"
# The system names of the items whose two answers name one system (said when no vote is left).
ONE_SYSTEM = "one_system_names"
# The tie votes the board counts, by the choice given (tie, both good, both bad): the report's
# `tie_choices`, which read every tie of the frame, those left out of the board too.
TIE_CHOICES = "tie_choices"
INFO_KEYS = ("order_recorded", "order_unrecorded", RECORDED, IDENTICAL_ITEMS, ONE_SYSTEM,
             TIE_CHOICES)


def no_board_reason(info: dict) -> str | None:
    """Why judgments that count gave no vote between two systems, in the words every door
    shows (the dashboard's "No leaderboard: …", `manage.py report`'s "Leaderboard: none (…)",
    the API's `overall.error`); None when there were no judgments to read. An A/B file whose
    answers carry no `system` (every answer then reads as one system, "human" or the item's
    source) had its board vanish from every door without a word."""
    same, identical = info.get("same_system", 0), info.get(IDENTICAL, 0)
    unknown = info.get("unknown_choice", 0)
    total = same + identical + unknown
    if not total:
        return None
    parts = []
    if same:
        names = sorted(info.get(ONE_SYSTEM) or ())
        named = ", ".join(f"“{n}”" for n in names[:3]) + (" …" if len(names) > 3 else "")
        parts.append(f"{same} on items whose two answers name one system"
                     + (f" ({named})" if named else "")
                     + ": give each answer the `system` that wrote it (docs/LEADERBOARD.md, "
                       "“Systems”)")
    if identical:
        parts.append(f"{identical} on items whose two answers are the same text")
    if unknown:
        parts.append(f"{unknown} with a choice that names neither answer nor a tie")
    return (f"none of the {total} vote{'s' if total != 1 else ''} compares two systems: "
            + "; ".join(parts))


def _note_identical(board: dict | None, info: dict) -> dict | None:
    """Add the identical-answer sentence to a fitted board's notes (every door shows them)."""
    if board is not None and "systems" in board and info.get(IDENTICAL):
        board["notes"] = [*board.get("notes", []),
                          identical_note(info[IDENTICAL], len(info[IDENTICAL_ITEMS]))]
    return board


def _board(found: tuple[Votes | None, dict], *, rounds: int, seed: int) -> dict | None:
    votes, info = found
    if votes is None or len(votes.systems) < 2:
        # A domain (or dataset) whose votes compare no two systems says why, as the overall
        # board does (`no_board_reason`): it was `null`, an empty row on the dashboard.
        why = no_board_reason(info)
        return None if why is None else {"error": why}
    try:
        board = leaderboard(votes, rounds=rounds, seed=seed, position=info["order_recorded"])
    except LeaderboardError as exc:
        return {"error": str(exc)}
    _note_identical(board, info)
    missing = info.get("order_unrecorded")
    position = (board.get("robustness") or {}).get("position_bias") or {}
    if missing and "note" in position:
        # Platform judgments record the order shown, imported ones rarely do: "the order shown
        # was not recorded" beside 40 recorded votes of 60 read as a bug of the task page.
        note = (f"the order shown was not recorded for {missing} of {len(votes)} votes "
                "(imported judgments rarely say it): no position effect is fitted")
        recorded = info.get(RECORDED)
        if recorded is not None and recorded.any():
            # The check reads the votes that say which answer was on the left (a crowd stage
            # beside imported expert labels), as that stage's own board does.
            position = board["robustness"]["position_bias"] = position_bias(
                votes.subset(recorded))
            note += f"; position bias is read on the {int(recorded.sum())} votes that recorded it"
        position["note"] = note
    return board


def metric_votes(project: Project, stage: Stage | None = None, *,
                 left_out: dict[str, int] | None = None,
                 identical: dict[str, dict] | None = None) -> dict[str, Votes]:
    """Each automatic metric that scored both answers of the project's A/B items (the latest
    version stored) as a judge: one vote per item for the answer it scores higher, a tie when
    equal. Answer A counts as shown on the left (a metric sees no order). With `stage`, only
    the items released in it, as the humans' board of that stage reads. `left_out`, when
    given, is filled with judge label -> the scored items left out because its version saw
    them (learned metrics only); `identical`, with judge label -> the items left out because
    their two answers are one text (`_left_out`, as for the humans)."""
    # The items the human and judge boards read: the study items (`items_measured_on`: not
    # practice, gold checks or qualification-only, not excluded from the study; scores
    # stored before an item was excluded stay in the table).
    rows = MetricScore.objects.filter(item__project=project, side__in=AB_CHOICES,
                                      value__isnull=False,
                                      item__in=items_measured_on(project).values("pk"))
    if stage is not None:
        rows = rows.filter(item__in=items_in_stage(stage=stage).values("pk"))
    latest: dict[str, tuple[int, str]] = {}
    for metric, version, top in rows.values_list("metric", "version", "id").order_by("id"):
        latest[metric] = (top, version)
    judges = {}
    for metric, (_top, version) in sorted(latest.items()):
        scores: dict[int, dict[str, float]] = {}
        # A learned judge (lerc_ab) votes only on pairs its version did not train on: beside
        # the humans' board, its board on their own preferences would be its memory.
        seen = learned_metric_seen_items(project, metric, version)
        for item_id, side, value in rows.filter(metric=metric, version=version).values_list(
                "item_id", "side", "value"):
            if item_id not in seen:
                scores.setdefault(item_id, {})[side] = value
        if left_out is not None and seen:
            left_out[f"{metric}@{version}"] = len(
                set(rows.filter(metric=metric, version=version, item_id__in=seen)
                    .values_list("item_id", flat=True)))
        paired = {pk: s for pk, s in scores.items() if len(s) == 2}
        items = _item_table(sorted(paired))
        names: dict[str, int] = {}
        left, right, outcome, item, style = [], [], [], [], []
        same_text: set[int] = set()
        for pk, s in paired.items():
            a_system, b_system = items[pk]["systems"]
            if (why := _left_out(items[pk])) is not None:
                if why == IDENTICAL:
                    same_text.add(pk)
                continue
            left.append(names.setdefault(a_system, len(names)))
            right.append(names.setdefault(b_system, len(names)))
            outcome.append(TIE if s["A"] == s["B"] else LEFT if s["A"] > s["B"] else RIGHT)
            item.append(pk)
            style.append(items[pk]["style"])
        if identical is not None:
            identical[f"{metric}@{version}"] = {IDENTICAL: len(same_text),
                                                IDENTICAL_ITEMS: frozenset(same_text)}
        if len(names) >= 2:
            judges[f"{metric}@{version}"] = Votes(
                list(names), left, right, outcome, item, np.zeros(len(left), dtype=np.int64),
                np.array(style, dtype=float), list(STYLE_NAMES))
    return judges


# The worker code of a judge's votes in the combined board (database worker ids start at 1).
JUDGE_WORKER = 0


def verdict_votes(project: Project, stage: Stage | None = None
                  ) -> dict[str, tuple[Votes, dict]]:
    """Each LLM or imported judge with verdicts on the project's A/B items (its latest version
    with verdicts) as a voter: one vote per verdict row, the answer shown first on the left
    (an LLM judge asks each pair in both orders, AB and BA: two votes per item; an imported
    verdict without an order counts as shown AB). Returns label -> (votes, about), `about`
    holding the judge's kind, how many verdicts were unparseable and, when both orders were
    asked, its position consistency (the share of items whose two verdicts name the same
    side). With `stage`, only the items released in it, as the humans' board of that stage
    reads."""
    scope = items_measured_on(project)
    if stage is not None:
        scope = scope.filter(pk__in=items_in_stage(stage=stage).values("pk"))
    versions: dict[str, JudgeVersion] = {}
    for version in (JudgeVersion.objects.filter(verdicts__item__in=scope.values("pk"))
                    .select_related("judge").distinct().order_by("-id")):
        versions.setdefault(version.judge.name, version)
    out = {}
    for _name, version in sorted(versions.items()):
        # Per item and order, the newest verdict on what the item holds now (an item whose
        # content changed was asked again): the judges page's read, `current_verdicts`.
        rows = [(item_id, order, verdict, parsed) for item_id, order, verdict, _score, _p,
                parsed, _reasoning in current_verdicts(project, version, items=scope)[0]]
        items = _item_table(sorted({r[0] for r in rows}))
        names: dict[str, int] = {}
        left, right, outcome, item, style = [], [], [], [], []
        sides: dict[int, dict[str, str]] = {}
        seen: set[tuple[int, str]] = set()
        unparseable = same_system = identical = 0
        same_text: set[int] = set()
        order_recorded = True
        for item_id, order, verdict, parsed in rows:
            if (item_id, order or "AB") in seen:
                continue  # an older verdict in the same order (on earlier content)
            seen.add((item_id, order or "AB"))
            if not parsed or verdict not in (*AB_CHOICES, *AB_TIE_CHOICES):
                unparseable += 1
                continue
            why = _left_out(items.get(item_id))
            if why == IDENTICAL:
                identical += 1
                same_text.add(item_id)
            elif why is not None:
                same_system += 1
            if why is not None:
                continue
            info = items[item_id]
            order_recorded &= order in ("AB", "BA")
            order = order or "AB"
            sides.setdefault(item_id, {})[order] = verdict
            first = order[0]
            a, b = (names.setdefault(s, len(names)) for s in info["systems"])
            flip = first == "B"
            left.append(b if flip else a)
            right.append(a if flip else b)
            outcome.append(TIE if verdict in AB_TIE_CHOICES else
                           LEFT if verdict == first else RIGHT)
            item.append(item_id)
            style.append([-v for v in info["style"]] if flip else info["style"])
        if len(names) < 2:
            continue
        pairs = [s for s in sides.values() if len(s) == 2]
        consistent = sum(s["AB"] == s["BA"] for s in pairs)
        about = {"kind": version.judge.kind, "label": version.label,
                 "n_verdicts": len(seen), "unparseable": unparseable,
                 "same_system": same_system, IDENTICAL: identical,
                 IDENTICAL_ITEMS: frozenset(same_text), "order_recorded": order_recorded,
                 "position_consistency": {
                     "items": len(pairs), "consistent": consistent,
                     "rate": consistent / len(pairs) if pairs else None}}
        out[version.label] = (Votes(list(names), left, right, outcome, item,
                                    np.full(len(left), JUDGE_WORKER, dtype=np.int64),
                                    np.array(style, dtype=float), list(STYLE_NAMES)), about)
    return out


def combine_votes(human: Votes, judge: Votes) -> Votes:
    """The humans' votes and a judge's as one more voter (worker code `JUDGE_WORKER`), over
    the union of their systems."""
    systems = list(human.systems) + [s for s in judge.systems if s not in human.systems]
    index = np.array([systems.index(s) for s in judge.systems], dtype=np.int64)
    style = None
    if human.style is not None and judge.style is not None:
        style = np.concatenate([human.style, judge.style])
    return Votes(systems, np.concatenate([human.left, index[judge.left]]),
                 np.concatenate([human.right, index[judge.right]]),
                 np.concatenate([human.outcome, judge.outcome]),
                 np.concatenate([human.item, judge.item]),
                 np.concatenate([human.worker, judge.worker]), style,
                 list(human.style_names))


def _on_items(board: dict, votes: Votes, items: np.ndarray, *, rounds: int, seed: int,
              position: bool) -> dict | None:
    """A board on `items` only: `board` itself when its votes are on no other item, else a
    refit of `votes` on those items (a judge on the humans' items, the humans on a judge's)."""
    keep = np.isin(votes.item, items)
    if keep.all():
        return board
    if not keep.any():
        return None
    try:
        return leaderboard(votes.subset(keep), rounds=rounds, seed=seed, position=position,
                           style=False, robustness=False)
    except LeaderboardError:
        return None


def _side_by_side(human: dict | None, judges: dict[str, dict],
                  humans_beside: dict[str, dict | None]) -> list[dict]:
    """Per system (the human order): its rank and strength by the humans and by each judge
    (`judges`: each judge's board on the humans' items). A judge that read only some of the
    humans' items (`humans_beside`: the humans refitted on those) carries the humans' rank and
    strength on its items beside its own (`human_rank`, `human_strength`)."""
    if not human or "systems" not in human:
        return []

    def found(board, system):
        return next((r for r in (board or {}).get("systems", []) if r["system"] == system),
                    None)

    rows = []
    for row in human["systems"]:
        entry = {"system": row["system"], "human": {"rank": row["rank"],
                                                    "strength": row["strength"]}}
        for name, board in judges.items():
            mine = found(board, row["system"])
            entry[name] = ({"rank": mine["rank"], "strength": mine["strength"]}
                           if mine else None)
            if mine and name in humans_beside:
                theirs = found(humans_beside[name], row["system"])
                entry[name].update(human_rank=theirs["rank"] if theirs else None,
                                   human_strength=theirs["strength"] if theirs else None)
        rows.append(entry)
    return rows


def board_mask(frame: JudgmentFrame, project: Project | None = None) -> np.ndarray:
    """The judgments a board of systems reads, THE rule of the leaderboard and of adaptive
    pairing (which fits the board to choose the next pairs): the data (`data_mask`) on the
    study items (`items_measured_on`, with `project`): a gold check's votes test the workers
    (its pair was chosen for its known answer), and the judge boards beside are measured
    against these votes. Pairing read the gold checks' votes too: a pair the board calls open
    looked settled there, and its "earlier votes" were not the board's."""
    mask = frame.data_mask() if len(frame) else np.zeros(0, dtype=bool)
    if project is not None and len(frame):
        mask &= np.isin(frame.item_id, list(items_measured_on(project).values_list(
            "id", flat=True)))
    return mask


def preference_mask(frame: JudgmentFrame, project: Project | None = None) -> np.ndarray:
    """The judgments whose pick compares two answers, for every door that counts A/B
    preferences besides the boards (the long-form A/B table's "prefers the model" shares):
    the board's judgments (`board_mask`: no gold check's) without the votes on items whose
    two answers are one text (`_left_out`'s `identical_answers`: the pick was a guess)."""
    mask = board_mask(frame, project)
    if not len(frame):
        return mask
    ids = np.unique(frame.item_id[mask])
    same = [pk for pk, content in Item.objects.filter(pk__in=ids.tolist()).values_list(
        "id", "content").iterator(chunk_size=2000) if answers_identical(content or {})]
    return mask & ~np.isin(frame.item_id, same)


def _skipped(info: dict) -> dict:
    """The report's `skipped`: the votes left out by reason, and the identical-answer items."""
    return {**{k: v for k, v in info.items() if k not in INFO_KEYS},
            IDENTICAL_ITEMS: len(info[IDENTICAL_ITEMS])}


def leaderboard_report(frame: JudgmentFrame, *, project: Project | None = None,
                       stage: Stage | None = None, rounds: int = ROUNDS, seed: int = 0) -> dict:
    """Human judges' leaderboard overall, per domain and per dataset (when the project has
    more than one), with what was left out; with `project`, each automatic metric that scored
    both answers as another judge (`judges`, overall) and the rankings side by side. `stage`:
    the frame is that stage's judgments, and the judges read that stage's items too."""
    mask = board_mask(frame, project)
    found = frame_votes(frame, mask)
    if found[0] is None:
        why = no_board_reason(found[1])
        return {} if why is None else {
            "judge": "human", "overall": {"error": why},
            "skipped": _skipped(found[1])}
    report = {"judge": "human", "overall": _board(found, rounds=rounds, seed=seed),
              "skipped": _skipped(found[1]),
              "order_recorded": found[1]["order_recorded"],
              TIE_CHOICES: found[1][TIE_CHOICES]}
    for field in ("domain", "dataset"):
        values = frame.item_column(field).astype(str)
        groups = sorted(set(values[mask & (frame.choice != "")]))
        if len(groups) < 2:
            continue
        report[f"by_{field}"] = {
            group or "(none)": _board(frame_votes(frame, mask & (values == group)),
                                      rounds=rounds, seed=seed)
            for group in groups}
    if project is not None:
        judges = {}
        # The side by side compares the rankings on the same items: a judge that scored items
        # no human judged (yet) is refitted on the humans' items for it, and one that read
        # only some of the humans' items (an LLM judge run on a sample, a learned judge
        # beside the items it trained on) stands beside the humans refitted on its items.
        human_items = np.unique(found[0].item)
        beside: dict[str, dict | None] = {}
        humans_beside: dict[str, dict | None] = {}
        judge_items: dict[str, int] = {}

        def side_by_side_add(name: str, votes: Votes, *, position: bool) -> None:
            beside[name] = _on_items(judges[name], votes, human_items, rounds=rounds,
                                     seed=seed, position=position)
            shared = np.intersect1d(human_items, votes.item)
            judge_items[name] = len(shared)
            if 0 < len(shared) < len(human_items):
                humans_beside[name] = _on_items(report["overall"], found[0], shared,
                                                rounds=rounds, seed=seed,
                                                position=found[1]["order_recorded"])

        left_out: dict[str, int] = {}
        identical: dict[str, dict] = {}
        for name, votes in metric_votes(project, stage, left_out=left_out,
                                        identical=identical).items():
            try:
                judges[name] = _note_identical(leaderboard(
                    votes, rounds=rounds, seed=seed, position=False, robustness=False),
                    identical[name])
                side_by_side_add(name, votes, position=False)
            except LeaderboardError as exc:
                judges[name] = {"error": str(exc)}
            judges[name]["judge"] = {"kind": "metric", "label": name,
                                     "left_out_seen": left_out.get(name, 0),
                                     IDENTICAL: identical[name][IDENTICAL]}
        combined = {}
        for name, (votes, about) in verdict_votes(project, stage).items():
            try:
                judges[name] = _note_identical(leaderboard(
                    votes, rounds=rounds, seed=seed, position=about["order_recorded"],
                    robustness=False), about)
                side_by_side_add(name, votes, position=about["order_recorded"])
            except LeaderboardError as exc:
                judges[name] = {"error": str(exc)}
            judges[name]["judge"] = {k: v for k, v in about.items() if k != IDENTICAL_ITEMS}
            # The judge as one more voter beside the humans; the position effect is fitted
            # only when the order shown is known for the humans' votes and the judge's.
            both = (combine_votes(found[0], votes), {
                "order_recorded": bool(found[1]["order_recorded"] and about["order_recorded"]),
                IDENTICAL: found[1][IDENTICAL] + about[IDENTICAL],
                IDENTICAL_ITEMS: found[1][IDENTICAL_ITEMS] | about[IDENTICAL_ITEMS]})
            board = _board(both, rounds=rounds, seed=seed)
            if board is not None:
                board["voters"] = f"humans + {name} (one extra voter, worker 0)"
                combined[name] = board
        if judges:
            report["judges"] = judges
            report["side_by_side"] = _side_by_side(
                report["overall"], {name: beside.get(name) for name in judges},
                humans_beside)
            report["side_by_side_items"] = len(human_items)
            report["side_by_side_judge_items"] = judge_items
        if combined:
            report["combined"] = combined
    _label_workers(report)
    return report


def _label_workers(report: dict) -> None:
    """Add each worker's external id beside the database id in the robustness lists."""
    rows = []
    for _name, board in leaderboard_boards(report, judges=True):
        robustness = board.get("robustness") or {}
        rows += (robustness.get("flagged_workers") or {}).get("workers", [])
        rows += (robustness.get("position_bias") or {}).get("workers", [])
    labels = dict(Worker.objects.filter(pk__in={r["worker"] for r in rows}).values_list(
        "id", "external_id"))
    for row in rows:
        row["external_id"] = labels.get(row["worker"], "")
    for name, board in (report.get("combined") or {}).items():
        robustness = board.get("robustness") or {}
        for row in ((robustness.get("flagged_workers") or {}).get("workers", [])
                    + (robustness.get("position_bias") or {}).get("workers", [])):
            if row["worker"] == JUDGE_WORKER:
                row["external_id"] = f"judge {name}"


# `component`: the group of systems compared with each other, even through others; ranks,
# rank intervals and strengths compare only within one (docs/LEADERBOARD.md).
CSV_COLUMNS = ("category", "component", "rank", "system", "strength", "score", "ci_item_low",
               "ci_item_high", "ci_worker_low", "ci_worker_high", "rank_item_low",
               "rank_item_high", "rank_worker_low", "rank_worker_high", "n_votes", "wins",
               "losses", "ties", "style_controlled_strength", "style_controlled_ci_low",
               "style_controlled_ci_high", "rank_ci_item", "rank_ci_worker")


def leaderboard_boards(report: dict, *, judges: bool = False) -> list[tuple[str, dict]]:
    """(category, board) of a `leaderboard` report: overall, then domain:…, dataset:…; with
    `judges`, then judge:NAME (a judge alone) and humans+judge:NAME (the combined boards)."""
    boards = [("overall", report.get("overall"))]
    for field in ("domain", "dataset"):
        boards += [(f"{field}:{name}", board)
                   for name, board in (report.get(f"by_{field}") or {}).items()]
    if judges:
        boards += [(f"judge:{name}", board) for name, board in
                   (report.get("judges") or {}).items()]
        boards += [(f"humans+judge:{name}", board) for name, board in
                   (report.get("combined") or {}).items()]
    return [(name, board) for name, board in boards if board and "systems" in board]


def leaderboard_csv(report: dict) -> str:
    """One row per system and category. System names come from imported content: written
    through `SafeWriter`, so a name a spreadsheet would run as a formula is shown as text."""
    out = io.StringIO()
    writer = SafeWriter(out)
    writer.writerow(CSV_COLUMNS)
    for category, board in leaderboard_boards(report, judges=True):
        controlled = {row["system"]: row
                      for row in (board.get("style_control") or {}).get("systems", [])}
        for row in board["systems"]:
            styled = controlled.get(row["system"])
            writer.writerow([
                category, row["component"], "" if row["rank"] is None else row["rank"],
                row["system"], _num(row["strength"]), _num(row["score"]),
                *_pair(row["ci_item"], _num), *_pair(row["ci_worker"], _num),
                *_pair(row["rank_interval_item"], str), *_pair(row["rank_interval_worker"], str),
                row["n_votes"], row["wins"], row["losses"], row["ties"],
                _num(styled["strength"]) if styled else "",
                *(map(_num, styled["ci"]) if styled else ("", "")),
                *("" if row.get(f"rank_ci_{scheme}") is None else row[f"rank_ci_{scheme}"]
                  for scheme in ("item", "worker")),
            ])
    return out.getvalue()


def _pair(values, form) -> tuple[str, str]:
    return ("", "") if values is None else (form(values[0]), form(values[1]))


def _num(value) -> float | str:
    # A number, not text: a negative strength stays -0.1234 (SafeWriter escapes only text).
    return "" if value is None else round(float(value), 4)
