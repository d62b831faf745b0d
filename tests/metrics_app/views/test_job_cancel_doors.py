"""The doors of cancelling a scoring job or a judge run, and of queuing one while the same is in
flight: the admin's "Cancel selected jobs", `POST .../<id>/cancel/` of both job APIs (the
access of queuing one: a project one may see, else 404; a finished job: 409 naming it), the
metrics page's Cancel button (POST with CSRF), and "Cancelled" wherever the status shows."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import TaskKind
from metrics_app.models import JudgeJob, ScoringJob, ScoringStatus
from metrics_app.services.judges.versions import judge_version_create
from testing.factories import make_item, make_project, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    from core import leases

    def task_send(name, *, args=(), **options):
        return type("Result", (), {"id": "sent"})()

    monkeypatch.setattr(leases, "task_send", task_send)


@pytest.fixture
def owned():
    owner = make_user("owner")
    project = make_project(TaskKind.LIKERT, owner=owner)
    make_item(project, content={"passage": "", "question": "q?", "references": ["a"],
                                "candidate": "a"})
    version = judge_version_create(name="wrong-prompt", config={
        "base_url": "http://127.0.0.1:9/v1", "model": "fake-judge"})[0]
    return owner, project, version


def test_the_admin_action_cancels_selected_jobs_and_reports_the_finished_ones(client, owned):
    owner, project, version = owned
    queued = JudgeJob.objects.create(project=project, judge_version=version,
                                     metrics=[version.label])
    done = JudgeJob.objects.create(project=project, judge_version=version,
                                   metrics=[version.label], status=ScoringStatus.DONE)
    scoring_job = ScoringJob.objects.create(project=project, metrics=["em"],
                                            status=ScoringStatus.RUNNING, lease="w:1:x")
    client.force_login(owner)
    for model, jobs in (("judgejob", [queued, done]), ("scoringjob", [scoring_job])):
        url = reverse(f"admin:metrics_app_{model}_changelist")
        response = client.post(url, {"action": "cancel_jobs",
                                     "_selected_action": [job.pk for job in jobs]},
                               follow=True)
        assert response.status_code == 200
        text = response.content.decode()
        assert "Cancelled" in text  # the status column
    messages = [str(m) for m in response.context["messages"]]
    assert any("cancelled by owner" in m for m in messages)
    queued.refresh_from_db()
    scoring_job.refresh_from_db()
    assert queued.status == scoring_job.status == ScoringStatus.CANCELLED
    assert "(was running)" in scoring_job.error
    assert JudgeJob.objects.get(pk=done.pk).status == ScoringStatus.DONE
    # Another researcher's admin does not even list the jobs (the project is not theirs).
    other = make_user("other")
    client.force_login(other)
    fresh = JudgeJob.objects.create(project=project, judge_version=version,
                                    metrics=[version.label])
    client.post(reverse("admin:metrics_app_judgejob_changelist"),
                {"action": "cancel_jobs", "_selected_action": [fresh.pk]})
    assert JudgeJob.objects.get(pk=fresh.pk).status == ScoringStatus.QUEUED


def test_the_judge_job_api_cancels_with_the_access_of_queuing(owned):
    owner, project, version = owned
    api = APIClient()
    jobs_url = reverse("metrics-api:judge-jobs", args=[project.slug])
    api.force_authenticate(owner)
    queued = api.post(jobs_url, {"judge": version.label, "concurrency": 2}, format="json")
    assert queued.status_code == 202
    job_id = queued.json()["id"]
    # The same request again (a double click, a retry): the job in flight, nothing queued.
    again = api.post(jobs_url, {"judge": version.label, "concurrency": 2}, format="json")
    assert again.status_code == 200 and again.json()["id"] == job_id
    other = api.post(jobs_url, {"judge": version.label, "concurrency": 4}, format="json")
    assert other.status_code == 409 and f"judge job {job_id}" in other.json()["detail"]
    assert JudgeJob.objects.count() == 1

    cancel_url = reverse("metrics-api:judge-job-cancel", args=[project.slug, job_id])
    assert APIClient().post(cancel_url).status_code == 401
    stranger = APIClient()
    stranger.force_authenticate(make_user("stranger"))
    assert stranger.post(cancel_url).status_code == 404
    assert stranger.post(reverse("metrics-api:judge-job-cancel",
                                 args=[project.slug, 999999])).status_code == 404
    assert api.get(cancel_url).status_code == 405
    response = api.post(cancel_url)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "cancelled" and body["error"].startswith("cancelled by owner")
    refused = api.post(cancel_url)
    assert refused.status_code == 409
    assert refused.json()["detail"] == (f"judge job {job_id} is cancelled; only a queued or "
                                        "running job can be cancelled")
    # A job of another project is not reached through this one's URL.
    elsewhere = make_project(TaskKind.LIKERT, owner=owner)
    assert api.post(reverse("metrics-api:judge-job-cancel",
                            args=[elsewhere.slug, job_id])).status_code == 404
    # Cancelled, the judge may be queued again.
    assert api.post(jobs_url, {"judge": version.label}, format="json").status_code == 202


def test_the_scoring_job_api_cancels_and_reuses_the_job_in_flight(owned):
    owner, project, _version = owned
    api = APIClient()
    api.force_authenticate(owner)
    jobs_url = reverse("metrics-api:scoring-jobs", args=[project.slug])
    first = api.post(jobs_url, {"metrics": ["em", "f1"]}, format="json")
    again = api.post(jobs_url, {"metrics": ["f1", "em"]}, format="json")
    assert first.status_code == again.status_code == 202
    (job,) = first.json()
    assert [j["id"] for j in again.json()] == [job["id"]] and ScoringJob.objects.count() == 1
    cancel_url = reverse("metrics-api:scoring-job-cancel", args=[project.slug, job["id"]])
    stranger = APIClient()
    stranger.force_authenticate(make_user("stranger"))
    assert stranger.post(cancel_url).status_code == 404
    response = api.post(cancel_url)
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert api.post(cancel_url).status_code == 409
    listed = api.get(jobs_url).json()["results"]
    assert listed[0]["status"] == "cancelled"


def test_the_metrics_page_offers_cancel_for_jobs_in_flight_only(owned):
    owner, project, _version = owned
    running = ScoringJob.objects.create(project=project, metrics=["em"],
                                        status=ScoringStatus.RUNNING)
    done = ScoringJob.objects.create(project=project, metrics=["f1"], status=ScoringStatus.DONE)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    page_url = reverse("metrics:project-metrics", args=[project.slug])
    html = browser.get(page_url).content.decode()
    cancel_url = reverse("metrics:scoring-job-cancel", args=[project.slug, running.pk])
    assert f'action="{cancel_url}"' in html
    assert reverse("metrics:scoring-job-cancel", args=[project.slug, done.pk]) not in html
    assert browser.post(cancel_url).status_code == 403  # no CSRF token
    token = browser.cookies["csrftoken"].value
    response = browser.post(cancel_url, {"csrfmiddlewaretoken": token}, follow=True)
    assert response.status_code == 200
    running.refresh_from_db()
    assert running.status == ScoringStatus.CANCELLED
    html = response.content.decode()
    assert "Cancelled: cancelled by owner" in html and f'action="{cancel_url}"' not in html
    again = browser.post(cancel_url, {"csrfmiddlewaretoken": token}, follow=True)
    assert f"scoring job {running.pk} is cancelled" in again.content.decode()
    stranger = Client()
    stranger.force_login(make_user("stranger"))
    assert stranger.post(cancel_url).status_code == 404
    assert stranger.get(cancel_url).status_code == 405
