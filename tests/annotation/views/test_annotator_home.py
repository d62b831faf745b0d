"""One personal link per in-house annotator for the whole project: the home page lists their
stages, progress and history, and starts each stage's task through the same link."""
from __future__ import annotations

import csv
import io
from urllib.parse import urlsplit

import pytest
from django.urls import reverse

from annotation.models import (
    Assignment,
    AssignmentStatus,
    InhouseLink,
    Provider,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.services.access import (
    inhouse_entry_path,
    inhouse_home_links,
    inhouse_home_path,
    inhouse_link_create,
    inhouse_link_revoke,
)
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_qualification,
    make_stage,
    make_user,
    make_worker,
)
from tests.support.tasks import make_task

pytestmark = pytest.mark.django_db

GOLD_SENTINEL = "GOLD-SENTINEL-4b1e"


def home_and_token(project, worker=None):
    worker = worker or make_worker(display_name="Dana")
    link, _ = inhouse_link_create(worker=worker, project=project)
    path = inhouse_home_path(link=link)
    return link, path, path.rstrip("/").rsplit("/", 1)[1]


def stage_url(token, stage):
    return reverse("annotation:task-home-stage", args=[token, stage.pk])


@pytest.fixture
def study():
    """A project with two open in-house stages, a draft one and an MTurk one."""
    project, trial, items = make_task(TaskKind.LIKERT)
    trial.name = "trial"
    trial.save(update_fields=["name"])
    full = make_stage(project, name="full", status=StageStatus.COLLECTING, order=2)
    draft = make_stage(project, name="later", status=StageStatus.DRAFT, order=3)
    crowd = make_stage(project, name="crowd", provider=Provider.MTURK, order=4)
    for item in items:
        item.gold = {"score": 4.5, "note": GOLD_SENTINEL}
        item.save(update_fields=["gold"])
    return project, {"trial": trial, "full": full, "draft": draft, "crowd": crowd}, items


def test_the_home_page_lists_open_stages_progress_and_history(client, study):
    project, stages, items = study
    link, path, token = home_and_token(project)
    done = make_assignment(stages["trial"], worker=link.worker, items=items,
                           status=AssignmentStatus.SUBMITTED)
    for item in items:
        make_judgment(item=item, stage=stages["trial"], worker=link.worker, assignment=done)
    response = client.get(path)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Dana" in html
    assert "trial" in html and "full" in html
    assert "later" not in html, "a draft stage is not offered"
    assert "crowd" not in html, "an MTurk stage is never opened through an in-house link"
    # Their own progress: 3 items answered and one batch done in the trial. They judged every
    # item there (an item judged in one data stage is not released again), so neither stage
    # has more for them: no Start that only leads to "Nothing more to do".
    assert "<td>trial</td>\n        <td>3 items answered, 1 batch done</td>" in html
    assert stage_url(token, stages["trial"]) not in html
    assert stage_url(token, stages["full"]) not in html
    fresh_html = client.get(home_and_token(project, make_worker())[1]).content.decode()
    assert fresh_html.count('class="button primary"') == 2, "trial and full: Start"
    assert "nothing more for you here" in html
    assert 'id="home-history"' in html and "Submitted" in html
    assert GOLD_SENTINEL not in html


def test_each_stage_starts_from_the_home_page_without_a_new_link(client, study):
    project, stages, items = study
    # Each stage its own items: an item held in the trial's open page is not handed out in
    # the full stage too (`_not_in_hand_elsewhere`), as one answered there would not be.
    stages["trial"].items.set(items)
    stages["full"].items.set([make_item(project, content=dict(item.content)) for item in items])
    link, path, token = home_and_token(project)
    for name in ("trial", "full"):
        response = client.get(stage_url(token, stages[name]))
        assert response.status_code == 200
        assert "0 of 3 answered" in response.content.decode()
        assert GOLD_SENTINEL not in response.content.decode()
    assert set(Assignment.objects.filter(worker=link.worker)
               .values_list("stage__name", flat=True)) == {"trial", "full"}
    assert "Continue" in client.get(path).content.decode()


@pytest.mark.reliability
def test_stages_outside_the_link_are_refused_and_nothing_is_created(client, study):
    project, stages, _ = study
    _, _, token = home_and_token(project)
    other_project, other_stage, _ = make_task(TaskKind.LIKERT)
    for stage in (stages["crowd"], other_stage):
        response = client.get(stage_url(token, stage))
        assert response.status_code == 403 and b"does not open that task" in response.content
    response = client.get(stage_url(token, stages["draft"]))
    assert response.status_code == 403 and b"0 of 3 answered" not in response.content
    # A link to one stage opens only that stage from its home page.
    worker = make_worker()
    link, _ = inhouse_link_create(worker=worker, project=project, stage=stages["trial"])
    one_token = inhouse_home_path(link=link).rstrip("/").rsplit("/", 1)[1]
    assert client.get(stage_url(one_token, stages["full"])).status_code == 403
    assert "full" not in client.get(inhouse_home_path(link=link)).content.decode()
    assert Assignment.objects.filter(worker=worker).count() == 0


@pytest.mark.reliability
def test_an_annotator_sees_only_their_own_work(client, study):
    project, stages, items = study
    other = make_worker(display_name="Other")
    theirs = make_assignment(stages["full"], worker=other, items=items,
                             status=AssignmentStatus.APPROVED)
    for item in items:
        make_judgment(item=item, stage=stages["full"], worker=other, assignment=theirs)
    _, path, _ = home_and_token(project)
    html = client.get(path).content.decode()
    assert "Other" not in html and "Approved" not in html
    assert 'id="home-history"' not in html
    assert "<td>full</td>\n        <td>0 items answered, 0 batches done</td>" in html


@pytest.mark.reliability
def test_a_revoked_link_stops_working_on_the_next_request(client, study):
    project, stages, _ = study
    link, path, token = home_and_token(project)
    assert client.get(path).status_code == 200
    inhouse_link_revoke(link=link)
    for url in (path, stage_url(token, stages["trial"])):
        response = client.get(url)
        assert response.status_code == 403 and b"revoked" in response.content
    tampered = path.rstrip("/")[:-3] + "xyz/"
    assert client.get(tampered).status_code == 403
    assert Assignment.objects.filter(worker=link.worker).count() == 0


def test_the_completion_page_leads_back_home(client, study, monkeypatch):
    project, stages, items = study
    link, path, token = home_and_token(project)
    client.get(stage_url(token, stages["trial"]))
    assignment = Assignment.objects.get(worker=link.worker)
    from annotation.views.task_pages import _completion

    request = client.get(path).wsgi_request
    assignment.status = AssignmentStatus.SUBMITTED
    # The stage still has items for them: the next batch of the same stage opens at once,
    # started as the home page starts it.
    response = _completion(request, assignment)
    assert response.status_code == 302
    assert response["Location"] == stage_url(token, stages["trial"]) + "?saved=1"
    # Nothing more in the stage: the page leads back to their home page.
    from annotation.views import task_pages

    monkeypatch.setattr(task_pages, "more_work_for", lambda **kwargs: False)
    html = _completion(request, assignment).content.decode()
    assert f'href="{path}"' in html


def test_the_project_action_gives_one_link_per_annotator_and_reuses_it(client, study):
    project, stages, _ = study
    owner = make_user("owner")
    project.owner = owner
    project.save(update_fields=["owner"])
    client.force_login(owner)
    url = reverse("admin:annotation_project_changelist")

    def run():
        response = client.post(url, {"action": "create_home_links", "_selected_action":
                                     [project.pk], "reason": "Ann Lee, Bo"})
        assert response.status_code == 200, response.content[:500]
        return list(csv.reader(io.StringIO(response.content.decode())))[1:]

    first = run()
    assert [row[2] for row in first] == ["Ann Lee", "Bo"]
    assert all("/task/home/" in row[3] for row in first)
    assert run() == first, "the same annotators get the same links again"
    assert InhouseLink.objects.filter(project=project, stage=None).count() == 2
    home = client.get(urlsplit(first[0][3]).path)
    assert home.status_code == 200 and "Ann Lee" in home.content.decode()
    # Listed in the admin as the home page, not a task page.
    link = InhouseLink.objects.get(worker__display_name="Ann Lee")
    assert inhouse_entry_path(link=link) in first[0][3]
    assert inhouse_home_links(project=project, names=["Ann Lee"])[0][1] in first[0][3]


def test_a_practice_stage_is_listed_like_any_other_open_stage(client, study):
    project, _, _ = study
    make_stage(project, kind=StageKind.PRACTICE, name="warm-up", status=StageStatus.PUBLISHED)
    _, path, _ = home_and_token(project)
    assert "warm-up" in client.get(path).content.decode()


def test_no_start_for_a_stage_whose_qualification_they_failed_or_that_they_finished(client, study):
    """A researcher's day: the careless annotator failed the qualification and the careful one
    finished the trial; the home page offered both a Start that led only to a refusal or to
    "Nothing more to do". It offers Start where the stage gives them items, as its entry does."""
    project, stages, items = study
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.COLLECTING, order=0)
    stages["full"].requires_stage = qualification
    stages["full"].save(update_fields=["requires_stage"])
    careless_link, careless_path, careless_token = home_and_token(
        project, make_worker(display_name="Careless"))
    careful_link, careful_path, careful_token = home_and_token(
        project, make_worker(display_name="Careful"))
    make_qualification(worker=careless_link.worker, stage=qualification, passed=False)
    make_qualification(worker=careful_link.worker, stage=qualification, passed=True)
    done = make_assignment(stages["trial"], worker=careful_link.worker, items=items,
                           status=AssignmentStatus.SUBMITTED)
    for item in items:
        make_judgment(item=item, stage=stages["trial"], worker=careful_link.worker,
                      assignment=done)

    careless = client.get(careless_path).content.decode()
    assert stage_url(careless_token, stages["full"]) not in careless
    assert stage_url(careless_token, stages["trial"]) in careless  # no qualification needed
    refused = client.get(stage_url(careless_token, stages["full"]))
    assert refused.status_code == 403, "the entry refuses what the home page no longer offers"

    careful = client.get(careful_path).content.decode()
    assert stage_url(careful_token, stages["trial"]) not in careful
    assert client.get(stage_url(careful_token, stages["trial"])).status_code == 200
    assert "Nothing more to do" in client.get(
        stage_url(careful_token, stages["trial"])).content.decode()

    newcomer = make_worker(display_name="Passed")
    make_qualification(worker=newcomer, stage=qualification, passed=True)
    _, passed_path, passed_token = home_and_token(project, newcomer)
    passed = client.get(passed_path).content.decode()
    assert stage_url(passed_token, stages["full"]) in passed
    assert client.get(stage_url(passed_token, stages["full"])).status_code == 200


def test_batches_the_review_rules_held_back_count_as_done_and_say_what_waits(client, study):
    """Walking a first study: the review rules flagged an annotator's four fast batches; their
    home page said "20 items answered, 0 batches done" and "Flagged for review (see the note)",
    a note they cannot see."""
    project, stages, items = study
    link, path, _token = home_and_token(project)
    held = make_assignment(stages["trial"], worker=link.worker, items=items,
                           status=AssignmentStatus.FLAGGED,
                           review_note="Held for review: 0.2 s per item is below the minimum")
    for item in items:
        make_judgment(item=item, stage=stages["trial"], worker=link.worker, assignment=held)
    html = client.get(path).content.decode()
    assert "<td>trial</td>\n        <td>3 items answered, 1 batch done</td>" in html
    assert "Submitted, waiting for the researcher&#x27;s review" in html
    assert "see the note" not in html and "Held for review" not in html


@pytest.mark.reliability
def test_a_blocked_annotator_reads_it_on_their_home_page(client, study):
    """Walking a first study: after the researcher blocked an annotator, their stages refused
    them ("can no longer take tasks"), while their home page said only "nothing more for you
    here" beside a batch still "In progress"."""
    project, stages, items = study
    link, path, token = home_and_token(project)
    make_assignment(stages["full"], worker=link.worker, items=items[:1])
    assert stage_url(token, stages["full"]) in client.get(path).content.decode()  # Continue
    link.worker.status = "blocked"
    link.worker.save(update_fields=["status"])
    html = client.get(path).content.decode()
    assert 'id="home-blocked"' in html
    assert "Your account can no longer take tasks in this study." in html
    assert stage_url(token, stages["full"]) not in html and "Continue" not in html


def test_a_project_wide_link_at_its_task_address_lets_the_annotator_choose(client, study):
    """The task address of a project-wide link (what `inhouse_link_create` returns) with two
    open in-house stages goes to the home page, where the annotator picks one: it opened the
    latest (the full stage) and started work there, whatever the annotator meant to do. With
    one open stage it opens that stage, as before."""
    project, stages, _ = study
    link, task_path = inhouse_link_create(worker=make_worker(display_name="Dana"),
                                          project=project)
    response = client.get(task_path)
    assert response.status_code == 302
    assert response["Location"] == inhouse_home_path(link=link)
    assert not Assignment.objects.filter(worker=link.worker).exists()
    stages["full"].status = StageStatus.CLOSED
    stages["full"].save(update_fields=["status"])
    response = client.get(task_path)
    assert response.status_code == 200
    assert Assignment.objects.get(worker=link.worker).stage == stages["trial"]
