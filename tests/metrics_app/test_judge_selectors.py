"""Judges read as item -> verdict/score/probability (metrics_app/judge_selectors.py): each
item's 0-1 value for the estimates, and which version a reference names on a project."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.judgment_selectors import load_judgments
from annotation.models import TaskKind
from metrics_app.judge_selectors import JudgeCall, JudgeView, judge_view, predictor_values
from metrics_app.reports.estimates import estimates_report
from metrics_app.services.judges.imports import verdicts_import
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker


def _likert_value(score: float) -> float:
    return (score - 1) / 4  # JUDGES.md: "Likert scores (s-1)/4"


def _import(tmp_path, project, rows, *, judge="mixed", version="1"):
    path = tmp_path / f"{project.slug}-{judge}-{version}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge=judge, version=version)


def test_a_probability_is_kept_as_it_is_beside_items_that_have_only_a_score():
    view = JudgeView(ref="j@1", kind="imported", version="1", calls={
        1: JudgeCall(verdict=None, score=None, probability=0.9),
        2: JudgeCall(verdict=None, score=5.0, probability=None),
        3: JudgeCall(verdict=None, score=2.0, probability=None),
        4: JudgeCall(verdict=1.0, score=None, probability=None)})
    values = predictor_values(view, [1, 2, 3, 4])
    assert values.tolist() == pytest.approx([0.9, _likert_value(5), _likert_value(2), 1.0])
    # Each item maps on its own: a subset maps the same way.
    assert predictor_values(view, [3, 1]).tolist() == pytest.approx([values[2], values[0]])


@pytest.mark.django_db
def test_an_imported_judge_with_probabilities_on_some_items_and_scores_on_others(tmp_path):
    project = make_project(TaskKind.LIKERT)
    rows = []
    for n in range(6):
        item = make_item(project, external_id=f"q{n}")
        rows.append({"item_id": item.external_id, "score": 1.0 + (n % 5)}
                    if n % 2 else {"item_id": item.external_id, "probability": 0.9,
                                   "score": 4.0})
    _import(tmp_path, project, rows)
    view = judge_view(project, "mixed")
    ids = sorted(view.calls)
    values = dict(zip(ids, predictor_values(view, ids).tolist(), strict=True))
    for call_id, row in zip(ids, rows, strict=True):
        want = row["probability"] if "probability" in row else _likert_value(row["score"])
        assert values[call_id] == pytest.approx(want)


@pytest.mark.django_db
def test_likert_scores_that_are_all_one_are_the_lowest_score_not_certainty(tmp_path):
    project = make_project(TaskKind.LIKERT)
    items = [make_item(project, external_id=f"q{n}") for n in range(3)]
    _import(tmp_path, project, [{"item_id": items[0].external_id, "probability": 0.8}] +
            [{"item_id": item.external_id, "score": 1} for item in items[1:]])
    view = judge_view(project, "mixed")
    values = predictor_values(view, [item.pk for item in items])
    assert values.tolist() == pytest.approx([0.8, 0.0, 0.0])


@pytest.fixture
def version_elsewhere(tmp_path):
    """A project with human labels and no verdicts, and judge 'other@1' whose verdicts are
    all on another project."""
    project = make_project(TaskKind.LIKERT, slug="here")
    stage, worker = make_stage(project), make_worker()
    for n in range(6):
        item = make_item(project, external_id=f"q{n}", source="x" if n % 2 else "y")
        make_judgment(item=item, stage=stage, worker=worker, score=5 if n % 3 else 1)
    elsewhere = make_project(TaskKind.LIKERT, slug="elsewhere")
    make_item(elsewhere, external_id="e0")
    _import(tmp_path, elsewhere, [{"item_id": "e0", "verdict": "correct"}], judge="other")
    return project


@pytest.mark.django_db
@pytest.mark.parametrize("ref", ["other", "other@1"])
def test_a_version_without_verdicts_on_the_project_is_refused_with_or_without_its_number(
        version_elsewhere, ref):
    project = version_elsewhere
    with pytest.raises(LookupError, match=f"'{ref}' has no verdicts on here"):
        judge_view(project, ref)
    frame = load_judgments(project=project)
    argument = estimates_report(frame, project=project, judge=ref)
    assert "systems" not in argument and "has no verdicts on here" in argument["skipped"]
    project.estimates_judge = ref
    project.save()
    chosen = estimates_report(frame, project=project)
    assert "systems" not in chosen
    assert f"estimates_judge {ref!r}" in chosen["skipped"]
    assert "has no verdicts on here" in chosen["skipped"]
    with pytest.raises(CommandError, match="has no verdicts on here"):
        call_command("judge_report", project.slug, "--estimates-with", ref, stdout=StringIO())


@pytest.mark.django_db
def test_a_judge_whose_every_verdict_is_unparseable_gives_no_estimates(version_elsewhere):
    from metrics_app.models import JudgeVerdict
    from metrics_app.services.judges.versions import judge_version_create

    project = version_elsewhere
    version = judge_version_create(name="mute", config={
        "base_url": "http://127.0.0.1:1/v1", "model": "m"})[0]
    JudgeVerdict.objects.bulk_create([
        JudgeVerdict(judge_version=version, item=item, content_hash=str(item.pk),
                     parsed=False, reasoning="no score 1-5 found")
        for item in project.items.all()])
    report = estimates_report(load_judgments(project=project), project=project, judge="mute")
    assert "systems" not in report and "no usable verdict" in report["skipped"]


@pytest.mark.django_db
def test_an_item_asked_again_after_its_content_changed_is_read_by_its_newest_verdict():
    """An LLM judge's verdict on an item whose text was then corrected (allowed: no judgment
    yet; the verdict carries a hash of what the judge read, so a rerun asks again): before the
    rerun every door read the old text's verdict as the judge's verdict on the new text; after
    a rerun whose answer was unparseable the judges page still did, and counted 31 answers on
    30 items, where the leaderboard's judge boards read the newest. One rule now
    (`current_verdicts`): per item and order, the newest verdict on what the item holds now,
    parsed or not."""
    from metrics_app.models import JudgeVerdict
    from metrics_app.services.judges.alignment import judge_alignment_report
    from metrics_app.services.judges.runs import judge_project
    from metrics_app.services.judges.versions import judge_version_create
    from testing.openai_server import FakeChatServer, default_behaviour
    from tests.metrics_app.services.judges.test_alignment import _likert

    project = _likert()
    edited = project.items.order_by("id").first()

    def behaviour(prompt: str) -> str:
        return "I cannot tell." if "corrected" in prompt else default_behaviour(prompt)

    with FakeChatServer(behaviour=behaviour, logprobs=False) as server:
        version = judge_version_create(name="rerun", config={
            "base_url": server.url, "model": "fake-judge"})[0]
        judge_project(project=project, version=version)
        assert judge_view(project, "rerun").calls[edited.pk].verdict is not None
        type(edited).objects.filter(pk=edited.pk).update(
            content={**edited.content, "candidate": "corrected: on the mat"})
        # Before the rerun: the verdict judged text the item no longer holds.
        stale = judge_view(project, "rerun")
        assert edited.pk not in stale.calls and stale.on_earlier_content == 1
        assert stale.asked == 29
        assert judge_project(project=project, version=version)["calls"] == 1
    assert JudgeVerdict.objects.filter(judge_version=version, item=edited).count() == 2
    view = judge_view(project, "rerun")
    assert edited.pk not in view.calls
    assert (view.asked, view.unparseable) == (30, 1)
    row = judge_alignment_report(project=project, refs=["rerun"], n_resamples=0)["judges"][
        "rerun@1"]
    assert (row["asked"], row["unparseable"], row["judged_with_labels"]) == (30, 1, 29)
    assert row["on_earlier_content"] == 0
