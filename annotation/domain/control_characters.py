"""Control characters in text that enters the platform: one rule for every door (autosave
drafts, submissions, items from the API, bulk API, importers and the admin).

C0 controls and DEL are refused, except tab, line feed and carriage return, which pasted and
multi-line text legitimately carries. NUL cannot be stored by PostgreSQL at all (text and jsonb
refuse it: a 500 there, while SQLite stored it), and no keyboard types the others; refusing
them everywhere makes both databases answer the same, with a message naming the field.
Pure functions, no Django.
"""
from __future__ import annotations

import re
from typing import Any

# C0 controls and DEL, except tab, line feed and carriage return.
CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def describe(character: str) -> str:
    """"U+0000 (NUL)", "U+000B", ...: how a message names the character."""
    code = f"U+{ord(character):04X}"
    return f"{code} (NUL)" if character == "\x00" else code


def control_character_message(character: str) -> str:
    return (f"must not contain control characters (found {describe(character)}); only tab, "
            "line feed and carriage return may appear in text")


def without_control_characters(text: str) -> str:
    """`text` with its control characters removed: for text we cannot refuse because it was
    not typed by a user (an LLM endpoint's answer), and must still store on both databases."""
    return CONTROL_CHARACTER.sub("", text)


def find_control_character(value: Any, where: str = "") -> tuple[str, str] | None:
    """(path, character) of the first string in `value` (nested dicts and lists, keys
    included) that holds a control character, or None. Paths read `content.references[0]`;
    `where` is the path of `value` itself."""
    if isinstance(value, str):
        found = CONTROL_CHARACTER.search(value)
        return (where, found.group()) if found else None
    if isinstance(value, dict):
        for key, child in value.items():
            child_where = f"{where}.{key}" if where else str(key)
            if isinstance(key, str) and (found := CONTROL_CHARACTER.search(key)):
                return child_where, found.group()
            if (hit := find_control_character(child, child_where)) is not None:
                return hit
        return None
    if isinstance(value, (list, tuple)):
        for index, child in enumerate(value):
            if (hit := find_control_character(child, f"{where}[{index}]")) is not None:
                return hit
    return None


# Line breaks and tabs, which a one-line name (a project title, a stage name) must not hold
# either: it is shown in page titles, lists, chart labels and provider study names.
LINE_BREAK_OR_TAB = re.compile(r"[\t\n\r]")


def display_text_error(text: str, *, multiline: bool) -> str | None:
    """Why researcher-entered display text (a project's title or instructions, a stage's name,
    a judge's description) cannot be stored, or None: the rule of every door that sets it (the
    admin's forms, the REST API, the management commands, through the model fields'
    validators in `annotation.validators`). `multiline`: tab, line feed and carriage return
    are kept (instructions, descriptions); a one-line name refuses them too."""
    if not isinstance(text, str):
        return None
    if (found := CONTROL_CHARACTER.search(text)) is not None:
        return control_character_message(found.group())
    if not multiline and (found := LINE_BREAK_OR_TAB.search(text)) is not None:
        return (f"must be one line (found {describe(found.group())}): no line breaks, tabs or "
                "other control characters")
    return None


# The longest note a researcher records on a decision (an adjudication, a spot check), at every
# door that stores one (the pages, the API, an import).
MAX_NOTE_CHARS = 2000


def note_problem(note: str, max_chars: int = MAX_NOTE_CHARS) -> str | None:
    """What is wrong with a researcher's note (adjudication, spot check), None when nothing:
    longer than `max_chars`, or holding a control character."""
    if len(note) > max_chars:
        return f"the note is longer than {max_chars} characters"
    control = CONTROL_CHARACTER.search(note)
    if control:
        return f"the note contains a control character (U+{ord(control.group()):04X})"
    return None


# Characters that draw nothing and take no room: Unicode's format characters (category Cf:
# zero-width spaces and joiners, the byte-order mark, direction marks) and its other
# default-ignorable code points (variation selectors, the combining grapheme joiner, Khmer's
# inherent vowels, Mongolian free variation selectors, tag characters), which are marks (Mn)
# or unassigned and so escaped a category test: thirty variation selectors look like an empty
# box and filled a justification's minimum. The Hangul fillers, also default-ignorable, are
# left to the blank rule (`annotation.domain.answers.BLANK_CLASS`: they show a gap). A regular
# expression class of literal characters, so Python and the page's script (with its `u` flag,
# `justification_invisible` in its config) read it alike.
IGNORABLE_CLASS = ("[\u034f\u17b4\u17b5\u180b-\u180d\u180f\u2065\ufe00-\ufe0f\ufff0-\ufff8"
                   "\U000e0000-\U000e0fff]")
_IGNORABLE = re.compile(IGNORABLE_CLASS)


def is_invisible(char: str) -> bool:
    """Whether `char` draws nothing and takes no room (`IGNORABLE_CLASS`, category Cf)."""
    import unicodedata

    return unicodedata.category(char) == "Cf" or _IGNORABLE.match(char) is not None


def without_invisible(text: str) -> str:
    """`text` without the characters that draw nothing (`is_invisible`): the one rule of a
    justification's count, the copy and repeat checks, and an A/B item's identical answers."""
    return "".join(char for char in text if not is_invisible(char))
