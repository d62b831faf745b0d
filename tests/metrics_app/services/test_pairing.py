"""Adaptive pairing of an A/B stage: the draw favours the pairs of systems that decide the
ranking, every probability is recorded, and the guards hold."""
from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.management import call_command

from annotation.models import RoutingDraw, StageKind, StageStatus, TaskKind
from annotation.stage_errors import StageError
from metrics_app.services.pairing import stage_draw_adaptive_pairs
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db
STRENGTH = {"s1": 2.0, "s2": 1.8, "s3": -2.0}
PAIRS = [("s1", "s2"), ("s1", "s3"), ("s2", "s3")]


def _item(project, a, b, n):
    return make_item(project, external_id=f"{a}-{b}-{n}", content={
        "question": f"q {a} {b} {n}", "evidence": [], "setting": "HM",
        "answer_a": {"text": "a", "kind": "model", "upvotes": None, "system": a},
        "answer_b": {"text": "b", "kind": "model", "upvotes": None, "system": b}})


@pytest.fixture
def arena():
    rng = np.random.default_rng(0)
    project = make_project(TaskKind.AB, slug="pairing")
    earlier = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.COLLECTING)
    workers = [make_worker() for _ in range(4)]
    for n in range(30):
        a, b = PAIRS[n % 3]
        item = _item(project, a, b, n)
        p = 1 / (1 + np.exp(-(STRENGTH[a] - STRENGTH[b])))
        for worker in workers:
            make_judgment(item=item, stage=earlier, worker=worker,
                          choice="A" if rng.random() < p else "B")
    draft = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT, name="next")
    fresh = [_item(project, *PAIRS[n % 3], 100 + n) for n in range(60)]
    draft.items.set(fresh)
    return project, draft


def test_draw_favours_the_close_pair_and_records_every_probability(arena):
    project, draft = arena
    summary = stage_draw_adaptive_pairs(stage=draft, budget=20)
    assert summary.population == 60 and summary.systems == 3 and summary.votes_so_far == 120
    draws = list(RoutingDraw.objects.filter(stage=draft).select_related("item"))
    assert len(draws) == 60 and all(0 < d.probability <= 1 for d in draws)
    by_pair = {}
    for draw in draws:
        by_pair.setdefault(draw.item.external_id.rsplit("-", 1)[0], set()).add(draw.probability)
    # s1 and s2 are close: that pair decides the ranking; s1-s3 is never in doubt.
    assert max(by_pair["s1-s2"]) > 2 * max(by_pair["s1-s3"])
    assert sum(d.probability for d in draws) == pytest.approx(20, abs=1e-6)
    drawn = {d.item_id for d in draws if d.drawn}
    assert set(draft.items.values_list("id", flat=True)) == drawn
    draft.refresh_from_db()
    assert draft.settings["pairing"] == "adaptive" and draft.settings["pairing_budget"] == 20
    # Drawn again over the same population, with the same seed: the same draw.
    again = stage_draw_adaptive_pairs(stage=draft, budget=20)
    assert again.drawn == summary.drawn


def test_gold_checks_do_not_move_the_pairing(arena):
    """Adaptive pairing fits the votes the leaderboard reads (`board_mask`): a gold check's
    pair was built for its known answer (here s2's answer is plainly better, 40 of 40 votes),
    so it ranks no system on the board, and it must not settle s1-s2 for the pairing either
    (it made that close pair look decided and cut its share)."""
    from metrics_app.reports.project import project_report

    project, draft = arena
    before = stage_draw_adaptive_pairs(stage=draft, budget=20)
    probabilities = dict(RoutingDraw.objects.filter(stage=draft).values_list("item_id",
                                                                             "probability"))
    earlier = project.stages.get(kind=StageKind.TRIAL)
    workers = list({j.worker for j in earlier.judgments.all()})
    for n in range(10):
        gold = _item(project, "s1", "s2", 500 + n)
        gold.is_gold_check = True
        gold.gold = {"choice": "B"}
        gold.save(update_fields=["is_gold_check", "gold"])
        for worker in workers:
            make_judgment(item=gold, stage=earlier, worker=worker, choice="B")
    after = stage_draw_adaptive_pairs(stage=draft, budget=20)
    assert after.votes_so_far == before.votes_so_far == 120
    board = project_report(project=project)["leaderboard"]["overall"]
    assert board["model"]["n_votes"] == after.votes_so_far
    again = dict(RoutingDraw.objects.filter(stage=draft).values_list("item_id", "probability"))
    assert again == pytest.approx(probabilities)


def test_guards(arena):
    project, draft = arena
    with pytest.raises(StageError, match="pairing budget"):
        stage_draw_adaptive_pairs(stage=draft, budget=0)
    draft.status = StageStatus.PUBLISHED
    draft.save(update_fields=["status"])
    with pytest.raises(StageError, match="fixed once it is published"):
        stage_draw_adaptive_pairs(stage=draft, budget=5)
    likert = make_stage(make_project(TaskKind.LIKERT, slug="lik"), status=StageStatus.DRAFT)
    with pytest.raises(StageError, match="A/B items"):
        stage_draw_adaptive_pairs(stage=likert, budget=5)


def test_route_stage_command_pairs_ab_stages(arena):
    project, draft = arena
    out = io.StringIO()
    call_command("route_stage", project.slug, "next", "--budget", "10", stdout=out)
    assert "paired adaptively on 120 earlier votes" in out.getvalue()


def test_without_judgments_every_pair_gets_the_same_share():
    project = make_project(TaskKind.AB, slug="fresh")
    draft = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT)
    draft.items.set([_item(project, *PAIRS[n % 3], n) for n in range(30)])
    stage_draw_adaptive_pairs(stage=draft, budget=15)
    probabilities = RoutingDraw.objects.filter(stage=draft).values_list("probability", flat=True)
    assert list(probabilities) == pytest.approx([0.5] * 30)


def test_stage_admin_action_draws_and_reports(client, arena):
    from django.urls import reverse

    from testing.factories import make_user

    project, draft = arena
    draft.settings = {"pairing": "adaptive", "pairing_budget": 12}
    draft.save(update_fields=["settings"])
    client.force_login(make_user("root", superuser=True))
    response = client.post(reverse("admin:annotation_stage_changelist"),
                           {"action": "draw_adaptive_pairs", "_selected_action": [draft.pk]},
                           follow=True)
    assert response.status_code == 200
    assert "paired adaptively on 120 earlier votes" in response.content.decode()
    assert RoutingDraw.objects.filter(stage=draft).count() == 60


@pytest.mark.reliability
def test_more_systems_than_the_leaderboard_ranks_are_refused_by_the_pairing_too(arena):
    """The leaderboard refuses more than `MAX_SYSTEMS` systems (a `system` naming the item);
    adaptive pairing fitted them anyway, its design growing with the square of the pairs (a
    few thousand exhausted the server's memory). Both doors now read one cap."""
    from metrics_app.domain.leaderboard import MAX_SYSTEMS

    project, draft = arena
    many = [_item(project, f"m{n}", f"m{n + 1}", 500 + n) for n in range(MAX_SYSTEMS)]
    draft.items.add(*many)
    with pytest.raises(StageError, match=f"{MAX_SYSTEMS + 4} systems: at most {MAX_SYSTEMS}"):
        stage_draw_adaptive_pairs(stage=draft, budget=10)
    assert not RoutingDraw.objects.filter(stage=draft).exists()
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(Exception, match=f"at most {MAX_SYSTEMS}"):
        call_command("route_stage", project.slug, "next", "--budget", "10", stdout=out,
                     stderr=err)
