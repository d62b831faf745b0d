"""The project's choice of judge for the system estimates (`Project.estimates_judge`) and the
stage's routing judge (`routing_judge`): used when no judge is passed, named in the report,
and a judge reference that is malformed or unknown refused or reported with a clear error."""
from __future__ import annotations

import json

import numpy as np
import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.domain.stage_settings import stage_settings_errors
from annotation.judgment_selectors import load_judgments
from annotation.models import StageKind, StageStatus, TaskKind
from annotation.stage_errors import StageError
from metrics_app.models import MetricScore
from metrics_app.reports.estimates import estimates_report
from metrics_app.services.judges.imports import verdicts_import
from metrics_app.services.routing import stage_route_by_uncertainty
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
def study(tmp_path):
    """Two systems of 100 answers, 30 of each judged; LERC scores every answer (P = 0.5, no
    information) and an imported judge gives informative probabilities."""
    owner = make_user("owner")
    project = make_project(TaskKind.LIKERT, slug="chosen", owner=owner)
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    worker = make_worker()
    rng = np.random.default_rng(7)
    rows = []
    for system, accuracy in (("x", 0.8), ("y", 0.4)):
        for n in range(100):
            item = make_item(project, source=system, external_id=f"{system}{n}")
            correct = bool(rng.random() < accuracy)
            rows.append({"item_id": item.external_id,
                         "probability": 0.9 if correct else 0.1})
            MetricScore.objects.create(item=item, metric="lerc_prob", version="v3", value=0.5)
            if n < 30:
                make_judgment(item=item, stage=stage, worker=worker, score=5 if correct else 1)
    path = tmp_path / "v.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="imported", version="1")
    return project, owner


def test_the_projects_estimates_judge_replaces_lerc(study):
    project, _owner = study
    frame = load_judgments(project=project)
    default = estimates_report(frame, project=project)
    assert default["metric"]["judge"] == "lerc" and default["metric"]["chosen_by"] == "default"
    project.estimates_judge = "imported"
    project.save()
    chosen = estimates_report(frame, project=project)
    assert chosen["metric"]["judge"] == "imported@1"
    assert chosen["metric"]["chosen_by"] == "project"
    # The same numbers as passing the judge explicitly.
    explicit = estimates_report(frame, project=project, judge="imported")
    assert chosen["systems"] == explicit["systems"]
    for system in ("x", "y"):
        ppi = chosen["systems"][system]["accuracy"]["ppi"]
        # An informative judge is worth more than its 30 labels; LERC's constant 0.5 is not.
        assert ppi["effective_n"] > 30
        assert default["systems"][system]["accuracy"]["ppi"]["effective_n"] < \
            ppi["effective_n"]
    # An argument still wins over the project's choice.
    argument = estimates_report(frame, project=project, judge="metric:lerc_prob")
    assert argument["metric"]["chosen_by"] == "argument"


def test_an_unknown_estimates_judge_is_reported_by_name(study):
    project, _owner = study
    project.estimates_judge = "nobody"
    project.save()
    report = estimates_report(load_judgments(project=project), project=project)
    assert "systems" not in report
    assert "estimates_judge 'nobody'" in report["skipped"]
    assert "no judge named 'nobody'" in report["skipped"]


def test_estimates_judge_over_http(client, study):
    project, owner = study
    api = APIClient()
    api.force_authenticate(owner)
    url = f"/api/projects/{project.slug}/"
    bad = api.patch(url, {"estimates_judge": "two words"}, format="json")
    assert bad.status_code == 400
    assert "is not a judge reference" in bad.json()["estimates_judge"][0]
    project.refresh_from_db()
    assert project.estimates_judge == ""
    assert api.patch(url, {"estimates_judge": "imported@1"}, format="json").status_code == 200
    assert api.get(url).json()["estimates_judge"] == "imported@1"
    report = api.get(reverse("metrics-api:project-report", args=[project.slug])).json()
    assert report["estimates"]["metric"]["judge"] == "imported@1"
    client.force_login(owner)
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    section = html[html.index('id="estimates"'):]
    assert "imported@1" in section and "the project's estimates judge" in section
    # A judge that does not exist (well formed) is saved, and the report says why it has no
    # estimates.
    assert api.patch(url, {"estimates_judge": "gone"}, format="json").status_code == 200
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "estimates_judge &#x27;gone&#x27;" in html or "estimates_judge 'gone'" in html


def test_the_stage_routing_judge_setting(study):
    project, _owner = study
    assert stage_settings_errors({"routing_judge": "imported@1"}) == []
    (error,) = stage_settings_errors({"routing_judge": "not a ref"})
    assert "routing_judge" in error and "is not a judge reference" in error
    stage = make_stage(project, kind=StageKind.FULL, name="routed", status=StageStatus.DRAFT,
                       settings={"routing": "uncertainty", "routing_budget": 50,
                                 "routing_judge": "imported"})
    summary = stage_route_by_uncertainty(stage=stage)
    assert summary.metric_version == "imported@1"
    # --judge (the argument) overrides the setting.
    assert stage_route_by_uncertainty(stage=stage, judge="metric:lerc_prob").metric_version \
        == "metric:lerc_prob"
    stage.settings = {**stage.settings, "routing_judge": "nobody"}
    stage.save()
    with pytest.raises(StageError, match="routing_judge setting 'nobody': no judge named"):
        stage_route_by_uncertainty(stage=stage)


def test_routing_judge_over_http_and_route_stage(study):
    import io

    from django.core.management import call_command

    project, owner = study
    stage = make_stage(project, kind=StageKind.FULL, name="routed", status=StageStatus.DRAFT,
                       settings={"routing": "uncertainty", "routing_budget": 50})
    api = APIClient()
    api.force_authenticate(owner)
    url = f"/api/projects/{project.slug}/stages/{stage.pk}/"
    bad = api.patch(url, {"settings": {**stage.settings, "routing_judge": "a b"}},
                    format="json")
    assert bad.status_code == 400 and "routing_judge" in json.dumps(bad.json())
    good = api.patch(url, {"settings": {**stage.settings, "routing_judge": "imported"}},
                     format="json")
    assert good.status_code == 200, good.content
    out = io.StringIO()
    call_command("route_stage", project.slug, "routed", stdout=out)
    assert "imported@1" in out.getvalue()


def test_the_admin_routing_action_uses_the_routing_judge(client, study):
    project, _owner = study
    stage = make_stage(project, kind=StageKind.FULL, name="routed", status=StageStatus.DRAFT,
                       settings={"routing": "uncertainty", "routing_budget": 50,
                                 "routing_judge": "imported"})
    client.force_login(make_user(superuser=True))
    response = client.post(reverse("admin:annotation_stage_changelist"),
                           {"action": "route_by_uncertainty", "_selected_action": [stage.pk]},
                           follow=True)
    assert "routed on imported@1" in response.content.decode()


def test_the_text_report_and_forest_plot_name_the_chosen_judge(study):
    import io

    from django.core.management import call_command

    from metrics_app.reports.charts import estimates_forest

    project, _owner = study
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert "human | lerc alone | prediction-powered" in out.getvalue()
    project.estimates_judge = "imported"
    project.save()
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert "human | imported@1 alone | prediction-powered" in out.getvalue()
    report = estimates_report(load_judgments(project=project), project=project)
    assert "imported@1 alone (no interval)" in estimates_forest(report)
    project.estimates_judge = "gone"
    project.save()
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert "System accuracy: the project's estimates_judge 'gone'" in out.getvalue()
