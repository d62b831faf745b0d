"""An estimate that cannot be made says why, in one sentence from the place that decides it,
the same at every door (the dashboard's "System accuracy" table, the project report API,
`manage.py report`, `judge_report --estimates-with`): no human label in a system, one label
(no interval, no prediction-powered estimate, no bias), a judge that scored none of the
system's items, a LERC version that saw every item of the system it scored, no LERC scores at
all. Before, each of these cells read "—"."""
from __future__ import annotations

import io
import re
from html import unescape

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import StageKind, TaskKind
from testing.factories import make_judgment, make_project, make_stage, make_user, make_worker
from tests.metrics_app.reports.test_learned_judge_left_out import (
    item_with_passage,
    promoted,
    store_lerc,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

NONE = "no judgments that count yet"
ONE_INTERVAL = "1 item with a human label; an interval needs 2"
ONE_PPI = ("1 item with a human label; a prediction-powered estimate needs 2 (to measure the "
           "judge's error)")
ONE_BIAS = "1 item with a human label; the judge's bias needs 2"
UNSCORED = "LERC scored none of this system's items"
SEEN = "LERC v1 was trained or calibrated on every item of this system it scored"


@pytest.fixture
def systems():
    """"full": 4 answers judged twice and scored; "one": 3 scored, 1 judged; "unjudged": 2
    scored, none judged; "unscored": 2 judged, none scored; "seen": 2 judged and scored by a
    LERC version that trained on them."""
    owner = make_user("owner-estimates")
    project = make_project(TaskKind.LIKERT, slug="estimates-why", owner=owner)
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"est-w{i}") for i in range(2)]
    seen = []
    for system, n_items, n_judged, scored in (("full", 4, 4, True), ("one", 3, 1, True),
                                              ("unjudged", 2, 0, True),
                                              ("unscored", 2, 2, False), ("seen", 2, 2, True)):
        for n in range(n_items):
            item = item_with_passage(project, f"{system} passage {n}.", source=system)
            if n < n_judged:
                for worker in workers:
                    make_judgment(item=item, stage=stage, worker=worker,
                                  score=5 if n % 2 else 1)
            if scored:
                store_lerc(item, 0.3 + 0.1 * n)
            if system == "seen":
                seen.append(item.pk)
    promoted(project, examples_seen={"items": seen, "groups": [], "test_items": []})
    return project, owner


def test_an_estimate_that_cannot_be_made_says_why_at_every_door(systems, client):
    project, owner = systems
    api = APIClient()
    api.force_authenticate(owner)
    estimates = api.get(reverse("metrics-api:project-report", args=[project.slug])
                        ).json()["estimates"]
    rows = {name: row["accuracy"] for name, row in estimates["systems"].items()}
    assert rows["full"]["human"]["undefined"] is None
    assert rows["full"]["ppi"]["undefined"] is None and rows["full"]["judge_undefined"] is None
    assert rows["one"]["human"]["low"] is None
    assert rows["one"]["human"]["undefined"] == ONE_INTERVAL
    assert rows["one"]["ppi"]["estimate"] is None
    assert rows["one"]["ppi"]["undefined"] == ONE_PPI
    assert rows["one"]["metric"]["bias_undefined"] == ONE_BIAS
    assert rows["unjudged"]["human"]["estimate"] is None
    assert rows["unjudged"]["human"]["undefined"] == NONE
    assert rows["unjudged"]["ppi"]["undefined"] == NONE
    assert "metric" not in rows["unscored"] and rows["unscored"]["judge_undefined"] == UNSCORED
    assert "ppi" not in rows["seen"] and rows["seen"]["judge_undefined"] == SEEN
    pairs = {(p["a"], p["b"]): p["accuracy"] for p in estimates["pairs"]}
    assert pairs[("full", "one")]["ppi"]["undefined"] == f"one: {ONE_PPI}"
    assert pairs[("full", "unjudged")]["ppi"]["undefined"] == f"unjudged: {NONE}"

    client.force_login(owner)
    html = unescape(client.get(reverse("metrics:project-dashboard", args=[project.slug]))
                    .content.decode())
    table = html[html.index('id="estimates"'):]
    for why in (f"(no interval: {ONE_INTERVAL})", f"undefined: {ONE_PPI}",
                f"bias undefined: {ONE_BIAS}", f"undefined: {NONE}", f"undefined: {UNSCORED}",
                f"undefined: {SEEN}", f"undefined: one: {ONE_PPI}"):
        assert why in table, why
    # A system without the judge's scores says so once, across the judge's three columns.
    assert table.count(f"undefined: {UNSCORED}") == 1

    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    text = out.getvalue()
    lines = {line.split()[0]: line for line in text.splitlines()
             if re.match(r"  (full|one|unjudged|unscored|seen) ", line) and " − " not in line}
    assert f"(no interval: {ONE_INTERVAL})" in lines["one"]
    assert f"undefined ({ONE_PPI})" in lines["one"] and f"bias undefined: {ONE_BIAS}" in lines["one"]
    assert f"undefined ({NONE})" in lines["unjudged"]
    assert lines["unscored"].count(f"undefined ({UNSCORED})") == 2  # judge alone and PPI
    assert lines["seen"].count(f"undefined ({SEEN})") == 2
    assert f"full − one: undefined (one: {ONE_PPI})" in text

    out = io.StringIO()
    call_command("judge_report", project.slug, "--estimates-with", "metric:lerc_prob",
                 stdout=out)
    assert f"humans undefined ({NONE})" in out.getvalue()
    assert f"with the judge undefined ({ONE_PPI})" in out.getvalue()
    assert ("with the judge undefined (metric:lerc_prob v1 was trained or calibrated on every "
            "item of this system it scored)") in out.getvalue()


def test_without_lerc_scores_each_system_says_so_in_the_notes_words():
    owner = make_user("owner-no-lerc")
    project = make_project(TaskKind.LIKERT, slug="estimates-no-lerc", owner=owner)
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    for n in range(3):
        make_judgment(item=item_with_passage(project, f"p{n}.", source="s"), stage=stage,
                      worker=make_worker(), score=1 + 2 * n)
    api = APIClient()
    api.force_authenticate(owner)
    estimates = api.get(reverse("metrics-api:project-report", args=[project.slug])
                        ).json()["estimates"]
    assert estimates["systems"]["s"]["accuracy"]["judge_undefined"] == (
        "no LERC scores stored for this project")
    assert estimates["note"].startswith("No LERC scores stored for this project: ")
