"""A number reads the same on every page as at the API and the commands: the pages round the
stored float as Python does (`metrics_app/templatetags/metrics_dashboard.py:num`), never by
Django's `floatformat`, which rounds the float's decimal text half up (0.8125 → 0.813, 0.695 →
0.70) where the API's value and `metric_report` give 0.812 and 0.69."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import TaskKind
from metrics_app.services.meta_evaluation_report import metric_report_refresh
from metrics_app.services.scoring import project_score_metrics
from testing.factories import make_item, make_judgment, make_project, make_stage, make_user

pytestmark = pytest.mark.django_db


@pytest.mark.reliability
def test_a_half_way_accuracy_reads_the_same_on_the_pages_the_api_and_the_command(client):
    """13 of 16 preferences go to the longer answer: 0.8125, which is exactly half-way at
    three digits. The metrics page said 0.813 beside `metric_report`'s 0.812."""
    owner = make_user("rounding-owner")
    project = make_project(kind=TaskKind.AB, owner=owner, slug="rounding-ab")
    stage = make_stage(project)
    for index in range(16):
        item = make_item(project, domain="Physics", content={
            "question": f"Why does thing {index} happen?",
            "answer_a": {"text": "because of a long and careful explanation of it", "kind": "human"},
            "answer_b": {"text": "no idea", "kind": "model"}})
        make_judgment(item=item, stage=stage, choice="A" if index < 13 else "B")
    project_score_metrics(project=project, metric_names=["length"])
    metric_report_refresh(project=project)

    out = StringIO()
    call_command("metric_report", project.slug, "--json", stdout=out)
    accuracy = json.loads(out.getvalue())["pairwise"]["metrics"]["length"]["overall"]["accuracy"]
    assert accuracy == 13 / 16
    expected = f"{accuracy:.3f}"
    assert expected == "0.812"
    text = StringIO()
    call_command("metric_report", project.slug, stdout=text)
    assert f"overall {expected}" in text.getvalue()

    client.force_login(owner)
    page = client.get(reverse("metrics:project-metrics", args=[project.slug])).content.decode()
    pairwise = page[page.index('id="pairwise"'):]
    pairwise = pairwise[:pairwise.index("</table>")]
    assert f"{expected}<span" in pairwise
    assert "0.813" not in pairwise
