"""Prolific screeners read from and written into `prolific_filters` (pure)."""
from __future__ import annotations

import pytest

from annotation.domain.prolific_screeners import (
    BY_NAME,
    ScreenerError,
    filters_with_screeners,
    screener_check,
    screeners_from_filters,
)


def test_round_trip_keeps_other_filters_and_replaces_the_screeners():
    other = {"filter_id": "handedness", "selected_values": ["0"]}
    stored = [other, {"filter_id": "approval_rate", "selected_range": {"lower": 90}}]
    assert screeners_from_filters(stored) == {"approval_rate_min": 90}
    written = filters_with_screeners(stored, {"approval_rate_min": 98, "countries": ["1"]})
    assert written == [other,
                       {"filter_id": "approval_rate", "selected_range": {"lower": 98,
                                                                         "upper": 100}},
                       {"filter_id": "current-country-of-residence", "selected_values": ["1"]}]
    assert screeners_from_filters(written) == {"approval_rate_min": 98, "countries": ["1"]}
    assert filters_with_screeners(written, {}) == [other]


@pytest.mark.parametrize("stored", [None, "x", [1, "a"], [{"filter_id": "approval_rate"}],
                                    [{"filter_id": "first-language", "selected_values": "19"}]])
def test_odd_stored_filters_read_as_no_screener(stored):
    assert screeners_from_filters(stored) == {}


@pytest.mark.parametrize(("name", "value", "message"), [
    ("approval_rate_min", 101, "must be between 0 and 100, not 101"),
    ("approvals_min", -3, "must be at least 0, not -3"),
    ("approvals_min", True, "must be a whole number"),
    ("countries", "GB", None),
    ("countries", "1;2", "'1;2' is not a Prolific choice id"),
    ("languages", ["19", "19"], "an id is given twice"),
])
def test_bad_values_name_the_screener(name, value, message):
    if message is None:
        assert screener_check(BY_NAME[name], value) == ["GB"]
        return
    with pytest.raises(ScreenerError, match=message.replace("(", r"\(")):
        screener_check(BY_NAME[name], value)
