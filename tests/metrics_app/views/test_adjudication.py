"""The adjudication page: only the project's researchers; records a label or says what is
wrong with it."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Adjudication, TaskKind
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
def disputed():
    owner = make_user("adj-owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="adj-page")
    stage = make_stage(project)
    item = make_item(project, external_id="q-disputed", content={
        "passage": "", "question": "Who found X-rays?", "references": ["Röntgen"],
        "candidate": "<b>Wilhelm</b> Röntgen"})
    for score in (1, 5):
        make_judgment(item=item, stage=stage, worker=make_worker(), score=score)
    return project, owner, item


def test_queue_shows_the_item_its_answers_and_records_a_label(client, disputed):
    project, owner, item = disputed
    url = reverse("metrics:adjudicate", args=[project.slug])
    assert client.get(url).status_code == 302                       # login first
    client.force_login(make_user("stranger"))
    assert client.get(url).status_code == 404                       # not theirs
    client.force_login(owner)
    html = client.get(url).content.decode()
    assert "q-disputed" in html and "disagreement 2.00" in html
    assert "&lt;b&gt;Wilhelm&lt;/b&gt;" in html                      # item text escaped
    record = reverse("metrics:adjudicate-record", args=[project.slug])
    refused = client.post(record, {"item": item.pk, "label": "9"}, follow=True)
    assert "the label must be a score from 1 to 5" in refused.content.decode()
    assert not Adjudication.objects.exists()
    assert "no such item" in client.post(record, {"item": "abc", "label": "4"},
                                         follow=True).content.decode().lower()
    done = client.post(record, {"item": item.pk, "label": "5", "note": "full name given"},
                       follow=True).content.decode()
    assert "q-disputed is now labelled 5" in done
    decision = Adjudication.objects.get()
    assert (decision.score, decision.note, decision.decided_by) == (5.0, "full name given", owner)
    assert "q-disputed" not in done.split("is now labelled")[1]      # left the queue
    assert "q-disputed" in client.get(url, {"decided": "1"}).content.decode()


def test_another_projects_item_cannot_be_labelled(client, disputed):
    project, owner, _item = disputed
    other = make_item(make_project(TaskKind.LIKERT, owner=make_user("someone")))
    client.force_login(owner)
    response = client.post(reverse("metrics:adjudicate-record", args=[project.slug]),
                           {"item": other.pk, "label": "3"})
    assert response.status_code == 404 and not Adjudication.objects.exists()
