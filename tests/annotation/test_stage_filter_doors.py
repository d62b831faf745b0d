"""A stage is named the same way at every door that filters by one: by its id or its name
(`annotation.access_selectors.project_stage_by_ref`), so the judgments API, the items API,
`export_data --stage` and the report API read the same stage from the same words."""
from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from annotation.models import StageKind, TaskKind
from testing.factories import make_item, make_judgment, make_project, make_stage, make_user
from tests.support.imports import run_export

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.fixture
def study():
    owner = make_user("alice")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="study")
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial")
    full = make_stage(project, kind=StageKind.FULL, name="full")
    items = [make_item(project, external_id=f"q{n}") for n in range(3)]
    for item in items[:2]:
        make_judgment(item=item, stage=trial)
    make_judgment(item=items[2], stage=full)
    api = APIClient()
    api.force_authenticate(owner)
    return {"project": project, "trial": trial, "api": api}


def test_the_judgments_api_names_a_stage_as_the_export_does(study):
    api, trial = study["api"], study["trial"]
    exported = sorted(json.loads(line)["external_id"]
                      for line in run_export("study", "--stage", "trial").splitlines())
    by_name = api.get("/api/projects/study/judgments/", {"stage": "trial"})
    by_id = api.get("/api/projects/study/judgments/", {"stage": trial.pk})
    assert by_name.status_code == 200, by_name.json()
    assert by_name.json()["results"] == by_id.json()["results"]
    assert sorted(row["item_external_id"] for row in by_name.json()["results"]) == exported == ["q0", "q1"]
    report = api.get("/api/metrics/projects/study/report/", {"stage": "trial"})
    assert report.status_code == 200 and report.json()["n_judgments"] == 2


def test_the_items_api_names_a_stage_by_name_too(study):
    api, trial = study["api"], study["trial"]
    by_name = api.get("/api/projects/study/items/", {"stage": "trial"})
    assert by_name.status_code == 200, by_name.json()
    assert by_name.json()["results"] == api.get("/api/projects/study/items/",
                                                {"stage": trial.pk}).json()["results"]
    missing = api.get("/api/projects/study/judgments/", {"stage": "nope"})
    assert missing.status_code == 400 and "stage" in missing.json()
