"""The demo data: each kind present with ten or more items, workable, loaded idempotently."""
from __future__ import annotations

import pytest

from annotation.domain.item_content import validate_gold, validate_item_content
from annotation.models import Item, Provider, StageKind, StageStatus, Worker
from annotation.services.demo import demo_data_load
from tests.support.imports import db_state

pytestmark = pytest.mark.django_db


def test_demo_has_every_kind_and_is_idempotent():
    projects = demo_data_load()
    state = db_state()
    again = demo_data_load()
    assert db_state() == state
    assert [p.pk for p in again] == [p.pk for p in projects]
    kinds = {p.kind for p in projects}
    assert kinds == {"likert", "ab", "mc"}
    modes = {p.experiment_mode for p in projects if p.kind == "mc"}
    assert "qa" in modes
    for project in projects:
        items = project.items.all()
        assert items.count() >= 10, project.slug
        for item in items:
            validate_item_content(project.kind, item.content)
            validate_gold(project.kind, item.gold)
        if project.kind != "ab":
            assert items.exclude(gold=None).exists(), project.slug
        full = project.stages.get(kind=StageKind.FULL)
        # Published by `stage_publish`, as at every other door: its HITs built, collecting.
        assert full.status == StageStatus.COLLECTING and full.provider == Provider.INHOUSE
        assert full.hits.exists() and full.publish_problem == ""
    assert Worker.objects.filter(provider=Provider.INHOUSE).count() >= 3


def test_demo_mc_spans_point_at_text():
    demo_data_load()
    for item in Item.objects.filter(project__slug="demo-mc-qa"):
        paragraph = item.content["paragraph"]
        for name in ("critical_span", "distractor_span"):
            start, end = item.content[name]
            assert 0 <= start < end <= len(paragraph)
            assert paragraph[start:end].strip() == paragraph[start:end]


def test_demo_workers_have_working_links(client):
    demo_data_load()
    demo_data_load()
    from annotation.services.demo import DEMO_PROJECTS, DEMO_WORKERS, demo_links

    links = demo_links()
    assert len(links) == len(DEMO_PROJECTS) * len(DEMO_WORKERS)  # once, despite two loads
    project, _worker, path = next(link for link in links if link[0].kind == "likert")
    response = client.get(path, follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert project.title in page
    # The page serves demo items to work on, not just the instructions.
    questions = {item.content["question"] for item in project.items.all()}
    assert any(question.replace("'", "&#x27;") in page or question in page
               for question in questions)


def test_the_demo_starc_paragraphs_are_design_units_each_read_once(client):
    """The STARC demo keeps the design it demonstrates: each paragraph is a unit, and an
    annotator's pages never hold two questions of one paragraph."""
    from annotation.services.demo import demo_links
    from tests.support.tasks import api, page_config

    demo_data_load()
    units = set(Item.objects.filter(project__slug="demo-mc-qa", is_practice=False)
                .values_list("design_unit", flat=True))
    assert "" not in units and len(units) >= 4
    _project, _worker, path = next(link for link in demo_links()
                                   if link[0].slug == "demo-mc-qa")
    seen = []
    for _page in range(10):
        response = client.get(path, follow=True)
        if b"task-config" not in response.content:
            break
        config = page_config(response)
        seen += list(Item.objects.filter(pk__in=config["items"], is_practice=False)
                     .values_list("design_unit", flat=True))
        answers = [{"item": item_id, "shown_choice": "a"} for item_id in config["items"]]
        assert api(client, "task-submit", config["token"], {"answers": answers}).status_code == 200
    assert seen and len(seen) == len(set(seen))
