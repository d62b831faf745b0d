"""Whole numbers and ids read from client text: ASCII digits only, never so many that int()
fails, and ids only inside the signed 64-bit range of the id columns."""
from __future__ import annotations

import pytest

from annotation.domain.numbers import MAX_ROW_ID, ascii_whole_number, row_id_of


@pytest.mark.parametrize("text, number", [
    ("7", 7), (" 42 ", 42), ("007", 7), ("9" * 24, int("9" * 24)),
    ("9" * 25, None), pytest.param("1" * 5000, None, id="5000-digits"), ("²", None), ("٥", None), ("-1", None), ("1e3", None),
    ("", None), (None, None), (3, None),
])
def test_ascii_whole_numbers(text, number):
    assert ascii_whole_number(text) == number


@pytest.mark.parametrize("value, row_id", [
    (1, 1), ("1", 1), (MAX_ROW_ID, MAX_ROW_ID), (MAX_ROW_ID + 1, None),
    (str(MAX_ROW_ID + 1), None), ("9" * 20, None), (-(2**63), -(2**63)), (-(2**63) - 1, None),
    (True, None), (1.0, None), pytest.param("1" * 5000, None, id="5000-digits"),
])
def test_row_ids_fit_an_id_column(value, row_id):
    assert row_id_of(value) == row_id
