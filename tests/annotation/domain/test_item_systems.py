"""Which system produced each answer of an A/B item: given explicitly, or derived."""
from __future__ import annotations

import pytest

from annotation.domain.item_content import (
    HUMAN_HIGHER_VOTED,
    HUMAN_LOWER_VOTED,
    ItemContentError,
    answer_system,
    answers_identical,
    normalize_answer_systems,
    normalize_system,
    validate_item_content,
)


def _content(a: dict, b: dict, setting: str = "HH") -> dict:
    return {"question": "q", "evidence": [], "setting": setting,
            "answer_a": {"text": "a", "kind": "human", "upvotes": None} | a,
            "answer_b": {"text": "b", "kind": "human", "upvotes": None} | b}


def test_an_explicit_system_wins():
    content = _content({"system": " gpt-4 ", "kind": "model"}, {"system": "llama"}, "HM")
    validate_item_content("ab", content)
    assert answer_system(content, "A", source="other") == "gpt-4"
    assert answer_system(content, "B") == "llama"


@pytest.mark.parametrize("system", ["", "  ", 7, "x" * 101])
def test_a_bad_system_is_refused_naming_the_field(system):
    with pytest.raises(ItemContentError, match=r"answer_b\.system"):
        validate_item_content("ab", _content({}, {"system": system}))


def test_derived_systems_follow_setting_upvotes_and_source():
    hm = _content({"kind": "model"}, {"upvotes": 4}, "HM")
    assert answer_system(hm, "A", source="text-davinci-002") == "text-davinci-002"
    assert answer_system(hm, "A", source="human") == "model"
    assert answer_system(hm, "B") == HUMAN_HIGHER_VOTED
    hh = _content({"upvotes": 2}, {"upvotes": 9})
    assert (answer_system(hh, "A"), answer_system(hh, "B")) == (HUMAN_LOWER_VOTED,
                                                               HUMAN_HIGHER_VOTED)
    # The importer's record of the higher-voted side wins over contradicting counts.
    assert answer_system(hh, "A", metadata={"higher_voted": "A"}) == HUMAN_HIGHER_VOTED
    assert answer_system(_content({"upvotes": 3}, {"upvotes": 3}), "A") == "human"



def test_a_system_has_one_spelling_whatever_its_unicode_form_and_surrounding_spaces():
    nfc, nfd = "Caf\u00e9", "Cafe\u0301"
    content = _content({"system": f" {nfd}\t", "kind": "model"}, {"kind": "model"}, "HM")
    assert answer_system(content, "A") == nfc
    assert answer_system(content, "B", source=nfd) == nfc
    assert normalize_system(f" {nfd} ") == nfc
    stored = normalize_answer_systems("ab", content)
    assert stored["answer_a"]["system"] == nfc and content["answer_a"]["system"] == f" {nfd}\t"
    likert = {"passage": "p", "system": nfd}
    assert normalize_answer_systems("likert", likert) is likert


def test_answers_are_identical_when_only_unicode_form_spacing_or_invisible_characters_differ():
    assert answers_identical(_content({"text": "Caf\u00e9 au\u200b lait. "},
                                      {"text": " Cafe\u0301  au lait.\n"}))
    assert not answers_identical(_content({"text": "Caf\u00e9 au lait."},
                                          {"text": "caf\u00e9 au lait."}))  # case is seen
    assert not answers_identical(_content({"text": "a"}, {"text": "b"}))
