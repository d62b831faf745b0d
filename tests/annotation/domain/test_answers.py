"""Answer validation refuses what a careless or hostile page could send, with a message."""
from __future__ import annotations

import pytest

from annotation.domain.answers import (
    AnswerError,
    AnswerRules,
    clean_answer,
    justification_length,
    same_justification_count,
)

LIKERT = AnswerRules(kind="likert")
AB = AnswerRules(kind="ab", justification_min_length=5)


@pytest.mark.parametrize("score, stored", [(4, 4.0), ("4", 4.0), (" 5 ", 5.0)])
def test_likert_scores_as_numbers_or_ascii_digits(score, stored):
    assert clean_answer(rules=LIKERT, answer={"score": score}, presented_order=[])["score"] == stored


@pytest.mark.parametrize("score", ["²", "٥", "５", "4.0", "", True, 0, 6, None,
                                   pytest.param("1" * 5000, id="5000-digits"),
                                   pytest.param("0" * 4999 + "3", id="3-after-4999-zeros")])
def test_likert_scores_in_other_scripts_or_out_of_range_are_refused(score):
    with pytest.raises(AnswerError, match="Pick a score from 1 to 5"):
        clean_answer(rules=LIKERT, answer={"score": score}, presented_order=[])


def ab_answer(justification: str) -> dict:
    return {"shown_choice": "A", "difficult": False, "justification": justification}


@pytest.mark.parametrize("character", ["\x00", "\x07", "\x1b", "\x7f"])
def test_control_characters_in_a_justification_are_refused_by_name(character):
    with pytest.raises(AnswerError) as refused:
        clean_answer(rules=AB, answer=ab_answer(f"Answer A{character} is better"),
                     presented_order=["A", "B"])
    assert f"control character (U+{ord(character):04X})" in " ".join(refused.value.messages)


def test_line_breaks_and_tabs_in_a_justification_are_kept():
    fields = clean_answer(rules=AB, answer=ab_answer("A is better.\n\tIt cites the source.\r\n"),
                          presented_order=["A", "B"])
    assert fields["justification"] == "A is better.\n\tIt cites the source."


AB20 = AnswerRules(kind="ab", justification_min_length=20)
ANSWERS = ("Light from the sun is scattered by the air, and blue light is scattered most.",
           "Because the sky reflects the colour of the sea.")


@pytest.mark.reliability
@pytest.mark.parametrize("text, written", [
    pytest.param("\u200b" * 25, 0, id="zero-width-spaces"),
    pytest.param("\u200e\u200f\ufeff\u2060" * 6, 0, id="direction-marks-and-joiners"),
    pytest.param("Ab\u200b" * 6, 12, id="letters-padded-with-zero-width"),
    pytest.param("\U0001f44d\U0001f600" * 6, 12, id="emoji-count-once-each"),
])
def test_a_justification_is_counted_in_visible_characters(text, written):
    """Twenty zero-width spaces passed a 20-character minimum (an empty box on the screen),
    and the page counted an emoji twice (UTF-16) where the server counted it once."""
    with pytest.raises(AnswerError) as refused:
        clean_answer(rules=AB20, answer=ab_answer(text), presented_order=["A", "B"])
    assert f"at least 20 characters ({written} so far)" in " ".join(refused.value.messages)


@pytest.mark.reliability
@pytest.mark.parametrize("text, written", [
    pytest.param("b" * 85, 1, id="one-letter-repeated"),
    pytest.param("A better" + "." * 80, 9, id="dots-after-two-words"),
    pytest.param("A" + " " * 30 + "is better", 11, id="spaces-between-words"),
    pytest.param("Ab\u200bb\u200bb" * 4, 8, id="a-run-split-by-zero-width-is-one-run"),
])
def test_a_justification_padded_with_one_character_is_counted_without_the_padding(text, written):
    """Was: a trial worker's 85 "b"s, and "aaaa…" in the qualification, reached the project's
    80-character minimum and were stored, approved and paid as justifications. A run of three
    or more of one character counts once, on the page and the server, and the message says so."""
    with pytest.raises(AnswerError) as refused:
        clean_answer(rules=AB20, answer=ab_answer(text), presented_order=["A", "B"])
    message = " ".join(refused.value.messages)
    assert (f"at least 20 characters ({written} so far; a character repeated 3 or more times "
            f"in a row counts once)") in message
    assert justification_length(text) == written


@pytest.mark.reliability
@pytest.mark.parametrize("text, written", [
    pytest.param("\u2800 " * 15, 0, id="braille-blanks-between-spaces"),
    pytest.param("\u3164\u00a0" * 15, 0, id="hangul-fillers-and-no-break-spaces"),
    pytest.param("A" + " \u00a0" * 15 + "is better", 11, id="two-spaces-taking-turns"),
    pytest.param("A" + "\u2003\u2002 " * 8 + "is good", 9, id="three-spaces-taking-turns"),
    pytest.param("\u200b  \u00a0 A is right", 10, id="blank-before-the-first-word"),
    pytest.param("\ufe0f" * 30, 0, id="variation-selectors"),
    pytest.param("A is right" + "\U000e0100\u034f\u17b4\u180b" * 8, 10,
                 id="marks-that-draw-nothing"),
])
def test_blank_characters_are_one_kind_of_padding(text, written):
    """Characters that show nothing count as one: every whitespace character and the blank
    glyphs (braille blank, Hangul fillers) are padding however they take turns, and leading or
    trailing ones are trimmed. Was: fifteen braille blanks between spaces, an empty-looking box,
    counted 29 characters and were stored as a justification, and a gap of space and no-break
    space taking turns counted in full where a run of spaces counted once."""
    with pytest.raises(AnswerError) as refused:
        clean_answer(rules=AB20, answer=ab_answer(text), presented_order=["A", "B"])
    assert f"at least 20 characters ({written} so far" in " ".join(refused.value.messages)
    assert justification_length(text) == written


def test_words_with_double_letters_count_in_full():
    text = "All three sheep agree: A is correct."  # "ll", "ee" twice: words, not padding
    assert justification_length(text) == len(text)
    with pytest.raises(AnswerError) as refused:
        clean_answer(rules=AnswerRules(kind="ab", justification_min_length=40),
                     answer=ab_answer(text), presented_order=["A", "B"])
    assert f"({len(text)} so far)." in " ".join(refused.value.messages)


@pytest.mark.reliability
@pytest.mark.parametrize("text", [
    ANSWERS[0], "  light from the SUN is scattered   by the air, and blue light ",
    ANSWERS[1].upper() + "\n",
    pytest.param(ANSWERS[0].replace(" ", "\u2800"), id="words-parted-by-braille-blanks"),
    pytest.param(ANSWERS[1].replace(" ", " \u3164"), id="spaces-with-hangul-fillers"),
])
def test_a_justification_pasted_from_an_answer_is_refused(text):
    with pytest.raises(AnswerError) as refused:
        clean_answer(rules=AB20, answer=ab_answer(text), presented_order=["A", "B"],
                     answer_texts=ANSWERS)
    assert "copy of one of the answers" in " ".join(refused.value.messages)


@pytest.mark.parametrize("text", [
    "A explains the scattering; B wrongly says the sky reflects the sea.",
    "مرحبا، الإجابة أ أفضل لأنها تشرح التشتت بشكل صحيح",  # right-to-left text
    "Answer A 👍 is right about the scattering of light.",
])
def test_own_words_quoting_or_in_any_script_are_kept(text):
    fields = clean_answer(rules=AB20, answer=ab_answer(text), presented_order=["A", "B"],
                          answer_texts=ANSWERS)
    assert fields["justification"] == text


@pytest.mark.parametrize("value, item_id", [
    (68, 68), ("68", 68), (" 7 ", 7),
    (68.5, None), (68.0, None), ("68.5", None), (True, None), ("", None), (None, None),
    ("٥", None), ([68], None),
    # Only what an id column (signed 64-bit) holds; int() is never asked to read 5000 digits.
    (2**63 - 1, 2**63 - 1), (str(2**63 - 1), 2**63 - 1), (2**63, None), (str(2**63), None),
    (-(2**63) - 1, None), pytest.param("1" * 5000, None, id="5000-digits"),
    pytest.param(10**4000, None, id="4001-digit-int"),
])
def test_item_ids_are_integers_or_ascii_digits_only(value, item_id):
    from annotation.domain.answers import item_id_of

    assert item_id_of(value) == item_id


VALIDITY = AnswerRules(kind="mc", mode="validity")


@pytest.mark.parametrize("shown", [[["a"], ["b"]], [{"a": 1}, "b"], ["a", ["a"]], [1, 2]])
def test_validity_answers_must_be_labels_before_they_are_counted(shown):
    with pytest.raises(AnswerError) as refused:
        clean_answer(rules=VALIDITY, answer={"validity": "several", "shown_choices": shown},
                     presented_order=["A", "B", "C", "D"])
    assert refused.value.messages == [
        "The correct answers must be a list of the labels shown (a, b, c or d)."]


def test_validity_answers_still_name_a_label_marked_twice():
    with pytest.raises(AnswerError, match="Mark each correct answer once"):
        clean_answer(rules=VALIDITY, answer={"validity": "several", "shown_choices": ["a", "a"]},
                     presented_order=["A", "B", "C", "D"])


@pytest.mark.parametrize("started", [
    "0001-01-01T00:00:00+05:00",  # before year 1 in UTC
    "9999-12-31T23:59:59-05:00",  # after year 9999 in UTC
    "0001-01-01T00:00:00Z",  # a zone west of UTC could not show it
    "9999-12-31T12:00:00",
    "not a time",
])
def test_a_client_start_time_at_the_calendars_ends_is_left_out_like_an_unreadable_one(started):
    fields = clean_answer(rules=LIKERT, answer={"score": 4, "client_started_at": started},
                          presented_order=[])
    assert fields["score"] == 4.0 and "client_started_at" not in fields


def test_a_client_start_time_is_kept_in_utc():
    from datetime import UTC, datetime

    fields = clean_answer(rules=LIKERT, presented_order=[],
                          answer={"score": 4, "client_started_at": "2026-01-01T10:00:00+05:00"})
    assert fields["client_started_at"] == datetime(2026, 1, 1, 5, tzinfo=UTC)
    assert fields["client_started_at"].utcoffset().total_seconds() == 0


@pytest.mark.reliability
@pytest.mark.parametrize("blank", ["\u3164", "\u2800", "\u00a0"])
def test_one_justification_parted_by_blank_glyphs_is_the_same_justification(blank):
    """The repeat rule reads blank glyphs as the spaces they look like, as the count and the
    copy check do: was: a Hangul filler (a letter by its category) between the words made a
    third copy of a sentence a new justification (count 2, not 3)."""
    sentence = "B is more complete and answers the question"
    assert same_justification_count([sentence, sentence.replace(" ", blank),
                                     sentence.replace(" ", " " + blank)]) == 3
