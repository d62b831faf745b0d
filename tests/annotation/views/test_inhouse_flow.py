"""In-house Likert work: several passages per page, no completion code, and the next items
straight after a submit (8 trial items took 6–8 cycles of Submit → code → "Continue")."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentItem,
    ExperimentMode,
    Judgment,
    StageKind,
    StageStatus,
    TaskKind,
    WorkerQualification,
)
from annotation.services.access import (
    inhouse_home_path,
    inhouse_home_stage_path,
    inhouse_link_create,
)
from annotation.services.assignments import assignment_release_abandoned
from testing.factories import make_item, make_project, make_stage, make_user, make_worker
from tests.support.tasks import api, page_config

pytestmark = pytest.mark.django_db


def _likert_study(n_passages: int, *, items_per_hit: int):
    project = make_project(TaskKind.LIKERT, items_per_hit=items_per_hit,
                           redundancy={"default": 1}, gold_rate=0)
    for n in range(n_passages):
        make_item(project, group_key=f"passage-{n}", content={
            "passage": f"Passage number {n}.", "question": f"Question {n}?",
            "references": [f"answer {n}"], "candidate": f"candidate {n}"})
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.PUBLISHED)
    return project, stage


def _submit_all(client, response):
    config = page_config(response)
    answers = [{"item": item, "score": 4} for item in config["items"]]
    result = api(client, "task-submit", config["token"], {"answers": answers})
    assert result.status_code == 200, result.content
    return config["items"], result.json()["complete_url"]


def _qualification_study(**project_fields):
    """A Likert project with a published qualification of two gold items (pass mark 0.5)."""
    project = make_project(TaskKind.LIKERT, items_per_hit=2, qualification_threshold=0.5,
                           **project_fields)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.PUBLISHED)
    qualification.items.set([make_item(project, gold={"score": 4}) for _ in range(2)])
    return project, qualification


def _pass_from_home(client, project, qualification, name: str):
    """A project-wide link holder starts the qualification from their home page and passes
    it (4 against gold 4): their link and the completion page's URL."""
    worker = make_worker(external_id=name)
    link, _entry = inhouse_link_create(worker=worker, project=project)
    start = client.get(inhouse_home_stage_path(link=link, stage=qualification))
    _items, complete_url = _submit_all(client, start)
    assert worker.qualifications.get(stage=qualification).passed
    return link, complete_url


def test_one_page_holds_several_passages_and_the_next_page_follows_at_once(client):
    project, stage = _likert_study(8, items_per_hit=5)
    worker = make_worker(external_id="ann")
    _link, path = inhouse_link_create(worker=worker, project=project, stage=stage)
    first_page = client.get(path)
    first, complete_url = _submit_all(client, first_page)
    assert len(first) == 5  # five passages of one candidate each, not one
    after = client.get(complete_url)
    # Straight on to the remaining three, no completion code in between; the next page says
    # the last one was saved (the first did not).
    assert after.status_code == 302 and after.url == f"{path}?saved=1"
    assert b"saved-banner" not in first_page.content
    next_page = client.get(after.url)
    assert b"Your last page of answers was saved" in next_page.content
    second, complete_url = _submit_all(client, next_page)
    assert len(second) == 3 and not set(first) & set(second)
    done = client.get(complete_url).content.decode()
    assert "You have answered everything this task has for you" in done
    assert "completion code" not in done and "Continue" not in done
    assert Judgment.objects.filter(worker=worker).count() == 8


def test_after_the_qualification_the_page_says_what_comes_next(client):
    project = make_project(TaskKind.LIKERT, items_per_hit=2, qualification_threshold=0.5)
    items = [make_item(project, gold={"score": 4}) for _ in range(2)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual",
                               status=StageStatus.PUBLISHED)
    qualification.items.set(items)
    worker = make_worker(external_id="bea")
    _link, path = inhouse_link_create(worker=worker, project=project, stage=qualification)
    _items, complete_url = _submit_all(client, client.get(path))
    page = client.get(complete_url)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Nothing more to do" not in text and "completion code" not in text
    # Graded at submit (4 against gold 4): the annotator learns they passed and what follows.
    assert worker.qualifications.get(stage=qualification).passed
    assert "You passed the qualification" in text and "link to the next part" in text


def test_after_the_qualification_a_project_link_holder_is_sent_to_their_page(client):
    """With one link for the whole project the next stage appears on the annotator's home page;
    the page told them to wait for a link the researcher never sends."""
    project, qualification = _qualification_study()
    link, complete_url = _pass_from_home(client, project, qualification, "cal")
    home = inhouse_home_path(link=link)
    text = client.get(complete_url).content.decode()
    assert "You passed the qualification" in text
    assert "link to the next part" not in text
    assert "appears on your page" in text and f'href="{home}"' in text


def test_open_domain_items_without_a_passage_get_no_empty_passage_panel(client):
    """Walking a first study on EVOUNA-style items (question, references, candidate; no
    passage): every page showed an open, empty "Passage" panel taking the left half."""
    project = make_project(TaskKind.LIKERT, items_per_hit=3, redundancy={"default": 1},
                           gold_rate=0)
    for n in range(2):
        make_item(project, content={"passage": "", "question": f"Who won {n}?",
                                    "references": [f"team {n}"], "candidate": f"team {n}"})
    make_item(project, content={"passage": "The cat sat on the mat.", "question": "Where?",
                                "references": ["on the mat"], "candidate": "mat"})
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.PUBLISHED)
    _link, path = inhouse_link_create(worker=make_worker(external_id="od"), project=project,
                                      stage=stage)
    page = client.get(path).content.decode()
    assert page.count("<summary>Passage</summary>") == 1  # the one real passage only
    assert "The cat sat on the mat." in page
    assert page.count('class="passage-block no-passage"') == 1
    assert "Who won 0?" in page and "Who won 1?" in page


def test_after_the_qualification_an_open_next_stage_is_named_not_awaited(client):
    """A study walk: the trial was already collecting when an annotator passed the
    qualification, and the page told them it "appears on your page when the researcher opens
    it" — they would wait for what was open. It names the open stage; a stage with nothing
    left for them (or none) keeps the waiting line."""
    project, qualification = _qualification_study(redundancy={"default": 1}, gold_rate=0)
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial", order=2,
                       status=StageStatus.COLLECTING, requires_stage=qualification)
    trial.items.set([make_item(project) for _ in range(2)])
    _link, complete_url = _pass_from_home(client, project, qualification, "dee")
    text = client.get(complete_url).content.decode()
    assert "The next part is open for you now: start “trial” from your page." in text
    assert "when the researcher opens it" not in text
    trial.status = StageStatus.CLOSED
    trial.save()
    assert "when the researcher opens it" in client.get(complete_url).content.decode()


def _time_out_every_page():
    """The sweep after the project's timeout: every idle page released (RETURNED)."""
    Assignment.objects.update(last_seen_at=timezone.now() - timedelta(days=2))
    assert assignment_release_abandoned() >= 1


def test_a_qualification_page_that_timed_out_opens_again_and_is_graded_whole(client):
    """A qualification is one assignment of all its items, graded once: the link reopens the
    page the sweep released (late), with the answers it confirmed, rather than a new page of
    what was left. Before, the new page held the two unanswered items only and its submit was
    graded on them: the two wrong answers confirmed before the timeout never counted (a pass
    at 100% on 2 items instead of a fail at 50% on 4)."""
    # STARC QA: the page that confirms its items one by one (Likert and A/B pages submit
    # theirs together, so nothing of theirs is stored before the timeout).
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.QA, owner=make_user(),
                           items_per_hit=4, qualification_threshold=0.8)
    items = [make_item(project, gold={"choice": "A"}, design_unit=f"p{n}") for n in range(4)]
    stage = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.COLLECTING)
    stage.items.set(items)
    _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
    first = page_config(client.get(path))
    rows = {row.item_id: row.presented_order for row in AssignmentItem.objects.all()}

    def shown(item, role):
        return "abcd"[rows[item].index(role)]

    for item in first["items"][:2]:  # answered wrong, then the page is left
        assert api(client, "task-confirm", first["token"],
                   {"item": item, "answer": {"shown_choice": shown(item, "B")}}
                   ).status_code == 200
    _time_out_every_page()

    again = page_config(client.get(path))
    assert again["items"] == first["items"] and sorted(again["confirmed"]) == sorted(
        str(item) for item in first["items"][:2])
    submitted = api(client, "task-submit", again["token"], {"answers": [
        {"item": item, "shown_choice": shown(item, "A")} for item in first["items"][2:]]})
    assert submitted.status_code == 200
    result = WorkerQualification.objects.get()
    assert (result.n_items, result.score, result.passed) == (4, 0.5, False)
    assert Assignment.objects.count() == 1


def test_a_starc_qualification_page_that_timed_out_can_still_be_finished(client):
    """Its paragraphs were shown, so they count as read, and a new page could hold none of
    them: the annotator read "Nothing more to do", got no result and could never enter the
    stages it gates (the home page offered no Start either). The timed-out page opens again."""
    project = make_project(TaskKind.MC, experiment_mode=ExperimentMode.QA, owner=make_user(),
                           items_per_hit=3, qualification_threshold=0.5)
    items = [make_item(project, gold={"choice": "A"}, design_unit=f"p{n}") for n in range(3)]
    stage = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.COLLECTING)
    stage.items.set(items)
    worker = make_worker()
    link, path = inhouse_link_create(worker=worker, project=project)
    home_stage = inhouse_home_stage_path(link=link, stage=stage)
    first = page_config(client.get(home_stage))
    _time_out_every_page()

    home = client.get(inhouse_home_path(link=link)).content
    assert home_stage.encode() in home and b"nothing more for you here" not in home
    again = page_config(client.get(home_stage))
    assert again["items"] == first["items"]
    rows = {row.item_id: row.presented_order for row in AssignmentItem.objects.all()}
    answers = [{"item": item, "shown_choice": "abcd"[rows[item].index("A")]}
               for item in again["items"]]
    assert api(client, "task-submit", again["token"], {"answers": answers}).status_code == 200
    result = WorkerQualification.objects.get(worker=worker)
    assert result.passed and result.n_items == 3
