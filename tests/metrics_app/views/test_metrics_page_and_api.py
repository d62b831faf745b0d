"""The metrics page (login, visibility, table, compute button, scatter) and the REST API."""
from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import TaskKind
from metrics_app.models import ScoringJob
from metrics_app.services.meta_evaluation_report import metric_report_refresh
from metrics_app.services.scoring import project_score_metrics
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
def scored_project():
    owner = make_user("owner")
    project = make_project(kind=TaskKind.LIKERT, owner=owner, slug="judged")
    stage = make_stage(project)
    answers = [("on a mat", 5, "gpt2"), ("under the table", 1, "gpt2"), ("on the rug", 3, "mhpg"),
               ("a mat", 4, "mhpg"), ("in the kitchen", 2, "gpt2"), ("mat", 4, "mhpg")]
    for candidate, score, source in answers:
        item = make_item(project, source=source, dataset="narrativeqa", content={
            "passage": "The cat sat on the mat.", "question": "Where did the cat sit?",
            "references": ["on the mat"], "candidate": candidate})
        make_judgment(item=item, stage=stage, score=score)
    project_score_metrics(project=project, metric_names=["f1", "length"])
    metric_report_refresh(project=project, params={"n_resamples": 50})
    metric_report_refresh(project=project)
    return project


@pytest.mark.reliability
def test_page_needs_login_and_visibility(client, scored_project):
    url = reverse("metrics:project-metrics", args=[scored_project.slug])
    assert client.get(url).status_code == 302
    client.force_login(make_user("stranger"))
    assert client.get(url).status_code == 404
    assert client.get(reverse("metrics:metric-scatter", args=[scored_project.slug, "f1"])
                      ).status_code == 404


def test_page_shows_correlations_with_best_metric_highlighted(client, scored_project):
    client.force_login(scored_project.owner)
    response = client.get(reverse("metrics:project-metrics", args=[scored_project.slug]))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="correlations"' in html
    for group in ("overall", "dataset:narrativeqa", "source:gpt2", "source:mhpg"):
        assert group in html
    report = response.context["data"]
    best = max(("f1", "length"), key=lambda m: report["correlations"][m]["overall"]["pearson"])
    assert response.context["table"]["rows"][["f1", "length"].index(best)]["cells"][0]["best"]
    assert 'class="best"' in html
    assert html.count("<img") == 2   # one scatter per stored metric
    spearman = client.get(reverse("metrics:project-metrics", args=[scored_project.slug]),
                          {"stat": "spearman"})
    assert spearman.context["stat"] == "spearman"


def test_scatter_is_a_png(client, scored_project):
    client.force_login(scored_project.owner)
    response = client.get(reverse("metrics:metric-scatter", args=[scored_project.slug, "f1"]))
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert response.content[:8] == b"\x89PNG\r\n\x1a\n"


def test_compute_button_queues_a_job_and_never_scores_in_the_request(
        client, scored_project, monkeypatch, django_capture_on_commit_callbacks):
    from worker.tasks import metrics as metric_tasks

    sent = []
    monkeypatch.setattr(metric_tasks.score_project, "apply_async",
                        lambda args, queue: sent.append((args, queue)) or
                        type("R", (), {"id": "t1"})())
    client.force_login(scored_project.owner)
    url = reverse("metrics:project-metrics-compute", args=[scored_project.slug])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"metric": ["em", "rougeL", "not-a-metric"]})
    assert response.status_code == 302
    job = ScoringJob.objects.get()
    assert job.metrics == ["em", "rougeL"] and job.status == "queued"
    assert sent == [([job.pk], "default")]
    page = client.get(reverse("metrics:project-metrics", args=[scored_project.slug]))
    assert page.context["running"] and b'http-equiv="refresh"' in page.content
    assert client.get(url).status_code == 405


def test_report_api(scored_project):
    api = APIClient()
    url = reverse("metrics-api:metric-report", args=[scored_project.slug])
    assert api.get(url).status_code == 401
    api.force_authenticate(make_user("other"))
    assert api.get(url).status_code == 404
    api.force_authenticate(scored_project.owner)
    body = api.get(url, {"n_resamples": 50}).json()
    assert body["stale"] is False
    overall = body["report"]["correlations"]["f1"]["overall"]
    assert set(overall) >= {"pearson", "spearman", "kendall", "n", "ci"} and overall["n"] == 6


def test_score_api_scores_a_small_batch_and_limits_its_size():
    api = APIClient()
    url = reverse("metrics-api:metric-score")
    item = {"id": "1", "question": "q", "references": ["on the mat"], "candidate": "on a mat"}
    assert api.post(url, {"metrics": ["f1"], "items": [item]}, format="json").status_code == 401
    api.force_authenticate(make_user())
    body = api.post(url, {"metrics": ["f1", "length"], "items": [item]}, format="json").json()
    assert body["results"] == [{"id": "1", "f1": 1.0, "length": 3.0}]
    assert body["versions"]["f1"] == "squad-v1"
    too_many = api.post(url, {"metrics": ["f1"], "items": [
        {**item, "id": str(i)} for i in range(101)]}, format="json")
    assert too_many.status_code == 400 and "At most 100" in str(too_many.json()["items"])
    bad = api.post(url, {"metrics": ["bogus"], "items": [item]}, format="json")
    assert bad.status_code == 400 and "bogus" in str(bad.json())
    missing = api.post(url, {"metrics": ["f1"], "items": [{"id": "1"}]}, format="json")
    assert missing.status_code == 400 and "candidate" in str(missing.json())


@pytest.mark.parametrize("metric", ["bertscore", "conditional_bertscore", "meteor", "lerc"])
def test_score_api_queues_heavy_metrics_as_a_job_instead_of_scoring_in_the_request(
        metric, monkeypatch):
    from metrics_app.models import ItemScoringJob
    from metrics_app.services import scoring

    def never(*args, **kwargs):
        raise AssertionError("a heavy metric was built inside the request")

    monkeypatch.setattr(scoring, "get_metric", never)
    api = APIClient()
    api.force_authenticate(make_user())
    item = {"id": "1", "question": "q", "references": ["on the mat"], "candidate": "on a mat"}
    response = api.post(reverse("metrics-api:metric-score"),
                        {"metrics": ["f1", metric], "items": [item]}, format="json")
    assert response.status_code == 202, response.content
    job = ItemScoringJob.objects.get(pk=response.json()["id"])
    assert job.metrics == ["f1", metric] and job.items[0]["candidate"] == "on a mat"
    assert job.queue == ("gpu" if metric.startswith("lerc") else "default")


def test_only_string_metrics_are_marked_cheap():
    from metrics_app.registry import metric_names, metric_sync_ok

    assert {n for n in metric_names() if metric_sync_ok(n)} == {
        "em", "f1", "contains", "bleu1", "bleu4", "rougeL", "length"}


def test_scoring_jobs_api(scored_project, monkeypatch):
    from worker.tasks import metrics as metric_tasks

    monkeypatch.setattr(metric_tasks.score_project, "apply_async",
                        lambda args, queue: type("R", (), {"id": "t"})())
    api = APIClient()
    api.force_authenticate(scored_project.owner)
    url = reverse("metrics-api:scoring-jobs", args=[scored_project.slug])
    created = api.post(url, {"metrics": ["bleu1"]}, format="json")
    assert created.status_code == 202 and created.json()[0]["metrics"] == ["bleu1"]
    listed = api.get(url).json()
    assert listed["count"] == 1 and listed["results"][0]["status"] == "queued"
    assert set(listed) == {"count", "next", "previous", "results"}   # like every other list
    assert api.get(url, {"limit": "abc"}).status_code == 400


def _three_answers(owner, answers: list[tuple[str, int]], metric_names: list[str]):
    """A Likert project of one judged answer per question (reference "on the mat"), scored."""
    project = make_project(kind=TaskKind.LIKERT, owner=owner)
    stage = make_stage(project)
    for index, (candidate, score) in enumerate(answers):
        item = make_item(project, content={"passage": "", "question": f"q{index}",
                                           "references": ["on the mat"], "candidate": candidate})
        make_judgment(item=item, stage=stage, score=score)
    project_score_metrics(project=project, metric_names=metric_names)
    return project, stage


def test_page_falls_back_to_a_report_with_other_resamples_and_never_stars_ties(client):
    owner = make_user("owner2")
    project, _stage = _three_answers(owner, [("x y", 1), ("on the mat", 5), ("On the mat!", 4)],
                                     ["em", "f1"])
    metric_report_refresh(project=project, params={"n_resamples": 0})
    client.force_login(owner)
    page = client.get(reverse("metrics:project-metrics", args=[project.slug]))
    assert page.context["report"] is not None and "computed without bootstrap" in \
        page.content.decode()
    # em and f1 give the same ranking here: equal correlations → no best metric starred
    cells = [row["cells"][0] for row in page.context["table"]["rows"]]
    values = [cell["value"] for cell in cells]
    assert values[0] == pytest.approx(values[1])
    assert not any(cell["best"] for cell in cells)


def test_a_starc_project_offers_no_answer_metrics(client):
    owner = make_user("starc-metrics")
    project = make_project(kind=TaskKind.MC, owner=owner, slug="starc-metrics")
    make_item(project)
    client.force_login(owner)
    page = client.get(reverse("metrics:project-metrics", args=[project.slug])).content.decode()
    assert "nothing to score here" in page and 'name="metric"' not in page
    refused = client.post(reverse("metrics:project-metrics-compute", args=[project.slug]),
                          {"metric": ["bleu1", "meteor"]}, follow=True)
    assert "no candidate or reference answers" in refused.content.decode()
    assert not ScoringJob.objects.filter(project=project).exists()


def test_scoring_jobs_api_refuses_a_starc_project_by_name():
    owner = make_user("starc-api")
    project = make_project(kind=TaskKind.MC, owner=owner, slug="starc-api")
    api = APIClient()
    api.force_authenticate(owner)
    response = api.post(reverse("metrics-api:scoring-jobs", args=[project.slug]),
                        {"metrics": ["f1"]}, format="json")
    assert response.status_code == 400
    assert "no candidate or reference answers" in response.json()["metrics"][0]


def test_binary_judgments_get_the_decision_table_roc_curves_and_no_two_band_scatter(client):
    owner = make_user("binary-owner")
    project = make_project(kind=TaskKind.LIKERT, owner=owner, slug="binary-page")
    stage = make_stage(project)
    for n in range(40):
        correct = n % 3 != 0
        item = make_item(project, split="", content={
            "passage": "", "question": f"Which year, question {n}?", "references": ["1901"],
            "candidate": "1901" if correct and n % 2 else ("in 1901 or so" if correct
                                                            else f"{1800 + n}")})
        make_judgment(item=item, stage=stage, worker=make_worker(), score=5 if correct else 1)
    project_score_metrics(project=project, metric_names=["f1", "length"])
    metric_report_refresh(project=project, params={"n_resamples": 50})
    client.force_login(owner)
    page = client.get(reverse("metrics:project-metrics", args=[project.slug]),
                      {"n_resamples": "50"}).content.decode()
    assert 'id="decision-table"' in page and 'id="significance-table"' in page
    assert reverse("metrics:metric-roc", args=[project.slug]) in page
    assert "Metric vs. human score" not in page          # two bands say nothing here
    roc = client.get(reverse("metrics:metric-roc", args=[project.slug]))
    assert roc.status_code == 200 and roc["Content-Type"] == "image/png"
    assert roc.content[:8] == b"\x89PNG\r\n\x1a\n"
    other = make_user("stranger")
    client.force_login(other)
    assert client.get(reverse("metrics:metric-roc", args=[project.slug])).status_code == 404


def test_the_ab_learned_metric_is_offered_only_to_ab_projects(client):
    """Walking a first Likert study: the compute form offered `lerc_ab`, and the job ran only
    to say "no lerc-ab version is promoted yet" — it cannot score Likert items at all."""
    owner = make_user("offer-owner")
    likert = make_project(kind=TaskKind.LIKERT, owner=owner, slug="offer-likert")
    ab = make_project(kind=TaskKind.AB, owner=owner, slug="offer-ab")
    client.force_login(owner)
    likert_page = client.get(reverse("metrics:project-metrics", args=[likert.slug]))
    ab_page = client.get(reverse("metrics:project-metrics", args=[ab.slug]))
    offered = {project: {entry["name"] for entry in page.context["available"]}
               for project, page in (("likert", likert_page), ("ab", ab_page))}
    assert "lerc_ab" not in offered["likert"] and "lerc" in offered["likert"]
    assert "value=\"lerc_ab\"" not in likert_page.content.decode()
    assert "lerc_ab" in offered["ab"]


@pytest.mark.reliability
def test_items_scored_by_their_gold_score_are_counted_and_said(client):
    """Walking a first Likert study: the metrics table said n=30 while the judges page said
    "26 of 30 items carry human labels" (then 6, once the review rules held work back): the
    qualification items have no judgment that counts, and their answer key (`gold.score`)
    stood in as the human score without a word."""
    owner = make_user("gold-owner")
    project = make_project(kind=TaskKind.LIKERT, owner=owner, slug="gold-fallback")
    stage = make_stage(project)
    content = {"passage": "", "question": "Where?", "references": ["on the mat"]}
    for candidate, score in (("on the mat", 5), ("under it", 1), ("the mat", 4)):
        item = make_item(project, content={**content, "candidate": candidate})
        make_judgment(item=item, stage=stage, score=score)
    make_item(project, gold={"score": 5}, content={**content, "candidate": "mat"})
    project_score_metrics(project=project, metric_names=["f1"])
    report = metric_report_refresh(project=project, params={"n_resamples": 0})
    assert report.data["n_imported_gold"] == 1
    assert report.data["correlations"]["f1"]["overall"]["n"] == 4
    client.force_login(owner)
    page = client.get(reverse("metrics:project-metrics", args=[project.slug]),
                      {"n_resamples": 0}).content.decode()
    assert 'id="imported-gold"' in page
    assert "1 of the items below have no judgment that counts" in page


@pytest.mark.reliability
def test_the_report_api_reads_the_copy_the_page_shows_and_says_why_it_is_stale(client):
    """The page shows the newest copy with its options whatever its resamples and says why it
    is stale; the API asked for exactly 1,000 resamples (computing them in every call when
    the stored copy had others) and said only `stale`."""
    from unittest import mock

    from metrics_app.apis import metrics as metrics_api

    owner = make_user("owner3")
    project, stage = _three_answers(owner, [("x y", 1), ("on the mat", 5), ("a mat", 4)], ["f1"])
    metric_report_refresh(project=project, params={"n_resamples": 20})
    client.force_login(owner)
    api = APIClient()
    api.force_authenticate(owner)
    url = reverse("metrics-api:metric-report", args=[project.slug])
    page_url = reverse("metrics:project-metrics", args=[project.slug])
    with mock.patch.object(metrics_api, "metric_report_compute",
                           side_effect=AssertionError("computed in the request")):
        body = api.get(url).json()
        page = client.get(page_url)
    assert body["report"] == page.context["report"].data
    assert body["report"]["params"]["n_resamples"] == 20
    assert body["stale"] is False and body["stale_reason"] == ""

    make_judgment(item=project.items.first(), stage=stage, score=2)
    body = api.get(url).json()
    page = client.get(page_url)
    assert body["stale"] is True
    assert body["stale_reason"] == page.context["stale_reason"] == "new judgments arrived"
