"""The schema of Stage.settings: which keys apply to which kind and provider, what a bad value is
told, merging keeps what it does not know, and docs/PROVIDERS.md shows the schema's table."""
from __future__ import annotations

import pytest

from annotation.domain.stage_settings import (
    BY_KEY,
    StageSettingError,
    setting_check,
    settings_for,
    settings_table_markdown,
    stage_settings_errors,
    stage_settings_merge,
)
from tests.support.paths import REPO_ROOT


def _keys(kind, provider):
    return {spec.key for spec in settings_for(kind=kind, provider=provider)}


def test_each_kind_and_provider_gets_only_its_settings():
    likert_mturk = _keys("likert", "mturk")
    assert {"routing", "routing_budget", "min_approval_rate", "locales", "redundancy.min",
            "review.min_gold_accuracy", "title"} <= likert_mturk
    assert not likert_mturk & {"latin_square", "estimated_minutes", "devices",
                               "items_per_assignment"}
    mc_prolific = _keys("mc", "prolific")
    assert {"latin_square", "estimated_minutes", "devices", "items_per_assignment"} <= mc_prolific
    assert not mc_prolific & {"routing", "min_approval_rate", "keywords"}
    ab_inhouse = _keys("ab", "inhouse")
    assert not ab_inhouse & {"routing", "latin_square", "title", "keywords", "devices"}
    assert "prolific_filters" not in _keys("mc", "prolific")  # edited as JSON, no field
    # Unknown kind or provider: only what applies everywhere.
    anywhere = _keys(None, None)
    assert {"n_items", "gold_rate", "redundancy.max", "review.auto_reject"} <= anywhere
    assert not anywhere & {"routing", "latin_square", "title", "locales",
                           "items_per_assignment", "allow_40pct_fee_tier"}


@pytest.mark.parametrize(("key", "value", "message"), [
    ("min_approval_rate", 150, "min_approval_rate must be ≥ 0, ≤ 100, not 150"),
    ("min_approval_rate", "95", "min_approval_rate must be a whole number, not '95'"),
    ("gold_rate", 0.95, "gold_rate must be ≥ 0, ≤ 0.9, not 0.95"),
    ("redundancy.agreement", 0.5, "redundancy.agreement must be > 0.5, ≤ 1, not 0.5"),
    ("routing", "smart", "routing 'smart' is not one of random, uncertainty"),
    ("latin_square", "yes", "latin_square must be true or false, not 'yes'"),
    ("locales", ["USA"], "locales: 'USA' are not two-letter country codes like US"),
    ("devices", ["phone"], "devices: 'phone' not among desktop, tablet, mobile"),
    ("bonus_budget", "lots", "bonus_budget must be an amount of money, not 'lots'"),
    ("title", "x" * 121, "title is 121 characters long; at most 120"),
])
def test_a_bad_value_is_refused_naming_the_key_and_what_is_wrong(key, value, message):
    with pytest.raises(StageSettingError) as caught:
        setting_check(BY_KEY[key], value)
    assert str(caught.value) == message


def test_good_values_pass_and_whole_settings_are_checked_together():
    assert setting_check(BY_KEY["min_approval_rate"], 0) == 0
    assert setting_check(BY_KEY["bonus_budget"], "12.50") == "12.50"
    assert setting_check(BY_KEY["locales"], []) == []
    assert stage_settings_errors({"custom": {"anything": 1}, "n_items": 5,
                                  "review": {"auto_reject": True, "extra": 1}}) == []
    assert stage_settings_errors({"redundancy": {"min": 5, "max": 2}}) == [
        '"redundancy" needs 1 ≤ min ≤ max ≤ 20; got min 5, max 2']
    assert stage_settings_errors({"review": 3}) == [
        'review must be an object like {"approve_after_seconds": …}']
    assert stage_settings_errors([1]) == ['settings must be a JSON object like {"n_items": 200}']


def test_merging_sets_and_removes_known_keys_and_keeps_the_rest():
    stored = {"custom": [1, 2], "mturk_hit_type_id": "HT1", "n_items": 10,
              "review": {"auto_reject": True, "extra": 3}, "redundancy": {"min": 2}}
    merged = stage_settings_merge(stored, {"n_items": None, "review.auto_reject": None,
                                           "redundancy.min": None, "gold_rate": 0.2,
                                           "review.min_gold_accuracy": 0.8})
    assert merged == {"custom": [1, 2], "mturk_hit_type_id": "HT1", "gold_rate": 0.2,
                      "review": {"extra": 3, "min_gold_accuracy": 0.8}}
    assert stored["review"] == {"auto_reject": True, "extra": 3}  # not changed in place


def test_providers_md_shows_the_schema_table():
    text = (REPO_ROOT / "docs" / "PROVIDERS.md").read_text()
    assert settings_table_markdown() in text
