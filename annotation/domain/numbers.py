"""Whole numbers and row ids read from what a client sent: JSON bodies, form fields, query
strings, URL parts.

Pure functions. Two limits keep such a value from failing deep inside a request as a 500:
int() refuses strings of more than 4,300 digits (ValueError; and it is slow well before that),
and an id outside the signed 64-bit range of the id columns overflows the database driver
(SQLite's raises OverflowError) wherever Django's own range check does not apply, such as a
lookup through a foreign key.
"""
from __future__ import annotations

import re
from typing import Any

# BigAutoField ids and every foreign key to them: a signed 64-bit integer column.
MIN_ROW_ID = -(2**63)
MAX_ROW_ID = 2**63 - 1
# The largest id has 19 digits; the cap leaves room for leading zeros and only keeps int()
# away from long strings.
MAX_DIGITS = 24
ASCII_NUMBER = re.compile(r"[0-9]+")


def ascii_whole_number(text: Any) -> int | None:
    """A string of ASCII digits (surrounding spaces allowed) as an int; None for anything else,
    and for more than MAX_DIGITS digits. ASCII only: str.isdigit() also accepts "²" (which
    int() refuses) and "٥" (which int() reads as 5), and pages and scripts send ASCII digits."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if len(text) > MAX_DIGITS or not ASCII_NUMBER.fullmatch(text):
        return None
    return int(text)


def row_id_of(value: Any) -> int | None:
    """The row id a client sent: an integer, or a string of ASCII digits, that an id column can
    hold; None for anything else (a float such as 68.5 is not silently read as row 68, a bool
    is not row 1)."""
    if isinstance(value, bool):
        return None
    number = value if isinstance(value, int) else ascii_whole_number(value)
    if number is None or not MIN_ROW_ID <= number <= MAX_ROW_ID:
        return None
    return number
