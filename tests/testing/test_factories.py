"""The shared factories build valid rows for every kind."""
import pytest

from annotation.domain.item_content import validate_gold, validate_item_content
from annotation.models import Judgment, TaskKind
from testing.factories import (
    item_gold,
    make_assignment,
    make_hit,
    make_inhouse_link,
    make_item,
    make_judgment,
    make_project,
    make_qualification,
    make_stage,
    make_worker,
)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", list(TaskKind.values))
def test_factories_build_valid_rows(kind):
    project = make_project(kind)
    item = make_item(project, gold=item_gold(kind))
    validate_item_content(kind, item.content)
    validate_gold(kind, item.gold)
    stage = make_stage(project)
    worker = make_worker()
    hit = make_hit(stage, items=[item])
    assignment = make_assignment(stage, worker=worker, items=[item], hit=hit)
    make_judgment(item=item, stage=stage, worker=worker, assignment=assignment)
    make_qualification(worker=worker, stage=stage)
    make_inhouse_link(worker=worker, project=project)
    assert Judgment.objects.filter(item__project=project).count() == 1
    assert list(hit.items.all()) == [item]
