"""Validation of an item's kind-specific content and gold answer.

Pure functions (no database) shared by the importers, the REST API and the demo data, so an
item is checked the same way wherever it enters.
"""
from __future__ import annotations

import hashlib
import unicodedata
from typing import Any

from core.vocabulary import AB_CHOICES, MC_ROLES, TaskKind

from .control_characters import (
    control_character_message,
    find_control_character,
    without_invisible,
)
from .json_values import NON_FINITE_MESSAGE, find_non_finite

ANSWER_KINDS = ("human", "model")
AB_SETTINGS = ("HH", "HM")
MAX_SYSTEM_LENGTH = 100
# The systems of long-form QA answers that name none (Xu et al. 2023: H/M pairs compare the
# model with a highly-upvoted human answer, H/H pairs a highly-upvoted one with a lower-voted).
HUMAN_HIGHER_VOTED = "human-higher-voted"
HUMAN_LOWER_VOTED = "human-lower-voted"
TEXT_LEVELS = ("Ele", "Int", "Adv")


class ItemContentError(ValueError):
    """Content that does not fit its task kind; `field` names the offending field."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


def _require_str(content: dict, field: str, *, allow_empty: bool = False) -> str:
    if field not in content:
        raise ItemContentError(field, "is missing")
    value = content[field]
    if not isinstance(value, str):
        raise ItemContentError(field, f"must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise ItemContentError(field, "must not be empty")
    return value


def _optional_span(content: dict, field: str) -> None:
    value = content.get(field)
    if value is None:
        return
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise ItemContentError(field, "must be [start, end] with two integers, or null")


def _validate_likert(content: dict) -> None:
    _require_str(content, "passage", allow_empty=True)
    _require_str(content, "question")
    refs = content.get("references")
    if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
        raise ItemContentError("references", "must be a non-empty list of strings")
    _require_str(content, "candidate", allow_empty=True)


def _validate_answer(content: dict, field: str) -> None:
    answer = content.get(field)
    if not isinstance(answer, dict):
        raise ItemContentError(field, "must be an object {text, kind, upvotes}")
    if not isinstance(answer.get("text"), str) or not answer["text"].strip():
        raise ItemContentError(f"{field}.text", "must be a non-empty string")
    if answer.get("kind") not in ANSWER_KINDS:
        raise ItemContentError(f"{field}.kind", f"must be one of {', '.join(ANSWER_KINDS)}")
    upvotes = answer.get("upvotes")
    if upvotes is not None and (not isinstance(upvotes, int) or isinstance(upvotes, bool)):
        raise ItemContentError(f"{field}.upvotes", "must be an integer or null")
    system = answer.get("system")
    if system is not None and (not isinstance(system, str) or not system.strip()
                               or len(system) > MAX_SYSTEM_LENGTH):
        raise ItemContentError(f"{field}.system", "must be a non-empty string of at most "
                                                  f"{MAX_SYSTEM_LENGTH} characters, or absent")


def _validate_ab(content: dict) -> None:
    _require_str(content, "question")
    evidence = content.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise ItemContentError("evidence", "must be a list of strings")
    _validate_answer(content, "answer_a")
    _validate_answer(content, "answer_b")
    if content.get("setting") not in AB_SETTINGS:
        raise ItemContentError("setting", f"must be one of {', '.join(AB_SETTINGS)}")


def _validate_mc(content: dict) -> None:
    _require_str(content, "paragraph")
    _require_str(content, "question")
    answers = content.get("answers")
    if (
        not isinstance(answers, list)
        or len(answers) != 4
        or not all(isinstance(a, str) and a.strip() for a in answers)
    ):
        raise ItemContentError("answers", "must be four non-empty strings in role order A–D")
    _optional_span(content, "critical_span")
    _optional_span(content, "distractor_span")


_VALIDATORS = {TaskKind.LIKERT: _validate_likert, TaskKind.AB: _validate_ab,
               TaskKind.MC: _validate_mc}


def validate_item_content(kind: str, content: Any) -> None:
    """Raise ItemContentError naming the first field that does not fit `kind`."""
    if kind not in _VALIDATORS:
        raise ItemContentError("kind", f"unknown task kind {kind!r}")
    if not isinstance(content, dict):
        raise ItemContentError("content", "must be an object")
    _VALIDATORS[kind](content)
    _refuse_control_characters(content, "")


def _refuse_control_characters(value: Any, where: str) -> None:
    if (hit := find_control_character(value, where)) is not None:
        raise ItemContentError(hit[0] or "content", control_character_message(hit[1]))


# Every item field that holds text (the JSON ones at any depth).
ITEM_TEXT_FIELDS = ("external_id", "dataset", "source", "split", "domain", "text_level",
                    "group_key", "content", "gold", "exclusion_reason", "metadata")


# The item columns that name or label it, stored without the spaces around them at every door:
# the items API and the item admin trimmed them (DRF's and Django's form fields do), a file
# import kept them, so one item sent through two doors was two items (" q1 " and "q1") and
# one dataset two rows of every per-dataset table. The split has its own rule
# (`normalize_split`, which trims too).
# What `str.strip()` removes, as a regular-expression class of literal characters both
# databases read alike: PostgreSQL's `\s` depends on its locale (C.UTF-8 leaves out the no-break
# space, NEL and the information separators), so a name stored with one of them around it was
# neither trimmed by migration 0023 nor found by the imports (`rows_stored_untrimmed`).
_STRIPPED = "".join(chr(code) for code in range(0x3001) if chr(code).isspace())
UNTRIMMED_PATTERN = f"^[{_STRIPPED}]|[{_STRIPPED}]$"

ITEM_TRIMMED_FIELDS = ("external_id", "dataset", "source", "domain", "text_level",
                       "group_key", "design_unit", "exclusion_reason")


def item_columns_trimmed(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with each text of `ITEM_TRIMMED_FIELDS` stripped of surrounding whitespace (the
    rest as given): the one rule of the importers (`annotation.importers.base.validate_record`),
    the items API and bulk API (`annotation.services.items`) and the item admin."""
    return {name: value.strip() if name in ITEM_TRIMMED_FIELDS and isinstance(value, str)
            else value for name, value in fields.items()}


def validate_item_text(fields: dict[str, Any]) -> None:
    """Raise ItemContentError naming the first item field (`metadata.note`,
    `content.references[1]`, `dataset`) holding a control character other than tab, line feed
    and carriage return, or a NaN or infinite number (`annotation.domain.json_values`: no JSON
    column stores one). The same rule for the API, bulk API, importers and the admin."""
    for name in ITEM_TEXT_FIELDS:
        if name in fields:
            _refuse_control_characters(fields[name], name)
            if (where := find_non_finite(fields[name], name)) is not None:
                raise ItemContentError(where, NON_FINITE_MESSAGE)


def validate_gold(kind: str, gold: Any) -> None:
    """Gold answers: likert {"score": 1..5}, ab {"choice": A|B}, mc {"choice": A..D}."""
    if gold is None:
        return
    if not isinstance(gold, dict):
        raise ItemContentError("gold", "must be an object or null")
    _refuse_control_characters(gold, "gold")
    if kind == TaskKind.LIKERT:
        score = gold.get("score")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not 1 <= score <= 5:
            raise ItemContentError("gold.score", "must be a number from 1 to 5")
    elif kind == TaskKind.AB:
        if gold.get("choice") not in AB_CHOICES:
            raise ItemContentError("gold.choice", "must be A or B")
    elif kind == TaskKind.MC:
        if gold.get("choice") not in MC_ROLES:
            raise ItemContentError("gold.choice", "must be one of A, B, C, D")


def normalize_system(name: str) -> str:
    """A system's one spelling: Unicode NFC (an "é" typed as one code point or as "e" and a
    combining accent is one name) without the spaces around it. Every door that stores an
    A/B answer's `system` (the importers, the items API, the item admin:
    `normalize_answer_systems`) and every reader (`answer_system`: the leaderboard, adaptive
    pairing, the preference export) goes through it, so a name stored before this rule still
    groups with its other spelling."""
    return unicodedata.normalize("NFC", name).strip()


def normalize_answer_systems(kind: str, content: Any) -> Any:
    """An A/B item's content with each answer's `system` in its one spelling
    (`normalize_system`); anything else (another kind, content that is not an object, a
    system that is not a string) is returned as given, for the validation to judge."""
    if kind != TaskKind.AB or not isinstance(content, dict):
        return content
    out = content
    for field in ("answer_a", "answer_b"):
        answer = content.get(field)
        if isinstance(answer, dict) and isinstance(answer.get("system"), str):
            spelled = normalize_system(answer["system"])
            if spelled != answer["system"]:
                if out is content:
                    out = dict(content)
                out[field] = {**answer, "system": spelled}
    return out


def _answer_text_key(text: Any) -> str:
    """An answer's text as a reader sees it: NFC, characters that draw nothing
    (`without_invisible`) left out, whitespace runs collapsed and trimmed (case kept: it is visible)."""
    if not isinstance(text, str):
        return ""
    text = unicodedata.normalize("NFC", text)
    return " ".join(without_invisible(text).split())


def answers_identical(content: Any) -> bool:
    """Whether an A/B item's two answers are the same text once Unicode (NFC), invisible
    characters and whitespace are set aside (two systems that wrote the same answer): a judge
    shown it can only guess, so its pick says nothing about the systems. The leaderboard
    leaves such votes out, every board counting them; the items are stored all the same (a
    gold attention check may pair an answer with itself on purpose)."""
    if not isinstance(content, dict):
        return False
    a, b = ((content.get(f) or {}) for f in ("answer_a", "answer_b"))
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    key = _answer_text_key(a.get("text"))
    return bool(key) and key == _answer_text_key(b.get("text"))


def answer_system(content: dict, side: str, *, source: str = "",
                  metadata: dict | None = None) -> str:
    """The system that produced answer `side` ("A" or "B") of an A/B item, in its one spelling
    (`normalize_system`: a name stored before that rule still groups): the answer's own
    `system` when given; otherwise a model answer is the item's `source` (or "model") and a
    human answer is "human-higher-voted" or "human-lower-voted" by the recorded higher-voted
    side (or the upvotes), the human answer of an H/M pair counting as the higher-voted."""
    answer = content.get(f"answer_{side.lower()}") or {}
    if isinstance(answer.get("system"), str) and answer["system"].strip():
        return normalize_system(answer["system"])
    if answer.get("kind") == "model":
        source = normalize_system(source or "")
        return source if source and source != "human" else "model"
    if content.get("setting") == "HM":
        return HUMAN_HIGHER_VOTED
    other = content.get(f"answer_{'b' if side == 'A' else 'a'}") or {}
    higher = (metadata or {}).get("higher_voted")
    if higher not in AB_CHOICES:
        mine, theirs = answer.get("upvotes"), other.get("upvotes")
        if mine is None or theirs is None or mine == theirs:
            return "human"
        return HUMAN_HIGHER_VOTED if mine > theirs else HUMAN_LOWER_VOTED
    return HUMAN_HIGHER_VOTED if higher == side else HUMAN_LOWER_VOTED


def text_key(text: str) -> str:
    """Short stable key of a text, used as group_key so items sharing a passage share a HIT."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def group_key_for(*, kind: str, content: Any, group_key: str) -> str:
    """The HIT group an item is stored with (the one derivation, as `design_unit_for` is the
    design unit's): the key it was given; else, for a Likert item, its passage's key, so that
    candidates of one passage share HITs and assignments (MOCHA: the passage is read once)
    whichever door stored them, as the MOCHA importer groups them; else none."""
    if group_key or kind != TaskKind.LIKERT or not isinstance(content, dict):
        return group_key
    passage = content.get("passage")
    return text_key(passage) if isinstance(passage, str) and passage.strip() else ""


# The file-name rule's splits (dev.json, validation.json) and their one spelling.
KNOWN_SPLITS = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}


def normalize_split(split: str) -> str:
    """The split's one spelling: validation/val → dev, any case of train/dev/test lowered;
    other names kept as given (spaces around trimmed). Every door that stores an item's split
    (the importers, the items API, the item admin) and the project's redundancy per split
    (`Project.redundancy_for`) read a split through it, so per-split settings
    (redundancy {"dev": 3}) and reports find it whichever door and spelling named it."""
    return KNOWN_SPLITS.get(split.strip().lower(), split.strip())


def item_filter_value(name: str, value: str) -> str:
    """A filter's value as items store it: a split in its one spelling (`normalize_split`), so
    a filter naming the dataset's own spelling finds the items; other fields as given. Read
    by every door that filters items by a typed value: the items and judgments APIs
    (`annotation.selectors.item_list`, `judgment_list`) and a stage's item filter
    (`annotation.services.stage_plans.stage_items_matching`: the stage form and API). They
    answered `?split=validation` with nothing, and refused a stage filtered on it, of items
    imported from validation.json (stored as `dev`)."""
    return normalize_split(value) if name == "split" else value


REDUNDANCY_SHAPE = 'must map split names to integers from 1 to 1000, e.g. {"dev": 3, "default": 1}'


def redundancy_error(value) -> str | None:
    """Why a project's `redundancy` setting cannot be used, or None: the one rule of the admin
    form, the API and every service that cleans a project. Two keys naming one split
    (`normalize_split`: {"dev": 3, "validation": 2}) are refused, not read as whichever came
    last."""
    if not isinstance(value, dict) or not all(
            isinstance(key, str) and isinstance(count, int) and not isinstance(count, bool)
            and 1 <= count <= 1000 for key, count in value.items()):
        return REDUNDANCY_SHAPE
    named: dict[str, str] = {}
    for key in value:
        if key == "default":
            continue
        split = normalize_split(key)
        if split in named:
            return (f'"{named[split]}" and "{key}" name one split ({split}): give its number '
                    "of judgments once")
        named[split] = key
    return None
