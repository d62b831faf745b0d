"""A judge's score on a Likert item is a 1-5 score at every door (`metrics_app/domain/
judge_prompts.py:task_score_problem`): an imported file's row is refused, an LLM's answer
(the json and regex rules) is unparseable, stored with the reason and counted, and a row
stored before the rule is read as unparseable.

Before: one json answer `{"verdict": "correct", "score": 1e300}` was stored as parsed; the
estimates read the judge's scores on its lowest-to-highest range, so every other score fell
to about 0 and the judge alone put system a's accuracy at 6.7% (humans: 53%), though the
judge's verdicts agreed with every human label (the judges page: accuracy 1.0)."""
from __future__ import annotations

import json

import pytest

from annotation.judgment_selectors import load_judgments
from metrics_app.domain.judge_prompts import item_prompt, parse_answer
from metrics_app.judge_selectors import judge_view
from metrics_app.models import JudgeVerdict
from metrics_app.reports.estimates import estimates_report
from metrics_app.services.judges.alignment import judge_alignment_report
from metrics_app.services.judges.imports import VerdictImportError, verdicts_import
from metrics_app.services.judges.runs import judge_project
from metrics_app.services.judges.versions import judge_version_create
from testing.openai_server import FakeChatServer
from tests.metrics_app.services.judges.test_alignment import _likert

pytestmark = pytest.mark.django_db

HOSTILE = {"(2)?": 1e300, "(4)?": 7}


def _answer(prompt: str) -> str:
    right = "on the mat</candidate>" in prompt
    score = next((value for mark, value in HOSTILE.items() if mark in prompt),
                 5 if right else 1)
    return json.dumps({"verdict": "correct" if right else "incorrect", "score": score,
                       "reasoning": "compared with the reference"})


def _systems_accuracy(project, judge: str) -> dict[str, tuple[float, float]]:
    report = estimates_report(load_judgments(project=project), project=project, judge=judge)
    return {system: (row["accuracy"]["metric"]["bias"], row["accuracy"]["metric"]["n_items"])
            for system, row in report["systems"].items()}


def test_an_llm_answer_scored_off_the_likert_scale_is_unparseable_not_the_judges_scale():
    project = _likert()
    with FakeChatServer(behaviour=_answer, logprobs=False) as server:
        version = judge_version_create(name="json-judge", config={
            "base_url": server.url, "model": "fake-judge", "parse": "json"})[0]
        detail = judge_project(project=project, version=version)
    assert detail["unparseable"] == 2
    stored = {row.item.content["question"][-4:]: row for row in
              JudgeVerdict.objects.filter(judge_version=version).select_related("item")}
    assert not stored["(2)?"].parsed
    assert stored["(2)?"].reasoning == "score 1e+300 is outside 1..5"
    assert stored["(4)?"].reasoning == "score 7 is outside 1..5" and not stored["(4)?"].parsed
    # The judge alone reads its verdicts' scale, not one answer's: right on every item it
    # read (no bias against the humans there); the two it could not read are none of its.
    alone = _systems_accuracy(project, "json-judge").values()
    assert all(bias == 0.0 for bias, _n in alone)
    assert sum(n for _bias, n in alone) == 28
    row = judge_alignment_report(project=project, refs=["json-judge"], n_resamples=0)[
        "judges"]["json-judge@1"]
    assert (row["unparseable"], row["asked"], row["accuracy"]) == (2, 30, 1.0)


def test_the_same_rule_reads_regex_answers_imported_files_and_rows_stored_before(tmp_path):
    likert_regex = {"task": "likert", "parse": "regex", "pattern": r"Grade: (\S+)"}
    assert parse_answer("Grade: 9", likert_regex).error == "score 9 is outside 1..5"
    assert parse_answer("Grade: 4", likert_regex).score == 4.0
    # A mapped group is a verdict's label, not a score: "0" for incorrect is no 1-5 score.
    mapped = parse_answer("Grade: 0", {**likert_regex, "verdicts": {"0": "incorrect",
                                                                    "1": "correct"}})
    assert (mapped.ok, mapped.verdict, mapped.score) == (True, "incorrect", None)
    assert parse_answer('{"verdict": "B", "score": 70}', {"task": "ab", "parse": "json"}).ok

    project = _likert()
    first = project.items.order_by("id").first()
    path = tmp_path / "verdicts.jsonl"
    path.write_text(json.dumps({"item_id": first.external_id, "verdict": "correct",
                                "score": 1e300}), encoding="utf-8")
    with pytest.raises(VerdictImportError) as refused:
        verdicts_import(project=project, path=path, judge="imported", version="1")
    assert "line 1: score 1e+300 is outside 1..5" in str(refused.value)

    # A row stored before the rule (parsed, score 1e300) is read as unparseable; the 0/1
    # score of a yes/no judge's verdict stays what it was.
    with FakeChatServer(behaviour=_answer, logprobs=False) as server:
        version = judge_version_create(name="older", config={
            "base_url": server.url, "model": "fake-judge", "parse": "json"})[0]
        judge_project(project=project, version=version)
        yes_no = judge_version_create(name="yes-no", config={
            "base_url": server.url, "model": "fake-judge", "parse": "yes_no",
            "prompt": "<candidate>{candidate}</candidate> <references>{references}"
                      "</references> Correct? Verdict: yes or no"})[0]
    assert first.content["question"].endswith("(0)?")
    JudgeVerdict.objects.filter(judge_version=version, item=first).update(score=1e300)
    view = judge_view(project, "older")
    assert first.pk not in view.calls and view.unparseable == 3
    JudgeVerdict.objects.create(judge_version=yes_no, item=first, verdict="incorrect",
                                score=0.0, content_hash=item_prompt(yes_no.config,
                                                                    first.content)[1])
    assert judge_view(project, "yes-no").calls[first.pk].score == 0.0
