"""The judges page, its reliability plots, and the judge APIs (report, plan, jobs): visible
to the project's researchers only, the numbers of the alignment report, cached until a
judgment, verdict or score arrives."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import TaskKind
from metrics_app.models import JudgeJob, Report
from metrics_app.services.judges.alignment import judge_alignment_report_refresh
from metrics_app.services.judges.imports import verdicts_import
from testing.factories import make_item, make_judgment, make_project, make_stage, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(tmp_path):
    owner = make_user("judge-owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="judged")
    stage = make_stage(project)
    rows = []
    for n in range(40):
        correct = n % 2 == 0
        item = make_item(project, external_id=f"i{n}", source="s1" if n < 20 else "s2")
        make_judgment(item=item, stage=stage, score=5 if correct else 1)
        rows.append({"item_id": f"i{n}", "probability": 0.9 if correct == (n % 5 != 0) else 0.2,
                     "reasoning": f"because {n}"})
    path = tmp_path / "v.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="ext", version="1")
    return project


def test_the_page_shows_every_judge_with_intervals_and_the_reliability_plot(client, project):
    client.force_login(project.owner)
    page = client.get(reverse("metrics:project-judges", args=[project.slug]),
                      {"resamples": "50"})
    text = page.content.decode()
    assert page.status_code == 200 and "ext@1" in text and "no item has two human labels" in text
    assert "because 0" in text  # a disagreement with the judge's reasoning (item 0)
    row = page.context["rows"][0]
    assert row["judge"]["accuracy"] == pytest.approx(0.8)
    plot = client.get(reverse("metrics:judge-reliability", args=[project.slug, "ext@1"]),
                      {"resamples": "50"})
    assert plot.status_code == 200 and plot["Content-Type"] == "image/png"
    assert client.get(reverse("metrics:judge-reliability",
                              args=[project.slug, "nobody@1"])).status_code == 404


def test_a_project_no_judge_has_scored_says_how_to_get_one(client):
    """The demo's EVOUNA project (1,525 human labels, nothing scored yet) showed a table of
    headers with no row and an empty "Per judge" heading: nothing said what fills them."""
    owner = make_user("first-week")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="unjudged")
    stage = make_stage(project)
    for n in range(4):
        make_judgment(item=make_item(project, external_id=f"u{n}"), stage=stage, score=5)
    client.force_login(owner)
    page = client.get(reverse("metrics:project-judges", args=[project.slug]))
    text = page.content.decode()
    assert page.status_code == 200 and page.context["rows"] == []
    assert "No judge to compare yet" in text
    assert reverse("metrics:project-metrics", args=[project.slug]) in text
    assert "run_judge unjudged" in text
    assert "<h2>Per judge</h2>" not in text and "<th>judge</th>" not in text


@pytest.mark.reliability
def test_strangers_see_nothing(client, project):
    client.force_login(make_user("stranger"))
    assert client.get(reverse("metrics:project-judges", args=[project.slug])).status_code == 404
    api = APIClient()
    api.force_authenticate(make_user("stranger2"))
    for name in ("metrics-api:judge-report", "metrics-api:judge-jobs"):
        assert api.get(reverse(name, args=[project.slug])).status_code == 404
    assert api.post(reverse("metrics-api:judge-jobs", args=[project.slug]),
                    {"judge": "ext"}, format="json").status_code == 404


def test_report_api_is_cached_until_something_new_arrives(project):
    api = APIClient()
    api.force_authenticate(project.owner)
    url = reverse("metrics-api:judge-report", args=[project.slug])
    computed = api.get(url, {"resamples": 20}).json()
    assert computed["judges"]["ext@1"]["n"] == 40
    assert not Report.objects.filter(project=project).exists()  # a GET stores nothing
    first = judge_alignment_report_refresh(project=project, n_resamples=20)
    assert api.get(url, {"resamples": 20}).json()["computed_at"] == first["computed_at"]
    make_judgment(item=project.items.first(), score=5)
    assert api.get(url, {"resamples": 20}).json()["computed_at"] != first["computed_at"]
    assert Report.objects.filter(project=project, kind="judge_alignment").count() == 1
    assert api.get(url, {"resamples": -1}).status_code == 400


@pytest.mark.reliability
def test_the_api_serves_the_pages_stored_copy_and_says_when_it_was_computed(client, project):
    """The API computed 1,000 resamples on every call (5.3-5.8 s on a 26k-item project)
    while the page read the copy the report refresh stores: a polling script made the
    server do that work per call. Now both read the stored copy by one rule and compute
    only when it is not current."""
    from unittest import mock

    from metrics_app.services.judges import alignment

    stored = judge_alignment_report_refresh(project=project,
                                            n_resamples=alignment.PAGE_RESAMPLES)
    api = APIClient()
    api.force_authenticate(project.owner)
    client.force_login(project.owner)
    url = reverse("metrics-api:judge-report", args=[project.slug])
    with mock.patch.object(alignment, "judge_alignment_report",
                           wraps=alignment.judge_alignment_report) as compute:
        first, second = api.get(url).json(), api.get(url).json()
        page = client.get(reverse("metrics:project-judges", args=[project.slug]))
        assert compute.call_count == 0
    assert first == second
    assert first["judges"] == page.context["report"]["judges"] == stored["judges"]
    assert first["n_resamples"] == alignment.PAGE_RESAMPLES
    assert first["stored_copy"] == {"computed_at": stored["computed_at"], "current": True,
                                    "n_resamples": alignment.PAGE_RESAMPLES, "judges": None,
                                    "served": True}

    # Other options: computed in the call, and the stored copy said to be current but unused.
    with mock.patch.object(alignment, "judge_alignment_report",
                           wraps=alignment.judge_alignment_report) as compute:
        other = api.get(url, {"resamples": 20}).json()
        assert compute.call_count == 1
    assert other["stored_copy"]["served"] is False and other["stored_copy"]["current"] is True

    # A new judgment: the stored copy is no longer current; API and page compute alike.
    make_judgment(item=project.items.first(), score=5)
    with mock.patch.object(alignment, "judge_alignment_report",
                           wraps=alignment.judge_alignment_report) as compute:
        after = api.get(url).json()
        page = client.get(reverse("metrics:project-judges", args=[project.slug]))
        assert compute.call_count == 2
    assert after["stored_copy"]["current"] is False and after["stored_copy"]["served"] is False
    assert after["stored_copy"]["computed_at"] == stored["computed_at"]
    assert after["computed_at"] != stored["computed_at"]
    assert after["judges"] == page.context["report"]["judges"]
    assert not Report.objects.filter(project=project).exclude(
        data__computed_at=stored["computed_at"]).exists()  # a GET stores nothing


def test_plan_and_job_apis(project, django_capture_on_commit_callbacks):
    from metrics_app.services.judges.versions import judge_version_create

    api = APIClient()
    api.force_authenticate(project.owner)
    plan = api.get(reverse("metrics-api:judge-plan", args=[project.slug]),
                   {"budget": 10, "label_cost": 0.5}).json()
    assert plan["best"]["judge"] in {"ext@1", "humans"} and plan["n_items"] == 40
    assert api.get(reverse("metrics-api:judge-plan", args=[project.slug]),
                   {"budget": 10}).status_code == 400
    url = reverse("metrics-api:judge-jobs", args=[project.slug])
    refused = api.post(url, {"judge": "ext"}, format="json")
    assert refused.status_code == 400 and "not an LLM judge" in refused.json()["judge"][0]
    judge_version_create(name="llm", config={"base_url": "http://127.0.0.1:9/v1",
                                             "model": "fake-judge"})
    with django_capture_on_commit_callbacks(execute=False):
        created = api.post(url, {"judge": "llm", "budget": 2.5, "concurrency": 4},
                           format="json")
    assert created.status_code == 202 and created.json()["judge"] == "llm@1"
    job = JudgeJob.objects.get()
    assert job.budget == 2.5 and job.options == {"concurrency": 4} and job.requested_by == \
        project.owner
    listed = api.get(url).json()
    assert listed["count"] == 1 and listed["results"][0]["status"] == "queued"
    assert api.post(url, {"judge": "llm", "concurrency": 0}, format="json").status_code == 400
