"""`json_equal`: what a JSON column gave back against what a door received (a repeated import,
a retried API request), the same on SQLite and PostgreSQL."""
from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.domain.json_values import json_equal, json_key


@pytest.mark.parametrize("number", [1e23, 1.5e24, 2.5e30, -1.2345678901234567e25, 1e308])
def test_a_large_float_given_back_as_a_whole_number_is_the_same_value(number):
    # jsonb keeps the exact decimal the float was written as (repr) and gives it back without
    # an exponent: a whole number, which == never finds equal to the float.
    back = int(Decimal(repr(number)))
    assert back != number
    assert json_equal({"x": [back]}, {"x": [number]}) and json_equal(number, back)
    assert json_key({"b": [back], "a": 5}) == json_key({"a": 5.0, "b": [number]})


def test_other_values_keep_their_meaning():
    assert json_equal({"a": 1, "b": [5, "x"]}, {"b": [5.0, "x"], "a": 1.0})
    assert not json_equal(True, 1) and not json_equal(1.0, True) and json_equal(False, False)
    assert not json_equal(10**400, 1e308) and json_equal(10**400, 10**400)
    assert not json_equal(int(Decimal(repr(1e23))), 2e23)
    assert not json_equal({"a": 1}, {"a": 1, "b": None}) and not json_equal([1], [1, 1])
    assert not json_equal("1", 1) and not json_equal(None, 0.0)


def test_the_key_tells_apart_what_json_equal_tells_apart():
    assert json_key(True) != json_key(1) and json_key([1, 2]) != json_key([2, 1])
    assert json_key({"a": 10**400}) == json_key({"a": 10**400}) != json_key({"a": 1e308})
