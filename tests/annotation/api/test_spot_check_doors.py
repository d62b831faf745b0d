"""Spot checks at every door: the spot-check page records them and the workers table counts
them; the REST API lists them (read-only, researchers of the project only, paginated) and
`export_data --spot-checks` writes them (JSON Lines, formula-safe CSV), the same rows as the
admin's CSV. Before, neither the API nor the export had them."""
from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import SpotCheck, TaskKind
from annotation.services.spot_checks import spot_check_record
from annotation.spot_check_selectors import spot_check_counts
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def checked():
    owner = make_user("spot-owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="spot-doors")
    stage = make_stage(project, name="main")
    worker = make_worker(external_id="w-1")
    judgments = [make_judgment(item=make_item(project, external_id=f"q{n}"), stage=stage,
                               worker=worker) for n in range(3)]
    spot_check_record(judgment=judgments[0], verdict="ok", user=owner)
    spot_check_record(judgment=judgments[2], verdict="problem", note="=HYPERLINK(\"x\")",
                      user=owner)
    # Another project's check is never listed.
    other = make_project(TaskKind.LIKERT, owner=owner, slug="spot-other")
    spot_check_record(judgment=make_judgment(item=make_item(other, external_id="z"),
                                             stage=make_stage(other)), verdict="ok")
    return project, judgments


def _api(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_the_api_lists_a_projects_spot_checks_read_only_and_paginated(checked):
    project, judgments = checked
    url = reverse("annotation-api:spot-check-list", args=[project.slug])
    api = _api(project.owner)
    body = api.get(url).json()
    assert body["count"] == 2
    first, second = body["results"]
    assert first == {
        "id": first["id"], "judgment": judgments[0].pk, "item": judgments[0].item_id,
        "item_external_id": "q0", "stage": judgments[0].stage_id, "worker": "w-1",
        "verdict": "ok", "note": "", "checked_by": "spot-owner",
        "checked_at": first["checked_at"]}
    assert second["judgment"] == judgments[2].pk and second["note"] == "=HYPERLINK(\"x\")"
    page = api.get(url, {"limit": 1, "offset": 1}).json()
    assert page["count"] == 2 and [r["judgment"] for r in page["results"]] == [judgments[2].pk]
    # The same totals as the workers table.
    counts = spot_check_counts(project=project)[judgments[0].worker_id]
    assert counts == {"spot_checked": 2,
                      "spot_problems": sum(r["verdict"] == "problem" for r in body["results"])}
    assert api.post(url, {"judgment": judgments[1].pk, "verdict": "ok"},
                    format="json").status_code == 405
    assert SpotCheck.objects.count() == 3


@pytest.mark.reliability
def test_another_researchers_project_is_a_404_and_a_non_researcher_a_403(checked):
    project, _judgments = checked
    url = reverse("annotation-api:spot-check-list", args=[project.slug])
    assert _api(make_user("stranger")).get(url).status_code == 404
    assert _api(make_user("annotator", staff=False)).get(url).status_code == 403
    assert APIClient().get(url).status_code in (401, 403)
    missing = reverse("annotation-api:spot-check-list", args=["no-such"])
    assert _api(project.owner).get(missing).status_code == 404


def test_the_schema_documents_the_list():
    api = _api(make_user("reader"))
    schema = json.loads(api.get("/api/schema/", {"format": "json"}).content)
    operation = schema["paths"]["/api/projects/{project_slug}/spot-checks/"]["get"]
    assert "200" in operation["responses"] and "404" in operation["responses"]
    assert "post" not in schema["paths"]["/api/projects/{project_slug}/spot-checks/"]


@pytest.mark.reliability
def test_export_data_writes_the_spot_checks_as_json_lines_and_formula_safe_csv(checked,
                                                                               tmp_path):
    project, judgments = checked
    out = io.StringIO()
    call_command("export_data", project.slug, "--spot-checks", stdout=out, stderr=io.StringIO())
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["judgment"], r["item"], r["worker"], r["verdict"], r["checked_by"])
            for r in rows] == [(judgments[0].pk, "q0", "w-1", "ok", "spot-owner"),
                               (judgments[2].pk, "q2", "w-1", "problem", "spot-owner")]
    assert rows[1]["note"] == "=HYPERLINK(\"x\")" and rows[0]["project"] == project.slug
    assert rows[0]["stage"] == "main" and rows[0]["checked_at"]

    path = tmp_path / "spot.csv"
    err = io.StringIO()
    call_command("export_data", project.slug, "--spot-checks", "--format", "csv",
                 "--output", str(path), stderr=err)
    assert "2 spot checks written" in err.getvalue()
    table = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
    assert list(table[0]) == ["project", "stage", "item", "judgment", "worker", "verdict",
                              "note", "checked_by", "checked_at"]
    assert table[1]["note"] == "'=HYPERLINK(\"x\")"  # escaped, not run by a spreadsheet
    assert table[0]["judgment"] == str(judgments[0].pk)


def test_export_data_spot_checks_refuse_what_does_not_apply(checked):
    project, _judgments = checked
    with pytest.raises(CommandError, match="drop --aggregate"):
        call_command("export_data", project.slug, "--spot-checks", "--aggregate")
    with pytest.raises(CommandError, match="drop --include-rejected"):
        call_command("export_data", project.slug, "--spot-checks", "--include-rejected")
    out = io.StringIO()
    call_command("export_data", project.slug, "--spot-checks", "--stage", "main", stdout=out,
                 stderr=io.StringIO())
    assert len(out.getvalue().splitlines()) == 2


@pytest.mark.reliability
def test_the_workers_table_has_the_spot_check_counts_at_every_door(checked, client):
    """The dashboard's workers table showed "spot checks (problems)"; the report API and
    `report --json`, the same table, had no such columns. They now read them the same way,
    now, also when the report comes from the cache (a spot check adds no judgment)."""
    from metrics_app.reports.project import report_refresh

    project, judgments = checked
    report_refresh(project=project)  # cached before the next check: read now, not stored
    spot_check_record(judgment=judgments[1], verdict="problem", user=project.owner)
    client.force_login(project.owner)
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    shown = {w["external_id"]: (w["spot_checked"], w["spot_problems"])
             for w in page.context["workers"]}
    api = _api(project.owner).get(
        reverse("metrics-api:project-report", args=[project.slug])).json()
    out = io.StringIO()
    call_command("report", project.slug, "--json", stdout=out)
    for workers in (api["workers"], json.loads(out.getvalue())["workers"]):
        assert {w["external_id"]: (w["spot_checked"], w["spot_problems"])
                for w in workers} == shown == {"w-1": (3, 2)}
