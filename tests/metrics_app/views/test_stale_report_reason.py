"""The metrics page says why its cached report is out of date. It said "New judgments or
scores arrived" whatever the cause, also after a rejection, a block, an item excluded or another
aggregation model, none of which adds a judgment or a score."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.models import AssignmentStatus, Item, TaskKind
from annotation.services.workers import worker_block
from metrics_app.services.meta_evaluation_report import (
    metric_report_cached,
    metric_report_cached_with_reason,
    metric_report_refresh,
)
from metrics_app.services.scoring import project_score_metrics
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.fixture
def scored():
    owner = make_user("owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="stale")
    stage = make_stage(project)
    items = [make_item(project, content={"passage": "", "question": "q", "candidate": c,
                                         "references": ["on the mat"]})
             for c in ("on the mat", "rug", "a mat", "mat")]
    workers = [make_worker() for _ in range(2)]
    assignments = [make_assignment(stage, worker=w, items=items,
                                   status=AssignmentStatus.SUBMITTED) for w in workers]
    for worker, assignment in zip(workers, assignments, strict=True):
        for item, score in zip(items, (5, 1, 4, 3), strict=True):
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                          score=score)
    project_score_metrics(project=project, metric_names=["f1"])
    metric_report_refresh(project=project)
    return {"project": project, "owner": owner, "stage": stage, "items": items,
            "workers": workers, "assignments": assignments}


def _notice(client, scored) -> str:
    client.force_login(scored["owner"])
    html = client.get(reverse("metrics:project-metrics", args=["stale"])).content.decode()
    found = re.search(r'<p class="notice warn" id="stale-report">(.*?)</p>', html, re.S)
    return found.group(1) if found else ""


def test_a_fresh_report_has_no_notice_and_the_boolean_api_still_holds(client, scored):
    assert _notice(client, scored) == ""
    report, reason = metric_report_cached_with_reason(project=scored["project"])
    assert reason == "" and metric_report_cached(project=scored["project"]) == (report, False)


def test_a_block_is_named_not_new_judgments(client, scored):
    worker_block(worker=scored["workers"][0], reason="bot", by=scored["owner"])
    notice = _notice(client, scored)
    assert "the judgments that count changed" in notice and "blocked" in notice
    assert "new judgments" not in notice and "scores" not in notice
    assert metric_report_cached(project=scored["project"])[1] is True


def test_a_rejection_is_named_not_new_judgments(client, scored):
    assignment = scored["assignments"][1]
    assignment.status = AssignmentStatus.REJECTED
    assignment.save(update_fields=["status"])
    notice = _notice(client, scored)
    assert "the judgments that count changed" in notice and "rejected" in notice
    assert "new judgments" not in notice


def test_another_aggregation_model_is_named(client, scored):
    project = scored["project"]
    project.aggregation = "median"
    project.save()
    notice = _notice(client, scored)
    assert "the aggregation model changed (mean → median)" in notice
    assert "new judgments" not in notice and "judgments that count" not in notice


def test_an_excluded_item_is_named_as_a_change_without_new_judgments(client, scored):
    Item.objects.filter(pk=scored["items"][3].pk).update(excluded=True)
    notice = _notice(client, scored)
    assert "an item excluded" in notice and "new judgments" not in notice


def test_new_judgments_and_new_scores_are_each_named(client, scored):
    make_judgment(item=scored["items"][0], stage=scored["stage"], score=2)
    assert "new judgments arrived" in _notice(client, scored)
    metric_report_refresh(project=scored["project"])
    project_score_metrics(project=scored["project"], metric_names=["length"])
    notice = _notice(client, scored)
    assert "new metric scores were stored" in notice and "new judgments" not in notice
