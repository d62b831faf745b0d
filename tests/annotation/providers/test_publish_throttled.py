"""Publishing survives 10% throttling and lost CreateHIT responses without duplicates (the
benchmark runs the same function with 1,000 HITs)."""
from __future__ import annotations

import pytest

from testing.publish_benchmark import publish_benchmark

pytestmark = [pytest.mark.mturk, pytest.mark.reliability, pytest.mark.django_db]


def test_publishing_many_hits_under_throttling():
    result = publish_benchmark(n_hits=80, throttle_rate=0.10, lost_responses=3)
    assert result["failed"] == 0 and result["stage_status"] == "collecting"
    assert result["open_locally"] == result["distinct_local_ids"] == 80
    assert result["hits_on_server"] == 80  # nothing created twice
    assert result["throttled"] > 0 and result["lost_responses"] == 3
    assert result["retries"] >= result["throttled"] + 3


def test_a_second_publish_while_the_first_creates_the_hits_creates_nothing_twice(
        mturk_server, likert_study, monkeypatch):
    """A double click (or a retry after a timeout, or the background task beside the action):
    the second publish finds the stage published and resumes its HITs while the first is
    still creating them. No HIT is created twice (each carries its UniqueRequestToken), and
    both say the stage is live: the first used to fail with "cannot go from collecting to
    collecting" after every HIT was up, reading as "not published"."""
    from annotation.models import StageKind, StageStatus
    from annotation.services import stages as stages_service
    from testing.factories import make_stage, make_user

    project, _gold, items = likert_study
    user = make_user(superuser=True)
    stage = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT,
                       provider="mturk", judgments_per_item=2, settings={"locales": []})
    stage.items.set(items)
    create = stages_service.stage_hits_create
    second, calls = [], []

    def first_is_overtaken(*, stage):
        calls.append(stage.pk)
        if len(calls) == 1:  # the first publish: the second one runs meanwhile, to the end
            second.append(stages_service.stage_publish(
                stage=type(stage).objects.get(pk=stage.pk), user=user))  # another request's
        return create(stage=stage)

    monkeypatch.setattr(stages_service, "stage_hits_create", first_is_overtaken)
    first = stages_service.stage_publish(stage=stage, user=user)
    n_hits = stage.hits.count()
    assert second[0].report.created == n_hits and second[0].stage.status == "collecting"
    assert first.report.failed == 0 and first.report.created == 0 and first.n_hits == n_hits
    assert first.stage.status == StageStatus.COLLECTING
    assert len(mturk_server.state.hits) == n_hits  # nothing created twice
    assert stage.transitions.filter(to_status=StageStatus.COLLECTING).count() == 1
