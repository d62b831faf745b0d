"""A Prolific study has a place for every batch its pages hand out, and no more. The pages pick
items themselves, furthest from their target first (one Likert passage per batch), so a batch
fills across the HIT plan's boundaries: 5 items × 2 judgments in batches of 2 are 5 batches,
not the 6 assignments of HITs of 2, 2 and 1. Places, the cost estimate and
`stage_collection_complete` read one count (`places_for_plans`); MTurk keeps its HITs'
assignments. On the local Prolific fake. In-house pages pick the same way: such a stage is
complete when its items reached their redundancy, not at its HITs' assignments."""
from __future__ import annotations

from decimal import Decimal
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from annotation.cockpit_selectors import study_cockpit
from annotation.cost_selectors import stage_cost_estimate
from annotation.domain.gold_mix import gold_per_batch
from annotation.models import (
    Judgment,
    Provider,
    ProviderCall,
    ProviderCallStatus,
    StageStatus,
    TaskKind,
)
from annotation.providers import get_provider
from annotation.providers.calls import ProviderCallRefused
from annotation.selectors import stage_progress
from annotation.services.access import inhouse_link_create
from annotation.services.review import assignment_reject, stage_sync_and_review
from annotation.services.stages import stage_publish
from annotation.stage_plan_selectors import stage_hits_planned, stage_release_preview
from testing.factories import make_item, make_project, make_worker
from testing.prolific_server import ApiError
from testing.workers_sim import page_config, spend_time
from tests.support.providers import make_stages, open_to_every_worker

pytestmark = [pytest.mark.prolific, pytest.mark.django_db]

ANSWERS = {
    TaskKind.LIKERT: {"score": 3},
    TaskKind.AB: {"shown_choice": "A", "difficult": False, "aspects": ["factuality"],
                  "justification": "Answer A explains the cause much better."},
    TaskKind.MC: {"shown_choice": "a"},
}


def _trial(kind, passages: list[int], provider: str = "prolific"):
    """A trial of `passages` (Likert: one passage per size; otherwise one pool of their sum)
    × 2 judgments, in batches of 2, without gold."""
    project = make_project(kind, reward_per_hit=Decimal("0.40"), items_per_hit=2,
                           redundancy={"default": 2}, justification_min_length=20)
    items = [make_item(project, group_key=f"p{g}" if kind == TaskKind.LIKERT else "")
             for g, size in enumerate(passages) for _ in range(size)]
    _q, trial, _f = make_stages(project, provider)
    open_to_every_worker(trial)
    trial.judgments_per_item = 2
    trial.settings.update({"gold_rate": 0})
    trial.save()
    trial.items.set(items)
    return trial, items


def _take_part(server, client, stage, study_id: str, pid: str) -> list[int]:
    """A participant opens the page and submits what it hands out: the batch's item ids ([]:
    the page had nothing to do)."""
    session = server.state.participant_start(study_id, pid)
    query = urlencode({"PROLIFIC_PID": pid, "STUDY_ID": study_id, "SESSION_ID": session})
    items = _answer_page(client, stage, client.get(
        reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk}) + "?" + query))
    if items:
        server.state.participant_complete(session, stage.settings["prolific_completion_code"])
    return items


def _answer_page(client, stage, page) -> list[int]:
    """Answer every item of a task page and submit it: its item ids ([]: the page had
    nothing to do)."""
    assert page.status_code == 200
    if b'id="task-config"' not in page.content:
        return []
    config = page_config(page)
    spend_time(config, 6.0)
    answers = [{"item": pk, "time_spent_ms": 6000, **ANSWERS[stage.project.kind]}
               for pk in config["items"]]
    done = client.post(reverse("annotation:task-submit"), data={"answers": answers},
                       content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=config["token"])
    assert done.status_code == 200, done.content[:300]
    return list(config["items"])


@pytest.mark.reliability
@pytest.mark.parametrize("kind,passages,batches", [
    (TaskKind.LIKERT, [3, 2, 1, 4], 3 + 2 + 2 + 4),  # HITs 2+1, 2, 1, 2+2: 12 assignments
    (TaskKind.AB, [5], 5),  # HITs 2+2+1: 6 assignments
    (TaskKind.MC, [5], 5),
])
def test_a_study_has_a_place_per_batch_its_pages_hand_out(
        prolific_server, researcher, client, kind, passages, batches):
    """Every place gets a full batch, every item its 2 judgments, and the stage reaches
    reviewing by itself (was: places summed the HITs' assignments, one more per passage or
    pool whose last HIT was short; the last participant read "nothing more to do" on a paid
    place, and the stage, counting places, never completed)."""
    trial, items = _trial(kind, passages)
    plans = stage_hits_planned(stage=trial)
    assert sum(plan.max_assignments for plan in plans) > batches
    assert stage_cost_estimate(stage=trial, plans=plans).n_assignments == batches
    result = stage_publish(stage=trial, user=researcher)
    assert result.report.failed == 0, result.report.errors
    trial.refresh_from_db()
    study = prolific_server.state.studies[trial.settings["prolific_study_id"]]
    assert study["total_available_places"] == batches
    estimate = stage_cost_estimate(stage=trial)
    assert estimate.n_assignments == batches and estimate.rewards == Decimal("0.40") * batches

    handed = [_take_part(prolific_server, client, trial, study["id"], f"P{n}")
              for n in range(batches)]
    assert all(handed)  # no place without work
    assert Judgment.objects.filter(stage=trial).count() == 2 * len(items)
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING


GOLD = {TaskKind.LIKERT: {"score": 5}, TaskKind.AB: {"choice": "B"}}


@pytest.mark.reliability
@pytest.mark.parametrize("kind,passages,gold_in,rate", [
    # A/B, 14 items × 2 judgments in batches of 5 at 0.15: 0.75, half up, 1 gold item and 4
    # regular items a batch (was: 24 to 27 of the 28 judgments, the places all taken).
    (TaskKind.AB, [14], [0], 0.15),
    (TaskKind.AB, [14], [0], 0.2),  # a whole number: 1 of 5
    # Likert: gold in passages 0 and 2 only; a batch of passage 1 or 3 holds 5 regular items
    # in the plan and on the pages alike (was: places for nobody, or judgments missing).
    (TaskKind.LIKERT, [6, 4, 7, 3], [0, 2], 0.15),
    (TaskKind.LIKERT, [6, 4, 7, 3], [0, 2], 0.4),  # 2 of 5
])
def test_a_study_mixing_gold_has_a_place_per_batch_its_pages_hand_out(
        prolific_server, researcher, client, kind, passages, gold_in, rate):
    """The HIT plan (the study's places, the estimate) and the pages give each batch the same
    whole number of gold items (`annotation.domain.gold_mix`; a Likert batch only from its
    passage), so every place gets a batch, every item its 2 judgments, and the stage reaches
    reviewing by itself."""
    likert = kind == TaskKind.LIKERT
    project = make_project(kind, reward_per_hit=Decimal("0.40"), items_per_hit=5,
                           redundancy={"default": 2}, justification_min_length=20)
    items = [make_item(project, group_key=f"p{g}" if likert else "")
             for g, size in enumerate(passages) for _ in range(size)]
    gold = [make_item(project, group_key=f"p{g}" if likert else "", is_gold_check=True,
                      gold=GOLD[kind]) for g in gold_in for _ in range(3)]
    _q, trial, _f = make_stages(project, "prolific")
    open_to_every_worker(trial)
    trial.judgments_per_item = 2
    trial.settings.update({"gold_rate": rate})
    trial.save()
    trial.items.set(items)
    n_gold = gold_per_batch(5, rate)
    assert n_gold  # every case mixes gold in
    # Per pool (a Likert passage; A/B: all items): batches of `room` regular items, the
    # largest deficit first, hand out max(2, ceil(2 × items / room)) batches.
    rooms = {g: 5 - (n_gold if g in gold_in else 0) for g in range(len(passages))}
    places = sum(max(2, -(-2 * size // rooms[g])) for g, size in enumerate(passages))
    preview = stage_release_preview(stage=trial)
    assert f"{n_gold} gold item" in preview.as_text() and "batch of 5" in preview.as_text()
    assert stage_cost_estimate(stage=trial).n_assignments == places
    result = stage_publish(stage=trial, user=researcher)
    assert result.report.failed == 0, result.report.errors
    trial.refresh_from_db()
    study = prolific_server.state.studies[trial.settings["prolific_study_id"]]
    assert study["total_available_places"] == places

    handed = [_take_part(prolific_server, client, trial, study["id"], f"P{n}")
              for n in range(places)]
    assert all(handed)  # no place without work
    passage_of = {item.pk: g for g, item in
                  ((int(i.group_key[1:]) if likert else 0, i) for i in [*items, *gold])}
    gold_ids = {item.pk for item in gold}
    for batch in handed:
        regular = [pk for pk in batch if pk not in gold_ids]
        pool = passage_of[regular[0]]
        assert len(regular) <= rooms[pool]
        if pool not in gold_in:  # a passage without gold: its batches hold none
            assert len(regular) == len(batch)
    assert any(set(batch) & gold_ids for batch in handed)
    counted = Judgment.objects.filter(stage=trial, item__in=items).values_list("item_id",
                                                                              flat=True)
    assert sorted(counted) == sorted(item.pk for item in items for _ in range(2))
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING


def test_mturk_hits_keep_their_assignments(db):
    trial, _items = _trial(TaskKind.AB, [5], provider=Provider.MTURK)
    assert stage_cost_estimate(stage=trial).n_assignments == 6  # HITs of 2, 2 and 1, × 2


def _work_one_inhouse_page(client, stage, name: str) -> list[int]:
    """An annotator opens their in-house link and submits the page's batch: its item ids ([]:
    nothing to do)."""
    _link, path = inhouse_link_create(worker=make_worker(external_id=name),
                                      project=stage.project, stage=stage)
    return _answer_page(client, stage, client.get(path))


@pytest.mark.reliability
@pytest.mark.parametrize("kind,passages", [
    (TaskKind.AB, [5]),  # HITs 2+2+1 × 2: 6 assignments; the pages hand out 5 batches
    (TaskKind.MC, [5]),
    (TaskKind.LIKERT, [3, 2, 1, 4]),  # 12 assignments; in-house pages fill across passages
])
def test_an_inhouse_stage_is_complete_when_its_items_reach_their_redundancy(
        researcher, client, kind, passages):
    """In-house pages pick items as Prolific's do, so the stage is complete (reviewing, by
    itself at the sync) once every item has its 2 judgments, not at its HITs' assignments,
    and not a batch earlier; the progress every door shows says the same (was: 6 planned
    assignments for 5 batches, the stage stayed collecting for work no page could hand out)."""
    trial, items = _trial(kind, passages, provider=Provider.INHOUSE)
    assert stage_publish(stage=trial, user=researcher).report.failed == 0
    planned = sum(trial.hits.values_list("max_assignments", flat=True))
    batches = []
    while trial.status == StageStatus.COLLECTING:
        batches.append(_work_one_inhouse_page(client, trial, f"A{len(batches)}"))
        assert batches[-1]  # no annotator of a collecting stage without work
        stage_sync_and_review(stage=trial)
        trial.refresh_from_db()
        progress = stage_progress(stages=[trial])[trial.pk]
        collected = Judgment.objects.filter(stage=trial).count()
        assert trial.status == (StageStatus.REVIEWING if collected == 2 * len(items)
                                else StageStatus.COLLECTING)
        assert (progress.percent == 100) == (trial.status == StageStatus.REVIEWING)
        assert len(batches) <= 2 * len(items)
    assert len(batches) < planned  # the pages fill batches across the HITs' boundaries
    assert trial.status == StageStatus.REVIEWING
    assert sorted(Judgment.objects.filter(stage=trial).values_list("item_id", flat=True)) \
        == sorted(item.pk for item in items for _ in range(2))
    row = next(row for row in study_cockpit(project=trial.project).stages
               if row.stage.pk == trial.pk)
    assert row.next_step.startswith("nothing waits for review")


def test_an_inhouse_stage_with_an_item_short_is_not_complete(researcher, client):
    """Every batch but the last in: the stage keeps collecting, whatever the assignments."""
    trial, items = _trial(TaskKind.AB, [5], provider=Provider.INHOUSE)
    stage_publish(stage=trial, user=researcher)
    for n in range(4):
        assert _work_one_inhouse_page(client, trial, f"A{n}")
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.COLLECTING
    assert stage_progress(stages=[trial])[trial.pk].judgments == 8


@pytest.mark.reliability
@pytest.mark.parametrize("provider", [Provider.PROLIFIC, Provider.INHOUSE])
@pytest.mark.parametrize("kind,passages,n_practice", [
    (TaskKind.AB, [5], 1),  # was: each place a practice item and 1 of its 2 data items
    (TaskKind.LIKERT, [3, 2, 1, 4], 2),  # was: the first batch all practice, no data
])
def test_practice_items_come_on_top_of_the_batch_its_place_was_counted_with(
        prolific_server, researcher, client, provider, kind, passages, n_practice):
    """Every participant does the project's practice items first, on top of the batch of 2
    data items the HIT plan, the study's places and the reward were counted with: so every
    place gets its full batch, every item its 2 judgments, and the stage reaches reviewing by
    itself (was: practice took room of the batch, so the places were all taken with judgments
    missing and the stage went to reviewing early)."""
    trial, items = _trial(kind, passages, provider=provider)
    practice = [make_item(trial.project, is_practice=True) for _ in range(n_practice)]
    practice_ids = {item.pk for item in practice}
    places = stage_cost_estimate(stage=trial).n_assignments
    assert stage_publish(stage=trial, user=researcher).report.failed == 0
    trial.refresh_from_db()
    handed = []
    while trial.status == StageStatus.COLLECTING and len(handed) < 4 * len(items):
        if provider == Provider.PROLIFIC:
            study = prolific_server.state.studies[trial.settings["prolific_study_id"]]
            assert study["total_available_places"] == places
            handed.append(_take_part(prolific_server, client, trial, study["id"],
                                     f"P{len(handed)}"))
        else:
            handed.append(_work_one_inhouse_page(client, trial, f"A{len(handed)}"))
        stage_sync_and_review(stage=trial)
        trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING
    if provider == Provider.PROLIFIC:
        assert len(handed) == places  # the study's places, all taken
    for batch in handed:
        assert set(batch[:n_practice]) == practice_ids  # practice first, every participant
        assert 0 < len(batch) - n_practice <= 2
    counted = Judgment.objects.filter(stage=trial, item__in=items).values_list("item_id",
                                                                              flat=True)
    assert sorted(counted) == sorted(item.pk for item in items for _ in range(2))


@pytest.mark.reliability
def test_a_study_whose_items_settled_early_is_complete_with_places_left(
        prolific_server, researcher, client):
    """Adaptive redundancy (2 judgments, more only while judges disagree) on a study planned
    with places for 3 judgments per item: once every item settled at 2, the pages hand out
    nothing more, so the stage reaches reviewing by itself with places left (was: it waited
    for participants who would read "nothing more to do")."""
    trial, items = _trial(TaskKind.LIKERT, [4])
    trial.judgments_per_item = 3
    trial.settings.update({"redundancy": {"min": 2, "max": 3, "agreement": 0.75}})
    trial.save()
    assert stage_publish(stage=trial, user=researcher).report.failed == 0
    trial.refresh_from_db()
    study = prolific_server.state.studies[trial.settings["prolific_study_id"]]
    assert study["total_available_places"] == 6  # 4 items × 3 in batches of 2
    for n in range(4):  # every judge gives 3: each item settles at 2 judgments
        assert trial.status == StageStatus.COLLECTING
        assert _take_part(prolific_server, client, trial, study["id"], f"P{n}")
        stage_sync_and_review(stage=trial)
        trial.refresh_from_db()
        progress = stage_progress(stages=[trial])[trial.pk]
        assert (progress.percent == 100) == (trial.status == StageStatus.REVIEWING)
    assert trial.status == StageStatus.REVIEWING
    # Progress reads the items' targets, as completion does (was: 8 of 12, 67%, in reviewing).
    assert stage_progress(stages=[trial])[trial.pk].text() == "8 of 8 judgments counted (100%)"
    assert sorted(Judgment.objects.filter(stage=trial).values_list("item_id", flat=True)) \
        == sorted(item.pk for item in items for _ in range(2))


TRANSITION = "POST studies/<id>/transition/"


def _settled_early(server, researcher, client):
    """The adaptive study above, its work held for review (not approved yet): 4 participants,
    then every item settled at 2 judgments with 2 of the study's 6 places left. Returns
    (stage, study, the submitted assignments)."""
    trial, _items = _trial(TaskKind.LIKERT, [4])
    trial.judgments_per_item = 3
    trial.settings.update({"redundancy": {"min": 2, "max": 3, "agreement": 0.75},
                           "review": {"approve_after_seconds": 3600}})
    trial.save()
    assert stage_publish(stage=trial, user=researcher).report.failed == 0
    trial.refresh_from_db()
    study = server.state.studies[trial.settings["prolific_study_id"]]
    for n in range(4):
        assert _take_part(server, client, trial, study["id"], f"P{n}")
    return trial, study, list(trial.assignments.order_by("pk"))


def _transitions(stage, action: str) -> list[ProviderCall]:
    return list(ProviderCall.objects.filter(stage=stage, request__action=action)
                .order_by("pk"))


@pytest.mark.reliability
def test_a_study_recruits_exactly_while_its_stage_collects(prolific_server, researcher,
                                                           client):
    """A study complete with places left is PAUSED on Prolific when the sync moves its stage
    to reviewing, so Prolific sends nobody to a page with nothing to do (was: the study stayed
    ACTIVE, and each participant it sent read "paused while the researcher reviews" and had
    to return it unpaid); one recorded call, not one per sync. A rejection by hand reopens the
    stage and STARTs the study: the next participant gets the items; complete again, it is
    paused again."""
    server = prolific_server
    trial, study, work = _settled_early(server, researcher, client)
    assert study["status"] == "ACTIVE"
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING
    assert study["status"] == "PAUSED"
    assert study["total_available_places"] - server.state.places_taken(study["id"]) == 2
    with pytest.raises(ApiError, match="not active"):
        server.state.participant_start(study["id"], "P8")  # no new participant
    stage_sync_and_review(stage=trial)
    assert [c.status for c in _transitions(trial, "PAUSE")] == [ProviderCallStatus.SUCCEEDED]
    assert server.stats[TRANSITION] == 2  # PUBLISH, PAUSE

    # One who reserved a place before the pause is told to return the study, not to wait.
    page = client.get(reverse("annotation:task-prolific", kwargs={"stage_id": trial.pk}) + "?"
                      + urlencode({"PROLIFIC_PID": "P9", "STUDY_ID": study["id"],
                                   "SESSION_ID": f"s{9:022x}"}))
    assert page.status_code == 403
    assert "return the study on Prolific" in page.content.decode()

    work[0].refresh_from_db()
    assignment_reject(assignment=work[0], reason="the same score on every candidate answer")
    trial.refresh_from_db()
    assert trial.status == StageStatus.COLLECTING
    assert study["status"] == "ACTIVE"
    assert [c.status for c in _transitions(trial, "START")] == [ProviderCallStatus.SUCCEEDED]
    assert _take_part(server, client, trial, study["id"], "P8")  # the items again
    stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING
    assert study["status"] == "PAUSED"
    assert len(_transitions(trial, "PAUSE")) == 2


@pytest.mark.reliability
def test_a_pause_that_fails_is_seen_and_retried_by_the_next_sync(prolific_server, researcher,
                                                                 client, settings):
    """Prolific throttles every try of the PAUSE: the stage still moves to reviewing (logged),
    the sync says the study was not paused, the call stays recorded as not done, and the next
    sync pauses it (was: nothing paused it at all)."""
    server = prolific_server
    trial, study, _work = _settled_early(server, researcher, client)
    settings.PROLIFIC_MAX_ATTEMPTS = 2
    server.rate_limit_next[TRANSITION] = 2
    sync, _review = stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING
    assert trial.transitions.order_by("-pk").first().to_status == StageStatus.REVIEWING
    assert study["status"] == "ACTIVE"
    assert "Prolific was not told" in sync.recruiting_problem
    [call] = _transitions(trial, "PAUSE")
    assert call.status == ProviderCallStatus.PENDING and "429" in call.error

    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.recruiting_problem == ""
    assert study["status"] == "PAUSED"
    [call] = _transitions(trial, "PAUSE")
    assert (call.status, call.attempts) == (ProviderCallStatus.SUCCEEDED, 2)


def test_the_fake_pauses_only_an_active_study_and_starts_only_a_paused_one(
        prolific_server, researcher, client):
    """As Prolific: PAUSE an ACTIVE study, START a PAUSED one; the provider reads the status
    first, so a study Prolific moved by itself (full: no longer ACTIVE) is left alone."""
    server = prolific_server
    trial, study, _work = _settled_early(server, researcher, client)
    provider = get_provider(Provider.PROLIFIC)
    with pytest.raises(ProviderCallRefused):
        provider.request("POST", f"studies/{study['id']}/transition/", json={"action": "START"})
    study["status"] = "AWAITING REVIEW"
    assert provider.stage_recruiting(stage=trial, recruiting=False, occasion="t1") == {
        "status": "AWAITING REVIEW", "sent": False}
    assert study["status"] == "AWAITING REVIEW"
    with pytest.raises(ProviderCallRefused):
        provider.request("POST", f"studies/{study['id']}/transition/", json={"action": "PAUSE"})


@pytest.mark.reliability
def test_a_pause_due_while_prolific_shows_a_passing_status_waits_for_the_next_sync(
        prolific_server, researcher, client):
    """A study Prolific shows in a passing status (PUBLISHING, SCHEDULED) when the pause is
    due: the call is not counted done (it was: the skip was recorded as a success under the
    move's key, and the study never paused), and the next sync pauses it."""
    server = prolific_server
    trial, study, _work = _settled_early(server, researcher, client)
    study["status"] = "PUBLISHING"
    sync, _review = stage_sync_and_review(stage=trial)
    trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING
    assert "is PUBLISHING" in sync.recruiting_problem
    [call] = _transitions(trial, "PAUSE")
    assert call.status != ProviderCallStatus.SUCCEEDED
    study["status"] = "ACTIVE"
    sync, _review = stage_sync_and_review(stage=trial)
    assert sync.recruiting_problem == "" and study["status"] == "PAUSED"
    [call] = _transitions(trial, "PAUSE")
    assert call.status == ProviderCallStatus.SUCCEEDED


def _take_part_disagreeing(server, client, stage, study_id: str, pid: str) -> list[int]:
    """As `_take_part`, each item scored 1 or 5 in turn (the item's judgments so far even or
    odd), so its judges never agree: the rule asks for more up to its `max`."""
    session = server.state.participant_start(study_id, pid)
    query = urlencode({"PROLIFIC_PID": pid, "STUDY_ID": study_id, "SESSION_ID": session})
    page = client.get(reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
                      + "?" + query)
    assert page.status_code == 200
    if b'id="task-config"' not in page.content:
        return []
    config = page_config(page)
    spend_time(config, 6.0)
    answers = [{"item": pk, "time_spent_ms": 6000,
                "score": 1 if Judgment.objects.filter(item_id=pk).count() % 2 == 0 else 5}
               for pk in config["items"]]
    done = client.post(reverse("annotation:task-submit"), data={"answers": answers},
                       content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=config["token"])
    assert done.status_code == 200, done.content[:300]
    server.state.participant_complete(session, stage.settings["prolific_completion_code"])
    return list(config["items"])


@pytest.mark.reliability
def test_an_adaptive_study_has_places_for_the_rules_max_and_its_estimate_says_so(
        prolific_server, researcher, client):
    """Adaptive redundancy {min 2, max 4} on a stage of 2 judgments per item: judges who never
    agree make every item want 4. The study was planned at the fixed 2 (4 places for 4 items
    in batches of 2), so its places ran out with every item short and the stage went to
    reviewing half collected. It is planned at the rule's max: 8 places, every item reaches 4,
    and the estimate (the publish confirmation's total) says it is the most it can cost."""
    trial, items = _trial(TaskKind.LIKERT, [4])
    trial.settings.update({"redundancy": {"min": 2, "max": 4, "agreement": 0.75}})
    trial.save()
    estimate = stage_cost_estimate(stage=trial)
    assert estimate.n_assignments == 8 and estimate.rewards == Decimal("3.20")
    assert "planned for up to 4 judgments per item" in estimate.as_text()
    assert "planned for up to 4 judgments per item" in estimate.confirmation_text()
    assert stage_publish(stage=trial, user=researcher).report.failed == 0
    trial.refresh_from_db()
    study = prolific_server.state.studies[trial.settings["prolific_study_id"]]
    assert study["total_available_places"] == 8
    for n in range(8):
        assert trial.status == StageStatus.COLLECTING, n
        assert _take_part_disagreeing(prolific_server, client, trial, study["id"], f"P{n}")
        stage_sync_and_review(stage=trial)
        trial.refresh_from_db()
    assert trial.status == StageStatus.REVIEWING
    counts = sorted(Judgment.objects.filter(stage=trial, item__in=items)
                    .values_list("item_id", flat=True))
    assert counts == sorted(item.pk for item in items for _ in range(4))


def test_a_fixed_redundancy_stage_and_mturk_are_planned_as_before(db):
    """The rule's max plans only the stages whose pages follow the rule."""
    trial, _items = _trial(TaskKind.LIKERT, [4])
    assert stage_cost_estimate(stage=trial).redundancy_note == ""
    assert {plan.max_assignments for plan in stage_hits_planned(stage=trial)} == {2}
    trial.settings.update({"redundancy": {"min": 2, "max": 4, "agreement": 0.75}})
    trial.provider = Provider.MTURK  # refused at publish; its plan is not the rule's
    assert {plan.max_assignments for plan in stage_hits_planned(stage=trial)} == {2}
    assert stage_cost_estimate(stage=trial).redundancy_note == ""


def test_hits_built_at_the_fixed_redundancy_do_not_claim_the_rules_max(prolific_server,
                                                                       researcher):
    """A study published at the fixed redundancy (before its plan followed the rule, or the
    rule set after publishing): its estimate reads its HITs, 2 judgments per item, and does
    not say it is planned for the rule's max."""
    trial, _items = _trial(TaskKind.LIKERT, [4])
    assert stage_publish(stage=trial, user=researcher).report.failed == 0
    trial.refresh_from_db()
    trial.settings.update({"redundancy": {"min": 2, "max": 4, "agreement": 0.75}})
    trial.save()
    estimate = stage_cost_estimate(stage=trial)
    assert (estimate.n_assignments, estimate.redundancy_note) == (4, "")
