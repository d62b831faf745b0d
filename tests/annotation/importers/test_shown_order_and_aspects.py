"""An imported judgment's order shown and aspects follow the task page's rules: every report
maps a choice through the order shown (the leaderboard's left and right, position bias, the
letter the worker saw) and counts the aspects by name, so an order that is no shuffle of the
item's answers, or an aspect that is no name, is refused naming the field; nothing stored."""
from __future__ import annotations

import copy

import pytest

from annotation.domain.answers import AnswerError, AnswerRules, clean_answer
from annotation.models import Judgment, Project
from metrics_app.reports.project import project_report
from tests.support.imports import AB_ROW, LIKERT_ROW, MC_ROW, import_fails, run_import, write_jsonl

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]


def _with_judgment(row: dict, **values) -> dict:
    row = copy.deepcopy(row)
    row["judgments"] = [row["judgments"][0] | values]
    return row


@pytest.mark.parametrize(("row", "kind", "order"), [
    (AB_ROW, "ab", ["B", "B"]),  # answer B "shown twice": left and right are both B
    (AB_ROW, "ab", ["A"]),
    (AB_ROW, "ab", ["A", "B", "C"]),
    (AB_ROW, "ab", ["a", "b"]),  # the letters shown, not the item's roles
    (AB_ROW, "ab", [1, 2]),
    (MC_ROW, "mc", ["C", "A", "D", "D"]),
    (LIKERT_ROW, "likert", ["A", "B"]),  # a Likert item shows no answers in an order
])
def test_an_order_shown_that_is_no_shuffle_of_the_answers_is_refused(tmp_path, row, kind, order):
    path = write_jsonl(tmp_path / "items.jsonl", [_with_judgment(row, presented_order=order)])
    message = import_fails("jsonl", str(path), "--project", "p", "--create", "--kind", kind,
                           match="nothing imported")
    assert "'judgments[0].presented_order'" in message and "line 1" in message


@pytest.mark.parametrize("aspects", [[{"name": "factuality"}], [["factuality"]], [3], ["  "]])
def test_an_aspect_that_is_no_name_is_refused(tmp_path, aspects):
    path = write_jsonl(tmp_path / "items.jsonl", [_with_judgment(AB_ROW, aspects=aspects)])
    message = import_fails("jsonl", str(path), "--project", "p", "--create", "--kind", "ab",
                           match="nothing imported")
    assert "'judgments[0].aspects'" in message and "aspect names" in message


def test_a_recorded_or_unrecorded_order_and_named_aspects_import_and_report(tmp_path):
    rows = [_with_judgment(AB_ROW, presented_order=["B", "A"], aspects=["factuality"]),
            _with_judgment(AB_ROW, presented_order=[], aspects=[]) | {"external_id": "ab-2"}]
    run_import("jsonl", str(write_jsonl(tmp_path / "items.jsonl", rows)), "--project", "p",
               "--create", "--kind", "ab")
    assert sorted(map(tuple, Judgment.objects.values_list("presented_order", flat=True))) == [
        (), ("B", "A")]
    report = project_report(project=Project.objects.get(slug="p"))
    assert report["lfqa"]["overall"]["aspect_counts"] == {"factuality": 1}


def test_the_page_refuses_aspects_that_are_no_names_by_the_same_rule():
    rules = AnswerRules(kind="ab", aspects=["factuality"])
    with pytest.raises(AnswerError, match="Aspects must be a list of names"):
        clean_answer(rules=rules, presented_order=["A", "B"], answer={
            "shown_choice": "A", "difficult": False, "aspects": [{"name": "factuality"}]})
