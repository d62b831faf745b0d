"""An outsider counting stage ids at the crowd entry URLs (/task/mturk/<id>/,
/task/prolific/<id>/) learns nothing: an id no stage of that provider has gets exactly the page a
real stage gives the same made-up parameters (status and text), whatever the stage's status. Only
the provider id a real worker holds (the stage's hitId, its Prolific STUDY_ID) opens more."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.core.cache import cache
from django.urls import reverse

from annotation.models import Provider, StageStatus, TaskKind, Worker
from testing.factories import make_hit
from tests.support.tasks import make_task

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

MISSING_ID = 987654

MADE_UP = {
    "nothing": {},
    "malformed": {"assignmentId": "A1", "hitId": "../x", "workerId": "W1",
                  "PROLIFIC_PID": "P 1", "STUDY_ID": "S1", "SESSION_ID": "SS1"},
    "mturk preview": {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "MADEUPHIT"},
    "mturk accept": {"assignmentId": "A1", "hitId": "MADEUPHIT", "workerId": "W1"},
    "prolific": {"PROLIFIC_PID": "P1", "STUDY_ID": "MADEUPSTUDY", "SESSION_ID": "SS1"},
}


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def _stage(provider: str, *, status: str = StageStatus.PUBLISHED, settings: dict | None = None):
    _project, stage, items = make_task(TaskKind.LIKERT, provider=provider)
    stage.status = status
    stage.settings = {**(stage.settings or {}), **(settings or {})}
    stage.save(update_fields=["status", "settings"])
    return stage, items


def _page(client, entry: str, stage_id: int, params: dict):
    url = reverse(f"annotation:{entry}", kwargs={"stage_id": stage_id})
    response = client.get(url + "?" + urlencode(params))
    return response.status_code, response.content


# Every stage an outsider could probe. Left out: an open Prolific stage without a study, which
# takes any study id by design (local runs, the demo), so its made-up parameters get the page.
PROBED_STAGES = [
    (status, entry, provider, settings_)
    for status in (StageStatus.PUBLISHED, StageStatus.DRAFT, StageStatus.CLOSED)
    for entry, provider, settings_ in (
        ("task-mturk", Provider.MTURK, {}),
        ("task-prolific", Provider.PROLIFIC, {"prolific_study_id": "REALSTUDY"}),
        # Never published on Prolific (no study): only its status could tell, and it is not open.
        ("task-prolific", Provider.PROLIFIC, {}),
    )
    if not (status == StageStatus.PUBLISHED and provider == Provider.PROLIFIC and not settings_)
]


@pytest.mark.parametrize(("status", "entry", "provider", "settings_"), PROBED_STAGES)
@pytest.mark.parametrize("made_up", list(MADE_UP))
def test_a_real_stage_answers_made_up_parameters_as_a_missing_id_does(
        client, status, entry, provider, settings_, made_up):
    stage, items = _stage(provider, status=status, settings=settings_)
    make_hit(stage, items=items, external_id="REALHIT")
    workers = Worker.objects.count()
    real = _page(client, entry, stage.pk, MADE_UP[made_up])
    missing = _page(client, entry, MISSING_ID, MADE_UP[made_up])
    assert real == missing
    assert real[0] == 403 and b"task-config" not in real[1]
    assert Worker.objects.count() == workers


@pytest.mark.parametrize(("entry", "provider"), [("task-mturk", Provider.PROLIFIC),
                                                 ("task-prolific", Provider.MTURK),
                                                 ("task-mturk", Provider.INHOUSE)])
def test_another_providers_stage_answers_as_a_missing_id_does(client, entry, provider):
    stage, items = _stage(provider)
    make_hit(stage, items=items, external_id="REALHIT")
    params = {**MADE_UP["mturk accept"], **MADE_UP["prolific"], "hitId": "REALHIT"}
    assert _page(client, entry, stage.pk, params) == _page(client, entry, MISSING_ID, params)


def test_the_real_provider_ids_still_open_the_task_and_tell_its_status(client):
    _project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="REALHIT")
    opened = client.get(reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk}),
                        {"assignmentId": "A1", "hitId": "REALHIT", "workerId": "W1"})
    assert opened.status_code == 200 and b"task-config" in opened.content
    prolific, _items = _stage(Provider.PROLIFIC, status=StageStatus.CLOSED,
                              settings={"prolific_study_id": "REALSTUDY"})
    ended = client.get(reverse("annotation:task-prolific", kwargs={"stage_id": prolific.pk}),
                       {"PROLIFIC_PID": "P1", "STUDY_ID": "REALSTUDY", "SESSION_ID": "SS1"})
    assert ended.status_code == 403 and b"This task has ended" in ended.content
