"""Validation of one annotator answer and its mapping from the order shown to item order.

Pure functions (no database). The task page never sends role letters: a multiple-choice page
that posted "A" would tell anyone reading it which answer is correct (role A is always the
correct one in STARC). The page sends the *shown* label instead (A/B for the two long-form
answers, a–d for the four choices) and `presented_order` — stored per assignment item — maps
it back: `presented_order[i]` is the item-order letter shown at position i.
"""
from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from core.vocabulary import AB_CHOICES, MC_ROLES, TaskKind

# C0 controls and DEL, except tab, line feed and carriage return, which pasted text carries.
from .control_characters import CONTROL_CHARACTER, without_invisible
from .numbers import ascii_whole_number, row_id_of

AB_SHOWN = ("A", "B")
# A/B answers that prefer neither side, offered when a stage enables `ab_ties`; stored as the
# judgment's choice and modelled as ties by the leaderboard.
AB_TIE_CHOICES = ("tie", "both_good", "both_bad")
MC_SHOWN = ("a", "b", "c", "d")
VALIDITY_CHOICES = ("one", "several", "none")
MAX_JUSTIFICATION_LENGTH = 10_000
MAX_TIME_SPENT_MS = 24 * 3600 * 1000
# The browser's start time is kept only inside these bounds: a day inside the calendar's ends
# (years 1 and 9999), so that it converts to UTC for storage and later to any time zone
# (offsets stay within a day of UTC) without overflowing.
CLIENT_TIME_RANGE = (datetime.min.replace(tzinfo=UTC) + timedelta(days=1),
                     datetime.max.replace(tzinfo=UTC) - timedelta(days=1))


class AnswerError(ValueError):
    """An answer that cannot be stored; `messages` are shown next to the item."""

    def __init__(self, messages: list[str]):
        self.messages = messages
        super().__init__("; ".join(messages))


@dataclass
class AnswerRules:
    """The project settings an answer is checked against."""

    kind: str
    mode: str = ""
    justification_min_length: int = 0
    aspects: list[str] = field(default_factory=list)
    aspect_preferences: list[str] = field(default_factory=list)
    scale_size: int = 5
    ties: bool = False  # A/B: the stage offers AB_TIE_CHOICES


# STARC modes whose page confirms each item on its own (the feedback, the paragraph or the
# pilot's next page follows the answer): `confirms_per_item`.
CONFIRM_MODES = ("qa", "guessing", "pilot")
SUBMITS_TOGETHER_MESSAGE = (
    "This task submits its answers together: answer every item and press Submit. Only STARC "
    "QA, guessing and pilot pages confirm one item at a time.")


def confirms_per_item(kind: str, mode: str) -> bool:
    """Whether a page of this task kind and STARC mode confirms each item on its own before
    the rest of the page is submitted: multiple choice in QA, guessing or pilot mode. Likert,
    A/B and STARC validity pages submit every answer together, so the whole-page checks of the
    submit (every item answered, the page's timing) hold for each judgment. The one rule the
    page config (whether the page confirms) and the confirm door (what it accepts) read."""
    return kind == TaskKind.MC and mode in CONFIRM_MODES


def _shown_to_role(shown: Any, *, labels: tuple[str, ...], presented_order: list[str],
                   what: str) -> str:
    if not isinstance(shown, str) or shown not in labels:
        raise AnswerError([f"Choose {what}."])
    order = presented_order or [label.upper() for label in labels]
    return order[labels.index(shown)]


def shown_roles(kind: str) -> tuple[str, ...]:
    """The answer roles an item of this task kind shows, in item order (none for Likert): what
    each assignment item's `presented_order` is a shuffle of."""
    return {TaskKind.AB: AB_CHOICES, TaskKind.MC: MC_ROLES}.get(kind, ())


def presented_order_error(kind: str, order: Any) -> str | None:
    """Why `order` cannot be the order an item's answers were shown in, or None: empty (not
    recorded), or every role of the kind once (`shown_roles`; a Likert item shows none). Every
    reader maps the choice through it (the leaderboard's left and right, position bias,
    straight-lining, the letter the worker saw), so ["B", "B"] or ["A"] would make each of them
    read something else."""
    if not isinstance(order, list):
        return "must be a list"
    if not order:
        return None
    roles = shown_roles(kind)
    if not roles:
        return (f"must be empty: a {kind} item shows no answers in an order, got "
                f"{order!r}"[:300])
    if (len(order) != len(roles) or not all(isinstance(role, str) for role in order)
            or set(order) != set(roles)):
        return (f"must list the answers in the order shown, each of {', '.join(roles)} once "
                f"(e.g. {list(reversed(roles))!r}), or be empty when the order was not "
                f"recorded; got {order!r}"[:300])
    return None


ASPECTS_NOT_NAMES = "Aspects must be a list of names."


def aspect_names_error(aspects: Any) -> str | None:
    """Why `aspects` is not a list of aspect names (non-blank strings), or None: the shape the
    task page stores and every report counts (an object in it cannot be counted)."""
    if not isinstance(aspects, list) or not all(
            isinstance(name, str) and name.strip() for name in aspects):
        return ASPECTS_NOT_NAMES
    return None


def ab_label_shown(choice: Any, presented_order: list[str] | None) -> str:
    """The letter under which a worker saw the A/B answer they chose ("" when the order shown
    was not recorded or the choice is not a side): the file's answer A is shown as B to half of
    the workers, and a justification says "B is better" about it."""
    if presented_order and choice in presented_order:
        return AB_SHOWN[presented_order.index(choice)]
    return ""


def position_shown(choice: Any, presented_order: list[str] | None) -> Any:
    """Where on the screen the chosen option was (`pos0` the first shown, ...), for A/B and
    multiple-choice answers stored with the order shown; the choice itself when the order
    shown was not recorded (imported judgments). What straight-lining is measured on: it is
    pressing the same key. With the order shuffled per assignment, that scatters over the
    stored choices, while a careful judge repeats one stored choice on every item (an A/B
    judge whose better answers all sat on one side of the file; a STARC reader who gets every
    item right chose role A every time while clicking all over the page)."""
    if presented_order and choice in presented_order:
        return f"pos{presented_order.index(choice)}"
    return choice


def item_id_of(value: Any) -> int | None:
    """The item id a page sent: an integer, or a string of ASCII digits, that an id column can
    hold; None for anything else (a float such as 68.5 is not silently read as item 68, a bool
    is not item 1, "1" * 5000 is not read at all). The rule for every row id: `row_id_of`."""
    return row_id_of(value)


def _client_timing(answer: dict) -> dict[str, Any]:
    timing: dict[str, Any] = {}
    spent = answer.get("time_spent_ms")
    if isinstance(spent, (int, float)) and not isinstance(spent, bool) and spent >= 0:
        timing["time_spent_ms"] = int(min(spent, MAX_TIME_SPENT_MS))
    started = answer.get("client_started_at")
    if isinstance(started, str) and len(started) <= 40:
        # Client metadata: a time that cannot be read, or that lies at the calendar's ends
        # ("0001-01-01T00:00:00+05:00" is before year 1 in UTC), is left out like any other
        # unreadable one; the answer itself is still good.
        try:
            parsed = datetime.fromisoformat(started.replace("Z", "+00:00"))
            parsed = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
        except (ValueError, OverflowError):
            parsed = None
        if parsed is not None and CLIENT_TIME_RANGE[0] <= parsed <= CLIENT_TIME_RANGE[1]:
            timing["client_started_at"] = parsed
    return timing


def _clean_likert(answer: dict, rules: AnswerRules) -> dict[str, Any]:
    score = answer.get("score")
    if isinstance(score, str):
        # ASCII digits only, and not too many of them for int() (`ascii_whole_number`).
        score = ascii_whole_number(score)
    if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= rules.scale_size:
        raise AnswerError([f"Pick a score from 1 to {rules.scale_size}."])
    return {"score": float(score)}


# A character repeated this many times in a row or more is padding ("aaaa…", "……", spaces
# between two words): the run counts as one character. Words almost never repeat a letter
# three times; a number's zeros do ("1000" counts 2), a small undercount prose can afford.
PADDING_RUN = 3
PADDING_NOTE = f"; a character repeated {PADDING_RUN} or more times in a row counts once"


# Characters that show as blank space: Unicode's white space (the characters both Python's
# `str.isspace` and JavaScript's `\s` read as space, and NEL) and the glyphs that draw nothing
# (braille pattern blank, the Hangul fillers). A reader sees one gap however they take turns
# ("A" + " \u00a0" * 15), so for counting they are one character, a space. A regular
# expression class both Python and the page's script (`justification_blank` in its config)
# read alike.
BLANK_CLASS = ("[\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f"
               "\\u3000\\u2800\\u3164\\u115f\\u1160\\uffa0]")
BLANK = re.compile(BLANK_CLASS)


def _visible_runs(text: str) -> list[int]:
    """Lengths of the runs of one character in the text as the reader sees it: invisible
    characters that draw nothing (`without_invisible`) left out, every blank character (`BLANK_CLASS`) read as a
    space, trimmed."""
    visible = BLANK.sub(" ", without_invisible(text)).strip(" ")
    return [sum(1 for _ in run) for _, run in itertools.groupby(visible)]


# Characters that take no room on the screen: zero-width spaces and joiners, the byte order
# mark, direction marks (Unicode category Cf). Twenty of them look like an empty box.
def justification_length(text: str) -> int:
    """How many characters a justification has, as the page counts them (static/annotation/
    task.js `written`): code points, so an emoji is one character (not the two UTF-16 units a
    browser's `length` gives), leaving out invisible format characters (category Cf), and a
    run of `PADDING_RUN` or more of one character counted once (80 "b"s reached an
    80-character minimum and were paid as a justification)."""
    return sum(n if n < PADDING_RUN else 1 for n in _visible_runs(text))


def justification_padded(text: str) -> bool:
    """Whether the count left out padding (a run of `PADDING_RUN` or more of one character)."""
    return any(n >= PADDING_RUN for n in _visible_runs(text))


# A justification at least this long that is found whole inside one of the answers was pasted.
COPIED_MIN_LENGTH = 20


def _folded(text: str) -> str:
    return " ".join(without_invisible(text).casefold().split())


def copied_from(justification: str, answer_texts: tuple[str, ...] | list[str]) -> bool:
    """Whether the justification is nothing but (a part of) one of the answers, pasted: found
    whole inside an answer's text, ignoring case, spacing (blank glyphs too) and invisible
    characters."""
    # Blank glyphs read as the spaces they look like (`BLANK`): words parted by braille blanks
    # are the answer's words.
    folded = _folded(BLANK.sub(" ", justification))
    if len(folded) < COPIED_MIN_LENGTH:
        return False
    return any(folded in _folded(BLANK.sub(" ", text)) for text in answer_texts
               if isinstance(text, str))


# The same justification pasted on item after item (a plausible sentence, long enough, found in
# neither answer, so the page takes it) is not a judgment of each item. Review holds work whose
# most repeated justification covers this share of its items or more, and the dashboard flags a
# worker the same way. 0.8: nearly all identical (4 of 5, 8 of 10) — a careful judge may well
# reuse a phrase ("B is more complete and answers the question directly") on two or three of
# ten items, and a spammer who varies one or two items to dodge "every item identical" is still
# caught; the stage setting `review.max_same_justification_share` moves it.
SAME_JUSTIFICATION_SHARE = 0.8

# Mean seconds per item below this looks like clicking through: the review rule's default
# (`review.min_seconds_per_item`) and the workers table's "too fast" flag.
MIN_SECONDS_PER_ITEM = 2.0

# The names of the workers table's flags that the review rules share (one name per reason,
# whichever of them raises it: the dashboard's own looser "look" thresholds or a review rule
# that acts on the worker's work, `annotation.services.review.workers_review_rule_flags`).
FLAG_STRAIGHT_LINING = "straight-lining"
FLAG_SAME_JUSTIFICATION = "same justification"
FLAG_LOW_GOLD_ACCURACY = "low gold accuracy"
FLAG_TOO_FAST = "too fast"
FLAG_FAILED_PRACTICE = "failed practice"


def justification_key(text: Any) -> str:
    """A justification as compared for repeats: case folded, invisible characters, punctuation
    and symbols dropped, whitespace collapsed ("B is better!" and "b is  better" are one);
    "" when nothing is left."""
    if not isinstance(text, str):
        return ""
    # Blank glyphs are spaces here too (`BLANK`: a Hangul filler is a letter by its category),
    # as the count and the copy check read them.
    kept = "".join(" " if unicodedata.category(c)[0] in "PS" else c for c in BLANK.sub(" ", text))
    return _folded(kept)


def same_justification_count(justifications: Iterable[Any]) -> int:
    """How many of the justifications are the most repeated one (`justification_key`); empty
    ones never count, and a justification written once is not repeated (0)."""
    counts = Counter(key for key in map(justification_key, justifications) if key)
    most = counts.most_common(1)[0][1] if counts else 0
    return most if most >= 2 else 0


# The long-form QA files (lfqa_eval, from ELI5) mark line breaks in answers with a literal
# "<newline>" token; annotators read it verbatim ("…five year old:<newline>https://…"). The
# page shows a line break; the stored content (and every export) keeps the file's text.
NEWLINE_TOKEN = re.compile(r"\s*<newline>\s*")


def answer_display_text(text: str) -> str:
    """An A/B answer's text as the task page shows it (`NEWLINE_TOKEN` as a line break)."""
    return NEWLINE_TOKEN.sub("\n", text)


def ab_answer_texts(content: Any) -> tuple[str, ...]:
    """The texts of an A/B item's two answers as the page shows them (`answer_display_text`):
    what a justification must not merely copy. A span pasted from the page carries the line
    break the page shows, never the stored "<newline>" token."""
    if not isinstance(content, dict):
        return ()
    return tuple(answer_display_text(answer.get("text") or "") for answer in
                 (content.get("answer_a"), content.get("answer_b"))
                 if isinstance(answer, dict) and isinstance(answer.get("text") or "", str))


def _clean_ab(answer: dict, rules: AnswerRules, presented_order: list[str],
              answer_texts: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    errors: list[str] = []
    fields: dict[str, Any] = {}
    if rules.ties and answer.get("shown_choice") in AB_TIE_CHOICES:
        # A tie names no side: nothing to map through the order shown.
        fields["choice"] = answer["shown_choice"]
    else:
        try:
            fields["choice"] = _shown_to_role(
                answer.get("shown_choice"), labels=AB_SHOWN, presented_order=presented_order,
                what="the better answer (A or B)" + (", both good, both bad or a tie"
                                                     if rules.ties else ""),
            )
        except AnswerError as exc:
            errors += exc.messages
    difficult = answer.get("difficult")
    if not isinstance(difficult, bool):
        errors.append("Say whether the choice was difficult (yes or no).")
    fields["difficult"] = difficult
    justification = answer.get("justification", "")
    if not isinstance(justification, str):
        justification = ""
    justification = justification.strip()
    control = CONTROL_CHARACTER.search(justification)
    written = justification_length(justification)
    if control:
        # PostgreSQL text cannot hold NUL, and no keyboard types the others.
        errors.append(f"The justification contains a control character "
                      f"(U+{ord(control.group()):04X}); remove it.")
    elif written < rules.justification_min_length:
        errors.append(
            f"Write a justification of at least {rules.justification_min_length} characters "
            f"({written} so far{PADDING_NOTE if justification_padded(justification) else ''})."
        )
    elif len(justification) > MAX_JUSTIFICATION_LENGTH:
        errors.append(f"Keep the justification under {MAX_JUSTIFICATION_LENGTH} characters.")
    elif copied_from(justification, answer_texts):
        errors.append("The justification is a copy of one of the answers: say in your own "
                      "words why you chose it.")
    fields["justification"] = justification
    aspects = answer.get("aspects", [])
    if (wrong := aspect_names_error(aspects)) is not None:
        errors.append(wrong)
    elif set(aspects) - set(rules.aspects):
        errors.append("Unknown aspect: " + ", ".join(sorted(set(aspects) - set(rules.aspects))))
    else:
        # Stored in the project's order so equal selections compare equal.
        fields["aspects"] = [a for a in rules.aspects if a in aspects]
    prefs = answer.get("aspect_preferences", {}) or {}
    cleaned_prefs: dict[str, str] = {}
    if not isinstance(prefs, dict):
        errors.append("Aspect preferences must be an object.")
    else:
        for name, shown in prefs.items():
            if name not in rules.aspect_preferences:
                errors.append(f"Unknown aspect preference: {name}.")
            elif shown == "same":
                cleaned_prefs[name] = "same"
            elif shown in ("", None):
                continue
            else:
                try:
                    cleaned_prefs[name] = _shown_to_role(
                        shown, labels=AB_SHOWN, presented_order=presented_order,
                        what=f"A, B or 'same' for {name}",
                    )
                except AnswerError as exc:
                    errors += exc.messages
    if errors:
        raise AnswerError(errors)
    fields["extra"] = {"aspect_preferences": cleaned_prefs} if cleaned_prefs else {}
    return fields


def _clean_mc(answer: dict, rules: AnswerRules, presented_order: list[str],
              *, locked_guess: str | None = None) -> dict[str, Any]:
    if rules.mode == "validity":
        validity = answer.get("validity")
        if validity not in VALIDITY_CHOICES:
            raise AnswerError(
                ["Say whether the question has one correct answer, more than one, or none."]
            )
        shown = answer.get("shown_choices", [])
        if validity == "one" and not shown and answer.get("shown_choice"):
            shown = [answer["shown_choice"]]
        # Labels are checked before they are counted: set() of a list or an object is a
        # TypeError.
        if not isinstance(shown, list) or not all(isinstance(s, str) for s in shown):
            raise AnswerError(["The correct answers must be a list of the labels shown "
                               "(a, b, c or d)."])
        if len(set(shown)) != len(shown):
            raise AnswerError(["Mark each correct answer once."])
        roles = [
            _shown_to_role(s, labels=MC_SHOWN, presented_order=presented_order, what="an answer")
            for s in shown
        ]
        if validity == "one" and len(roles) != 1:
            raise AnswerError(["Pick the one correct answer."])
        if validity == "several" and len(roles) < 2:
            raise AnswerError(["Mark all the correct answers (at least two)."])
        if validity == "none":
            roles = []
        return {
            "choice": roles[0] if validity == "one" else "",
            "choices": sorted(roles),
            "extra": {"validity": validity},
        }
    fields: dict[str, Any] = {
        "choice": _shown_to_role(
            answer.get("shown_choice"), labels=MC_SHOWN, presented_order=presented_order,
            what="an answer (a, b, c or d)",
        ),
        "extra": {},
    }
    if rules.mode == "pilot":
        # The guess is the one locked on page 1, before the paragraph was served
        # (`clean_guess`); an answer naming a guess of its own would skip the reading page.
        if locked_guess is None:
            raise AnswerError(["Confirm your guess first (page 1 of 3): the paragraph comes "
                               "after it, then your answer."])
        fields["extra"]["guess_choice"] = locked_guess
    return fields


def clean_answer(*, rules: AnswerRules, answer: Any, presented_order: list[str],
                 locked_guess: str | None = None,
                 answer_texts: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """Judgment fields for one answer (item order), or AnswerError with readable messages.
    `answer_texts`: A/B, the two answers' texts (a justification copied from one is refused)."""
    if not isinstance(answer, dict):
        raise AnswerError(["This item has no answer."])
    if rules.kind == TaskKind.LIKERT:
        fields = _clean_likert(answer, rules)
    elif rules.kind == TaskKind.AB:
        fields = _clean_ab(answer, rules, presented_order, answer_texts)
    elif rules.kind == TaskKind.MC:
        fields = _clean_mc(answer, rules, presented_order, locked_guess=locked_guess)
    else:
        raise AnswerError([f"Unknown task kind {rules.kind!r}."])
    fields.update(_client_timing(answer))
    return fields


def client_time_spent_ms(answer: Any) -> int | None:
    """The page's own time on an answer (`time_spent_ms`, bounded as for a judgment), None
    when it sent none that can be read."""
    return _client_timing(answer).get("time_spent_ms") if isinstance(answer, dict) else None


def clean_guess(*, answer: Any, presented_order: list[str]) -> str:
    """Pilot page 1: the guess before reading, as a role letter."""
    if not isinstance(answer, dict):
        raise AnswerError(["Choose your best guess (a, b, c or d)."])
    return _shown_to_role(
        answer.get("shown_guess", answer.get("shown_choice")), labels=MC_SHOWN,
        presented_order=presented_order, what="your best guess (a, b, c or d)",
    )


def answer_matches_gold(kind: str, gold: dict | None, *, score: float | None = None,
                        choice: str = "", tolerance: float = 0.0) -> bool | None:
    """The one definition of "right" against an item's gold answer, used by qualification
    grading, auto-review, the assignment review page and the dashboard's gold accuracy:
    Likert — the score is within `tolerance` of the gold score; A/B and multiple choice — the
    choice equals the gold choice. None when the item has no gold answer of that kind; an
    unanswered item (no score, no choice) is wrong."""
    if not gold:
        return None
    if kind == TaskKind.LIKERT:
        if gold.get("score") is None:
            return None
        if score is None or score != score:  # None or NaN
            return False
        return abs(float(score) - float(gold["score"])) <= tolerance + 1e-9
    if not gold.get("choice"):
        return None
    return bool(choice) and choice == gold["choice"]
