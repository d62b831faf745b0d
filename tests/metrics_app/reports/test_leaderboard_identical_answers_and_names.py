"""Two traps of the A/B leaderboard.

- A vote between two identical answers (one text after Unicode and whitespace normalization:
  two systems that wrote the same answer) was a vote between the two systems: the judge could
  only guess, and the guess moved the ratings. Every board leaves such votes out, counted and
  said in its notes: the humans' (overall, per domain), each metric's and LLM judge's, the
  combined ones, their win-rate matrices and bootstrap intervals, the CSV, the API, the
  dashboard and `manage.py report`; adaptive pairing never draws such an item and the
  preference export never writes it. The items are stored (a gold check may use one), and an
  import says how many it holds.
- System names that differ only in Unicode normalization (NFC and NFD "é") or the spaces
  around them were two systems. Every door stores one spelling (`normalize_system`), and the
  leaderboard reads names through it, so names stored before still group.
"""
from __future__ import annotations

import io
import json
import unicodedata

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Item, RoutingDraw, StageKind, StageStatus, TaskKind
from annotation.services.preference_exports import preference_rows
from metrics_app.models import Judge, JudgeVerdict, JudgeVersion, MetricScore
from metrics_app.reports.leaderboard import identical_note, leaderboard_csv
from metrics_app.reports.project import project_report
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]
SYSTEMS = ("alpha", "beta", "gamma")
CAFE_NFC = "Caf\u00e9"
CAFE_NFD = "Cafe\u0301"
IDENTICAL_ITEMS = 4
WORKERS = 5


def _content(a: str, b: str, text_a: str, text_b: str) -> dict:
    return {"question": "Why is the sky blue?", "evidence": [], "setting": "HM",
            "answer_a": {"text": text_a, "kind": "model", "upvotes": None, "system": a},
            "answer_b": {"text": text_b, "kind": "model", "upvotes": None, "system": b}}


def _judged(project, stage, workers, judge_version, content, picks, *, metric, verdict):
    """An item judged by every worker (`picks` by worker), scored by a metric (A's score,
    B's) and given `verdict` by the LLM judge in both orders."""
    item = make_item(project, content=content, domain="Law")
    for n, (worker, choice) in enumerate(zip(workers, picks, strict=True)):
        make_judgment(item=item, stage=stage, worker=worker, choice=choice,
                      presented_order=["A", "B"] if n % 2 else ["B", "A"])
    for side, value in zip("AB", metric, strict=True):
        MetricScore.objects.create(item=item, metric="len", version="1", side=side, value=value)
    for order in ("AB", "BA"):
        JudgeVerdict.objects.create(judge_version=judge_version, item=item, order=order,
                                    content_hash="x", verdict=verdict, parsed=True)
    return item


def _arena(slug: str, *, identical: bool, workers=None, version=None):
    """12 pairs of three systems with different answers; with `identical`, 4 more whose two
    answers are one text (NFC and NFD, other spacing), which every judge "prefers" B on."""
    owner = make_user(f"owner-{slug}")
    project = make_project(TaskKind.AB, slug=slug, owner=owner)
    stage = make_stage(project, kind=StageKind.FULL)
    workers = workers or [make_worker(external_id=f"{slug}-w{i}") for i in range(WORKERS)]
    version = version or JudgeVersion.objects.create(
        judge=Judge.objects.create(name=f"llm-{slug}", kind="llm"), version="1", config={},
        config_hash=slug)
    for n in range(12):
        a, b = SYSTEMS[n % 3], SYSTEMS[(n + 1) % 3]
        picks = ["A" if (n + i) % 3 else "B" for i in range(WORKERS)]
        _judged(project, stage, workers, version,
                _content(a, b, f"{a} says scattering {n}.", f"{b} says the sea {n}."),
                picks, metric=(n % 4, 1.5), verdict="AB"[n % 2])
    if identical:
        for _ in range(IDENTICAL_ITEMS):
            _judged(project, stage, workers, version,
                    _content("beta", "gamma", f"{CAFE_NFC} says  scattering.",
                             f" {CAFE_NFD} says scattering.\n"),
                    ["B"] * WORKERS, metric=(1.0, 2.0), verdict="B")
    return project, owner


def _without_notes(value):
    """A board without its notes and, for a judge, what it says about itself."""
    if isinstance(value, dict):
        return {k: _without_notes(v) for k, v in value.items() if k not in ("notes", "judge")}
    if isinstance(value, list):
        return [_without_notes(v) for v in value]
    return value


def test_votes_on_identical_answers_are_left_out_of_every_board_and_said(client):
    workers = [make_worker(external_id=f"w{i}") for i in range(WORKERS)]
    version = JudgeVersion.objects.create(judge=Judge.objects.create(name="llm", kind="llm"),
                                          version="1", config={}, config_hash="llm")
    with_same, owner = _arena("same-text", identical=True, workers=workers, version=version)
    control, _ = _arena("control", identical=False, workers=workers, version=version)
    board = project_report(project=with_same)["leaderboard"]
    expected = project_report(project=control)["leaderboard"]
    # Every board (strengths, both intervals, rank intervals, win-rate and expected matrices,
    # robustness, the judges' and the combined boards) is the board without those items.
    for key in ("overall", "by_domain", "judges", "combined", "side_by_side"):
        assert _without_notes(board.get(key)) == _without_notes(expected.get(key)), key
    assert leaderboard_csv(board) == leaderboard_csv(expected)
    votes = IDENTICAL_ITEMS * WORKERS
    assert board["skipped"]["identical_answers"] == votes
    assert board["skipped"]["identical_answer_items"] == IDENTICAL_ITEMS
    assert expected["skipped"]["identical_answers"] == 0
    note = identical_note(votes, IDENTICAL_ITEMS)
    assert board["overall"]["notes"] == [*expected["overall"]["notes"], note]
    assert board["judges"]["len@1"]["judge"]["identical_answers"] == IDENTICAL_ITEMS
    assert board["judges"]["llm@1"]["judge"]["identical_answers"] == 2 * IDENTICAL_ITEMS
    assert board["judges"]["len@1"]["notes"][-1] == identical_note(IDENTICAL_ITEMS,
                                                                   IDENTICAL_ITEMS)
    assert board["judges"]["llm@1"]["notes"][-1] == identical_note(
        2 * IDENTICAL_ITEMS, IDENTICAL_ITEMS)
    assert board["combined"]["llm@1"]["notes"][-1] == identical_note(
        votes + 2 * IDENTICAL_ITEMS, IDENTICAL_ITEMS)
    # The doors that show the board say it, word for word.
    client.force_login(owner)
    api = client.get(reverse("metrics-api:project-leaderboard", args=[with_same.slug])).json()
    assert note in api["overall"]["notes"]
    html = client.get(reverse("metrics:project-dashboard", args=[with_same.slug]))
    assert note in html.content.decode()
    text = io.StringIO()
    call_command("report", with_same.slug, stdout=text)
    assert note in text.getvalue()


def test_adaptive_pairing_and_the_preference_export_leave_identical_answers_out():
    from metrics_app.services.pairing import stage_draw_adaptive_pairs

    project, _ = _arena("same-text-pairs", identical=True)
    same = {i.pk for i in Item.objects.filter(project=project)
            if CAFE_NFC in unicodedata.normalize("NFC", i.content["answer_a"]["text"])}
    assert len(same) == IDENTICAL_ITEMS
    stage = make_stage(project, kind=StageKind.FULL, name="next", status=StageStatus.DRAFT,
                       settings={"pairing": "adaptive", "pairing_budget": 8})
    stage_draw_adaptive_pairs(stage=stage)
    draws = dict(RoutingDraw.objects.filter(stage=stage).values_list("item_id", "probability"))
    # An item of probability 0 is not recorded (it could never be drawn).
    assert draws and not same & set(draws)
    assert all(p > 0 for p in draws.values())
    rows = list(preference_rows(project=project))
    assert rows and all(r["chosen"] != r["rejected"] for r in rows)
    assert not {r["metadata"]["item"] for r in rows} & set(
        Item.objects.filter(pk__in=same).values_list("external_id", flat=True))


def test_an_import_counts_identical_answers_and_stores_them_gold_included(tmp_path):
    make_project(TaskKind.AB, slug="same-import", owner=make_user("imp"))
    lines = [{"external_id": "same", "content": _content("x", "y", "One text.", "One  text.")},
             {"external_id": "gold", "is_gold_check": True, "gold": {"choice": "A"},
              "content": _content("x", "y", "Two.", "Two.")},
             {"external_id": "differ", "content": _content("x", "y", "One.", "Other.")}]
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = io.StringIO()
    call_command("import_data", "jsonl", str(path), "--project", "same-import", "--no-report",
                 stdout=out)
    assert Item.objects.filter(project__slug="same-import").count() == 3
    assert "2 A/B item(s) whose two answers are the same text (1 of them gold checks)" \
        in out.getvalue()


def test_system_names_differing_only_in_unicode_form_or_spacing_are_one_system():
    """Items stored before the rule (through the ORM: NFD, NFC and spaces around) and a model
    answer named by an NFD `source`: one system."""
    project = make_project(TaskKind.AB, slug="cafe")
    stage = make_stage(project)
    spellings = [CAFE_NFC, CAFE_NFD, f" {CAFE_NFD} ", f"{CAFE_NFC}\t"]
    for n in range(12):
        item = make_item(project, content=_content(
            spellings[n % 4], "bistro", f"Answer {n}.", f"Other {n}."))
        for choice in ("A", "A", "B"):
            make_judgment(item=item, stage=stage, choice=choice)
    derived = _content("unused", "bistro", "From the source.", "From bistro.")
    del derived["answer_a"]["system"]
    item = make_item(project, source=CAFE_NFD, content=derived)
    for choice in ("A", "B", "B"):
        make_judgment(item=item, stage=stage, choice=choice)
    board = project_report(project=project)["leaderboard"]["overall"]
    assert {row["system"] for row in board["systems"]} == {"bistro", CAFE_NFC}
    assert len(board["systems"]) == 2
    assert board["model"]["n_votes"] == 39


def test_every_item_door_stores_one_spelling_of_a_system(tmp_path, client):
    owner = make_user("cafe-owner", superuser=True)
    project = make_project(TaskKind.AB, slug="cafe-doors", owner=owner)
    api = APIClient()
    api.force_authenticate(owner)
    response = api.post("/api/projects/cafe-doors/items/", {
        "external_id": "api", "content": _content(f" {CAFE_NFD} ", "b", "x1", "y")},
        format="json")
    assert response.status_code == 201, response.content
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"external_id": "jsonl",
                                "content": _content(CAFE_NFD, "b", "x2", "y")}) + "\n")
    for _ in range(2):  # imported again: the same item, nothing refused or changed
        call_command("import_data", "jsonl", str(path), "--project", "cafe-doors",
                     "--no-report", stdout=io.StringIO())
    client.force_login(owner)
    response = client.post(reverse("admin:annotation_item_add"), {
        "project": project.pk, "external_id": "admin", "split": "",
        "content": json.dumps(_content(CAFE_NFD + " ", "b", "x3", "y")), "gold": "null",
        "metadata": "{}"})
    assert response.status_code == 302, response.content[:3000]
    stored = dict(Item.objects.filter(project=project).values_list(
        "external_id", "content__answer_a__system"))
    assert stored == {"api": CAFE_NFC, "jsonl": CAFE_NFC, "admin": CAFE_NFC}
    assert all(unicodedata.is_normalized("NFC", name) for name in stored.values())


def test_a_judged_item_stored_with_an_old_spelling_can_still_be_edited_in_the_admin(client):
    """Its content is fixed once judged; the form respelling the name on save would be a
    change of it, refused, and the flags (excluded) could no longer be set."""
    owner = make_user("cafe-editor", superuser=True)
    project = make_project(TaskKind.AB, slug="cafe-edit", owner=owner)
    content = _content(f" {CAFE_NFD}", "b", "x", "y")
    item = make_item(project, content=content)
    make_judgment(item=item, stage=make_stage(project), choice="A")
    client.force_login(owner)
    response = client.post(reverse("admin:annotation_item_change", args=[item.pk]), {
        "project": project.pk, "external_id": item.external_id, "split": "",
        "design_unit": item.design_unit, "content": json.dumps(content), "gold": "null",
        "metadata": "{}", "excluded": "on", "exclusion_reason": "off topic"})
    assert response.status_code == 302, response.content[:3000]
    item.refresh_from_db()
    assert item.excluded and item.content == content


def test_a_file_or_request_stored_before_the_rule_is_the_same_item_when_sent_again(tmp_path):
    """An item stored with an NFD name (before the one spelling): importing its file again, or
    retrying its API request, is the same item, not a conflict over a different content."""
    owner = make_user("cafe-again", superuser=True)
    project = make_project(TaskKind.AB, slug="cafe-again", owner=owner)
    old = _content(CAFE_NFD, "b", "x", "y")
    make_item(project, external_id="jsonl", content=old, dataset="", split="")
    make_item(project, external_id="api", content=_content(CAFE_NFD, "b", "x2", "y"))
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"external_id": "jsonl", "content": old}) + "\n")
    out = io.StringIO()
    call_command("import_data", "jsonl", str(path), "--project", "cafe-again", "--no-report",
                 stdout=out)
    assert "items: 0 created, 1 already present" in out.getvalue()
    api = APIClient()
    api.force_authenticate(owner)
    response = api.post("/api/projects/cafe-again/items/", {
        "external_id": "api", "content": _content(CAFE_NFD, "b", "x2", "y")}, format="json")
    assert response.status_code == 200, response.content
    assert Item.objects.get(project=project, external_id="jsonl").content == old


def test_a_renamed_copy_of_a_file_stored_before_the_rule_is_still_refused(tmp_path):
    """A copy under new external ids of items stored with an NFD name (before the one
    spelling) repeats them: refused as the renamed copy it is, not imported a second time
    (the stored content is compared in the one spelling, as importing again compares it)."""
    from django.core.management.base import CommandError

    project = make_project(TaskKind.AB, slug="cafe-copy")
    old = _content(CAFE_NFD, "b", "x", "y")
    make_item(project, external_id="first", content=old, dataset="", split="")
    path = tmp_path / "copy.jsonl"
    path.write_text(json.dumps({"external_id": "first-copy", "content": old}) + "\n")
    with pytest.raises(CommandError, match="already holds under another external id"):
        call_command("import_data", "jsonl", str(path), "--project", "cafe-copy",
                     "--no-report", stdout=io.StringIO())
    assert Item.objects.filter(project=project).count() == 1
