"""Judgments are append-only, and one worker judges an item once per stage (database rule)."""
from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from annotation.models import AppendOnlyError, Judgment
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db


@pytest.fixture
def judgment():
    project = make_project()
    return make_judgment(item=make_item(project), stage=make_stage(project), score=4)


def test_a_saved_judgment_cannot_be_changed(judgment):
    judgment.score = 1
    with pytest.raises(AppendOnlyError):
        judgment.save()
    with pytest.raises(AppendOnlyError):
        Judgment.objects.filter(pk=judgment.pk).update(score=1)
    with pytest.raises(AppendOnlyError), transaction.atomic():  # bulk_update opens its own
        Judgment.objects.bulk_update([judgment], ["score"])
    assert Judgment.objects.get(pk=judgment.pk).score == 4


def test_a_saved_judgment_cannot_be_deleted(judgment):
    with pytest.raises(AppendOnlyError):
        judgment.delete()
    with pytest.raises(AppendOnlyError):
        Judgment.objects.filter(pk=judgment.pk).delete()
    assert Judgment.objects.filter(pk=judgment.pk).exists()


def test_one_judgment_per_worker_item_and_stage_is_a_database_constraint(judgment):
    duplicate = Judgment(item=judgment.item, stage=judgment.stage, worker=judgment.worker,
                         score=2)
    with pytest.raises(IntegrityError), transaction.atomic():
        Judgment.objects.bulk_create([duplicate])  # bypasses every Python-side check
    assert Judgment.objects.filter(item=judgment.item).count() == 1
    # The same worker in another stage, or another worker in this stage, is a new judgment.
    make_judgment(item=judgment.item, stage=make_stage(judgment.item.project),
                  worker=judgment.worker, score=2)
    make_judgment(item=judgment.item, stage=judgment.stage, worker=make_worker(), score=2)
    assert Judgment.objects.filter(item=judgment.item).count() == 3
