"""A GET writes nothing: every report, dashboard and API page of a project reads (a fresh
cache, or computes and returns) and leaves the database as it was; caches are filled by the
precompute paths (the Beat refresh, imports, judge and scoring jobs, the commands). Each page
is requested twice, cold (nothing cached) and after a judgment made every cache stale."""
from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import StageKind, TaskKind
from metrics_app.models import MetricScore, Report
from metrics_app.reports.project import dashboard_charts_refresh, report_refresh
from metrics_app.services.judges.alignment import PAGE_RESAMPLES, judge_alignment_report_refresh
from metrics_app.services.judges.imports import verdicts_import
from metrics_app.services.meta_evaluation_report import metric_report_refresh
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db

WRITES = ("INSERT", "UPDATE", "DELETE")


@pytest.fixture
def projects(tmp_path):
    """A Likert project (judgments, metric scores, an imported judge) and an A/B one."""
    owner = make_user("reader", superuser=True)
    likert = make_project(TaskKind.LIKERT, owner=owner, slug="read-likert")
    stage = make_stage(likert, kind=StageKind.TRIAL, name="trial")
    workers = [make_worker(external_id=f"w{i}") for i in range(3)]
    rows = []
    for n in range(12):
        item = make_item(likert, external_id=f"i{n}", source="s1" if n < 6 else "s2",
                         content={"question": f"q{n}", "candidate": f"a{n}",
                                  "references": [f"a{n}" if n % 2 else "other"]})
        for w, worker in enumerate(workers):
            make_judgment(item=item, stage=stage, worker=worker, score=1 + (n + w) % 5)
        MetricScore.objects.create(item=item, metric="f1", version="1", value=(n % 4) / 4)
        rows.append({"item_id": f"i{n}", "probability": 0.8 if n % 2 else 0.3})
    path = tmp_path / "verdicts.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=likert, path=path, judge="ext", version="1")
    ab = make_project(TaskKind.AB, owner=owner, slug="read-ab")
    ab_stage = make_stage(ab, name="full")
    for n in range(6):
        item = make_item(ab, external_id=f"p{n}", source=f"m{n % 2}",
                         content={"question": f"q{n}", "answer_a": {"text": "x", "system": "m0"},
                                  "answer_b": {"text": "y", "system": "m1"}})
        for worker in workers:
            make_judgment(item=item, stage=ab_stage, worker=worker, choice="A" if n % 3 else "B")
    return owner, likert, ab


# (url name, which project, extra path args, query): every GET page of a project.
PAGES = [
    ("metrics:project-dashboard", "likert", (), ""),
    ("metrics:project-dashboard", "likert", (), "?group_by=dataset"),
    ("metrics:project-dashboard", "ab", (), ""),
    ("metrics:project-cockpit", "likert", (), ""),
    ("metrics:project-metrics", "likert", (), ""),
    ("metrics:metric-scatter", "likert", ("f1",), ""),
    ("metrics:metric-roc", "likert", (), ""),
    ("metrics:project-judges", "likert", (), ""),
    ("metrics:project-judges", "likert", (), "?resamples=10"),
    ("metrics:judge-reliability", "likert", ("ext@1",), ""),
    ("metrics:adjudicate", "ab", (), ""),
    ("metrics:spot-check", "likert", (), ""),
    ("metrics:spot-check", "ab", (), "?size=3"),
    ("metrics-api:project-report", "likert", (), ""),
    ("metrics-api:project-report", "likert", (), "?stage=trial&group_by=dataset"),
    ("metrics-api:project-leaderboard", "ab", (), ""),
    ("metrics-api:project-leaderboard", "ab", (), "?output=csv"),
    ("metrics-api:metric-report", "likert", (), "?n_resamples=10"),
    ("metrics-api:metric-report", "likert", (), "?n_resamples=10&refresh=1"),
    ("metrics-api:judge-report", "likert", (), "?resamples=10"),
    ("metrics-api:judge-plan", "likert", (), "?budget=10&label_cost=1"),
    ("metrics-api:scoring-jobs", "likert", (), ""),
    ("metrics-api:judge-jobs", "likert", (), ""),
    ("annotation-api:project-detail", "likert", (), ""),
    ("annotation-api:item-list", "likert", (), ""),
    ("annotation-api:stage-list", "likert", (), ""),
    ("annotation-api:judgment-list", "likert", (), ""),
]


def _writes_of_get(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return [q["sql"] for q in queries.captured_queries
            if q["sql"].lstrip().upper().startswith(WRITES)
            # The session middleware's own bookkeeping is not the page's.
            and "django_session" not in q["sql"]]


def _precompute_every_cache(likert, ab) -> None:
    for project in (likert, ab):
        report_refresh(project=project)
        dashboard_charts_refresh(project=project)
    metric_report_refresh(project=likert, params={"n_resamples": 10})
    judge_alignment_report_refresh(project=likert, n_resamples=PAGE_RESAMPLES)


@pytest.mark.parametrize(("name", "which", "args", "query"), PAGES,
                         ids=[f"{name}{query}" for name, _w, _a, query in PAGES])
def test_a_get_writes_nothing(client, projects, name, which, args, query):
    """Cold (nothing cached), fresh (every cache precomputed) and stale (a judgment arrived
    since): the page answers each time and the database sees no INSERT, UPDATE or DELETE."""
    owner, likert, ab = projects
    project = {"likert": likert, "ab": ab}[which]
    url = reverse(name, args=[project.slug, *args]) + query
    client.force_login(owner)
    assert _writes_of_get(client, url) == []
    assert not Report.objects.exists()
    _precompute_every_cache(likert, ab)
    stored = {row.pk: (row.judgment_watermark, row.data) for row in Report.objects.all()}
    assert _writes_of_get(client, url) == []
    make_judgment(item=project.items.first(), stage=project.stages.first(), worker=make_worker(),
                  **({"score": 5} if project.kind == TaskKind.LIKERT else {"choice": "B"}))
    assert _writes_of_get(client, url) == []
    assert {row.pk: (row.judgment_watermark, row.data) for row in Report.objects.all()} == stored


def test_the_pages_list_covers_every_project_page():
    """A new project page under metrics/ or the metrics API joins PAGES (and so this test)."""
    from django.urls import get_resolver

    covered = {name for name, *_ in PAGES}
    posts_only = {"metrics:worker-block", "metrics:worker-unblock",
                  "metrics:project-metrics-compute", "metrics:adjudicate-record",
                  "metrics:spot-check-record",
                  "metrics:scoring-job-cancel", "metrics-api:scoring-job-cancel",
                  "metrics-api:judge-job-cancel", "metrics:judge-verdicts-upload",
                  "metrics-api:judge-verdicts"}
    names = set()
    for namespace in ("metrics", "metrics-api"):
        resolver = get_resolver().namespace_dict[namespace][1]
        names |= {f"{namespace}:{n}" for n in resolver.reverse_dict if isinstance(n, str)
                  and any(p == "slug" for pattern in resolver.reverse_dict.getlist(n)
                          for p in pattern[0][0][1])}
    assert names - covered - posts_only == set()
